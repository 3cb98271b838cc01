//! [`Condition`]: wait and notify across processes on a held lock, as
//! `java.util.concurrent.locks.Condition` (and parking_lot's `Condvar`) do in one process.
//!
//! A wait is four steps, each a script of its own (`lua/condition_*.lua`):
//!
//! 1. **queue** (`condition_wait.lua`), while the owner holds the lock: the waiter joins the
//!    condition's queue with a lease; a plain, fenced or non-reentrant lock is released in the
//!    same call (its hash deleted, `0` published, as its unlock does), any other kind's hold
//!    count set to 1 for
//! 2. **release** through the kind's own unlock, which publishes what its waiters (Redisson's
//!    included) expect. A notifier needs the lock, so no notification can fall between 1 and
//!    2; and the waiter looks again once subscribed to its own channel, so none published
//!    before it listened is lost either;
//! 3. **wait** on the waiter's own channel through `pubsub::wait`, looking at its entry
//!    (`condition_check.lua`) after each wake-up; the watchdog renews the entry's lease, so a
//!    waiter whose process died is skipped by the next notification;
//! 4. **acquire again** through the lock's one acquire path, and restore the hold count.
//!
//! Meanwhile the guard's watchdog entry is parked (`watchdog/park.rs`): nothing renews a lock
//! that is not held, and the guard's lease (shared with the thread's other holds) runs again
//! from the new acquire.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::interrupt::Interruption;
use crate::keys;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::owner::{Ownership, ThreadOwned};
use crate::lock::raw::Unlocked;
use crate::pubsub::{wait, Channel, Mode, Tried};
use crate::scripts;
use crate::time::{check_deadline, check_wait, millis};
use crate::watchdog::{BatchRenewal, LostReason, Parked, Renewal};

/// A condition of a lock: threads holding the lock, in any process, wait on it until another
/// holder notifies them. Made by [`Lock::condition`]; cheap to clone.
///
/// The calls are those of parking_lot's `Condvar` and the semantics those of Java's
/// `Condition`: [`wait`](Self::wait) releases the lock fully (whatever the hold count),
/// blocks until notified, and returns holding the lock again with the same count;
/// [`notify_one`](Self::notify_one) wakes the longest-waiting thread,
/// [`notify_all`](Self::notify_all) every one. Both sides must hold the lock
/// ([`Error::NotHeld`] otherwise). Several conditions of one lock (`not_full`, `not_empty`)
/// are told apart by name; a condition is found again by its lock and name in any process.
///
/// There are no spurious wake-ups but one: a waiter whose process could not renew its place
/// in the queue for a whole lease (paused, or cut off from Redis) may have been skipped by a
/// notification, so its wait ends then, and logs a warning. Wait in a loop on the state you
/// need, as with any condition variable.
///
/// Plain, fair, fenced, spin, non-reentrant and write locks have conditions; a read lock does
/// not (its waits and notifications return [`Error::InvalidArgument`]). A fenced lock's guard
/// carries a new [token](LockGuard::token) after a wait: the lock was acquired anew.
///
/// # Examples
///
/// A consumer waits until a job is queued; a producer, in another process, queues one and
/// notifies:
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// # let jobs_queued = |_: &redlatch::Client| -> redlatch::Result<bool> { Ok(true) };
/// let lock = client.lock("jobs");
/// let not_empty = lock.condition("not_empty");
/// let mut guard = lock.lock()?;
/// while !jobs_queued(&client)? {
///     not_empty.wait(&mut guard)?;
/// }
/// // ... take a job, holding the lock ...
/// # Ok(()) }
/// ```
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let lock = client.lock("jobs");
/// let _guard = lock.lock()?;
/// // ... queue a job ...
/// lock.condition("not_empty").notify_one()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Condition<O: Ownership = ThreadOwned> {
    lock: Lock<O>,
    name: Arc<str>,
    /// `redlatch_condition:{lock}:<name>`: the waiters and their deadlines.
    waiters: Arc<str>,
    /// `redlatch_condition_queue:{lock}:<name>`: the waiters not yet picked, in order.
    queue: String,
}

