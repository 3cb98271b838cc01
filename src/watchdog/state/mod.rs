//! The watchdog's bookkeeping under its one lock: the entries, their index by lock name and
//! hash field, the due heap, and the callbacks waiting to run. A hold joins an entry (or makes
//! one), is released, or is lost here.
//!
//! Its fields are private: the rest of the watchdog reads and changes it only through the
//! methods here and in the child files, one for each part that is an idea of its own:
//!
//! - `index.rs`: an entry found by lock name and hash field, or by an id it had before it was
//!   parked.
//! - `due.rs`: the due heap: an entry scheduled, taken when due, and stale due times dropped.
//! - `fire.rs`: the `on_lost` callbacks queued for the thread, and those it is running.
//! - `doubts.rs`: the acquires in doubt, and the holds with an explicit lease counted for
//!   their settles.

mod doubts;
mod due;
mod fire;
mod index;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::entry::Entry;
use super::lease::{Fire, LeaseState, LostReason, Watch};
use super::renewal::{BatchRenewal, Renewal};
use super::settle::Doubt;
use crate::metrics::Recorder;
use crate::trace;

pub(super) use doubts::Key;

/// The watchdog's bookkeeping. Per held lock it keeps one entry, one index slot and one or
/// two due times, and each is kept small: at 100,000 held locks this is the watchdog's memory.
#[derive(Default)]
pub(super) struct State {
    entries: HashMap<u64, Entry>,
    /// The renewed entries by lock name: the first of each name...
    by_name: HashMap<Arc<str>, u64>,
    /// ...and any other of the same name (another hash field: read holds of one read-write
    /// lock by several threads, or a thread's write and read holds), by name and field.
    more_fields: HashMap<(Arc<str>, Arc<str>), u64>,
    /// The batch scripts of the renewals handed in, each once: an entry names its own by
    /// index here ([`Entry::renewal`]), which is smaller than a reference.
    renewals: Vec<&'static BatchRenewal>,
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    /// About how many items of `due` belong to removed entries: they wait in the heap until
    /// their time comes (up to a year for a released explicit-lease timer), so the heap is
    /// compacted when they pile up.
    stale: usize,
    /// Entry and hold ids.
    next_id: u64,
    /// Callbacks of lost entries, waiting for the thread to run them.
    to_fire: Vec<Fire>,
    /// The holds whose callbacks the thread is running right now.
    firing: Vec<u64>,
    /// A batch is being renewed: its entries are out of `due` until its outcomes are in.
    renewing: bool,
    /// Every hold is to be renewed at once, as soon as the batch being renewed is back.
    recheck: bool,
    /// Holds with an explicit lease (not renewed, so not entries), counted by lock name and
    /// field: a settle must not give them back (see `doubt.rs`).
    explicit: HashMap<(Arc<str>, Arc<str>), u32>,
    /// Acquires whose reply never came, by lock name and field (see `doubt.rs`).
    doubts: HashMap<(Arc<str>, Arc<str>), Doubt>,
    /// Old id -> new id of an entry put back after it was parked (see `park.rs`), for the
    /// guards that still name it by an old one. Removed with the entry.
    renamed: HashMap<u64, u64>,
    shutdown: bool,
}

/// An acquire that found the lock held by its owner: sent `at`, with the server's hold
/// `count` after it, and the maximum hold time of a new hold.
#[derive(Clone, Copy)]
pub(super) struct Held {
    pub(super) at: Instant,
    pub(super) count: u32,
    pub(super) max_hold: Option<Duration>,
}

impl State {
    /// A new entry or hold id.
    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Whether the client is closed (or closing): nothing is renewed any more.
    pub(super) fn is_shutdown(&self) -> bool {
        self.shutdown
    }

    /// Marks the client closed: the thread stops, and nothing is renewed any more.
    pub(super) fn shut_down(&mut self) {
        self.shutdown = true;
    }

    /// The entry `id`, if it is still watched.
    pub(super) fn entry(&self, id: u64) -> Option<&Entry> {
        self.entries.get(&id)
    }

    /// The entry `id`, if it is still watched, to change.
    pub(super) fn entry_mut(&mut self, id: u64) -> Option<&mut Entry> {
        self.entries.get_mut(&id)
    }

    /// Whether any entry is renewed (not only signalling its lease end).
    pub(super) fn renews_any(&self) -> bool {
        self.entries.values().any(|e| !e.signals_only())
    }

