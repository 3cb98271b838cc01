//! Locks over several locks: [`MultiLock`] (all of them) and [`RedLock`] (a majority of
//! independent masters). Both take their members in rounds that never wait while holding:
//! each round tries every member without waiting; a round that falls short releases what it
//! took and then waits on one busy member only, so two multi-locks over the same locks in
//! different orders cannot deadlock.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::lock::{Lock, LockGuard};
use crate::time::{check_duration, MAX_DURATION};

/// The members, how many must be held, and how long one member's call may take.
#[derive(Clone)]
struct Members {
    locks: Vec<Lock>,
    quorum: usize,
    node_timeout: Option<Duration>,
}

/// One round's holds and failures, by member index.
struct Round {
    holds: Vec<Option<LockGuard>>,
    failures: Vec<(usize, Error)>,
    busy: Option<usize>,
    busy_count: usize,
}

/// How many rounds in a row may reach the quorum too late (validity gone) before a wait
/// without deadline gives up: the lease is then too short for the nodes' latency.
const STALE_ROUNDS: u32 = 3;

impl Members {
    fn new(locks: Vec<Lock>, quorum: impl Fn(usize) -> usize) -> Result<Members> {
        if locks.is_empty() {
            return Err(Error::invalid("a multi-lock needs at least one lock"));
        }
        let quorum = quorum(locks.len());
        Ok(Members {
            locks,
            quorum,
            node_timeout: None,
        })
    }

    /// Bounds every call of every member (connecting, and each reply) by `timeout`: each
    /// member becomes its lock bounded so (see `Lock::bounded`), guards and releases included.
    fn bound(&mut self, timeout: Duration) {
        self.node_timeout = Some(timeout);
        for lock in &mut self.locks {
            *lock = lock.bounded(timeout);
        }
    }

    fn label(&self, i: usize) -> String {
        format!("#{i} `{}`", self.locks[i].key())
    }

    fn check(&self, deadline: Option<Instant>) -> Result<()> {
        if deadline.is_some_and(|d| d.saturating_duration_since(Instant::now()) > MAX_DURATION) {
            return Err(Error::invalid("deadline is more than one year away"));
        }
        Ok(())
    }

    /// Blocks until the quorum is held.
    fn lock(&self) -> Result<MultiLockGuard> {
        match self.acquire(None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("a wait without deadline only ends in a guard"),
        }
    }

    /// Waits at most `wait` in all.
    fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        check_duration("wait", wait)?;
        self.acquire(Some(Instant::now() + wait))
    }

    /// The one acquire path (see the module docs); `deadline` `None` waits forever.
    fn acquire(&self, deadline: Option<Instant>) -> Result<Option<MultiLockGuard>> {
        self.check(deadline)?;
        let n = self.locks.len();
        let mut wait_on: Option<usize> = None;
        let mut stale_rounds = 0;
        loop {
            let mut round = Round {
                holds: (0..n).map(|_| None).collect(),
                failures: Vec::new(),
                busy: None,
                busy_count: 0,
            };
            if let Some(i) = wait_on.take() {
                let lock = &self.locks[i];
                let waited = match deadline {
                    None => lock.lock().map(Some),
                    Some(d) => lock.try_lock_until(d),
                };
                match waited {
                    Ok(Some(guard)) => round.holds[i] = Some(guard),
                    Ok(None) => return Ok(None),
                    // Not a node's failure: the caller asked to stop (nothing is held yet).
                    Err(e) if e.is_interrupted() => return Err(e),
                    Err(e) => round.failures.push((i, e)),
                }
            }
            for i in 0..n {
                if round.failures.len() + round.busy_count > n - self.quorum {
                    break; // the quorum is out of reach this round
                }
                if round.holds[i].is_some() || round.failures.iter().any(|(j, _)| *j == i) {
                    continue;
                }
                match self.locks[i].try_lock() {
                    Ok(Some(guard)) => round.holds[i] = Some(guard),
                    Ok(None) => {
                        round.busy.get_or_insert(i);
                        round.busy_count += 1;
                    }
                    Err(e) => round.failures.push((i, e)),
                }
            }
            let acquired = round.holds.iter().flatten().count();
            if acquired >= self.quorum {
                let guard = MultiLockGuard {
                    holds: round.holds,
                    quorum: self.quorum,
                    released: false,
                };
                if guard.validity() > Duration::ZERO {
                    return Ok(Some(guard));
                }
                log::debug!(
                    "multi-lock {}: quorum reached after the leases' validity ran out; retrying",
                    self.label(0)
                );
                drop(guard); // releases every hold, logging failures
                stale_rounds += 1;
                let out_of_time =
                    deadline.map_or(stale_rounds >= STALE_ROUNDS, |d| Instant::now() >= d);
                if out_of_time {
                    return Err(Error::Timeout(format!(
                        "multi-lock {}: the quorum was reached only after the leases' validity \
                         ran out ({stale_rounds} times): the lease is too short for the \
                         nodes' latency",
                        self.label(0)
                    )));
                }
                continue;
            }
            stale_rounds = 0;
            self.release_round(&mut round);
            if round.failures.len() > n - self.quorum {
                return Err(self.too_many_failures(acquired, round.failures));
            }
            // Short of the quorum and within the failures it tolerates: some member was busy.
            let Some(busy) = round.busy else {
                return Err(self.too_many_failures(acquired, round.failures));
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            wait_on = Some(busy);
        }
    }

    /// Releases what a round that fell short took. A member whose attempt failed is left
    /// alone: if its acquire ran before the reply was lost, that hold expires with its lease
    /// (nothing renews it), and an unlock without a guard could release another hold of this
    /// thread instead.
    fn release_round(&self, round: &mut Round) {
        for (i, hold) in round.holds.iter_mut().enumerate() {
            if let Some(guard) = hold.take() {
                if let Err(e) = guard.unlock() {
                    log::debug!(
                        "releasing {} after a short round failed: {e}",
                        self.label(i)
                    );
                }
            }
        }
    }

    fn too_many_failures(&self, acquired: usize, failures: Vec<(usize, Error)>) -> Error {
        if self.quorum == self.locks.len() {
            // A MultiLock: every member is needed, so the first failure is the answer.
            if let Some((_, e)) = failures.into_iter().next() {
                return e;
            }
            unreachable!("too many failures means at least one");
        }
        Error::NoQuorum {
            name: self.locks[0].key().to_owned(),
            acquired,
            wanted: self.quorum,
            nodes: self.locks.len(),
            failures: failures
                .into_iter()
                .map(|(i, e)| (self.label(i), e))
                .collect(),
        }
    }
}

