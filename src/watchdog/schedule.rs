//! When each entry is looked at: the due heap in and out, and the thread's loop, which sleeps
//! until the earliest due time, runs queued `on_lost` callbacks, signals timers at their end,
//! stops renewing a hold at its cap, and hands the rest to a batch renewal.
//!
//! A hold with a maximum hold time carries its cap (first acquire's send time plus that time)
//! in its entry's boxed extra part. A renewal is sent only if the lease it sets ends by the
//! cap (send time plus lease at most the cap); the first renewal that would not is not sent,
//! the lease is marked final, and the entry becomes like a timer: due at its lease end, which
//! is then a [`LostReason::MaxHoldReached`] loss. So a capped hold ends at its cap at the
//! latest, and at most one renewal period before it (or at the acquire's lease end, for a cap
//! shorter than the lease). A re-entry keeps the entry's cap (so does a hold taken again after
//! a condition wait, parked meanwhile); it, and the release of an inner hold, set the lease in
//! Redis no further than the cap (the lock asks
//! [`Watchdog::cap_of`](super::Watchdog::cap_of)),
//! and the client's record of a capped lease never runs past the cap either.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::batch::Target;
use super::entry::owner;
use super::lease::{call_lost, LostReason};
use super::state::State;
use super::Shared;

impl State {
    /// Queues entry `id` for `at`; true if it is now the earliest (the thread must wake).
    pub(super) fn schedule(&mut self, at: Instant, id: u64) -> bool {
        let earliest = self
            .due
            .peek()
            .is_none_or(|Reverse((first, _))| at < *first);
        self.due.push(Reverse((at, id)));
        earliest
    }

    /// Makes every renewed hold due at `now` (timers keep their lease end); true if any is.
    /// The heap is rebuilt, so that no entry is queued twice.
    pub(super) fn all_due(&mut self, now: Instant) -> bool {
        let mut any = false;
        let due = self
            .entries
            .iter()
            .map(|(&id, e)| {
                if e.signals_only() {
                    Reverse((e.lease.expires(), id))
                } else {
                    any = true;
                    Reverse((now, id))
                }
            })
            .collect();
        self.due = due;
        self.stale = 0;
        any
    }

    /// Pops the ids of live entries due by `horizon`, at most `max`. A timer (or a hold past
    /// its cap) is taken only once due (`now`): it signals a lease end, which must not be
    /// early.
    fn take_due(&mut self, now: Instant, horizon: Instant, max: usize) -> Vec<u64> {
        let mut ids = Vec::new();
        while ids.len() < max {
            let Some(&Reverse((at, id))) = self.due.peek() else {
                break;
            };
            if at > horizon {
                break;
            }
            match self.entries.get(&id) {
                Some(e) if e.signals_only() && at > now => break,
                Some(_) => ids.push(id),
                None => self.stale = self.stale.saturating_sub(1), // lost or released
            }
            self.due.pop();
        }
        ids
    }
}

