//! `rate`: a rate limiter saturated. [`THREADS`] threads of one client each call
//! `acquire(1)` in a loop on one limiter of [`RATE`] permits per [`INTERVAL`] for [`RUN`];
//! from the server times of the permits admitted (`Admitted::at`): the rate admitted, per
//! whole interval after the first (the first holds the burst of a fresh limiter), and the most
//! admitted in any window of one interval, which the limiter promises is at most the rate.
//! Also what the waiting costs: script calls (EVALSHA) and server CPU per permit admitted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{command_calls, server_cpu_us, Ctx, Json};

const THREADS: usize = 8;
/// Permits per interval.
const RATE: u64 = 200;
const INTERVAL: Duration = Duration::from_secs(1);
/// How long the threads start acquires: a little over 5 intervals, so that 4 whole intervals
/// follow the first.
const RUN: Duration = Duration::from_millis(5_200);

pub(super) fn rate(ctx: &mut Ctx) -> Json {
    let client = ctx.client();
    let limiter = client.rate_limiter("bench:rate");
    let fresh = limiter.try_set_rate(redlatch::RateType::Overall, RATE, INTERVAL);
    assert!(fresh.expect("try_set_rate"), "a new limiter");
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (limiter, stop, barrier) = (limiter.clone(), stop.clone(), barrier.clone());
            thread::spawn(move || {
                let mut admitted = Vec::new();
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let at = limiter.acquire(1).expect("acquire").at;
                    admitted.push(ms(at));
                }
                admitted
            })
        })
        .collect();
    let (calls0, _) = command_calls(&mut ctx.raw, "evalsha");
    let cpu0 = server_cpu_us(&mut ctx.raw);
    barrier.wait();
    thread::sleep(RUN);
    // The server's time when the threads stop starting acquires: the intervals that end
    // before it were saturated throughout.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut ctx.raw).expect("TIME");
    stop.store(true, Ordering::Relaxed);
    let stopped = secs * 1000 + micros / 1000;
    let per_thread: Vec<Vec<u64>> = workers
        .into_iter()
        .map(|w| w.join().expect("rate thread panicked"))
        .collect();
    let cpu = server_cpu_us(&mut ctx.raw) - cpu0;
    let (calls, _) = command_calls(&mut ctx.raw, "evalsha");
    let mut at: Vec<u64> = per_thread.iter().flatten().copied().collect();
    at.sort_unstable();
    let interval = INTERVAL.as_millis() as u64;
    let first = at[0];
    // Whole intervals after the first: [first + k I, first + (k + 1) I), k >= 1, ending by
    // the stop.
    let whole: Vec<usize> = (1..)
        .map(|k| first + k * interval)
        .take_while(|start| start + interval <= stopped)
        .map(|start| {
            at.iter()
                .filter(|&&t| t >= start && t < start + interval)
                .count()
        })
        .collect();
    assert!(
        !whole.is_empty(),
        "the run holds a whole interval after the first"
    );
    let per_interval = whole.iter().sum::<usize>() as f64 / whole.len() as f64;
    let max_window = max_in_window(&at, interval);
    let counts: Vec<usize> = per_thread.iter().map(Vec::len).collect();
    let permits = at.len() as f64;
    let calls_per_permit = (calls - calls0) as f64 / permits;
    let cpu_per_permit = cpu / permits;
    eprintln!(
        "rate: {THREADS} threads on {RATE} per {interval} ms: {per_interval:.1} admitted per \
         interval over {} whole intervals after the first ({:?}); at most {max_window} in any \
         {interval} ms (target <= {RATE}); {} admitted in all, per thread {}..{}; {:.2} \
         script calls and {:.1} us server CPU per permit",
        whole.len(),
        whole,
        at.len(),
        counts.iter().min().unwrap_or(&0),
        counts.iter().max().unwrap_or(&0),
        calls_per_permit,
        cpu_per_permit,
    );
    ctx.json("rate")
        .int("threads", THREADS)
        .int("rate", RATE as usize)
        .int("interval_ms", interval as usize)
        .num2("admitted_per_interval", per_interval)
        .int("whole_intervals", whole.len())
        .int("min_per_interval", whole.iter().copied().min().unwrap_or(0))
        .int("max_per_interval", whole.iter().copied().max().unwrap_or(0))
        .int("max_in_any_window", max_window)
        .int("admitted", at.len())
        .int("per_thread_min", counts.iter().copied().min().unwrap_or(0))
        .int("per_thread_max", counts.iter().copied().max().unwrap_or(0))
        .num2("script_calls_per_permit", calls_per_permit)
        .num("server_cpu_us_per_permit", cpu_per_permit)
}

/// The most of the sorted times `at` in any window `[t, t + interval)`.
fn max_in_window(at: &[u64], interval: u64) -> usize {
    let mut end = 0;
    let mut most = 0;
    for (start, &t) in at.iter().enumerate() {
        while end < at.len() && at[end] < t + interval {
            end += 1;
        }
        most = most.max(end - start);
    }
    most
}

/// A server time in ms since the epoch.
fn ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
