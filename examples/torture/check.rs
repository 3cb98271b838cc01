//! The checker: reads a run's logs and reports what went wrong.
//!
//! A run directory holds one `w<N>.tsv` per worker process and the runner's `run.tsv`.
//! Every line is tab-separated, its first field says what it is:
//!
//! ```text
//! S proc thread lock token enter_ns exit_ns outcome write wstart_ns wend_ns [mode]   a critical section
//! T proc thread lock at_ns                                                    a wait that timed out
//! G proc thread lock at_ns                                                    a semaphore kind's permit taken (for the runner)
//! E proc thread lock at_ns phase message                                      an error (phase: lock, unlock, probe)
//! I proc client_id [java]                                                     a worker's client id (java: a Redisson worker)
//! K kind                                                                      run.tsv: the lock kind
//! P lease_ms wait_ms                                                          run.tsv: the run's lease and wait bound
//! F class start_ns end_ns detail                                              run.tsv: one injected fault
//! C lock value                                                                run.tsv: the probe counter at the end
//! Q permits                                                                   run.tsv: a semaphore kind's permits
//! A lock available                                                            run.tsv: a semaphore's permits at the end
//! L proc thread latch role start_ns end_ns                                    kind latch: `c` a count-down sent at start; `a` an await begun at start that passed at end
//! B, W, R                                                                     kind condition: see `buffer_check.rs`
//! O                                                                           kind election: see `election_check.rs`
//! D, U, H                                                                     kind deadlock: see `deadlock_check.rs`
//! M, N, V                                                                     the rate kinds: see `rate_check.rs`
//! Z, Y, J                                                                     the preempt kinds (Y also with `--priorities on`): see `preempt_check.rs`
//! X message                                                                   run.tsv: a runner-level failure
//! ```
//!
//! Times are CLOCK_MONOTONIC nanoseconds, one clock for every process of the machine. A
//! section runs from `enter` (taken after the lock call returned) to `exit` (taken before the
//! unlock call), so the true hold covers it. `token` is `-` for kinds without one. `outcome`:
//! `ok`; `lost` (the guard already said so at `exit`: the holder was told while inside);
//! `late` (only the unlock said the hold was gone); `err` (the unlock failed, no verdict).
//! `write` is how the probe's write went: `acc`, `rej` (refused by the fence), `err`, `none`.
//! A fenced probe reads for update first; a read the fence refused is logged as `rej` too
//! (with the read's times): the section then writes nothing.
//! `mode` (absent: `x`) is how the section held: `x` alone (a lock), `r` a read hold and `w`
//! a write hold of a read-write lock (readers may overlap each other, nobody a writer), `p`
//! a semaphore's permit (at most `Q` sections at once). Only `x` and `w` sections write the
//! probe; at the end every permit must be back (`A`).
//! Kind `group` logs one `S` line per value a section held, its `lock` field
//! `<group>/<value>`: each value is checked as a lock of its own (see `group.rs`).
//!
//! A Java worker (`--java-workers`, Redisson) logs the same lines; its `I` line ends in `java`.
//! Redisson has no lost-lease callback: its `lost` means that `isHeldByCurrentThread()`, asked
//! right after the section, said no; `late` that only the unlock did.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use crate::buffer_check::{self, BufferFindings, BufferLog};
use crate::deadlock_check::{self, Call, CallEnd, DeadlockFindings, DeadlockLog, Round};
use crate::election_check::{self, ObserverFindings};
use crate::preempt_check::{self, Hold, PreemptFindings, PreemptLog, PriorityWait};
use crate::rate_check::{self, Grant, RateCall, RateFindings, RateLog, Reset};

/// Faults are matched with findings by time; this much slack covers the gap between a lock
/// call's effect on the server and the timestamps around it.
pub(crate) const SLACK_NS: u64 = 1_000_000_000;

/// Every fault class, in the order `--faults all` lists them.
pub const FAULTS: &[&str] = &[
    "kill",
    "pause-holder",
    "pause-server",
    "client-kill-pubsub",
    "client-kill-normal",
    "script-flush",
    "proxy-delay",
    "proxy-blackhole",
    "proxy-reset",
    "drop-acquire",
];

/// The fault classes the proxy injects: with any of them, the workers reach the (first)
/// lock server through it.
pub const PROXY_FAULTS: &[&str] = &[
    "proxy-delay",
    "proxy-blackhole",
    "proxy-reset",
    "drop-acquire",
];

/// The kinds whose locks are rate limiters: their runs log grants (`M`), not sections.
pub const RATE_KINDS: &[&str] = &["rate", "rate-broken"];

/// Fault classes that lose the lock server's data (restart without persistence): exclusion
/// itself is then expected to break, and only fencing can hold.
pub const DATA_LOSS: &[&str] = &["kill"];

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
    pub mode: Mode,
}

/// How a section held its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Alone: a lock (or a read-write lock's write hold, `w`).
    Exclusive,
    Write,
    /// Beside other readers.
    Read,
    /// One of a semaphore's permits.
    Permit,
}

impl Mode {
    /// Whether sections held `self` and `other` must not overlap (permits are counted apart).
    fn conflicts(self, other: Mode) -> bool {
        !matches!(
            (self, other),
            (Mode::Read, Mode::Read) | (Mode::Permit, Mode::Permit)
        )
    }
}

/// How the hold at the end of a section stood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Known lost at exit: the holder could have known inside its section.
    Lost,
    /// Reported lost only by the unlock.
    Late,
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

/// One injected fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub class: String,
    pub start: u64,
    pub end: u64,
    pub detail: String,
}

