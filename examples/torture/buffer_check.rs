//! The checker's rules for kind `condition` (see `condition.rs`): what the `B`, `W` and `R`
//! lines of a run say about its bounded buffers.
//!
//! ```text
//! B proc thread lock put|take item at_ns len     an item put (len: the buffer after it) or taken
//! W proc thread lock p|c start_ns end_ns n|t|e   a producer's (p) or consumer's (c) condition wait:
//!                                                 notified, timed out, or failed
//! R lock item                                     run.tsv: an item left in the buffer at the end
//! ```
//!
//! - every item put is taken once or left at the end: one never taken nor left is lost, one
//!   taken twice (or taken and left) doubled, one taken or left but never put a phantom.
//!   The buffers live on the resource server, never faulted, and pushes and pops are atomic
//!   there: none of these is excused;
//! - no put leaves more than the capacity (`Q`) in the buffer: excused when a fault met the
//!   two leases before it (two producers overlapping under a lost hold);
//! - no consumer waits while an item sits unclaimed for two leases (a notification a dead
//!   waiter held goes on within a lease and a third): excused when a fault met that time.

use std::collections::BTreeMap;

use crate::check::{Report, Run, Tally, SLACK_NS};

/// What happened on one lock's buffer.
#[derive(Clone, Debug, Default)]
pub struct BufferLog {
    /// (item, when, the buffer's length after it).
    pub puts: Vec<(String, u64, u64)>,
    /// (item, when).
    pub takes: Vec<(String, u64)>,
    /// Consumers' waits: (start, end).
    pub consumer_waits: Vec<(u64, u64)>,
    /// Items in the buffer at the end.
    pub left: Vec<String>,
}

/// What the rules found, for the report.
#[derive(Clone, Debug, Default)]
pub struct BufferFindings {
    pub puts: usize,
    pub takes: usize,
    pub lost: usize,
    pub doubled: usize,
    pub phantom: usize,
    pub overflows: usize,
    pub stalls: usize,
}

/// Applies the rules to every buffer of `run`, filing violations and excused findings in `r`.
pub fn check(run: &Run, r: &mut Report) {
    let mut found = BufferFindings::default();
    let (mut overflows, mut stalls) = (Tally::default(), Tally::default());
    let lease = run.lease_ms * 1_000_000;
    let capacity = u64::from(run.permits.unwrap_or(1));
    for (lock, log) in &run.buffers {
        found.puts += log.puts.len();
        found.takes += log.takes.len();
        // item -> (put at, times taken or left, first taken at)
        let mut items: BTreeMap<&str, (Option<u64>, usize, u64)> = BTreeMap::new();
        for (item, at, len) in &log.puts {
            items.entry(item).or_insert((None, 0, u64::MAX)).0 = Some(*at);
            if *len > capacity {
                found.overflows += 1;
                overflows.add(run.fault_in(|_| true, at.saturating_sub(2 * lease), *at));
            }
        }
        for (item, at) in &log.takes {
            let e = items.entry(item).or_insert((None, 0, u64::MAX));
            e.1 += 1;
            e.2 = e.2.min(*at);
        }
        for item in &log.left {
            items.entry(item).or_insert((None, 0, u64::MAX)).1 += 1;
        }
        for (item, &(put, times, taken)) in &items {
            match (put, times) {
                (None, _) => found.phantom += 1,
                (Some(_), 0) => found.lost += 1,
                (Some(_), 1) => {}
                (Some(_), _) => found.doubled += 1,
            }
            let Some(put) = put else { continue };
            let bound = 2 * lease + SLACK_NS;
            if taken.saturating_sub(put) < bound {
                continue;
            }
            // Sat unclaimed for two leases: was a consumer waiting all that time?
            let stalled = log.consumer_waits.iter().find(|&&(start, end)| {
                let (from, to) = (start.max(put), end.min(taken));
                to >= from.saturating_add(bound)
            });
            if let Some(&(start, end)) = stalled {
                found.stalls += 1;
                let (from, to) = (start.max(put), end.min(taken));
                let excused = run.fault_in(|_| true, from.saturating_sub(lease), to);
                stalls.add(excused);
                if !excused {
                    r.violations.push(format!(
                        "lock `{lock}`: item {item} sat unclaimed {} ms while a consumer waited",
                        (to - from) / 1_000_000
                    ));
                }
            }
        }
    }
    for (n, what) in [
        (
            found.lost,
            "items put and never taken nor left in the buffer",
        ),
        (found.doubled, "items taken twice"),
        (found.phantom, "items taken that were never put"),
    ] {
        if n > 0 {
            r.violations.push(format!("{n} {what}"));
        }
    }
    overflows.file(
        "puts that left the buffer over its capacity",
        "a fault met the two leases before: producers overlapping under a lost hold",
        r,
    );
    if stalls.excused > 0 {
        r.excused.push(format!(
            "{} items sat unclaimed for two leases while a consumer waited (a fault met that \
             time)",
            stalls.excused
        ));
    }
    r.buffers = Some(found);
}
