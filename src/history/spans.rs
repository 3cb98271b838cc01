//! Holds and waits from a history's events: the one span builder that `redlatch top`,
//! `redlatch history` pictures and any tool of a user's read a history with.
//!
//! A hold runs from an acquire to the release or loss that ends it; re-entrant acquires nest,
//! and the hold ends with the last of their ends (a loss ends it at once: the ends that its
//! other guards report later are the same loss). A wait runs from a wait event to the
//! acquire, timeout or deadlock that ends it; without a wait event (its start fell outside
//! the events read, or was left out of the stream because its end was written with it), from
//! its call when the call took 1 ms or more (and, for an acquire, found the lock busy). An end whose acquire came before the events is a
//! hold of its recorded length, merged with the last hold of its track where they overlap
//! (nested guards). Spans still open after the last event end at `now_us`. A track is one
//! owner's events on one lock in one mode (a read-write lock's read and write holds are two).
//! A rate limiter's admission is recorded as an acquire and a release at the same time: it
//! ends its wait, and makes a hold of no length, never one that stays open.

use std::collections::HashMap;
use std::time::Duration;

use super::{HistoryEvent, HistoryKind};
use crate::hold::{LockKind, Owner};

/// An acquire, timeout or deadlock without a wait event is a wait from its call when the call
/// took at least this long (µs).
const MIN_WAIT_US: u64 = 1000;

/// What a [`Span`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SpanKind {
    /// The owner held the lock.
    Hold,
    /// The owner waited for the lock.
    Wait,
}

/// One hold or wait of a lock by one owner ([`timeline`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Span {
    /// The lock's name.
    pub lock: String,
    /// The lock's kind as recorded.
    pub mode: LockKind,
    /// Who held or waited.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub owner: Owner,
    /// The recording client's name.
    pub client_name: String,
    /// The recording process's host.
    pub host: String,
    /// The recording process's id.
    pub pid: u32,
    /// The owner's thread, by name.
    pub thread: String,
    /// A hold or a wait.
    pub kind: SpanKind,
    /// When it began, µs since the Unix epoch (the server's clock).
    pub start_us: u64,
    /// When it ended (`now_us` when still open).
    pub end_us: u64,
    /// How it ended: a hold `released`, `lost` or still `held`; a wait `acquired`,
    /// `gave_up`, `deadlock` or still `waiting`.
    pub outcome: &'static str,
}

impl Span {
    /// Whether it is still going on at the end of the events (a hold `held`, a wait
    /// `waiting`).
    pub fn is_open(&self) -> bool {
        matches!(self.outcome, "held" | "waiting")
    }
}

/// A moment worth marking: a hold lost, or a wait ended by a deadlock ([`timeline`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Mark {
    /// When, µs since the Unix epoch (the server's clock).
    pub at_us: u64,
    /// `lost` or `deadlock`.
    pub what: &'static str,
    /// The lock's name.
    pub lock: String,
    /// The lock's kind as recorded.
    pub mode: LockKind,
    /// Who held or waited.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub owner: Owner,
}

/// The holds and waits of a history, and its marks ([`timeline`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Timeline {
    /// Sorted by start (then end, owner, lock, and waits before holds).
    pub spans: Vec<Span>,
    /// In the order of the events.
    pub marks: Vec<Mark>,
}

/// The spans and marks of `events` (oldest first, as [`Client::history`] and
/// [`Client::recent_history`] return them), with spans still open ending at `now_us` (µs
/// since the Unix epoch, the server's clock).
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let events = client.history("ledger")?;
/// let now_us = events.last().map_or(0, |e| e.at_us);
/// for span in redlatch::history::timeline(&events, now_us).spans {
///     println!("{} {:?} {} µs ({})", span.owner, span.kind, span.end_us - span.start_us, span.outcome);
/// }
/// # Ok(()) }
/// ```
///
/// [`Client::history`]: crate::Client::history
/// [`Client::recent_history`]: crate::Client::recent_history
pub fn timeline(events: &[HistoryEvent], now_us: u64) -> Timeline {
    let mut tracks: HashMap<(&Owner, &str, LockKind), Track<'_>> = HashMap::new();
    let mut out = Timeline::default();
    for ev in events {
        let track = tracks.entry((&ev.owner, &ev.lock, ev.mode)).or_default();
        match ev.kind {
            // A second wait event before the wait ended continues the first.
            HistoryKind::Wait => {
                track.wait.get_or_insert(ev);
            }
            HistoryKind::Acquire => {
                out.end_wait(track, ev, "acquired");
                match &mut track.hold {
                    Some((_, count)) => *count += 1,
                    None => track.hold = Some((ev, 1)),
                }
            }
            HistoryKind::GaveUp => out.end_wait(track, ev, "gave_up"),
            HistoryKind::Deadlock => {
                out.end_wait(track, ev, "deadlock");
                out.marks.push(mark(ev, "deadlock"));
            }
            HistoryKind::Release => out.end_hold(track, ev, "released"),
            HistoryKind::Lost | HistoryKind::Expired => out.end_hold(track, ev, "lost"),
        }
    }
    for track in tracks.into_values() {
        if let Some(w) = track.wait {
            let end = now_us.max(w.at_us);
            out.spans
                .push(span(w, SpanKind::Wait, w.at_us, end, "waiting"));
        }
        if let Some((a, _)) = track.hold {
            let end = now_us.max(a.at_us);
            out.spans
                .push(span(a, SpanKind::Hold, a.at_us, end, "held"));
        }
    }
    out.spans.sort_by(|a, b| order(a).cmp(&order(b)));
    out
}

