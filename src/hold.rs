//! The events of a hold, as every primitive reports them: what happened ([`HoldEvent`]), to
//! which hold ([`Subject`]). Data only: `events.rs` sends each event to the features that
//! are on, and each feature (metrics, history, lock order) reads it in its own module.

use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hold an event is of: the lock (or semaphore) by its key, its kind as labelled in the
/// metrics and the history (`plain`, `fair`, `read`, `lock set`, `semaphore`...), its
/// owner, and when the event happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) lock: &'a Arc<str>,
    pub(crate) kind: &'static str,
    pub(crate) owner: &'a Arc<str>,
    pub(crate) at: Instant,
}

/// What happened to a hold (of a lock, or of a semaphore's permits), or to a wait for one.
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
    /// The owner's release of a hold it had for `held` passed the lock to a waiting thread
    /// of its client in the same call (see `handover.rs`): a release whose waiter's acquire
    /// follows, with nothing published in between.
    HandedOver { held: Duration },
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
