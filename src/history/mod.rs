//! Lock histories: the events that clients with
//! [`ConfigBuilder::history`](crate::ConfigBuilder::history) on record ([`HistoryEvent`],
//! read with [`Client::history`](crate::Client::history) and
//! [`Client::recent_history`](crate::Client::recent_history)), and the holds and waits they
//! make ([`timeline`]), which `redlatch top` and `redlatch history` read them with.
//!
//! How a client records (internal): events are kept in memory as they happen, and written to
//! the client's capped stream on the server once a second by the watchdog thread, in one
//! pipelined call. Times are the server's: each flush reads the server's `TIME` and learns
//! from the round trip around it the bounds of the server's clock against this process's
//! monotonic clock (the server ran `TIME` between the send and the reply). An event that ends
//! a hold (release, loss) takes the lower bound, one that begins it (acquire) the upper
//! bound, so a hold's recorded span lies inside the real one: the spans of one exclusive lock
//! never overlap, whichever clients recorded them (on one server; a cluster's nodes each have
//! their clock). A loss is recorded when it is found (the watchdog's check), not only when its
//! guard lets go; a client's last events are written when it closes, when its last handle
//! goes, and at the process's exit (`exit.rs`). `event.rs` holds an event and the stream's
//! fields, `read.rs` reads the streams back, `spans.rs` is the span builder.

mod event;
mod exit;
mod read;
mod spans;
mod who;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::backend::{Backend, Policy};
use crate::hold::LockKind;
use crate::hold::{HoldEvent, Subject};
use crate::keys;
use crate::time::millis;
use event::fields;
pub use event::{HistoryEvent, HistoryKind};
pub(crate) use exit::flush_at_exit;
pub(crate) use read::{read, server_time_us};
pub use spans::{timeline, Mark, Span, SpanKind, Timeline};
pub(crate) use who::{introduce, this_thread, who_is};

/// How often the watchdog thread writes the events out.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// The most events kept while the server does not answer; older ones are dropped.
const MAX_PENDING: usize = 100_000;
/// The most events one write sends; the rest wait for the next.
const MAX_PER_WRITE: usize = 5_000;
/// The longest a write may take (less where a lease is short): the watchdog's thread makes
/// it, and renewals wait meanwhile.
const WRITE_BOUND: Duration = Duration::from_secs(1);
/// The most owners whose thread names a client remembers having written.
const MAX_NAMED: usize = 10_000;

/// One event, as recorded: its local time and which bound of the server's clock it takes.
struct Pending {
    /// The event's number in this client's history: a write sent again (its reply lost) is
    /// told from a new one by it.
    seq: u64,
    kind: HistoryKind,
    lock: Arc<str>,
    owner: Arc<str>,
    mode: LockKind,
    at: Instant,
    /// Whether the event takes the upper bound of the server's time (it begins a hold).
    upper: bool,
    waited: Option<Duration>,
    held: Option<Duration>,
    contended: bool,
}

/// What the next flush writes.
#[derive(Default)]
struct Buffer {
    events: VecDeque<Pending>,
    /// The number of the next event.
    next_seq: u64,
    /// Owners whose thread names are not written yet: owner -> name.
    threads: Vec<(Arc<str>, String)>,
    /// Owners whose thread names were taken.
    named: HashSet<Arc<str>>,
}

/// The kind of a loss: the lease ran out (`expired`), or the hold was broken.
fn loss(expired: bool) -> HistoryKind {
    if expired {
        HistoryKind::Expired
    } else {
        HistoryKind::Lost
    }
}

impl Buffer {
    /// Whether a flush has nothing to write.
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.threads.is_empty()
    }
}

/// The server's clock against this process's: server µs = local µs (since `base`) plus an
/// offset within `lo..=hi`.
#[derive(Clone, Copy)]
struct Offset {
    lo: i64,
    hi: i64,
}

/// A client's history recorder.
pub(crate) struct History {
    base: Instant,
    stream: String,
    client_id: String,
    client_name: String,
    max_len: usize,
    /// How long a write may take.
    bound: Duration,
    buffer: Mutex<Buffer>,
    offset: Mutex<Option<Offset>>,
}