/// Whether a timed wait ([`Condition::wait_for`], [`Condition::wait_until`]) ended by its
/// timeout rather than by a notification, as parking_lot's `WaitTimeoutResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// True if the wait timed out (no notification picked it).
    pub fn timed_out(self) -> bool {
        self.0
    }
}

/// The renewal of a waiter's place: `condition_renew.lua`.
static RENEW_WAITER: BatchRenewal = BatchRenewal {
    script: &scripts::CONDITION_RENEW,
    add: |call, waiters, id| {
        call.key(waiters)
            .key(keys::condition_queue_of(waiters))
            .arg(id);
    },
};

/// Makes each wait's waiter id unique in the process (an owner may wait again, or wait on
/// two threads as a shared `LockOwner`).
static WAITS: AtomicU64 = AtomicU64::new(0);

/// How step 3 of a wait ended.
enum Ended {
    Notified,
    /// The waiter's place was gone (its lease ran out).
    Dropped,
    TimedOut,
    /// The hold's maximum hold time came first.
    Capped,
}

impl<O: Ownership> Lock<O> {
    /// The condition `name` of this lock: threads holding the lock wait on it until another
    /// holder, in any process, notifies them. See [`Condition`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("account:7");
    /// let unfrozen = lock.condition("unfrozen");
    /// let mut guard = lock.lock()?;
    /// let waited = unfrozen.wait_for(&mut guard, Duration::from_secs(30))?;
    /// if waited.timed_out() {
    ///     // still frozen, as far as we know: give up
    /// }
    /// # Ok(()) }
    /// ```
    pub fn condition(&self, name: impl AsRef<str>) -> Condition<O> {
        Condition::new(self.clone(), name.as_ref())
    }
}

impl<O: Ownership> Condition<O> {
    fn new(lock: Lock<O>, name: &str) -> Condition<O> {
        let lock_name = &lock.raw.key.name;
        Condition {
            waiters: Arc::from(keys::condition_waiters(lock_name, name)),
            queue: keys::condition_queue(lock_name, name),
            name: Arc::from(name),
            lock,
        }
    }

    /// The condition's name (as given to [`Lock::condition`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.lock("jobs").condition("not_empty").name(), "not_empty");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock this condition belongs to.
    pub fn lock(&self) -> &Lock<O> {
        &self.lock
    }

    /// Releases the lock held by `guard` (every hold of its owner), waits until a notification
    /// picks this thread, and acquires the lock again with the hold count it had.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] if the guard's owner does not hold the lock (nothing was queued);
    /// [`Error::LockLost`] if the guard's hold is known lost; [`Error::InvalidArgument`] for a
    /// guard of another lock, or a read lock. [`Error::Interrupted`] when the thread is
    /// interrupted: the waiter leaves the queue (a notification that picked it meanwhile goes
    /// to the next waiter) and, as in Java, the lock is acquired again before the error is
    /// returned (an interrupt that comes while it acquires again is kept for the thread's
    /// next wait). [`Error::Closed`] when the client is closed: the waiter leaves the queue,
    /// and the guard no longer holds the lock ([`LockGuard::is_lost`]); a notification it
    /// had taken is handed to the next waiter, if that can be done within `close`'s grace
    /// (it waits up to the response timeout for waits to end).
    /// [`Error::InvalidArgument`] also for a write lock whose owner holds read locks of it
    /// (nothing changed). Any other error once the lock was released (connection errors,
    /// a count that could not be restored) leaves the guard without the lock: lost.
    /// [`Error::LockLost`] when the hold's [maximum hold time](Lock::with_max_hold) comes
    /// before it is held again: the wait ends then at the latest, and the guard is lost
    /// ([`LostReason::MaxHoldReached`]); held again before that, its lease ends by it. A
    /// notification that picked it goes to the next waiter, also one that woke it just
    /// before the cap when the lock did not come free before the cap.
    pub fn wait(&self, guard: &mut LockGuard<O>) -> Result<()> {
        self.wait_inner(guard, None).map(|_| ())
    }

