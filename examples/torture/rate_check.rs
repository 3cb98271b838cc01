//! The checker's rules for the rate kinds (`rate`, `rate-broken`; see `rate.rs`): what the
//! grants' server times say against the rate.
//!
//! ```text
//! V rate interval_ms                                         run.tsv: every limiter's rate and interval
//! M proc thread limiter permits lo_ms hi_ms start_ns end_ns call  permits admitted (see [`RateCall`])
//! N proc thread limiter start_ns end_ns                       a call found the limiter without its rate: set again
//! ```
//!
//! A grant's server time (ms since the epoch: the clock of the limiter's ZSET scores) lies in
//! `lo_ms..=hi_ms`: one instant for a Rust worker (`Admitted::at`), the span of the call for a
//! Java worker (Redisson scores its entry with the client's clock, read inside the call; on one
//! machine that is the server's). `start_ns` and `end_ns` are the call's CLOCK_MONOTONIC
//! times, as every other kind's.
//!
//! - No window `[t, t + interval)` of server time holds grants totalling more than the rate.
//!   A grant counts where its time lies inside, a span only when all of it does, so that no
//!   grant is placed where it makes a finding. The windows worth looking at start at a
//!   grant's time. A window whose grants' calls met a data loss (a kill: the server restarts
//!   empty and the workers set the rate again, while the permits taken before it still count
//!   here) is excused, and reported with its excess.
//! - The limiter does not drift below its rate: under saturating demand (a call waiting on
//!   the limiter for at least [`SATURATED`] of the interval) and with no fault near (within
//!   the slack, [`Run::fault_near`]), whole intervals more than an interval and a half
//!   second from the run's first and last grants admit at least [`MIN_THROUGHPUT`] of the
//!   rate, summed over every limiter's, and over each limiter's with at least
//!   [`MIN_INTERVALS`] of its own (fewer: measured, not judged: one interval alone may fall
//!   short, as a burst of returned permits may find too few waiters asking, or only some
//!   asking for more than are left). The intervals are laid end to end, each slid on past
//!   faults, so that every stretch between faults longer than an interval and two slacks has
//!   some.
//! - A call finds a limiter without its rate only near a data loss: nothing else removes it.

use std::collections::BTreeMap;

use crate::check::{Report, Run, Tally, DATA_LOSS};

/// The share of its rate a limiter must admit where demand saturates and no fault is near.
/// A waiter asks for up to 3 permits, so that up to 2 may sit unused while every waiter asks
/// for more: at a rate of 20 that alone is 10% (the runner's default rate is 50).
pub const MIN_THROUGHPUT: f64 = 0.9;

/// The share of an interval a limiter must have had a call waiting on it, for the interval's
/// throughput to count: below it, the demand did not saturate the limiter. Permits come back
/// in bursts (one interval after those they replace), and the threads taking them move on at
/// random: a limiter whose waiters all moved on keeps its last permits unused until the next
/// burst, even where calls waited on it for 95% of the interval.
pub const SATURATED: f64 = 0.99;

/// The fewest whole intervals a throughput is judged on.
pub const MIN_INTERVALS: usize = 4;

/// Permits admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub process: u32,
    pub thread: u32,
    pub limiter: String,
    pub permits: u64,
    /// The grant's server time lies in `lo_ms..=hi_ms` (ms since the epoch).
    pub lo_ms: u64,
    pub hi_ms: u64,
    /// The call's start and end (CLOCK_MONOTONIC ns).
    pub start: u64,
    pub end: u64,
    pub call: RateCall,
}

/// The call that took a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateCall {
    /// `acquire` (`a`).
    Acquire,
    /// A wait bounded by `--wait-ms` (`w`).
    Bounded,
    /// Java: `tryAcquire(n)` tried every millisecond; the span is the try that took (`p`).
    Polled,
}

/// A call that found its limiter without a rate (and the worker set it again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reset {
    pub process: u32,
    pub thread: u32,
    pub limiter: String,
    pub start: u64,
    pub end: u64,
}

/// What a rate run logged.
#[derive(Clone, Debug, Default)]
pub struct RateLog {
    /// The rate and the interval in ms (`V`).
    pub config: Option<(u64, u64)>,
    pub grants: Vec<Grant>,
    pub resets: Vec<Reset>,
}

