//! The timeline's tests: hand-made events, their trace and picture.

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

const ACQUIRE: &str = "acquire";
const WAIT: &str = "wait";
const RELEASE: &str = "release";
const LOST: &str = "lost";
const GAVE_UP: &str = "gave_up";
const DEADLOCK: &str = "deadlock";

/// An event of `who` at `at` µs after [`T0`] (made as a reader of `redlatch history --json`
/// would read one back).
fn ev(
    who: &Who,
    at: u64,
    kind: &'static str,
    lock: &'static str,
    mode: &'static str,
) -> HistoryEvent {
    serde_json::from_value(json!({
        "at_us": T0 + at,
        "kind": kind,
        "lock": lock,
        "mode": mode,
        "owner": who.owner,
        "client_name": "billing & co",
        "host": who.host,
        "pid": 100,
        "thread": who.thread,
        "waited_us": null,
        "held_us": null,
        "contended": false,
    }))
    .unwrap()
}

/// What its call waited, or its hold lasted.
trait Lasted {
    fn waited(self, us: u64) -> Self;
    fn held(self, us: u64) -> Self;
    fn contended(self) -> Self;
}

impl Lasted for HistoryEvent {
    fn waited(mut self, us: u64) -> Self {
        self.waited = Some(Duration::from_micros(us));
        self
    }

    fn held(mut self, us: u64) -> Self {
        self.held = Some(Duration::from_micros(us));
        self
    }

    fn contended(mut self) -> Self {
        self.contended = true;
        self
    }
}

/// When the pictures are drawn, µs after [`T0`].
const NOW: u64 = T0 + 20_000;

/// Two owners take `ledger` in turn (B waits, A re-enters, B's hold is lost, A waited
/// without a wait event), then a deadlock over `accts`, a timeout, a wait too short to
/// draw, and a hold and a wait still open.
fn scenario() -> Vec<HistoryEvent> {
    let ledger = "ledger";
    vec![
        ev(&A, 0, ACQUIRE, ledger, "plain").waited(0),
        ev(&B, 1000, WAIT, ledger, "plain"),
        ev(&A, 2000, ACQUIRE, ledger, "plain").waited(0),
        ev(&A, 3000, RELEASE, ledger, "plain").held(1000),
        ev(&A, 5000, RELEASE, ledger, "plain").held(5000),
        ev(&B, 5200, ACQUIRE, ledger, "plain").waited(4200),
        ev(&B, 9000, LOST, ledger, "plain").held(3800),
        ev(&A, 9500, ACQUIRE, ledger, "plain")
            .waited(2000)
            .contended(),
        ev(&B, 10_000, ACQUIRE, ACCTS, "fair").waited(0),
        ev(&B, 11_000, WAIT, ledger, "plain"),
        ev(&A, 12_000, WAIT, ACCTS, "fair"),
        ev(&A, 14_000, DEADLOCK, ACCTS, "fair").waited(2000),
        ev(&B, 15_000, GAVE_UP, ledger, "plain").waited(4000),
        ev(&B, 16_000, RELEASE, ACCTS, "fair").held(6000),
        ev(&B, 16_500, GAVE_UP, "cache", "spin").waited(500),
        ev(&B, 17_000, WAIT, ledger, "plain"),
    ]
}

#[test]
fn timeline_trace_json_parses_back_with_processes_threads_and_spans() {
    let events = scenario();
    let text = serde_json::to_string(&trace_of(&events, &timeline(&events, NOW))).unwrap();
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
    let picture = svg(&scenario(), NOW);
    assert!(picture.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(picture.ends_with("</svg>\n"));
    assert!(picture.contains("accts &amp; &lt;co&gt;"));
    assert!(picture.contains("worker &quot;1&quot; &lt;main&gt;"));
    assert!(!picture.contains("<co>") && !picture.contains("<main>"));
    // Tick labels: 20 ms in steps of 2 ms.
    assert!(picture.contains(">0 ms</text>") && picture.contains(">20 ms</text>"));
    render(&picture, "scenario");
    render(&svg(&[], NOW), "empty");
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
    assert_eq!(short_owner(&Owner::parse(A.owner).unwrap()), "aaaaaaaa:1");
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
