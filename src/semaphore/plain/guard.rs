//! [`SemaphoreGuard`]: permits taken from a [`Semaphore`], given back on drop, and watched
//! for the loss of the semaphore they came from.

use std::sync::Arc;
use std::time::Instant;

use super::handle::Semaphore;
use super::raw::{guard_field, Released, CHECK_GENERATION};
use crate::error::{Error, Result};
use crate::semaphore::shared::{End, Report};
use crate::watchdog::{call_lost, LeaseState, LostReason, Renewal, Watch};

/// Permits taken from a [`Semaphore`]; dropping the guard gives them back.
///
/// Permits have no owner, so the guard is `Send`: it may be released by another thread.
/// Dropping logs a release error; [`release`](Self::release) returns it.
///
/// The permits belong to the semaphore as it was when they were taken (its generation, kept
/// beside the count). If the server loses the semaphore (a restart without persistence, a
/// failover to a replica that lacked it; or it expires) and it is set up again, the guard is
/// lost: [`is_lost`](Self::is_lost) turns true and [`on_lost`](Self::on_lost) callbacks run
/// (checked by the client's watchdog every third of the
/// [watchdog timeout](crate::ConfigBuilder::watchdog_timeout), and at once when the
/// connection to the server comes back), and its release gives nothing back
/// ([`Error::PermitsLost`]): the semaphore keeps the permits it was set to.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let permit = client.semaphore("slots").acquire(2)?;
/// assert_eq!(permit.permits(), 2);
/// permit.release()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the permits are released immediately"]
#[clippy::has_significant_drop]
pub struct SemaphoreGuard {
    semaphore: Semaphore,
    permits: u32,
    released: bool,
    /// The generation the permits were taken in, the guard's watchdog entry (which checks
    /// it), and the state it shares with the watchdog. `None` once released or forgotten.
    held: Option<Held>,
    /// The hold's events: its end.
    report: Report,
}

/// What a live guard keeps of its permits' generation.
struct Held {
    generation: Arc<str>,
    watch: Watch,
    lease: Arc<LeaseState>,
}

impl SemaphoreGuard {
    /// The guard of `permits` taken by an attempt sent at `sent_at`, numbered `request`, from
    /// generation `generation` (`taken`): the watchdog checks that generation from now on.
    pub(super) fn new(
        semaphore: Semaphore,
        permits: u32,
        taken: Option<(Arc<str>, u64, Instant)>,
        report: Report,
    ) -> SemaphoreGuard {
        let held = taken.map(|(generation, request, sent_at)| {
            let renewal = Renewal {
                field: guard_field(&generation, request),
                batch: &CHECK_GENERATION,
            };
            let watchdog = &semaphore.raw.client.inner.watchdog;
            let (watch, lease) = watchdog.watch(&semaphore.raw.name, renewal, sent_at, 1, None);
            Held {
                generation,
                watch,
                lease,
            }
        });
        SemaphoreGuard {
            semaphore,
            permits,
            released: false,
            held,
            report,
        }
    }