/// What the rules found, for the report.
#[derive(Clone, Debug, Default)]
pub struct RateFindings {
    pub rate: u64,
    pub interval_ms: u64,
    pub grants: usize,
    /// Of those, the grants of Java (Redisson) workers.
    pub java_grants: usize,
    pub permits: u64,
    /// The most permits a window held, and the most where no data loss was near.
    pub max_window: u64,
    pub max_window_no_loss: u64,
    /// Windows (each starting at a grant) over the rate: with no data loss near, and near
    /// one (excused).
    pub over_windows: usize,
    pub over_windows_after_data_loss: usize,
    /// The most permits over the rate in a window near a data loss.
    pub max_excess_after_data_loss: u64,
    /// Whole intervals measured for the throughput, summed over limiters.
    pub intervals: usize,
    /// Permits admitted in them over the rate's worth (`None`: no interval measured).
    pub throughput: Option<f64>,
    /// The lowest ratio of a limiter with at least [`MIN_INTERVALS`] intervals.
    pub lowest_throughput: Option<f64>,
    /// The fewest permits one measured interval admitted.
    pub lowest_interval: Option<u64>,
    /// Calls that found a limiter without its rate, and those with no data loss near.
    pub resets: usize,
    pub unexcused_resets: usize,
}

/// One window `[at_ms, at_ms + interval)` and what it held.
struct Window {
    at_ms: u64,
    permits: u64,
    grants: usize,
    /// The first start and the last end of its grants' calls.
    calls: (u64, u64),
}

/// Every window starting at a grant's time (`grants` of one limiter, sorted by `lo_ms`).
fn windows(grants: &[&Grant], interval: u64) -> Vec<Window> {
    let mut found = Vec::new();
    for (i, g) in grants.iter().enumerate() {
        if i > 0 && grants[i - 1].lo_ms == g.lo_ms {
            continue; // the same window as the grant before
        }
        let (at_ms, until) = (g.lo_ms, g.lo_ms + interval);
        let mut w = Window {
            at_ms,
            permits: 0,
            grants: 0,
            calls: (u64::MAX, 0),
        };
        for h in grants[i..].iter().take_while(|h| h.lo_ms < until) {
            if h.hi_ms < until {
                w.permits += h.permits;
                w.grants += 1;
                w.calls = (w.calls.0.min(h.start), w.calls.1.max(h.end));
            }
        }
        found.push(w);
    }
    found
}

/// CLOCK_REALTIME less CLOCK_MONOTONIC, in ns, as the grants say: the median of each grant's
/// server time (the middle of its ms) less the middle of its call.
fn realtime_offset(grants: &[Grant]) -> Option<i128> {
    let mut offsets: Vec<i128> = grants
        .iter()
        .map(|g| {
            let at = i128::from(g.lo_ms + g.hi_ms) * 500_000 + 500_000;
            at - i128::from(g.start / 2 + g.end / 2)
        })
        .collect();
    offsets.sort_unstable();
    offsets.get(offsets.len() / 2).copied()
}

/// The calls waiting on one limiter (CLOCK_MONOTONIC spans), merged.
struct Demand(Vec<(u64, u64)>);