/// What is open of one track while the events are read.
#[derive(Default)]
struct Track<'a> {
    /// The open hold: the acquire that began it, and how many acquires it counts.
    hold: Option<(&'a HistoryEvent, u32)>,
    /// The open wait's first event.
    wait: Option<&'a HistoryEvent>,
    /// Ends still to come of a hold that a loss ended: those of its other re-entrant guards.
    stale_ends: u32,
    /// This track's last hold span (an end whose acquire came before the events extends it).
    last_hold: Option<usize>,
}

/// The order of spans: by start, then (for a stable output) end, owner, lock and kind.
fn order(s: &Span) -> (u64, u64, &Owner, &str, bool) {
    (
        s.start_us,
        s.end_us,
        &s.owner,
        &s.lock,
        s.kind == SpanKind::Hold,
    )
}

impl Timeline {
    /// `ev` (acquire, timeout, deadlock) ends the track's wait, if any: from its wait event,
    /// or without one, from its call when that took [`MIN_WAIT_US`] or more (and, for an
    /// acquire, found the lock busy).
    fn end_wait(&mut self, track: &mut Track<'_>, ev: &HistoryEvent, outcome: &'static str) {
        // An acquire waited only if it found the lock busy (a slow call is no wait).
        let waited = ev.contended || ev.kind != HistoryKind::Acquire;
        let start = match (track.wait.take(), ev.waited.map(micros)) {
            (Some(w), _) => w.at_us,
            (None, Some(us)) if waited && us >= MIN_WAIT_US => ev.at_us.saturating_sub(us),
            _ => return,
        };
        let start = start.min(ev.at_us);
        self.spans
            .push(span(ev, SpanKind::Wait, start, ev.at_us, outcome));
    }

    /// `ev` (release, loss) ends one acquire of the track's hold; the hold ends with its last,
    /// or at once when lost. An end whose acquire came before the events is a hold of its
    /// `held_us` (merged with the track's last hold if they overlap: nested guards).
    fn end_hold(&mut self, track: &mut Track<'_>, ev: &HistoryEvent, outcome: &'static str) {
        let lost = outcome == "lost";
        match track.hold.take() {
            Some((a, count)) if count > 1 && !lost => track.hold = Some((a, count - 1)),
            Some((a, count)) => {
                track.stale_ends = count - 1;
                track.last_hold = Some(self.spans.len());
                let end = ev.at_us.max(a.at_us);
                self.spans
                    .push(span(a, SpanKind::Hold, a.at_us, end, outcome));
            }
            None if track.stale_ends > 0 => {
                track.stale_ends -= 1;
                return;
            }
            None => {
                let Some(held) = ev.held.map(micros) else {
                    return;
                };
                let start = ev.at_us.saturating_sub(held);
                match track.last_hold.map(|i| &mut self.spans[i]) {
                    Some(s) if s.end_us >= start => {
                        s.start_us = s.start_us.min(start);
                        s.end_us = ev.at_us;
                        s.outcome = outcome;
                    }
                    _ => {
                        track.last_hold = Some(self.spans.len());
                        self.spans
                            .push(span(ev, SpanKind::Hold, start, ev.at_us, outcome));
                    }
                }
            }
        }
        if lost {
            self.marks.push(mark(ev, "lost"));
        }
    }
}

/// Whole microseconds.
fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// A span of `ev`'s owner and lock.
fn span(
    ev: &HistoryEvent,
    kind: SpanKind,
    start_us: u64,
    end_us: u64,
    outcome: &'static str,
) -> Span {
    Span {
        lock: ev.lock.clone(),
        mode: ev.mode,
        owner: ev.owner.clone(),
        client_name: ev.client_name.clone(),
        host: ev.host.clone(),
        pid: ev.pid,
        thread: ev.thread.clone(),
        kind,
        start_us,
        end_us,
        outcome,
    }
}

/// A mark at `ev`.
fn mark(ev: &HistoryEvent, what: &'static str) -> Mark {
    Mark {
        at_us: ev.at_us,
        what,
        lock: ev.lock.clone(),
        mode: ev.mode,
        owner: ev.owner.clone(),
    }
}

#[cfg(test)]
#[path = "spans_tests.rs"]
mod tests;
