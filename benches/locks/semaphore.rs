//! `semaphore`: one thread takes a permit of a plain semaphore and gives it back (a guard:
//! acquire and release, two round trips), alternating in rounds with Redisson's own two
//! scripts (`RedissonSemaphore.tryAcquireAsync` and `releaseAsync`, as its Java sends them)
//! on a bare connection. What our scripts add (the receipt of an acquire, the release's
//! latch, the generation each checks) shows as server CPU per cycle; what the client adds (the
//! guard's watchdog entry) as client CPU.

use std::time::{Duration, Instant};

use super::{memory, percentile_us, raw_connection, server_cpu_us, Ctx, Json};

/// `RedissonSemaphore.tryAcquireAsync(1)`: take if enough, as Redisson sends it.
const REDISSON_TRY_ACQUIRE: &str = "local value = redis.call('get', KEYS[1]); \
    if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then \
    local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";
/// `RedissonSemaphore.releaseAsync(1)`: add and publish the count.
const REDISSON_RELEASE: &str = "local value = redis.call('incrby', KEYS[1], ARGV[1]); \
    redis.call(ARGV[2], KEYS[2], value);";

const ROUNDS: usize = 5;
const PER_ROUND: usize = 1000;

pub(super) fn semaphore(ctx: &mut Ctx) -> Json {
    let client = ctx.client();
    let sem = client.semaphore("bench:sem");
    sem.try_set_permits(1).expect("set up");
    let mut raw = raw_connection(&ctx.url);
    let _: () = redis::cmd("SET")
        .arg("bench:sem:raw")
        .arg(1)
        .query(&mut raw)
        .expect("raw set up");
    let acquire = redis::Script::new(REDISSON_TRY_ACQUIRE);
    let release = redis::Script::new(REDISSON_RELEASE);
    let mut raw_cycle = || {
        let got: i64 = acquire
            .key("bench:sem:raw")
            .arg(1)
            .invoke(&mut raw)
            .expect("raw acquire");
        assert_eq!(got, 1, "the raw permit is free");
        let _: () = release
            .key("bench:sem:raw")
            .key("redisson_sc:{bench:sem:raw}")
            .arg(1)
            .arg("publish")
            .invoke(&mut raw)
            .expect("raw release");
    };
    let cycle = || {
        let permit = sem.acquire(1).expect("acquire");
        permit.release().expect("release");
    };
    for _ in 0..200 {
        cycle();
        raw_cycle();
    }
    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
    let (mut client_cpu, mut server_ours, mut server_raw) = (0.0, 0.0, 0.0);
    let mut lat = Vec::with_capacity(ROUNDS * PER_ROUND);
    for _ in 0..ROUNDS {
        let server0 = server_cpu_us(&mut ctx.raw);
        let cpu0 = memory::own_cpu_us();
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            let t = Instant::now();
            cycle();
            lat.push(t.elapsed());
        }
        ours += start.elapsed();
        client_cpu += memory::own_cpu_us() - cpu0;
        let server1 = server_cpu_us(&mut ctx.raw);
        server_ours += server1 - server0;
        let start = Instant::now();
        for _ in 0..PER_ROUND {
            raw_cycle();
        }
        theirs += start.elapsed();
        server_raw += server_cpu_us(&mut ctx.raw) - server1;
    }
    let cycles = (ROUNDS * PER_ROUND) as f64;
    let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
    let (p50, p99) = (percentile_us(&mut lat, 50.0), percentile_us(&mut lat, 99.0));
    let (server_ours, server_raw) = (server_ours / cycles, server_raw / cycles);
    eprintln!(
        "semaphore: acquire + release p50 {p50:.1} us ({:.2}x ping), p99 {p99:.1} us; {:.1} us \
         per cycle vs {:.1} us with Redisson's scripts raw: ratio {ratio:.3}; server CPU per \
         cycle {server_ours:.1} us vs {server_raw:.1} us raw ({:.2}x); client CPU {:.1} us",
        p50 / ctx.ping_p50_us,
        ours.as_secs_f64() * 1e6 / cycles,
        theirs.as_secs_f64() * 1e6 / cycles,
        server_ours / server_raw,
        client_cpu / cycles,
    );
    ctx.json("semaphore")
        .num("cycles_per_s", cycles / ours.as_secs_f64())
        .num("raw_cycles_per_s", cycles / theirs.as_secs_f64())
        .num2("raw_ratio", ratio)
        .num("p50_us", p50)
        .num("p99_us", p99)
        .num("server_cpu_us_per_cycle", server_ours)
        .num("raw_server_cpu_us_per_cycle", server_raw)
        .num("client_cpu_us_per_cycle", client_cpu / cycles)
}
