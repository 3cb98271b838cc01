//! The `watchdog` workload: N locks held with watchdog leases (the default 30 s timeout) by
//! 100 threads over N names, for S seconds (10,000 for 20 s; `--scale`: 100,000 for 60 s);
//! then every key is checked on the server.
//!
//! - `renew_calls_per_tick`: EVALSHA calls in the window (`INFO commandstats`; nothing else
//!   runs scripts then), less the one that fails with NOSCRIPT when the renewal script is
//!   first sent to the server (`noscript_calls`), divided by the ticks in the window. A tick
//!   is one renewal round of every lock, so ticks = renewals in the window
//!   (`Client::metrics().renewals`, one per lock renewed) / N; the window opens and closes
//!   between rounds. The bound is ceil(N / 100) on one node (batches of 100, the default).
//! - `lost`: locks whose key had no TTL left at the end (`PTTL` of every name), or whose guard
//!   reported lost, or counted by the client's `lost_locks`, whichever is most.
//! - `renew_thread_cpu_pct`: CPU time of the `redlatch-watchdog` thread over the window
//!   (`/proc/self/task/<tid>/schedstat`), as a share of one core.
//! - `bytes_per_lock`: heap bytes (malloc's usable sizes, from the bench's counting allocator)
//!   live after N watchdog holds, minus what as many holds cost with an explicit lease (no
//!   watchdog entry; measured on min(N, 10,000) holds), per lock. Two explicit-lease rounds
//!   differ by about 10 bytes per lock, which is the method's precision. `rss_bytes_per_lock`
//!   is the resident-memory growth over the N acquires per lock: everything, guards and
//!   `Lock`s included, less what malloc reused.

use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::memory;
use crate::{command_calls, Ctx, Json};

/// Renewals per script call: `Config`'s default `renew_batch_size`, which the bench keeps.
const BATCH: usize = 100;

pub fn watchdog(ctx: &mut Ctx) -> Json {
    let (locks, secs) = if ctx.scale {
        (100_000, 60)
    } else {
        (10_000, 20)
    };
    let threads = 100;
    let before: Vec<u32> = memory::threads_named("redlatch-watchdog");
    let client = ctx.client();
    let lease = client.config().watchdog_timeout();
    // A thread names itself once it runs: look for a while.
    let deadline = Instant::now() + Duration::from_secs(5);
    let tid = loop {
        let found = memory::threads_named("redlatch-watchdog")
            .into_iter()
            .find(|t| !before.contains(t));
        match found {
            Some(tid) => break tid,
            None if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            None => panic!("the client's watchdog thread (`redlatch-watchdog`) not found"),
        }
    };

    // What a hold costs without the watchdog: the same holds with an explicit lease, on names
    // of the same length (malloc rounds strings up). Once first to open the client's pool
    // connections, then counted.
    let probe = locks.min(10_000);
    Holders::start(&client, "bench:wd-probe", probe, threads, Some(lease)).release();
    memory::start_counting();
    let holders = Holders::start(&client, "bench:wd-probe", probe, threads, Some(lease));
    let probe_bytes = memory::counted();
    memory::stop_counting();
    holders.release();

    let rss_before = memory::rss_mib();
    memory::start_counting();
    let t = Instant::now();
    let holders = Holders::start(&client, "bench:wd-holds", locks, threads, None);
    let acquire_s = t.elapsed().as_secs_f64();
    let held_bytes = memory::counted();
    memory::stop_counting();
    let rss_bytes_per_lock = (memory::rss_mib() - rss_before) * 1048576.0 / locks as f64;
    let per_hold = probe_bytes as f64 / probe as f64;
    let bytes_per_lock = (held_bytes as f64 - per_hold * locks as f64) / locks as f64;

    // The window starts and ends between renewal rounds, so that every script call counted
    // by the server has had its renewals counted by the client.
    between_rounds(&client);
    let calls0 = command_calls(&mut ctx.raw, "evalsha");
    let m0 = client.metrics();
    let cpu0 = memory::thread_cpu_us(tid);
    let t = Instant::now();
    thread::sleep(Duration::from_secs(secs));
    between_rounds(&client);
    let cpu1 = memory::thread_cpu_us(tid);
    let window = t.elapsed().as_secs_f64();
    let m1 = client.metrics();
    let calls1 = command_calls(&mut ctx.raw, "evalsha");

    let renewals = m1.renewals - m0.renewals;
    let ticks = renewals as f64 / locks as f64;
    // A failed EVALSHA is the first renewal finding the script not loaded yet (NOSCRIPT);
    // the client loads it and calls again, once per server.
    let noscript = calls1.1 - calls0.1;
    let calls = calls1.0 - calls0.0 - noscript;
    let calls_per_tick = calls as f64 / ticks;
    let bound = locks.div_ceil(BATCH);
    let cpu_pct = (cpu1 - cpu0) / 1e4 / window;

    let (expired, min_pttl_ms) = check_keys(ctx, &holders.names());
    let m2 = client.metrics();
    let guards_lost = holders.release();
    let lost = expired.max(guards_lost).max(m2.lost_locks as usize);
    eprintln!(
        "watchdog: {locks} locks ({threads} threads, acquired in {acquire_s:.1} s) held {window:.0} \
         s: {calls} renewal calls (+{noscript} NOSCRIPT) over {ticks:.2} ticks = {calls_per_tick:.1} per tick (target \
         <= {bound}), lost {lost} (target 0; {expired} keys gone, {guards_lost} guards lost, \
         lost_locks {}, failed_renewals {}), min PTTL {min_pttl_ms} ms of {} ms, renewal thread \
         {cpu_pct:.2}% of a core (target < 10%), {bytes_per_lock:.0} bytes per lock in the \
         watchdog (target < 200; a hold without it: {per_hold:.0}), rss {rss_bytes_per_lock:.0} \
         bytes per lock in all",
        m2.lost_locks,
        m2.failed_renewals,
        lease.as_millis()
    );
    ctx.json("watchdog")
        .int("locks", locks)
        .int("seconds", secs as usize)
        .num("renew_calls_per_tick", calls_per_tick)
        .int("lost", lost)
        .num2("renew_thread_cpu_pct", cpu_pct)
        .num("bytes_per_lock", bytes_per_lock)
        .int("threads", threads)
        .int("renew_calls", calls as usize)
        .num2("ticks", ticks)
        .int("renew_calls_bound", bound)
        .int("noscript_calls", noscript as usize)
        .int("failed_renewals", m2.failed_renewals as usize)
        .int("lost_locks_metric", m2.lost_locks as usize)
        .int("min_pttl_ms", min_pttl_ms.max(0) as usize)
        .num("hold_bytes_without_watchdog", per_hold)
        .num("rss_bytes_per_lock", rss_bytes_per_lock)
        .num("acquire_s", acquire_s)
}

