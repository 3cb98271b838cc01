//! A lock history as pictures: the spans of holds and waits that the library's span builder
//! ([`redlatch::history::timeline`]) makes of [`redlatch::Client::history`]'s events, drawn
//! as a Chrome trace that Perfetto and `chrome://tracing` open ([`trace_json`]) or a
//! self-contained SVG timeline ([`svg`]). Times are the server's clock, in µs since the Unix
//! epoch.
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

use redlatch::history::HistoryEvent;
use redlatch::history::{timeline, Mark, Span, SpanKind, Timeline};
use redlatch::Owner;
use serde_json::{json, Value};

/// The Chrome trace-event JSON (object format) of `events`: a process per recording process,
/// a thread per owner (and per further lane of an owner with overlapping spans), a complete
/// event (`"ph": "X"`, category `hold` or `wait`) per span and an instant event per hold lost
/// and per deadlock. Times (`ts`, `dur`) are µs from the earliest event or span, whose
/// absolute time `otherData` gives.
pub fn trace_json(events: &[HistoryEvent], now_us: u64) -> Value {
    trace::trace_of(events, &timeline(events, now_us))
}

/// A self-contained SVG timeline of `events`: a time axis (from the earliest event or span),
/// a row per owner, a filled bar per hold (a colour per lock, with a legend), an outlined
/// light bar per wait, a cross where a hold was lost and a diamond where a wait ended in a
/// deadlock.
pub fn svg(events: &[HistoryEvent], now_us: u64) -> String {
    svg::svg_of(events, &timeline(events, now_us))
}

/// Where the pictures put owners and spans.
struct Layout<'a> {
    /// Each owner's first event, in the order of their first events.
    owners: Vec<&'a HistoryEvent>,
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
fn layout<'a>(events: &'a [HistoryEvent], timeline: &Timeline) -> Layout<'a> {
    let mut index: HashMap<&Owner, usize> = HashMap::new();
    let mut owners = Vec::new();
    let mut locks: Vec<&str> = Vec::new();
    for ev in events {
        index.entry(&ev.owner).or_insert_with(|| {
            owners.push(ev);
            owners.len() - 1
        });
        if !locks.contains(&ev.lock.as_str()) {
            locks.push(&ev.lock);
        }
    }
    // Each owner's lanes, by the end of their last span.
    let mut ends: Vec<Vec<u64>> = vec![Vec::new(); owners.len()];
    let mut place = Vec::with_capacity(timeline.spans.len());
    for s in &timeline.spans {
        let owner = index[&s.owner];
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