/// Everything a run recorded.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub kind: String,
    pub lease_ms: u64,
    pub wait_ms: u64,
    pub sections: Vec<Section>,
    /// When each timed-out wait gave up.
    pub timeouts: Vec<u64>,
    /// (phase, when) of each error.
    pub errors: Vec<(String, u64)>,
    pub faults: Vec<Fault>,
    /// The probe counter of each lock at the end.
    pub counters: BTreeMap<String, i64>,
    /// Failures of the runner itself (a worker that crashed or hung).
    pub runner_failures: Vec<String>,
    /// The worker processes that ran on Redisson (Java).
    pub java_processes: BTreeSet<u32>,
    /// Every worker process that logged its client id (Rust or Java).
    pub workers: BTreeSet<u32>,
    /// A semaphore kind's permits per semaphore.
    pub permits: Option<u32>,
    /// Each semaphore's available permits at the end.
    pub available: BTreeMap<String, i64>,
    /// Kind `latch`: per latch, when each count-down was sent and when each await passed.
    pub latches: BTreeMap<String, LatchLog>,
    /// Kind `condition`: per lock, its buffer's log.
    pub buffers: BTreeMap<String, BufferLog>,
    /// Kind `election`: per observer (process, election), the leaders it yielded (term,
    /// when).
    pub observed: BTreeMap<(u32, String), Vec<(u64, u64)>>,
    /// Kind `deadlock`: the lock() calls and the rounds.
    pub deadlock: DeadlockLog,
    /// The rate kinds: the rate, the grants, the calls that found no rate.
    pub rate: RateLog,
    /// The preempt kinds: the holds' stories, the waits with a priority, the locks' logs.
    pub preempt: PreemptLog,
}

/// What happened on one latch (kind `latch`).
#[derive(Clone, Debug, Default)]
pub struct LatchLog {
    pub count_downs: Vec<u64>,
    /// Each await that passed: when it began and when it passed.
    pub passes: Vec<(u64, u64)>,
}

impl Run {
    /// A fault of a class `of` accepts whose window meets `[lo, hi]`.
    pub(crate) fn fault_in(&self, of: impl Fn(&str) -> bool, lo: u64, hi: u64) -> bool {
        self.faults
            .iter()
            .any(|f| of(&f.class) && f.start <= hi && f.end >= lo)
    }

    /// A fault of a class `of` accepts near `[lo, hi]`: its window meets that span widened by
    /// [`SLACK_NS`] on either side.
    pub(crate) fn fault_near(&self, of: impl Fn(&str) -> bool, lo: u64, hi: u64) -> bool {
        self.fault_in(of, lo.saturating_sub(SLACK_NS), hi.saturating_add(SLACK_NS))
    }

    /// Whether a hold lost in `s` is excused: a fault met the section, or its unlock (just
    /// after `exit`: a `late` loss is found by the unlock).
    fn loss_excused(&self, s: &Section) -> bool {
        self.fault_near(|_| true, s.enter, s.exit)
    }

    /// Whether the server lost its data between `lo` and `hi`.
    pub(crate) fn data_lost(&self, lo: u64, hi: u64) -> bool {
        self.fault_in(|c| DATA_LOSS.contains(&c), lo, hi)
    }
}

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub kind: String,
    /// Critical sections (the rate kinds: grants).
    pub sections: usize,
    /// Of those, the sections (grants) of Java (Redisson) workers.
    pub java_sections: usize,
    /// Overlapping pairs of sections of a Rust and a Java worker (any kind: silent or not).
    pub mixed_overlaps: usize,
    /// Holds of Java workers lost (`lost` or `late`).
    pub java_lost_holds: usize,
    pub locks: usize,
    pub faults: BTreeMap<String, usize>,
    /// Overlapping pairs of sections of one lock where neither holder had been told (by exit)
    /// that its hold was lost.
    pub silent_overlaps: usize,
    /// Of those, the ones the server's data loss (kill) explains: exclusion broke, as expected.
    pub silent_overlaps_after_data_loss: usize,
    /// Overlapping pairs where a holder had been told its hold was lost.
    pub reported_overlaps: usize,
    /// Sections whose hold was lost (`lost` or `late`).
    pub lost_holds: usize,
    /// Completed probe writes minus the counters' final values (summed over locks).
    pub lost_updates: i64,
    /// Counter values above the completed writes (summed over locks): writes counted nowhere.
    pub phantom_updates: i64,
    /// A holder's token not above every earlier holder's since the last data loss, where
    /// neither hold was lost.
    pub token_order_violations: usize,
    /// The same, where one of the two holds was lost.
    pub reported_token_order_violations: usize,
    /// Fenced writes accepted with a token older than one accepted before they began.
    pub stale_writes_accepted: usize,
    /// Fenced writes refused, whose writer's hold was lost: fencing stopping a stale holder.
    pub stale_writes_rejected: usize,
    /// Other refused writes (after a data loss reset the token counter).
    pub other_writes_rejected: usize,
    /// Sections that entered a semaphore whose permits were all held by sections inside.
    pub over_capacity: usize,
    /// Permits not back at the end (or more than there were), summed over semaphores.
    pub permits_unaccounted: i64,
    /// Kind `latch`: awaits that passed, and those that passed before the latch's count of
    /// count-downs had been sent.
    pub latch_passes: usize,
    pub early_passes: usize,
    /// Kind `condition`: what the buffers' rules found.
    pub buffers: Option<BufferFindings>,
    /// Kind `election`: what the observers' rules found.
    pub observers: Option<ObserverFindings>,
    /// Kind `deadlock`: what the rules on lock() calls and rounds found.
    pub deadlock: Option<DeadlockFindings>,
    /// The rate kinds: what the rules on grants found.
    pub rate: Option<RateFindings>,
    /// The preempt kinds: what the rules on forced releases and priorities found.
    pub preempt: Option<PreemptFindings>,
    /// Another kind's run with `--priorities on`: its waits with a priority, and how many
    /// pairs were served out of their aging allowance.
    pub priorities: Option<(usize, usize)>,
    pub timeouts: usize,
    pub errors: usize,
    /// Each violation the faults do not excuse, in words. Empty: the run passed.
    pub violations: Vec<String>,
    /// Findings that a fault at that time excuses, in words.
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
        .filter(|n| is_log_name(n))
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

