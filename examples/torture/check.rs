//! The checker: reads a run's logs and reports what went wrong.
//!
//! A run directory holds one `w<N>.tsv` per worker process and the runner's `run.tsv`.
//! Every line is tab-separated, its first field says what it is:
//!
//! ```text
//! S proc thread lock token enter_ns exit_ns outcome write wstart_ns wend_ns   a critical section
//! T proc thread lock at_ns                                                    a wait that timed out
//! E proc thread lock at_ns phase message                                      an error (phase: lock, unlock, probe)
//! I proc client_id                                                            a worker's client id
//! K kind                                                                      run.tsv: the lock kind
//! F class start_ns end_ns detail                                              run.tsv: one injected fault
//! C lock value                                                                run.tsv: the probe counter at the end
//! X message                                                                   run.tsv: a runner-level failure
//! ```
//!
//! Times are CLOCK_MONOTONIC nanoseconds, one clock for every process of the machine.
//! `token` is `-` for kinds without one. `outcome` is how the unlock went: `ok`, `lost` (the
//! library reported the hold lost: lease ran out, lock gone) or `err` (it could not tell).
//! `write` is how the probe's write went: `acc` (counter written), `rej` (refused by the fence:
//! a stale token), `err`, or `none`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// One critical section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub process: u32,
    pub thread: u32,
    pub lock: String,
    pub token: Option<u64>,
    pub enter: u64,
    pub exit: u64,
    pub outcome: Outcome,
    pub write: Write,
    pub write_start: u64,
    pub write_end: u64,
}

/// How the unlock at the end of a section went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Lost,
    Err,
}

/// How the probe's counter write went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    Accepted,
    Rejected,
    Err,
    None,
}

/// Everything a run recorded.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub kind: String,
    pub sections: Vec<Section>,
    pub timeouts: usize,
    /// Errors by phase.
    pub errors: BTreeMap<String, usize>,
    /// Faults: (class, start, end, detail).
    pub faults: Vec<(String, u64, u64, String)>,
    /// The probe counter of each lock at the end.
    pub counters: BTreeMap<String, i64>,
    /// Failures of the runner itself (a worker that crashed or hung).
    pub runner_failures: Vec<String>,
}

/// Fault classes that lose the lock server's data (restart without persistence): exclusion
/// itself is then expected to break, and fencing is what must hold.
pub const DATA_LOSS: &[&str] = &["kill"];

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub kind: String,
    pub sections: usize,
    pub locks: usize,
    pub faults: BTreeMap<String, usize>,
    /// Overlapping sections of one lock where neither holder was told its hold was lost.
    pub silent_overlaps: usize,
    /// Overlaps where the library told (at least) one of the holders that its hold was lost.
    pub reported_overlaps: usize,
    /// Sections whose unlock reported the hold lost.
    pub lost_holds: usize,
    /// Completed probe writes minus the counters' final values (summed over locks).
    pub lost_updates: i64,
    /// Counter values above the completed writes (summed over locks): writes counted nowhere.
    pub phantom_updates: i64,
    /// A holder's token not greater than the previous holder's (by entry time), where
    /// neither hold was reported lost.
    pub token_order_violations: usize,
    /// The same, where one of the two holds was reported lost.
    pub reported_token_order_violations: usize,
    /// Fenced writes accepted with a token older than one already accepted before they began.
    pub stale_writes_accepted: usize,
    /// Fenced writes refused as stale.
    pub stale_writes_rejected: usize,
    pub timeouts: usize,
    pub errors: usize,
    /// Each violation the fault classes do not excuse, in words. Empty: the run passed.
    pub violations: Vec<String>,
    /// Findings that the injected fault classes excuse, in words.
    pub excused: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Reads `dir`'s `run.tsv` and every `w*.tsv`.
