//! The one place a hold event goes out: [`emit`] sends it to each feature that is on (the
//! metrics always, the history recorder and the lock-order records when the client has
//! them). A primitive reports through it and names no feature; a feature is added here.
//!
//! What stays at the call sites: the deadlock checks (they bound a wait, so they run inside
//! the acquire's frame), the trace span (one per call, opened before the call's first
//! command), and the count of what the calling thread holds (kept by the guard's lifetime).

use crate::client::Client;
use crate::hold::{HoldEvent, Subject};
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
