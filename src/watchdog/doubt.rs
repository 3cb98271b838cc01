//! Acquires whose reply never came: a reply that timed out, or a connection that broke after
//! the command was sent. Such an acquire may have run, or may still run once the server
//! answers again (a paused server runs what it had queued when it resumes), and then it holds
//! something no guard knows of: a lock hold renewed by nobody, a place in a fair queue.
//!
//! Its owner hands in what settles it (a [`Settle`]: read what the server has, give back what
//! no guard holds), keyed by the hold's name and field. It runs once the server answers:
//!
//! - at the owner's next acquire or release of that hold ([`Watchdog::settle_first`]), on the
//!   owner's thread, before its own call: so the settle never races the owner's own holds;
//! - otherwise on the watchdog thread, tried every [`RETRY`] until it succeeds.
//!
//! A settle is told how many acquires are in doubt and how many holds of the name and field
//! the client's guards have (renewed, or counted here when their lease is explicit), so that it gives back no more than the doubted
//! acquires took and never a hold a guard has.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::settle::{Settle, Settled, Unsettled};
use super::state::{Key, State};
use super::{Shared, Watchdog};
use crate::error::{Error, Result};

/// How soon the watchdog thread tries a settle whose server did not answer; each failure
/// doubles it, up to [`MAX_RETRY`].
pub(super) const RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(4);
/// Failures after which a settle is given up (about 7 minutes of tries): its hold, if any,
/// is left to its lease.
const MAX_TRIES: u32 = 100;
/// How many times a settle that found nothing looks again (over about 4 s).
const LOOKS: u32 = 4;

impl Watchdog {
    /// Records a call of `name` by `field` whose reply never came (an acquire, or an unlock
    /// made good the same way); `settle` gives back what it may have left (kept from the
    /// first doubt while one is pending). False when the client is closing: nothing is
    /// recorded, and nothing will settle it.
    pub(crate) fn doubt(&self, name: &Arc<str>, field: &Arc<str>, settle: Settle) -> bool {
        let mut st = self.shared.state.lock();
        if st.is_shutdown() {
            return false;
        }
        let key = (Arc::clone(name), Arc::clone(field));
        // `settle` comes back unused when a doubt is pending: it is dropped outside the lock.
        let unused = st.add_doubt(key, settle, Instant::now() + RETRY);
        if unused.is_none() {
            self.shared.unsettled.fetch_add(1, Ordering::Release);
        }
        drop(st);
        log::debug!(
            "a call on `{name}` (owner {field}) lost its reply: settled when the server answers"
        );
        self.shared.changed.notify_one();
        true
    }

    /// The holds of `name` by `field` the client's guards have (renewed, or with an
    /// explicit lease).
    pub(crate) fn known_holds(&self, name: &Arc<str>, field: &Arc<str>) -> u32 {
        self.shared.state.lock().known_holds(name, field)
    }

    /// Settles the acquires in doubt of `name` by `field`, if any, before the owner's next
    /// call on that hold: runs the settle here, or waits for the watchdog thread's run of it.
    ///
    /// # Errors
    ///
    /// The settle's (the server does not answer yet); the doubt stays.
    pub(crate) fn settle_first(&self, name: &Arc<str>, field: &Arc<str>) -> Result<()> {
        if !self.any_unsettled() {
            return Ok(());
        }
        let key = (Arc::clone(name), Arc::clone(field));
        let mut st = self.shared.state.lock();
        loop {
            match st.take_settle(&key) {
                Some(settle) => return self.shared.settle(&mut st, key, settle, true),
                // Being run by the watchdog thread.
                None if st.has_doubt(&key) => self.shared.settled.wait(&mut st),
                None => return Ok(()),
            }
        }
    }

    /// The holds of `name` the client's guards have (renewed, or with an explicit lease),
    /// for each field that starts with `prefix`: a hold of one set of values of a group lock
    /// among the owner's others.
    pub(crate) fn known_holds_like(&self, name: &Arc<str>, prefix: &str) -> Vec<(Arc<str>, u32)> {
        self.shared.state.lock().known_holds_like(name, prefix)
    }

