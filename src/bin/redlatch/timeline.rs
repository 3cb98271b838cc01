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
    /// `timed_out`, `deadlock` or still `waiting`.
    pub outcome: &'static str,
}

/// The Chrome trace-event JSON (object format) of `events`: a process per recording process,
/// a thread per owner (and per further lane of an owner with overlapping spans), a complete
/// event (`"ph": "X"`, category `hold` or `wait`) per span and an instant event per hold lost
/// and per deadlock. Times (`ts`, `dur`) are µs from the earliest event or span, whose
/// absolute time `otherData` gives.
pub fn trace_json(events: &[HistoryEvent], now_us: u64) -> Value {
    trace_of(&view(events), now_us)
}

/// A self-contained SVG timeline of `events`: a time axis (from the earliest event or span),
/// a row per owner, a filled bar per hold (a colour per lock, with a legend), an outlined
/// light bar per wait, a cross where a hold was lost and a diamond where a wait ended in a
/// deadlock.
pub fn svg(events: &[HistoryEvent], now_us: u64) -> String {
    svg_of(&view(events), now_us)
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
            HistoryKind::TimedOut => out.end_wait(track, ev, "timed_out"),
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

/// [`trace_json`] of the timeline's view of the events.
fn trace_of(events: &[Ev<'_>], now_us: u64) -> Value {
    let timeline = build(events, now_us);
    let layout = layout(events, &timeline);
    let origin = layout.from_us;
    let mut out = Vec::new();
    // Processes: (host, pid) to 1, 2, ... (two hosts may have the same pid).
    let mut processes: Vec<(&str, u32)> = Vec::new();
    let mut owner_pid = Vec::new();
    for o in &layout.owners {
        let key = (o.host, o.pid);
        let pid = match processes.iter().position(|&p| p == key) {
            Some(i) => i + 1,
            None => {
                processes.push(key);
                let pid = processes.len();
                let name = format!("{} pid {} on {}", o.client_name, o.pid, o.host);
                out.push(metadata(
                    "process_name",
                    pid,
                    0,
                    json!({ "name": name.trim() }),
                ));
                out.push(metadata(
                    "process_sort_index",
                    pid,
                    0,
                    json!({ "sort_index": pid }),
                ));
                pid
            }
        };
        owner_pid.push(pid);
    }
    // Threads: each owner's lanes to 1, 2, ... in the owners' order.
    let mut first_tid = Vec::new();
    let mut tid = 0;
    for (i, o) in layout.owners.iter().enumerate() {
        first_tid.push(tid + 1);
        for lane in 0..layout.lanes[i] {
            tid += 1;
            let mut name = format!("{} ({})", o.thread, o.owner);
            if lane > 0 {
                name.push_str(&format!(" lane {}", lane + 1));
            }
            let pid = owner_pid[i];
            out.push(metadata("thread_name", pid, tid, json!({ "name": name })));
            out.push(metadata(
                "thread_sort_index",
                pid,
                tid,
                json!({ "sort_index": tid }),
            ));
        }
    }
    for (s, &(owner, lane)) in timeline.spans.iter().zip(&layout.place) {
        out.push(json!({
            "ph": "X",
            "name": s.lock,
            "cat": if s.kind == SpanKind::Hold { "hold" } else { "wait" },
            "pid": owner_pid[owner],
            "tid": first_tid[owner] + lane,
            "ts": s.start_us - origin,
            "dur": s.end_us.saturating_sub(s.start_us),
            "args": { "lock": s.lock, "mode": s.mode, "owner": s.owner, "outcome": s.outcome },
        }));
    }
    for m in &timeline.marks {
        let Some((owner, lane)) = layout.mark_place(&timeline, m) else {
            continue;
        };
        out.push(json!({
            "ph": "i",
            "s": "t",
            "name": format!("{} {}", m.what, m.lock),
            "cat": m.what,
            "pid": owner_pid[owner],
            "tid": first_tid[owner] + lane,
            "ts": m.at_us - origin,
            "args": { "lock": m.lock, "mode": m.mode, "owner": m.owner },
        }));
    }
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": { "origin": rfc3339(origin), "origin_unix_us": origin },
    })
}