/// Several locks held as one: all of them or none.
///
/// The locks may come from different clients and servers, and be of any kind (plain, fair,
/// fenced, a side of a read-write lock). [`lock`](Self::lock) and the `try_` methods take all
/// of them within one wait budget, or none: a member that is busy makes the call release what
/// it took and wait for that member alone, so it never waits while holding and two
/// multi-locks over the same locks in different orders cannot deadlock.
///
/// Unlike Redisson's `RedissonMultiLock`, which stops at the first failed unlock, releasing a
/// [`MultiLockGuard`] tries every lock and reports all failures together.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let orders = redlatch::Client::open("redis://10.0.0.1/")?;
/// let stock = redlatch::Client::open("redis://10.0.0.2/")?;
/// let both = redlatch::MultiLock::new([orders.lock("order:7"), stock.lock("sku:42")])?;
/// let guard = both.lock()?; // holds both
/// guard.unlock()?; // releases both, or says which failed
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    members: Members,
}

impl MultiLock {
    /// A multi-lock over `locks` (at least one), each with its own lease setting.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no locks.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let pair = redlatch::MultiLock::new([client.lock("a"), client.fair_lock("b")])?;
    /// # Ok(()) }
    /// ```
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock> {
        Ok(MultiLock {
            members: Members::new(locks.into_iter().collect(), |n| n)?,
        })
    }

    /// Gives every member the explicit `lease` ([`Lock::with_lease`]) instead of the
    /// watchdog.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let pair = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?
    ///     .with_lease(Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Duration) -> MultiLock {
        self.members.locks = leased(self.members.locks, lease);
        self
    }

    /// Gives every member the maximum hold time `max_hold` ([`Lock::with_max_hold`]): each
    /// member's hold is renewed no further than that, and the guard then turns lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let pair = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?
    ///     .with_max_hold(Duration::from_secs(600));
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(mut self, max_hold: Duration) -> MultiLock {
        self.members.locks = capped(self.members.locks, max_hold);
        self
    }

    /// The member locks, in the order given.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let both = redlatch::MultiLock::new([client.lock("a"), client.lock("b")]).unwrap();
    /// assert_eq!(both.locks()[1].name(), "b");
    /// ```
    pub fn locks(&self) -> &[Lock] {
        &self.members.locks
    }

    /// Takes every lock, blocking until all are held at once.
    ///
    /// # Errors
    ///
    /// The first member's error (after releasing what was taken): see [`Lock::lock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<MultiLockGuard> {
        self.members.lock()
    }

    /// Takes every lock if all are free now; `Ok(None)` (holding none) otherwise.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let pair = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?;
    /// if let Some(guard) = pair.try_lock()? { /* both held */ }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        self.members.acquire(Some(Instant::now()))
    }

    /// Takes every lock, waiting at most `wait` in all; `Ok(None)` (holding none) if the wait
    /// ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait or one over a year; otherwise as
    /// [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let pair = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?;
    /// let guard = pair.try_lock_for(Duration::from_secs(2))?;
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.members.try_lock_for(wait)
    }

    /// Takes every lock, waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let pair = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?;
    /// let guard = pair.try_lock_until(Instant::now() + Duration::from_secs(2))?;
    /// # Ok(()) }
    /// ```
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiLockGuard>> {
        self.members.acquire(Some(deadline))
    }
}

