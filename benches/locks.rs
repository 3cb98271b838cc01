//! Lock benchmarks against a private `redis-server`.
//!
//! `cargo bench --bench locks [WORKLOAD...] [--scale]` prints one JSON line per workload to
//! stdout (every figure next to the ping round trip measured in the same run) and a one-line
//! human summary per workload to stderr. Cargo takes one bare name itself (`cargo bench --bench
//! locks solo`); more names or flags go after `--`: `cargo bench --bench locks -- waiters
//! --scale`. `--idle-secs=N` makes `waiters` count idle commands for N s instead of 3;
//! `--threads=4,64` runs `throughput` at those thread counts only; `--server-first` runs its
//! client threads 10 nice levels below the server, which then runs whenever it has work (on one
//! machine, the nearest to a server on a host of its own).
//! Workloads: solo, handoff, fair_handoff, handoff_scale, waiters, watchdog, throughput,
//! condition, election, deadlock, deadlock_cost, semaphore, lock_set, family, rate. To add
//! one: a `fn(&mut Ctx) -> Json`, its name in `WORKLOADS` and a match arm in `main`.

#[path = "locks/condition.rs"]
mod condition;
#[path = "locks/deadlock.rs"]
mod deadlock;
#[path = "locks/election.rs"]
mod election;
#[path = "locks/family.rs"]
mod family;
#[path = "locks/lock_set.rs"]
mod lock_set;
#[path = "locks/memory.rs"]
mod memory;
#[path = "locks/pair.rs"]
mod pair;
#[path = "locks/rate.rs"]
mod rate;
#[path = "locks/semaphore.rs"]
mod semaphore;
#[path = "locks/throughput.rs"]
mod throughput;
#[path = "locks/watchdog.rs"]
mod watchdog;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use memory::rss_mib;

#[global_allocator]
static ALLOCATOR: memory::Counting = memory::Counting;

/// Every workload, in the order a bare `cargo bench --bench locks` runs them.
const WORKLOADS: &[&str] = &[
    "solo",
    "handoff",
    "fair_handoff",
    "handoff_scale",
    "waiters",
    "watchdog",
    "throughput",
    "condition",
    "election",
    "deadlock",
    "deadlock_cost",
    "semaphore",
    "lock_set",
    "family",
    "rate",
];

fn main() {
    let mut scale = false;
    let mut idle_secs = 3;
    let mut threads = None;
    let mut rounds = None;
    let mut server_first = false;
    let mut names = Vec::new();
    for arg in std::env::args().skip(1) {
        if arg == "--scale" {
            scale = true;
        } else if let Some(secs) = arg.strip_prefix("--idle-secs=") {
            idle_secs = secs.parse().expect("--idle-secs=<whole seconds>");
        } else if let Some(list) = arg.strip_prefix("--threads=") {
            let parse = |n: &str| n.parse().expect("--threads=<count>,<count>,...");
            threads = Some(list.split(',').map(parse).collect());
        } else if let Some(n) = arg.strip_prefix("--rounds=") {
            let n: usize = n.parse().expect("--rounds=<count>");
            rounds = Some(n.max(1));
        } else if arg == "--server-first" {
            server_first = true;
        } else if !arg.starts_with("--") {
            names.push(arg); // other `--` flags (cargo passes `--bench`) are ignored
        }
    }
    if names.is_empty() {
        names = WORKLOADS.iter().map(|s| s.to_string()).collect();
    }
    if let Some(bad) = names.iter().find(|n| !WORKLOADS.contains(&n.as_str())) {
        panic!("unknown workload `{bad}`; known: {}", WORKLOADS.join(", "));
    }

    let server = Server::start();
    let mut raw = server.connect();
    let ping_p50_us = ping_p50_us(&mut raw);
    let mut ctx = Ctx {
        url: server.url.clone(),
        ping_p50_us,
        raw,
        scale,
        idle_secs,
        threads,
        rounds,
        server_first,
        callgrind: server.callgrind(),
    };
    eprintln!("ping p50 {ping_p50_us:.1} us (5000 PINGs, one connection)");
    for name in &names {
        let json = match name.as_str() {
            "solo" => solo(&mut ctx),
            "handoff" => handoff(&ctx),
            "fair_handoff" => fair_handoff(&ctx),
            "handoff_scale" => handoff_scale(&mut ctx),
            "waiters" => waiters(&mut ctx),
            "watchdog" => watchdog::watchdog(&mut ctx),
            "throughput" => throughput::throughput(&mut ctx),
            "condition" => condition::condition(&mut ctx),
            "election" => election::election(&mut ctx),
            "deadlock" => deadlock::deadlock(&mut ctx),
            "deadlock_cost" => deadlock::deadlock_cost(&mut ctx),
            "semaphore" => semaphore::semaphore(&mut ctx),
            "lock_set" => lock_set::lock_set(&mut ctx),
            "family" => family::family(&mut ctx),
            "rate" => rate::rate(&mut ctx),
            _ => unreachable!("checked above"),
        };
        println!("{}", json.finish());
    }
}