/// A metadata event (`"ph": "M"`).
fn metadata(name: &str, pid: usize, tid: usize, args: Value) -> Value {
    json!({ "ph": "M", "name": name, "pid": pid, "tid": tid, "args": args })
}

/// `2026-11-28T09:15:02.123456Z`.
fn rfc3339(us: u64) -> String {
    humantime::format_rfc3339_micros(UNIX_EPOCH + Duration::from_micros(us)).to_string()
}

/// The SVG's width, px.
const WIDTH: f64 = 1200.0;
/// The width of the row labels' column, and the margin right of the plot, px.
const LABELS: f64 = 250.0;
const RIGHT: f64 = 32.0;
/// The height of a lane, px.
const LANE: f64 = 28.0;
/// Where the first row begins (below the title and the axis), px.
const TOP: f64 = 56.0;
/// The locks' colours (Tableau 10), in the order of their first events, then again.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
/// Legend entries per line, and the width of each, px.
const LEGEND_COLUMNS: usize = 4;
const LEGEND_WIDTH: f64 = 290.0;

/// [`svg`] of the timeline's view of the events.
fn svg_of(events: &[Ev<'_>], now_us: u64) -> String {
    let timeline = build(events, now_us);
    let layout = layout(events, &timeline);
    // Each owner's first lane's row (the rows' lanes one under another).
    let mut first_row = Vec::new();
    let mut rows = 0;
    for lanes in &layout.lanes {
        first_row.push(rows);
        rows += lanes;
    }
    let bottom = TOP + rows as f64 * LANE;
    let legend_lines = layout.locks.len().div_ceil(LEGEND_COLUMNS) + 1;
    let height = bottom + 24.0 + legend_lines as f64 * 20.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>\n"
    );
    let title = if events.is_empty() {
        "No lock history recorded".to_owned()
    } else {
        format!(
            "Lock history: {} events, times from {}",
            events.len(),
            rfc3339(layout.from_us)
        )
    };
    out.push_str(&format!(
        "<text x=\"10\" y=\"18\" font-weight=\"bold\">{}</text>\n",
        escape(&title)
    ));
    let x = |t: u64| {
        let span = (layout.to_us - layout.from_us) as f64;
        LABELS + (t.saturating_sub(layout.from_us)) as f64 / span * (WIDTH - LABELS - RIGHT)
    };
    for (i, o) in layout.owners.iter().enumerate() {
        out.push_str(&row(o, first_row[i], layout.lanes[i], i));
    }
    if !events.is_empty() {
        out.push_str(&axis(&layout, &x, bottom));
    }
    for (s, &(owner, lane)) in timeline.spans.iter().zip(&layout.place) {
        let y = TOP + (first_row[owner] + lane) as f64 * LANE;
        let colour = colour(&layout, &s.lock);
        out.push_str(&bar(s, x(s.start_us), x(s.end_us), y, colour));
    }
    for m in &timeline.marks {
        if let Some((owner, lane)) = layout.mark_place(&timeline, m) {
            let y = TOP + (first_row[owner] + lane) as f64 * LANE + LANE / 2.0;
            out.push_str(&marker(m, x(m.at_us), y));
        }
    }
    out.push_str(&legend(&layout, bottom + 24.0));
    out.push_str("</svg>\n");
    out
}

