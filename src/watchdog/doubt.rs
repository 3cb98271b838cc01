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

use std::collections::hash_map;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::settle::{Doubt, Settle, Settled, Unsettled};
use super::state::State;
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

type Key = (Arc<str>, Arc<str>);

impl Watchdog {
    /// Records a call of `name` by `field` whose reply never came (an acquire, or an unlock
    /// made good the same way); `settle` gives back what it may have left (kept from the
    /// first doubt while one is pending). False when the client is closing: nothing is
    /// recorded, and nothing will settle it.
    pub(crate) fn doubt(&self, name: &Arc<str>, field: &Arc<str>, settle: Settle) -> bool {
        let mut st = self.shared.state.lock();
        if st.shutdown {
            return false;
        }
        let key = (Arc::clone(name), Arc::clone(field));
        match st.doubts.get_mut(&key) {
            Some(d) => d.acquires += 1,
            None => {
                st.doubts.insert(
                    key,
                    Doubt {
                        acquires: 1,
                        settle: Some(settle),
                        next_try: Instant::now() + RETRY,
                        failures: 0,
                    },
                );
                self.shared.unsettled.fetch_add(1, Ordering::Release);
            }
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
            let Some(d) = st.doubts.get_mut(&key) else {
                return Ok(());
            };
            match d.settle.take() {
                Some(settle) => return self.shared.settle(&mut st, key, settle, true),
                None => self.shared.settled.wait(&mut st),
            }
        }
    }

    /// Counts a hold of `name` by `field` with an explicit lease (`held`), or its release.
    /// Returns the holds the client's guards have then (see [`known_holds`](Self::known_holds)).
    pub(crate) fn count_explicit(&self, name: &Arc<str>, field: Arc<str>, held: bool) -> u32 {
        self.shared.state.lock().count_explicit(name, field, held)
    }

    /// Whether any acquire is in doubt: the owners' calls look no further when none is.
    pub(crate) fn any_unsettled(&self) -> bool {
        self.shared.unsettled.load(Ordering::Acquire) > 0
    }
}

impl State {
    /// When the watchdog thread should try a doubt next (those being run wait for their
    /// runner).
    pub(super) fn next_doubt(&self) -> Option<Instant> {
        self.doubts
            .values()
            .filter(|d| d.settle.is_some())
            .map(|d| d.next_try)
            .min()
    }

    /// A doubt due by `now`, taken out for the watchdog thread to run.
    pub(super) fn take_doubt(&mut self, now: Instant) -> Option<(Key, Settle)> {
        let key = self
            .doubts
            .iter()
            .find(|(_, d)| d.settle.is_some() && d.next_try <= now)
            .map(|(key, _)| key.clone())?;
        let settle = self.doubts.get_mut(&key)?.settle.take()?;
        Some((key, settle))
    }

    /// The holds of `name` and `field` the client's guards have: renewed, or with an explicit
    /// lease.
    pub(super) fn known_holds(&self, name: &Arc<str>, field: &Arc<str>) -> u32 {
        let explicit = if self.explicit.is_empty() {
            0
        } else {
            let key = (Arc::clone(name), Arc::clone(field));
            self.explicit.get(&key).copied().unwrap_or(0)
        };
        self.renewed_holds(name, field) + explicit
    }

    /// Counts a hold with an explicit lease of `name` by `field` taken (`held`) or released;
    /// returns the holds of it the client knows of after that (see
    /// [`Watchdog::count_explicit`]).
    fn count_explicit(&mut self, name: &Arc<str>, field: Arc<str>, held: bool) -> u32 {
        let renewed = self.renewed_holds(name, &field);
        // One lookup: this runs on every acquire and release with an explicit lease.
        let explicit = match self.explicit.entry((Arc::clone(name), field)) {
            hash_map::Entry::Occupied(mut n) if held => {
                *n.get_mut() += 1;
                *n.get()
            }
            hash_map::Entry::Occupied(mut n) => {
                *n.get_mut() -= 1;
                if *n.get() == 0 {
                    n.remove()
                } else {
                    *n.get()
                }
            }
            hash_map::Entry::Vacant(n) if held => *n.insert(1),
            hash_map::Entry::Vacant(_) => 0,
        };
        renewed + explicit
    }

