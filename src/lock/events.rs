//! The one stream of hold events: every lock reports what happens to a hold or a wait through
//! one call, [`RawLock::emit`], which names the lock, its kind and its mode once, and feeds
//! each feature that cares, when it is on: the metrics, the history recorder, the lock-order
//! records. A feature is added here, not at the call sites.
//!
//! What stays at the call sites: the deadlock checks (they bound a wait, so they run inside
//! the acquire's frame), the trace span (one per call, opened before the call's first
//! command), and the count of what the calling thread holds (kept by the guard's lifetime:
//! taken, leaked, dropped).

use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::history::HistoryKind;
use crate::lock::raw::RawLock;
use crate::order;

/// What happened to a hold of a lock, or to a wait for one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HoldEvent {
    /// The owner began to wait (its first attempt found the lock busy).
    Waiting,
    /// Taken (or re-entered) `waited` after the call began; `contended` if the call found it
    /// busy at first. `order`: the call of a thread (not a [`LockOwner`](crate::LockOwner)),
    /// for the lock-order records.
    Acquired {
        waited: Duration,
        contended: bool,
        order: Option<Ordered>,
    },
    /// A wait ended without the lock, `waited` after the call began: its deadline passed
    /// (`timed_out`), or it failed (an error, an interrupt, a close).
    GaveUp { waited: Duration, timed_out: bool },
    /// A wait ended with a deadlock error, `waited` after the call began.
    Deadlock { waited: Duration },
    /// The owner released a hold it had for `held` (unknown for a leaked guard's).
    Released { held: Option<Duration> },
    /// A hold, taken `held` before, was found lost: its lease ran out (`expired`), or it was
    /// taken or broken behind its owner's back.
    Lost { held: Duration, expired: bool },
    /// A condition wait released the lock its guard holds, held for `held`: the hold ends in
    /// the history (taking the lock back begins another), while the guard, and its count in
    /// the metrics, lives on.
    Yielded { held: Duration },
    /// A guard let go of a hold it had for `held` with no known end: the hold goes on under
    /// another guard (a condition wait's re-acquire), or its release failed and it ends with
    /// its lease. It no longer counts as held in the metrics; the history records nothing.
    Forgotten { held: Duration },
}

/// A thread's acquire, as the lock-order records take it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ordered {
    /// A read hold (shared with other readers).
    pub(crate) read: bool,
    /// The call may have waited: a pair with each lock the thread held already is recorded.
    pub(crate) waits: bool,
    /// Where the call was made.
    pub(crate) at: &'static Location<'static>,
}

impl RawLock {
    /// Reports `event` of `owner` on this lock, which happened at `at`, labelled with this
    /// lock's kind.
    pub(crate) fn emit(&self, owner: &Arc<str>, at: Instant, event: HoldEvent) {
        self.emit_as(self.kind.label(), owner, at, event);
    }

    /// As [`emit`](Self::emit), labelled `kind` (a lock set's member, which is a plain lock
    /// taken as part of a set).
    pub(crate) fn emit_as(
        &self,
        kind: &'static str,
        owner: &Arc<str>,
        at: Instant,
        event: HoldEvent,
    ) {
        let (client, name) = (&self.key.client, &self.key.name);
        let metrics = &client.inner.metrics;
        match event {
            HoldEvent::Acquired {
                waited, contended, ..
            } => metrics.acquired(kind, name, waited, contended),
            HoldEvent::GaveUp {
                timed_out: true, ..
            } => metrics.timed_out(kind, name),
            HoldEvent::Released { held: Some(held) }
            | HoldEvent::Lost { held, .. }
            | HoldEvent::Forgotten { held } => metrics.released(kind, name, held),
            _ => {}
        }
        // A RedLock member's lock lives on a server of its own: its calls are the RedLock's,
        // not holds of this client's server.
        if self.key.bound.is_some() {
            return;
        }
        if let HoldEvent::Acquired { order: Some(o), .. } = event {
            order::took(
                client,
                owner,
                std::slice::from_ref(name),
                o.read,
                o.waits,
                o.at,
            );
        }
        if let Some(history) = &client.inner.history {
            let (what, waited, held, contended) = match event {
                HoldEvent::Forgotten { .. } => return,
                HoldEvent::Waiting => (HistoryKind::Wait, None, None, false),
                HoldEvent::Acquired {
                    waited, contended, ..
                } => (HistoryKind::Acquire, Some(waited), None, contended),
                HoldEvent::GaveUp { waited, .. } => {
                    (HistoryKind::GaveUp, Some(waited), None, false)
                }
                HoldEvent::Deadlock { waited } => {
                    (HistoryKind::Deadlock, Some(waited), None, false)
                }
                HoldEvent::Released { held } => (HistoryKind::Release, None, held, false),
                HoldEvent::Yielded { held } => (HistoryKind::Release, None, Some(held), false),
                HoldEvent::Lost { held, expired } => {
                    let what = if expired {
                        HistoryKind::Expired
                    } else {
                        HistoryKind::Lost
                    };
                    (what, None, Some(held), false)
                }
            };
            history.add(what, name, owner, kind, at, waited, held, contended);
        }
    }
}