impl History {
    /// The recorder of the client `client_id`, named `client_name`, keeping at most
    /// `max_len` events (about: the stream is trimmed in whole nodes) on the server; its
    /// writes take at most an eighth of the `lease` (the watchdog's, whose thread writes).
    pub(crate) fn new(
        client_id: &str,
        client_name: &str,
        max_len: usize,
        lease: Duration,
    ) -> History {
        History {
            base: Instant::now(),
            stream: keys::history(client_id),
            client_id: client_id.to_owned(),
            client_name: client_name.to_owned(),
            max_len,
            bound: WRITE_BOUND.min(lease / 8).max(Duration::from_millis(10)),
            buffer: Mutex::new(Buffer::default()),
            offset: Mutex::new(None),
        }
    }

    /// Records what a hold event says: a wait's start and end, an acquire, a hold's end
    /// (a condition wait's yield ends one too). A guard that lets go with no known end
    /// records nothing. An admission (a rate limiter's) is an acquire and a release at once:
    /// its wait ends, and no hold stays open, for readers of every version.
    pub(crate) fn on_hold(&self, s: &Subject<'_>, event: &HoldEvent) {
        let (kind, waited, held, contended) = match *event {
            HoldEvent::Forgotten { .. } => return,
            HoldEvent::Admitted { waited, contended } => {
                self.add(s, HistoryKind::Acquire, Some(waited), None, contended);
                (HistoryKind::Release, None, Some(Duration::ZERO), false)
            }
            HoldEvent::Waiting => (HistoryKind::Wait, None, None, false),
            HoldEvent::Acquired {
                waited, contended, ..
            } => (HistoryKind::Acquire, Some(waited), None, contended),
            HoldEvent::GaveUp { waited, .. } => (HistoryKind::GaveUp, Some(waited), None, false),
            HoldEvent::Deadlock { waited } => (HistoryKind::Deadlock, Some(waited), None, false),
            HoldEvent::Released { held } => (HistoryKind::Release, None, held, false),
            // Recorded as a release (readers of older versions know it): the waiter's
            // acquire follows it.
            HoldEvent::HandedOver { held } => (HistoryKind::Release, None, Some(held), false),
            HoldEvent::Yielded { held } => (HistoryKind::Release, None, Some(held), false),
            // Recorded when found; the guard's report of the same loss is left out.
            HoldEvent::Broken { held, expired }
            | HoldEvent::Lost {
                held,
                expired,
                told: false,
            } => (loss(expired), None, Some(held), false),
            HoldEvent::Lost { told: true, .. } => return,
        };
        self.add(s, kind, waited, held, contended);
    }

    /// Keeps the event `kind` of `s` until the next flush, naming the thread once per owner.
    fn add(
        &self,
        s: &Subject<'_>,
        kind: HistoryKind,
        waited: Option<Duration>,
        held: Option<Duration>,
        contended: bool,
    ) {
        let (lock, owner, mode, at) = (s.lock, s.owner, s.kind, s.at);
        let mut b = self.buffer.lock();
        if b.named.len() >= MAX_NAMED {
            b.named.clear();
        }
        if !b.named.contains(owner) {
            b.named.insert(Arc::clone(owner));
            b.threads.push((Arc::clone(owner), this_thread()));
        }
        if b.events.len() >= MAX_PENDING {
            b.events.pop_front();
        }
        let seq = b.next_seq;
        b.next_seq += 1;
        b.events.push_back(Pending {
            seq,
            kind,
            lock: Arc::clone(lock),
            owner: Arc::clone(owner),
            mode,
            at,
            upper: kind == HistoryKind::Acquire,
            waited,
            held,
            contended,
        });
    }

