//! A lock history as pictures: the events of [`redlatch::Client::history`] turned into spans
//! of holds and waits, and those into a Chrome trace that Perfetto and
//! `chrome://tracing` open ([`trace_json`]) or a self-contained SVG timeline ([`svg`]).
//!
//! A hold runs from an acquire to the release or loss that ends it (re-entrant acquires nest:
//! the hold ends with the last of their ends); a wait from a wait event to the acquire,
//! timeout or deadlock that ends it. Spans still open after the last event end at `now_us`.
//! Times are the server's clock, in µs since the Unix epoch.
//!
//! The pictures put each owner (a thread of a client) on a row of its own, in the order of
//! their first events; an owner's spans that overlap (a wait for one lock while holding
//! another, or holds of two locks) take further lanes of that row.

mod svg;
#[cfg(test)]
mod tests;
mod trace;

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use redlatch::{HistoryEvent, HistoryKind};
use serde_json::{json, Value};

/// An acquire, timeout or deadlock without a wait event is drawn as a wait from its call when
/// its call took at least this long (µs).
const MIN_WAIT_US: u64 = 1000;

/// What a [`Span`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// The owner held the lock.
    Hold,
    /// The owner waited for the lock.
    Wait,
}

/// One hold or wait of a lock by one owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The lock's name.
    pub lock: String,
    /// The lock's kind (`plain`, `fair`, `read`, ...).
    pub mode: String,
    /// The owner id (`<client id>:<thread number>`).
    pub owner: String,
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
    /// When it began, µs since the Unix epoch (server clock).
    pub start_us: u64,
    /// When it ended (or `now_us`, when still open).
    pub end_us: u64,
    /// How it ended: a hold `released`, `lost` or still `held`; a wait `acquired`,
    /// `gave_up`, `deadlock` or still `waiting`.
    pub outcome: &'static str,
}

/// The Chrome trace-event JSON (object format) of `events`: a process per recording process,
/// a thread per owner (and per further lane of an owner with overlapping spans), a complete
/// event (`"ph": "X"`, category `hold` or `wait`) per span and an instant event per hold lost
/// and per deadlock. Times (`ts`, `dur`) are µs from the earliest event or span, whose
/// absolute time `otherData` gives.
pub fn trace_json(events: &[HistoryEvent], now_us: u64) -> Value {
    trace::trace_of(&view(events), now_us)
}

/// A self-contained SVG timeline of `events`: a time axis (from the earliest event or span),
/// a row per owner, a filled bar per hold (a colour per lock, with a legend), an outlined
/// light bar per wait, a cross where a hold was lost and a diamond where a wait ended in a
/// deadlock.
pub fn svg(events: &[HistoryEvent], now_us: u64) -> String {
    svg::svg_of(&view(events), now_us)
}

/// The fields of a [`HistoryEvent`] that a timeline reads, borrowed (the library's events are
/// built by the library only: the tests build these).
#[derive(Debug, Clone, Copy)]
struct Ev<'a> {
    at_us: u64,
    kind: HistoryKind,
    lock: &'a str,
    mode: &'a str,
    owner: &'a str,
    client_name: &'a str,
    host: &'a str,
    pid: u32,
    thread: &'a str,
    waited_us: Option<u64>,
    held_us: Option<u64>,
}

/// `events` as the timeline reads them.
fn view(events: &[HistoryEvent]) -> Vec<Ev<'_>> {
    events
        .iter()
        .map(|e| Ev {
            at_us: e.at_us,
            kind: e.kind,
            lock: &e.lock,
            mode: &e.mode,
            owner: &e.owner,
            client_name: &e.client_name,
            host: &e.host,
            pid: e.pid,
            thread: &e.thread,
            waited_us: e.waited_us,
            held_us: e.held_us,
        })
        .collect()
}

/// A moment the pictures mark: a hold lost, or a wait ended by a deadlock.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mark {
    at_us: u64,
    /// `lost` or `deadlock`.
    what: &'static str,
    lock: String,
    mode: String,
    owner: String,
}