/// The time axis above the rows: ticks at round times from the start, with labels, and grid
/// lines down to `bottom`.
fn axis(layout: &Layout<'_>, x: &dyn Fn(u64) -> f64, bottom: f64) -> String {
    let range = layout.to_us - layout.from_us;
    let step = tick_step(range);
    let y = TOP - 6.0;
    let mut out = format!(
        "<line x1=\"{LABELS}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{y}\" stroke=\"#333\"/>\n",
        WIDTH - RIGHT
    );
    for t in (0..=range).step_by(step as usize) {
        let tx = x(layout.from_us + t);
        out.push_str(&format!(
            "<line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/>\n\
             <line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{y}\" stroke=\"#333\"/>\n\
             <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
            y,
            y - 5.0,
            y - 9.0,
            tick_label(t, step)
        ));
    }
    out
}

/// A round step between ticks (1, 2 or 5 times a power of ten, µs): at most 10 over `range`.
fn tick_step(range_us: u64) -> u64 {
    let mut power = 1;
    loop {
        for m in [1, 2, 5] {
            if range_us / (power * m) <= 10 {
                return power * m;
            }
        }
        power *= 10;
    }
}

/// A tick's label, `t_us` from the start: whole seconds or milliseconds when the step is,
/// else milliseconds with as many decimals as the step needs.
fn tick_label(t_us: u64, step_us: u64) -> String {
    if step_us >= 1_000_000 {
        format!("{} s", t_us / 1_000_000)
    } else if step_us >= 1000 {
        format!("{} ms", t_us / 1000)
    } else {
        let decimals = if step_us >= 100 {
            1
        } else if step_us >= 10 {
            2
        } else {
            3
        };
        format!("{:.*} ms", decimals, t_us as f64 / 1000.0)
    }
}

/// An owner's row: a band (every other one shaded) over its lanes, and its label (its thread
/// and short owner id; the whole as a tooltip).
fn row(owner: &Ev<'_>, first: usize, lanes: usize, index: usize) -> String {
    let y = TOP + first as f64 * LANE;
    let h = lanes as f64 * LANE;
    let fill = if index.is_multiple_of(2) {
        "#f4f4f4"
    } else {
        "#ffffff"
    };
    let label = format!("{} ({})", clip(owner.thread, 22), short_owner(owner.owner));
    let full = format!(
        "{} ({}) of {} pid {} on {}",
        owner.thread, owner.owner, owner.client_name, owner.pid, owner.host
    );
    format!(
        "<rect x=\"0\" y=\"{y}\" width=\"{WIDTH}\" height=\"{h}\" fill=\"{fill}\"/>\n\
         <text x=\"8\" y=\"{:.1}\"><title>{}</title>{}</text>\n",
        y + LANE / 2.0 + 4.0,
        escape(&full),
        escape(&label)
    )
}

/// A span's bar in its lane at `y`: a hold filled with its lock's colour, a wait thinner,
/// light and outlined; the span as a tooltip. At least a pixel wide.
fn bar(s: &Span, x0: f64, x1: f64, y: f64, colour: &str) -> String {
    let w = (x1 - x0).max(1.0);
    let (what, shape) = match s.kind {
        SpanKind::Hold => (
            "held",
            format!(
                "y=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"",
                y + 5.0,
                LANE - 10.0
            ),
        ),
        SpanKind::Wait => (
            "waited for",
            format!(
                "y=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\" fill-opacity=\"0.25\" \
                 stroke=\"{colour}\" stroke-dasharray=\"3 2\"",
                y + 9.0,
                LANE - 18.0
            ),
        ),
    };
    let tip = format!(
        "{} {what} {} ({}): {}, {}",
        s.thread,
        s.lock,
        s.mode,
        duration(s.end_us.saturating_sub(s.start_us)),
        s.outcome
    );
    format!(
        "<rect x=\"{x0:.1}\" width=\"{w:.1}\" {shape}><title>{}</title></rect>\n",
        escape(&tip)
    )
}

