//! The calls a guard makes on the watchdog for its hold: start (or join) its renewal, watch
//! an explicit lease, register `on_lost` callbacks, and release or disarm the hold.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::lease::{Callback, LeaseState, LostReason, Watch};
use super::renewal::Renewal;
use super::state::{Held, State};
use super::Watchdog;

/// The lease of a hold that has none (a plain semaphore's permits), for the bookkeeping that
/// every hold shares: a century, so that failing checks never make it run out.
const NO_LEASE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Watchdog {
    /// Starts (or, for a reentrant hold, joins) the renewal of `name` held as `renewal` says.
    /// `acquired_at` is when the acquire was sent: the lease runs from no earlier than that.
    /// A new hold is renewed no further than `max_hold` after it, if given; a re-entry keeps
    /// the cap of the hold it joins.
    pub(crate) fn watch(
        &self,
        name: &Arc<str>,
        renewal: Renewal,
        acquired_at: Instant,
        count: u32,
        max_hold: Option<Duration>,
    ) -> (Watch, Arc<LeaseState>) {
        let mut st = self.shared.state.lock();
        // A waiter's bookkeeping is not a hold: its loss is not counted as a lost lock.
        let metrics = renewal.batch.holds.then_some(&self.shared.metrics);
        // A hold without a lease is only checked: it never runs out on this clock.
        let lease = match renewal.batch.leased {
            true => self.shared.lease,
            false => NO_LEASE,
        };
        let (watch, lease, new) = st.join(
            name,
            renewal,
            Held {
                at: acquired_at,
                count,
                max_hold,
            },
            lease,
            metrics,
        );
        if st.is_shutdown() {
            // Acquired as the client closed: nothing will renew it.
            lease.mark_lost(LostReason::ClientClosed);
        }
        let mut wake = st.has_to_fire();
        if new {
            wake |= st.schedule(acquired_at + self.shared.period, watch.id);
        }
        drop(st);
        if wake {
            self.shared.changed.notify_one();
        }
        (watch, lease)
    }

    /// Watches an explicit lease, without renewing it, to signal its end: a timer entry due
    /// when `lease` runs out.
    pub(crate) fn watch_until(&self, name: &Arc<str>, lease: &Arc<LeaseState>) -> Watch {
        let mut st = self.shared.state.lock();
        let watch = st.add_timer(name, lease);
        let wake = st.schedule(lease.expires(), watch.id);
        drop(st);
        if wake {
            self.shared.changed.notify_one();
        }
        watch
    }

    /// Registers `callback` for the loss of `watch`'s hold, or hands it back with the reason
    /// when that hold is already lost (to be called at once by the caller).
    pub(crate) fn on_lost(
        &self,
        watch: Watch,
        lease: &LeaseState,
        callback: Callback,
    ) -> Option<(Callback, LostReason)> {
        let mut st = self.shared.state.lock();
        if let Some(reason) = lease.lost() {
            return Some((callback, reason));
        }
        let watch = st.resolved(watch);
        match st.entry_mut(watch.id) {
            Some(e) => e.add_callback(watch.hold, callback),
            None => {
                // Live but not watched: the hold was released through `Lock::unlock`; its
                // callback could only fire for a hold that is gone.
                drop(st);
                drop(callback);
            }
        }
        None
    }

    /// Releases `watch`'s hold: its callbacks are dropped uncalled (once any of them that is
    /// running has returned), and at zero holds the lock is no longer renewed. Returns the
    /// holds of that lock and owner the client's guards still have (as
    /// [`known_holds`](Watchdog::known_holds)), for a renewed hold; `None` for a timer.
    pub(crate) fn unwatch(&self, watch: Watch) -> Option<u32> {
        let mut st = self.shared.state.lock();
        let watch = st.resolved(watch);
        let dropped = self.disarm_locked(&mut st, watch);
        let hold = st
            .entry(watch.id)
            .and_then(|e| Some((Arc::clone(&e.name), Arc::clone(e.field.as_ref()?))));
        let entry = st.release(watch.id);
        let known = hold.map(|(name, field)| st.known_holds(&name, &field));
        drop(st);
        drop((dropped, entry));
        known
    }

    /// Drops `watch`'s callbacks uncalled but keeps the hold renewed (a leaked guard). A
    /// timer entry, which only exists for its callbacks, is removed.
    pub(crate) fn disarm(&self, watch: Watch) {
        let mut st = self.shared.state.lock();
        let watch = st.resolved(watch);
        let dropped = self.disarm_locked(&mut st, watch);
        let timer = st.remove_timer(watch.id);
        drop(st);
        drop((dropped, timer));
    }

    /// Takes `watch`'s callbacks out of its entry and the fire queue, then waits until the
    /// thread is not running any of them. Returns them, to be dropped outside the lock.
    fn disarm_locked(&self, st: &mut MutexGuard<'_, State>, watch: Watch) -> Vec<Callback> {
        let mut dropped = Vec::new();
        if let Some(e) = st.entry_mut(watch.id) {
            e.take_callbacks(|(hold, _)| *hold == watch.hold)
                .into_iter()
                .for_each(|(_, f)| dropped.push(f));
        }
        st.take_fires_of(watch.hold)
            .into_iter()
            .for_each(|f| dropped.push(f.callback));
        while st.is_firing(watch.hold) {
            self.shared.fired.wait(st);
        }
        dropped
    }

    /// The cap of the renewed hold of `name` under `field`, if it has one: a re-entry or a
    /// partial release sets the lease in Redis no further than it.
    pub(crate) fn cap_of(&self, name: &Arc<str>, field: &Arc<str>) -> Option<Instant> {
        let st = self.shared.state.lock();
        let id = st.find(name, field)?;
        st.entry(id)?.extra.as_ref()?.cap
    }

    /// As [`unwatch`](Self::unwatch), for a hold known only by lock name and hash field.
    pub(crate) fn unwatch_key(&self, name: &Arc<str>, owner: &Arc<str>) {
        let mut st = self.shared.state.lock();
        let entry = match st.find(name, owner) {
            Some(id) => st.release(id),
            None => None,
        };
        drop(st);
        drop(entry);
    }
}