/// The spans and marks of a history.
#[derive(Default)]
struct Timeline {
    spans: Vec<Span>,
    marks: Vec<Mark>,
}

/// What is open of one (owner, lock, kind) while the events are read.
#[derive(Default)]
struct Track<'a> {
    /// The open hold: the acquire that began it, and how many acquires it counts.
    hold: Option<(Ev<'a>, u32)>,
    /// The open wait's first event.
    wait: Option<Ev<'a>>,
    /// Ends still to come of a hold that a loss ended: those of its other re-entrant guards.
    stale_ends: u32,
    /// This track's last hold span (an end whose acquire came before the events extends it).
    last_hold: Option<usize>,
}

/// Reads `events` in order into spans (sorted by start) and marks.
fn build(events: &[Ev<'_>], now_us: u64) -> Timeline {
    let mut tracks: HashMap<(&str, &str, &str), Track<'_>> = HashMap::new();
    let mut out = Timeline::default();
    for ev in events {
        let track = tracks.entry((ev.owner, ev.lock, ev.mode)).or_default();
        match ev.kind {
            // A second wait event before the wait ended continues the first.
            HistoryKind::Wait => {
                track.wait.get_or_insert(*ev);
            }
            HistoryKind::Acquire => {
                out.end_wait(track, ev, "acquired");
                match &mut track.hold {
                    Some((_, count)) => *count += 1,
                    None => track.hold = Some((*ev, 1)),
                }
            }
            HistoryKind::GaveUp => out.end_wait(track, ev, "gave_up"),
            HistoryKind::Deadlock => {
                out.end_wait(track, ev, "deadlock");
                out.marks.push(mark(ev, "deadlock"));
            }
            HistoryKind::Release => out.end_hold(track, ev, "released"),
            HistoryKind::Lost | HistoryKind::Expired => out.end_hold(track, ev, "lost"),
            _ => {}
        }
    }
    for track in tracks.into_values() {
        if let Some(w) = track.wait {
            let end = now_us.max(w.at_us);
            out.spans
                .push(span(&w, SpanKind::Wait, w.at_us, end, "waiting"));
        }
        if let Some((a, _)) = track.hold {
            let end = now_us.max(a.at_us);
            out.spans
                .push(span(&a, SpanKind::Hold, a.at_us, end, "held"));
        }
    }
    out.spans.sort_by(|a, b| order(a).cmp(&order(b)));
    out
}

/// The order of spans: by start, then (for a stable output) end, owner, lock and kind.
fn order(s: &Span) -> (u64, u64, &str, &str, bool) {
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
    /// or without one, from its call when that took [`MIN_WAIT_US`] or more.
    fn end_wait(&mut self, track: &mut Track<'_>, ev: &Ev<'_>, outcome: &'static str) {
        let start = match (track.wait.take(), ev.waited_us) {
            (Some(w), _) => w.at_us,
            (None, Some(waited)) if waited >= MIN_WAIT_US => ev.at_us.saturating_sub(waited),
            _ => return,
        };
        let start = start.min(ev.at_us);
        self.spans
            .push(span(ev, SpanKind::Wait, start, ev.at_us, outcome));
    }

    /// `ev` (release, loss) ends one acquire of the track's hold; the hold ends with its last,
    /// or at once when lost. An end whose acquire came before the events is a hold of its
    /// `held_us` (merged with the track's last hold if they overlap: nested guards).
    fn end_hold(&mut self, track: &mut Track<'_>, ev: &Ev<'_>, outcome: &'static str) {
        let lost = outcome == "lost";
        match track.hold.take() {
            Some((a, count)) if count > 1 && !lost => track.hold = Some((a, count - 1)),
            Some((a, count)) => {
                track.stale_ends = count - 1;
                track.last_hold = Some(self.spans.len());
                let end = ev.at_us.max(a.at_us);
                self.spans
                    .push(span(&a, SpanKind::Hold, a.at_us, end, outcome));
            }
            None if track.stale_ends > 0 => {
                track.stale_ends -= 1;
                return;
            }
            None => {
                let Some(held) = ev.held_us else { return };
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

/// A span of `ev`'s owner and lock.
fn span(ev: &Ev<'_>, kind: SpanKind, start_us: u64, end_us: u64, outcome: &'static str) -> Span {
    Span {
        lock: ev.lock.to_owned(),
        mode: ev.mode.to_owned(),
        owner: ev.owner.to_owned(),
        client_name: ev.client_name.to_owned(),
        host: ev.host.to_owned(),
        pid: ev.pid,
        thread: ev.thread.to_owned(),
        kind,
        start_us,
        end_us,
        outcome,
    }
}

/// A mark at `ev`.
fn mark(ev: &Ev<'_>, what: &'static str) -> Mark {
    Mark {
        at_us: ev.at_us,
        what,
        lock: ev.lock.to_owned(),
        mode: ev.mode.to_owned(),
        owner: ev.owner.to_owned(),
    }
}

/// Where the pictures put owners and spans.
struct Layout<'a> {
    /// Each owner's first event, in the order of their first events.
    owners: Vec<Ev<'a>>,
    /// How many lanes each owner has (at least one).
    lanes: Vec<usize>,
    /// Each span's owner (an index into `owners`) and lane.
    place: Vec<(usize, usize)>,
    /// The locks, in the order of their first events (their colours).
    locks: Vec<&'a str>,
    /// The earliest event or span start, and the latest event or span end (later than it).
    from_us: u64,
    to_us: u64,
}

/// Owners, lanes (an owner's spans that overlap go to separate lanes) and the time range.
fn layout<'a>(events: &[Ev<'a>], timeline: &Timeline) -> Layout<'a> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut owners = Vec::new();
    let mut locks: Vec<&str> = Vec::new();
    for ev in events {
        index.entry(ev.owner).or_insert_with(|| {
            owners.push(*ev);
            owners.len() - 1
        });
        if !locks.contains(&ev.lock) {
            locks.push(ev.lock);
        }
    }
    // Each owner's lanes, by the end of their last span.
    let mut ends: Vec<Vec<u64>> = vec![Vec::new(); owners.len()];
    let mut place = Vec::with_capacity(timeline.spans.len());
    for s in &timeline.spans {
        let owner = index[s.owner.as_str()];
        let lanes = &mut ends[owner];
        let lane = match lanes.iter().position(|&end| end <= s.start_us) {
            Some(lane) => lane,
            None => {
                lanes.push(0);
                lanes.len() - 1
            }
        };
        lanes[lane] = s.end_us;
        place.push((owner, lane));
    }
    let times = events.iter().map(|e| (e.at_us, e.at_us));
    let spans = timeline.spans.iter().map(|s| (s.start_us, s.end_us));
    let (from_us, to_us) = times
        .chain(spans)
        .fold((u64::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)));
    let from_us = from_us.min(to_us);
    Layout {
        owners,
        lanes: ends.iter().map(|l| l.len().max(1)).collect(),
        place,
        locks,
        from_us,
        to_us: to_us.max(from_us + 1),
    }
}

impl Layout<'_> {
    /// The owner index and lane of `mark`: those of the span it ends, else the owner's first.
    fn mark_place(&self, timeline: &Timeline, mark: &Mark) -> Option<(usize, usize)> {
        let kind = if mark.what == "lost" {
            SpanKind::Hold
        } else {
            SpanKind::Wait
        };
        let ends = |s: &Span| {
            s.kind == kind && s.end_us == mark.at_us && s.owner == mark.owner && s.lock == mark.lock
        };
        match timeline.spans.iter().position(ends) {
            Some(i) => Some(self.place[i]),
            None => Some((self.owners.iter().position(|o| o.owner == mark.owner)?, 0)),
        }
    }
}

/// `2026-11-28T09:15:02.123456Z`.
fn rfc3339(us: u64) -> String {
    humantime::format_rfc3339_micros(UNIX_EPOCH + Duration::from_micros(us)).to_string()
}