pub fn read_dir(dir: &Path) -> Result<Run, String> {
    let mut run = Run::default();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tsv"))
        .collect();
    names.sort();
    if !names.iter().any(|n| n == "run.tsv") {
        return Err(format!("{} has no run.tsv", dir.display()));
    }
    for name in names {
        let path = dir.join(&name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        parse_into(&mut run, &text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(run)
}

/// Adds the lines of one log file to `run`.
pub fn parse_into(run: &mut Run, text: &str) -> Result<(), String> {
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || format!("line {}: cannot parse `{line}`", i + 1);
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
        match (f[0], f.len()) {
            ("S", 11) => run.sections.push(Section {
                process: num(f[1])? as u32,
                thread: num(f[2])? as u32,
                lock: f[3].to_owned(),
                token: if f[4] == "-" { None } else { Some(num(f[4])?) },
                enter: num(f[5])?,
                exit: num(f[6])?,
                outcome: match f[7] {
                    "ok" => Outcome::Ok,
                    "lost" => Outcome::Lost,
                    "err" => Outcome::Err,
                    _ => return Err(bad()),
                },
                write: match f[8] {
                    "acc" => Write::Accepted,
                    "rej" => Write::Rejected,
                    "err" => Write::Err,
                    "none" => Write::None,
                    _ => return Err(bad()),
                },
                write_start: num(f[9])?,
                write_end: num(f[10])?,
            }),
            ("T", 5) => run.timeouts += 1,
            ("E", n) if n >= 6 => *run.errors.entry(f[5].to_owned()).or_default() += 1,
            ("K", 2) => run.kind = f[1].to_owned(),
            ("I", 3) => {} // a worker's client id, for the runner
            ("F", 5) => run
                .faults
                .push((f[1].to_owned(), num(f[2])?, num(f[3])?, f[4].to_owned())),
            ("C", 3) => {
                let v = f[2].parse::<i64>().map_err(|_| bad())?;
                run.counters.insert(f[1].to_owned(), v);
            }
            ("X", n) if n >= 2 => run.runner_failures.push(f[1..].join(" ")),
            _ => return Err(bad()),
        }
    }
    Ok(())
}

/// Checks a run. The rules, by what was injected:
/// - no fault: nothing may go wrong at all: no overlap, no lost hold, no lost update, no
///   timeout, no error;
/// - any fault: an overlap is excused when the library told one of its holders the hold was
///   lost (that is what a lease-based lock can promise; fencing is the remedy); timeouts and
///   errors are reported, not failed;
/// - a fault that loses the server's data (`kill`: restart without persistence): silent
///   overlaps and token order violations are excused too;
/// - never excused: a stale fenced write accepted, a counter above the completed writes, lost
///   updates beyond the excused overlaps (each lost update needs an overlap), a crashed or hung
///   worker, a run without sections.
pub fn check(run: &Run) -> Report {
    let mut r = Report {
        kind: run.kind.clone(),
        sections: run.sections.len(),
        timeouts: run.timeouts,
        errors: run.errors.values().sum(),
        ..Report::default()
    };
    for (class, ..) in &run.faults {
        *r.faults.entry(class.clone()).or_default() += 1;
    }
    let faulted = !run.faults.is_empty();
    let data_loss = run
        .faults
        .iter()
        .any(|(c, ..)| DATA_LOSS.contains(&c.as_str()));

    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in &run.sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    r.locks = by_lock.len();
    r.lost_holds = run
        .sections
        .iter()
        .filter(|s| s.outcome == Outcome::Lost)
        .count();

    let names: BTreeSet<&str> = by_lock
        .keys()
        .copied()
        .chain(run.counters.keys().map(String::as_str))
        .collect();
    for name in names {
        let mut sections = by_lock.get(name).cloned().unwrap_or_default();
        sections.sort_by_key(|s| (s.enter, s.exit));
        let (silent, reported) = overlaps(&sections);
        r.silent_overlaps += silent;
        r.reported_overlaps += reported;
        let (silent, reported) = token_order_violations(&sections);
        r.token_order_violations += silent;
        r.reported_token_order_violations += reported;
        let (accepted, rejected) = stale_writes(&sections);
        r.stale_writes_accepted += accepted;
        r.stale_writes_rejected += rejected;

        let written = sections
            .iter()
            .filter(|s| s.write == Write::Accepted)
            .count() as i64;
        match run.counters.get(name) {
            Some(&counter) if counter <= written => r.lost_updates += written - counter,
            Some(&counter) => r.phantom_updates += counter - written,
            None if written > 0 => r.violations.push(format!(
                "lock `{name}`: {written} writes but no final counter recorded"
            )),
            None => {}
        }
    }

    let v = &mut r.violations;
    let mut excused = Vec::new();
    if r.sections == 0 {
        v.push("no critical section completed".into());
    }
    for f in &run.runner_failures {
        v.push(format!("runner: {f}"));
    }
    if r.silent_overlaps > 0 {
        let what = format!(
            "{} overlapping critical sections that no holder was told about",
            r.silent_overlaps
        );
        if data_loss {
            excused.push(format!(
                "{what} (the lock server lost its data: kill/restart)"
            ));
        } else {
            v.push(what);
        }
    }
    if r.reported_overlaps > 0 {
        let what = format!(
            "{} overlapping critical sections where a holder was told its hold was lost",
            r.reported_overlaps
        );
        if faulted {
            excused.push(what);
        } else {
            v.push(what);
        }
    }
    if r.lost_holds > 0 && !faulted {
        v.push(format!("{} holds lost without any fault", r.lost_holds));
    }
    let excusable_overlaps = match (faulted, data_loss) {
        (false, _) => 0,
        (true, false) => r.reported_overlaps,
        (true, true) => r.reported_overlaps + r.silent_overlaps,
    };
    if r.lost_updates > 0 {
        let what = format!("{} lost updates of the probe counter", r.lost_updates);
        if faulted && r.lost_updates as usize <= excusable_overlaps {
            excused.push(format!("{what} (no more than the excused overlaps)"));
        } else {
            v.push(what);
        }
    }
    if r.phantom_updates > 0 {
        v.push(format!(
            "probe counters {} above the completed writes",
            r.phantom_updates
        ));
    }
    if r.token_order_violations > 0 {
        let what = format!(
            "{} holders whose token was not greater than the previous holder's",
            r.token_order_violations
        );
        if data_loss {
            excused.push(format!("{what} (the token counter was lost with the data)"));
        } else {
            v.push(what);
        }
    }
    if r.reported_token_order_violations > 0 {
        let what = format!(
            "{} holders whose token was not greater than the previous holder's, one of \
             the two told its hold was lost",
            r.reported_token_order_violations
        );
        if faulted {
            excused.push(what);
        } else {
            v.push(what);
        }
    }
    if r.stale_writes_accepted > 0 {
        v.push(format!(
            "{} fenced writes accepted with a stale token",
            r.stale_writes_accepted
        ));
    }
    if r.stale_writes_rejected > 0 && !faulted {
        v.push(format!(
            "{} fenced writes rejected without any fault",
            r.stale_writes_rejected
        ));
    }
    if r.timeouts > 0 {
        let what = format!("{} waits timed out", r.timeouts);
        if faulted {
            excused.push(what);
        } else {
            v.push(what);
        }
    }
    if r.errors > 0 {
        let what = format!("{} errors ({:?})", r.errors, run.errors);
        if faulted {
            excused.push(what);
        } else {
            v.push(what);
        }
    }
    r.excused = excused;
    r
}

/// Overlaps among one lock's sections sorted by entry: a section that enters before the
/// latest exit so far overlaps the section that holds that exit. Returns (silent, reported):
/// reported when either holder's unlock said the hold was lost.
fn overlaps(sorted: &[&Section]) -> (usize, usize) {
    let (mut silent, mut reported) = (0, 0);
    let mut last: Option<&Section> = None;
    for &s in sorted {
        if let Some(l) = last {
            if s.enter < l.exit {
                if s.outcome == Outcome::Lost || l.outcome == Outcome::Lost {
                    reported += 1;
                } else {
                    silent += 1;
                }
            }
        }
        if last.is_none_or(|l| s.exit > l.exit) {
            last = Some(s);
        }
    }
    (silent, reported)
}

/// Holders (sorted by entry) whose token is not greater than the previous holder's, as
/// (silent, reported): reported when either hold was reported lost. (A holder paused between
/// its acquire and its entry timestamp enters "after" a newer token; its unlock says so.)
fn token_order_violations(sorted: &[&Section]) -> (usize, usize) {
    let tokened: Vec<&Section> = sorted
        .iter()
        .copied()
        .filter(|s| s.token.is_some())
        .collect();
    let (mut silent, mut reported) = (0, 0);
    for w in tokened.windows(2) {
        if w[1].token <= w[0].token {
            if w[0].outcome == Outcome::Lost || w[1].outcome == Outcome::Lost {
                reported += 1;
            } else {
                silent += 1;
            }
        }
    }
    (silent, reported)
}

/// (accepted, rejected) stale fenced writes. A write is stale when a write with a greater
/// token had been accepted before it began; every refused write counts as rejected (the fence
/// refuses a token older than the newest, or one it saw from another holder).
fn stale_writes(sections: &[&Section]) -> (usize, usize) {
    let mut ended: Vec<(u64, u64)> = sections
        .iter()
        .filter(|s| s.write == Write::Accepted)
        .filter_map(|s| Some((s.write_end, s.token?)))
        .collect();
    ended.sort_unstable();
    let mut started: Vec<(u64, u64)> = sections
        .iter()
        .filter(|s| s.write == Write::Accepted)
        .filter_map(|s| Some((s.write_start, s.token?)))
        .collect();
    started.sort_unstable();
    let (mut accepted, mut i, mut newest) = (0, 0, 0);
    for (start, token) in started {
        while i < ended.len() && ended[i].0 < start {
            newest = newest.max(ended[i].1);
            i += 1;
        }
        if token < newest {
            accepted += 1;
        }
    }
    let rejected = sections
        .iter()
        .filter(|s| s.write == Write::Rejected)
        .count();
    (accepted, rejected)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kind {}: {} critical sections on {} locks",
            self.kind, self.sections, self.locks
        )?;
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(c, n)| format!("{c} x{n}"))
            .collect();
        writeln!(
            f,
            "faults: {}",
            if faults.is_empty() {
                "none".to_owned()
            } else {
                faults.join(", ")
            }
        )?;
        writeln!(
            f,
            "overlaps: {} silent, {} reported; lost holds {}; lost updates {}; phantom updates {}",
            self.silent_overlaps,
            self.reported_overlaps,
            self.lost_holds,
            self.lost_updates,
            self.phantom_updates
        )?;
        writeln!(
            f,
            "tokens: {} order violations ({} more reported lost); stale writes {} accepted, \
             {} rejected",
            self.token_order_violations,
            self.reported_token_order_violations,
            self.stale_writes_accepted,
            self.stale_writes_rejected
        )?;
        writeln!(f, "timeouts {}; errors {}", self.timeouts, self.errors)?;
        for e in &self.excused {
            writeln!(f, "excused: {e}")?;
        }
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        write!(f, "{}", if self.passed() { "PASS" } else { "FAIL" })
    }
}

