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
//!
//! - `mod.rs`: [`Condition`], its calls, and the checks every call makes.
//! - `wait.rs`: one wait, as a type whose steps are the four above and whose drop undoes what
//!   is outstanding (the place in the queue, a notification taken and not acted on, the
//!   place's renewal, the parked hold).
//! - `calls.rs`: the one-script calls a wait makes beside its steps: leave the queue, hand a
//!   notification on, restore a hold count.

mod calls;
mod wait;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::keys;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::owner::{Ownership, ThreadOwned};
use crate::scripts;
use crate::time::{check_deadline, check_wait};
use wait::Wait;

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
    /// ([`LostReason::MaxHoldReached`](crate::LostReason::MaxHoldReached)); held again before that, its lease ends by it. A
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
        // Sent again if its reply is lost to an interrupted read: the receipt answers with
        // what the first call picked.
        let picked: i64 = self.receipted(|c, receipt, ttl| {
            scripts::CONDITION_NOTIFY
                .key(&raw.key.name)
                .key(&self.waiters)
                .key(&self.queue)
                .key(receipt)
                .arg(&field)
                .arg(want)
                .arg(ttl)
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

    /// A wait until `deadline` (forever when `None`); true if notified. The four steps of
    /// the module's docs, each a step of [`Wait`], which undoes what is outstanding on every
    /// exit.
    fn wait_inner(&self, guard: &mut LockGuard<O>, deadline: Option<Instant>) -> Result<bool> {
        self.check()?;
        self.check_guard(guard)?;
        let mut wait = Wait::start(self, guard, deadline);
        wait.queue()?;
        wait.release()?;
        let waited = wait.block();
        wait.finish(waited)
    }

    /// A guard of this condition's lock (from the same client), not known lost.
    fn check_guard(&self, guard: &LockGuard<O>) -> Result<()> {
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
        Ok(())
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
