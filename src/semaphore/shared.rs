//! What both semaphores share: the checks their calls make (a name, at least one permit) and
//! the wait their acquires end in, on the channel both publish their count on.

use std::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::pubsub::{wait, Channel, Tried};
use crate::trace;

/// Rejects an empty name.
pub(super) fn check_name(name: &str) -> Result<()> {
    crate::names::check_name("semaphore", name)
}

/// Rejects a call for no permits.
pub(super) fn check_permits(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::invalid("permits must be at least 1"));
    }
    Ok(())
}

/// Takes `permits` permits: runs `attempt`, then waits on the semaphore's `channel` until
/// `deadline` (forever when `None`) through the one wait function, woken when that many may
/// be free. Each attempt reports the count it saw, which wakes the other waiters those
/// permits may serve. True once an attempt took them.
pub(super) fn wait_for_permits(
    client: &Client,
    channel: &str,
    permits: u32,
    deadline: Option<Instant>,
    attempt: &mut dyn FnMut() -> Result<Tried>,
) -> Result<bool> {
    wait(
        &client.inner.pubsub,
        Channel::permits(channel, permits),
        deadline,
        attempt,
    )
}

/// Records an acquire's outcome on its span: the permits taken, or why none were.
pub(crate) fn trace_outcome(
    span: &trace::Span,
    got: &Result<bool>,
    permits: u32,
    deadline: Option<Instant>,
    started: Instant,
) {
    let waited = started.elapsed();
    // A deadline passed at the start: one try, which does not wait.
    let tried_once = deadline.is_some_and(|d| d <= started);
    match got {
        Ok(true) => span.acquired(permits, waited),
        Ok(false) if tried_once => span.gave_up("busy", waited),
        Ok(false) => span.gave_up("timed_out", waited),
        Err(_) => span.gave_up("error", waited),
    }
}