/// Waits (10 s at most) until no renewal has been counted for 200 ms: the watchdog is between
/// two rounds.
fn between_rounds(client: &redlatch::Client) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = client.metrics().renewals;
    let mut still = Instant::now();
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
        let now = client.metrics().renewals;
        if now != last {
            (last, still) = (now, Instant::now());
        } else if still.elapsed() >= Duration::from_millis(200) {
            return;
        }
    }
}

/// `PTTL` of every name, pipelined: how many keys are gone (or have no expiry), and the
/// smallest TTL left.
fn check_keys(ctx: &mut Ctx, names: &[String]) -> (usize, i64) {
    let (mut gone, mut min) = (0, i64::MAX);
    for chunk in names.chunks(1000) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("PTTL").arg(name);
        }
        let ttls: Vec<i64> = pipe.query(&mut ctx.raw).expect("PTTL");
        gone += ttls.iter().filter(|&&t| t < 0).count();
        min = ttls.into_iter().filter(|&t| t >= 0).fold(min, i64::min);
    }
    (gone, if min == i64::MAX { -1 } else { min })
}

/// Threads holding `locks` locks between them, named `<prefix>:<thread>:<i>`, until
/// [`release`](Self::release).
struct Holders {
    prefix: String,
    per_thread: Vec<usize>,
    threads: Vec<JoinHandle<usize>>,
    end: Arc<Barrier>,
}

impl Holders {
    /// Starts the threads and returns once every lock is held.
    fn start(
        client: &redlatch::Client,
        prefix: &str,
        locks: usize,
        threads: usize,
        lease: Option<Duration>,
    ) -> Holders {
        let per_thread: Vec<usize> = (0..threads)
            .map(|t| locks / threads + usize::from(t < locks % threads))
            .collect();
        let held = Arc::new(Barrier::new(threads + 1));
        let end = Arc::new(Barrier::new(threads + 1));
        let handles = per_thread
            .iter()
            .enumerate()
            .map(|(t, &n)| {
                let (client, held, end) = (client.clone(), Arc::clone(&held), Arc::clone(&end));
                let prefix = prefix.to_owned();
                thread::spawn(move || {
                    let mut guards = Vec::with_capacity(n);
                    for i in 0..n {
                        let lock = client.lock(format!("{prefix}:{t}:{i}"));
                        let lock = match lease {
                            Some(lease) => lock.with_lease(lease),
                            None => lock,
                        };
                        guards.push(lock.lock().expect("lock"));
                    }
                    held.wait();
                    end.wait();
                    let lost = guards.iter().filter(|g| g.is_lost()).count();
                    drop(guards);
                    lost
                })
            })
            .collect();
        held.wait();
        Holders {
            prefix: prefix.to_owned(),
            per_thread,
            threads: handles,
            end,
        }
    }

    fn names(&self) -> Vec<String> {
        let prefix = &self.prefix;
        self.per_thread
            .iter()
            .enumerate()
            .flat_map(|(t, &n)| (0..n).map(move |i| format!("{prefix}:{t}:{i}")))
            .collect()
    }

    /// Lets the threads release their locks; returns how many guards reported lost.
    fn release(self) -> usize {
        self.end.wait();
        self.threads
            .into_iter()
            .map(|t| t.join().expect("holder thread panicked"))
            .sum()
    }
}
