//! `condition`: a notification's path, and waiters that cost nothing while idle.
//!
//! Latency: one thread waits on a condition (client A), another (client B) takes the lock,
//! notifies and releases; measured from the notify call to the waiter holding the lock again
//! (its `wait` returning), 300 times after 20 unmeasured: p50 and p99 next to the same run's
//! ping. The path is the notify script, the release, the message to the waiter, its look at
//! its place, and its acquire.
//!
//! Idle: 1,000 threads wait on one condition; the server's command count over `--idle-secs`
//! (default 3) is what they send while nobody notifies (target 0: the watchdog renews their
//! places every third of the 30 s lease, in batches). Then `notify_all` and the time until
//! every one has held the lock again and released it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use super::{commands_processed, percentile_us, settle, Ctx, Json};

pub(super) fn condition(ctx: &mut Ctx) -> Json {
    let (p50, p99, n) = latency(ctx);
    let (waiters, idle, woken, drain_ms) = idle(ctx);
    let ping = ctx.ping_p50_us;
    eprintln!(
        "condition: notify to waiter holding the lock p50 {p50:.0} us ({:.1}x ping), p99 \
         {p99:.0} us ({n} notifications); {waiters} idle waiters sent {idle:.1} cmds/s \
         (target 0); notify_all woke {woken}, all done in {drain_ms:.0} ms",
        p50 / ping
    );
    ctx.json("condition")
        .num("notify_p50_us", p50)
        .num("notify_p99_us", p99)
        .num2("notify_p50_ping_ratio", p50 / ping)
        .int("notifications", n)
        .int("idle_waiters", waiters)
        .num("idle_cmds_per_s", idle)
        .int("woken", woken)
        .num("drain_ms", drain_ms)
}

/// (p50 µs, p99 µs, samples) from notify to the waiter holding the lock again.
fn latency(ctx: &Ctx) -> (f64, f64, usize) {
    const WARMUP: usize = 20;
    const SAMPLES: usize = 300;
    let waiting = ctx.client();
    let notifying = ctx.client();
    let (back_tx, back) = mpsc::channel::<Instant>();
    let w = waiting.clone();
    let waiter = thread::spawn(move || {
        let lock = w.lock("bench:condition");
        let cond = lock.condition("ready");
        let mut guard = lock.lock().expect("lock");
        for _ in 0..WARMUP + SAMPLES {
            cond.wait(&mut guard).expect("wait");
            back_tx.send(Instant::now()).expect("send");
        }
    });
    let lock = notifying.lock("bench:condition");
    let cond = lock.condition("ready");
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        // The waiter blocks in its wait (it counts in the gauge from its first look on).
        while waiting.metrics().waiting == 0 {
            thread::yield_now();
        }
        let guard = lock.lock().expect("lock");
        let sent = Instant::now();
        assert!(cond.notify_one().expect("notify"), "a waiter");
        drop(guard);
        let held = back.recv().expect("waiter");
        if i >= WARMUP {
            samples.push(held.saturating_duration_since(sent));
        }
    }
    waiter.join().expect("waiter");
    let p50 = percentile_us(&mut samples, 50.0);
    let p99 = percentile_us(&mut samples, 99.0);
    (p50, p99, samples.len())
}

/// (waiters, idle commands/s, woken by notify_all, ms until all held and released).
fn idle(ctx: &mut Ctx) -> (usize, f64, usize, f64) {
    let n = 1_000;
    let client = ctx.client();
    let started = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (c, started) = (client.clone(), Arc::clone(&started));
            thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let lock = c.lock("bench:condition:idle");
                    let mut guard = lock.lock().expect("lock");
                    started.fetch_add(1, Ordering::SeqCst);
                    lock.condition("ready").wait(&mut guard).expect("wait");
                })
                .expect("spawn waiter")
        })
        .collect();
    while client.metrics().waiting < n as u64 {
        thread::sleep(Duration::from_millis(10));
    }
    settle(&mut ctx.raw);
    let before = commands_processed(&mut ctx.raw);
    let t = Instant::now();
    thread::sleep(Duration::from_secs(ctx.idle_secs));
    let after = commands_processed(&mut ctx.raw);
    // INFO does not count itself: the second snapshot includes one of ours, the first.
    let idle = after.saturating_sub(before + 1) as f64 / t.elapsed().as_secs_f64();
    let notifier = ctx.client();
    let lock = notifier.lock("bench:condition:idle");
    let guard = lock.lock().expect("lock");
    let woke = Instant::now();
    let woken = lock.condition("ready").notify_all().expect("notify_all");
    drop(guard);
    for t in threads {
        t.join().expect("waiter");
    }
    (n, idle, woken, woke.elapsed().as_secs_f64() * 1e3)
}
