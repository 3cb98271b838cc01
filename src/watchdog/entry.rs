//! One watched hold: an [`Entry`] per held lock (or explicit-lease timer), kept small, with
//! its rarer parts (`on_lost` callbacks, the cap) boxed in [`Extra`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lease::{Callback, LeaseState};

pub(super) struct Entry {
    pub(super) name: Arc<str>,
    /// The hash field renewed: the owner id (sharing the guard's string), or `<owner>:write`
    /// for a write hold. `None` for a timer: an explicit lease, watched only to signal its end.
    pub(super) field: Option<Arc<str>>,
    pub(super) holds: u32,
    /// The batch script that renews it, as an index into
    /// [`State::renewals`](super::state::State::renewals) (unused by a timer). It fits in what
    /// would be padding after `holds`.
    pub(super) renewal: u8,
    pub(super) lease: Arc<LeaseState>,
    /// What few entries have, boxed so that the common entry stays small.
    pub(super) extra: Option<Box<Extra>>,
}

/// The rarer parts of an [`Entry`].
#[derive(Default)]
pub(super) struct Extra {
    /// `on_lost` callbacks, each with the hold (guard) it belongs to.
    callbacks: Vec<(u64, Callback)>,
    /// The hold's cap: no renewal is sent whose lease would end after it (the first
    /// acquire's send time plus the maximum hold time).
    pub(super) cap: Option<Instant>,
    /// The ids this entry had before it was parked and put back under a new one (see
    /// `park.rs`): guards may still name it by them.
    pub(super) aliases: Vec<u64>,
}

impl Entry {
    /// A single hold of `name`: renewed (`field` set) by the batch script `renewal`, or a
    /// timer.
    pub(super) fn new(
        name: &Arc<str>,
        field: Option<Arc<str>>,
        renewal: u8,
        lease: Arc<LeaseState>,
    ) -> Entry {
        Entry {
            name: Arc::clone(name),
            field,
            holds: 1,
            renewal,
            lease,
            extra: None,
        }
    }

    pub(super) fn add_callback(&mut self, hold: u64, callback: Callback) {
        let extra = self.extra.get_or_insert_with(Default::default);
        extra.callbacks.push((hold, callback));
    }

    /// Whether the entry only signals its lease end: a timer, or a hold past its cap.
    pub(super) fn signals_only(&self) -> bool {
        self.field.is_none() || self.lease.is_final()
    }

    /// Whether a renewal sent at `now` would set a lease (`lease` long) ending after the
    /// hold's cap.
    pub(super) fn past_cap(&self, now: Instant, lease: Duration) -> bool {
        let cap = self.extra.as_ref().and_then(|x| x.cap);
        cap.is_some_and(|cap| now + lease > cap)
    }

    /// Removes and returns the callbacks matching `f`.
    pub(super) fn take_callbacks(
        &mut self,
        f: impl FnMut(&(u64, Callback)) -> bool,
    ) -> Vec<(u64, Callback)> {
        match &mut self.extra {
            Some(extra) => take_where(&mut extra.callbacks, f),
            None => Vec::new(),
        }
    }
}

/// Removes and returns the items of `v` matching `f`, keeping the others in order.
pub(super) fn take_where<T>(v: &mut Vec<T>, mut f: impl FnMut(&T) -> bool) -> Vec<T> {
    let (taken, kept) = std::mem::take(v).into_iter().partition(|x| f(x));
    *v = kept;
    taken
}

pub(super) fn owner(e: &Entry) -> &str {
    e.field.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_entry_stays_small() {
        // The watchdog keeps an entry per held lock; at 100,000 locks every 8 bytes here cost
        // about 1 MB (see benches/locks.rs, `watchdog`). Rare parts go in `Extra`.
        assert!(
            std::mem::size_of::<Entry>() <= 56,
            "{}",
            std::mem::size_of::<Entry>()
        );
    }
}