    /// [`wait`](Self::wait), for at most `timeout`: the lock is acquired again either way
    /// (that may take longer), and the result says whether the timeout ended the wait.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a timeout longer than a year; otherwise as
    /// [`wait`](Self::wait).
    pub fn wait_for(
        &self,
        guard: &mut LockGuard<O>,
        timeout: Duration,
    ) -> Result<WaitTimeoutResult> {
        check_wait(timeout)?;
        self.wait_until(guard, Instant::now() + timeout)
    }

    /// [`wait`](Self::wait), until `deadline` at most; see [`wait_for`](Self::wait_for).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`wait`](Self::wait).
    pub fn wait_until(
        &self,
        guard: &mut LockGuard<O>,
        deadline: Instant,
    ) -> Result<WaitTimeoutResult> {
        check_deadline(deadline)?;
        self.wait_inner(guard, Some(deadline))
            .map(|notified| WaitTimeoutResult(!notified))
    }

    /// Wakes the thread that has waited longest on this condition, in any process; true if
    /// there was one. The caller must hold the lock.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] if the calling owner does not hold the lock (nobody was woken);
    /// [`Error::InvalidArgument`] on a read lock; connection errors (a notification whose
    /// reply was lost may have been delivered).
    pub fn notify_one(&self) -> Result<bool> {
        self.notify(1).map(|n| n > 0)
    }

    /// Wakes every thread waiting on this condition, in any process, and returns how many.
    /// The caller must hold the lock.
    ///
    /// # Errors
    ///
    /// As [`notify_one`](Self::notify_one).
    pub fn notify_all(&self) -> Result<usize> {
        self.notify(0)
    }

    fn notify(&self, want: u32) -> Result<usize> {
        self.check()?;
        let raw = &self.lock.raw;
        let field = raw.field(&self.lock.owner());
        let picked: i64 = raw.run(|c| {
            scripts::CONDITION_NOTIFY
                .key(&raw.key.name)
                .key(&self.waiters)
                .key(&self.queue)
                .arg(&field)
                .arg(want)
                .invoke(c)
        })?;
        log::debug!(
            "notified `{}` of `{}`: {picked} waiter(s) picked",
            self.name,
            raw.key.name
        );
        usize::try_from(picked).map_err(|_| Error::NotHeld {
            name: self.lock.key().to_owned(),
        })
    }

    /// What every call checks first: names, and a kind that has conditions.
    fn check(&self) -> Result<()> {
        self.lock.raw.check_name()?;
        crate::names::check_name("condition", &self.name)?;
        if !self.lock.raw.kind.has_conditions() {
            return Err(Error::invalid(format!(
                "a {} lock has no conditions (as ReentrantReadWriteLock's read lock)",
                self.lock.raw.kind.label()
            )));
        }
        Ok(())
    }

