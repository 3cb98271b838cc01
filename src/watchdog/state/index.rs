//! How an entry is found: a renewed one by lock name and hash field, and any by an id it had
//! before it was parked (see `park.rs`).

use std::sync::Arc;

use super::State;
use crate::watchdog::lease::Watch;

impl State {
    /// `watch`, naming its entry by the id it has now.
    pub(in crate::watchdog) fn resolved(&self, watch: Watch) -> Watch {
        Watch {
            id: self.resolve(watch.id),
            hold: watch.hold,
        }
    }

    /// The id `id` stands for now: itself, or the entry it was renamed to.
    fn resolve(&self, mut id: u64) -> u64 {
        if self.renamed.is_empty() {
            return id; // no hold put back after a condition wait: the common case
        }
        while let Some(&next) = self.renamed.get(&id) {
            id = next;
        }
        id
    }

    /// The renewed entry of `name` and hash field `field`, if any.
    pub(in crate::watchdog) fn find(&self, name: &Arc<str>, field: &Arc<str>) -> Option<u64> {
        let first = self.by_name.get(name).copied().filter(|id| {
            self.entries
                .get(id)
                .is_some_and(|e| e.field.as_ref() == Some(field))
        });
        if first.is_some() || self.more_fields.is_empty() {
            return first;
        }
        self.more_fields
            .get(&(Arc::clone(name), Arc::clone(field)))
            .copied()
    }

    /// Indexes the new entry `id` of `name` and `field` (none of that name and field is
    /// indexed).
    pub(super) fn index(&mut self, name: &Arc<str>, field: Arc<str>, id: u64) {
        if self.by_name.contains_key(name) {
            self.more_fields.insert((Arc::clone(name), field), id);
        } else {
            self.by_name.insert(Arc::clone(name), id);
        }
    }

    /// Takes the entry `id` of `name` and `field` out of the index, if it is the one there.
    pub(super) fn unindex(&mut self, name: &Arc<str>, field: &Arc<str>, id: u64) {
        if self.by_name.get(name) == Some(&id) {
            self.by_name.remove(name);
        } else {
            let key = (Arc::clone(name), Arc::clone(field));
            if self.more_fields.get(&key) == Some(&id) {
                self.more_fields.remove(&key);
            }
        }
    }
}