    /// The batch script that renews the entry `e`.
    pub(super) fn batch_of(&self, e: &Entry) -> &'static BatchRenewal {
        self.renewals[usize::from(e.renewal)]
    }

    /// Joins the live entry of `name`'s `renewal` as one more hold, or makes a new entry
    /// (true when new, to be scheduled). An entry whose lease has run out is not resurrected
    /// by the re-entry: it is lost (its callbacks queued) and a new entry replaces it. A
    /// re-entry keeps the entry's cap (counted from the first hold), whatever it asks for.
    pub(super) fn join(
        &mut self,
        name: &Arc<str>,
        renewal: Renewal,
        held: Held,
        lease: Duration,
        metrics: Option<&Arc<Recorder>>,
    ) -> (Watch, Arc<LeaseState>, bool) {
        let Renewal { field, batch } = renewal;
        let Held {
            at: acquired_at,
            count,
            max_hold,
        } = held;
        if let Some(id) = self.find(name, &field) {
            let entry = self
                .entries
                .get_mut(&id)
                .expect("the index and entries agree");
            // A re-entry (the server counted the earlier holds) set the lease again, if it had
            // not run out meanwhile. A count of 1 means the server had lost the earlier holds
            // (deleted, expired, force-unlocked) before the watchdog noticed.
            if count > 1 && entry.lease.confirm(acquired_at) {
                entry.holds += 1;
                let lease = Arc::clone(&entry.lease);
                let hold = self.new_id();
                return (Watch { id, hold }, lease, false);
            }
            // A lease that ran out is why (the server expired the key); otherwise the server
            // lost the holds some other way.
            let why = entry.lease.lost().unwrap_or(LostReason::NotHeld);
            if let Some((e, reason)) = self.lose(id, why) {
                log::warn!(
                    "lock `{}` (owner {}) lost ({reason:?}) before the watchdog noticed; \
                     re-acquired as a new hold",
                    e.name,
                    field
                );
            }
        }
        let id = self.new_id();
        let mut state = LeaseState::new(acquired_at, lease);
        if let Some(m) = metrics {
            state = state.counted_by(m);
        }
        if let Some(max_hold) = max_hold {
            state = state.capped_at(acquired_at + max_hold);
        }
        let lease = Arc::new(state);
        let renewal = self.renewal_index(batch);
        let mut entry = Entry::new(name, Some(Arc::clone(&field)), renewal, Arc::clone(&lease));
        if let Some(max_hold) = max_hold {
            let extra = entry.extra.get_or_insert_with(Default::default);
            extra.cap = Some(acquired_at + max_hold);
        }
        self.entries.insert(id, entry);
        self.index(name, field, id);
        let hold = self.new_id();
        (Watch { id, hold }, lease, true)
    }

    /// The index of `batch` in `renewals`, added if new.
    fn renewal_index(&mut self, batch: &'static BatchRenewal) -> u8 {
        let i = match self.renewals.iter().position(|&b| std::ptr::eq(b, batch)) {
            Some(i) => i,
            None => {
                self.renewals.push(batch);
                self.renewals.len() - 1
            }
        };
        u8::try_from(i).expect("a few lock kinds, so a few batch scripts")
    }

    /// Releases one hold of the entry `id`; at zero the entry is removed and returned.
    pub(super) fn release(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.get_mut(&id)?; // lost already, or released by another path
        entry.holds -= 1;
        if entry.holds == 0 {
            self.remove(id)
        } else {
            None
        }
    }

    /// Removes the entry `id` and returns it (out of renewal, out of the index); its due
    /// times go stale.
    pub(super) fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if let Some(extra) = &entry.extra {
            for alias in &extra.aliases {
                self.renamed.remove(alias);
            }
        }
        self.note_stale();
        if let Some(field) = &entry.field {
            self.unindex(&entry.name, field, id);
        }
        Some(entry)
    }

    /// Adds a timer entry that signals the end of the explicit lease `lease` of `name`, and
    /// returns the watch of its one hold. It is not scheduled yet.
    pub(super) fn add_timer(&mut self, name: &Arc<str>, lease: &Arc<LeaseState>) -> Watch {
        let id = self.new_id();
        self.entries
            .insert(id, Entry::new(name, None, 0, Arc::clone(lease)));
        let hold = self.new_id();
        Watch { id, hold }
    }

    /// Removes the entry `id` if it is a timer (an explicit lease's, which only exists for
    /// its callbacks), and returns it; a renewed entry stays.
    pub(super) fn remove_timer(&mut self, id: u64) -> Option<Entry> {
        match self.entries.get(&id) {
            Some(e) if e.field.is_none() => self.remove(id),
            _ => None,
        }
    }

    /// Puts the parked `entry` (`old` was its id then) back under a new id, indexed again,
    /// and returns that id. It is not scheduled yet.
    pub(super) fn put_back(&mut self, mut entry: Entry, old: u64) -> u64 {
        let id = self.new_id();
        // Every id the guards may know it by leads here (parking dropped the earlier ones).
        let aliases = &mut entry.extra.get_or_insert_with(Default::default).aliases;
        aliases.push(old);
        for &alias in aliases.iter() {
            self.renamed.insert(alias, id);
        }
        if let Some(field) = &entry.field {
            self.index(&entry.name, Arc::clone(field), id);
        }
        self.entries.insert(id, entry);
        id
    }

    /// Entry `id` is lost: removes it, latches its lease lost and queues its callbacks with
    /// the reason that stuck (a lease may have been seen running out first). Returns the
    /// entry (its callbacks taken) and that reason, for the caller to log.
    pub(super) fn lose(&mut self, id: u64, why: LostReason) -> Option<(Entry, LostReason)> {
        let entry = self.remove(id)?;
        Some(self.lose_entry(entry, why))
    }

    /// Every entry is lost for `why`, as by [`lose`](Self::lose); returns them, for the
    /// caller to log.
    pub(super) fn lose_all(&mut self, why: LostReason) -> Vec<Entry> {
        let ids: Vec<u64> = self.entries.keys().copied().collect();
        ids.into_iter()
            .filter_map(|id| self.lose(id, why).map(|(e, _)| e))
            .collect()
    }

    /// The parked `entry` is lost for `why`, as by [`lose`](Self::lose). Returns it, and its
    /// callbacks when the client is closed: the caller runs those, not the thread.
    pub(super) fn lose_parked(&mut self, entry: Entry, why: LostReason) -> (Entry, Vec<Fire>) {
        let queued = self.to_fire.len();
        let (entry, _) = self.lose_entry(entry, why);
        let fires = if self.shutdown {
            self.to_fire.split_off(queued)
        } else {
            Vec::new()
        };
        (entry, fires)
    }

    /// [`lose`](Self::lose) for an entry already out of the index (a parked one).
    fn lose_entry(&mut self, mut entry: Entry, why: LostReason) -> (Entry, LostReason) {
        let reason = entry.lease.mark_lost(why);
        if let Some(owner) = &entry.field {
            // An explicit lease running out is its expected end, not a loss to report.
            trace::lost(&entry.name, owner, &reason);
        }
        for (hold, callback) in entry.take_callbacks(|_| true) {
            self.to_fire.push(Fire {
                hold,
                name: Arc::clone(&entry.name),
                reason,
                callback,
            });
        }
        (entry, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static RENEW: BatchRenewal = BatchRenewal {
        script: &crate::scripts::LOCK_RENEW,
        add: |call, name, field| {
            call.key(name).arg(field);
        },
        holds: true,
        leased: true,
    };

    fn held(at: Instant, count: u32) -> Held {
        Held {
            at,
            count,
            max_hold: None,
        }
    }

    fn renewal(field: &str) -> Renewal {
        Renewal {
            field: Arc::from(field),
            batch: &RENEW,
        }
    }

    #[test]
    fn reentry_after_the_lease_ran_out_does_not_resurrect_the_lost_hold() {
        // Regression: a re-entry confirmed the old entry's lease even when it had already run
        // out by the clock, so a guard that had been lost looked held again.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let lease = Duration::from_secs(1);
        let long_ago = Instant::now() - Duration::from_secs(5);
        let (old, old_lease, new) = st.join(&name, renewal("o"), held(long_ago, 1), lease, None);
        assert!(new);
        st.entries
            .get_mut(&old.id)
            .unwrap()
            .add_callback(old.hold, Box::new(|_| {}));
        let (fresh, fresh_lease, new) =
            st.join(&name, renewal("o"), held(Instant::now(), 2), lease, None);
        assert!(new, "the re-entry joined a lost entry");
        assert_ne!(fresh.id, old.id);
        assert_eq!(old_lease.lost(), Some(LostReason::LeaseExpired));
        assert_eq!(fresh_lease.lost(), None);
        assert!(!st.entries.contains_key(&old.id));
        assert_eq!(st.find(&name, &Arc::from("o")), Some(fresh.id));
        let queued: Vec<_> = st.to_fire.iter().map(|f| (f.hold, f.reason)).collect();
        assert_eq!(queued, vec![(old.hold, LostReason::LeaseExpired)]);
        // A live entry is joined, as a second hold.
        let (again, _, new) = st.join(&name, renewal("o"), held(Instant::now(), 2), lease, None);
        assert!(!new);
        assert_eq!(again.id, fresh.id);
        assert_eq!(st.entries[&fresh.id].holds, 2);
    }

    #[test]
    fn an_acquire_that_made_a_new_hold_retires_the_entry_it_would_have_joined() {
        // Regression: a lock deleted on the server and taken again by the same thread before
        // the next renewal joined the old entry; the old guard's release then released the
        // new hold, and the old guard never learnt it was lost.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let lease = Duration::from_secs(30);
        let (old, old_lease, _) =
            st.join(&name, renewal("o"), held(Instant::now(), 1), lease, None);
        let (new_hold, new_lease, new) =
            st.join(&name, renewal("o"), held(Instant::now(), 1), lease, None);
        assert!(new, "a server count of 1 is a new hold");
        assert_ne!(new_hold.id, old.id);
        assert_eq!(old_lease.lost(), Some(LostReason::NotHeld));
        assert_eq!(new_lease.lost(), None);
        assert_eq!(st.entries[&new_hold.id].holds, 1);
    }

    #[test]
    fn holds_of_one_name_under_different_fields_are_found_and_released_apart() {
        // The index keeps the first field of a name apart from the others (read holds of
        // several threads, a thread's write and read holds): each must be found, and releasing
        // any of them, the first included, must leave the others found.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("rw");
        let lease = Duration::from_secs(30);
        let now = Instant::now();
        let fields = ["a", "b", "a:write"];
        let ids: Vec<u64> = fields
            .iter()
            .map(|f| st.join(&name, renewal(f), held(now, 1), lease, None).0.id)
            .collect();
        for (f, id) in fields.iter().zip(&ids) {
            assert_eq!(st.find(&name, &Arc::from(*f)), Some(*id), "{f}");
        }
        assert!(st.find(&name, &Arc::from("c")).is_none());
        assert!(st.release(ids[0]).is_some());
        assert!(st.find(&name, &Arc::from("a")).is_none());
        assert_eq!(st.find(&name, &Arc::from("b")), Some(ids[1]));
        assert_eq!(st.find(&name, &Arc::from("a:write")), Some(ids[2]));
        // A new hold of the released field is found, and re-entries join the right entry.
        let (again, _, new) = st.join(&name, renewal("a"), held(now, 1), lease, None);
        assert!(new);
        assert_eq!(st.find(&name, &Arc::from("a")), Some(again.id));
        let (b2, _, new) = st.join(&name, renewal("b"), held(now, 2), lease, None);
        assert!(!new);
        assert_eq!(b2.id, ids[1]);
        for id in [again.id, ids[1], ids[1], ids[2]] {
            st.release(id);
        }
        assert!(st.entries.is_empty() && st.by_name.is_empty() && st.more_fields.is_empty());
    }

    #[test]
    fn a_capped_hold_stops_renewing_before_its_cap_and_ends_as_max_hold_reached() {
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let lease = Duration::from_secs(3);
        let t0 = Instant::now() - Duration::from_secs(1);
        let capped = Held {
            max_hold: Some(Duration::from_secs(9)),
            ..held(t0, 1)
        };
        let (w, state, _) = st.join(&name, renewal("o"), capped, lease, None);
        assert_eq!(state.lost(), None);
        let e = &st.entries[&w.id];
        let s = Duration::from_secs;
        assert!(!e.past_cap(t0 + s(6), lease), "a lease ending at the cap");
        assert!(e.past_cap(t0 + s(6) + Duration::from_millis(1), lease));
        // A re-entry keeps the first hold's cap, whatever it asks for.
        let longer = Held {
            max_hold: Some(s(3600)),
            ..held(t0 + s(1), 2)
        };
        let (again, _, new) = st.join(&name, renewal("o"), longer, lease, None);
        assert!(!new && again.id == w.id);
        assert!(st.entries[&w.id].past_cap(t0 + s(7), lease));
        // Not renewed any more: the entry only signals its lease end, which is then a
        // max-hold loss.
        assert!(state.finish() && st.entries[&w.id].signals_only());
        let fresh = LeaseState::new(Instant::now(), Duration::from_millis(20));
        assert!(fresh.finish() && fresh.is_final());
        assert_eq!(fresh.lost(), None, "live until its lease ends");
        let ended = LeaseState::new(Instant::now() - s(1), Duration::from_millis(20));
        assert!(ended.finish());
        assert_eq!(ended.lost(), Some(LostReason::MaxHoldReached));
        assert_eq!(
            ended.mark_lost(LostReason::NotHeld),
            LostReason::MaxHoldReached
        );
        // A client closed before the lease ended wins.
        assert_eq!(
            fresh.mark_lost(LostReason::ClientClosed),
            LostReason::ClientClosed
        );
        // Uncapped holds are never past a cap.
        let (plain, _, _) = st.join(&name, renewal("p"), held(t0, 1), lease, None);
        assert!(!st.entries[&plain.id].past_cap(t0 + s(3600), lease));
    }
}
