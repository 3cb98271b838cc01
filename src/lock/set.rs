//! [`LockSet`]: many independent plain locks taken all or none under one deadline, by one
//! script call per hash slot (and chunk), released the same way by its guard (`set_guard.rs`).

use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::client::Client;
use crate::deadlock::{Checks, Mode};
use crate::error::{Error, Result};
use crate::hold::HoldEvent;
use crate::keys;
use crate::lock::guard::{thread_holds_any, LockGuard};
use crate::lock::handle::Lock;
use crate::lock::owner::Ownership;
use crate::lock::set_guard::{unlock_group, LockSetGuard, SetGroup, LABEL};
use crate::order;
use crate::pubsub::{wait, Channel, Tried};
use crate::scripts;
use crate::time::check_wait;

/// Names per script call: a huge slot group is taken in chunks of this many (each name is 2
/// keys of the acquire and 3 of the release), so that no call blocks the server long.
const CHUNK: usize = 3_000;

/// Many independent locks, taken all or none: [`Client::lock_set`](crate::Client::lock_set).
///
/// Each name is an ordinary plain lock ([`Client::lock`](crate::Client::lock), Redisson's
/// `RLock`): a hash `name` with this thread's owner field and a lease that the watchdog
/// renews, released with `0` on `redisson_lock__channel:{name}`. A Java peer's
/// `getLock(name)` sees it held, and a lone `lock()` on one of the names waits for it and is
/// woken by the set's release.
///
/// Unlike a [`MultiLock`](crate::MultiLock), which takes its members one call each, a set
/// sends one script per server and hash slot (names sharing a hash tag go in one call; a
/// very large group is cut in chunks of 3,000 names): 10,000 names on one server take a few
/// calls. Each call takes its names all or none; the calls go in a fixed order (by slot),
/// and when a later one finds a name held by another owner, the earlier ones are released
/// before the set waits, on that name's channel, bounded by its lease and the deadline. So
/// the set never waits while holding a part, and returns nothing held when the deadline
/// passes. A name this thread holds already is re-entered (its count goes up, and down again
/// on release). A name given twice counts once.
///
/// **Fairness.** A plain lock has no queue: a set that releases and retakes its names in a
/// loop would usually win every race against a lone waiter, which needs a round trip from the
/// release's message to its acquire. So the release script looks at what its `PUBLISH`
/// returns: when the message reached a subscriber (somebody waits on that name), it sets
/// `redlatch_lockset_yield:{name}` to this owner for 100 ms, and this owner's set acquires
/// treat the name as busy meanwhile (they wait on its channel for the waiter's release, or
/// for the 100 ms). Other owners and plain locks ignore the key. On a cluster whose
/// releases use classic `PUBLISH`, a waiter subscribed to another node is not counted, and
/// gets no such turn.
///
/// A reply lost on the way (the connection broke) leaves the names of its call in doubt: the
/// watchdog gives back what that call took once the server answers again, as for a lone
/// acquire.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let names: Vec<String> = (0..10_000).map(|i| format!("account:{i}")).collect();
/// let guard = client.lock_set(&names).lock()?; // all 10,000, or waits
/// assert_eq!(guard.held(), 10_000);
/// guard.unlock()?; // one call per slot group
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockSet {
    client: Client,
    locks: Vec<Lock>,
}

impl std::fmt::Debug for LockSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockSet")
            .field("locks", &self.locks.len())
            .finish()
    }
}

/// What one attempt over every group found.
enum Attempted {
    Taken(LockSetGuard),
    /// Nothing held: lock `index` is busy for `pttl` ms more (-1: no expiry).
    Busy {
        index: usize,
        pttl: i64,
    },
}

impl LockSet {
    /// The set of the plain locks `names` (duplicates dropped), on `client`.
    pub(crate) fn new(client: &Client, names: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut seen = std::collections::HashSet::new();
        let locks = names
            .into_iter()
            .map(|n| client.lock(n))
            .filter(|l| seen.insert(Arc::clone(&l.raw.key.name)))
            .collect();
        LockSet {
            client: client.clone(),
            locks,
        }
    }

