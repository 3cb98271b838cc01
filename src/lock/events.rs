//! A lock's hold events: [`RawLock::emit`] names the lock, its kind and its owner once and
//! hands the event to the one fan-out (`crate::events`).

use std::sync::Arc;
use std::time::Instant;

use crate::events;
use crate::hold::LockKind;
use crate::hold::{HoldEvent, Subject};
use crate::lock::raw::RawLock;

impl RawLock {
    /// Reports `event` of `owner` on this lock, which happened at `at`, labelled with this
    /// lock's kind.
    pub(crate) fn emit(&self, owner: &Arc<str>, at: Instant, event: HoldEvent) {
        self.emit_as(self.kind.label(), owner, at, event);
    }

    /// As [`emit`](Self::emit), labelled `kind` (a lock set's member, which is a plain lock
    /// taken as part of a set).
    pub(crate) fn emit_as(&self, kind: LockKind, owner: &Arc<str>, at: Instant, event: HoldEvent) {
        let subject = Subject {
            lock: &self.key.name,
            kind,
            owner,
            at,
        };
        events::emit(&self.key.client, subject, event, self.key.bound.is_none());
    }
}
