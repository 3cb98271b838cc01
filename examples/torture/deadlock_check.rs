//! The checker's rules for kind `deadlock` (see `deadlock.rs`): what the `D` and `U` lines
//! say about the lock() calls and the rounds, beside the `S` lines of every hold (checked for
//! overlaps as every exclusive kind's).
//!
//! ```text
//! D proc thread lock start_ns end_ns ok|deadlock|err|stuck cycle   one lock() call (cycle: `-`,
//!                                                                  or the deadlock's steps)
//! U proc thread locks start_ns end_ns done|deadlock|err            one round: its locks (comma-
//!                                                                  separated, in the order taken)
//! H check_ms ordered|unordered                                     run.tsv: the client's
//!                                                                  deadlock_check_after, the order
//! ```
//!
//! A `stuck` call is one still blocked when its worker gave up on it (its `end` is when it
//! gave up).
//!
//! Two bounds. A cycle closes as its youngest wait begins (every other member was already
//! waiting, and a thread that waits takes nothing), and that wait is the one the library
//! ends: the call that ends in `Error::Deadlock` lasted as long as the cycle did. It must end
//! within [`break_bound_ms`]. Every other call ends once the holders in its way release; a
//! cycle that no check broke would keep its members (their holds renewed by the watchdog)
//! waiting for ever, and the plain lock is not fair (a waiter that holds nothing can lose a
//! released lock to newcomers several times), so every call is bounded by the run's wait
//! bound (`P`, `--wait-ms`, 20 s by default, as every kind's waits). With a fault, each bound
//! grows by [`with_fault_ms`].
//!
//! - a call that broke a cycle and lasted longer than the break bound, or any call longer
//!   than the wait bound, is excused only when a fault met it (with the checker's slack either
//!   side), and then only up to that bound with a fault;
//! - a call still blocked at the end (`stuck`) is never excused;
//! - one victim per cycle: two calls ending in a deadlock whose cycles name the same waits,
//!   both blocked at once, broke one cycle twice; excused only by a fault that met them
//!   (records lost or unread);
//! - under `--ordered` (every thread takes its locks sorted by name, so no cycle can form)
//!   every deadlock reported is a false positive, never excused, faults or not;
//! - every worker process completes at least one round (all its locks taken and released):
//!   one that completed none made no progress.

use std::collections::{BTreeMap, BTreeSet};

use crate::check::{Report, Run, Tally, SLACK_NS};

/// How a lock() call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallEnd {
    Ok,
    /// `Error::Deadlock`: this wait was chosen to break a cycle.
    Deadlock,
    /// Another error.
    Err,
    /// Still blocked when the worker gave up on it.
    Stuck,
}

/// One lock() call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub process: u32,
    pub thread: u32,
    pub lock: String,
    pub start: u64,
    pub end: u64,
    pub ended: CallEnd,
    /// The deadlock's cycle, as the error names it (empty for other calls).
    pub cycle: String,
}