/// A lock over N independent Redis masters that is held when a majority of them grant it:
/// the Redlock algorithm.
///
/// **Consider something else first.** Redisson deprecated its `RedissonRedLock`, and so do
/// we in spirit: Redlock's safety rests on bounded clock drift, bounded process pauses and
/// bounded network delay, none of which a lease-based lock can check; a holder paused past
/// its validity can still write after another node majority granted the lock to somebody
/// else (Martin Kleppmann's "How to do distributed locking"). It also costs N round trips per
/// acquire and N servers to run. What we recommend instead: one Redis master with replicas,
/// [`sync_replicas`](crate::ConfigBuilder::sync_replicas) so an acquire is on a replica
/// before it counts (a failover keeps it), and a [fenced lock](crate::Client::fenced_lock)
/// with a [`FencedResource`](crate::FencedResource) (or your own token check) so that a
/// stale holder's writes are refused. That pair is safe under pauses, where Redlock is not.
///
/// Taking it: each round sends one non-waiting acquire to every node in turn, each call
/// bounded by the node timeout (so a dead or paused node costs at most that); the lock is held
/// when a majority granted it and its validity, `lease - elapsed - (lease / 100 + 2 ms)`
/// measured on the monotonic clock from each node's acquire, is still positive. A round that
/// falls short releases every hold it took (one whose reply was lost expires with its lease,
/// unrenewed: an unlock without a guard could release another hold of this thread), then waits on one busy
/// node before the next round. Too many failed nodes give [`Error::NoQuorum`].
///
/// With the default lease the watchdog renews every node's hold; the guard counts as lost
/// once fewer than a majority of holds are live.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let nodes: Vec<redlatch::Client> = (6379..6384)
///     .map(|port| redlatch::Client::open(format!("redis://10.0.0.{}/", port - 6378).as_str()))
///     .collect::<redlatch::Result<_>>()?;
/// let lock = redlatch::RedLock::new(nodes.iter().map(|c| c.lock("payouts")))?;
/// let guard = lock.lock()?; // held on at least 3 of the 5
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedLock {
    members: Members,
}

impl RedLock {
    /// The node timeout used unless [`with_node_timeout`](Self::with_node_timeout) says
    /// otherwise: 200 ms.
    pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(200);

    /// A RedLock over `locks`, one per independent master (usually the same name on
    /// clients of 5 masters). A majority (`n / 2 + 1`) must grant it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no locks.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let (a, b, c) = (redlatch::Client::open("redis://a/")?, redlatch::Client::open("redis://b/")?, redlatch::Client::open("redis://c/")?);
    /// let lock = redlatch::RedLock::new([a.lock("x"), b.lock("x"), c.lock("x")])?;
    /// # Ok(()) }
    /// ```
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<RedLock> {
        let mut members = Members::new(locks.into_iter().collect(), |n| n / 2 + 1)?;
        members.bound(Self::DEFAULT_NODE_TIMEOUT);
        Ok(RedLock { members })
    }

    /// Bounds each call to one node (connecting, and each reply) by `timeout`, where that is
    /// shorter than the node's client's own timeouts. Defaults to 200 ms
    /// ([`DEFAULT_NODE_TIMEOUT`](Self::DEFAULT_NODE_TIMEOUT)). Keep it well below the lease.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero timeout or one over a year.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let (a, b, c) = (redlatch::Client::open("redis://a/")?, redlatch::Client::open("redis://b/")?, redlatch::Client::open("redis://c/")?);
    /// let lock = redlatch::RedLock::new([a.lock("x"), b.lock("x"), c.lock("x")])?
    ///     .with_node_timeout(Duration::from_millis(50))?;
    /// # Ok(()) }
    /// ```
    pub fn with_node_timeout(mut self, timeout: Duration) -> Result<RedLock> {
        check_duration("node timeout", timeout)?;
        self.members.bound(timeout);
        Ok(self)
    }

