//! Parking: a held lock taken out of renewal while its owner waits on a condition (see
//! `lock/condition/`), which releases the lock in Redis and acquires it again. Renewing it
//! meanwhile would find it gone and report a loss that is none; so its entry (hold count,
//! lease, `on_lost` callbacks) is kept aside, and put back when the lock is held again, or
//! lost for good when it cannot be.
//!
//! An entry is put back under a new id: its old id's due times may still be in the heap (and a
//! renewal of it may be in flight, whose reply may predate the acquire), and they then find
//! no entry, as a released one's do. The guards that name it by the old id are led to the new
//! one (`State::renamed`).

use std::time::Instant;

use super::entry::Entry;
use super::lease::{call_lost, LostReason, Watch};
use super::Watchdog;

/// A hold's watchdog entry, out of renewal (see [`Watchdog::park`]). Dropping it without
/// [`unpark`](Watchdog::unpark) or [`lose_parked`](Watchdog::lose_parked) drops the
/// entry's callbacks uncalled.
pub(crate) struct Parked {
    watch: Watch,
    /// `None`: the entry was gone already (lost, or released by another path).
    entry: Option<Entry>,
}

impl Parked {
    /// The holds the client's guards have in the parked entry (0 if it was gone).
    pub(crate) fn holds(&self) -> u32 {
        self.entry.as_ref().map_or(0, |e| e.holds)
    }

    /// The hold's cap (its maximum hold time), if it has one: past it, the lock must not be
    /// held again.
    pub(crate) fn cap(&self) -> Option<Instant> {
        self.entry.as_ref()?.extra.as_ref()?.cap
    }
}

impl Watchdog {
    /// Takes the entry of `watch` out of renewal (and out of the index: an acquire of the
    /// same lock and field meanwhile makes an entry of its own).
    pub(crate) fn park(&self, watch: Watch) -> Parked {
        let mut st = self.shared.state.lock();
        let watch = st.resolved(watch);
        let entry = st.remove(watch.id);
        Parked { watch, entry }
    }

    /// Puts a parked entry back, under a new id, its lease running from `held_at` (the send
    /// time of the acquire that holds the lock again; `None`: the lock was not released, the
    /// lease runs as it did), renewed from a period after that (or, for an explicit lease's
    /// timer, due at its new end). Its callbacks are kept. Returns the guard's watch of it,
    /// or `None` when the hold is lost instead (its lease latched lost, the client closed).
    pub(crate) fn unpark(&self, parked: Parked, held_at: Option<Instant>) -> Option<Watch> {
        let entry = parked.entry?;
        if !entry.lease.restart(held_at.unwrap_or(entry.lease.base())) {
            self.lose_parked_entry(entry, LostReason::NotHeld);
            return None;
        }
        let held_at = held_at.unwrap_or_else(Instant::now);
        let mut st = self.shared.state.lock();
        if st.is_shutdown() {
            drop(st);
            self.lose_parked_entry(entry, LostReason::ClientClosed);
            return None;
        }
        let due = match &entry.field {
            Some(field) => {
                if st.find(&entry.name, field).is_some() {
                    // The owner took the lock meanwhile by another path (a `LockOwner`
                    // shared by threads): that hold is renewed by its own entry.
                    drop(st);
                    log::debug!(
                        "`{}` (owner {field}) was acquired during a condition wait; \
                         its parked entry is not renewed again",
                        entry.name
                    );
                    self.lose_parked_entry(entry, LostReason::NotHeld);
                    return None;
                }
                let past_cap = entry.past_cap(held_at, self.shared.lease);
                if past_cap && (entry.lease.finish() || entry.lease.is_final()) {
                    // Held again close to its cap (the acquire's lease ends there), or parked
                    // after its last renewal: not renewed again, its lease end a
                    // `MaxHoldReached` loss, as in the loop.
                    entry.lease.expires()
                } else {
                    held_at + self.shared.period
                }
            }
            None => entry.lease.expires(),
        };
        let id = st.put_back(entry, parked.watch.id);
        let wake = st.schedule(due, id);
        drop(st);
        if wake {
            self.shared.changed.notify_one();
        }
        Some(Watch {
            id,
            hold: parked.watch.hold,
        })
    }

    /// The parked hold cannot be held again: it is lost for `why` (its callbacks run on the
    /// watchdog thread, as any loss's, or on this one once the client is closed).
    pub(crate) fn lose_parked(&self, parked: Parked, why: LostReason) {
        if let Some(entry) = parked.entry {
            self.lose_parked_entry(entry, why);
        }
    }

    fn lose_parked_entry(&self, entry: Entry, why: LostReason) {
        let mut st = self.shared.state.lock();
        // Closed: the thread that runs callbacks is gone (or going); this one runs them.
        let (entry, fires) = st.lose_parked(entry, why);
        let wake = st.has_to_fire();
        drop(st);
        drop(entry);
        for f in fires {
            call_lost(f.callback, f.reason, &f.name);
        }
        if wake {
            self.shared.changed.notify_one();
        }
    }
}