impl Call {
    fn took(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// One round: a thread's locks taken, probed, released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Round {
    pub process: u32,
    pub thread: u32,
    pub start: u64,
    pub end: u64,
    /// `done`, `deadlock` or `err`.
    pub outcome: String,
}

/// Everything a deadlock run logged beside its sections.
#[derive(Clone, Debug, Default)]
pub struct DeadlockLog {
    /// The clients' `deadlock_check_after`, in ms.
    pub check_ms: u64,
    pub ordered: bool,
    pub calls: Vec<Call>,
    pub rounds: Vec<Round>,
}

/// What the rules found, for the report.
#[derive(Clone, Debug, Default)]
pub struct DeadlockFindings {
    pub ordered: bool,
    pub check_ms: u64,
    /// The bounds on a call that broke a cycle, and on any call (without a fault).
    pub break_bound_ms: u64,
    pub bound_ms: u64,
    /// Rounds completed (every lock taken and released), broken by a deadlock, failed.
    pub rounds_done: usize,
    pub rounds_broken: usize,
    pub rounds_failed: usize,
    /// The fewest rounds a worker process completed.
    pub fewest_rounds_done: usize,
    pub calls: usize,
    /// `Error::Deadlock`s: cycles broken (one victim each).
    pub deadlocks: usize,
    /// Of those, by the cycle's length (waits).
    pub cycle_lengths: BTreeMap<usize, usize>,
    /// The longest lock() call, and the longest of those that ended in a deadlock (the time
    /// from the cycle closing, as its youngest wait began, to its breaking).
    pub longest_call_ns: u64,
    pub longest_break_ns: u64,
    /// The longest call no fault met.
    pub longest_call_no_fault_ns: u64,
    /// Calls longer than their bound (excused or not), and calls that never returned.
    pub over_bound: usize,
    pub stuck: usize,
    /// Cycles broken twice (two victims at once).
    pub double_victims: usize,
}

/// The bound on a lock() call that ends a cycle, for the clients' `deadlock_check_after` of
/// `check_ms`: the cycle is complete once that wait began, and its victim's first check,
/// `check_ms` later, finds it; where another member's record was written a moment late (its
/// wait began in the same millisecond, a thread descheduled), or the victim is a member that
/// began in the same millisecond but has the greater owner id, its next checks, 3 and 7 times
/// `check_ms` after the wait began (the intervals double). A second more for the walk's round
/// trips and for scheduling on two cores shared with other work: 1,700 ms at `check_ms` 100.
pub fn break_bound_ms(check_ms: u64) -> u64 {
    7 * check_ms + 1_000
}

/// A bound with a fault: `bound_ms`, plus the longest `pause-holder` (a lease and 2 s, during
/// which the paused thread's own call cannot end and its checks do not run), plus a lease for
/// the holds of a process stopped or cut off just after a renewal to expire before the
/// threads waiting for them can have them.
pub fn with_fault_ms(bound_ms: u64, lease_ms: u64) -> u64 {
    bound_ms + 2 * lease_ms + 2_000
}

/// The waits a deadlock's cycle names, sorted: what two victims of one cycle share.
fn cycle_steps(cycle: &str) -> Vec<&str> {
    let mut steps: Vec<&str> = cycle
        .trim_start_matches("deadlock: ")
        .split("; ")
        .map(|step| step.split(" held by ").next().unwrap_or(step))
        .collect();
    steps.sort_unstable();
    steps
}

/// How many waits a deadlock's cycle names (`a waits for `x` held by b; ...`).
fn cycle_len(cycle: &str) -> usize {
    cycle.matches(" waits for `").count()
}

/// Applies the rules, filing violations and excused findings in `r`.
pub fn check(run: &Run, r: &mut Report) {
    let log = &run.deadlock;
    let mut found = DeadlockFindings {
        ordered: log.ordered,
        check_ms: log.check_ms,
        break_bound_ms: break_bound_ms(log.check_ms),
        bound_ms: run.wait_ms,
        calls: log.calls.len(),
        ..DeadlockFindings::default()
    };
    let ns = |ms: u64| ms * 1_000_000;
    let (mut over, mut slow_breaks) = (Tally::default(), Tally::default());
    let mut unexcused: Vec<&Call> = Vec::new();
    let mut false_deadlocks: Vec<&Call> = Vec::new();
    let faulted = |c: &Call| {
        run.fault_in(
            |_| true,
            c.start.saturating_sub(SLACK_NS),
            c.end.saturating_add(SLACK_NS),
        )
    };
    for c in &log.calls {
        let took = c.took();
        let faulted = faulted(c);
        found.longest_call_ns = found.longest_call_ns.max(took);
        if !faulted {
            found.longest_call_no_fault_ns = found.longest_call_no_fault_ns.max(took);
        }
        match c.ended {
            CallEnd::Deadlock => {
                found.deadlocks += 1;
                *found.cycle_lengths.entry(cycle_len(&c.cycle)).or_default() += 1;
                found.longest_break_ns = found.longest_break_ns.max(took);
                if log.ordered {
                    false_deadlocks.push(c);
                }
            }
            CallEnd::Stuck => found.stuck += 1,
            CallEnd::Ok | CallEnd::Err => {}
        }
        if c.ended == CallEnd::Stuck {
            continue;
        }
        let (bound, tally) = if c.ended == CallEnd::Deadlock && took > ns(found.break_bound_ms) {
            (found.break_bound_ms, &mut slow_breaks)
        } else if took > ns(found.bound_ms) {
            (found.bound_ms, &mut over)
        } else {
            continue;
        };
        found.over_bound += 1;
        let excused = faulted && took <= ns(with_fault_ms(bound, run.lease_ms));
        tally.add(excused);
        if !excused {
            unexcused.push(c);
        }
    }
    slow_breaks.file(
        &format!(
            "lock() calls that broke a cycle after more than {} ms",
            found.break_bound_ms
        ),
        &format!(
            "a fault met the call, and it ended within {} ms",
            with_fault_ms(found.break_bound_ms, run.lease_ms)
        ),
        r,
    );
    over.file(
        &format!(
            "lock() calls blocked longer than the wait bound of {} ms",
            found.bound_ms
        ),
        &format!(
            "a fault met the call, and it ended within {} ms",
            with_fault_ms(found.bound_ms, run.lease_ms)
        ),
        r,
    );
    if let Some(c) = unexcused.iter().max_by_key(|c| c.took()) {
        r.violations.push(format!(
            "the longest of those: {} ms, thread {}.{} on `{}`, ended {:?}",
            c.took() / 1_000_000,
            c.process,
            c.thread,
            c.lock,
            c.ended
        ));
    }
    // One victim per cycle: victims of the same waits, blocked at the same time.
    let mut victims: BTreeMap<Vec<&str>, Vec<&Call>> = BTreeMap::new();
    for c in log.calls.iter().filter(|c| c.ended == CallEnd::Deadlock) {
        victims.entry(cycle_steps(&c.cycle)).or_default().push(c);
    }
    let mut doubled = Tally::default();
    for calls in victims.values_mut() {
        calls.sort_by_key(|c| c.start);
        for pair in calls.windows(2) {
            if pair[1].start < pair[0].end {
                found.double_victims += 1;
                doubled.add(faulted(pair[0]) || faulted(pair[1]));
            }
        }
    }
    doubled.file(
        "cycles broken twice (two of its waits ended with a deadlock)",
        "a fault met them",
        r,
    );
    for c in log.calls.iter().filter(|c| c.ended == CallEnd::Stuck) {
        r.violations.push(format!(
            "lock() call of thread {}.{} on `{}` still blocked after {} ms when its worker \
             gave up on it",
            c.process,
            c.thread,
            c.lock,
            c.took() / 1_000_000
        ));
    }
    if let Some(first) = false_deadlocks.iter().min_by_key(|c| c.start) {
        r.violations.push(format!(
            "{} deadlocks reported although every thread took its locks in one order (false \
             positives); the first, thread {}.{} on `{}` after {} ms: {}",
            false_deadlocks.len(),
            first.process,
            first.thread,
            first.lock,
            first.took() / 1_000_000,
            first.cycle
        ));
    }

    let mut done: BTreeMap<u32, usize> = run.workers.iter().map(|&p| (p, 0)).collect();
    for round in &log.rounds {
        match round.outcome.as_str() {
            "done" => *done.entry(round.process).or_default() += 1,
            "deadlock" => found.rounds_broken += 1,
            _ => found.rounds_failed += 1,
        }
    }
    found.rounds_done = done.values().sum();
    found.fewest_rounds_done = done.values().copied().min().unwrap_or(0);
    let idle: BTreeSet<u32> = done
        .iter()
        .filter(|&(_, &n)| n == 0)
        .map(|(&p, _)| p)
        .collect();
    if !idle.is_empty() {
        r.violations.push(format!(
            "worker processes {idle:?} completed no round (no progress)"
        ));
    }
    r.deadlock = Some(found);
}
