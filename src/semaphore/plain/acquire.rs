//! Taking permits from a [`Semaphore`]: at once, for a while or until a deadline, each as a
//! [`SemaphoreGuard`] that gives them back on drop. Every acquire ends in the one acquire
//! path, which waits through `pubsub::wait`.

use std::time::{Duration, Instant};

use super::guard::SemaphoreGuard;
use super::handle::Semaphore;
use super::raw::Queued;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::hold::LockKind;
use crate::lock::priority::{self, PRIORITY_REFRESH};
use crate::pubsub::Channel;
use crate::semaphore::shared::{check_name, check_permits, wait_for_permits};
use crate::semaphore::shared::{trace_outcome, Report};
use crate::time::{check_deadline, check_wait};
use crate::trace;

/// A plain semaphore's kind, as its trace span, metrics and history name it.
const KIND: LockKind = LockKind::Semaphore;

impl Semaphore {
    /// Takes `permits` permits, blocking until they are available. The guard gives them
    /// back when dropped (or [`release`](SemaphoreGuard::release)d);
    /// [`forget`](SemaphoreGuard::forget) keeps them taken, for the counting style of
    /// Redisson's `RSemaphore`, where anybody [`release`](Semaphore::release)s later.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for zero permits or an empty name, [`Error::WrongType`],
    /// connection errors. After an [`Error::Connection`] or [`Error::Timeout`] the acquire may
    /// have run: its receipt tells, and once the server answers, the permits it took are
    /// given back (see the guide's [safety chapter](crate::_guide::safety)). They stay taken
    /// only if the settle finds no receipt within about 4 s (the lost command arrives later)
    /// or the server stays unreachable for about 7 minutes: plain permits have no lease. A
    /// reply cut by a stop and resume of the process (`EINTR`) is no error: the acquire goes
    /// on.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// {
    ///     let _permits = sem.acquire(2)?;
    ///     // ... use two slots ...
    /// } // given back here
    ///
    /// // Redisson's counting style: taken here, released by whoever finishes the work.
    /// sem.acquire(1)?.forget();
    /// sem.release(1)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, permits: u32) -> Result<SemaphoreGuard> {
        match self.acquire_until(permits, None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("a wait without deadline only ends in success"),
        }
    }

    /// Takes `permits` permits if they are available now; never waits. `None` when they
    /// are not.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(_permit) = client.semaphore("slots").try_acquire(1)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, permits: u32) -> Result<Option<SemaphoreGuard>> {
        self.acquire_until(permits, Some(Instant::now()))
    }

    /// Takes `permits` permits, waiting at most `wait` (zero: one try); `None` if the wait
    /// ran out.
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
    /// let sem = client.semaphore("slots");
    /// if let Some(_permit) = sem.try_acquire_for(1, Duration::from_secs(2))? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<Option<SemaphoreGuard>> {
        check_wait(wait)?;
        self.try_acquire_until(permits, Instant::now() + wait)
    }

    /// Takes `permits` permits, waiting at most until `deadline` (a deadline in the past makes
    /// one attempt); `None` if the deadline passed.
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
    /// let deadline = Instant::now() + Duration::from_millis(500);
    /// if let Some(_permits) = client.semaphore("slots").try_acquire_until(2, deadline)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_until(
        &self,
        permits: u32,
        deadline: Instant,
    ) -> Result<Option<SemaphoreGuard>> {
        check_deadline(deadline)?;
        self.acquire_until(permits, Some(deadline))
    }

    /// The one acquire path: tries, then waits on the channel until `deadline` (forever when
    /// `None`), through the one wait function. Each attempt reports the count it saw, which
    /// wakes the other waiters those permits may serve.
    fn acquire_until(
        &self,
        permits: u32,
        deadline: Option<Instant>,
    ) -> Result<Option<SemaphoreGuard>> {
        check_name(&self.raw.name)?;
        check_permits(permits as usize)?;
        priority::check(self.raw.priority)?;
        let started = Instant::now();
        let span = trace::Span::acquire(KIND.as_str(), &self.raw.name, None);
        let _in_span = span.enter();
        let mut report = Report::new(&self.raw.client, &self.raw.name, KIND);
        let mut taken = None;
        let mut warned = false;
        // A waiter with a priority: its id in the queue, one for the whole call.
        let id = self.raw.priority.map(|_| self.raw.waiter_id());
        let channel = match id {
            None => Channel::permits(&self.raw.channel, permits),
            Some(_) => Channel::permits_every(&self.raw.channel, permits),
        };
        let got = wait_for_permits(&self.raw.client, channel, deadline, &mut || {
            let sent_at = Instant::now();
            let queued = id.as_deref().map(|id| Queued {
                id,
                waits: deadline.is_none_or(|d| d > sent_at),
            });
            let attempt = self.raw.attempt(permits, queued)?;
            if attempt.unset && deadline.is_none_or(|d| d > sent_at) && !warned {
                warned = true;
                self.raw.warn_unset();
            }
            taken = attempt.generation.map(|g| (g, attempt.request, sent_at));
            if taken.is_none() {
                report.missed(deadline);
            }
            Ok(match id {
                // It renews its place at least this often.
                Some(_) if taken.is_none() => attempt.tried.within_at_most(PRIORITY_REFRESH),
                _ => attempt.tried,
            })
        });
        if let (Some(id), false) = (&id, matches!(got, Ok(true))) {
            // Given up (or failed): its place goes, or ends within PLACE_KEPT if this fails.
            if let Err(e) = self.raw.leave(id) {
                log::debug!(
                    "a waiter of `{}` could not leave its queue ({e})",
                    self.raw.name
                );
            }
        }
        trace_outcome(&span, &got, permits, deadline, started);
        report.ended(&got, 1);
        if !got? {
            return Ok(None);
        }
        Ok(Some(SemaphoreGuard::new(
            self.clone(),
            permits,
            taken,
            report,
        )))
    }
}
