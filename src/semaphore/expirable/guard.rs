//! [`PermitGuard`]: one permit of a [`PermitExpirableSemaphore`], released on drop.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handle::PermitExpirableSemaphore;
use super::id::PermitId;
use super::raw::RENEW_PERMIT;
use crate::error::Result;
use crate::semaphore::shared::{End, Report};
use crate::watchdog::{call_lost, LeaseState, LostReason, Renewal, Watch};

/// One permit taken from a [`PermitExpirableSemaphore`]; dropping the guard releases it.
///
/// Made by [`acquire`](PermitExpirableSemaphore::acquire) and its `try_*`
/// siblings. A permit belongs to no thread, so the guard is `Send`: it may be released by
/// another thread. Its lease still runs: a guard kept past its lease finds its permit gone
/// (back in the semaphore, maybe taken by another), and dropping it then logs a warning;
/// [`release`](Self::release) returns [`Error::UnknownPermit`](crate::Error::UnknownPermit)
/// instead. Dropping logs any other release error too.
///
/// A guard made by [`acquire_renewed`](PermitExpirableSemaphore::acquire_renewed)
/// (and its `try_*` siblings) has its permit's lease renewed by the client's watchdog for as
/// long as it lives. Such a permit can still be lost (removed from the semaphore by hand,
/// renewals failing for a whole lease, the client closed): poll [`is_lost`](Self::is_lost)
/// or register [`on_lost`](Self::on_lost).
///
/// # Examples
///
/// ```no_run
/// # use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let slots = client.permit_expirable_semaphore("render-slots");
/// {
///     let permit = slots.acquire(Duration::from_secs(60))?;
///     println!("rendering with permit {}", permit.id());
/// } // released here
/// # Ok(()) }
/// ```
#[must_use = "if unused the permit is released immediately"]
#[clippy::has_significant_drop]
pub struct PermitGuard {
    semaphore: PermitExpirableSemaphore,
    id: PermitId,
    released: bool,
    /// A renewed permit's watchdog entry, and the lease it shares with the watchdog. Taken
    /// on release.
    renewed: Option<(Watch, Arc<LeaseState>)>,
    /// The hold's events: its end.
    report: Report,
}

impl PermitGuard {
    /// The guard of a permit with a fixed lease: nothing watches it.
    pub(super) fn new(
        semaphore: PermitExpirableSemaphore,
        id: PermitId,
        report: Report,
    ) -> PermitGuard {
        PermitGuard {
            semaphore,
            id,
            released: false,
            renewed: None,
            report,
        }
    }

    /// The guard of a permit taken with the watchdog's lease by an attempt sent at
    /// `sent_at`: the watchdog renews it from now on.
    pub(super) fn renewed(
        semaphore: PermitExpirableSemaphore,
        id: PermitId,
        sent_at: Instant,
        report: Report,
    ) -> PermitGuard {
        let renewal = Renewal {
            field: Arc::from(id.as_str()),
            batch: &RENEW_PERMIT,
        };
        let watchdog = &semaphore.raw.client.inner.watchdog;
        let watched = watchdog.watch(&semaphore.raw.name, renewal, sent_at, 1, None);
        let mut report = report;
        if semaphore.raw.client.inner.history.is_some() {
            // The loss is recorded when the watchdog finds it, not only at the release.
            let (told, lease) = (report.telling(), Arc::clone(&watched.1));
            let callback = Box::new(move |reason: LostReason| {
                let (at, expired) = lease.loss(reason);
                told.broken(at, expired);
            });
            // Lost already (taken as the client closed): the release reports it.
            if watchdog.on_lost(watched.0, &watched.1, callback).is_some() {
                report.untold();
            }
        }
        log::debug!(
            "acquired permit {id} of semaphore `{}`, renewed by the watchdog",
            semaphore.raw.name
        );
        PermitGuard {
            semaphore,
            id,
            released: false,
            renewed: Some(watched),
            report,
        }
    }

    /// The id of the permit.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire(Duration::from_secs(30))?;
    /// assert_eq!(permit.id().as_str().len(), 32);
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &PermitId {
        &self.id
    }