/// Whether the server is to run under callgrind (`BENCH_CALLGRIND=1`).
fn callgrind_wanted() -> bool {
    std::env::var("BENCH_CALLGRIND").is_ok_and(|v| v == "1")
}

/// A bare connection to the server at `url`, for the raw sides.
fn raw_connection(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("raw connection")
}

/// What every workload gets: the server's URL, the ping baseline and a raw connection.
struct Ctx {
    url: String,
    ping_p50_us: f64,
    raw: redis::Connection,
    scale: bool,
    /// How long `waiters` counts commands while its threads wait (`--idle-secs=N`, default
    /// 3). Past the lease (30 s) it sees each waiter's bounded re-check.
    idle_secs: u64,
    /// The thread counts `throughput` runs (`--threads=1,4`); its own list when `None`.
    threads: Option<Vec<usize>>,
    /// How many rounds of each side `throughput` alternates (`--rounds=N`); its own count
    /// when `None`.
    rounds: Option<usize>,
    /// `throughput`'s client threads run below the server's priority (`--server-first`).
    server_first: bool,
    /// With `BENCH_CALLGRIND=1` the server runs under valgrind's callgrind: its process id
    /// and the folder of its dumps, for `family`'s count of the server's instructions.
    callgrind: Option<(u32, PathBuf)>,
}

impl Ctx {
    /// A client with default settings, but for `batch_lanes` when `BENCH_BATCH_LANES` is set,
    /// deadlock detection off when `BENCH_DEADLOCK=off`, and history on when
    /// `BENCH_HISTORY=on`.
    fn client(&self) -> redlatch::Client {
        let mut config = redlatch::Config::builder(self.url.as_str());
        if let Ok(lanes) = std::env::var("BENCH_BATCH_LANES") {
            config = config.batch_lanes(lanes.parse().expect("BENCH_BATCH_LANES=<count>"));
        }
        // `BENCH_DEADLOCK=off`: the clients do not look for deadlocks (on by default).
        if std::env::var("BENCH_DEADLOCK").is_ok_and(|v| v == "off") {
            config = config.deadlock_detection(false);
        }
        // `BENCH_HISTORY=on`: the clients record their history (off by default).
        if std::env::var("BENCH_HISTORY").is_ok_and(|v| v == "on") {
            config = config.history(true);
        }
        redlatch::Client::new(config.build().expect("config")).expect("redlatch client")
    }

    /// A JSON line already holding `workload` and `ping_p50_us`.
    fn json(&self, workload: &str) -> Json {
        Json(format!(
            "{{\"workload\":\"{workload}\",\"ping_p50_us\":{:.1}",
            self.ping_p50_us
        ))
    }
}

