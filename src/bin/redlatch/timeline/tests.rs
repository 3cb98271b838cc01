//! The timeline's tests: hand-made events, their spans, trace and picture.

use super::svg::*;
use super::trace::*;
use super::*;
use crate::render::short_owner;
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

use HistoryKind::{Acquire, Deadlock, GaveUp, Lost, Release, Wait};

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
        ev(&B, 15_000, GaveUp, ledger, "plain").waited(4000),
        ev(&B, 16_000, Release, ACCTS, "fair").held(6000),
        ev(&B, 16_500, GaveUp, "cache", "spin").waited(500),
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
            expect(&B, Wait, ledger, (11_000, 15_000), "gave_up"),
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