    /// A wait until `deadline` (forever when `None`); true if notified.
    fn wait_inner(&self, guard: &mut LockGuard<O>, deadline: Option<Instant>) -> Result<bool> {
        self.check()?;
        let raw = &self.lock.raw;
        let theirs = &guard.lock.raw;
        if theirs.key.name != raw.key.name
            || theirs.kind.label() != raw.kind.label()
            || theirs.key.client.id() != raw.key.client.id()
        {
            return Err(Error::invalid(format!(
                "condition `{}` of lock `{}` was given a guard of lock `{}`",
                self.name,
                self.lock.key(),
                guard.lock.key()
            )));
        }
        if guard.is_lost() {
            return Err(Error::LockLost {
                name: self.lock.key().to_owned(),
            });
        }
        let inner = &raw.key.client.inner;
        let owner = Arc::clone(&guard.owner);
        let field = raw.field(&owner);
        let n = WAITS.fetch_add(1, Ordering::Relaxed);
        // How a notification reaches it: as its client listens (see `condition_common.lua`).
        let mode = match inner.backend.pubsub_mode() {
            Mode::Sharded => 's',
            Mode::Plain => 'c',
        };
        let id: Arc<str> = Arc::from(format!("{owner}:{mode}{n}"));
        let lease = inner.config.watchdog_timeout;
        let parked = guard.watch.get().map(|w| inner.watchdog.park(w));
        let holds = parked.as_ref().map_or(1, |p| p.holds().max(1));
        // A hold with a maximum hold time is not held again past it: the wait ends there at
        // the latest, and the hold with it.
        let cap = parked.as_ref().and_then(Parked::cap);
        let capped = cap.filter(|&cap| deadline.is_none_or(|d| cap < d));
        let deadline = capped.or(deadline);

        // 1. Queue, holding the lock, and (for the kinds whose release is only that) release
        //    it in the same call. A writer's own read holds refuse it (the field that is not
        //    the owner id is a write hold's).
        let release_here = raw.kind.released_by_wait();
        let queued_at = Instant::now();
        let queued: Result<Option<i64>> = raw.run(|c| {
            scripts::CONDITION_WAIT
                .key(&raw.key.name)
                .key(&self.waiters)
                .key(&self.queue)
                .key(release_here.unwrap_or(&self.queue))
                .arg(&field)
                .arg(&*id)
                .arg(millis(lease))
                .arg(if field == *owner { "" } else { &*owner })
                .arg(release_here.map_or("", |_| raw.key.client.publish()))
                .invoke(c)
        });
        let count = match queued {
            Ok(Some(count)) if count > 0 => count as u32,
            Ok(Some(_)) => {
                if let Some(p) = parked {
                    self.unpark(guard, p, None)?;
                }
                return Err(Error::invalid(format!(
                    "the owner of write lock `{}` holds read locks of it too: a wait would \
                     leave it in read mode; release them first",
                    self.lock.key()
                )));
            }
            Ok(None) => {
                self.lost(guard, parked, LostReason::NotHeld);
                return Err(Error::NotHeld {
                    name: self.lock.key().to_owned(),
                });
            }
            Err(e) => {
                // It may have run: leave, and look at what the owner holds. Nothing: it ran
                // and released (or the hold is gone); one hold: the owner gets its count
                // back; its count: it did not run.
                self.leave(&id, true);
                let held: Result<Option<u32>> =
                    raw.run(|c| redis::cmd("HGET").arg(&*raw.key.name).arg(&field).query(c));
                match held {
                    Ok(Some(n)) if n == holds || (n == 1 && self.restore(&field, holds)) => {
                        if let Some(p) = parked {
                            self.unpark(guard, p, None)?;
                        }
                    }
                    _ => self.lost(guard, parked, LostReason::NotHeld),
                }
                return Err(e);
            }
        };
        // The place is renewed, and a place found gone wakes the thread to look.
        let renewal = Renewal {
            field: Arc::clone(&id),
            batch: &RENEW_WAITER,
        };
        let (watch, place) = inner
            .watchdog
            .watch(&self.waiters, renewal, queued_at, 1, None);
        let me = Interruption::current();
        let waker = Arc::clone(&me);
        if let Some((f, _)) =
            inner
                .watchdog
                .on_lost(watch, &place, Box::new(move |_| waker.nudge()))
        {
            drop(f);
            me.nudge();
        }

        // 2. Release, whatever the count was: it is 1 now (unless released already).
        let released = match release_here {
            Some(_) => Ok(Unlocked::Released),
            None => raw.unlock_knowing(&owner, guard.lock.lease_or_default(), Some(0)),
        };
        if !matches!(released, Ok(Unlocked::Released | Unlocked::Passed)) {
            // Not held any more (NotHeld), released or not (its reply lost and not settled),
            // or, from a `LockOwner` shared by threads, still held: the guard no longer knows
            // its hold. One that stayed ends with its lease, which nothing renews now.
            self.leave(&id, true);
            inner.watchdog.unwatch(watch);
            let why = match &released {
                Err(Error::Closed) => LostReason::ClientClosed,
                _ => LostReason::NotHeld,
            };
            self.lost(guard, parked, why);
            return Err(match released {
                Err(e) => e,
                Ok(_) => Error::LockLost {
                    name: self.lock.key().to_owned(),
                },
            });
        }

        // 3. Wait.
        let dispatcher = &inner.pubsub;
        // Until it returns: a close waits for it (up to a response timeout), so that what it
        // does on the way out (hand a notification on) still has the client's connections.
        let _active = dispatcher.active();
        let channel = keys::condition_waiter_channel(&raw.key.name, &self.name, &id);
        let mut first = true;
        let mut ended = Ended::Notified;
        // A failed look, and a failed leave after it: either may have taken a notification.
        let mut in_doubt = false;
        let mut attempt = || -> Result<Tried> {
            if std::mem::take(&mut first) {
                return Ok(Tried::again(None));
            }
            if place.lost().is_some() {
                // Not renewed for a lease: the server may have dropped it, or will. Leave,
                // taking a notification that picked it still.
                ended = match self.leave(&id, false) {
                    Some(1) => Ended::Notified,
                    _ => Ended::Dropped,
                };
                return Ok(Tried::done());
            }
            let seen: Result<i64> = raw.run(|c| {
                scripts::CONDITION_CHECK
                    .key(&self.waiters)
                    .arg(&*id)
                    .invoke(c)
            });
            let seen = match seen {
                Ok(seen) => seen,
                // The look failed, perhaps after it ran and took a notification (its reply
                // lost): leaving tells. Gone means taken by that look (or its place ran
                // out: a wake-up either way); picked means taken now.
                Err(e) => {
                    return match self.leave(&id, false) {
                        Some(1 | -1) => Ok(Tried::done()),
                        Some(_) => Err(e),
                        None => {
                            in_doubt = true;
                            Err(e)
                        }
                    };
                }
            };
            Ok(match seen {
                0 => Tried::again(None),
                1 => Tried::done(),
                _ => {
                    ended = Ended::Dropped;
                    Tried::done()
                }
            })
        };
        let waited = wait(dispatcher, Channel::all(&channel), deadline, &mut attempt);
        let waited = match waited {
            Ok(true) => Ok(ended),
            // The cap came: a notification that picked it goes to the next waiter.
            Ok(false) if capped.is_some() => {
                self.leave(&id, true);
                Ok(Ended::Capped)
            }
            Ok(false) => Ok(match self.leave(&id, false) {
                Some(1) => Ended::Notified,
                _ => Ended::TimedOut,
            }),
            Err(e) => {
                // Gone after a look and a leave that both failed: a notification they may
                // have taken goes on (at worst one wake-up too many, never one lost).
                if self.leave(&id, true) == Some(-1) && in_doubt {
                    self.hand_on(&id);
                }
                Err(e)
            }
        };
        inner.watchdog.unwatch(watch);
        // The place's loss callback nudges this thread for this wait only: one that came as
        // the wait ended would wake the thread's next block for nothing.
        me.take_nudge();
        if matches!(waited, Err(Error::Closed)) {
            self.lost(guard, parked, LostReason::ClientClosed);
            return Err(Error::Closed);
        }
        // A notification it took and cannot act on (the lock not held again) goes on.
        let notified = matches!(waited, Ok(Ended::Notified));
        if matches!(waited, Ok(Ended::Capped)) || cap.is_some_and(|cap| Instant::now() >= cap) {
            if notified {
                self.hand_on(&id);
            }
            if matches!(waited, Err(Error::Interrupted)) {
                // Kept for the thread's next wait, as one that comes while acquiring again.
                Interruption::current().request();
            }
            return Err(self.capped(guard, parked));
        }
        if matches!(waited, Ok(Ended::Dropped)) {
            log::warn!(
                "waiter {id} of condition `{}` of `{}` lost its place (not renewed for a \
                 lease): its wait ends, perhaps without a notification",
                self.name,
                raw.key.name
            );
        }

        // 4. Acquire again (after an interrupt too, as Java does), with the count it had.
        let again = match self.acquire_again(guard, cap) {
            Ok(Some(again)) => again,
            Ok(None) => {
                if notified {
                    self.hand_on(&id);
                }
                return Err(self.capped(guard, parked));
            }
            Err(e) => {
                // Also when closing: the client's connections outlive its waits for a while.
                if notified {
                    self.hand_on(&id);
                }
                let why = match e {
                    Error::Closed => LostReason::ClientClosed,
                    _ => LostReason::NotHeld,
                };
                self.lost(guard, parked, why);
                return Err(e);
            }
        };
        let at = again.acquired_at;
        guard.token = again.token;
        again.dissolve();
        if let Err(e) = self.held_again(guard, parked, &field, count, at) {
            if notified {
                self.hand_on(&id);
            }
            return Err(e);
        }
        log::debug!(
            "waited on `{}` of `{}` (owner {owner}, hold count {count})",
            self.name,
            raw.key.name
        );
        match waited? {
            Ended::Notified | Ended::Dropped => Ok(true),
            Ended::TimedOut | Ended::Capped => Ok(false),
        }
    }