/// 1 thread, 5000 lock+unlock cycles on an uncontended key. Also where a cycle's time goes:
/// this thread's CPU time per cycle (`/proc/thread-self/schedstat`; the client's background
/// threads are idle here) and the server's (`INFO cpu`), next to the two round trips. The
/// cycles run in 5 rounds of 1000, alternating with rounds of the raw cycle (Redisson's two
/// scripts on a bare connection, see `throughput.rs`): `raw_ratio` is redlatch's time per
/// cycle over raw's (target <= 1.00). Then the same with an explicit lease (no watchdog):
/// `lease_raw_ratio`.
fn solo(ctx: &mut Ctx) -> Json {
    let client = ctx.client();
    let mut raw = throughput::RawCycle::new(raw_connection(&ctx.url), "bench:solo:raw", "raw:1");
    let watchdog = Solo::run(ctx, &client.lock("bench:solo"), &mut raw);
    let lease = client
        .lock("bench:solo:lease")
        .with_lease(Duration::from_secs(30));
    let leased = Solo::run(ctx, &lease, &mut raw);
    eprintln!(
        "solo: p50 {:.1} us = {:.2}x ping (target <= 2.3x), p99 {:.1} us; per cycle (2 round \
         trips) {:.1} us client CPU, {:.1} us server CPU; {:.1} us per cycle vs {:.1} us raw: \
         ratio {:.3} (target <= 1.00); heap blocks allocated per cycle {:.1} ({:.1} raw)",
        watchdog.p50,
        watchdog.p50 / ctx.ping_p50_us,
        watchdog.p99,
        watchdog.client_cpu,
        watchdog.server_cpu,
        watchdog.us_per_cycle(watchdog.ours),
        watchdog.us_per_cycle(watchdog.theirs),
        watchdog.ratio(),
        watchdog.allocs_ours,
        watchdog.allocs_raw,
    );
    eprintln!(
        "solo: with an explicit lease: p50 {:.1} us; {:.1} us per cycle vs {:.1} us raw: ratio \
         {:.3} (target <= 1.00); {:.1} us client CPU per cycle",
        leased.p50,
        leased.us_per_cycle(leased.ours),
        leased.us_per_cycle(leased.theirs),
        leased.ratio(),
        leased.client_cpu,
    );
    ctx.json("solo")
        .num(
            "cycles_per_s",
            Solo::CYCLES as f64 / watchdog.ours.as_secs_f64(),
        )
        .num(
            "raw_cycles_per_s",
            Solo::CYCLES as f64 / watchdog.theirs.as_secs_f64(),
        )
        .num2("raw_ratio", watchdog.ratio())
        .num("p50_us", watchdog.p50)
        .num("p99_us", watchdog.p99)
        .num("client_cpu_us_per_cycle", watchdog.client_cpu)
        .num("server_cpu_us_per_cycle", watchdog.server_cpu)
        .num("allocs_per_cycle", watchdog.allocs_ours)
        .num("raw_allocs_per_cycle", watchdog.allocs_raw)
        .num2("lease_raw_ratio", leased.ratio())
        .num("lease_p50_us", leased.p50)
        .num("lease_client_cpu_us_per_cycle", leased.client_cpu)
}

/// One lock's `solo` rounds, alternating with the raw cycle's.
struct Solo {
    ours: Duration,
    theirs: Duration,
    p50: f64,
    p99: f64,
    /// Per cycle, in µs.
    client_cpu: f64,
    server_cpu: f64,
    allocs_ours: f64,
    allocs_raw: f64,
}

impl Solo {
    const ROUNDS: usize = 5;
    const PER_ROUND: usize = 1000;
    const CYCLES: usize = Self::ROUNDS * Self::PER_ROUND;

    fn run(ctx: &mut Ctx, lock: &redlatch::Lock, raw: &mut throughput::RawCycle) -> Solo {
        for _ in 0..200 {
            drop(lock.lock().expect("lock"));
            raw.cycle();
        }
        let mut lat = Vec::with_capacity(Self::CYCLES);
        let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
        let (mut client_cpu, mut server_cpu) = (0.0, 0.0);
        for _ in 0..Self::ROUNDS {
            let server0 = server_cpu_us(&mut ctx.raw);
            let cpu0 = memory::own_cpu_us();
            let start = Instant::now();
            for _ in 0..Self::PER_ROUND {
                let t = Instant::now();
                drop(lock.lock().expect("lock"));
                lat.push(t.elapsed());
            }
            ours += start.elapsed();
            client_cpu += memory::own_cpu_us() - cpu0;
            server_cpu += server_cpu_us(&mut ctx.raw) - server0;
            let start = Instant::now();
            for _ in 0..Self::PER_ROUND {
                raw.cycle();
            }
            theirs += start.elapsed();
        }
        // Heap blocks allocated per cycle (by any thread: the others are idle), each side
        // alone.
        let allocs = |cycle: &mut dyn FnMut()| {
            memory::start_counting();
            for _ in 0..Self::PER_ROUND {
                cycle();
            }
            let blocks = memory::blocks_allocated();
            memory::stop_counting();
            blocks as f64 / Self::PER_ROUND as f64
        };
        Solo {
            allocs_ours: allocs(&mut || drop(lock.lock().expect("lock"))),
            allocs_raw: allocs(&mut || raw.cycle()),
            ours,
            theirs,
            p50: percentile_us(&mut lat, 50.0),
            p99: percentile_us(&mut lat, 99.0),
            client_cpu: client_cpu / Self::CYCLES as f64,
            server_cpu: server_cpu / Self::CYCLES as f64,
        }
    }

    fn ratio(&self) -> f64 {
        self.ours.as_secs_f64() / self.theirs.as_secs_f64()
    }