/// `run.tsv` or `w<N>.tsv`: the files a run writes (and the only ones it deletes).
pub fn is_log_name(name: &str) -> bool {
    name == "run.tsv"
        || name
            .strip_prefix('w')
            .and_then(|n| n.strip_suffix(".tsv"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
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
            ("S", 11 | 12) => run.sections.push(Section {
                process: num(f[1])? as u32,
                thread: num(f[2])? as u32,
                lock: f[3].to_owned(),
                token: if f[4] == "-" { None } else { Some(num(f[4])?) },
                enter: num(f[5])?,
                exit: num(f[6])?,
                outcome: match f[7] {
                    "ok" => Outcome::Ok,
                    "lost" => Outcome::Lost,
                    "late" => Outcome::Late,
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
                mode: match f.get(11).copied().unwrap_or("x") {
                    "x" => Mode::Exclusive,
                    "w" => Mode::Write,
                    "r" => Mode::Read,
                    "p" => Mode::Permit,
                    _ => return Err(bad()),
                },
            }),
            ("T", 5) => run.timeouts.push(num(f[4])?),
            // A permit taken (for the runner's pause fault; the section's line says the rest).
            ("G", 5) => {}
            ("E", n) if n >= 6 => run.errors.push((f[5].to_owned(), num(f[4])?)),
            // A worker's client id, for the runner.
            ("I", 3) => {
                run.workers.insert(num(f[1])? as u32);
            }
            ("I", 4) if f[3] == "java" => {
                run.workers.insert(num(f[1])? as u32);
                run.java_processes.insert(num(f[1])? as u32);
            }
            ("D", 8) => run.deadlock.calls.push(Call {
                process: num(f[1])? as u32,
                thread: num(f[2])? as u32,
                lock: f[3].to_owned(),
                start: num(f[4])?,
                end: num(f[5])?,
                ended: match f[6] {
                    "ok" => CallEnd::Ok,
                    "deadlock" => CallEnd::Deadlock,
                    "err" => CallEnd::Err,
                    "stuck" => CallEnd::Stuck,
                    _ => return Err(bad()),
                },
                cycle: if f[7] == "-" {
                    String::new()
                } else {
                    f[7].to_owned()
                },
            }),
            ("U", 7) => run.deadlock.rounds.push(Round {
                process: num(f[1])? as u32,
                thread: num(f[2])? as u32,
                start: num(f[4])?,
                end: num(f[5])?,
                outcome: match f[6] {
                    "done" | "deadlock" | "err" => f[6].to_owned(),
                    _ => return Err(bad()),
                },
            }),
            ("H", 3) => {
                run.deadlock.check_ms = num(f[1])?;
                run.deadlock.ordered = match f[2] {
                    "ordered" => true,
                    "unordered" => false,
                    _ => return Err(bad()),
                };
            }
            ("V", 3) => run.rate.config = Some((num(f[1])?, num(f[2])?)),
            ("Z", 12) => run.preempt.holds.push(Hold {
                lock: f[3].to_owned(),
                token: num(f[4])?,
                owner: f[5].to_owned(),
                role: f[6].to_owned(),
                honour: f[7] == "1",
                notice: num(f[8])?,
                lost: num(f[9])?,
                reason: f[10].to_owned(),
                grace_ms: num(f[11])?,
            }),
            ("Y", 8) => run.preempt.waits.push(PriorityWait {
                lock: f[3].to_owned(),
                priority: num(f[4])?,
                start: num(f[5])?,
                end: num(f[6])?,
                got: f[7] == "1",
            }),
            ("J", 6) => {
                let token = f[5].parse().ok();
                let entry = (f[1], f[2], f[3], f[4]);
                let (lock, event, by, whom) = entry;
                run.preempt.events.insert((
                    lock.to_owned(),
                    event.to_owned(),
                    by.to_owned(),
                    whom.to_owned(),
                    token,
                ));
            }
            ("M", 10) => run.rate.grants.push(Grant {
                process: num(f[1])? as u32,
                thread: num(f[2])? as u32,
                limiter: f[3].to_owned(),
                permits: num(f[4])?,
                lo_ms: num(f[5])?,
                hi_ms: num(f[6])?,
                start: num(f[7])?,
                end: num(f[8])?,
                call: match f[9] {
                    "a" => RateCall::Acquire,
                    "w" => RateCall::Bounded,
                    "p" => RateCall::Polled,
                    _ => return Err(bad()),
                },
            }),
            ("N", 6) => run.rate.resets.push(Reset {
                process: num(f[1])? as u32,
                thread: num(f[2])? as u32,
                limiter: f[3].to_owned(),
                start: num(f[4])?,
                end: num(f[5])?,
            }),
            ("K", 2) => run.kind = f[1].to_owned(),
            ("P", 3) => (run.lease_ms, run.wait_ms) = (num(f[1])?, num(f[2])?),
            ("F", 5) => run.faults.push(Fault {
                class: f[1].to_owned(),
                start: num(f[2])?,
                end: num(f[3])?,
                detail: f[4].to_owned(),
            }),
            ("C", 3) => {
                let v = f[2].parse::<i64>().map_err(|_| bad())?;
                run.counters.insert(f[1].to_owned(), v);
            }
            ("X", n) if n >= 2 => run.runner_failures.push(f[1..].join(" ")),
            ("Q", 2) => run.permits = Some(num(f[1])? as u32),
            ("L", 7) => {
                let latch = run.latches.entry(f[3].to_owned()).or_default();
                match f[4] {
                    "c" => latch.count_downs.push(num(f[5])?),
                    "a" => latch.passes.push((num(f[5])?, num(f[6])?)),
                    _ => return Err(bad()),
                }
            }
            ("B", 8) => {
                let log = run.buffers.entry(f[3].to_owned()).or_default();
                match f[4] {
                    "put" => log.puts.push((f[5].to_owned(), num(f[6])?, num(f[7])?)),
                    "take" => log.takes.push((f[5].to_owned(), num(f[6])?)),
                    _ => return Err(bad()),
                }
            }
            ("W", 8) => {
                let log = run.buffers.entry(f[3].to_owned()).or_default();
                if f[4] == "c" {
                    log.consumer_waits.push((num(f[5])?, num(f[6])?));
                }
            }
            ("O", 6) => {
                let key = (num(f[1])? as u32, f[2].to_owned());
                run.observed
                    .entry(key)
                    .or_default()
                    .push((num(f[3])?, num(f[5])?));
            }
            ("R", 3) => {
                let log = run.buffers.entry(f[1].to_owned()).or_default();
                log.left.push(f[2].to_owned());
            }
            ("A", 3) => {
                let v = f[2].parse::<i64>().map_err(|_| bad())?;
                run.available.insert(f[1].to_owned(), v);
            }
            _ => return Err(bad()),
        }
    }
    Ok(())
}

/// Per-lock tallies, split into excused and not.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) excused: usize,
    pub(crate) unexcused: usize,
}