    /// Gives every node's lock the explicit `lease` instead of the watchdog; the validity of
    /// a hold is then at most this lease.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let (a, b, c) = (redlatch::Client::open("redis://a/")?, redlatch::Client::open("redis://b/")?, redlatch::Client::open("redis://c/")?);
    /// let lock = redlatch::RedLock::new([a.lock("x"), b.lock("x"), c.lock("x")])?
    ///     .with_lease(Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Duration) -> RedLock {
        self.members.locks = leased(self.members.locks, lease);
        self
    }

    /// Gives every node's lock the maximum hold time `max_hold` ([`Lock::with_max_hold`]):
    /// each node's hold is renewed no further than that, and the guard then turns lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let (a, b, c) = (redlatch::Client::open("redis://a/")?, redlatch::Client::open("redis://b/")?, redlatch::Client::open("redis://c/")?);
    /// let lock = redlatch::RedLock::new([a.lock("x"), b.lock("x"), c.lock("x")])?
    ///     .with_max_hold(Duration::from_secs(600));
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(mut self, max_hold: Duration) -> RedLock {
        self.members.locks = capped(self.members.locks, max_hold);
        self
    }

    /// How many nodes must grant the lock: `n / 2 + 1`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let nodes: Vec<redlatch::Client> = (1..=5)
    /// #     .map(|i| redlatch::Client::open(&format!("redis://10.0.0.{i}/")).unwrap())
    /// #     .collect();
    /// let redlock = redlatch::RedLock::new(nodes.iter().map(|c| c.lock("payouts"))).unwrap();
    /// assert_eq!(redlock.quorum(), 3);
    /// assert_eq!(redlock.locks().len(), 5);
    /// ```
    pub fn quorum(&self) -> usize {
        self.members.quorum
    }

    /// The member locks, one per node, in the order given (see [`quorum`](Self::quorum)
    /// for an example).
    pub fn locks(&self) -> &[Lock] {
        &self.members.locks
    }

    /// Takes the lock on a majority of nodes, blocking until it is held.
    ///
    /// # Errors
    ///
    /// [`Error::NoQuorum`] when too many nodes fail (not when they are busy: then it waits);
    /// [`Error::Timeout`] when even a majority reached at once has no validity left (the
    /// lease is too short for the nodes' latency); [`Error::InvalidArgument`] as
    /// [`Lock::lock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let (a, b, c) = (redlatch::Client::open("redis://a/")?, redlatch::Client::open("redis://b/")?, redlatch::Client::open("redis://c/")?);
    /// let guard = redlatch::RedLock::new([a.lock("x"), b.lock("x"), c.lock("x")])?.lock()?;
    /// println!("valid for {:?}", guard.validity());
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<MultiLockGuard> {
        self.members.lock()
    }

    /// One round: takes the lock if a majority of nodes grant it now; `Ok(None)` (holding
    /// nothing) if too many are busy.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let nodes: Vec<redlatch::Client> = (1..=3)
    /// #     .map(|i| redlatch::Client::open(&format!("redis://10.0.0.{i}/")).unwrap())
    /// #     .collect();
    /// let redlock = redlatch::RedLock::new(nodes.iter().map(|c| c.lock("payouts"))).unwrap();
    /// match redlock.try_lock().unwrap() {
    ///     Some(guard) => drop(guard),
    ///     None => println!("held elsewhere"),
    /// }
    /// ```
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
        self.members.acquire(Some(Instant::now()))
    }

    /// Takes the lock on a majority of nodes, waiting at most `wait` in all.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait or one over a year; otherwise as
    /// [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let nodes: Vec<redlatch::Client> = (1..=3)
    /// #     .map(|i| redlatch::Client::open(&format!("redis://10.0.0.{i}/")).unwrap())
    /// #     .collect();
    /// let redlock = redlatch::RedLock::new(nodes.iter().map(|c| c.lock("payouts"))).unwrap();
    /// if let Some(guard) = redlock.try_lock_for(std::time::Duration::from_secs(2)).unwrap() {
    ///     println!("valid for {:?}", guard.validity());
    /// }
    /// ```
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.members.try_lock_for(wait)
    }

    /// Takes the lock on a majority of nodes, waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let nodes: Vec<redlatch::Client> = (1..=3)
    /// #     .map(|i| redlatch::Client::open(&format!("redis://10.0.0.{i}/")).unwrap())
    /// #     .collect();
    /// let redlock = redlatch::RedLock::new(nodes.iter().map(|c| c.lock("payouts"))).unwrap();
    /// let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    /// let guard = redlock.try_lock_until(deadline).unwrap();
    /// ```
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiLockGuard>> {
        self.members.acquire(Some(deadline))
    }
}