    /// Gives every lock the explicit `lease` ([`Lock::with_lease`]) instead of the watchdog.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let set = client.lock_set(["a", "b"]).with_lease(Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Duration) -> LockSet {
        self.locks = self
            .locks
            .into_iter()
            .map(|l| l.with_lease(lease))
            .collect();
        self
    }

    /// The locks of the set, in the order given (without duplicates).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// assert_eq!(client.lock_set(["a", "b", "a"]).locks().len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    /// Takes every lock of the set, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty set or an empty name; a Redis or connection
    /// error (nothing of the set is then held by this call); [`Error::Interrupted`],
    /// [`Error::Closed`] as [`Lock::lock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b", "c"]).lock()?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn lock(&self) -> Result<LockSetGuard> {
        self.acquire(None)
            .map(|g| g.expect("a wait without a deadline ends taken"))
    }

    /// One attempt: takes every lock if none is held by another owner now; `Ok(None)`
    /// (holding nothing) otherwise.
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
    /// if let Some(guard) = client.lock_set(["a", "b"]).try_lock()? { drop(guard) }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_lock(&self) -> Result<Option<LockSetGuard>> {
        self.acquire(Some(Instant::now()))
    }

    /// Takes every lock, waiting at most `wait` in all; `Ok(None)` (holding nothing) if the
    /// wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year; otherwise as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b"]).try_lock_for(Duration::from_secs(2))?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockSetGuard>> {
        check_wait(wait)?;
        self.acquire(Some(Instant::now() + wait))
    }

    /// Takes every lock, waiting at most until `deadline`; `Ok(None)` (holding nothing) if it
    /// passed.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_secs(2);
    /// let guard = client.lock_set(["a", "b"]).try_lock_until(deadline)?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockSetGuard>> {
        self.acquire(Some(deadline))
    }

    #[track_caller]
    fn acquire(&self, deadline: Option<Instant>) -> Result<Option<LockSetGuard>> {
        if self.locks.is_empty() {
            return Err(Error::invalid("a lock set needs at least one name"));
        }
        for lock in &self.locks {
            lock.raw.check_name()?;
        }
        let owner = crate::lock::ThreadOwned.owner_id(&self.client);
        let groups = self.groups();
        let started = Instant::now();
        let dispatcher = &self.client.inner.pubsub;
        let mut report = Report {
            set: self,
            owner: &owner,
            started,
            at: Location::caller(),
            waits: deadline.is_none_or(|d| d > started),
            waited_on: Vec::new(),
        };
        let (mut got, mut busy) = match self.attempt(&groups, &owner)? {
            Attempted::Taken(guard) => return Ok(Some(report.taken(guard, false))),
            Attempted::Busy { index, .. } => (None, index),
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            if report.waits {
                report.waited_on.push(busy);
                report.gave_up(true, None);
            }
            return Ok(None);
        }
        loop {
            report.waiting(busy);
            let name = &self.locks[busy].raw.key.name;
            let channel = keys::lock_channel(name);
            // A thread that holds other locks while it waits for the set's busy one may be
            // in a cycle: its wait is checked as any lock's (the set itself holds nothing
            // while it waits).
            let mut checks = thread_holds_any()
                .then(|| Checks::new(&self.client, name, &owner, Mode::Exclusive, started));
            let mut next = None;
            let done = wait(dispatcher, Channel::lock(&channel), deadline, &mut || {
                if let Some(checks) = &mut checks {
                    checks.check()?;
                }
                let tried = match self.attempt(&groups, &owner)? {
                    Attempted::Taken(guard) => {
                        got = Some(guard);
                        return Ok(Tried::done());
                    }
                    Attempted::Busy { index, .. } if index != busy => {
                        next = Some(index);
                        return Ok(Tried::done());
                    }
                    Attempted::Busy { pttl, .. } => Tried::again(bound(pttl)),
                };
                Ok(match checks.as_ref().and_then(Checks::until_next) {
                    Some(next) => tried.within_at_most(next),
                    None => tried,
                })
            })
            .inspect_err(|e| report.gave_up(false, Some(e)))?;
            drop(checks);
            match (got.take(), next) {
                (Some(guard), _) => return Ok(Some(report.taken(guard, true))),
                (None, Some(index)) if done => busy = index,
                _ => {
                    report.gave_up(true, None);
                    return Ok(None);
                }
            }
        }
    }

    /// The locks' indices grouped by hash slot (in slot order), each group cut in chunks.
    fn groups(&self) -> Vec<Vec<usize>> {
        let backend = &self.client.inner.backend;
        let mut by_slot: Vec<(u16, usize)> = (0..self.locks.len())
            .map(|i| (backend.slot(&self.locks[i].raw.key.name), i))
            .collect();
        by_slot.sort_unstable();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut last = None;
        for (slot, i) in by_slot {
            match groups.last_mut() {
                Some(g) if last == Some(slot) && g.len() < CHUNK => g.push(i),
                _ => groups.push(vec![i]),
            }
            last = Some(slot);
        }
        groups
    }

    /// One attempt: every group in turn; at the first busy one, the groups taken are released.
    fn attempt(&self, groups: &[Vec<usize>], owner: &Arc<str>) -> Result<Attempted> {
        let lease = self.locks[0].lease_or_default();
        let mut taken: Vec<SetGroup> = Vec::with_capacity(groups.len());
        let mut sent_at = None;
        for group in groups {
            let sent = Instant::now();
            sent_at.get_or_insert(sent);
            match self.take_group(group, owner, lease) {
                Ok(Taken::All(counts)) => taken.push(SetGroup {
                    members: group.iter().copied().zip(counts).collect(),
                }),
                Ok(Taken::Busy { index, pttl }) => {
                    self.give_back(&taken, owner);
                    return Ok(Attempted::Busy { index, pttl });
                }
                Err(e) => {
                    self.give_back(&taken, owner);
                    return Err(e);
                }
            }
        }
        let sent_at = sent_at.unwrap_or_else(Instant::now);
        let mut holds: Vec<Option<LockGuard>> = (0..self.locks.len()).map(|_| None).collect();
        for group in &taken {
            for &(i, count) in &group.members {
                let lock = self.locks[i].clone();
                holds[i] = Some(LockGuard::new_as(
                    lock,
                    Arc::clone(owner),
                    sent_at,
                    count,
                    None,
                    LABEL,
                ));
            }
        }
        let holds = holds
            .into_iter()
            .map(|h| h.expect("every lock taken"))
            .collect();
        Ok(Attempted::Taken(LockSetGuard::new(holds, taken)))
    }

    /// The acquire of one group: all its names, or which one is busy.
    fn take_group(&self, group: &[usize], owner: &Arc<str>, lease: Duration) -> Result<Taken> {
        let mut call = scripts::LOCK_SET_ACQUIRE.prepare_invoke();
        for &i in group {
            let name = &self.locks[i].raw.key.name;
            call.key(&**name).key(keys::lock_set_yield(name));
        }
        call.arg(lease.as_millis() as u64).arg(&**owner);
        let first = &self.locks[group[0]].raw.key.name;
        let reply: Result<Value> = self.client.inner.backend.run(first, |c| call.invoke(c));
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                if e.breaks_connection() || e.is_interrupted_read() {
                    // The call may have run, or may run when the server answers again: what
                    // it took is given back then, name by name.
                    for &i in group {
                        self.locks[i].raw.doubt_acquire(owner, lease, false);
                    }
                }
                return Err(e);
            }
        };
        decode(&reply, group)
    }

    /// Releases groups taken by an attempt that failed further on.
    fn give_back(&self, taken: &[SetGroup], owner: &Arc<str>) {
        for group in taken {
            let names: Vec<Arc<str>> = group
                .members
                .iter()
                .map(|&(i, _)| Arc::clone(&self.locks[i].raw.key.name))
                .collect();
            let lease = self.locks[0].lease_or_default();
            if let Err(e) = unlock_group(&self.client, &names, owner, lease) {
                log::warn!(
                    "giving back {} lock(s) of a set (owner {owner}) failed: {e}; they stay \
                     until their lease ends",
                    names.len()
                );
            }
        }
    }
}

