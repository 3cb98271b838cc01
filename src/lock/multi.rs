//! Locks over several locks: [`MultiLock`] (all of them) and [`RedLock`] (a majority of
//! independent masters), two faces of one algorithm (`quorum.rs`) with one guard
//! (`multi_guard.rs`).

use std::time::{Duration, Instant};

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::lock::handle::Lock;
use crate::lock::multi_guard::MultiLockGuard;
use crate::lock::quorum::Members;
use crate::time::check_duration;

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
/// falls short releases every hold it took, then waits on one busy node for a slice of the
/// time left (the time left over the number of nodes, as Redisson's RedLock; 1.5 s for
/// [`lock`](Self::lock)) before the next round. A node whose reply was lost or came after the
/// node timeout may have granted it: that hold is settled as any lost reply is (read back
/// once the node answers, and released if no guard of this thread holds it), on the
/// watchdog thread or before this thread's next call on that node. Too many failed nodes
/// give [`Error::NoQuorum`].
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
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(redlatch::RedLock::DEFAULT_NODE_TIMEOUT, Duration::from_millis(200));
    /// ```
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
}

/// The methods [`MultiLock`] and [`RedLock`] share, written once for both: each hands its
/// call to the shared [`Members`]. `$taking` says what a call takes ("every lock", "the lock
/// on a majority of nodes"), `$errors` what `lock` fails with, `$setup` the lines of a doc
/// example that make `lock` (hidden lines start with `#`).
macro_rules! shared_methods {
    ($ty:ident, taking: $taking:literal, errors: $errors:literal, setup: $setup:literal) => {
        impl $ty {
            /// Gives every member lock the explicit `lease` ([`Lock::with_lease`]) instead of
            /// the watchdog; a hold's validity is then at most this lease.
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n# use std::time::Duration;\n", $setup,
                "let lock = lock.with_lease(Duration::from_secs(10));\n# Ok(()) }\n```")]
            pub fn with_lease(mut self, lease: Duration) -> $ty {
                self.members.with_lease(lease);
                self
            }

            /// Gives every member lock the maximum hold time `max_hold`
            /// ([`Lock::with_max_hold`]): each member's hold is renewed no further than that,
            /// and the guard then turns lost.
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n# use std::time::Duration;\n", $setup,
                "let lock = lock.with_max_hold(Duration::from_secs(600));\n# Ok(()) }\n```")]
            pub fn with_max_hold(mut self, max_hold: Duration) -> $ty {
                self.members.with_max_hold(max_hold);
                self
            }

            /// The member locks, in the order given.
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n", $setup,
                "assert!(!lock.locks().is_empty());\n# Ok(()) }\n```")]
            pub fn locks(&self) -> &[Lock] {
                &self.members.locks
            }

            #[doc = concat!("Takes ", $taking, ", blocking until it is held.")]
            ///
            /// # Errors
            ///
            #[doc = $errors]
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n", $setup,
                "let guard = lock.lock()?;\nprintln!(\"valid for {:?}\", guard.validity());\n# Ok(()) }\n```")]
            pub fn lock(&self) -> Result<MultiLockGuard> {
                self.members.lock()
            }

            #[doc = concat!("One round: takes ", $taking, " if it can be had now; `Ok(None)` ",
                "(holding nothing) otherwise.")]
            ///
            /// # Errors
            ///
            /// As [`lock`](Self::lock).
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n", $setup,
                "match lock.try_lock()? {\n    Some(guard) => drop(guard),\n    None => println!(\"held elsewhere\"),\n}\n# Ok(()) }\n```")]
            pub fn try_lock(&self) -> Result<Option<MultiLockGuard>> {
                self.members.acquire(Some(Instant::now()))
            }

            #[doc = concat!("Takes ", $taking, ", waiting at most `wait` in all; `Ok(None)` ",
                "(holding nothing) if the wait ran out.")]
            ///
            /// # Errors
            ///
            /// [`Error::InvalidArgument`] for a wait over a year (a zero wait is one try); otherwise as
            /// [`lock`](Self::lock).
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n# use std::time::Duration;\n", $setup,
                "if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {\n    println!(\"valid for {:?}\", guard.validity());\n}\n# Ok(()) }\n```")]
            pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
                self.members.try_lock_for(wait)
            }

            #[doc = concat!("Takes ", $taking, ", waiting at most until `deadline`.")]
            ///
            /// # Errors
            ///
            /// As [`try_lock_for`](Self::try_lock_for).
            ///
            /// # Examples
            ///
            #[doc = concat!("```no_run\n# use std::time::{Duration, Instant};\n", $setup,
                "let guard = lock.try_lock_until(Instant::now() + Duration::from_secs(2))?;\n# Ok(()) }\n```")]
            pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiLockGuard>> {
                self.members.acquire(Some(deadline))
            }
        }
    };
}

shared_methods!(
    MultiLock,
    taking: "every lock",
    errors: "The first member's error (after releasing what was taken): see [`Lock::lock`].",
    setup: "# fn main() -> redlatch::Result<()> {\n# let client = redlatch::Client::open(\"redis://127.0.0.1/\")?;\nlet lock = redlatch::MultiLock::new([client.lock(\"a\"), client.lock(\"b\")])?;\n"
);

shared_methods!(
    RedLock,
    taking: "the lock on a majority of nodes",
    errors: "[`Error::NoQuorum`] when too many nodes fail (not when they are busy: then it \
        waits); [`Error::Timeout`] when even a majority reached at once has no validity left \
        (the lease is too short for the nodes' latency); [`Error::InvalidArgument`] as \
        [`Lock::lock`].",
    setup: "# fn main() -> redlatch::Result<()> {\n# let (a, b, c) = (redlatch::Client::open(\"redis://a/\")?, redlatch::Client::open(\"redis://b/\")?, redlatch::Client::open(\"redis://c/\")?);\nlet lock = redlatch::RedLock::new([a.lock(\"x\"), b.lock(\"x\"), c.lock(\"x\")])?;\n"
);

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