impl Tally {
    pub(crate) fn add(&mut self, excused: bool) {
        if excused {
            self.excused += 1;
        } else {
            self.unexcused += 1;
        }
    }

    fn total(&self) -> usize {
        self.excused + self.unexcused
    }

    /// Files the tally as a violation or an excused finding, in words.
    pub(crate) fn file(&self, what: &str, why: &str, r: &mut Report) {
        if self.unexcused > 0 {
            r.violations.push(format!("{} {what}", self.unexcused));
        }
        if self.excused > 0 {
            r.excused.push(format!("{} {what} ({why})", self.excused));
        }
    }
}

/// Checks a run. Every finding is matched by time with the faults injected; one is excused
/// only when a fault that explains it overlaps it:
/// - a lost hold (`lost` or `late`): any fault meeting its section;
/// - an overlap where a holder was told (`lost` at exit): that hold's loss being excused;
/// - a silent overlap: the server losing its data (`kill`) between the earlier section's
///   entry and the later one's: exclusion is then expected to break, and is reported so;
/// - a token not above the earlier ones: a lost hold as above; a data loss restarts the
///   counter and the comparison;
/// - lost updates of a lock: no more than its excused overlaps (each lost update needs one),
///   and none where the sections carry tokens (a fenced probe: read for update, then written,
///   so that a stale holder's write is refused);
///   updates above the completed writes: no more than its writes whose reply was lost;
/// - a refused fenced write: its writer's hold lost, or a data loss before it;
/// - a latch await that passed before its count of count-downs was sent: a data loss near
///   the await (as near as a lost hold's fault: [`Run::fault_near`]), which takes the latch
///   away, and an await on a missing latch passes;
/// - a timeout: a fault during the wait; an error: a fault before it (a killed pooled
///   connection is found at its next use).
///
/// Kind `deadlock` adds its rules on lock() calls and rounds (see `deadlock_check.rs`), the
/// rate kinds theirs on grants (see `rate_check.rs`; a bounded wait that ran out is no
/// finding there).
///
/// Never excused: a fenced write accepted with a token older than one accepted before it
/// began, a lost update of a fenced probe, a counter above the completed writes, a crashed
/// or hung worker, a run without sections.
pub fn check(run: &Run) -> Report {
    let mut r = Report {
        kind: run.kind.clone(),
        sections: run.sections.len(),
        java_sections: run
            .sections
            .iter()
            .filter(|s| run.java_processes.contains(&s.process))
            .count(),
        timeouts: run.timeouts.len(),
        errors: run.errors.len(),
        ..Report::default()
    };
    for f in &run.faults {
        *r.faults.entry(f.class.clone()).or_default() += 1;
    }
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in &run.sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    r.locks = by_lock.len();

    let (mut lost, mut reported, mut silent, mut tokens, mut told_tokens, mut rejected) = (
        Tally::default(),
        Tally::default(),
        Tally::default(),
        Tally::default(),
        Tally::default(),
        Tally::default(),
    );
    let mut lost_updates = Tally::default();
    let mut phantom_updates = Tally::default();
    let told = |s: &Section| s.outcome == Outcome::Lost;
    let is_lost = |s: &Section| matches!(s.outcome, Outcome::Lost | Outcome::Late);
    // The preempt kinds: a hold released by force, and when (its preemptor's entry).
    let forced_at = preempt_check::forced_at(run);
    let forced = |s: &Section| {
        s.token
            .and_then(|t| forced_at.get(&(s.lock.clone(), t)))
            .copied()
    };
    let loss_excused = |s: &Section| run.loss_excused(s) || forced(s).is_some();

    let names: BTreeSet<&str> = by_lock
        .keys()
        .copied()
        .chain(run.counters.keys().map(String::as_str))
        .collect();
    for name in names {
        let mut sections = by_lock.get(name).cloned().unwrap_or_default();
        sections.sort_by_key(|s| (s.enter, s.exit));
        // A hold released by force is counted with the forced releases (`preempt_check.rs`).
        for s in sections
            .iter()
            .filter(|s| is_lost(s) && forced(s).is_none())
        {
            lost.add(loss_excused(s));
            if run.java_processes.contains(&s.process) {
                r.java_lost_holds += 1;
            }
        }

        // Every overlapping pair: sweep by entry over the sections still inside.
        let mut inside: Vec<&Section> = Vec::new();
        let mut excused_pairs = 0usize;
        let mut unexcused_pairs = 0usize;
        for &s in &sections {
            inside.retain(|a| a.exit > s.enter);
            // Who `s` must not be beside: everyone inside for a lock or a writer, the writers
            // for a reader; a permit only when every permit is held inside (counted once,
            // against a holder that was told if there is one).
            let conflicting: Vec<&Section> = if s.mode == Mode::Permit {
                let permits = run.permits.unwrap_or(1) as usize;
                let holders: Vec<&Section> = inside
                    .iter()
                    .copied()
                    .filter(|a| a.mode == Mode::Permit)
                    .collect();
                if holders.len() >= permits {
                    r.over_capacity += 1;
                    let told_one = holders.iter().copied().find(|a| told(a));
                    vec![told_one.unwrap_or(holders[0])]
                } else {
                    Vec::new()
                }
            } else {
                inside
                    .iter()
                    .copied()
                    .filter(|a| a.mode.conflicts(s.mode))
                    .collect()
            };
            for a in conflicting {
                // A hold released by force overlaps whoever entered after the force: its
                // writes are fenced off (judged below), and its preemptor's rules are
                // `preempt_check.rs`'s.
                // (Either way round: a victim's thread may note its entry after its thief's.)
                if forced(a).is_some_and(|at| s.enter >= at)
                    || forced(s).is_some_and(|at| a.enter >= at)
                {
                    excused_pairs += 1;
                    continue;
                }
                let java = |x: &Section| run.java_processes.contains(&x.process);
                if java(a) != java(s) {
                    r.mixed_overlaps += 1;
                }
                let excused = if told(a) || told(s) {
                    let ok = [a, s].iter().all(|x| !told(x) || loss_excused(x));
                    reported.add(ok);
                    ok
                } else {
                    let ok = run.data_lost(a.enter.saturating_sub(SLACK_NS), s.enter);
                    silent.add(ok);
                    ok
                };
                if excused {
                    excused_pairs += 1;
                } else {
                    unexcused_pairs += 1;
                }
            }
            inside.push(s);
        }

        // Tokens grow with every holder; a data loss restarts them.
        let mut newest: Option<&Section> = None;
        for &s in sections.iter().filter(|s| s.token.is_some()) {
            if newest.is_some_and(|n| run.data_lost(n.enter.saturating_sub(SLACK_NS), s.enter)) {
                newest = None;
            }
            if let Some(n) = newest {
                if s.token <= n.token {
                    if is_lost(s) || is_lost(n) {
                        let ok = [n, s].iter().all(|x| !is_lost(x) || loss_excused(x));
                        told_tokens.add(ok);
                    } else {
                        tokens.add(false);
                    }
                }
            }
            if newest.is_none_or(|n| s.token > n.token) {
                newest = Some(s);
            }
        }

        r.stale_writes_accepted += stale_writes_accepted(&sections);
        for s in sections.iter().filter(|s| s.write == Write::Rejected) {
            if is_lost(s) {
                r.stale_writes_rejected += 1;
                rejected.add(loss_excused(s));
            } else {
                r.other_writes_rejected += 1;
                rejected.add(run.data_lost(0, s.write_start));
            }
        }

        let written = sections
            .iter()
            .filter(|s| s.write == Write::Accepted)
            .count() as i64;
        match run.counters.get(name) {
            Some(&counter) if counter <= written => {
                let n = written - counter;
                r.lost_updates += n;
                if n > 0 {
                    // A fenced probe (its sections carry tokens) reads for update: a stale
                    // holder's write between a holder's read and write is refused, so
                    // no overlap explains a lost update there.
                    let fenced = sections.iter().any(|s| s.token.is_some());
                    let excused = !fenced && unexcused_pairs == 0 && n as usize <= excused_pairs;
                    for _ in 0..n {
                        lost_updates.add(excused);
                    }
                }
            }
            Some(&counter) => {
                // A write whose reply was lost (`err`) may have run: each excuses one.
                let unknown = sections.iter().filter(|s| s.write == Write::Err).count() as i64;
                let phantom = counter - written;
                for i in 0..phantom {
                    phantom_updates.add(i < unknown);
                }
            }
            None if written > 0 => r.violations.push(format!(
                "lock `{name}`: {written} writes but no final counter recorded"
            )),
            None => {}
        }
    }
    // Every permit back at the end: a data loss resets a semaphore, and a release whose
    // outcome is unknown (`err`) may not have run.
    // Nobody passes a latch before its count of count-downs were sent; a data loss near the
    // await (the latch gone while it looked) lets it through.
    let mut early = Tally::default();
    let needed = run.permits.unwrap_or(1) as usize;
    for log in run.latches.values() {
        let mut sent = log.count_downs.clone();
        sent.sort_unstable();
        for &(began, passed) in &log.passes {
            r.latch_passes += 1;
            if sent.partition_point(|&at| at < passed) < needed {
                r.early_passes += 1;
                early.add(run.fault_near(|c| DATA_LOSS.contains(&c), began, passed));
            }
        }
    }
    let rate = RATE_KINDS.contains(&run.kind.as_str());
    if rate {
        let grants = &run.rate.grants;
        r.sections = grants.len();
        r.java_sections = (grants.iter())
            .filter(|g| run.java_processes.contains(&g.process))
            .count();
        r.locks = grants
            .iter()
            .map(|g| &g.limiter)
            .collect::<BTreeSet<_>>()
            .len();
    }
    if run.kind == "latch" {
        r.sections = run
            .latches
            .values()
            .map(|l| l.count_downs.len() + l.passes.len())
            .sum();
        r.locks = run.latches.len();
    }
    let mut permits = Tally::default();
    if let Some(p) = run.permits {
        let unknown = run.sections.iter().any(|s| s.outcome == Outcome::Err);
        for (name, &available) in &run.available {
            let off = available - i64::from(p);
            if off != 0 {
                r.permits_unaccounted += off.abs();
                let excused = unknown || run.data_lost(0, u64::MAX);
                permits.add(excused);
                if !excused {
                    r.violations.push(format!(
                        "semaphore `{name}`: {available} permits available at the end, not {p}"
                    ));
                }
            }
        }
    }
    r.lost_holds = lost.total();
    r.reported_overlaps = reported.total();
    r.silent_overlaps = silent.total();
    r.silent_overlaps_after_data_loss = silent.excused;
    r.token_order_violations = tokens.total();
    r.reported_token_order_violations = told_tokens.total();

    let mut timeouts = Tally::default();
    // A bounded wait that a rate limiter did not admit in time is the limiter at work.
    for &at in run.timeouts.iter().filter(|_| !rate) {
        let waited = run.wait_ms * 1_000_000 + SLACK_NS;
        timeouts.add(run.fault_in(|_| true, at.saturating_sub(waited), at));
    }
    let mut errors = Tally::default();
    for (_, at) in &run.errors {
        errors.add(run.faults.iter().any(|f| f.start <= *at));
    }

    if r.sections == 0 {
        r.violations.push("no critical section completed".into());
    }
    for f in &run.runner_failures {
        r.violations.push(format!("runner: {f}"));
    }
    lost.file("holds lost", "a fault met the section", &mut r);
    silent.file(
        "overlapping pairs of sections where no holder had been told its hold was lost",
        "EXCLUSION BROKEN: the lock server lost its data (kill and restart without persistence); \
         only fencing protects a resource then",
        &mut r,
    );
    reported.file(
        "overlapping pairs of sections where a holder had been told its hold was lost",
        "the lost hold is excused",
        &mut r,
    );
    lost_updates.file(
        "lost updates of the probe counter",
        "no more than the excused overlaps of that lock, whose probe is not fenced",
        &mut r,
    );
    tokens.file(
        "holders whose token was not above the earlier holders'",
        "unreachable",
        &mut r,
    );
    told_tokens.file(
        "holders whose token was not above the earlier holders', one of the two holds lost",
        "the lost hold is excused",
        &mut r,
    );
    rejected.file(
        "fenced writes refused",
        "the writer's hold was lost, or a data loss reset the token counter",
        &mut r,
    );
    if r.stale_writes_accepted > 0 {
        r.violations.push(format!(
            "{} fenced writes accepted with a stale token",
            r.stale_writes_accepted
        ));
    }
    r.phantom_updates = phantom_updates.unexcused as i64;
    phantom_updates.file(
        "probe counter updates above the completed writes",
        "writes whose reply was lost, which may have run",
        &mut r,
    );
    early.file(
        "latch awaits passed before the latch's count of count-downs was sent",
        "a data loss near the await took the latch away",
        &mut r,
    );
    if permits.excused > 0 {
        r.excused.push(format!(
            "{} semaphores ended with other than their permits (a data loss, or a release \
             whose outcome is unknown)",
            permits.excused
        ));
    }
    if run.kind == "condition" {
        buffer_check::check(run, &mut r);
    }
    if run.kind == "election" {
        election_check::check(run, &mut r);
    }
    if run.kind == "deadlock" {
        deadlock_check::check(run, &mut r);
    }
    if rate {
        rate_check::check(run, &mut r);
    }
    if run.kind.starts_with("preempt") {
        preempt_check::check(run, &mut r);
    } else if !run.preempt.waits.is_empty() {
        // `--priorities on`: the aging rule alone.
        let overtaken = preempt_check::aging(run, &mut r);
        r.priorities = Some((run.preempt.waits.len(), overtaken));
    }
    timeouts.file("waits timed out", "a fault during the wait", &mut r);
    errors.file("errors", "after a fault", &mut r);
    r
}