/// What one group's acquire found.
enum Taken {
    /// Each lock's hold count, in the group's order.
    All(Vec<u32>),
    Busy {
        index: usize,
        pttl: i64,
    },
}

/// How long a busy attempt waits at most before it tries again: the busy lock's PTTL.
fn bound(pttl: i64) -> Option<Duration> {
    match pttl {
        -1 => None,
        p if p > 0 => Some(Duration::from_millis(p as u64)),
        _ => Some(Duration::from_millis(1)),
    }
}

/// Decodes `lua/lock_set_acquire.lua`'s reply for `group`.
fn decode(reply: &Value, group: &[usize]) -> Result<Taken> {
    let bad = || Error::Protocol(format!("lock set acquire script replied {reply:?}"));
    let Value::Array(items) = reply else {
        return Err(bad());
    };
    let int = |v: &Value| match v {
        Value::Int(n) => Some(*n),
        _ => None,
    };
    match items.first().and_then(int) {
        Some(0) if items.len() == group.len() + 1 => {
            let counts = items[1..]
                .iter()
                .map(|v| {
                    int(v)
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|&n| n > 0)
                })
                .collect::<Option<Vec<u32>>>();
            counts.map(Taken::All).ok_or_else(bad)
        }
        Some(i) if i >= 1 && (i as usize) <= group.len() => Ok(Taken::Busy {
            index: group[i as usize - 1],
            pttl: items.get(1).and_then(int).ok_or_else(bad)?,
        }),
        _ => Err(bad()),
    }
}

