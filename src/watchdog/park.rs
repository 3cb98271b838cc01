//! Parking: a held lock taken out of renewal while its owner waits on a condition (see
//! `lock/condition.rs`), which releases the lock in Redis and acquires it again. Renewing it
//! meanwhile would find it gone and report a loss that is none; so its entry (hold count,
//! lease, `on_lost` callbacks) is kept aside, and put back when the lock is held again, or
//! lost for good when it cannot be.

use std::sync::Arc;
use std::time::Instant;

use super::entry::Entry;
use super::lease::{LostReason, Watch};
use super::Watchdog;

/// A hold's watchdog entry, out of renewal (see [`Watchdog::park`]). Dropping it without
/// [`unpark`](Watchdog::unpark) or [`lose_parked`](Watchdog::lose_parked) drops the
/// entry's callbacks uncalled.
pub(crate) struct Parked {
    id: u64,
    /// `None`: the entry was gone already (lost, or released by another path).
    entry: Option<Entry>,
}

impl Parked {
    /// The holds the client's guards have in the parked entry (0 if it was gone).
    pub(crate) fn holds(&self) -> u32 {
        self.entry.as_ref().map_or(0, |e| e.holds)
    }
}

impl Watchdog {
    /// Takes the entry of `watch` out of renewal (and out of the index: an acquire of the
    /// same lock and field meanwhile makes an entry of its own).
    pub(crate) fn park(&self, watch: Watch) -> Parked {
        let mut st = self.shared.state.lock();
        let entry = st.remove(watch.id);
        if st.renewing && entry.is_some() {
            st.unheard.push(watch.id);
        }
        Parked {
            id: watch.id,
            entry,
        }
    }

    /// Puts a parked entry back, its lease running from `held_at` (the send time of the
    /// acquire that holds the lock again; `None`: the lock was not released, the lease runs
    /// as it did), renewed from a period after that (or, for an explicit lease's timer, due
    /// at its new end). Its callbacks are kept.
    pub(crate) fn unpark(&self, parked: Parked, held_at: Option<Instant>) {
        let Some(entry) = parked.entry else { return };
        if !entry.lease.restart(held_at.unwrap_or(entry.lease.base())) {
            return self.lose_parked_entry(entry, LostReason::NotHeld);
        }
        let held_at = held_at.unwrap_or_else(Instant::now);
        let mut st = self.shared.state.lock();
        if st.shutdown {
            drop(st);
            return self.lose_parked_entry(entry, LostReason::ClientClosed);
        }
        let id = parked.id;
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
                    return self.lose_parked_entry(entry, LostReason::NotHeld);
                }
                st.index(&entry.name, Arc::clone(field), id);
                held_at + self.shared.period
            }
            None => entry.lease.expires(),
        };
        st.entries.insert(id, entry);
        let wake = st.schedule(due, id);
        drop(st);
        if wake {
            self.shared.changed.notify_one();
        }
    }

    /// The parked hold cannot be held again: it is lost for `why` (its callbacks run on the
    /// watchdog thread, as any loss's).
    pub(crate) fn lose_parked(&self, parked: Parked, why: LostReason) {
        if let Some(entry) = parked.entry {
            self.lose_parked_entry(entry, why);
        }
    }

    fn lose_parked_entry(&self, entry: Entry, why: LostReason) {
        let mut st = self.shared.state.lock();
        let (entry, _) = st.lose_entry(entry, why);
        let wake = !st.to_fire.is_empty();
        drop(st);
        drop(entry);
        if wake {
            self.shared.changed.notify_one();
        }
    }
}