    /// Held again at `at`: gives the owner its hold count `count` back and the guard its
    /// watchdog entry (or lease); an error (the guard lost, the lock released) if either fails.
    fn held_again(
        &self,
        guard: &LockGuard<O>,
        parked: Option<Parked>,
        field: &str,
        count: u32,
        at: Instant,
    ) -> Result<()> {
        if count > 1 && !self.restore(field, count) {
            return Err(self.give_up(guard, parked));
        }
        match parked {
            Some(p) => self.unpark(guard, p, Some(at)),
            None if !guard.lease.restart(at) => Err(self.give_up(guard, None)),
            None => Ok(()),
        }
    }

    /// The hold reached its maximum hold time during the wait (or while acquiring again): it
    /// is not held again, and the guard is lost.
    fn capped(&self, guard: &LockGuard<O>, parked: Option<Parked>) -> Error {
        log::warn!(
            "`{}` (owner {}) reached its maximum hold time during a wait on condition `{}`: \
             not held again",
            self.lock.key(),
            guard.owner,
            self.name
        );
        self.lost(guard, parked, LostReason::MaxHoldReached);
        Error::LockLost {
            name: self.lock.key().to_owned(),
        }
    }

    /// Acquires the lock for `guard`'s owner after its wait. An interrupt does not stop it
    /// (the wait's own interrupt was taken; one that comes now is kept for the thread's next
    /// wait), as Java's `await` acquires again before it returns either way.
    ///
    /// A hold with a cap (its maximum hold time) is taken again with a lease that ends by it,
    /// and not at all once it has passed: `None`.
    fn acquire_again(
        &self,
        guard: &LockGuard<O>,
        cap: Option<Instant>,
    ) -> Result<Option<LockGuard<O>>> {
        // A close that came as the wait ended: not held again (its connections are still
        // open while it waits for this wait to end).
        if self.lock.raw.key.client.is_closed() {
            return Err(Error::Closed);
        }
        let mut interrupted = false;
        let outcome = loop {
            match guard.lock.acquire_capped(cap, cap) {
                Err(Error::Interrupted) => interrupted = true,
                Ok(Some(again)) => break Ok(Some(again)),
                Ok(None) if cap.is_some() => break Ok(None),
                Ok(None) => {
                    break Err(Error::Protocol(
                        "an acquire without a deadline gave up".into(),
                    ))
                }
                Err(e) => break Err(e),
            }
        };
        if interrupted {
            Interruption::current().request();
        }
        outcome
    }