    /// [`settle_first`](Self::settle_first) for every field of `name` that starts with
    /// `prefix`: before a call of the owner's on one set of a group lock's values, the
    /// doubts of all its sets are settled, since they count the same values.
    ///
    /// # Errors
    ///
    /// The first settle's that fails (the server does not answer yet); its doubt stays.
    pub(crate) fn settle_first_like(&self, name: &Arc<str>, prefix: &str) -> Result<()> {
        if !self.any_unsettled() {
            return Ok(());
        }
        let mut st = self.shared.state.lock();
        // Each doubt is run once here: one that looks again later stays behind.
        let mut ran: Vec<Key> = Vec::new();
        while let Some(key) = st.doubt_like(name, prefix, &ran) {
            match st.take_settle(&key) {
                Some(settle) => {
                    ran.push(key.clone());
                    self.shared.settle(&mut st, key, settle, true)?;
                }
                // Being run by the watchdog thread.
                None => self.shared.settled.wait(&mut st),
            }
        }
        Ok(())
    }

    /// Counts a hold of `name` by `field` with an explicit lease (`held`), or its release.
    /// Returns the holds the client's guards have then (see [`known_holds`](Self::known_holds)).
    pub(crate) fn count_explicit(&self, name: &Arc<str>, field: Arc<str>, held: bool) -> u32 {
        self.shared.state.lock().count_explicit(name, field, held)
    }

    /// How many holds have calls in doubt (`Metrics::unsettled`).
    pub(crate) fn unsettled(&self) -> u64 {
        self.shared.unsettled.load(Ordering::Acquire) as u64
    }

    /// Whether any acquire is in doubt: the owners' calls look no further when none is.
    pub(crate) fn any_unsettled(&self) -> bool {
        self.shared.unsettled.load(Ordering::Acquire) > 0
    }
}

impl Shared {
    /// Runs `settle` (taken out of the doubt of `key`) outside the lock. Done: the doubt is
    /// removed, less any acquire doubted meanwhile (settled next); failed (a panic counts as
    /// a failure): it is put back and the thread told, to try it again after its back-off,
    /// or given up after [`MAX_TRIES`].
    pub(super) fn settle(
        &self,
        st: &mut MutexGuard<'_, State>,
        key: Key,
        mut settle: Settle,
        by_owner: bool,
    ) -> Result<()> {
        let acquires = st.doubted_acquires(&key);
        let known_holds = st.known_holds(&key.0, &key.1);
        let told = Unsettled {
            acquires,
            known_holds,
            by_owner,
        };
        let outcome = MutexGuard::unlocked(st, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| settle(told)))
                .unwrap_or_else(|_| Err(Error::Protocol("a settle panicked".into())))
        });
        let outcome = match outcome {
            Ok(Settled::LookAgain) => {
                let looks = st.doubt_failed(&key, settle);
                if looks >= LOOKS {
                    st.remove_doubt(&key);
                    self.unsettled.fetch_sub(1, Ordering::Release);
                } else {
                    st.retry_doubt_at(&key, Instant::now() + RETRY.saturating_mul(1 << looks));
                    self.changed.notify_one();
                }
                self.settled.notify_all();
                return Ok(());
            }
            Ok(Settled::Done) => Ok(()),
            Err(e) => Err(e),
        };
        match &outcome {
            Ok(()) => {
                if st.settled(&key, settle, acquires) {
                    self.unsettled.fetch_sub(1, Ordering::Release);
                    log::debug!(
                        "settled {acquires} acquire(s) of `{}` (owner {}) whose reply was lost",
                        key.0,
                        key.1
                    );
                }
            }
            Err(e) => {
                let failures = st.doubt_failed(&key, settle);
                if failures >= MAX_TRIES {
                    log::warn!(
                        "`{}` (owner {}): giving up settling an acquire whose reply was lost, \
                         after {MAX_TRIES} tries ({e}); what it took is left to its lease",
                        key.0,
                        key.1
                    );
                    st.remove_doubt(&key);
                    self.unsettled.fetch_sub(1, Ordering::Release);
                } else {
                    log::debug!(
                        "settling the lost acquire of `{}` (owner {}) failed: {e}; tried again",
                        key.0,
                        key.1
                    );
                    let backoff = RETRY.saturating_mul(1 << failures.min(5)).min(MAX_RETRY);
                    st.retry_doubt_at(&key, Instant::now() + backoff);
                }
            }
        }
        // The watchdog thread may be waiting without a deadline (it does not wait for a doubt
        // that is being run): it learns when to try this one again.
        if st.has_doubt(&key) {
            self.changed.notify_one();
        }
        self.settled.notify_all();
        outcome
    }
}
