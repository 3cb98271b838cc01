//! `election`: how fast leadership changes hands, and how soon observers hear of a leader
//! whose lease ran out.
//!
//! Resign to new leader: a leader (client A) resigns while a campaigner (client B) waits;
//! measured from the `resign` call to B's `campaign` returning, 200 times after 10
//! unmeasured, p50 and p99 next to the same run's ping.
//!
//! Expiry to observers: a dead leader is staged with raw commands (the fenced lock's hash and
//! the leader record, with a 300 ms PEXPIRE and nothing renewing it); a campaigner waits, an
//! observer (client C) watches. Measured from the lease's end to the observer yielding the
//! new leader, 10 times: the campaigner's wait is bounded by the lease it saw, so it tries at
//! the lease's end, wins, and its proclaim wakes the observer.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::{percentile_us, Ctx, Json};

pub(super) fn election(ctx: &mut Ctx) -> Json {
    let (p50, p99, n) = hand_over(ctx);
    let (expiry_p50, expiry_max, m) = expiry(ctx);
    let ping = ctx.ping_p50_us;
    eprintln!(
        "election: resign to new leader p50 {p50:.0} us ({:.1}x ping), p99 {p99:.0} us ({n} \
         hand-overs); lease end to observers hearing the next leader p50 {:.1} ms, max {:.1} \
         ms ({m} expiries)",
        p50 / ping,
        expiry_p50 / 1e3,
        expiry_max / 1e3
    );
    ctx.json("election")
        .num("resign_p50_us", p50)
        .num("resign_p99_us", p99)
        .num2("resign_p50_ping_ratio", p50 / ping)
        .int("hand_overs", n)
        .num("expiry_to_observer_p50_ms", expiry_p50 / 1e3)
        .num("expiry_to_observer_max_ms", expiry_max / 1e3)
        .int("expiries", m)
}

/// (p50 µs, p99 µs, samples) from `resign` to the next leader's `campaign` returning.
fn hand_over(ctx: &Ctx) -> (f64, f64, usize) {
    const WARMUP: usize = 10;
    const SAMPLES: usize = 200;
    let a = ctx.client();
    let b = ctx.client();
    let leader = a.election("bench:election");
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..WARMUP + SAMPLES {
        let leadership = leader.campaign("a").expect("campaign");
        let (tx, won) = mpsc::channel();
        let c = b.clone();
        let campaigner = thread::spawn(move || {
            let leadership = c
                .election("bench:election")
                .campaign("b")
                .expect("campaign");
            tx.send(Instant::now()).expect("send");
            leadership.resign().expect("resign");
        });
        while b.metrics().waiting == 0 {
            thread::yield_now();
        }
        let resigned = Instant::now();
        leadership.resign().expect("resign");
        let at = won.recv().expect("won");
        campaigner.join().expect("campaigner");
        if i >= WARMUP {
            samples.push(at.saturating_duration_since(resigned));
        }
    }
    let p50 = percentile_us(&mut samples, 50.0);
    let p99 = percentile_us(&mut samples, 99.0);
    (p50, p99, samples.len())
}

/// (p50 µs, max µs, samples) from a dead leader's lease end to an observer hearing of the
/// next leader.
fn expiry(ctx: &mut Ctx) -> (f64, f64, usize) {
    const SAMPLES: usize = 10;
    const LEASE: Duration = Duration::from_millis(300);
    let campaigning = ctx.client();
    let watching = ctx.client();
    let name = "bench:election:expiry";
    let mut observer = watching.election(name).observe();
    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        // A leader that died: its hold and record, with nothing renewing them.
        let term = 1_000_000 + i as u64;
        let dead = format!("dead:{i}");
        let _: () = redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(name)
            .arg(&dead)
            .arg(1)
            .ignore()
            .cmd("PEXPIRE")
            .arg(name)
            .arg(LEASE.as_millis() as u64)
            .ignore()
            .cmd("HSET")
            .arg(format!("redlatch_election:{{{name}}}"))
            .arg("term")
            .arg(term)
            .arg("value")
            .arg("dead")
            .arg("owner")
            .arg(&dead)
            .arg("since")
            .arg(0)
            .ignore()
            .query(&mut ctx.raw)
            .expect("stage a dead leader");
        let lease_end = Instant::now() + LEASE;
        let c = campaigning.clone();
        let campaigner = thread::spawn(move || {
            let leadership = c.election(name).campaign("next").expect("campaign");
            leadership.term()
        });
        let term = loop {
            let leader = observer
                .next_timeout(Duration::from_secs(10))
                .expect("observe")
                .expect("a leader within 10 s");
            if leader.value == b"next" {
                break leader.term;
            }
        };
        samples.push(Instant::now().saturating_duration_since(lease_end));
        // The campaigner's leadership was dropped as its thread ended: resigned.
        assert_eq!(campaigner.join().expect("campaigner"), term);
    }
    let p50 = percentile_us(&mut samples, 50.0);
    let max = percentile_us(&mut samples, 100.0);
    (p50, max, samples.len())
}
