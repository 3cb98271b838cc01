//! The acquire of every lock kind: [`Lock::lock`] and its timed and `try_` forms, and the
//! one path they take (try, wait on the lock's channel, leave a fair queue on giving up),
//! which ends in a [`LockGuard`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backoff::Pacer;
use crate::error::{Error, Result};
use crate::handover::Waiter;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::kind::{Queueing, Waiting};
use crate::lock::owner::Ownership;
use crate::lock::raw::Attempt;
use crate::pubsub::{wait, Channel, Tried};
use crate::time::{check_deadline, check_duration, check_wait, millis};
use crate::trace;

impl<O: Ownership> Lock<O> {
    /// Acquires the lock, blocking the calling thread until it is held.
    ///
    /// The thread waits for the unlock message on the lock's channel (no polling); each wait
    /// is bounded by the lock's remaining lease, so even a lost message costs one lease at most.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name, bad lease or max hold), [`Error::WrongType`] (the
    /// key is not a lock), [`Error::Connection`] or [`Error::Timeout`] (Redis unreachable);
    /// [`Error::AlreadyHeld`] at once if the lock is not reentrant and its owner holds it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("reports").lock()?;
    /// assert_eq!(client.lock("reports").hold_count()?, 1);
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> Result<LockGuard<O>> {
        match self.acquire(None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("a wait without deadline only ends in a guard"),
        }
    }

