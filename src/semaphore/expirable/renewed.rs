//! Permits renewed by the watchdog: the acquires that hand back a renewed [`PermitGuard`],
//! and the [`BatchRenewal`] (`lua/pes_renew.lua`) the watchdog renews them with. To the
//! watchdog a permit is an entry like a lock hold: the semaphore's name and, as its field,
//! the permit id.

use std::time::{Duration, Instant};

use super::acquire::one;
use super::guard::PermitGuard;
use super::handle::PermitExpirableSemaphore;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::time::{check_deadline, check_wait};

impl PermitExpirableSemaphore {
    /// Takes one permit, waiting as long as it takes, and returns a guard whose permit the
    /// client's watchdog renews for as long as the guard lives: its lease is the
    /// [watchdog timeout](crate::ConfigBuilder::watchdog_timeout), renewed every third of it
    /// (in the same batched calls as the client's locks). If the process dies, the permit
    /// goes back to the semaphore within one watchdog timeout.
    ///
    /// The guard reports a permit that stops being renewed ([`PermitGuard::is_lost`],
    /// [`PermitGuard::on_lost`]). Renewed permits are not capped by
    /// [`ConfigBuilder::max_hold`](crate::ConfigBuilder::max_hold).
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
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// let permit = slots.acquire_renewed()?;
    /// // ... render for as long as it takes; a crash frees the permit within 30 s
    /// permit.release()?;
    /// # Ok(()) }
    /// ```
    pub fn acquire_renewed(&self) -> Result<PermitGuard> {
        match self.renewed_until(None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("an acquire without a deadline waits until it succeeds"),
        }
    }

    /// As [`acquire_renewed`](Self::acquire_renewed), but makes one attempt:
    /// `Ok(None)` if no permit is free.
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
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// if let Some(_permit) = slots.try_acquire_renewed()? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_renewed(&self) -> Result<Option<PermitGuard>> {
        self.renewed_until(Some(Instant::now()))
    }

    /// As [`acquire_renewed`](Self::acquire_renewed), waiting at most `wait`:
    /// `Ok(None)` if no permit came free in time.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year (a zero wait is one try); otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// if let Some(_permit) = slots.try_acquire_renewed_for(Duration::from_secs(3))? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_renewed_for(&self, wait: Duration) -> Result<Option<PermitGuard>> {
        check_wait(wait)?;
        self.try_acquire_renewed_until(Instant::now() + wait)
    }

    /// As [`acquire_renewed`](Self::acquire_renewed), waiting at most until
    /// `deadline` (one already past makes one attempt): `Ok(None)` if no permit came free in
    /// time.
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
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// if let Some(_permit) = slots.try_acquire_renewed_until(deadline)? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_renewed_until(&self, deadline: Instant) -> Result<Option<PermitGuard>> {
        check_deadline(deadline)?;
        self.renewed_until(Some(deadline))
    }

    /// The one renewed acquire: a permit with the watchdog's lease, watched from the send
    /// time of the attempt that took it.
    fn renewed_until(&self, deadline: Option<Instant>) -> Result<Option<PermitGuard>> {
        let lease = self.raw.client.inner.config.watchdog_timeout;
        Ok(self
            .acquire_sent(1, lease, deadline)?
            .map(|(ids, sent_at, report)| {
                PermitGuard::renewed(self.clone(), one(ids), sent_at, report)
            }))
    }
}