/// What one acquire of a set reports as it goes: each lock's hold events (as kind
/// [`LABEL`]) and the set's one lock-order record.
struct Report<'a> {
    set: &'a LockSet,
    owner: &'a Arc<str>,
    started: Instant,
    at: &'static Location<'static>,
    /// Whether the call may wait (it has time left): only then is its order recorded.
    waits: bool,
    /// The locks whose wait began (each found busy in turn), oldest first.
    waited_on: Vec<usize>,
}

impl Report<'_> {
    /// The set was taken: every lock's acquire, and one order record for the set (it never
    /// waits holding some of its locks).
    fn taken(&self, guard: LockSetGuard, contended: bool) -> LockSetGuard {
        let (now, waited) = (Instant::now(), self.started.elapsed());
        for lock in &self.set.locks {
            let order = None;
            let event = HoldEvent::Acquired {
                waited,
                contended,
                order,
            };
            lock.raw.emit_as(LABEL, self.owner, now, event);
        }
        let names: Vec<Arc<str>> = self
            .set
            .locks
            .iter()
            .map(|l| l.raw.key.name.clone())
            .collect();
        order::took(
            &self.set.client,
            self.owner,
            &names,
            false,
            self.waits,
            self.at,
        );
        guard
    }

    /// The set waits for lock `busy`: its wait begins unless it began already.
    fn waiting(&mut self, busy: usize) {
        if !self.waited_on.contains(&busy) {
            self.waited_on.push(busy);
            let event = HoldEvent::Waiting;
            self.set.locks[busy]
                .raw
                .emit_as(LABEL, self.owner, Instant::now(), event);
        }
    }

    /// The wait ends without the set: it ran out (`timed_out`), or failed with `error`. The
    /// last lock found busy takes the outcome (and the timeout, in the metrics); the waits
    /// for those before it end as given up.
    fn gave_up(&self, timed_out: bool, error: Option<&Error>) {
        let (waited, now) = (self.started.elapsed(), Instant::now());
        let Some((&last, before)) = self.waited_on.split_last() else {
            return;
        };
        for &i in before {
            let event = HoldEvent::GaveUp {
                waited,
                timed_out: false,
            };
            self.set.locks[i].raw.emit_as(LABEL, self.owner, now, event);
        }
        let event = match error {
            Some(Error::Deadlock { .. }) => HoldEvent::Deadlock { waited },
            _ => HoldEvent::GaveUp { waited, timed_out },
        };
        self.set.locks[last]
            .raw
            .emit_as(LABEL, self.owner, now, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_replies_decode_by_shape() {
        let group = [4, 7];
        let all = Value::Array(vec![Value::Int(0), Value::Int(1), Value::Int(3)]);
        assert!(matches!(decode(&all, &group), Ok(Taken::All(c)) if c == [1, 3]));
        let busy = Value::Array(vec![Value::Int(2), Value::Int(900), Value::Int(0)]);
        assert!(matches!(
            decode(&busy, &group),
            Ok(Taken::Busy {
                index: 7,
                pttl: 900
            })
        ));
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(3), Value::Int(1)]),
            Value::Array(vec![Value::Int(0), Value::Int(1)]),
            Value::Array(vec![Value::Int(0), Value::Int(0), Value::Int(1)]),
        ] {
            assert!(decode(&bad, &group).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn busy_bounds_follow_the_pttl() {
        assert_eq!(bound(-1), None);
        assert_eq!(bound(250), Some(Duration::from_millis(250)));
        assert_eq!(bound(-2), Some(Duration::from_millis(1)));
    }
}