    /// Writes the events recorded since the last flush (and the server's time, for the next):
    /// one pipelined call. Events the server did not take are kept for the next flush.
    pub(crate) fn flush(&self, backend: &Backend) {
        if self.buffer.lock().is_empty() {
            return;
        }
        let known = *self.offset.lock();
        let offset = match known {
            Some(offset) => offset,
            None => match self.measure(backend, redis::pipe().cmd("TIME")) {
                Ok(offset) => offset,
                Err(e) => {
                    log::debug!("history: reading the server's time failed: {e}");
                    return;
                }
            },
        };
        let (mut events, threads) = {
            let mut b = self.buffer.lock();
            let n = b.events.len().min(MAX_PER_WRITE);
            let events: Vec<Pending> = b.events.drain(..n).collect();
            (events, std::mem::take(&mut b.threads))
        };
        drop_ended_waits(&mut events);
        if events.is_empty() && threads.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("TIME");
        for e in &events {
            let local = e.at.saturating_duration_since(self.base).as_micros() as i64;
            let at = local + if e.upper { offset.hi } else { offset.lo };
            let cmd = pipe
                .cmd("XADD")
                .arg(&self.stream)
                .arg("MAXLEN")
                .arg("~")
                .arg(self.max_len)
                .arg("*")
                .arg(fields::SEQ)
                .arg(e.seq)
                .arg(fields::KIND)
                .arg(e.kind.word())
                .arg(fields::LOCK)
                .arg(&*e.lock)
                .arg(fields::OWNER)
                .arg(&*e.owner)
                .arg(fields::MODE)
                .arg(e.mode.as_str())
                .arg(fields::AT)
                .arg(at.max(0));
            if let Some(w) = e.waited {
                cmd.arg(fields::WAITED).arg(w.as_micros() as u64);
            }
            if let Some(h) = e.held {
                cmd.arg(fields::HELD).arg(h.as_micros() as u64);
            }
            if e.contended {
                cmd.arg(fields::CONTENDED).arg(1);
            }
            cmd.ignore();
        }
        let named = threads.iter().map(|(o, n)| (&**o, n.as_str()));
        introduce(&mut pipe, &self.client_id, &self.client_name, named);
        pipe.cmd("PEXPIRE")
            .arg(&self.stream)
            .arg(millis(who::TTL))
            .ignore();
        if let Err(e) = self.measure(backend, &pipe) {
            log::debug!(
                "history: writing {} events failed: {e}; kept for the next flush",
                events.len()
            );
            // Sent again at the next write, before the newer ones: readers drop the copies of
            // events the server took after all (by their number).
            let mut b = self.buffer.lock();
            for e in events.into_iter().rev() {
                b.events.push_front(e);
            }
            let over = b.events.len().saturating_sub(MAX_PENDING);
            b.events.drain(..over);
            b.threads.extend(threads);
        }
    }

    /// Runs `pipe` (whose first command is `TIME`, the others' replies ignored) and keeps the
    /// bounds it gives of the server's clock.
    fn measure(&self, backend: &Backend, pipe: &redis::Pipeline) -> crate::Result<Offset> {
        let sent = self.base.elapsed().as_micros() as i64;
        let ((secs, us),): ((i64, i64),) =
            backend.run_with(&self.stream, Policy::Bounded(self.bound), |c| pipe.query(c))?;
        let replied = self.base.elapsed().as_micros() as i64;
        let server = secs * 1_000_000 + us;
        let offset = Offset {
            lo: server - replied,
            hi: server - sent,
        };
        *self.offset.lock() = Some(offset);
        Ok(offset)
    }
}

/// Leaves out the wait events whose wait ended in the same batch: the event that ended it
/// (an acquire, timeout or deadlock) says how long it was. A wait still going on at a write
/// is written, so that readers see it.
fn drop_ended_waits(events: &mut Vec<Pending>) {
    let mut ended: HashSet<(*const u8, *const u8)> = HashSet::new();
    let mut keep = vec![true; events.len()];
    for (i, e) in events.iter().enumerate().rev() {
        let who = (e.owner.as_ptr(), e.lock.as_ptr());
        match e.kind {
            HistoryKind::Acquire | HistoryKind::GaveUp | HistoryKind::Deadlock => {
                ended.insert(who);
            }
            HistoryKind::Wait => keep[i] = !ended.remove(&who),
            _ => {}
        }
    }
    let mut kept = keep.into_iter();
    events.retain(|_| kept.next().unwrap_or(true));
}