    fn us_per_cycle(&self, total: Duration) -> f64 {
        total.as_secs_f64() * 1e6 / Self::CYCLES as f64
    }
}

/// 8 threads x 100 cycles of {lock; hold 1 ms; unlock; pause 1 ms} on one plain lock.
fn handoff(ctx: &Ctx) -> Json {
    let make = |c: &redlatch::Client, n: &str| c.lock(n);
    let mut raw = redis::Client::open(ctx.url.as_str())
        .and_then(|c| c.get_connection())
        .expect("a raw connection");
    let cpu_before = server_cpu_us(&mut raw);
    let h = Handoff::run(ctx, "bench:handoff", make);
    let cycles = (Handoff::THREADS * Handoff::CYCLES) as f64;
    let server_cpu = (server_cpu_us(&mut raw) - cpu_before) / cycles;
    eprintln!("handoff: server CPU {server_cpu:.1} us per cycle");
    let json = h
        .report(
            ctx,
            "handoff",
            "target >= 80%",
            "target >= 650",
            "barging, no target",
        )
        .num("server_cpu_us_per_cycle", server_cpu);
    with_pair(
        ctx,
        "handoff",
        json,
        pair::pair(ctx, "bench:handoff:pair", make),
    )
}

/// `json` with the one-holder, one-waiter hand-overs (see `pair.rs`), also printed.
fn with_pair(ctx: &Ctx, workload: &str, json: Json, p: pair::Pair) -> Json {
    eprintln!(
        "{workload}: one holder, one waiter: p50 {:.1} us inside one client ({:.2}x the bare \
         floor, target <= 0.6), {:.1} us between two clients ({:.2}x, target <= 1.1); bare \
         floor {:.1} us = {:.2}x ping",
        p.in_client_p50,
        p.in_client_p50 / p.floor_p50,
        p.between_p50,
        p.between_p50 / p.floor_p50,
        p.floor_p50,
        p.floor_p50 / ctx.ping_p50_us,
    );
    json.num("pair_floor_p50_us", p.floor_p50)
        .num("pair_in_client_p50_us", p.in_client_p50)
        .num("pair_in_client_p99_us", p.in_client_p99)
        .num2("pair_in_client_of_floor", p.in_client_p50 / p.floor_p50)
        .num("pair_between_clients_p50_us", p.between_p50)
        .num("pair_between_clients_p99_us", p.between_p99)
        .num2("pair_between_clients_of_floor", p.between_p50 / p.floor_p50)
}

/// The `handoff` workload on a fair lock: every cycle should go to another thread, in order.
fn fair_handoff(ctx: &Ctx) -> Json {
    let h = Handoff::run(
        ctx,
        "bench:fair_handoff",
        |c: &redlatch::Client, n: &str| c.fair_lock(n),
    );
    let json = h.report(ctx, "fair_handoff", "target 100%", "no target", "target 0");
    let p = pair::pair(ctx, "bench:fair_handoff:pair", |c, n| c.fair_lock(n));
    with_pair(ctx, "fair_handoff", json, p)
}

/// `handoff` with 1,000 threads on one plain lock, all waiting on it from the start: each runs
/// 2 cycles, so some 999 threads wait at every handoff. Runs the 8-thread `handoff` first, so
/// that the two p50s come from the same run (target: within 1.5x).
fn handoff_scale(ctx: &mut Ctx) -> Json {
    const THREADS: usize = 1000;
    let small = Handoff::run(
        ctx,
        "bench:handoff_scale:8",
        |c: &redlatch::Client, n: &str| c.lock(n),
    );
    let big = Handoff::run_blocked(ctx, "bench:handoff_scale", THREADS, 2);
    let ratio = big.p50_us / small.p50_us;
    let waited_ratio = big.waited_p50_us / small.waited_p50_us;
    eprintln!(
        "handoff_scale: {THREADS} threads: p50 {:.1} us, p99 {:.1} us, handoffs {}/{}, {:.0} \
         cycles/s; 8 threads: p50 {:.1} us; ratio {ratio:.2} (target <= 1.5); to a thread \
         already waiting: {:.1} us ({} handoffs) vs {:.1} us ({}), ratio {waited_ratio:.2}",
        big.p50_us,
        big.p99_us,
        big.handoffs,
        big.handoff_slots(),
        big.cycles_per_s,
        small.p50_us,
        big.waited_p50_us,
        big.waited,
        small.waited_p50_us,
        small.waited,
    );
    big.json(ctx, "handoff_scale")
        .int("baseline_threads", small.threads)
        .num("baseline_handoff_p50_us", small.p50_us)
        .num("baseline_handoff_p99_us", small.p99_us)
        .num2("p50_ratio", ratio)
        .int("baseline_waited_handoffs", small.waited)
        .num("baseline_waited_handoff_p50_us", small.waited_p50_us)
        .num2("waited_p50_ratio", waited_ratio)
}

