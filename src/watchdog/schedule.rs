//! When each entry is looked at: the thread's loop, which sleeps until the earliest due time
//! (the due heap is the state's, in `state/due.rs`), runs queued `on_lost` callbacks, signals
//! timers at their end, stops renewing a hold at its cap, and hands the rest to a batch
//! renewal.
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

use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::batch::Target;
use super::entry::owner;
use super::lease::{call_lost, LostReason};
use super::state::State;
use super::Shared;

impl Shared {
    pub(super) fn run(&self) {
        let slack = self.period / 8;
        let mut st = self.state.lock();
        // A settle ran last turn: this one renews first.
        let mut settled = false;
        let mut chore_at = self.chore.as_ref().map(|c| Instant::now() + c.every);
        loop {
            if st.is_shutdown() {
                if let Some(chore) = &self.chore {
                    MutexGuard::unlocked(&mut st, || (chore.run)());
                }
                return;
            }
            if st.has_to_fire() {
                let fires = st.take_to_fire();
                MutexGuard::unlocked(&mut st, || {
                    for f in fires {
                        call_lost(f.callback, f.reason, &f.name);
                    }
                });
                st.done_firing();
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
                // Nothing to renew now: the chore, if it is due (renewals go first).
                if let (Some(chore), Some(at)) = (&self.chore, chore_at) {
                    if at <= now {
                        MutexGuard::unlocked(&mut st, || (chore.run)());
                        chore_at = Some(Instant::now() + chore.every);
                        continue;
                    }
                }
                // Sleep until the earliest entry is due; it and all due within `slack`
                // after it are then renewed together.
                let renewal = st.next_due();
                match renewal.into_iter().chain(next_doubt).chain(chore_at).min() {
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
            st.start_renewing();
            drop(st);
            let sent_at = Instant::now();
            let outcomes = self.renew(&batch);
            st = self.state.lock();
            let told = self.apply(&mut st, &live, sent_at, outcomes);
            st.end_renewing();
            if !told.is_empty() {
                MutexGuard::unlocked(&mut st, || self.tell(told));
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
            let e = st.entry(id).expect("taken due, so present");
            match e.lease.lost() {
                None if e.signals_only() => {
                    let at = e.lease.expires();
                    st.schedule(at, id);
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
                    st.schedule(at, id);
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
            let e = st.entry(*id).expect("live, so present");
            let field = e.field.as_ref();
            Target {
                name: Arc::clone(&e.name),
                field: Arc::clone(field.expect("only renewed entries are live here")),
                renewal: st.batch_of(e),
            }
        })
        .collect()
}