    /// How many permits this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// assert_eq!(client.semaphore("slots").acquire(3)?.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore the permits came from.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client.semaphore("slots").acquire(1)?;
    /// assert_eq!(permit.semaphore().name(), "slots");
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    /// True once the permits are known lost: the semaphore they were taken from is gone
    /// (the server lost its data, or it expired or was deleted) or was made anew, or the
    /// client was [closed](crate::Client::close). Once true it stays true. The permits no
    /// longer limit anybody: the semaphore made anew counts its own.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client.semaphore("slots").acquire(1)?;
    /// // ... work ...
    /// if permit.is_lost() {
    ///     // the semaphore was lost with the server's data: others may be running too
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost().is_some()
    }

    /// Calls `f` once, when these permits become known lost, with the reason:
    /// [`NotHeld`](LostReason::NotHeld) when a check finds the semaphore gone or made anew,
    /// [`ClientClosed`](LostReason::ClientClosed) when the client is closed. If they are
    /// already known lost ([`is_lost`](Self::is_lost)), `f` is called at once, on the calling
    /// thread.
    ///
    /// As [`LockGuard::on_lost`](crate::LockGuard::on_lost): `f` runs on the watchdog thread
    /// (keep it quick, never block in it), and is never called once the guard is released,
    /// dropped or [forgotten](Self::forget).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lost = Arc::new(AtomicBool::new(false));
    /// let permit = client.semaphore("slots").acquire(1)?;
    /// let flag = Arc::clone(&lost);
    /// permit.on_lost(move |_| flag.store(true, Ordering::Release));
    /// # Ok(()) }
    /// ```
    pub fn on_lost(&self, f: impl FnOnce(LostReason) + Send + 'static) {
        let Some(held) = &self.held else {
            return;
        };
        let callback = Box::new(f);
        let name = &self.semaphore.raw.name;
        if let Some(reason) = self.lost() {
            return call_lost(callback, reason, name);
        }
        let watchdog = &self.semaphore.raw.client.inner.watchdog;
        if let Some((callback, reason)) = watchdog.on_lost(held.watch, &held.lease, callback) {
            call_lost(callback, reason, name);
        }
    }

    /// Gives the permits back and reports errors.
    ///
    /// # Errors
    ///
    /// [`Error::PermitsLost`] when the semaphore is no longer the one the permits were taken
    /// from (see [`is_lost`](Self::is_lost)): nothing is given back. Otherwise as
    /// [`Semaphore::release`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// client.semaphore("slots").acquire(1)?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        self.finish()
    }

    /// Keeps the permits taken: the guard is dropped without giving them back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("one-shot");
    /// sem.acquire(1)?.forget(); // consumed for good
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) {
        self.released = true;
        self.unwatch();
        self.report.hold_ended(End::Kept);
    }

    /// Why the permits are lost, if they are: the watchdog's check said so, or the client
    /// was closed (latched in the state shared with the watchdog).
    fn lost(&self) -> Option<LostReason> {
        let held = self.held.as_ref()?;
        held.lease.lost().or_else(|| {
            self.semaphore
                .raw
                .client
                .is_closed()
                .then(|| held.lease.mark_lost(LostReason::ClientClosed))
        })
    }

    /// Stops the watchdog's checks, dropping the callbacks; returns the generation.
    fn unwatch(&mut self) -> Option<Arc<str>> {
        let held = self.held.take()?;
        self.semaphore.raw.client.inner.watchdog.unwatch(held.watch);
        Some(held.generation)
    }

    /// Gives the permits back into their generation; a release the semaphore drops (made
    /// anew since) is [`Error::PermitsLost`].
    fn finish(&mut self) -> Result<()> {
        self.released = true;
        let generation = self.unwatch();
        let raw = &self.semaphore.raw;
        let released = raw.release(self.permits, generation.as_deref());
        // A release that failed leaves the permits to the settle: no longer this hold.
        self.report.hold_ended(match &released {
            Ok(Released::Given(_)) => End::Released,
            Ok(Released::Dropped(_)) => End::Lost,
            Err(_) => End::Kept,
        });
        match released? {
            Released::Given(_) => Ok(()),
            Released::Dropped(_) => {
                log::warn!(
                    "{} permit(s) of semaphore `{}` not given back: it was made anew since \
                     they were taken (the server lost its data, or it expired)",
                    self.permits,
                    raw.name
                );
                Err(Error::PermitsLost {
                    name: raw.given.to_string(),
                    permits: self.permits,
                })
            }
        }
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.finish() {
            Ok(()) => {}
            Err(e) if e.is_permits_lost() => {} // logged
            Err(e) => log::warn!(
                "releasing {} permits of semaphore `{}` failed: {e}",
                self.permits,
                self.semaphore.raw.name
            ),
        }
    }
}

impl std::fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreGuard")
            .field("semaphore", &self.semaphore.raw.name)
            .field("permits", &self.permits)
            .field("lost", &self.is_lost())
            .finish()
    }
}