/// Waits until the server is quiet: no command but our own `INFO` for 3 polls 100 ms apart
/// (every waiter has made its attempts and blocked), or 10 s.
fn settle(raw: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut quiet) = (commands_processed(raw), 0);
    while quiet < 3 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
        let now = commands_processed(raw);
        quiet = if now <= last + 1 { quiet + 1 } else { 0 };
        last = now;
    }
}

/// One cycle of a handoff thread: when it called `lock()`, when `lock()` returned and when it
/// started to unlock, and which thread it was.
struct Cycle {
    start: Instant,
    grant: Instant,
    release: Instant,
    thread: usize,
}

/// `n` cycles of {lock; hold 1 ms; unlock; pause 1 ms} on `lock` by handoff thread `thread`;
/// `started` is counted up just before the first `lock()`.
fn cycles(
    lock: &redlatch::Lock,
    thread: usize,
    n: usize,
    started: Option<&AtomicUsize>,
) -> Vec<Cycle> {
    let mut cycles = Vec::with_capacity(n);
    for i in 0..n {
        if let (0, Some(started)) = (i, started) {
            started.fetch_add(1, Ordering::SeqCst);
        }
        let start = Instant::now();
        let guard = lock.lock().expect("lock");
        let grant = Instant::now();
        thread::sleep(Duration::from_millis(1));
        let release = Instant::now();
        guard.unlock().expect("unlock");
        cycles.push(Cycle {
            start,
            grant,
            release,
            thread,
        });
        thread::sleep(Duration::from_millis(1));
    }
    cycles
}

/// The figures of one handoff run (8 threads x 100 cycles on one key, or see
/// [`Handoff::run_blocked`]).
struct Handoff {
    threads: usize,
    cycles: usize,
    cycles_per_s: f64,
    handoffs: usize,
    p50_us: f64,
    p99_us: f64,
    /// Handoffs to a thread that was waiting when the release began, and their p50.
    waited: usize,
    waited_p50_us: f64,
    fifo_violations: usize,
}

impl Handoff {
    const THREADS: usize = 8;
    const CYCLES: usize = 100;

    /// Runs the workload on `make_lock(client, key)`.
    fn run(
        ctx: &Ctx,
        key: &str,
        make_lock: fn(&redlatch::Client, &str) -> redlatch::Lock,
    ) -> Handoff {
        let client = ctx.client();
        let lock = make_lock(&client, key);
        Self::measure(
            Self::THREADS,
            || {},
            |thread, barrier| {
                let lock = lock.clone();
                thread::spawn(move || {
                    barrier.wait();
                    cycles(&lock, thread, Self::CYCLES, None)
                })
            },
        )
    }

    /// The cycles of `threads` threads x `cycles` on one plain lock, from a start where all
    /// of them wait on it: the bench holds it until every thread is blocked (the server has
    /// gone quiet), then releases it and the cycles begin. A thread's first cycle starts with
    /// its first `lock()`, so its first handoff counts from the bench's release.
    fn run_blocked(ctx: &mut Ctx, key: &str, threads: usize, cycles_each: usize) -> Handoff {
        let client = ctx.client();
        let lock = client.lock(key);
        let guard = lock.lock().expect("lock");
        let started = Arc::new(AtomicUsize::new(0));
        let raw = &mut ctx.raw;
        let all_started = Arc::clone(&started);
        Self::measure(
            threads,
            move || {
                while all_started.load(Ordering::SeqCst) < threads {
                    thread::sleep(Duration::from_millis(10));
                }
                settle(raw);
                drop(guard);
            },
            |thread, barrier| {
                let (lock, started) = (lock.clone(), Arc::clone(&started));
                thread::Builder::new()
                    .stack_size(128 * 1024)
                    .spawn(move || {
                        barrier.wait();
                        cycles(&lock, thread, cycles_each, Some(&started))
                    })
                    .expect("spawn handoff thread")
            },
        )
    }

