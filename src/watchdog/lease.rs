//! A hold's lease as the client knows it, shared by the watchdog and the guards: when it ends
//! ([`LeaseState`]), why it was lost ([`LostReason`]), the `on_lost` callbacks that hear of
//! it, and the [`Watch`] handle a guard keeps of its watchdog entry.
//!
//! Loss latches: a lease that ran out on the monotonic clock is never confirmed again (not by
//! a late renewal reply, not by a re-entry), so a guard that reported lost stays lost. The
//! `on_lost` callbacks of a lost entry are queued and run by the watchdog thread outside the
//! state lock; a guard's release removes its own callbacks and waits for any of them running.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::notice::Notice;
use crate::metrics::Recorder;

/// Why a [`LockGuard`](crate::LockGuard)'s hold (or a renewed
/// [`PermitGuard`](crate::PermitGuard)'s permit) was lost, as passed to
/// [`LockGuard::on_lost`](crate::LockGuard::on_lost) (and
/// [`PermitGuard::on_lost`](crate::PermitGuard::on_lost)) callbacks.
///
/// # Examples
///
/// ```no_run
/// use redlatch::LostReason;
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let guard = client.lock("ledger").lock()?;
/// guard.on_lost(|reason| match reason {
///     LostReason::NotHeld => log::warn!("ledger lock force-unlocked or taken"),
///     LostReason::LeaseExpired => log::warn!("ledger lock lease ran out"),
///     _ => log::warn!("ledger lock lost"),
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal found the lock gone: it was force-unlocked, deleted, or is held by another
    /// owner.
    NotHeld,
    /// The lease ran out before it was renewed: renewals failed (Redis unreachable, paused or
    /// slow) until the lease must have run out on the monotonic clock, or an explicit lease
    /// ([`Lock::with_lease`](crate::Lock::with_lease)) ran out.
    LeaseExpired,
    /// The client was closed ([`Client::close`](crate::Client::close)): nothing renews the
    /// lease any more, and the guard cannot release the lock, which stays held in Redis until
    /// its lease runs out.
    ClientClosed,
    /// The hold reached its maximum hold time
    /// ([`ConfigBuilder::max_hold`](crate::ConfigBuilder::max_hold),
    /// [`Lock::with_max_hold`](crate::Lock::with_max_hold)): the watchdog stopped renewing it
    /// and its lease ran out, so the lock is free in Redis for others.
    MaxHoldReached,
    /// A preemptor released the hold by force at its deadline, or stole it
    /// ([`Lock::preempt`](crate::Lock::preempt)); the guard's
    /// [`revocation`](crate::LockGuard::revocation) says who and why.
    Preempted,
}

/// A guard's `on_lost` callback.
pub(crate) type Callback = Box<dyn FnOnce(LostReason) + Send>;

/// One lost entry's callback, queued to run on the watchdog thread.
pub(super) struct Fire {
    pub(super) hold: u64,
    pub(super) name: Arc<str>,
    pub(super) reason: LostReason,
    pub(super) callback: Callback,
}

/// What a guard keeps of its watchdog entry: the entry, and its own hold in it (which its
/// callbacks are registered under).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    pub(super) id: u64,
    pub(super) hold: u64,
}

const LIVE: u8 = 0;
const NOT_HELD: u8 = 1;
const EXPIRED: u8 = 2;
const CLOSED: u8 = 3;
const MAX_HOLD: u8 = 4;
/// Live, but never renewed again: the cap was reached. Its lease end is a `MAX_HOLD` loss.
const FINAL: u8 = 5;
const PREEMPTED: u8 = 6;

