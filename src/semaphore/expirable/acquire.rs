//! Taking permits with a fixed lease from a [`PermitExpirableSemaphore`]: one or many, by id
//! or as a [`PermitGuard`], at once, for a while or until a deadline. Every acquire, these and
//! the renewed ones (`renewed.rs`), ends in the one acquire path, which waits through
//! `pubsub::wait`.

use std::time::{Duration, Instant};

use super::guard::PermitGuard;
use super::handle::PermitExpirableSemaphore;
use super::id::PermitId;
use super::raw::check_count;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::semaphore::shared::{check_name, wait_for_permits};
use crate::time::{check_deadline, check_duration};

impl PermitExpirableSemaphore {
    /// Takes a permit that expires after `lease` (rounded up to whole milliseconds) unless
    /// [released](Self::release) or [renewed](Self::update_lease) first, blocking until one
    /// is free.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name, a zero lease or one over a year),
    /// [`Error::WrongType`] (a key is not a semaphore's), [`Error::Connection`] or
    /// [`Error::Timeout`] (Redis unreachable; if the reply to a successful attempt was lost,
    /// the permit stays taken until its lease runs out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(30))?;
    /// slots.release(&id)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, lease: Duration) -> Result<PermitId> {
        self.acquire_many(1, lease).map(one)
    }

    /// Takes a permit with the given `lease` if one is free; never waits. Returns `Ok(None)`
    /// when none is.
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
    ///     Some(id) => slots.release(&id)?,
    ///     None => println!("all slots busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, lease: Duration) -> Result<Option<PermitId>> {
        Ok(self.try_acquire_many(1, lease)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most `wait`. Returns `Ok(None)` if
    /// the wait ran out. What is acquired (the lease) comes first, as in every acquire call.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait (use [`try_acquire`](Self::try_acquire))
    /// or one over a year; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let (lease, wait) = (Duration::from_secs(30), Duration::from_secs(3));
    /// if let Some(id) = slots.try_acquire_id_for(lease, wait)? {
    ///     slots.release(&id)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_id_for(&self, lease: Duration, wait: Duration) -> Result<Option<PermitId>> {
        Ok(self.try_acquire_many_for(1, lease, wait)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most until `deadline` (a deadline in
    /// the past makes one attempt). Returns `Ok(None)` if the deadline passed.
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
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let id = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_id_until(Duration::from_secs(30), deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_id_until(
        &self,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<PermitId>> {
        Ok(self.try_acquire_many_until(1, lease, deadline)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_for`](Self::try_acquire_id_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// # #[allow(deprecated)]
    /// let id = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_for(Duration::from_secs(3), Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    #[deprecated(
        note = "use `try_acquire_id_for(lease, wait)`: the same call with the lease first, as \
                what is acquired comes first in every acquire call"
    )]
    pub fn try_acquire_for(&self, wait: Duration, lease: Duration) -> Result<Option<PermitId>> {
        self.try_acquire_id_for(lease, wait)
    }

    /// Takes a permit with the given `lease`, waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_until`](Self::try_acquire_id_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// # #[allow(deprecated)]
    /// let id = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_until(deadline, Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    #[deprecated(
        note = "use `try_acquire_id_until(lease, deadline)`: the same call with the lease \
                first, as what is acquired comes first in every acquire call"
    )]
    pub fn try_acquire_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        self.try_acquire_id_until(lease, deadline)
    }

    /// Takes `permits` permits at once, all with the same `lease`, blocking until that many
    /// are free; returns their ids (Redisson's `acquire(permits, leaseTime, unit)`). All or
    /// nothing: one script call takes every permit or none, so two callers waiting for 3 of
    /// 4 permits never deadlock holding 2 each. Each permit is then its own: release or renew
    /// them one by one, or together with [`try_release_many`](Self::try_release_many).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for 0 permits or more than 10,000; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let ids = slots.acquire_many(3, Duration::from_secs(30))?;
    /// assert_eq!(ids.len(), 3);
    /// assert_eq!(slots.try_release_many(&ids)?, 3);
    /// # Ok(()) }
    /// ```
    pub fn acquire_many(&self, permits: u32, lease: Duration) -> Result<Vec<PermitId>> {
        match self.acquire_until(permits, lease, None)? {
            Some(ids) => Ok(ids),
            None => unreachable!("a wait without deadline only ends in permits"),
        }
    }

    /// Takes `permits` permits with the given `lease` if that many are free; never waits.
    /// Returns `Ok(None)` when fewer are (nothing is taken).
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
    /// if let Some(ids) = slots.try_acquire_many(2, Duration::from_secs(30))? {
    ///     slots.try_release_many(&ids)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many(&self, permits: u32, lease: Duration) -> Result<Option<Vec<PermitId>>> {
        self.acquire_until(permits, lease, Some(Instant::now()))
    }

    /// Takes `permits` permits with the given `lease`, waiting at most `wait` for that many
    /// to be free at once. Returns `Ok(None)` if the wait ran out (nothing is taken).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait or one over a year; otherwise as
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let (lease, wait) = (Duration::from_secs(30), Duration::from_secs(3));
    /// if let Some(ids) = slots.try_acquire_many_for(2, lease, wait)? {
    ///     slots.try_release_many(&ids)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_for(
        &self,
        permits: u32,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<Vec<PermitId>>> {
        check_duration("wait", wait)?;
        self.try_acquire_many_until(permits, lease, Instant::now() + wait)
    }

    /// Takes `permits` permits with the given `lease`, waiting at most until `deadline` (a
    /// deadline in the past makes one attempt). Returns `Ok(None)` if the deadline passed.
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
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let ids = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_many_until(2, Duration::from_secs(30), deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_until(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<Vec<PermitId>>> {
        check_deadline(deadline)?;
        self.acquire_until(permits, lease, Some(deadline))
    }

    /// As [`acquire`](Self::acquire), returning a guard that releases the permit on drop.
    /// The guard is `Send`: a permit belongs to no thread.
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
    /// let permit = slots.acquire_guard(Duration::from_secs(30))?;
    /// std::thread::spawn(move || {
    ///     // ... render; the permit is released when this thread drops it
    ///     drop(permit);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn acquire_guard(&self, lease: Duration) -> Result<PermitGuard> {
        self.acquire(lease)
            .map(|id| PermitGuard::new(self.clone(), id))
    }

    /// As [`try_acquire`](Self::try_acquire), returning a guard that releases on drop.
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
    /// if let Some(_permit) = slots.try_acquire_guard(Duration::from_secs(30))? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard(&self, lease: Duration) -> Result<Option<PermitGuard>> {
        Ok(self
            .try_acquire(lease)?
            .map(|id| PermitGuard::new(self.clone(), id)))
    }

    /// As [`try_acquire_id_for`](Self::try_acquire_id_for), returning a guard that releases
    /// on drop.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_for`](Self::try_acquire_id_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let (lease, wait) = (Duration::from_secs(30), Duration::from_secs(3));
    /// if let Some(_permit) = slots.try_acquire_guard_for(lease, wait)? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_for(
        &self,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<PermitGuard>> {
        Ok(self
            .try_acquire_id_for(lease, wait)?
            .map(|id| PermitGuard::new(self.clone(), id)))
    }

    /// As [`try_acquire_id_until`](Self::try_acquire_id_until), returning a guard that
    /// releases on drop.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_until`](Self::try_acquire_id_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if let Some(_permit) = slots.try_acquire_guard_until(Duration::from_secs(30), deadline)? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_until(
        &self,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<PermitGuard>> {
        Ok(self
            .try_acquire_id_until(lease, deadline)?
            .map(|id| PermitGuard::new(self.clone(), id)))
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
    ) -> Result<Option<Vec<PermitId>>> {
        Ok(self
            .acquire_sent(permits, lease, deadline)?
            .map(|(ids, _)| ids))
    }

    /// As [`acquire_until`](Self::acquire_until), also returning when the attempt that took
    /// the permits was sent: their lease runs from no earlier than that.
    pub(super) fn acquire_sent(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<(Vec<PermitId>, Instant)>> {
        check_name(&self.raw.name)?;
        check_count(permits as usize)?;
        check_duration("lease", lease)?;
        // The same ids for every attempt: a failed attempt stores nothing under them.
        let ids: Vec<PermitId> = (0..permits).map(|_| PermitId::random()).collect();
        let mut sent_at = Instant::now();
        let taken = wait_for_permits(
            &self.raw.client,
            &self.raw.channel,
            permits,
            deadline,
            &mut || {
                sent_at = Instant::now();
                self.raw.attempt(&ids, lease)
            },
        )?;
        Ok(taken.then_some((ids, sent_at)))
    }
}

/// The id of a call that took one permit.
pub(super) fn one(mut ids: Vec<PermitId>) -> PermitId {
    debug_assert_eq!(ids.len(), 1);
    ids.swap_remove(0)
}
