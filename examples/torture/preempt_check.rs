//! The checker's rules for kind `preempt` (and `preempt-broken`; see `preempt.rs`): what the
//! holds' stories, the waits with a priority and the locks' logs of revocations say.
//!
//! ```text
//! Z proc thread lock token owner role honour notice_ns lost_ns reason grace_ms   a hold's story
//! Y proc thread lock priority start_ns end_ns got                               a wait with a priority
//! J lock event by whom token                                                    a lock's log entry
//! ```
//!
//! A forced release (`J ... forced`, by the preemptor, of the hold `whom` had with `token`)
//! is matched with the victim's section (that lock and token) and the preemptor's (the next
//! token: the forced take's). Then, unless a fault met the victim's section:
//! - the victim's hold began before its preemptor's (a forced release never removes a later
//!   hold; its entry, noted after its lock call returned, may come after its thief's by less
//!   than the slack);
//! - a victim still inside when its preemptor entered, preempted with a grace, had been told
//!   (`on_revoke`) by then;
//! - a victim that honours notices was not forced while it answered within the grace (it
//!   ended less than the grace, less 100 ms, after it was told);
//! - a victim still inside one renewal period (a third of the lease) and the slack after
//!   its preemptor entered had been told of the loss (`on_lost`) by then.
//!
//! An overlap of a forced victim with a section that entered after the force (its preemptor,
//! or a later holder) is no violation (the fence refuses the victim's writes: the generic
//! rules check that); any other overlap is judged by the generic rules. A hold lost to a
//! preemptor (`reason` `preempted`) has its forced release in a log; without one, it is a
//! violation (what an unconditional release leaves). Waits with a priority: a waiter of
//! priority `q` served before one of priority `p` that joined before it joined less than
//! `q - p` aging steps (of one second) and the slack after it (faults aside).

use std::collections::{BTreeMap, BTreeSet};

use crate::check::{Report, Run, Section, Tally, SLACK_NS};

/// One hold's story (a `Z` line).
#[derive(Clone, Debug)]
pub struct Hold {
    pub lock: String,
    pub token: u64,
    pub owner: String,
    pub role: String,
    pub honour: bool,
    pub notice: u64,
    pub lost: u64,
    pub reason: String,
    pub grace_ms: u64,
}

/// A wait with a priority (a `Y` line).
#[derive(Clone, Debug)]
pub struct PriorityWait {
    pub lock: String,
    pub priority: u64,
    pub start: u64,
    pub end: u64,
    pub got: bool,
}

/// What kind `preempt` logs beside the sections.
#[derive(Clone, Debug, Default)]
pub struct PreemptLog {
    pub holds: Vec<Hold>,
    pub waits: Vec<PriorityWait>,
    /// The locks' log entries: (lock, event, by, whom, token); duplicates allowed.
    pub events: BTreeSet<(String, String, String, String, Option<u64>)>,
}

impl PreemptLog {
    /// The forced releases: (lock, victim's token) -> (victim, preemptor).
    pub fn forced(&self) -> BTreeMap<(String, u64), (String, String)> {
        self.events
            .iter()
            .filter(|e| e.1 == "forced")
            .filter_map(|(lock, _, by, whom, token)| {
                Some(((lock.clone(), (*token)?), (whom.clone(), by.clone())))
            })
            .collect()
    }
}

/// What the rules found.
#[derive(Clone, Debug, Default)]
pub struct PreemptFindings {
    pub requests: usize,
    pub preempts: usize,
    pub steals: usize,
    pub forced: usize,
    /// Forced releases of a victim still inside when its preemptor entered.
    pub forced_overlaps: usize,
    pub honoured: usize,
    pub priority_waits: usize,
    pub overtaken: usize,
}

/// When each forced victim's hold ended by force: (lock, token) -> its preemptor's entry.
pub(crate) fn forced_at(run: &Run) -> BTreeMap<(String, u64), u64> {
    let sections: BTreeMap<(&str, u64), &Section> = run
        .sections
        .iter()
        .filter_map(|s| Some(((s.lock.as_str(), s.token?), s)))
        .collect();
    run.preempt
        .forced()
        .into_keys()
        .filter_map(|(lock, token)| {
            let enter = sections.get(&(lock.as_str(), token + 1))?.enter;
            Some(((lock, token), enter))
        })
        .collect()
}

