//! Taking permits with a fixed lease from a [`PermitExpirableSemaphore`]: one or many, at
//! once, for a while or until a deadline, each as a [`PermitGuard`] that gives it back on
//! drop. Every acquire, these and the renewed ones (`renewed.rs`), ends in the one acquire
//! path, which waits through `pubsub::wait`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guard::PermitGuard;
use super::handle::PermitExpirableSemaphore;
use super::id::PermitId;
use super::raw::check_count;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::hold::LockKind;
use crate::lock::priority::{self, PRIORITY_REFRESH};
use crate::pubsub::Channel;
use crate::semaphore::shared::{check_name, trace_outcome, wait_for_permits, Report};
use crate::time::{check_deadline, check_duration, check_wait};
use crate::trace;

/// A permit-expirable semaphore's kind, as its trace span, metrics and history name it.
const KIND: LockKind = LockKind::ExpirableSemaphore;

impl PermitExpirableSemaphore {
    /// Takes a permit that expires after `lease` (rounded up to whole milliseconds) unless
    /// released or [renewed](PermitGuard::update_lease) first, blocking until one is free.
    /// The guard gives it back when dropped; [`forget`](PermitGuard::forget) keeps it taken
    /// and returns its id, for Redisson's style of releasing by id
    /// ([`release`](Self::release)), from anywhere.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name, a zero lease or one over a year),
    /// [`Error::WrongType`] (a key is not a semaphore's), [`Error::Connection`] or
    /// [`Error::Timeout`] (Redis unreachable; a permit taken by an attempt whose reply was
    /// lost is released by its id once the server answers, see the guide's
    /// [safety chapter](crate::_guide::safety), or else when its lease runs out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// {
    ///     let _permit = slots.acquire(Duration::from_secs(30))?;
    ///     // ...
    /// } // given back here
    ///
    /// // Redisson's style: the id travels, and whoever finishes releases it.
    /// let id = slots.acquire(Duration::from_secs(30))?.forget();
    /// slots.release(&id)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, lease: Duration) -> Result<PermitGuard> {
        self.acquire_many(1, lease).map(one)
    }

    /// Takes a permit with the given `lease` if one is free; never waits. `None` when none
    /// is.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// match slots.try_acquire(Duration::from_secs(30))? {
    ///     Some(permit) => permit.release()?,
    ///     None => println!("all taken"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, lease: Duration) -> Result<Option<PermitGuard>> {
        Ok(self.try_acquire_many(1, lease)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most `wait` (zero: one try); `None`
    /// if the wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let lease = Duration::from_secs(30);
    /// if let Some(_permit) = slots.try_acquire_for(lease, Duration::from_secs(2))? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, lease: Duration, wait: Duration) -> Result<Option<PermitGuard>> {
        Ok(self.try_acquire_many_for(1, lease, wait)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most until `deadline` (a deadline
    /// in the past makes one attempt); `None` if it passed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if let Some(_permit) = slots.try_acquire_until(Duration::from_secs(30), deadline)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_until(
        &self,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<PermitGuard>> {
        Ok(self.try_acquire_many_until(1, lease, deadline)?.map(one))
    }

    /// Takes `permits` permits at once (all or none), each with the given `lease`, blocking
    /// until they are free: a guard per permit.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for zero permits or more than 10,000 at once; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let permits = slots.acquire_many(3, Duration::from_secs(30))?;
    /// assert_eq!(permits.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn acquire_many(&self, permits: u32, lease: Duration) -> Result<Vec<PermitGuard>> {
        match self.acquire_until(permits, lease, None)? {
            Some(guards) => Ok(guards),
            None => unreachable!("a wait without deadline only ends in permits"),
        }
    }

    /// As [`acquire_many`](Self::acquire_many) if the permits are free now; never waits.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if let Some(_permits) = slots.try_acquire_many(2, Duration::from_secs(30))? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many(
        &self,
        permits: u32,
        lease: Duration,
    ) -> Result<Option<Vec<PermitGuard>>> {
        self.acquire_until(permits, lease, Some(Instant::now()))
    }

    /// As [`acquire_many`](Self::acquire_many), waiting at most `wait` (zero: one try).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year; otherwise as
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let lease = Duration::from_secs(30);
    /// let got = slots.try_acquire_many_for(2, lease, Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_for(
        &self,
        permits: u32,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<Vec<PermitGuard>>> {
        check_wait(wait)?;
        self.try_acquire_many_until(permits, lease, Instant::now() + wait)
    }

    /// As [`acquire_many`](Self::acquire_many), waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// let got = slots.try_acquire_many_until(2, Duration::from_secs(30), deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_until(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<Vec<PermitGuard>>> {
        check_deadline(deadline)?;
        self.acquire_until(permits, lease, Some(deadline))
    }

    /// The one acquire path: tries to take `permits` permits at once, then waits until
    /// `deadline` (forever when `None`) through the one wait function, woken when that many
    /// may be free. Each block ends when woken (a release, added permits, the subscription
    /// confirmed, a pub/sub reconnect), at the deadline, or when the earliest permit expires:
    /// expired permits are reclaimed by the next script call, which nobody else may make.
    fn acquire_until(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<PermitGuard>>> {
        Ok(self
            .acquire_sent(permits, lease, deadline)?
            .map(|(ids, _, report)| {
                ids.into_iter()
                    .map(|id| PermitGuard::new(self.clone(), id, report.clone()))
                    .collect()
            }))
    }

    /// As [`acquire_until`](Self::acquire_until), also returning when the attempt that took
    /// the permits was sent (their lease runs from no earlier than that), and the call's
    /// report, whose holds the guards end.
    pub(super) fn acquire_sent(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<(Vec<PermitId>, Instant, Report)>> {
        check_name(&self.raw.name)?;
        check_count(permits as usize)?;
        check_duration("lease", lease)?;
        priority::check(self.raw.priority)?;
        // The same ids for every attempt: a failed attempt stores nothing under them.
        let ids: Vec<PermitId> = (0..permits).map(|_| PermitId::random()).collect();
        let mut sent_at = Instant::now();
        let started = sent_at;
        let span = trace::Span::acquire(KIND.as_str(), &self.raw.name, Some(lease));
        let _in_span = span.enter();
        let mut report = Report::new(&self.raw.client, &self.raw.name, KIND);
        let channel = match self.raw.priority {
            None => Channel::permits(&self.raw.channel, permits),
            Some(_) => Channel::permits_every(&self.raw.channel, permits),
        };
        let taken = wait_for_permits(&self.raw.client, channel, deadline, &mut || {
            sent_at = Instant::now();
            let waits = deadline.is_none_or(|d| d > sent_at);
            let attempt = self.raw.attempt(&ids, lease, waits);
            if let Err(e) = &attempt {
                if e.breaks_connection() {
                    // It may have run, or run when the server answers: its permits are
                    // given back then.
                    let first: Arc<str> = ids[0].as_str().into();
                    let settle = self.raw.settler(ids.clone());
                    let watchdog = &self.raw.client.inner.watchdog;
                    watchdog.doubt(&self.raw.name, &first, settle);
                }
            }
            if attempt.as_ref().is_ok_and(|t| !t.is_done()) {
                report.missed(deadline);
            }
            match (attempt, self.raw.priority) {
                // A waiter with a priority renews its place at least this often.
                (Ok(tried), Some(_)) if !tried.is_done() => {
                    Ok(tried.within_at_most(PRIORITY_REFRESH))
                }
                (attempt, _) => attempt,
            }
        });
        if self.raw.priority.is_some() && !matches!(taken, Ok(true)) {
            // Given up (or failed): its place goes, or ends within its keeping if this fails.
            if let Err(e) = self.raw.leave(&ids[0]) {
                log::debug!(
                    "a waiter of `{}` could not leave its queue ({e})",
                    self.raw.name
                );
            }
        }
        trace_outcome(&span, &taken, permits, deadline, started);
        report.ended(&taken, permits);
        Ok(taken?.then_some((ids, sent_at, report)))
    }
}

/// The one of a call that took one permit.
pub(super) fn one<T>(mut taken: Vec<T>) -> T {
    debug_assert_eq!(taken.len(), 1);
    taken.swap_remove(0)
}
