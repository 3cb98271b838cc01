//! The due heap: when each entry is looked at next. An entry is scheduled, taken when due (or
//! a little early, to fill a batch), or all made due at once; the due times of removed
//! entries go stale in the heap, and are dropped when they pile up.

use std::cmp::Reverse;
use std::time::Instant;

use super::State;

impl State {
    /// Queues entry `id` for `at`; true if it is now the earliest (the thread must wake).
    pub(in crate::watchdog) fn schedule(&mut self, at: Instant, id: u64) -> bool {
        let earliest = self
            .due
            .peek()
            .is_none_or(|Reverse((first, _))| at < *first);
        self.due.push(Reverse((at, id)));
        earliest
    }

    /// The earliest due time in the heap, if any (it may be a removed entry's).
    pub(in crate::watchdog) fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|&Reverse((at, _))| at)
    }

    /// Makes every renewed hold due at `now` (timers keep their lease end); true if any is.
    /// The heap is rebuilt, so that no entry is queued twice.
    pub(in crate::watchdog) fn all_due(&mut self, now: Instant) -> bool {
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

    /// Makes every renewed hold due at `now`, as [`all_due`](Self::all_due), or as soon as
    /// the batch being renewed is back (its entries are not in the heap now). True if the
    /// thread must wake.
    pub(in crate::watchdog) fn renew_all_now(&mut self, now: Instant) -> bool {
        if self.renewing {
            // All at once when they are back.
            self.recheck = true;
            false
        } else {
            self.all_due(now)
        }
    }

    /// A batch is being renewed: its entries are out of the heap until
    /// [`end_renewing`](Self::end_renewing).
    pub(in crate::watchdog) fn start_renewing(&mut self) {
        self.renewing = true;
    }

    /// The batch being renewed is back (its entries scheduled again or lost); every renewed
    /// hold is made due now if [`renew_all_now`](Self::renew_all_now) was asked meanwhile.
    pub(in crate::watchdog) fn end_renewing(&mut self) {
        self.renewing = false;
        if std::mem::take(&mut self.recheck) {
            self.all_due(Instant::now());
        }
    }

    /// Pops the ids of live entries due by `horizon`, at most `max`. A timer (or a hold past
    /// its cap) is taken only once due (`now`): it signals a lease end, which must not be
    /// early.
    pub(in crate::watchdog) fn take_due(
        &mut self,
        now: Instant,
        horizon: Instant,
        max: usize,
    ) -> Vec<u64> {
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

    /// An entry was removed: its due times are stale. The heap is compacted when stale
    /// times pile up (over 1024, and over half of it).
    pub(super) fn note_stale(&mut self) {
        self.stale += 1;
        if self.stale > 1024 && self.stale * 2 > self.due.len() {
            let entries = &self.entries;
            self.due.retain(|Reverse((_, id))| entries.contains_key(id));
            self.stale = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
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

    #[test]
    fn released_timers_do_not_pile_up_in_the_due_heap() {
        // Regression: a released explicit-lease timer left its due time (up to a year away)
        // in the heap, so a loop of guards with long leases and callbacks grew it unbounded.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let far = Instant::now() + Duration::from_secs(3600);
        for _ in 0..100_000 {
            let id = st.new_id();
            let lease = Arc::new(LeaseState::new(Instant::now(), Duration::from_secs(3600)));
            st.entries.insert(id, Entry::new(&name, None, 0, lease));
            st.schedule(far, id);
            st.release(id);
        }
        assert!(st.entries.is_empty());
        assert!(st.due.len() <= 2100, "{} stale due times", st.due.len());
    }
}