/// A mark centred at (`x`, `y`): a cross for a hold lost, a diamond for a deadlock.
fn marker(m: &Mark, x: f64, y: f64) -> String {
    let tip = escape(&format!("{} {} ({})", m.what, m.lock, m.owner));
    if m.what == "lost" {
        format!(
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"#111\" \
             stroke-width=\"2.5\"><title>{tip}</title></path>\n",
            x - 5.0,
            y - 5.0,
            x + 5.0,
            y + 5.0,
            x - 5.0,
            y + 5.0,
            x + 5.0,
            y - 5.0
        )
    } else {
        format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" fill=\"#111\" \
             stroke=\"white\"><title>{tip}</title></path>\n",
            y - 6.0,
            x + 6.0,
            y + 6.0,
            x - 6.0
        )
    }
}

/// The legend from `y` down: each lock's colour, then what the shapes mean.
fn legend(layout: &Layout<'_>, y: f64) -> String {
    let mut out = String::new();
    for (i, lock) in layout.locks.iter().enumerate() {
        let lx = 10.0 + (i % LEGEND_COLUMNS) as f64 * LEGEND_WIDTH;
        let ly = y + (i / LEGEND_COLUMNS) as f64 * 20.0;
        out.push_str(&format!(
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n\
             <text x=\"{}\" y=\"{ly}\"><title>{}</title>{}</text>\n",
            ly - 10.0,
            colour(layout, lock),
            lx + 18.0,
            escape(lock),
            escape(&clip(lock, 40))
        ));
    }
    let ly = y + layout.locks.len().div_ceil(LEGEND_COLUMNS) as f64 * 20.0;
    let cross = marker(&key_mark("lost"), 186.0, ly - 4.0);
    let diamond = marker(&key_mark("deadlock"), 246.0, ly - 4.0);
    out.push_str(&format!(
        "<rect x=\"10\" y=\"{:.1}\" width=\"24\" height=\"12\" fill=\"#888\"/>\n\
         <text x=\"40\" y=\"{ly}\">hold</text>\n\
         <rect x=\"90\" y=\"{:.1}\" width=\"24\" height=\"8\" fill=\"#888\" fill-opacity=\"0.25\" \
         stroke=\"#888\" stroke-dasharray=\"3 2\"/>\n\
         <text x=\"120\" y=\"{ly}\">wait</text>\n\
         {cross}<text x=\"198\" y=\"{ly}\">lost</text>\n\
         {diamond}<text x=\"258\" y=\"{ly}\">deadlock</text>\n",
        ly - 10.0,
        ly - 8.0
    ));
    out
}

/// The mark the legend shows for `what`.
fn key_mark(what: &'static str) -> Mark {
    Mark {
        at_us: 0,
        what,
        lock: String::new(),
        mode: String::new(),
        owner: String::new(),
    }
}

/// The colour of `lock`: the palette's, in the order of the locks' first events.
fn colour(layout: &Layout<'_>, lock: &str) -> &'static str {
    let i = layout.locks.iter().position(|l| *l == lock).unwrap_or(0);
    PALETTE[i % PALETTE.len()]
}

/// `5a1f03c2:7` for `5a1f03c2-...-...:7`: the client id's first 8 characters and the thread
/// number.
fn short_owner(owner: &str) -> String {
    match owner.rsplit_once(':') {
        Some((client, thread)) => format!("{}:{thread}", clip_plain(client, 8)),
        None => clip(owner, 16),
    }
}

/// `s`, cut to `max` characters with an ellipsis when longer.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        format!("{}…", clip_plain(s, max - 1))
    }
}

/// The first `max` characters of `s`.
fn clip_plain(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// `850 µs`, `12.3 ms`, `4.56 s`.
fn duration(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{:.2} s", us as f64 / 1_000_000.0)
    }
}