    /// Spawns `threads` workers with `spawn(thread number, start barrier)`, lets them go,
    /// runs `go`, collects their cycles and computes the figures.
    fn measure(
        threads: usize,
        go: impl FnOnce(),
        spawn: impl Fn(usize, Arc<Barrier>) -> thread::JoinHandle<Vec<Cycle>>,
    ) -> Handoff {
        let barrier = Arc::new(Barrier::new(threads + 1));
        let workers: Vec<_> = (0..threads)
            .map(|thread| spawn(thread, Arc::clone(&barrier)))
            .collect();
        barrier.wait();
        go();
        let start = Instant::now();
        let mut cycles: Vec<Cycle> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("handoff thread panicked"))
            .collect();
        let wall = start.elapsed();

        cycles.sort_by_key(|c| c.grant);
        let handoffs: Vec<(&Cycle, &Cycle)> = cycles
            .windows(2)
            .filter(|w| w[0].thread != w[1].thread)
            .map(|w| (&w[0], &w[1]))
            .collect();
        let latency =
            |(prev, next): &(&Cycle, &Cycle)| next.grant.saturating_duration_since(prev.release);
        let mut lat: Vec<Duration> = handoffs.iter().map(latency).collect();
        // Handoffs to a thread that was already waiting when the release began (not one that
        // called `lock()` just after it and barged in).
        let mut waited: Vec<Duration> = handoffs
            .iter()
            .filter(|(prev, next)| next.start < prev.release)
            .map(latency)
            .collect();
        Handoff {
            threads,
            cycles: cycles.len(),
            cycles_per_s: cycles.len() as f64 / wall.as_secs_f64(),
            handoffs: lat.len(),
            p50_us: percentile_us(&mut lat, 50.0),
            p99_us: percentile_us(&mut lat, 99.0),
            waited: waited.len(),
            waited_p50_us: percentile_us(&mut waited, 50.0),
            fifo_violations: fifo_violations(&cycles),
        }
    }

    /// Cycles that have a previous holder (all but the first one).
    fn handoff_slots(&self) -> usize {
        self.cycles.saturating_sub(1)
    }

    /// Handoffs as a share of the cycles that could be one: 100% is every cycle after the
    /// first going to another thread.
    fn handoff_pct(&self) -> f64 {
        100.0 * self.handoffs as f64 / self.handoff_slots().max(1) as f64
    }

    /// Prints the human summary line (with the given targets) and returns the JSON line.
    fn report(
        &self,
        ctx: &Ctx,
        workload: &str,
        handoff_target: &str,
        rate_target: &str,
        fifo_target: &str,
    ) -> Json {
        eprintln!(
            "{workload}: p50 {:.1} us = {:.2}x ping (target <= 4x), p99 {:.1} us, handoffs {}/{} \
             = {:.0}% ({handoff_target}), {:.0} cycles/s ({rate_target}), fifo_violations {} \
             ({fifo_target})",
            self.p50_us,
            self.p50_us / ctx.ping_p50_us,
            self.p99_us,
            self.handoffs,
            self.handoff_slots(),
            self.handoff_pct(),
            self.cycles_per_s,
            self.fifo_violations
        );
        self.json(ctx, workload)
    }

    fn json(&self, ctx: &Ctx, workload: &str) -> Json {
        ctx.json(workload)
            .int("threads", self.threads)
            .int("cycles", self.cycles)
            .num("cycles_per_s", self.cycles_per_s)
            .int("handoffs", self.handoffs)
            .num("handoff_p50_us", self.p50_us)
            .num("handoff_p99_us", self.p99_us)
            .int("waited_handoffs", self.waited)
            .num("waited_handoff_p50_us", self.waited_p50_us)
            .int("fifo_violations", self.fifo_violations)
    }
}

/// Grants that jumped the queue: a grant to X at `g` while another thread Y, which had started
/// waiting more than 2 ms before X, was still waiting (`start_Y < g < grant_Y`). Each grant
/// counts once, however many threads it overtook. O(n^2), fine for 800 cycles.
fn fifo_violations(cycles: &[Cycle]) -> usize {
    const MARGIN: Duration = Duration::from_millis(2);
    cycles
        .iter()
        .filter(|x| {
            cycles.iter().any(|y| {
                y.thread != x.thread
                    && y.start < x.grant
                    && x.grant < y.grant
                    && y.start + MARGIN < x.start
            })
        })
        .count()
}