    /// Acquires the lock if it is free (or already held by its owner: this thread, or the
    /// lock's [`LockOwner`](crate::LockOwner), unless the lock is not [reentrant](Self::is_reentrant)); never
    /// waits.
    ///
    /// Returns `Ok(None)` when another owner holds it.
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
    /// match client.lock("nightly-job").try_lock()? {
    ///     Some(_guard) => { /* run the job */ }
    ///     None => println!("another worker runs it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self) -> Result<Option<LockGuard<O>>> {
        self.acquire(Some(Instant::now()))
    }

    /// Acquires the lock, waiting at most `wait`. Returns `Ok(None)` if the wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year (a zero wait is one try); otherwise
    /// as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(_guard) = client.lock("cache-refresh").try_lock_for(Duration::from_secs(3))? {
    ///     // refresh
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<O>>> {
        check_wait(wait)?;
        self.try_lock_until(Instant::now() + wait)
    }

    /// Acquires the lock, waiting at most until `deadline` (a deadline in the past makes one
    /// attempt). Returns `Ok(None)` if the deadline passed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let guard = client.lock("a").try_lock_until(deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard<O>>> {
        check_deadline(deadline)?;
        self.acquire(Some(deadline))
    }

    /// The one acquire path: tries, then waits on the lock's channel until `deadline`
    /// (forever when `None`), through the one wait function. Every successful path ends in
    /// [`LockGuard::new`]. A fair lock's waiter that gives up (or fails, or is interrupted)
    /// leaves the queue before returning. A kind with a back-off (spin) waits on no channel:
    /// each retry comes after its next delay, or when the lease runs out if sooner.
    pub(super) fn acquire(&self, deadline: Option<Instant>) -> Result<Option<LockGuard<O>>> {
        self.acquire_capped(deadline, None)
    }

    /// [`acquire`](Self::acquire) for a hold that must end by `cap` (a condition wait's hold
    /// taken again, whose watchdog entry is parked, so that [`lease_for`](Self::lease_for)
    /// cannot find its cap): each attempt sets a lease that ends by `cap`, and no release
    /// passes the lock to it (a pass sets the lease the waiter asked for when it joined).
    pub(super) fn acquire_capped(
        &self,
        deadline: Option<Instant>,
        cap: Option<Instant>,
    ) -> Result<Option<LockGuard<O>>> {
        self.raw.check_name()?;
        if let Some(lease) = self.lease {
            check_duration("lease", lease)?;
        }
        if let Some(max_hold) = self.max_hold {
            check_duration("max_hold", max_hold)?;
        }
        let owner = self.owner();
        // An earlier acquire whose reply was lost may have taken a hold: given back first, so
        // that this one's count is the guards'.
        self.raw.settle_first(&owner)?;
        let waiting = self.raw.waiting(&owner);
        let mut pacer = match &waiting {
            Waiting::Channel(_) => None,
            Waiting::Backoff(backoff) => {
                backoff.check()?;
                Some(Pacer::new(*backoff))
            }
        };
        let started = Instant::now();
        let metrics = &self.raw.key.client.inner.metrics;
        let span = trace::Span::acquire(self.raw.kind.label(), self.key(), self.lease);
        let _in_span = span.enter();
        let lease = self.lease_or_default();
        // Only a caller that will wait joins a fair lock's queue.
        let will_wait = deadline.is_none_or(|d| Instant::now() < d);
        let mut attempts = 0u32;
        let mut got = None;
        let mut held = 0u32;
        // A thread waiting for a kind that passes: a release by another thread of this
        // client may hand it the lock (see `handover.rs`).
        let passable = O::ONE_THREAD
            && cap.is_none()
            && will_wait
            && self.raw.kind.passes_inside_client()
            && self.raw.key.bound.is_none();
        let handovers = &self.raw.key.client.inner.handovers;
        let mut joined: Option<Arc<Waiter>> = None;
        let mut attempt = || -> Result<Tried> {
            attempts += 1;
            if attempts == 2 {
                log::debug!("waiting for `{}` (owner {owner})", self.key());
                self.raw.before_wait(&owner);
            }
            let lease = match cap {
                Some(cap) => lease
                    .min(cap.saturating_duration_since(Instant::now()))
                    .max(Duration::from_millis(1)),
                None => self.lease_for(&owner, lease),
            };
            if let Some(waiter) = &joined {
                if let Some(sent_at) = self.passed(waiter, &owner)? {
                    held = 1;
                    got = Some(LockGuard::new(
                        self.clone(),
                        Arc::clone(&owner),
                        sent_at,
                        1,
                        None,
                    ));
                    return Ok(Tried::done());
                }
            }
            let sent_at = Instant::now();
            let mut paced = |ttl: Duration| match &mut pacer {
                Some(pacer) => pacer.next_delay().min(ttl),
                None => ttl,
            };
            // The first attempt of a caller that will wait joins a fair lock's queue; the
            // later ones keep its place, taking back the head if a script removed it: only
            // for an owner that is one thread (an owner waiting on two threads has one place,
            // which the other call may have left), and not on the last attempt, at the
            // deadline (it leaves next; a place taken back would only cut the deadlines
            // behind it).
            let queueing = if !will_wait {
                Queueing::No
            } else if attempts == 1 {
                Queueing::Join
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Queueing::No
            } else if O::ONE_THREAD {
                Queueing::Keep
            } else {
                Queueing::Join
            };
            let tried = Ok(match self.raw.acquire(&owner, lease, queueing)? {
                Attempt::Acquired { count, token } => {
                    held = count;
                    got = Some(LockGuard::new(
                        self.clone(),
                        Arc::clone(&owner),
                        sent_at,
                        count,
                        token,
                    ));
                    Tried::done()
                }
                // No expiry (a foreign key without TTL): re-check at the watchdog period.
                Attempt::Busy(ms) if ms < 0 => Tried::again(Some(paced(
                    self.raw.key.client.inner.config.watchdog_timeout,
                ))),
                Attempt::Busy(ms) => Tried::again(Some(paced(Duration::from_millis(ms as u64)))),
                Attempt::AlreadyHeld => {
                    return Err(Error::AlreadyHeld {
                        name: self.key().to_owned(),
                    })
                }
            });
            // Busy: it waits, and a release here may pass it the lock until it attempts
            // again (an attempt that acquired leaves it attempting: out of reach).
            if passable && got.is_none() {
                joined
                    .get_or_insert_with(|| {
                        handovers.join(&self.raw.key.name, Arc::clone(&owner), millis(lease))
                    })
                    .blocked();
            }
            tried
        };
        let dispatcher = &self.raw.key.client.inner.pubsub;
        // Until the queue is left: a close lets that finish. A call that will not wait joins
        // no queue, and a close does not wait for it.
        let _active = will_wait.then(|| dispatcher.active());
        let channel = match &waiting {
            Waiting::Channel(name) => Channel::lock(name),
            Waiting::Backoff(_) => Channel::none(),
        };
        let waited = wait(dispatcher, channel, deadline, &mut attempt);
        let mut outcome = waited.map(|done| if done { got } else { None });
        if let Some(waiter) = joined {
            self.leave_passing(&owner, &waiter, &mut outcome);
        }
        match &outcome {
            Ok(Some(_)) => span.acquired(held, started.elapsed()),
            Ok(None) if will_wait => span.gave_up("timed_out", started.elapsed()),
            Ok(None) => span.gave_up("busy", started.elapsed()),
            Err(_) => span.gave_up("error", started.elapsed()),
        }
        match &outcome {
            Ok(Some(_)) => metrics.acquired(
                self.raw.kind.label(),
                &self.raw.key.name,
                started.elapsed(),
                attempts > 1,
            ),
            // A wait that ran out (a `try_lock` that found it busy did not wait).
            Ok(None) if will_wait => metrics.timed_out(self.raw.kind.label(), &self.raw.key.name),
            _ => {}
        }
        // A kind with a queue (fair) leaves it; a failed call may have queued us before its
        // reply was lost, so in every case. Other kinds have nothing to leave. Except a refused
        // re-acquire: an owner that holds the lock has no place in the queue (taking the lock
        // took it out), and the refusing script checks before it would queue.
        let refused = matches!(outcome, Err(Error::AlreadyHeld { .. }));
        if will_wait && !refused && !matches!(outcome, Ok(Some(_))) {
            match self.raw.leave(&owner) {
                Ok(_) => {}
                Err(e) => log::debug!(
                    "leaving the queue of `{}` (owner {owner}) failed: {e}; it is skipped once \
                     its deadline passes",
                    self.key()
                ),
            }
        }
        outcome
    }
}