    /// Puts the guard's parked watchdog entry back, as the guard's watch now; an error if
    /// the hold is lost instead (then released, best effort).
    fn unpark(&self, guard: &LockGuard<O>, parked: Parked, at: Option<Instant>) -> Result<()> {
        let watchdog = &self.lock.raw.key.client.inner.watchdog;
        match watchdog.unpark(parked, at) {
            Some(watch) => {
                guard.watch.set(Some(watch));
                Ok(())
            }
            None => Err(self.give_up(guard, None)),
        }
    }

    /// The guard's hold, held again, cannot be trusted (its count not restored, its lease
    /// lost meanwhile): released (best effort) and the guard lost.
    fn give_up(&self, guard: &LockGuard<O>, parked: Option<Parked>) -> Error {
        let raw = &self.lock.raw;
        let lease = guard.lock.lease_or_default();
        if let Err(e) = raw.unlock_knowing(&guard.owner, lease, Some(0)) {
            log::warn!(
                "releasing `{}` after a condition wait it could not complete failed: {e}",
                raw.key.name
            );
        }
        self.lost(guard, parked, LostReason::NotHeld);
        Error::LockLost {
            name: self.lock.key().to_owned(),
        }
    }

    /// Takes waiter `id` out of the condition (`pass`: handing a notification that picked
    /// it on); the script's reply, `None` if the call failed (the place then runs out by
    /// its lease, unrenewed).
    fn leave(&self, id: &str, pass: bool) -> Option<i64> {
        let raw = &self.lock.raw;
        let left = raw.run(|c| {
            scripts::CONDITION_LEAVE
                .key(&self.waiters)
                .key(&self.queue)
                .arg(id)
                .arg(if pass { "pass" } else { "take" })
                .invoke(c)
        });
        match left {
            Ok(reply) => Some(reply),
            Err(e) => {
                log::debug!(
                    "waiter {id} could not leave condition `{}` of `{}` ({e}): its place \
                     runs out within a lease",
                    self.name,
                    raw.key.name
                );
                None
            }
        }
    }

