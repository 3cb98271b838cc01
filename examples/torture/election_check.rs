//! The checker's rules for kind `election` (see `election.rs`): what the observers' `O` lines
//! say beside the leaders' sections.
//!
//! ```text
//! O proc lock term value at_ns     an observer of process `proc` yielded this leader at `at`
//! ```
//!
//! - each observer's terms rise strictly (never excused);
//! - every leader an observer yields ran: a section of that election has its term as token;
//!   excused by a fault within a lease before it was yielded (a campaign whose proclaim ran
//!   but whose reply was lost fails, and its campaigner releases the lock at once: observers
//!   saw a leader that stepped down before it acted);
//! - an observer misses no leader between the first and the last it yielded: a section's term
//!   in between that it did not yield is excused only by a data loss (the log is lost with
//!   the server's data) between that leader's section and the observer's next yield.
//!
//! The sections themselves (the term as the token of a fenced probe) are checked as every
//! fenced kind's: tokens rising, no stale write accepted.

use std::collections::{BTreeMap, BTreeSet};

use crate::check::{Report, Run, Tally, SLACK_NS};

/// What the rules found, for the report.
#[derive(Clone, Debug, Default)]
pub struct ObserverFindings {
    /// Leaders yielded, summed over observers.
    pub yielded: usize,
    pub out_of_order: usize,
    pub unknown: usize,
    pub missed: usize,
}

/// Applies the rules, filing violations and excused findings in `r`.
pub fn check(run: &Run, r: &mut Report) {
    let mut found = ObserverFindings::default();
    let (mut missed, mut unknown) = (Tally::default(), Tally::default());
    let lease = run.lease_ms * 1_000_000;
    // Per election: each leader's term, and when its section began.
    let mut leaders: BTreeMap<&str, BTreeMap<u64, u64>> = BTreeMap::new();
    for s in &run.sections {
        if let Some(term) = s.token {
            leaders.entry(&s.lock).or_default().insert(term, s.enter);
        }
    }
    for ((process, lock), seen) in &run.observed {
        found.yielded += seen.len();
        let known = leaders.get(lock.as_str());
        for pair in seen.windows(2) {
            if pair[1].0 <= pair[0].0 {
                found.out_of_order += 1;
            }
        }
        let yielded: BTreeSet<u64> = seen.iter().map(|&(term, _)| term).collect();
        for &(term, at) in seen {
            if known.is_some_and(|k| k.contains_key(&term)) {
                continue;
            }
            found.unknown += 1;
            let from = at.saturating_sub(lease + SLACK_NS);
            unknown.add(run.fault_in(|_| true, from, at.saturating_add(SLACK_NS)));
        }
        let (Some(&first), Some(&last)) = (yielded.first(), yielded.last()) else {
            continue;
        };
        let Some(known) = known else { continue };
        for (&term, &entered) in known.range(first..=last) {
            if yielded.contains(&term) {
                continue;
            }
            found.missed += 1;
            // When the observer yielded next after this leader.
            let next = seen
                .iter()
                .find(|&&(t, _)| t > term)
                .map_or(u64::MAX, |&(_, at)| at);
            let excused = run.data_lost(entered.saturating_sub(SLACK_NS), next);
            missed.add(excused);
            if !excused {
                r.violations.push(format!(
                    "observer of process {process} missed leader {term} of `{lock}`"
                ));
            }
        }
    }
    if found.out_of_order > 0 {
        r.violations.push(format!(
            "{} observed leaders not above the one before",
            found.out_of_order
        ));
    }
    unknown.file(
        "observed leaders that never ran",
        "a fault within a lease before: a campaign proclaimed, its reply lost, and released",
        r,
    );
    if missed.excused > 0 {
        r.excused.push(format!(
            "{} leaders an observer missed (a data loss took the log)",
            missed.excused
        ));
    }
    r.observers = Some(found);
}
