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

/// The settings `deadlock_cost` compares: detection off, on as it is by default (1 s), and on
/// with every wait past 2 ms checked.
const SETTINGS: [(&str, Option<Duration>); 3] = [
    ("off", None),
    ("on", Some(Duration::from_secs(1))),
    ("on_2ms", Some(Duration::from_millis(2))),
];
const COST_ROUNDS: usize = 3;
const COST_RUN: Duration = Duration::from_secs(2);
const COST_THREADS: usize = 4;
/// How long a thread holds the shared lock: the others wait about three times as long, past
/// the 2 ms setting's check.
const COST_HOLD: Duration = Duration::from_millis(1);

/// `deadlock_cost`: what detection costs a contended workload whose waiters hold a lock (the
/// only waits it looks at). Four threads over two clients each take a lock of their own, then
/// a shared one, hold it 1 ms, and release both, for 2 s; the settings of [`SETTINGS`] alternate, three
/// rounds each. The figures are the server's CPU per cycle (`INFO cpu`), the commands it ran
/// per cycle (`INFO stats`: the same with detection on, when no wait lasts a second), and
/// cycles per second.
pub(super) fn deadlock_cost(ctx: &mut Ctx) -> Json {
    let mut cpu = [0.0f64; SETTINGS.len()];
    let mut cycles = [0usize; SETTINGS.len()];
    let mut commands = [0u64; SETTINGS.len()];
    for _ in 0..COST_ROUNDS {
        for (i, (_, after)) in SETTINGS.iter().enumerate() {
            let client = || {
                let config = redlatch::Config::builder(ctx.url.as_str());
                let config = match after {
                    Some(after) => config.deadlock_check_after(*after),
                    None => config.deadlock_detection(false),
                };
                redlatch::Client::new(config.build().expect("config")).expect("client")
            };
            let clients = [client(), client()];
            let before = super::server_cpu_us(&mut ctx.raw);
            let sent_before = super::commands_processed(&mut ctx.raw);
            let end = Instant::now() + COST_RUN;
            let done: usize = thread::scope(|s| {
                let runs: Vec<_> = (0..COST_THREADS)
                    .map(|t| {
                        let client = &clients[t % 2];
                        s.spawn(move || {
                            let own = client.lock(format!("bench:dlc:own:{t}"));
                            let shared = client.lock("bench:dlc:shared");
                            let mut n = 0;
                            while Instant::now() < end {
                                let held = own.lock().expect("own");
                                let inner = shared.lock().expect("shared");
                                thread::sleep(COST_HOLD);
                                drop((inner, held));
                                n += 1;
                            }
                            n
                        })
                    })
                    .collect();
                runs.into_iter().map(|r| r.join().expect("thread")).sum()
            });
            cpu[i] += super::server_cpu_us(&mut ctx.raw) - before;
            // Less the two INFO calls that count.
            commands[i] += super::commands_processed(&mut ctx.raw) - sent_before - 2;
            cycles[i] += done;
        }
    }
    let per_cycle = |i: usize| cpu[i] / cycles[i].max(1) as f64;
    let sent = |i: usize| commands[i] as f64 / cycles[i].max(1) as f64;
    let rate = |i: usize| cycles[i] as f64 / (COST_ROUNDS as f64 * COST_RUN.as_secs_f64());
    eprintln!(
        "deadlock_cost: {COST_THREADS} threads each holding a lock of their own while \
         contending for a shared one, {COST_ROUNDS} alternating rounds of {} s: server CPU per \
         cycle {:.1} us off, {:.1} us on (check after 1 s: ratio {:.3}), {:.1} us checking \
         every wait past 2 ms (ratio {:.3}); commands per cycle {:.2}, {:.2}, {:.2}; cycles/s \
         {:.0}, {:.0}, {:.0}",
        COST_RUN.as_secs(),
        per_cycle(0),
        per_cycle(1),
        per_cycle(1) / per_cycle(0),
        per_cycle(2),
        per_cycle(2) / per_cycle(0),
        sent(0),
        sent(1),
        sent(2),
        rate(0),
        rate(1),
        rate(2),
    );
    let mut json = ctx.json("deadlock_cost").int("threads", COST_THREADS);
    for (i, (name, _)) in SETTINGS.iter().enumerate() {
        json = json
            .num(&format!("server_cpu_us_per_cycle_{name}"), per_cycle(i))
            .num(&format!("cycles_per_s_{name}"), rate(i))
            .num2(&format!("commands_per_cycle_{name}"), sent(i));
    }
    json.num2("ratio_on", per_cycle(1) / per_cycle(0))
        .num2("ratio_on_2ms", per_cycle(2) / per_cycle(0))
}