    /// Hands on a notification that waiter `id` took and cannot act on (the lock is not
    /// held again): the next live waiter is picked, as a notify would pick it. If the call
    /// fails, the notification goes no further (logged).
    fn hand_on(&self, id: &str) {
        let raw = &self.lock.raw;
        let passed: Result<i64> = raw.run(|c| {
            scripts::CONDITION_PASS
                .key(&self.waiters)
                .key(&self.queue)
                .invoke(c)
        });
        match passed {
            Ok(picked) => log::debug!(
                "waiter {id} of condition `{}` of `{}` handed on the notification it could \
                 not act on ({})",
                self.name,
                raw.key.name,
                if picked == 1 {
                    "another waiter picked"
                } else {
                    "no waiter left"
                }
            ),
            Err(e) => log::warn!(
                "waiter {id} of condition `{}` of `{}` could not hand on the notification it \
                 could not act on ({e}): it goes no further",
                self.name,
                raw.key.name
            ),
        }
    }

    /// Gives the owner's single hold its count `count` back; false (logged) if it could not.
    fn restore(&self, field: &str, count: u32) -> bool {
        if count <= 1 {
            return true;
        }
        let raw = &self.lock.raw;
        let restored: Result<i64> = raw.run(|c| {
            scripts::CONDITION_RESTORE
                .key(&raw.key.name)
                .arg(field)
                .arg(count)
                .invoke(c)
        });
        if !matches!(restored, Ok(1)) {
            log::warn!(
                "the hold count {count} of `{}` (field {field}) was not restored after a \
                 condition wait: {restored:?}",
                raw.key.name
            );
            return false;
        }
        true
    }

    /// The guard no longer holds the lock: it (and the owner's other guards) are lost.
    fn lost(&self, guard: &LockGuard<O>, parked: Option<Parked>, why: LostReason) {
        guard.lease.mark_lost(why);
        if let Some(p) = parked {
            self.lock.raw.key.client.inner.watchdog.lose_parked(p, why);
        }
    }
}

impl<O: Ownership> std::fmt::Debug for Condition<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition")
            .field("lock", &self.lock.key())
            .field("name", &self.name)
            .finish()
    }
}