/// Fenced writes accepted although a write with a greater token had been accepted before
/// they began.
fn stale_writes_accepted(sections: &[&Section]) -> usize {
    let accepted = || {
        sections
            .iter()
            .filter(|s| s.write == Write::Accepted)
            .filter_map(|s| Some((s, s.token?)))
    };
    let mut ended: Vec<(u64, u64)> = accepted().map(|(s, t)| (s.write_end, t)).collect();
    ended.sort_unstable();
    let mut started: Vec<(u64, u64)> = accepted().map(|(s, t)| (s.write_start, t)).collect();
    started.sort_unstable();
    let (mut stale, mut i, mut newest) = (0, 0, 0);
    for (start, token) in started {
        while i < ended.len() && ended[i].0 < start {
            newest = newest.max(ended[i].1);
            i += 1;
        }
        if token < newest {
            stale += 1;
        }
    }
    stale
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(g) = &self.preempt {
            writeln!(
                f,
                "revocations in the logs kept: {} requests, {} preemptions with a grace, {} steals; {} \
                 forced releases ({} of a holder still inside); {} holders honoured notices; \
                 {} waits with a priority, {} served out of their aging allowance",
                g.requests,
                g.preempts,
                g.steals,
                g.forced,
                g.forced_overlaps,
                g.honoured,
                g.priority_waits,
                g.overtaken
            )?;
        }
        if let Some((waits, overtaken)) = self.priorities {
            writeln!(
                f,
                "{waits} waits with a priority, {overtaken} served out of their aging allowance"
            )?;
        }
        if let Some(g) = &self.rate {
            writeln!(
                f,
                "kind {}: {} grants of {} permits on {} limiters ({} grants by Java workers on \
                 Redisson)",
                self.kind, g.grants, g.permits, self.locks, g.java_grants
            )?;
        } else if self.java_sections > 0 {
            writeln!(
                f,
                "kind {}: {} critical sections on {} locks ({} Rust, {} Java on Redisson; {} \
                 overlapping Rust/Java pairs, {} Java holds lost)",
                self.kind,
                self.sections,
                self.locks,
                self.sections - self.java_sections,
                self.java_sections,
                self.mixed_overlaps,
                self.java_lost_holds
            )?;
        } else {
            writeln!(
                f,
                "kind {}: {} critical sections on {} locks",
                self.kind, self.sections, self.locks
            )?;
        }
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(c, n)| format!("{c} x{n}"))
            .collect();
        let faults = if faults.is_empty() {
            "none".to_owned()
        } else {
            faults.join(", ")
        };
        writeln!(f, "faults: {faults}")?;
        writeln!(
            f,
            "overlapping pairs: {} silent ({} after data loss), {} reported; lost holds {}",
            self.silent_overlaps,
            self.silent_overlaps_after_data_loss,
            self.reported_overlaps,
            self.lost_holds
        )?;
        writeln!(
            f,
            "probe: lost updates {}, phantom updates {}",
            self.lost_updates, self.phantom_updates
        )?;
        writeln!(
            f,
            "tokens: {} order violations ({} more with a lost hold); fenced writes: {} stale \
             accepted, {} stale refused, {} others refused",
            self.token_order_violations,
            self.reported_token_order_violations,
            self.stale_writes_accepted,
            self.stale_writes_rejected,
            self.other_writes_rejected
        )?;
        if self.latch_passes > 0 {
            writeln!(
                f,
                "latches: {} awaits passed, {} before the count-downs were sent",
                self.latch_passes, self.early_passes
            )?;
        }
        if self.over_capacity > 0 || self.permits_unaccounted != 0 {
            writeln!(
                f,
                "semaphores: {} entries over capacity, {} permits unaccounted at the end",
                self.over_capacity, self.permits_unaccounted
            )?;
        }
        if let Some(b) = &self.buffers {
            writeln!(
                f,
                "buffers: {} items put, {} taken; {} lost, {} taken twice, {} phantom; {} puts \
                 over capacity; {} items unclaimed two leases while a consumer waited",
                b.puts, b.takes, b.lost, b.doubled, b.phantom, b.overflows, b.stalls
            )?;
        }
        if let Some(o) = &self.observers {
            writeln!(
                f,
                "observers: {} leaders yielded; {} out of term order, {} that never ran, {} \
                 missed",
                o.yielded, o.out_of_order, o.unknown, o.missed
            )?;
        }
        if let Some(d) = &self.deadlock {
            let ms = |ns: u64| ns as f64 / 1e6;
            let lengths: Vec<String> = d
                .cycle_lengths
                .iter()
                .map(|(len, n)| format!("{n} of {len}"))
                .collect();
            writeln!(
                f,
                "deadlock ({}, checks after {} ms): {} rounds done (the fewest by a process: \
                 {}), {} broken by a deadlock, {} failed; {} lock() calls, {} deadlocks broken \
                 (cycles of waits: {})",
                if d.ordered { "ordered" } else { "unordered" },
                d.check_ms,
                d.rounds_done,
                d.fewest_rounds_done,
                d.rounds_broken,
                d.rounds_failed,
                d.calls,
                d.deadlocks,
                if lengths.is_empty() {
                    "none".to_owned()
                } else {
                    lengths.join(", ")
                }
            )?;
            writeln!(
                f,
                "lock() calls: longest {:.0} ms ({:.0} ms where no fault met it; bound {} ms), \
                 longest to break a cycle {:.0} ms (bound {} ms); {} over their bound, {} never \
                 returned, {} cycles broken twice",
                ms(d.longest_call_ns),
                ms(d.longest_call_no_fault_ns),
                d.bound_ms,
                ms(d.longest_break_ns),
                d.break_bound_ms,
                d.over_bound,
                d.stuck,
                d.double_victims
            )?;
        }
        if let Some(g) = &self.rate {
            let ratio = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.3}"));
            writeln!(
                f,
                "rate {} per {} ms: the fullest window held {} permits ({} where no data loss \
                 was near); {} windows over the rate, {} more near a data loss (up to {} over)",
                g.rate,
                g.interval_ms,
                g.max_window,
                g.max_window_no_loss,
                g.over_windows,
                g.over_windows_after_data_loss,
                g.max_excess_after_data_loss
            )?;
            writeln!(
                f,
                "throughput {} of the rate over {} intervals of saturating demand away from \
                 faults (lowest limiter {}, lowest interval {} permits; at least {} needed); \
                 rate set again {} times ({} with no data loss near)",
                ratio(g.throughput),
                g.intervals,
                ratio(g.lowest_throughput),
                g.lowest_interval.map_or("-".to_owned(), |n| n.to_string()),
                rate_check::MIN_THROUGHPUT,
                g.resets,
                g.unexcused_resets
            )?;
        }
        writeln!(f, "timeouts {}; errors {}", self.timeouts, self.errors)?;
        for e in &self.excused {
            writeln!(f, "excused: {e}")?;
        }
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        let rate_broke = self
            .rate
            .as_ref()
            .is_some_and(|g| g.over_windows_after_data_loss > 0);
        let verdict = match (self.passed(), self.silent_overlaps_after_data_loss) {
            (false, _) => "FAIL",
            (true, 0) if rate_broke => {
                "PASS, BUT THE RATE WAS EXCEEDED after the server lost its data (expected)"
            }
            (true, 0) => "PASS",
            (true, _) => "PASS, BUT EXCLUSION BROKE after the server lost its data (expected)",
        };
        write!(f, "{verdict}")
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
    let nums = [
        ("sections", r.sections as i64),
        ("java_sections", r.java_sections as i64),
        ("mixed_overlaps", r.mixed_overlaps as i64),
        ("java_lost_holds", r.java_lost_holds as i64),
        ("locks", r.locks as i64),
        ("silent_overlaps", r.silent_overlaps as i64),
        (
            "silent_overlaps_after_data_loss",
            r.silent_overlaps_after_data_loss as i64,
        ),
        ("reported_overlaps", r.reported_overlaps as i64),
        ("lost_holds", r.lost_holds as i64),
        ("lost_updates", r.lost_updates),
        ("phantom_updates", r.phantom_updates),
        ("token_order_violations", r.token_order_violations as i64),
        (
            "reported_token_order_violations",
            r.reported_token_order_violations as i64,
        ),
        ("stale_writes_accepted", r.stale_writes_accepted as i64),
        ("stale_writes_rejected", r.stale_writes_rejected as i64),
        ("other_writes_rejected", r.other_writes_rejected as i64),
        ("over_capacity", r.over_capacity as i64),
        ("permits_unaccounted", r.permits_unaccounted),
        ("latch_passes", r.latch_passes as i64),
        ("early_passes", r.early_passes as i64),
        ("timeouts", r.timeouts as i64),
        ("errors", r.errors as i64),
    ];
    let b = r.buffers.clone().unwrap_or_default();
    let buffers = [
        ("items_put", b.puts as i64),
        ("items_taken", b.takes as i64),
        ("items_lost", b.lost as i64),
        ("items_taken_twice", b.doubled as i64),
        ("items_phantom", b.phantom as i64),
        ("buffer_overflows", b.overflows as i64),
        ("consumer_stalls", b.stalls as i64),
    ];
    let o = r.observers.clone().unwrap_or_default();
    let observers = [
        ("observed_leaders", o.yielded as i64),
        ("observed_out_of_order", o.out_of_order as i64),
        ("observed_unknown", o.unknown as i64),
        ("observed_missed", o.missed as i64),
    ];
    let d = r.deadlock.clone().unwrap_or_default();
    let deadlock = [
        ("rounds_done", d.rounds_done as i64),
        ("fewest_rounds_done", d.fewest_rounds_done as i64),
        ("rounds_broken", d.rounds_broken as i64),
        ("rounds_failed", d.rounds_failed as i64),
        ("lock_calls", d.calls as i64),
        ("deadlocks", d.deadlocks as i64),
        ("longest_lock_ms", (d.longest_call_ns / 1_000_000) as i64),
        (
            "longest_lock_no_fault_ms",
            (d.longest_call_no_fault_ns / 1_000_000) as i64,
        ),
        ("longest_break_ms", (d.longest_break_ns / 1_000_000) as i64),
        ("calls_over_bound", d.over_bound as i64),
        ("stuck_calls", d.stuck as i64),
        ("double_victims", d.double_victims as i64),
    ];
    let g = r.rate.clone().unwrap_or_default();
    let rate = [
        ("rate", g.rate as i64),
        ("interval_ms", g.interval_ms as i64),
        ("java_grants", g.java_grants as i64),
        ("permits_admitted", g.permits as i64),
        ("max_window_permits", g.max_window as i64),
        (
            "max_window_permits_no_data_loss",
            g.max_window_no_loss as i64,
        ),
        ("windows_over_rate", g.over_windows as i64),
        (
            "windows_over_rate_after_data_loss",
            g.over_windows_after_data_loss as i64,
        ),
        (
            "max_excess_after_data_loss",
            g.max_excess_after_data_loss as i64,
        ),
        ("throughput_intervals", g.intervals as i64),
        ("rate_resets", g.resets as i64),
        ("unexcused_rate_resets", g.unexcused_resets as i64),
    ];
    let mut q = r.preempt.clone().unwrap_or_default();
    if let Some((waits, overtaken)) = r.priorities {
        (q.priority_waits, q.overtaken) = (waits, overtaken);
    }
    let preempt = [
        ("revoke_requests", q.requests as i64),
        ("preempts", q.preempts as i64),
        ("steals", q.steals as i64),
        ("forced_releases", q.forced as i64),
        ("forced_overlaps", q.forced_overlaps as i64),
        ("honoured_holds", q.honoured as i64),
        ("priority_waits", q.priority_waits as i64),
        ("overtaken_waits", q.overtaken as i64),
    ];
    let ratio = |r: Option<f64>| r.map_or("null".to_owned(), |r| format!("{r:.4}"));
    let nums: Vec<String> = nums
        .iter()
        .chain(&buffers)
        .chain(&observers)
        .chain(&deadlock)
        .chain(&rate)
        .chain(&preempt)
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .chain([
            format!("\"throughput_ratio\":{}", ratio(g.throughput)),
            format!("\"lowest_throughput_ratio\":{}", ratio(g.lowest_throughput)),
        ])
        .collect();
    format!(
        "{{\"kind\":\"{}\",\"faults\":{{{}}},{},\"passed\":{},\"violations\":{},\"excused\":{}}}",
        r.kind,
        faults.join(","),
        nums.join(","),
        r.passed(),
        strings(&r.violations),
        strings(&r.excused)
    )
}