/// The lease of one held lock as the client knows it, shared by the watchdog and the guards.
pub(crate) struct LeaseState {
    /// `LIVE`, `FINAL` (live, no longer renewed), or why it was lost (latched: never goes
    /// back to `LIVE` or `FINAL`).
    lost: AtomicU8,
    /// When the first acquire was sent; `renewed_us` counts from here.
    base: Instant,
    lease: Duration,
    /// When the lease was last known to be set in Redis (send time of the acquire or renewal
    /// that confirmed it), in µs after `base`.
    renewed_us: AtomicU64,
    /// A capped hold's cap, in µs after `base` (0: none): the lease is never known to last
    /// past it, whatever a re-entry confirms.
    cap_us: u64,
    /// Where a loss is counted (once, when it latches).
    metrics: Option<Arc<Recorder>>,
    /// A revocation the holder was told of, and the callbacks waiting for one.
    pub(crate) notice: Notice,
}

impl LeaseState {
    /// A lease of `lease` set by an acquire sent at `base`.
    pub(crate) fn new(base: Instant, lease: Duration) -> LeaseState {
        LeaseState {
            lost: AtomicU8::new(LIVE),
            base,
            lease,
            renewed_us: AtomicU64::new(0),
            cap_us: 0,
            metrics: None,
            notice: Notice::default(),
        }
    }

    /// This lease never lasts past `cap` (a hold's maximum hold time).
    pub(super) fn capped_at(mut self, cap: Instant) -> LeaseState {
        let us = cap.saturating_duration_since(self.base).as_micros();
        self.cap_us = u64::try_from(us).unwrap_or(u64::MAX).max(1);
        self
    }

    /// Counts this hold's loss in `metrics`.
    pub(crate) fn counted_by(mut self, metrics: &Arc<Recorder>) -> LeaseState {
        self.metrics = Some(Arc::clone(metrics));
        self
    }

    /// Why the hold is lost, if it is: a renewal found the lock gone, or the lease has run out
    /// since the last confirmed renewal (the server may have expired it: renewals are failing
    /// or late). Latches: once lost, always lost.
    pub(crate) fn lost(&self) -> Option<LostReason> {
        match self.lost.load(Ordering::Acquire) {
            LIVE | FINAL if Instant::now() < self.expires() => None,
            LIVE => Some(self.mark_lost(LostReason::LeaseExpired)),
            FINAL => Some(self.mark_lost(LostReason::MaxHoldReached)),
            code => Some(reason(code)),
        }
    }

    /// Whether the hold is no longer renewed because it reached its cap (lost or not yet).
    pub(super) fn is_final(&self) -> bool {
        matches!(self.lost.load(Ordering::Acquire), FINAL | MAX_HOLD)
    }