    /// The holds of `name` by `field` that the watchdog renews.
    fn renewed_holds(&self, name: &Arc<str>, field: &Arc<str>) -> u32 {
        self.find(name, field)
            .and_then(|id| self.entries.get(&id))
            .map_or(0, |e| e.holds)
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
        let acquires = st.doubts.get(&key).map_or(0, |d| d.acquires);
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
                let d = st
                    .doubts
                    .get_mut(&key)
                    .expect("only its runner removes a doubt");
                d.failures += 1;
                d.settle = Some(settle);
                if d.failures >= LOOKS {
                    st.doubts.remove(&key);
                    self.unsettled.fetch_sub(1, Ordering::Release);
                } else {
                    d.next_try = Instant::now() + RETRY.saturating_mul(1 << d.failures);
                    self.changed.notify_one();
                }
                self.settled.notify_all();
                return Ok(());
            }
            Ok(Settled::Done) => Ok(()),
            Err(e) => Err(e),
        };
        let d = st
            .doubts
            .get_mut(&key)
            .expect("only the thread running a doubt's settle removes it");
        match &outcome {
            Ok(()) if d.acquires > acquires => {
                d.acquires -= acquires;
                d.settle = Some(settle);
                d.next_try = Instant::now();
                d.failures = 0;
            }
            Ok(()) => {
                st.doubts.remove(&key);
                self.unsettled.fetch_sub(1, Ordering::Release);
                log::debug!(
                    "settled {acquires} acquire(s) of `{}` (owner {}) whose reply was lost",
                    key.0,
                    key.1
                );
            }
            Err(e) if d.failures + 1 >= MAX_TRIES => {
                log::warn!(
                    "`{}` (owner {}): giving up settling an acquire whose reply was lost, after \
                     {MAX_TRIES} tries ({e}); what it took is left to its lease",
                    key.0,
                    key.1
                );
                st.doubts.remove(&key);
                self.unsettled.fetch_sub(1, Ordering::Release);
            }
            Err(e) => {
                log::debug!(
                    "settling the lost acquire of `{}` (owner {}) failed: {e}; tried again",
                    key.0,
                    key.1
                );
                d.failures += 1;
                d.settle = Some(settle);
                let backoff = RETRY.saturating_mul(1 << d.failures.min(5)).min(MAX_RETRY);
                d.next_try = Instant::now() + backoff;
            }
        }
        // The watchdog thread may be waiting without a deadline (it does not wait for a doubt
        // that is being run): it learns when to try this one again.
        if st.doubts.contains_key(&key) {
            self.changed.notify_one();
        }
        self.settled.notify_all();
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doubt(next_try: Instant) -> Doubt {
        Doubt {
            acquires: 1,
            settle: Some(Box::new(|_| Ok(Settled::Done))),
            next_try,
            failures: 0,
        }
    }

    fn key(name: &str) -> Key {
        (Arc::from(name), Arc::from("owner"))
    }

    #[test]
    fn the_thread_takes_one_due_doubt_and_learns_when_the_next_is_due() {
        let now = Instant::now();
        let later = now + RETRY;
        let mut st = State::default();
        st.doubts.insert(key("due"), doubt(now));
        st.doubts.insert(key("later"), doubt(later));
        assert_eq!(st.next_doubt(), Some(now));
        assert_eq!(st.take_doubt(now).map(|(k, _)| k), Some(key("due")));
        // The taken one is being run: not taken again, and not what the thread waits for.
        assert!(st.doubts[&key("due")].settle.is_none());
        assert!(st.take_doubt(now).is_none());
        assert_eq!(st.next_doubt(), Some(later));
    }

    #[test]
    fn explicit_holds_are_counted_up_and_down_and_forgotten_at_zero() {
        let mut st = State::default();
        let (name, field) = key("lock");
        let count = |st: &mut State, held| st.count_explicit(&name, Arc::clone(&field), held);
        assert_eq!(count(&mut st, true), 1);
        assert_eq!(count(&mut st, true), 2);
        assert_eq!(st.known_holds(&name, &field), 2);
        assert_eq!(count(&mut st, false), 1);
        assert_eq!(count(&mut st, false), 0);
        assert!(st.explicit.is_empty(), "no entry left at zero");
        assert_eq!(count(&mut st, false), 0, "a release of nothing counted");
        assert!(st.explicit.is_empty(), "and nothing added");
    }

    #[test]
    fn known_holds_count_explicit_leases_beside_renewed_holds() {
        let mut st = State::default();
        let (name, field) = key("lock");
        assert_eq!(st.known_holds(&name, &field), 0);
        st.explicit
            .insert((Arc::clone(&name), Arc::clone(&field)), 2);
        assert_eq!(st.known_holds(&name, &field), 2);
    }
}
