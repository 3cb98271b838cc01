//! `deadlock`: how soon a cycle of waits across two clients is broken. Thread A (client A)
//! holds `bench:dl:1` and waits for `bench:dl:2`; once A's wait is recorded, thread B (client
//! B) holds `bench:dl:2` already and waits for `bench:dl:1`, closing the cycle. Measured from
//! B's `lock` call to its `Error::Deadlock`, 20 times, with `deadlock_check_after` at 100 ms:
//! the figure less 100 ms is the check itself (record, walk, confirm). A's wait then gets
//! its lock. The server CPU of a check is `INFO cpu` from B's call to its error (B's attempts,
//! its record, walk and confirmation; A's renewals meanwhile).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::{percentile_us, Ctx, Json};

const CHECK_AFTER: Duration = Duration::from_millis(100);
const ROUNDS: usize = 20;

pub(super) fn deadlock(ctx: &mut Ctx) -> Json {
    let client = || {
        let config = redlatch::Config::builder(ctx.url.as_str())
            .deadlock_check_after(CHECK_AFTER)
            .build()
            .expect("config");
        redlatch::Client::new(config).expect("redlatch client")
    };
    let (a, b) = (client(), client());
    let mut cpu_us = 0.0;
    let mut samples = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let held_b = b.lock("bench:dl:2").lock().expect("lock");
        let (tx, done) = mpsc::channel();
        let waiter = {
            let a = a.clone();
            thread::spawn(move || {
                let held = a.lock("bench:dl:1").lock().expect("lock");
                tx.send(a.owner_id()).expect("send");
                let got = a.lock("bench:dl:2").lock().expect("a gets it");
                drop((got, held));
            })
        };
        let owner = done.recv().expect("owner");
        // A's wait is recorded (after CHECK_AFTER): B's is the younger.
        let record = "redlatch_waits:{bench:dl:2}";
        while !redis::cmd("HEXISTS")
            .arg(record)
            .arg(&owner)
            .query::<bool>(&mut ctx.raw)
            .expect("HEXISTS")
        {
            thread::sleep(Duration::from_millis(2));
        }
        let cpu_before = super::server_cpu_us(&mut ctx.raw);
        let closed = Instant::now();
        let err = b.lock("bench:dl:1").lock().expect_err("b is the victim");
        samples.push(closed.elapsed());
        cpu_us += super::server_cpu_us(&mut ctx.raw) - cpu_before;
        assert!(err.is_deadlock(), "{err}");
        drop(held_b);
        waiter.join().expect("waiter");
    }
    let p50 = percentile_us(&mut samples, 50.0);
    let p99 = percentile_us(&mut samples, 99.0);
    let per_round = cpu_us / ROUNDS as f64;
    eprintln!(
        "deadlock: cycle closed to the victim's error p50 {:.1} ms, p99 {:.1} ms with \
         deadlock_check_after {} ms ({ROUNDS} cycles); server CPU {per_round:.0} us from \
         the call to the error (attempts, record, walk, confirmation)",
        p50 / 1e3,
        p99 / 1e3,
        CHECK_AFTER.as_millis()
    );
    ctx.json("deadlock")
        .num("to_error_p50_ms", p50 / 1e3)
        .num("to_error_p99_ms", p99 / 1e3)
        .int("check_after_ms", CHECK_AFTER.as_millis() as usize)
        .num("server_cpu_us_to_error", per_round)
        .int("cycles", ROUNDS)
}
