//! Taking permits from a [`Semaphore`]: by count or as a [`SemaphoreGuard`], at once, for a
//! while or until a deadline. Every acquire ends in the one acquire path, which waits through
//! `pubsub::wait`.

use std::time::{Duration, Instant};

use super::guard::SemaphoreGuard;
use super::handle::Semaphore;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::semaphore::shared::{check_name, check_permits, wait_for_permits};
use crate::time::{check_deadline, check_duration};

impl Semaphore {
    /// Takes `permits` permits, blocking until they are available.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for zero permits or an empty name, [`Error::WrongType`],
    /// connection errors. After an [`Error::Connection`] or [`Error::Timeout`] the outcome is
    /// unknown: the permits may have been taken, and nothing gives them back (permits have no
    /// lease; a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) bounds such a
    /// loss).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// sem.acquire(2)?;
    /// // ... use two slots ...
    /// sem.release(2)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, permits: u32) -> Result<()> {
        match self.acquire_until(permits, None)? {
            true => Ok(()),
            false => unreachable!("a wait without deadline only ends in success"),
        }
    }

    /// Takes `permits` permits if they are available now; never waits.
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
    /// let sem = client.semaphore("slots");
    /// if sem.try_acquire(1)? {
    ///     // ...
    ///     sem.release(1)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, permits: u32) -> Result<bool> {
        self.acquire_until(permits, Some(Instant::now()))
    }

    /// Takes `permits` permits, waiting at most `wait`; returns false if the wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait (use [`try_acquire`](Self::try_acquire)) or
    /// one over a year; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// if sem.try_acquire_for(1, Duration::from_secs(2))? {
    ///     sem.release(1)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<bool> {
        check_duration("wait", wait)?;
        self.try_acquire_until(permits, Instant::now() + wait)
    }

    /// Takes `permits` permits, waiting at most until `deadline` (a deadline in the past makes
    /// one attempt); returns false if the deadline passed.
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
    /// let got = client.semaphore("slots").try_acquire_until(1, deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_until(&self, permits: u32, deadline: Instant) -> Result<bool> {
        check_deadline(deadline)?;
        self.acquire_until(permits, Some(deadline))
    }

    /// As [`acquire`](Self::acquire), returning a guard that releases the permits on drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// let permit = sem.acquire_guard(1)?;
    /// std::thread::spawn(move || {
    ///     // ... work; the permit is released when this thread drops it
    ///     drop(permit);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn acquire_guard(&self, permits: u32) -> Result<SemaphoreGuard> {
        self.acquire(permits)?;
        Ok(SemaphoreGuard::new(self.clone(), permits))
    }

    /// As [`try_acquire`](Self::try_acquire), returning a guard that releases on drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(_permit) = client.semaphore("slots").try_acquire_guard(1)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard(&self, permits: u32) -> Result<Option<SemaphoreGuard>> {
        Ok(self
            .try_acquire(permits)?
            .then(|| SemaphoreGuard::new(self.clone(), permits)))
    }

    /// As [`try_acquire_for`](Self::try_acquire_for), returning a guard that releases on drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// if let Some(_permit) = sem.try_acquire_guard_for(1, Duration::from_secs(1))? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphoreGuard>> {
        Ok(self
            .try_acquire_for(permits, wait)?
            .then(|| SemaphoreGuard::new(self.clone(), permits)))
    }

    /// As [`try_acquire_until`](Self::try_acquire_until), returning a guard that releases on
    /// drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// let sem = client.semaphore("slots");
    /// if let Some(_permits) = sem.try_acquire_guard_until(2, deadline)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_until(
        &self,
        permits: u32,
        deadline: Instant,
    ) -> Result<Option<SemaphoreGuard>> {
        Ok(self
            .try_acquire_until(permits, deadline)?
            .then(|| SemaphoreGuard::new(self.clone(), permits)))
    }

    /// The one acquire path: tries, then waits on the channel until `deadline` (forever when
    /// `None`), through the one wait function. Each attempt reports the count it saw, which
    /// wakes the other waiters those permits may serve.
    fn acquire_until(&self, permits: u32, deadline: Option<Instant>) -> Result<bool> {
        check_name(&self.raw.name)?;
        check_permits(permits as usize)?;
        wait_for_permits(
            &self.raw.client,
            &self.raw.channel,
            permits,
            deadline,
            &mut || self.raw.attempt(permits),
        )
    }
}
