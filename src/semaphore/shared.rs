//! What both semaphores share: the checks their calls make (a name, at least one permit) and
//! the wait their acquires end in, on the channel both publish their count on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::events;
use crate::hold::{HoldEvent, LockKind, Subject};
use crate::lock::{Ownership, ThreadOwned};
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

/// Takes permits: runs `attempt`, then waits on the semaphore's `channel` (which says how
/// many) until `deadline` (forever when `None`) through the one wait function, woken when
/// that many may be free. Each attempt reports the count it saw, which wakes the other waiters those
/// permits may serve. True once an attempt took them.
pub(super) fn wait_for_permits(
    client: &Client,
    channel: Channel<'_>,
    deadline: Option<Instant>,
    attempt: &mut dyn FnMut() -> Result<Tried>,
) -> Result<bool> {
    wait(&client.inner.pubsub, channel, deadline, attempt)
}

/// One acquire's hold events, and then its hold's: a wait begins when an attempt takes
/// nothing while time is left, the call ends taken or not, and a hold it took ends when
/// its guard gives the permits back (or keeps them, or finds them lost). The owner is the
/// calling thread's, as a lock's. A call that takes several expirable permits reports a hold
/// per permit (each has its guard), cloned from its report.
#[derive(Clone)]
pub(super) struct Report {
    client: Client,
    /// The semaphore's key.
    lock: Arc<str>,
    kind: LockKind,
    owner: Arc<str>,
    started: Instant,
    waiting: bool,
    /// When the permits were taken.
    taken: Option<Instant>,
    /// Set once the hold's loss was reported as found ([`broken`](Self::broken)), for a
    /// hold whose loss the watchdog reports (see [`telling`](Self::telling)).
    told: Option<Arc<AtomicBool>>,
}

impl Report {
    pub(super) fn new(client: &Client, lock: &Arc<str>, kind: LockKind) -> Report {
        Report {
            client: client.clone(),
            lock: Arc::clone(lock),
            kind,
            owner: ThreadOwned.owner_id(client),
            started: Instant::now(),
            waiting: false,
            taken: None,
            told: None,
        }
    }

    fn emit(&self, event: HoldEvent) {
        self.emit_at(Instant::now(), event);
    }

    fn emit_at(&self, at: Instant, event: HoldEvent) {
        let subject = Subject {
            lock: &self.lock,
            kind: self.kind,
            owner: &self.owner,
            at,
        };
        events::emit(&self.client, subject, event, true);
    }

    /// This hold's loss will be reported when found: the report that does it (see
    /// [`broken`](Self::broken)), sharing with this one the flag its end reads.
    pub(super) fn telling(&mut self) -> Report {
        self.told = Some(Arc::new(AtomicBool::new(false)));
        self.clone()
    }

    /// The loss will not be reported when found after all.
    pub(super) fn untold(&mut self) {
        self.told = None;
    }

    /// The hold this call took was found lost at `at` (its lease over: `expired`), while
    /// its guard lives: recorded in the history now (see `HoldEvent::Broken`).
    pub(super) fn broken(&self, at: Instant, expired: bool) {
        if let Some(taken) = self.taken {
            let held = at.saturating_duration_since(taken);
            self.emit_at(at, HoldEvent::Broken { held, expired });
        }
        if let Some(told) = &self.told {
            told.store(true, Ordering::Release);
        }
    }

    /// An attempt took nothing: the wait begins, unless it began or the call does not wait.
    pub(super) fn missed(&mut self, deadline: Option<Instant>) {
        if !self.waiting && deadline.is_none_or(|d| d > Instant::now()) {
            self.waiting = true;
            self.emit(HoldEvent::Waiting);
        }
    }

    /// The call ended: `got` true if it took the permits, `holds` holds from now on.
    pub(super) fn ended(&mut self, got: &Result<bool>, holds: u32) {
        let waited = self.started.elapsed();
        let event = match got {
            Ok(true) => {
                self.taken = Some(Instant::now());
                HoldEvent::Acquired {
                    waited,
                    contended: self.waiting,
                    order: None,
                }
            }
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
        for _ in 0..if got.as_ref().is_ok_and(|g| *g) {
            holds
        } else {
            1
        } {
            self.emit(event);
        }
    }

    /// The hold this call took ends as `end` says; nothing if it took none.
    pub(super) fn hold_ended(&self, end: End) {
        let Some(held) = self.taken.map(|t| t.elapsed()) else {
            return;
        };
        self.emit(match end {
            End::Released => HoldEvent::Released { held: Some(held) },
            End::Lost => HoldEvent::Lost {
                held,
                expired: false,
                told: self
                    .told
                    .as_ref()
                    .is_some_and(|t| t.load(Ordering::Acquire)),
            },
            End::Kept => HoldEvent::Forgotten { held },
        });
    }
}

/// How a hold of permits ends.
#[derive(Debug, Clone, Copy)]
pub(super) enum End {
    /// Given back.
    Released,
    /// Found gone (the semaphore made anew, an expirable permit's lease over).
    Lost,
    /// Kept for good (`forget`): no longer a hold, never given back.
    Kept,
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