impl Shared {
    pub(super) fn run(&self) {
        let slack = self.period / 8;
        let mut st = self.state.lock();
        // A settle ran last turn: this one renews first.
        let mut settled = false;
        loop {
            if st.shutdown {
                return;
            }
            if !st.to_fire.is_empty() {
                let fires = std::mem::take(&mut st.to_fire);
                st.firing = fires.iter().map(|f| f.hold).collect();
                MutexGuard::unlocked(&mut st, || {
                    for f in fires {
                        call_lost(f.callback, f.reason, &f.name);
                    }
                });
                st.firing.clear();
                self.fired.notify_all();
                continue;
            }
            let now = Instant::now();
            let next_doubt = st.next_doubt();
            if !settled && next_doubt.is_some_and(|at| at <= now) {
                if let Some((key, settle)) = st.take_doubt(now) {
                    // Errors are logged there; the doubt is tried again later. Then a turn
                    // without: renewals due meanwhile go first.
                    let _ = self.settle(&mut st, key, settle, false);
                    settled = true;
                    continue;
                }
            }
            settled = false;
            let mut ids = st.take_due(now, now + slack, self.batch);
            if !ids.is_empty() && ids.len() < self.batch {
                // Fill the call with entries due within half a period: renewing them a little
                // early costs nothing, and it merges batches that acquires spread apart.
                let room = self.batch - ids.len();
                ids.extend(st.take_due(now, now + self.period / 2, room));
            }
            if ids.is_empty() {
                // Sleep until the earliest entry is due; it and all due within `slack`
                // after it are then renewed together.
                let renewal = st.due.peek().map(|&Reverse((at, _))| at);
                match renewal.into_iter().chain(next_doubt).min() {
                    Some(at) => {
                        self.changed.wait_until(&mut st, at);
                    }
                    None => self.changed.wait(&mut st),
                }
                continue;
            }
            let live = self.sift(&mut st, ids);
            if live.is_empty() {
                continue;
            }
            let batch = targets(&st, &live);
            st.renewing = true;
            drop(st);
            let sent_at = Instant::now();
            let outcomes = self.renew(&batch);
            st = self.state.lock();
            self.apply(&mut st, &live, sent_at, outcomes);
            st.renewing = false;
            if std::mem::take(&mut st.recheck) {
                st.all_due(Instant::now());
            }
        }
    }

    /// The entries of `ids` to renew now. Timers at their end, and leases that ran out while
    /// renewals failed or were late (or while this thread was busy), or after the hold's cap,
    /// are lost, not renewed. A hold whose renewal would outlast its cap is renewed no more;
    /// it and a timer are due again at their lease's end.
    fn sift(&self, st: &mut State, ids: Vec<u64>) -> Vec<u64> {
        let mut live = Vec::with_capacity(ids.len());
        let now = Instant::now();
        for id in ids {
            let e = &st.entries[&id];
            match e.lease.lost() {
                None if e.signals_only() => {
                    let at = e.lease.expires();
                    st.due.push(Reverse((at, id)));
                }
                None if e.past_cap(now, self.lease) && e.lease.finish() => {
                    let at = e.lease.expires();
                    log::debug!(
                        "lock `{}` (owner {}) reached its maximum hold time: no longer \
                         renewed, its lease ends in {:?}",
                        e.name,
                        owner(e),
                        at.saturating_duration_since(now)
                    );
                    st.due.push(Reverse((at, id)));
                }
                None => live.push(id),
                Some(reason) => {
                    let (e, reason) = st.lose(id, reason).expect("present");
                    match (&e.field, reason) {
                        (None, _) => log::debug!("explicit lease of lock `{}` ran out", e.name),
                        (Some(field), LostReason::MaxHoldReached) => log::warn!(
                            "lock `{}` (owner {field}) lost ({reason:?}): held for its \
                             maximum hold time, it was no longer renewed and its lease ran out",
                            e.name
                        ),
                        (Some(field), _) => log::warn!(
                            "lock `{}` (owner {field}) lost ({reason:?}): its lease ran out \
                             before a renewal confirmed it",
                            e.name
                        ),
                    }
                }
            }
        }
        live
    }
}