/// W threads blocked on a held lock: idle traffic, connections, memory, then the drain.
///
/// Memory: the process's RSS, and the resident part of the waiters' stacks (the smaps
/// mappings holding an address each waiter took of a local), so that what the client keeps
/// per waiter reads as `rss_mib - stack_rss_mib`. No lost wakeup: every waiter finishes,
/// and the longest time between one waiter's turn (it took the lock and releases it at once)
/// and the next (`max_gap_ms`; the first from the bench's release) stays far below the
/// lease, the bound of a wait whose wake-up was lost.
fn waiters(ctx: &mut Ctx) -> Json {
    let w = if ctx.scale { 10_000 } else { 1_000 };
    // Connections left by earlier workloads' clients should be gone; whatever remains
    // (at least our raw connection) is not this client's.
    let baseline = settled_connections(&mut ctx.raw);
    let rss_before = rss_mib();
    let client = ctx.client();
    let lease_ms = client.config().watchdog_timeout().as_secs_f64() * 1e3;
    let lock = client.lock("bench:waiters");
    let guard = lock.lock().expect("lock");

    let started = Arc::new(AtomicUsize::new(0));
    let stacks = Arc::new(Mutex::new(Vec::with_capacity(w)));
    memory::start_counting();
    let threads: Vec<_> = (0..w)
        .map(|_| {
            let (lock, started, stacks) = (lock.clone(), Arc::clone(&started), Arc::clone(&stacks));
            thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let local = 0u8;
                    stacks
                        .lock()
                        .unwrap()
                        .push(std::ptr::addr_of!(local) as usize);
                    started.fetch_add(1, Ordering::SeqCst);
                    drop(lock.lock().expect("lock"));
                    Instant::now()
                })
                .expect("spawn waiter")
        })
        .collect();
    while started.load(Ordering::SeqCst) < w {
        thread::sleep(Duration::from_millis(10));
    }
    // Every waiter has made its attempts (two acquire scripts each) and blocked.
    settle(&mut ctx.raw);
    let heap = memory::counted() as f64;
    memory::stop_counting();

    // INFO does not count itself, so the second snapshot includes exactly one of ours: the
    // first INFO. (Commands run by scripts count too: a busy acquire script is 4 commands.)
    let scripts_before = command_calls(&mut ctx.raw, "evalsha").0;
    let before = commands_processed(&mut ctx.raw);
    let t = Instant::now();
    thread::sleep(Duration::from_secs(ctx.idle_secs));
    let after = commands_processed(&mut ctx.raw);
    let secs = t.elapsed().as_secs_f64();
    let scripts = command_calls(&mut ctx.raw, "evalsha").0 - scripts_before;
    let own = 1;
    let idle = after.saturating_sub(before + own) as f64 / secs;
    let connections = client_count(&mut ctx.raw).saturating_sub(baseline);
    let rss = rss_mib();
    let stack_rss = memory::resident_mib_of_mappings(&mut stacks.lock().unwrap());

    let released = Instant::now();
    drop(guard);
    // When each waiter had taken the lock and started to release it.
    let mut turns: Vec<Instant> = threads
        .into_iter()
        .map(|t| t.join().expect("waiter panicked"))
        .collect();
    let drain_ms = released.elapsed().as_secs_f64() * 1e3;
    turns.sort();
    let mut gaps: Vec<Duration> = std::iter::once(released)
        .chain(turns.iter().copied())
        .zip(&turns)
        .map(|(prev, &next)| next.saturating_duration_since(prev))
        .collect();
    let gap_p50_us = percentile_us(&mut gaps, 50.0);
    let max_gap_ms = percentile_us(&mut gaps, 100.0) / 1e3;
    let pool = client.config().pool_size();
    let drain_target = w as f64 * 4.0 * ctx.ping_p50_us / 1e3;
    eprintln!(
        "waiters: {w} blocked, {idle:.1} cmds/s idle (target 0; {scripts} scripts in {secs:.0} \
         s), {connections} connections (target <= {}), drain {drain_ms:.0} ms (target <= \
         {drain_target:.0} ms; lease {lease_ms:.0} ms), all {} finished, longest gap between \
         turns {max_gap_ms:.1} ms (p50 {gap_p50_us:.0} us), rss {rss:.1} MiB ({rss_before:.1} before), of which waiters' \
         stacks {stack_rss:.1} MiB: {:.1} MiB beyond them (target < 100); heap {:.0} bytes \
         per waiter",
        pool + 1,
        turns.len(),
        rss - stack_rss,
        heap / w as f64
    );
    ctx.json("waiters")
        .int("waiters", w)
        .num("idle_cmds_per_s", idle)
        .int("idle_secs", ctx.idle_secs as usize)
        .num("idle_scripts_per_s", scripts as f64 / secs)
        .int("connections", connections)
        .num("drain_ms", drain_ms)
        .num("rss_mib", rss)
        .int("finished", turns.len())
        .num("max_gap_ms", max_gap_ms)
        .num("gap_p50_us", gap_p50_us)
        .num("lease_ms", lease_ms)
        .num("rss_before_mib", rss_before)
        .num("stack_rss_mib", stack_rss)
        .num("rss_beyond_stacks_mib", rss - stack_rss)
        .num("heap_bytes_per_waiter", heap / w as f64)
}