    /// Records that the hold reached its cap: it is not renewed again, and the end of its
    /// lease is a [`LostReason::MaxHoldReached`] loss. False if it is lost already.
    pub(super) fn finish(&self) -> bool {
        self.lost
            .compare_exchange(LIVE, FINAL, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// When the lease runs out, as far as the client knows (send time of the last
    /// confirmed acquire or renewal, plus the lease).
    pub(crate) fn expires(&self) -> Instant {
        let end =
            self.base + Duration::from_micros(self.renewed_us.load(Ordering::Acquire)) + self.lease;
        match self.cap_us {
            0 => end,
            cap => end.min(self.base + Duration::from_micros(cap)),
        }
    }

    /// Records a renewal (or re-entry) sent at `sent_at` that found the lock held; false if
    /// the lease had already run out (or was lost), which no confirmation can undo.
    pub(super) fn confirm(&self, sent_at: Instant) -> bool {
        if self.lost().is_some() {
            return false;
        }
        let us = sent_at.saturating_duration_since(self.base).as_micros() as u64;
        self.renewed_us.fetch_max(us, Ordering::AcqRel);
        // A reader may have seen the old lease run out meanwhile: it latched that.
        self.lost().is_none()
    }

    /// When the last acquire or renewal that found the hold alive was sent: a hold found gone
    /// was still held then.
    pub(crate) fn confirmed(&self) -> Instant {
        self.base + Duration::from_micros(self.renewed_us.load(Ordering::Acquire))
    }

    /// When a hold lost for `reason` ended, and whether its lease ran out: stamped no later
    /// than it ended, a lease's end as this client reckons it (or a closed client's, which
    /// holds until then), or, taken over or broken at a moment nobody saw, the last time it
    /// was found held.
    pub(crate) fn loss(&self, reason: LostReason) -> (Instant, bool) {
        let (at, expired) = match reason {
            LostReason::LeaseExpired | LostReason::MaxHoldReached => (self.expires(), true),
            LostReason::ClientClosed => (self.expires(), false),
            LostReason::NotHeld | LostReason::Preempted => (self.confirmed(), false),
        };
        (at.min(Instant::now()), expired)
    }

    /// When the first acquire was sent.
    pub(crate) fn base(&self) -> Instant {
        self.base
    }

    /// Records that the lock was acquired again at `sent_at` after a release nobody else saw
    /// (a condition wait: the hold was parked meanwhile): the lease runs from then, however
    /// long the wait was. False if the hold is latched lost.
    pub(crate) fn restart(&self, sent_at: Instant) -> bool {
        if !matches!(self.lost.load(Ordering::Acquire), LIVE | FINAL) {
            return false;
        }
        let us = sent_at.saturating_duration_since(self.base).as_micros() as u64;
        self.renewed_us.fetch_max(us, Ordering::AcqRel);
        true
    }

    /// Marks the hold lost for `why` unless it already is; returns the reason that stuck.
    pub(crate) fn mark_lost(&self, why: LostReason) -> LostReason {
        let code = match why {
            LostReason::NotHeld => NOT_HELD,
            LostReason::LeaseExpired => EXPIRED,
            LostReason::ClientClosed => CLOSED,
            LostReason::MaxHoldReached => MAX_HOLD,
            LostReason::Preempted => PREEMPTED,
        };
        let mut now = self.lost.load(Ordering::Acquire);
        while matches!(now, LIVE | FINAL) {
            match self
                .lost
                .compare_exchange(now, code, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if let Some(m) = &self.metrics {
                        m.lost_one();
                    }
                    return why;
                }
                Err(changed) => now = changed,
            }
        }
        reason(now)
    }
}

fn reason(code: u8) -> LostReason {
    match code {
        NOT_HELD => LostReason::NotHeld,
        CLOSED => LostReason::ClientClosed,
        MAX_HOLD => LostReason::MaxHoldReached,
        PREEMPTED => LostReason::Preempted,
        _ => LostReason::LeaseExpired,
    }
}

/// Runs one `on_lost` callback, catching (and logging) a panic so that it cannot take the
/// watchdog thread down.
pub(crate) fn call_lost(callback: Callback, reason: LostReason, name: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || callback(reason))) {
        let what = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string payload");
        log::warn!("an on_lost callback of lock `{name}` panicked ({reason:?}): {what}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_loss_latches_against_late_confirmations() {
        let t0 = Instant::now() - Duration::from_secs(2);
        let lease = LeaseState::new(t0, Duration::from_secs(1));
        assert_eq!(lease.lost(), Some(LostReason::LeaseExpired));
        assert!(
            !lease.confirm(Instant::now()),
            "a late renewal resurrected the lease"
        );
        assert_eq!(lease.lost(), Some(LostReason::LeaseExpired));
        let live = LeaseState::new(Instant::now(), Duration::from_secs(30));
        assert!(live.confirm(Instant::now()));
        assert_eq!(live.mark_lost(LostReason::NotHeld), LostReason::NotHeld);
        assert_eq!(
            live.mark_lost(LostReason::LeaseExpired),
            LostReason::NotHeld
        );
        assert!(!live.confirm(Instant::now()));
    }

    #[test]
    fn panicking_callback_is_caught() {
        call_lost(Box::new(|_| panic!("boom")), LostReason::NotHeld, "l");
    }
}
