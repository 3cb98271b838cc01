//! Lock benchmarks against a private `redis-server` (see DESIGN.md, "Benchmarks").
//!
//! `cargo bench --bench locks [WORKLOAD...] [--scale]` prints one JSON line per workload to
//! stdout (every figure next to the ping round trip measured in the same run) and a one-line
//! human summary per workload to stderr. Cargo takes one bare name itself (`cargo bench --bench
//! locks solo`); more names or `--scale` go after `--`: `cargo bench --bench locks -- waiters
//! --scale`. Workloads: solo, handoff, fair_handoff, waiters. To add one: a `fn(&mut Ctx) ->
//! Json`, its name in `WORKLOADS` and a match arm in `main`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// Every workload, in the order a bare `cargo bench --bench locks` runs them.
const WORKLOADS: &[&str] = &["solo", "handoff", "fair_handoff", "waiters"];

fn main() {
    let mut scale = false;
    let mut names = Vec::new();
    for arg in std::env::args().skip(1) {
        if arg == "--scale" {
            scale = true;
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
    };
    eprintln!("ping p50 {ping_p50_us:.1} us (5000 PINGs, one connection)");
    for name in &names {
        let json = match name.as_str() {
            "solo" => solo(&ctx),
            "handoff" => handoff(&ctx),
            "fair_handoff" => fair_handoff(&ctx),
            "waiters" => waiters(&mut ctx),
            _ => unreachable!("checked above"),
        };
        println!("{}", json.finish());
    }
}

/// What every workload gets: the server's URL, the ping baseline and a raw connection.
struct Ctx {
    url: String,
    ping_p50_us: f64,
    raw: redis::Connection,
    scale: bool,
}

impl Ctx {
    fn client(&self) -> redlatch::Client {
        redlatch::Client::open(&self.url).expect("redlatch client")
    }

    /// A JSON line already holding `workload` and `ping_p50_us`.
    fn json(&self, workload: &str) -> Json {
        Json(format!(
            "{{\"workload\":\"{workload}\",\"ping_p50_us\":{:.1}",
            self.ping_p50_us
        ))
    }
}

/// 1 thread, 5000 lock+unlock cycles on an uncontended key.
fn solo(ctx: &Ctx) -> Json {
    let client = ctx.client();
    let lock = client.lock("bench:solo");
    for _ in 0..200 {
        drop(lock.lock().expect("lock"));
    }
    let mut lat = Vec::with_capacity(5000);
    let start = Instant::now();
    for _ in 0..5000 {
        let t = Instant::now();
        drop(lock.lock().expect("lock"));
        lat.push(t.elapsed());
    }
    let wall = start.elapsed();
    let (p50, p99) = (percentile_us(&mut lat, 50.0), percentile_us(&mut lat, 99.0));
    eprintln!(
        "solo: p50 {p50:.1} us = {:.2}x ping (target <= 2.3x), p99 {p99:.1} us",
        p50 / ctx.ping_p50_us
    );
    ctx.json("solo")
        .num("cycles_per_s", 5000.0 / wall.as_secs_f64())
        .num("p50_us", p50)
        .num("p99_us", p99)
}

/// 8 threads x 100 cycles of {lock; hold 1 ms; unlock; pause 1 ms} on one plain lock.
fn handoff(ctx: &Ctx) -> Json {
    let h = Handoff::run(ctx, "bench:handoff", redlatch::Client::lock);
    h.report(
        ctx,
        "handoff",
        "target >= 80%",
        "target >= 650",
        "barging, no target",
    )
}

/// The `handoff` workload on a fair lock: every cycle should go to another thread, in order.
fn fair_handoff(ctx: &Ctx) -> Json {
    let h = Handoff::run(ctx, "bench:fair_handoff", redlatch::Client::fair_lock);
    h.report(ctx, "fair_handoff", "target 100%", "no target", "target 0")
}

/// One cycle of a handoff thread: when it called `lock()`, when `lock()` returned and when it
/// started to unlock, and which thread it was.
struct Cycle {
    start: Instant,
    grant: Instant,
    release: Instant,
    thread: usize,
}

/// The figures of one handoff run (8 threads x 100 cycles on one key).
struct Handoff {
    cycles: usize,
    cycles_per_s: f64,
    handoffs: usize,
    p50_us: f64,
    p99_us: f64,
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
        let barrier = Arc::new(Barrier::new(Self::THREADS + 1));
        let workers: Vec<_> = (0..Self::THREADS)
            .map(|thread| {
                let (lock, barrier) = (lock.clone(), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    let mut cycles = Vec::with_capacity(Self::CYCLES);
                    for _ in 0..Self::CYCLES {
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
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut cycles: Vec<Cycle> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("handoff thread panicked"))
            .collect();
        let wall = start.elapsed();

        cycles.sort_by_key(|c| c.grant);
        let mut lat: Vec<Duration> = cycles
            .windows(2)
            .filter(|w| w[0].thread != w[1].thread)
            .map(|w| w[1].grant.saturating_duration_since(w[0].release))
            .collect();
        Handoff {
            cycles: cycles.len(),
            cycles_per_s: cycles.len() as f64 / wall.as_secs_f64(),
            handoffs: lat.len(),
            p50_us: percentile_us(&mut lat, 50.0),
            p99_us: percentile_us(&mut lat, 99.0),
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
            .int("threads", Self::THREADS)
            .int("cycles", self.cycles)
            .num("cycles_per_s", self.cycles_per_s)
            .int("handoffs", self.handoffs)
            .num("handoff_p50_us", self.p50_us)
            .num("handoff_p99_us", self.p99_us)
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
fn waiters(ctx: &mut Ctx) -> Json {
    let w = if ctx.scale { 10_000 } else { 1_000 };
    // Connections left by earlier workloads' clients should be gone; whatever remains
    // (at least our raw connection) is not this client's.
    let baseline = settled_connections(&mut ctx.raw);
    let client = ctx.client();
    let lock = client.lock("bench:waiters");
    let guard = lock.lock().expect("lock");

    let started = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..w)
        .map(|_| {
            let (lock, started) = (lock.clone(), Arc::clone(&started));
            thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    drop(lock.lock().expect("lock"));
                })
                .expect("spawn waiter")
        })
        .collect();
    while started.load(Ordering::SeqCst) < w {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(500));

    // INFO does not count itself, so the second snapshot includes exactly one of ours: the
    // first INFO.
    let before = commands_processed(&mut ctx.raw);
    let t = Instant::now();
    thread::sleep(Duration::from_secs(3));
    let after = commands_processed(&mut ctx.raw);
    let secs = t.elapsed().as_secs_f64();
    let own = 1;
    let idle = after.saturating_sub(before + own) as f64 / secs;
    let connections = client_count(&mut ctx.raw).saturating_sub(baseline);
    let rss = rss_mib();

    let t = Instant::now();
    drop(guard);
    for t in threads {
        t.join().expect("waiter panicked");
    }
    let drain_ms = t.elapsed().as_secs_f64() * 1e3;
    let pool = client.config().pool_size();
    let drain_target = w as f64 * 4.0 * ctx.ping_p50_us / 1e3;
    eprintln!(
        "waiters: {w} blocked, {idle:.1} cmds/s idle (target 0), {connections} connections \
         (target <= {}), drain {drain_ms:.0} ms (target <= {drain_target:.0} ms), rss {rss:.1} MiB",
        pool + 1
    );
    ctx.json("waiters")
        .int("waiters", w)
        .num("idle_cmds_per_s", idle)
        .int("connections", connections)
        .num("drain_ms", drain_ms)
        .num("rss_mib", rss)
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

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// A hand-built JSON object: `{"k":v,...}`.
struct Json(String);

impl Json {
    fn num(mut self, key: &str, v: f64) -> Json {
        self.0 += &format!(",\"{key}\":{v:.1}");
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
        let child = Command::new(&bin)
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
        let deadline = Instant::now() + Duration::from_secs(10);
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
                "`{bin}` did not answer PING within 10 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
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