    /// The semaphore the permit came from.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire(Duration::from_secs(30))?;
    /// assert_eq!(permit.semaphore().name(), "slots");
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self) -> &PermitExpirableSemaphore {
        &self.semaphore
    }

    /// How long the permit has left: as
    /// [`PermitExpirableSemaphore::remaining_lease`] for [`id`](Self::id).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::remaining_lease`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire(Duration::from_secs(30))?;
    /// if permit.remaining_lease()?.is_none() {
    ///     println!("the permit expired: stop");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.semaphore.remaining_lease(&self.id)
    }

    /// Sets the permit's lease to `lease` from now: as
    /// [`PermitExpirableSemaphore::update_lease`] for [`id`](Self::id). For a renewed permit
    /// this lasts until the watchdog's next renewal, which sets the lease back to the
    /// watchdog timeout.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::update_lease`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire(Duration::from_secs(10))?;
    /// permit.update_lease(Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn update_lease(&self, lease: Duration) -> Result<()> {
        self.semaphore.update_lease(&self.id, lease)
    }

    /// True once a renewed permit is known lost: a renewal found it no longer taken (released
    /// by id, removed from the semaphore's `{name}:timeout` set, or expired), no renewal
    /// confirmed it for a whole lease (Redis unreachable, paused or slow: checked on the
    /// monotonic clock), or the client was [closed](crate::Client::close). Once true it stays
    /// true. A lost permit must not be trusted to limit anybody.
    ///
    /// Always false for a permit with a fixed lease, which nothing watches: ask
    /// [`remaining_lease`](Self::remaining_lease) instead.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire_renewed()?;
    /// // ... work ...
    /// if permit.is_lost() {
    ///     // somebody took the permit away: do not commit
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost().is_some()
    }

    /// Calls `f` once, when this renewed permit becomes known lost, with the reason:
    /// [`NotHeld`] when a renewal finds it no longer taken, [`LeaseExpired`] when renewals
    /// failed until its lease must have run out, [`ClientClosed`] when the client is closed.
    /// If it is already known lost ([`is_lost`](Self::is_lost)), `f` is called at once, on
    /// the calling thread.
    ///
    /// As [`LockGuard::on_lost`](crate::LockGuard::on_lost): `f` runs on the watchdog thread
    /// (keep it quick, never block in it), and is never called once the guard is released,
    /// dropped or [forgotten](Self::forget). A permit with a fixed lease is not watched: `f`
    /// is dropped uncalled.
    ///
    /// [`NotHeld`]: crate::LostReason::NotHeld
    /// [`LeaseExpired`]: crate::LostReason::LeaseExpired
    /// [`ClientClosed`]: crate::LostReason::ClientClosed
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lost = Arc::new(AtomicBool::new(false));
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire_renewed()?;
    /// let flag = Arc::clone(&lost);
    /// permit.on_lost(move |_| flag.store(true, Ordering::Release));
    /// // ... work, checking `lost` ...
    /// # Ok(()) }
    /// ```
    pub fn on_lost(&self, f: impl FnOnce(LostReason) + Send + 'static) {
        let Some((watch, lease)) = &self.renewed else {
            return;
        };
        let callback = Box::new(f);
        if let Some(reason) = self.lost() {
            return call_lost(callback, reason, &self.semaphore.raw.name);
        }
        let watchdog = &self.semaphore.raw.client.inner.watchdog;
        if let Some((callback, reason)) = watchdog.on_lost(*watch, lease, callback) {
            call_lost(callback, reason, &self.semaphore.raw.name);
        }
    }

    /// Releases the permit and reports errors.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::release`]: [`Error::UnknownPermit`](crate::Error::UnknownPermit)
    /// if the permit's lease ran out (or somebody released it by id) first. For a renewed
    /// permit already known lost ([`is_lost`](Self::is_lost)) nothing is sent, and the error
    /// is [`Error::UnknownPermit`](crate::Error::UnknownPermit) too.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// slots.acquire(Duration::from_secs(30))?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        self.finish()
    }

    /// Keeps the permit taken: the guard is dropped without releasing it, and the id is
    /// returned, to release it later by id (or let its lease run out).
    ///
    /// A renewed permit is renewed no more (its `on_lost` callbacks are dropped uncalled): it
    /// stays taken until its lease, at most one watchdog timeout, runs out, unless
    /// [`update_lease`](PermitExpirableSemaphore::update_lease) gives it a longer one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(30))?.forget();
    /// // ... hand `id` to another process, which releases it
    /// slots.release(&id)?;
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) -> PermitId {
        self.released = true;
        self.unwatch();
        self.report.hold_ended(End::Kept);
        std::mem::replace(&mut self.id, PermitId::new(String::new()))
    }

    /// Why a renewed permit is lost, if it is: its lease says so, or the client was closed
    /// (latched in the lease). None for a permit with a fixed lease.
    fn lost(&self) -> Option<LostReason> {
        let (_, lease) = self.renewed.as_ref()?;
        lease.lost().or_else(|| {
            self.semaphore
                .raw
                .client
                .is_closed()
                .then(|| lease.mark_lost(LostReason::ClientClosed))
        })
    }

    /// Stops the renewal of a renewed permit, dropping its callbacks.
    fn unwatch(&mut self) {
        if let Some((watch, _)) = self.renewed.take() {
            self.semaphore.raw.client.inner.watchdog.unwatch(watch);
        }
    }

    /// Releases the permit: a renewed one is unwatched first, and not released at all if it
    /// is known lost.
    fn finish(&mut self) -> Result<()> {
        self.released = true;
        let lost = self.lost();
        let lease = self.renewed.as_ref().map(|(_, lease)| Arc::clone(lease));
        self.unwatch();
        if let Some(reason) = lost {
            log::warn!(
                "permit {} of semaphore `{}` was lost ({reason:?}) before its guard released \
                 it; not releasing",
                self.id,
                self.semaphore.raw.name
            );
            self.report.hold_ended(End::Lost);
            return Err(self.semaphore.unknown(&self.id));
        }
        let released = self.semaphore.try_release(&self.id);
        // A release that failed leaves the permit to its lease: no longer this hold.
        self.report.hold_ended(match released {
            Ok(true) => End::Released,
            Ok(false) => End::Lost,
            Err(_) => End::Kept,
        });
        if released? {
            log::debug!(
                "released permit {} of semaphore `{}`",
                self.id,
                self.semaphore.raw.name
            );
            return Ok(());
        }
        if let Some(lease) = lease {
            lease.mark_lost(LostReason::NotHeld);
        }
        Err(self.semaphore.unknown(&self.id))
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.finish() {
            Ok(()) => {}
            Err(e) if e.is_unknown_permit() => log::warn!(
                "permit {} of semaphore `{}` was gone when its guard was dropped: its lease \
                 ran out, or it was released by id",
                self.id,
                self.semaphore.name()
            ),
            Err(e) => log::warn!(
                "releasing permit {} of semaphore `{}` failed: {e}",
                self.id,
                self.semaphore.name()
            ),
        }
    }
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.semaphore.name())
            .field("id", &self.id)
            .field("renewed", &self.renewed.is_some())
            .field("lost", &self.is_lost())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::PermitGuard;

    #[test]
    fn a_permit_guard_may_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<PermitGuard>();
        fn sync<T: Sync>() {}
        sync::<PermitGuard>();
    }
}