/// p50 of 5000 PINGs on one connection (after a short warmup), in microseconds.
fn ping_p50_us(conn: &mut redis::Connection) -> f64 {
    let mut ping = || {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query(conn).expect("PING");
        t.elapsed()
    };
    for _ in 0..200 {
        ping();
    }
    let mut lat: Vec<Duration> = (0..5000).map(|_| ping()).collect();
    percentile_us(&mut lat, 50.0)
}

/// Nearest-rank percentile `p` (0-100) of `samples`, in microseconds; 0 when empty.
fn percentile_us(samples: &mut [Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1].as_secs_f64() * 1e6
}

/// The server's CPU time so far (user + system, all its threads), from `INFO cpu`, in µs.
fn server_cpu_us(conn: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(conn).expect("INFO cpu");
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.trim_end().strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    (field("used_cpu_user:") + field("used_cpu_sys:")) * 1e6
}

/// How often the server ran command `name` (lower case, e.g. `evalsha`), and how many of
/// those calls failed (an EVALSHA of a script the server does not have yet fails with
/// NOSCRIPT), from `INFO commandstats`; zeros if never.
fn command_calls(conn: &mut redis::Connection, name: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{name}:");
    let stats = info
        .lines()
        .find_map(|l| l.trim_end().strip_prefix(prefix.as_str()))
        .unwrap_or("");
    let field = |key: &str| -> u64 {
        stats
            .split(',')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("failed_calls"))
}

fn commands_processed(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_commands_processed in INFO stats")
}

fn client_count(conn: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(conn)
        .expect("CLIENT LIST");
    list.lines().filter(|l| !l.trim().is_empty()).count()
}

/// The connection count once only our raw connection is left (closed clients take a moment
/// to vanish), or after 1 s.
fn settled_connections(conn: &mut redis::Connection) -> usize {
    let mut n = client_count(conn);
    for _ in 0..20 {
        if n <= 1 {
            break;
        }
        thread::sleep(Duration::from_millis(50));
        n = client_count(conn);
    }
    n
}

/// A hand-built JSON object: `{"k":v,...}`.
struct Json(String);

impl Json {
    fn num(mut self, key: &str, v: f64) -> Json {
        self.0 += &format!(",\"{key}\":{v:.1}");
        self
    }

    /// A number with two decimals (small ratios and percentages).
    fn num2(mut self, key: &str, v: f64) -> Json {
        self.0 += &format!(",\"{key}\":{v:.2}");
        self
    }

    fn int(mut self, key: &str, v: usize) -> Json {
        self.0 += &format!(",\"{key}\":{v}");
        self
    }

    fn finish(self) -> String {
        self.0 + "}"
    }
}

/// A private `redis-server`, killed (and its directory removed) on drop, panics included.
struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Server {
    fn start() -> Server {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let dir =
            std::env::temp_dir().join(format!("redlatch-bench-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // `BENCH_CALLGRIND=1`: the server under callgrind, counting its instructions (see
        // `family.rs`); everything it does is about 50 times slower.
        let mut command = if callgrind_wanted() {
            let mut c = Command::new("valgrind");
            c.args(["--tool=callgrind", "--collect-atstart=yes"])
                .arg(format!("--callgrind-out-file={}/cg.%p", dir.display()))
                .arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        let child = command
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `{bin}` ({e}); install it (apt-get install -y redis-server) or set REDIS_SERVER_BIN")
            });
        let mut server = Server {
            child,
            dir,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("`{bin}` exited at startup: {status}");
            }
            if let Ok(mut conn) = server.try_connect() {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    return server;
                }
            }
            assert!(
                Instant::now() < deadline,
                "`{bin}` did not answer PING within 30 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id and dump folder when it runs under callgrind.
    fn callgrind(&self) -> Option<(u32, PathBuf)> {
        callgrind_wanted().then(|| (self.child.id(), self.dir.clone()))
    }

    fn try_connect(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url.as_str())?.get_connection()
    }

    fn connect(&self) -> redis::Connection {
        self.try_connect().expect("raw connection to redis-server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