fn leased(locks: Vec<Lock>, lease: Duration) -> Vec<Lock> {
    locks.into_iter().map(|l| l.with_lease(lease)).collect()
}

fn capped(locks: Vec<Lock>, max_hold: Duration) -> Vec<Lock> {
    locks
        .into_iter()
        .map(|l| l.with_max_hold(max_hold))
        .collect()
}

/// The holds of a [`MultiLock`] or [`RedLock`]; dropping it releases every one.
///
/// Not `Send`, as [`LockGuard`]. Dropping logs release failures; [`unlock`](Self::unlock)
/// reports them.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let (a, b) = (redlatch::Client::open("redis://10.0.0.1/")?, redlatch::Client::open("redis://10.0.0.2/")?);
/// let guard = redlatch::MultiLock::new([a.lock("order:7"), b.lock("sku:42")])?.lock()?;
/// assert_eq!(guard.held(), 2);
/// guard.unlock()?; // reports every member that failed to release
/// # Ok(()) }
/// ```
#[must_use = "if unused the locks are released immediately"]
#[clippy::has_significant_drop]
pub struct MultiLockGuard {
    /// Member index → its hold (a RedLock holds only some).
    holds: Vec<Option<LockGuard>>,
    quorum: usize,
    released: bool,
}

impl MultiLockGuard {
    /// How many member locks this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// assert_eq!(guard.held(), 2);
    /// # Ok(()) }
    /// ```
    pub fn held(&self) -> usize {
        self.holds.iter().flatten().count()
    }

    /// The hold of member `index` (in the order the locks were given), if this guard has it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.fenced_lock("a"), client.lock("b")])?.lock()?;
    /// let token = guard.member(0).and_then(|g| g.token());
    /// # Ok(()) }
    /// ```
    pub fn member(&self, index: usize) -> Option<&LockGuard> {
        self.holds.get(index).and_then(Option::as_ref)
    }

    /// Whether the guard no longer holds what it needs: fewer live holds than all its locks
    /// (a [`MultiLock`]) or than a majority (a [`RedLock`]). See [`LockGuard::is_lost`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// if guard.is_lost() { /* do not commit */ }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.holds.iter().flatten().filter(|g| !g.is_lost()).count() < self.quorum
    }

    /// How much longer the guard is known to hold what it needs, by the lease of each live
    /// hold minus the clock drift allowance (`lease / 100 + 2 ms`); zero once lost. Watchdog
    /// renewals extend it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?
    ///     .with_lease(Duration::from_secs(5))
    ///     .lock()?;
    /// assert!(guard.validity() < Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        let mut ends: Vec<Instant> = self
            .holds
            .iter()
            .flatten()
            .filter(|g| !g.is_lost())
            .map(|g| {
                let lease = g.lock().lease_or_default();
                g.lease_expires() - (lease / 100 + Duration::from_millis(2)).min(lease)
            })
            .collect();
        if ends.len() < self.quorum {
            return Duration::ZERO;
        }
        // Held while at least `quorum` holds are: until the quorum-th latest end.
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends[self.quorum - 1].saturating_duration_since(Instant::now())
    }

    /// Releases every hold, and reports every failure.
    ///
    /// # Errors
    ///
    /// [`Error::PartialUnlock`] naming each lock whose release failed (the others are
    /// released all the same).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// if let Err(e) = guard.unlock() {
    ///     eprintln!("some locks stay until their lease ends: {e}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        self.released = true;
        let total = self.held();
        let mut failures = Vec::new();
        for (i, hold) in self.holds.iter_mut().enumerate() {
            if let Some(guard) = hold.take() {
                let name = guard.lock().key().to_owned();
                // A RedLock member's guard is of a bounded lock: its release is bounded too.
                let released = guard.unlock();
                if let Err(e) = released {
                    failures.push((format!("#{i} `{name}`"), e));
                }
            }
        }
        if failures.is_empty() {
            return Ok(());
        }
        Err(Error::PartialUnlock {
            released: total - failures.len(),
            total,
            failures,
        })
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.release() {
                log::warn!("releasing a multi-lock: {e}");
            }
        }
    }
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("holds", &self.holds)
            .field("quorum", &self.quorum)
            .finish()
    }
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("locks", &self.members.locks)
            .finish()
    }
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLock")
            .field("locks", &self.members.locks)
            .field("quorum", &self.members.quorum)
            .field("node_timeout", &self.members.node_timeout)
            .finish()
    }
}
