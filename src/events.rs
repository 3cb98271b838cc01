//! The one place a hold event goes out: [`emit`] sends it to each feature that is on (the
//! metrics always, the history recorder and the lock-order records when the client has
//! them). A primitive reports through it and names no feature; a feature is added here.
//!
//! What stays at the call sites: the deadlock checks (they bound a wait, so they run inside
//! the acquire's frame), the trace span (one per call, opened before the call's first
//! command), and the count of what the calling thread holds (kept by the guard's lifetime).

use std::sync::Arc;
use std::time::Instant;

use crate::client::Client;
use crate::error::Result;
use crate::hold::{HoldEvent, LockKind, Subject};
use crate::order;

/// Reports `event` of `subject` to the features of `client`. `local`: false for a hold on a
/// server of its own (a RedLock member), which counts in the metrics only: its calls are the
/// RedLock's, not holds of this client's server.
pub(crate) fn emit(client: &Client, subject: Subject<'_>, event: HoldEvent, local: bool) {
    client.inner.metrics.on_hold(&subject, &event);
    if !local {
        return;
    }
    order::on_hold(client, &subject, &event);
    if let Some(history) = &client.inner.history {
        history.on_hold(&subject, &event);
    }
}

/// The events of one call that is admitted or not and holds nothing afterwards (a rate
/// limiter's acquire): [`Waiting`](HoldEvent::Waiting) when an attempt is refused while time
/// is left, then [`Admitted`](HoldEvent::Admitted) or, after a wait,
/// [`GaveUp`](HoldEvent::GaveUp). A call refused at once without waiting (a `try_`) reports
/// nothing, as a lock's `try_lock` that finds it busy.
pub(crate) struct Admission<'a> {
    client: &'a Client,
    /// The object's key.
    name: &'a Arc<str>,
    kind: LockKind,
    owner: Arc<str>,
    started: Instant,
    waiting: bool,
}

impl<'a> Admission<'a> {
    /// The call of `owner` on `name` (a key) of `kind`, beginning now.
    pub(crate) fn new(
        client: &'a Client,
        name: &'a Arc<str>,
        kind: LockKind,
        owner: Arc<str>,
    ) -> Admission<'a> {
        Admission {
            client,
            name,
            kind,
            owner,
            started: Instant::now(),
            waiting: false,
        }
    }

    fn emit(&self, event: HoldEvent) {
        let subject = Subject {
            lock: self.name,
            kind: self.kind,
            owner: &self.owner,
            at: Instant::now(),
        };
        emit(self.client, subject, event, true);
    }

    /// An attempt was refused: the wait begins, unless it began or the call does not wait
    /// (its `deadline` has passed).
    pub(crate) fn refused(&mut self, deadline: Option<Instant>) {
        if !self.waiting && deadline.is_none_or(|d| d > Instant::now()) {
            self.waiting = true;
            self.emit(HoldEvent::Waiting);
        }
    }

    /// The call ended: admitted (`Ok(true)`), not in time (`Ok(false)`) or failed.
    pub(crate) fn ended(self, got: &Result<bool>) {
        let waited = self.started.elapsed();
        let event = match got {
            Ok(true) => HoldEvent::Admitted {
                waited,
                contended: self.waiting,
            },
            _ if !self.waiting => return,
            Ok(false) => HoldEvent::GaveUp {
                waited,
                timed_out: true,
            },
            Err(_) => HoldEvent::GaveUp {
                waited,
                timed_out: false,
            },
        };
        self.emit(event);
    }
}
