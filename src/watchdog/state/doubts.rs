//! The acquires in doubt (see `doubt.rs`), one [`Doubt`] per lock name and hash field, and the
//! holds with an explicit lease, counted by name and field: a settle is told them beside the
//! renewed holds, so that it never gives back a hold a guard has.

use std::collections::hash_map;
use std::sync::Arc;
use std::time::Instant;

use super::State;
use crate::watchdog::settle::{Doubt, Settle};

/// A hold's lock name and hash field, which doubts and explicit-lease counts are kept by.
pub(in crate::watchdog) type Key = (Arc<str>, Arc<str>);

impl State {
    /// Records an acquire of `key` in doubt: one more on the doubt pending, which keeps its
    /// own settle (`settle` is handed back, unused), or a new doubt that `settle` settles,
    /// first tried at `next_try` (`None` back).
    pub(in crate::watchdog) fn add_doubt(
        &mut self,
        key: Key,
        settle: Settle,
        next_try: Instant,
    ) -> Option<Settle> {
        match self.doubts.get_mut(&key) {
            Some(d) => {
                d.acquires += 1;
                Some(settle)
            }
            None => {
                self.doubts.insert(
                    key,
                    Doubt {
                        acquires: 1,
                        settle: Some(settle),
                        next_try,
                        failures: 0,
                    },
                );
                None
            }
        }
    }

    /// Whether acquires of `key` are in doubt (a thread may be running their settle).
    pub(in crate::watchdog) fn has_doubt(&self, key: &Key) -> bool {
        self.doubts.contains_key(key)
    }

    /// How many acquires of `key` are in doubt (0 if none).
    pub(in crate::watchdog) fn doubted_acquires(&self, key: &Key) -> u32 {
        self.doubts.get(key).map_or(0, |d| d.acquires)
    }

    /// The settle of `key`'s doubt, taken out to be run; `None` if there is no doubt, or a
    /// thread is running its settle.
    pub(in crate::watchdog) fn take_settle(&mut self, key: &Key) -> Option<Settle> {
        self.doubts.get_mut(key)?.settle.take()
    }

    /// When the watchdog thread should try a doubt next (those being run wait for their
    /// runner).
    pub(in crate::watchdog) fn next_doubt(&self) -> Option<Instant> {
        self.doubts
            .values()
            .filter(|d| d.settle.is_some())
            .map(|d| d.next_try)
            .min()
    }

    /// A doubt due by `now`, taken out for the watchdog thread to run.
    pub(in crate::watchdog) fn take_doubt(&mut self, now: Instant) -> Option<(Key, Settle)> {
        let key = self
            .doubts
            .iter()
            .find(|(_, d)| d.settle.is_some() && d.next_try <= now)
            .map(|(key, _)| key.clone())?;
        let settle = self.take_settle(&key)?;
        Some((key, settle))
    }

    /// The settle of `key` (taken out to run) settled `acquires` acquires. The doubt is
    /// removed (true), or kept for the acquires doubted meanwhile, `settle` put back and
    /// due now (false).
    pub(in crate::watchdog) fn settled(
        &mut self,
        key: &Key,
        settle: Settle,
        acquires: u32,
    ) -> bool {
        let d = self
            .doubts
            .get_mut(key)
            .expect("only the thread running a doubt's settle removes it");
        if d.acquires > acquires {
            d.acquires -= acquires;
            d.settle = Some(settle);
            d.next_try = Instant::now();
            d.failures = 0;
            false
        } else {
            self.doubts.remove(key);
            true
        }
    }

    /// The settle of `key` (taken out to run) failed, or found nothing yet: it is put back,
    /// and the failure counted. Returns the failures so far.
    pub(in crate::watchdog) fn doubt_failed(&mut self, key: &Key, settle: Settle) -> u32 {
        let d = self
            .doubts
            .get_mut(key)
            .expect("only its runner removes a doubt");
        d.failures += 1;
        d.settle = Some(settle);
        d.failures
    }

    /// The watchdog thread tries the doubt of `key` next at `at`.
    pub(in crate::watchdog) fn retry_doubt_at(&mut self, key: &Key, at: Instant) {
        if let Some(d) = self.doubts.get_mut(key) {
            d.next_try = at;
        }
    }

    /// Forgets the doubt of `key` (given up: what it took is left to its lease).
    pub(in crate::watchdog) fn remove_doubt(&mut self, key: &Key) {
        self.doubts.remove(key);
    }

    /// The holds of `name` and `field` the client's guards have: renewed, or with an explicit
    /// lease.
    pub(in crate::watchdog) fn known_holds(&self, name: &Arc<str>, field: &Arc<str>) -> u32 {
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
    /// [`Watchdog::count_explicit`](crate::watchdog::Watchdog::count_explicit)).
    pub(in crate::watchdog) fn count_explicit(
        &mut self,
        name: &Arc<str>,
        field: Arc<str>,
        held: bool,
    ) -> u32 {
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

    /// The holds the client's guards have of every field of `name` that starts with
    /// `prefix` (renewed, or with an explicit lease), field by field.
    pub(in crate::watchdog) fn known_holds_like(
        &self,
        name: &Arc<str>,
        prefix: &str,
    ) -> Vec<(Arc<str>, u32)> {
        let mut known: Vec<(Arc<str>, u32)> = Vec::new();
        let mut add = |field: &Arc<str>, holds: u32| {
            if !field.starts_with(prefix) || holds == 0 {
                return;
            }
            match known.iter_mut().find(|(f, _)| f == field) {
                Some((_, n)) => *n += holds,
                None => known.push((Arc::clone(field), holds)),
            }
        };
        let first = self.by_name.get(name).into_iter();
        let more = self
            .more_fields
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|(_, id)| id);
        for entry in first.chain(more).filter_map(|id| self.entries.get(id)) {
            if let Some(field) = &entry.field {
                add(field, entry.holds);
            }
        }
        for ((n, field), &holds) in &self.explicit {
            if n == name {
                add(field, holds);
            }
        }
        known
    }

    /// A doubt of `name` whose field starts with `prefix`, other than those in `skip`.
    pub(in crate::watchdog) fn doubt_like(
        &self,
        name: &Arc<str>,
        prefix: &str,
        skip: &[Key],
    ) -> Option<Key> {
        self.doubts
            .keys()
            .find(|key| &key.0 == name && key.1.starts_with(prefix) && !skip.contains(key))
            .cloned()
    }

    /// The holds of `name` by `field` that the watchdog renews.
    fn renewed_holds(&self, name: &Arc<str>, field: &Arc<str>) -> u32 {
        self.find(name, field)
            .and_then(|id| self.entries.get(&id))
            .map_or(0, |e| e.holds)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::watchdog::settle::Settled;

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
        let later = now + Duration::from_millis(250);
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