/// `s` as XML text or attribute value.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 (tab and line ends are).
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// An owner of the hand-made events.
    struct Who {
        owner: &'static str,
        thread: &'static str,
        host: &'static str,
    }

    /// Two owners of one client name, in two processes with the same pid on two hosts; the
    /// first's thread name needs escaping.
    const A: Who = Who {
        owner: "aaaaaaaa-1111-4111-8111-111111111111:1",
        thread: "worker \"1\" <main>",
        host: "h1",
    };
    const B: Who = Who {
        owner: "bbbbbbbb-2222-4222-8222-222222222222:7",
        thread: "worker-2",
        host: "h2",
    };
    /// A lock whose name needs escaping.
    const ACCTS: &str = "accts & <co>";
    /// The events' times are µs after this.
    const T0: u64 = 1_800_000_000_000_000;

    use HistoryKind::{Acquire, Deadlock, Lost, Release, TimedOut, Wait};

    /// An event of `who` at `at` µs after [`T0`].
    fn ev(
        who: &Who,
        at: u64,
        kind: HistoryKind,
        lock: &'static str,
        mode: &'static str,
    ) -> Ev<'static> {
        Ev {
            at_us: T0 + at,
            kind,
            lock,
            mode,
            owner: who.owner,
            client_name: "billing & co",
            host: who.host,
            pid: 100,
            thread: who.thread,
            waited_us: None,
            held_us: None,
        }
    }

    impl Ev<'_> {
        fn waited(mut self, us: u64) -> Self {
            self.waited_us = Some(us);
            self
        }

        fn held(mut self, us: u64) -> Self {
            self.held_us = Some(us);
            self
        }
    }

    /// The span expected of `who`, from `start` to `end` µs after [`T0`].
    fn expect(
        who: &Who,
        kind: SpanKind,
        (lock, mode): (&str, &str),
        (start, end): (u64, u64),
        outcome: &'static str,
    ) -> Span {
        Span {
            lock: lock.to_owned(),
            mode: mode.to_owned(),
            owner: who.owner.to_owned(),
            client_name: "billing & co".to_owned(),
            host: who.host.to_owned(),
            pid: 100,
            thread: who.thread.to_owned(),
            kind,
            start_us: T0 + start,
            end_us: T0 + end,
            outcome,
        }
    }

    /// When the pictures are drawn, µs after [`T0`].
    const NOW: u64 = T0 + 20_000;

    /// Two owners take `ledger` in turn (B waits, A re-enters, B's hold is lost, A waited
    /// without a wait event), then a deadlock over `accts`, a timeout, a wait too short to
    /// draw, and a hold and a wait still open.
    fn scenario() -> Vec<Ev<'static>> {
        let ledger = "ledger";
        vec![
            ev(&A, 0, Acquire, ledger, "plain").waited(0),
            ev(&B, 1000, Wait, ledger, "plain"),
            ev(&A, 2000, Acquire, ledger, "plain").waited(0),
            ev(&A, 3000, Release, ledger, "plain").held(1000),
            ev(&A, 5000, Release, ledger, "plain").held(5000),
            ev(&B, 5200, Acquire, ledger, "plain").waited(4200),
            ev(&B, 9000, Lost, ledger, "plain").held(3800),
            ev(&A, 9500, Acquire, ledger, "plain").waited(2000),
            ev(&B, 10_000, Acquire, ACCTS, "fair").waited(0),
            ev(&B, 11_000, Wait, ledger, "plain"),
            ev(&A, 12_000, Wait, ACCTS, "fair"),
            ev(&A, 14_000, Deadlock, ACCTS, "fair").waited(2000),
            ev(&B, 15_000, TimedOut, ledger, "plain").waited(4000),
            ev(&B, 16_000, Release, ACCTS, "fair").held(6000),
            ev(&B, 16_500, TimedOut, "cache", "spin").waited(500),
            ev(&B, 17_000, Wait, ledger, "plain"),
        ]
    }

    #[test]
    fn timeline_spans_of_turns_waits_reentry_loss_and_deadlock() {
        use SpanKind::{Hold, Wait};
        let ledger = ("ledger", "plain");
        let accts = (ACCTS, "fair");
        let built = build(&scenario(), NOW);
        assert_eq!(
            built.spans,
            vec![
                expect(&A, Hold, ledger, (0, 5000), "released"),
                expect(&B, Wait, ledger, (1000, 5200), "acquired"),
                expect(&B, Hold, ledger, (5200, 9000), "lost"),
                expect(&A, Wait, ledger, (7500, 9500), "acquired"),
                expect(&A, Hold, ledger, (9500, 20_000), "held"),
                expect(&B, Hold, accts, (10_000, 16_000), "released"),
                expect(&B, Wait, ledger, (11_000, 15_000), "timed_out"),
                expect(&A, Wait, accts, (12_000, 14_000), "deadlock"),
                expect(&B, Wait, ledger, (17_000, 20_000), "waiting"),
            ]
        );
        let marks: Vec<_> = built
            .marks
            .iter()
            .map(|m| (m.at_us - T0, m.what, m.owner.as_str(), m.lock.as_str()))
            .collect();
        assert_eq!(
            marks,
            vec![
                (9000, "lost", B.owner, "ledger"),
                (14_000, "deadlock", A.owner, ACCTS),
            ]
        );
    }

    #[test]
    fn timeline_spans_of_holds_begun_before_the_events_and_lost_reentrant_holds() {
        use SpanKind::Hold;
        let events = vec![
            // A nested hold whose acquires are older than the events: one hold.
            ev(&A, 4000, Release, "ledger", "plain").held(3000),
            ev(&A, 5000, Release, "ledger", "plain").held(5000),
            // A re-entrant hold lost: both guards learn it, one loss.
            ev(&A, 6000, Acquire, "x", "plain").waited(0),
            ev(&A, 7000, Acquire, "x", "plain").waited(0),
            ev(&A, 8000, Lost, "x", "plain").held(1000),
            ev(&A, 8001, Lost, "x", "plain").held(2001),
            // Read holds are shared.
            ev(&A, 9000, Acquire, "y", "read").waited(0),
            ev(&B, 9100, Acquire, "y", "read").waited(0),
            ev(&A, 9500, Release, "y", "read").held(500),
            ev(&B, 9700, Release, "y", "read").held(600),
        ];
        let built = build(&events, NOW);
        assert_eq!(
            built.spans,
            vec![
                expect(&A, Hold, ("ledger", "plain"), (0, 5000), "released"),
                expect(&A, Hold, ("x", "plain"), (6000, 8000), "lost"),
                expect(&A, Hold, ("y", "read"), (9000, 9500), "released"),
                expect(&B, Hold, ("y", "read"), (9100, 9700), "released"),
            ]
        );
        assert_eq!(built.marks.len(), 1);
        assert_eq!(built.marks[0].at_us, T0 + 8000);
    }

    #[test]
    fn timeline_trace_json_parses_back_with_processes_threads_and_spans() {
        let text = serde_json::to_string(&trace_of(&scenario(), NOW)).unwrap();
        let trace: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(trace["displayTimeUnit"], "ms");
        let events = trace["traceEvents"].as_array().unwrap();
        let of = |ph: &'static str| events.iter().filter(move |e| e["ph"] == ph);

        // Two processes with the same pid on two hosts: two trace processes.
        let processes: Vec<(u64, &str)> = of("M")
            .filter(|e| e["name"] == "process_name")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            processes,
            vec![
                (1, "billing & co pid 100 on h1"),
                (2, "billing & co pid 100 on h2")
            ]
        );
        let threads: Vec<&str> = of("M")
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(threads[0], format!("{} ({})", A.thread, A.owner));
        assert!(threads.contains(&format!("worker-2 ({})", B.owner).as_str()));

        let complete: Vec<&Value> = of("X").collect();
        assert_eq!(complete.len(), 9);
        assert_eq!(complete[0]["ts"], 0);
        assert_eq!(complete[0]["dur"], 5000);
        assert_eq!(complete[0]["cat"], "hold");
        assert_eq!(
            complete[0]["args"],
            json!({ "lock": "ledger", "mode": "plain", "owner": A.owner, "outcome": "released" })
        );
        // The holds of `ledger`, one owner after another, never overlap.
        let mut holds: Vec<(u64, u64)> = complete
            .iter()
            .filter(|e| e["name"] == "ledger" && e["cat"] == "hold")
            .map(|e| (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap()))
            .collect();
        holds.sort();
        assert_eq!(holds.len(), 3);
        for pair in holds.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "{holds:?}");
        }
        // Nor do the slices of one thread track (an owner's overlapping spans take lanes).
        let mut tracks: HashMap<(u64, u64), Vec<(u64, u64)>> = HashMap::new();
        for e in &complete {
            let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            let ts = e["ts"].as_u64().unwrap();
            tracks
                .entry(track)
                .or_default()
                .push((ts, ts + e["dur"].as_u64().unwrap()));
        }
        for slices in tracks.values_mut() {
            slices.sort();
            for pair in slices.windows(2) {
                assert!(pair[0].1 <= pair[1].0, "{slices:?}");
            }
        }

        let instants: Vec<(&str, u64)> = of("i")
            .map(|e| (e["cat"].as_str().unwrap(), e["ts"].as_u64().unwrap()))
            .collect();
        assert_eq!(instants, vec![("lost", 9000), ("deadlock", 14_000)]);
    }

    #[test]
    fn timeline_svg_escapes_names_and_renders() {
        let picture = svg_of(&scenario(), NOW);
        assert!(picture.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(picture.ends_with("</svg>\n"));
        assert!(picture.contains("accts &amp; &lt;co&gt;"));
        assert!(picture.contains("worker &quot;1&quot; &lt;main&gt;"));
        assert!(!picture.contains("<co>") && !picture.contains("<main>"));
        // Tick labels: 20 ms in steps of 2 ms.
        assert!(picture.contains(">0 ms</text>") && picture.contains(">20 ms</text>"));
        render(&picture, "scenario");
        render(&svg_of(&[], NOW), "empty");
    }

    #[test]
    fn timeline_ticks_are_round() {
        assert_eq!(tick_step(20_000), 2000);
        assert_eq!(tick_label(4000, 2000), "4 ms");
        assert_eq!(tick_step(1_500_000), 200_000);
        assert_eq!(tick_label(600_000, 200_000), "600 ms");
        assert_eq!(tick_step(25_000_000), 5_000_000);
        assert_eq!(tick_label(10_000_000, 5_000_000), "10 s");
        assert_eq!(tick_step(7), 1);
        assert_eq!(tick_label(3, 1), "0.003 ms");
        assert_eq!(tick_label(1500, 500), "1.5 ms");
        assert_eq!(short_owner(A.owner), "aaaaaaaa:1");
    }

    /// Renders `picture` with `rsvg-convert` (a real SVG renderer) and checks it made a PNG;
    /// skipped, saying so, where it is not installed.
    fn render(picture: &str, name: &str) {
        let dir = std::env::temp_dir();
        let input = dir.join(format!(
            "redlatch-timeline-{}-{name}.svg",
            std::process::id()
        ));
        let output = input.with_extension("png");
        std::fs::write(&input, picture).unwrap();
        let run = Command::new("rsvg-convert")
            .arg("-o")
            .arg(&output)
            .arg(&input)
            .output();
        let _ = std::fs::remove_file(&input);
        let run = match run {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("skipped: rsvg-convert not found (apt-get install librsvg2-bin)");
                return;
            }
            run => run.unwrap(),
        };
        let png = std::fs::read(&output).unwrap_or_default();
        let _ = std::fs::remove_file(&output);
        assert!(
            run.status.success(),
            "rsvg-convert failed: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(png.starts_with(b"\x89PNG"), "no PNG written");
    }
}