/// The report as one JSON object, for scripts.
pub fn json(r: &Report) -> String {
    let faults: Vec<String> = r
        .faults
        .iter()
        .map(|(c, n)| format!("\"{c}\":{n}"))
        .collect();
    let strings = |v: &[String]| {
        let items: Vec<String> = v
            .iter()
            .map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
            .collect();
        format!("[{}]", items.join(","))
    };
    format!(
        "{{\"kind\":\"{}\",\"sections\":{},\"locks\":{},\"faults\":{{{}}},\"silent_overlaps\":{},\
         \"reported_overlaps\":{},\"lost_holds\":{},\"lost_updates\":{},\"phantom_updates\":{},\
         \"token_order_violations\":{},\"reported_token_order_violations\":{},\"stale_writes_accepted\":{},\"stale_writes_rejected\":{},\
         \"timeouts\":{},\"errors\":{},\"passed\":{},\"violations\":{},\"excused\":{}}}",
        r.kind,
        r.sections,
        r.locks,
        faults.join(","),
        r.silent_overlaps,
        r.reported_overlaps,
        r.lost_holds,
        r.lost_updates,
        r.phantom_updates,
        r.token_order_violations,
        r.reported_token_order_violations,
        r.stale_writes_accepted,
        r.stale_writes_rejected,
        r.timeouts,
        r.errors,
        r.passed(),
        strings(&r.violations),
        strings(&r.excused)
    )
}