pub(crate) fn check(run: &Run, r: &mut Report) {
    let log = &run.preempt;
    let mut g = PreemptFindings {
        requests: log.events.iter().filter(|e| e.1 == "request").count(),
        preempts: log.events.iter().filter(|e| e.1 == "preempt").count(),
        steals: log.events.iter().filter(|e| e.1 == "steal").count(),
        honoured: log.holds.iter().filter(|h| h.honour).count(),
        priority_waits: log.waits.len(),
        ..PreemptFindings::default()
    };
    let sections: BTreeMap<(&str, u64), &Section> = run
        .sections
        .iter()
        .filter_map(|s| Some(((s.lock.as_str(), s.token?), s)))
        .collect();
    let holds: BTreeMap<(&str, u64), &Hold> = log
        .holds
        .iter()
        .map(|h| ((h.lock.as_str(), h.token), h))
        .collect();
    let period = run.lease_ms * 1_000_000 / 3;
    let (mut unmatched, mut later, mut untold, mut early, mut unsaid) = (
        Tally::default(),
        Tally::default(),
        Tally::default(),
        Tally::default(),
        Tally::default(),
    );
    let forced = log.forced();
    g.forced = forced.len();
    for ((lock, token), (whom, by)) in &forced {
        let victim = sections.get(&(lock.as_str(), *token));
        let taker = sections.get(&(lock.as_str(), token + 1));
        let (Some(v), Some(p)) = (victim, taker) else {
            unmatched.add(false);
            continue;
        };
        let (Some(hv), Some(hp)) = (
            holds.get(&(lock.as_str(), *token)),
            holds.get(&(lock.as_str(), token + 1)),
        ) else {
            unmatched.add(false);
            continue;
        };
        if hv.owner != *whom || hp.owner != *by || !matches!(hp.role.as_str(), "p" | "s") {
            unmatched.add(false);
            continue;
        }
        let excused = run.fault_near(|_| true, v.enter, v.exit);
        // The victim's entry is noted after its lock call returned, its thief's after the
        // force: a thread slow to note its entry (a loaded machine) may note it after its
        // thief, by less than the slack.
        if v.enter >= p.enter + SLACK_NS {
            later.add(excused);
        }
        if v.exit <= p.enter {
            continue;
        }
        g.forced_overlaps += 1;
        if hp.grace_ms > 0 && (hv.notice == 0 || hv.notice > p.enter) {
            untold.add(excused);
        }
        let grace = hp.grace_ms * 1_000_000;
        if hv.honour && hv.notice != 0 && v.exit.saturating_sub(hv.notice) + 100_000_000 < grace {
            early.add(excused);
        }
        let told_by = p.enter + period + SLACK_NS;
        if v.exit > told_by && (hv.lost == 0 || hv.lost > told_by) {
            unsaid.add(excused);
        }
    }
    unmatched.file(
        "forced releases without the victim's and the preemptor's sections",
        "-",
        r,
    );
    later.file(
        "forced releases of a hold that came after its preemptor's",
        "a fault met the victim's section",
        r,
    );
    untold.file(
        "victims inside when their preemptor entered, not told before",
        "a fault met the victim's section",
        r,
    );
    early.file(
        "honouring victims forced although they answered within the grace",
        "a fault met the victim's section",
        r,
    );
    unsaid.file(
        "victims not told of their loss within a renewal period of the force",
        "a fault met the victim's section",
        r,
    );

    // A loss to a preemptor has its forced release on record.
    let mut unrecorded = Tally::default();
    for h in log.holds.iter().filter(|h| h.reason == "preempted") {
        if !forced.contains_key(&(h.lock.clone(), h.token)) {
            unrecorded.add(false);
        }
    }
    unrecorded.file(
        "holds lost to a preemptor with no forced release on record",
        "-",
        r,
    );

    g.overtaken = aging(run, r);
    r.preempt = Some(g);
}

/// The aging rule on the waits with a priority (the `Y` lines, of the preempt kinds or of a
/// run with `--priorities on`): a waiter of priority `q` served before one of priority `p`
/// that joined earlier must have joined less than `q - p` aging steps (and 200 ms) after it.
/// Returns how many pairs broke it.
pub(crate) fn aging(run: &Run, r: &mut Report) -> usize {
    let mut overtaken_count = 0;
    let mut overtaken = Tally::default();
    let mut by_lock: BTreeMap<&str, Vec<&PriorityWait>> = BTreeMap::new();
    for w in run.preempt.waits.iter().filter(|w| w.got) {
        by_lock.entry(&w.lock).or_default().push(w);
    }
    let step = 1_000_000_000u64;
    let slack = 200_000_000u64;
    for waits in by_lock.values() {
        for x in waits {
            for y in waits {
                // y joined after x, and was served clearly before it.
                if y.start <= x.start || y.end + slack >= x.end {
                    continue;
                }
                let ahead = y.priority.saturating_sub(x.priority) * step;
                if y.start - x.start >= ahead + slack {
                    overtaken_count += 1;
                    overtaken.add(run.fault_near(|_| true, x.start, x.end));
                }
            }
        }
    }
    overtaken.file(
        "waiters served before one that joined more than its aging allowance earlier",
        "a fault met the overtaken wait",
        r,
    );
    overtaken_count
}