impl Demand {
    fn new(mut spans: Vec<(u64, u64)>) -> Demand {
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in spans {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Demand(merged)
    }

    /// The share of `[lo, hi)` some call was waiting.
    fn covered(&self, lo: u64, hi: u64) -> f64 {
        let first = self.0.partition_point(|&(_, end)| end <= lo);
        let waited: u64 = self.0[first..]
            .iter()
            .take_while(|&&(start, _)| start < hi)
            .map(|&(start, end)| end.min(hi) - start.max(lo))
            .sum();
        waited as f64 / (hi - lo).max(1) as f64
    }
}

/// Applies the rules, filing violations and excused findings in `r`.
pub fn check(run: &Run, r: &mut Report) {
    let log = &run.rate;
    let Some((rate, interval)) = log.config else {
        r.violations
            .push("a rate kind's run without its rate and interval (no V line)".into());
        return;
    };
    let mut found = RateFindings {
        rate,
        interval_ms: interval,
        grants: log.grants.len(),
        java_grants: (log.grants.iter())
            .filter(|g| run.java_processes.contains(&g.process))
            .count(),
        permits: log.grants.iter().map(|g| g.permits).sum(),
        ..RateFindings::default()
    };
    let mut by_limiter: BTreeMap<&str, Vec<&Grant>> = BTreeMap::new();
    for g in &log.grants {
        by_limiter.entry(&g.limiter).or_default().push(g);
    }
    for list in by_limiter.values_mut() {
        list.sort_by_key(|g| (g.lo_ms, g.hi_ms));
    }

    let near_loss = |lo: u64, hi: u64| run.fault_near(|c| DATA_LOSS.contains(&c), lo, hi);
    for (name, grants) in &by_limiter {
        let (mut over, mut excused) = (Vec::new(), Vec::new());
        for w in windows(grants, interval) {
            let lost = near_loss(w.calls.0, w.calls.1);
            found.max_window = found.max_window.max(w.permits);
            if !lost {
                found.max_window_no_loss = found.max_window_no_loss.max(w.permits);
            }
            if w.permits > rate && lost {
                excused.push(w);
            } else if w.permits > rate {
                over.push(w);
            }
        }
        found.over_windows += over.len();
        found.over_windows_after_data_loss += excused.len();
        let most = |ws: &[Window]| ws.iter().map(|w| w.permits).max().unwrap_or(0);
        if let Some(first) = over.first() {
            r.violations.push(format!(
                "limiter `{name}`: {} windows of {interval} ms admitted more than {rate} \
                 permits (up to {}) with no data loss near; the first at server time {} ms: \
                 {} permits in {} grants",
                over.len(),
                most(&over),
                first.at_ms,
                first.permits,
                first.grants
            ));
        }
        if !excused.is_empty() {
            let excess = most(&excused) - rate;
            found.max_excess_after_data_loss = found.max_excess_after_data_loss.max(excess);
            r.excused.push(format!(
                "limiter `{name}`: {} windows of {interval} ms admitted more than {rate} \
                 permits, up to {} ({excess} over), each near a data loss (the server \
                 restarted empty and the rate was set again; the permits taken before still \
                 count)",
                excused.len(),
                most(&excused)
            ));
        }
    }

    throughput(run, &by_limiter, &mut found, r);

    let mut resets = Tally::default();
    for reset in &log.resets {
        resets.add(near_loss(reset.start, reset.end));
    }
    found.resets = log.resets.len();
    found.unexcused_resets = resets.unexcused;
    resets.file(
        "calls found a limiter without its rate (set again)",
        "a data loss near the call took the config",
        r,
    );
    r.rate = Some(found);
}

/// The throughput rule: whole intervals end to end from the first grant (of any limiter) on,
/// away from both ends, under saturating demand and with no fault near.
fn throughput(
    run: &Run,
    by_limiter: &BTreeMap<&str, Vec<&Grant>>,
    found: &mut RateFindings,
    r: &mut Report,
) {
    let grants = &run.rate.grants;
    let interval = found.interval_ms;
    let (Some(offset), Some(first), Some(last)) = (
        realtime_offset(grants),
        grants.iter().map(|g| g.lo_ms).min(),
        grants.iter().map(|g| g.hi_ms).max(),
    ) else {
        return;
    };
    // Away from the ends: the workers start one after another and stop with calls in flight.
    let margin = interval + 500;
    let (from, to) = (first + margin, last.saturating_sub(margin));
    let mono = |ms: u64| u64::try_from(i128::from(ms) * 1_000_000 - offset).unwrap_or(0);
    let (mut admitted, mut measured) = (0u64, 0usize);
    for (name, list) in by_limiter {
        let mut demand: Vec<(u64, u64)> = list.iter().map(|g| (g.start, g.end)).collect();
        demand.extend(
            (run.rate.resets.iter())
                .filter(|x| x.limiter == *name)
                .map(|x| (x.start, x.end)),
        );
        let demand = Demand::new(demand);
        // Each grant at the middle of its span, sorted.
        let mut at: Vec<(u64, u64)> = list
            .iter()
            .map(|g| ((g.lo_ms + g.hi_ms) / 2, g.permits))
            .collect();
        at.sort_unstable();
        let (mut permits, mut intervals) = (0u64, 0usize);
        let mut t = from;
        while t + interval <= to {
            let (lo, hi) = (mono(t), mono(t + interval));
            if run.fault_near(|_| true, lo, hi) || demand.covered(lo, hi) < SATURATED {
                t += interval.div_ceil(10);
                continue;
            }
            let inside = at.partition_point(|&(ms, _)| ms < t)
                ..at.partition_point(|&(ms, _)| ms < t + interval);
            let n: u64 = at[inside].iter().map(|&(_, p)| p).sum();
            found.lowest_interval = Some(found.lowest_interval.map_or(n, |l| l.min(n)));
            permits += n;
            intervals += 1;
            t += interval;
        }
        admitted += permits;
        measured += intervals;
        if intervals < MIN_INTERVALS {
            continue;
        }
        let ratio = permits as f64 / (intervals as u64 * found.rate) as f64;
        found.lowest_throughput = Some(found.lowest_throughput.map_or(ratio, |l| l.min(ratio)));
        if ratio < MIN_THROUGHPUT {
            r.violations.push(format!(
                "limiter `{name}` admitted {ratio:.3} of its rate ({permits} permits in \
                 {intervals} intervals of {interval} ms) under saturating demand with no fault \
                 near: below {MIN_THROUGHPUT}"
            ));
        }
    }
    found.intervals = measured;
    if measured == 0 {
        return;
    }
    let ratio = admitted as f64 / (measured as u64 * found.rate) as f64;
    found.throughput = Some(ratio);
    if measured >= MIN_INTERVALS && ratio < MIN_THROUGHPUT {
        r.violations.push(format!(
            "the limiters admitted {ratio:.3} of their rate ({admitted} permits in {measured} \
             intervals of {interval} ms) under saturating demand with no fault near: below \
             {MIN_THROUGHPUT}"
        ));
    }
}