/// What the renewal calls need of the entries `live`.
fn targets(st: &State, live: &[u64]) -> Vec<Target> {
    live.iter()
        .map(|id| {
            let e = &st.entries[id];
            let field = e.field.as_ref();
            Target {
                name: Arc::clone(&e.name),
                field: Arc::clone(field.expect("only renewed entries are live here")),
                renewal: st.renewals[usize::from(e.renewal)],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::watchdog::entry::Entry;
    use crate::watchdog::lease::LeaseState;

    fn state_with(due: &[(u64, u64)]) -> (State, Instant) {
        let t0 = Instant::now();
        let mut st = State::default();
        for &(id, ms) in due {
            let name: Arc<str> = Arc::from(format!("l{id}"));
            let owner: Arc<str> = Arc::from("o");
            let lease = Arc::new(LeaseState::new(t0, Duration::from_secs(30)));
            let entry = Entry::new(&name, Some(Arc::clone(&owner)), 0, lease);
            st.entries.insert(id, entry);
            st.index(&name, owner, id);
            st.due.push(Reverse((t0 + Duration::from_millis(ms), id)));
        }
        st.next_id = 1000;
        (st, t0)
    }

    #[test]
    fn take_due_returns_due_entries_in_order_up_to_batch() {
        let (mut st, t0) = state_with(&[(1, 30), (2, 10), (3, 20), (4, 500)]);
        let horizon = t0 + Duration::from_millis(100);
        assert_eq!(st.take_due(t0, horizon, 2), vec![2, 3]);
        assert_eq!(st.take_due(t0, horizon, 2), vec![1]);
        assert!(st.take_due(t0, horizon, 2).is_empty());
        assert_eq!(st.due.len(), 1);
    }

    #[test]
    fn all_due_queues_each_renewed_hold_once_now_and_keeps_timers_at_their_end() {
        let (mut st, t0) = state_with(&[(1, 3000), (2, 9000)]);
        // A timer (an explicit lease): due at its lease end, not now.
        let name: Arc<str> = Arc::from("timer");
        let lease = Arc::new(LeaseState::new(t0, Duration::from_secs(5)));
        st.entries.insert(3, Entry::new(&name, None, 0, lease));
        st.due.push(Reverse((t0 + Duration::from_secs(5), 3)));
        st.remove(2);
        let now = t0 + Duration::from_millis(100);
        assert!(st.all_due(now));
        let mut queued: Vec<(Instant, u64)> =
            st.due.iter().map(|Reverse((at, id))| (*at, *id)).collect();
        queued.sort_by_key(|&(_, id)| id);
        assert_eq!(
            queued,
            [(now, 1), (t0 + Duration::from_secs(5), 3)],
            "each live entry once; the released one gone"
        );
        assert_eq!(st.stale, 0);
        st.remove(1);
        assert!(!st.all_due(now), "only a timer left: nothing to renew");
    }

    #[test]
    fn released_entries_are_skipped_and_reentrant_holds_counted() {
        let (mut st, t0) = state_with(&[(1, 10), (2, 20)]);
        st.entries.get_mut(&1).unwrap().holds = 2;
        assert!(st.release(1).is_none());
        assert!(st.release(2).is_some());
        assert!(st.entries.contains_key(&1));
        assert!(!st.entries.contains_key(&2));
        assert!(st.by_name.len() == 1 && st.more_fields.is_empty());
        let later = t0 + Duration::from_secs(1);
        assert_eq!(st.take_due(later, later, 10), vec![1]);
        st.release(1);
        assert!(st.entries.is_empty() && st.by_name.is_empty());
    }

    #[test]
    fn timer_is_not_taken_early_with_the_renewals_it_precedes() {
        let (mut st, t0) = state_with(&[(1, 20)]);
        let lease = Arc::new(LeaseState::new(t0, Duration::from_millis(10)));
        st.entries
            .insert(2, Entry::new(&Arc::from("timer"), None, 0, lease));
        st.due.push(Reverse((t0 + Duration::from_millis(10), 2)));
        let horizon = t0 + Duration::from_millis(50);
        assert!(
            st.take_due(t0, horizon, 10).is_empty(),
            "timer before its end"
        );
        let at_end = t0 + Duration::from_millis(10);
        assert_eq!(
            st.take_due(at_end, at_end + Duration::from_millis(40), 10),
            vec![2, 1]
        );
    }

    #[test]
    fn a_hold_past_its_cap_is_not_taken_early_with_the_renewals_it_precedes() {
        // Like a timer: taken early, it would be put back at its lease end, and taken early
        // again, in a busy loop until then.
        let (mut st, t0) = state_with(&[(1, 10), (2, 20)]);
        assert!(st.entries[&1].lease.finish());
        let horizon = t0 + Duration::from_millis(50);
        assert!(st.take_due(t0, horizon, 10).is_empty());
        let at = t0 + Duration::from_millis(10);
        assert_eq!(st.take_due(at, horizon, 10), vec![1, 2]);
    }
}
