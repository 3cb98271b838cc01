//! A Jepsen-style torture run: several processes with several threads each take a few shared
//! locks over and over while faults are injected, every critical section is logged with
//! CLOCK_MONOTONIC times, and a checker proves that no two holders overlapped (or says which
//! fault excuses an overlap).
//!
//! ```text
//! cargo run --release --example torture -- --help
//! cargo run --release --example torture -- --kind fenced --faults all --seconds 600 --seed 7
//! cargo run --release --example torture -- check /tmp/redlatch-torture-1234
//! ```
//!
//! The runner starts its own `redis-server`s (from `REDIS_SERVER_BIN` or `PATH`): the lock
//! server (three for `redlock`), a separate *resource* server that holds the lost-update probe
//! counters (never faulted, so the probe measures the lock and nothing else) and, with proxy
//! faults, a TCP fault proxy in front of the (first) lock server. It re-runs its own
//! executable as `worker` processes, injects the seeded fault schedule into the servers and
//! processes it started (and nothing else), then reads the probe counters and runs the
//! checker (see `check.rs` for the log format and the rules). Exit status: 0 when the checker
//! found no violation, 1 when it did, 2 on bad arguments.
//!
//! Inside each critical section the probe reads the lock's counter, pauses, and writes it
//! back plus one; for `fenced` the counter is a `FencedResource` written with the holder's
//! token, so a stale holder's write is refused. At the end each counter must equal the writes
//! that completed.

#[path = "../../tests/support/mod.rs"]
mod support;

mod check;
mod proxy;

use std::fs::File;
use std::io::{LineWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, RedLock};
use support::RedisServer;

const USAGE: &str = "\
usage: torture [run] [OPTIONS]       run, then check (exit 1 on a violation)
       torture check DIR [--json]    check the logs of an earlier run

  --kind K            reentrant (default), fair, rw-write, fenced, redlock; and two broken
                      locks that the checker must catch: broken (SET NX PX 10 and an
                      unconditional DEL) and short-lease (a 10 ms lease, no watchdog)
  --seconds S         how long the workers run (default 20)
  --processes P       worker processes (default 3)
  --threads T         threads per process (default 4)
  --locks L           shared locks (default 3)
  --faults F          none (default), all, or a comma list of: kill, pause-holder,
                      pause-server, client-kill, script-flush, proxy-delay,
                      proxy-blackhole, proxy-reset
  --fault-every-ms N  mean time between faults (default 2000)
  --seed N            seeds the fault schedule and the workers' choices (default 1)
  --lease-ms N        the watchdog timeout (default 30000 without faults, 2000 with)
  --work-ms N         the probe pauses 0..=N ms between its read and its write (default 2)
  --wait-ms N         a thread gives up waiting for a lock after N ms (default 20000)
  --dir DIR           where the logs go (default: a new /tmp/redlatch-torture-<pid>)
  --json              print the report as one JSON line too";

/// Every fault class, in the order `--faults all` lists them.
const FAULTS: &[&str] = &[
    "kill",
    "pause-holder",
    "pause-server",
    "client-kill",
    "script-flush",
    "proxy-delay",
    "proxy-blackhole",
    "proxy-reset",
];

const KINDS: &[&str] = &[
    "reentrant",
    "fair",
    "rw-write",
    "fenced",
    "redlock",
    "broken",
    "short-lease",
];

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("worker") => worker(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some("check") => check_cmd(&args[1..]),
        Some("run") => run(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => run(&args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("torture: {e}");
        ExitCode::from(2)
    })
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// splitmix64: a small seeded generator, so a seed replays the same schedule.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// The options of a run, also handed to the workers.
#[derive(Clone, Debug)]
struct Opts {
    kind: String,
    seconds: u64,
    processes: u32,
    threads: u32,
    locks: u32,
    faults: Vec<String>,
    fault_every_ms: u64,
    seed: u64,
    lease_ms: u64,
    work_ms: u64,
    wait_ms: u64,
    dir: Option<PathBuf>,
    json: bool,
}

fn parse_opts(args: &[String]) -> Res<Opts> {
    let mut o = Opts {
        kind: "reentrant".into(),
        seconds: 20,
        processes: 3,
        threads: 4,
        locks: 3,
        faults: Vec::new(),
        fault_every_ms: 2000,
        seed: 1,
        lease_ms: 0,
        work_ms: 2,
        wait_ms: 20_000,
        dir: None,
        json: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--json" {
            o.json = true;
            continue;
        }
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.into());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = || -> Res<u64> {
            value
                .parse()
                .map_err(|_| format!("{flag}: `{value}` is not a number").into())
        };
        match flag.as_str() {
            "--kind" if KINDS.contains(&value.as_str()) => o.kind = value.clone(),
            "--kind" => return Err(format!("unknown kind `{value}`; known: {KINDS:?}").into()),
            "--seconds" => o.seconds = num()?,
            "--processes" => o.processes = num()?.clamp(1, 64) as u32,
            "--threads" => o.threads = num()?.clamp(1, 256) as u32,
            "--locks" => o.locks = num()?.clamp(1, 1000) as u32,
            "--fault-every-ms" => o.fault_every_ms = num()?.max(10),
            "--seed" => o.seed = num()?,
            "--lease-ms" => o.lease_ms = num()?,
            "--work-ms" => o.work_ms = num()?,
            "--wait-ms" => o.wait_ms = num()?.max(1),
            "--dir" => o.dir = Some(PathBuf::from(value)),
            "--faults" => {
                o.faults = match value.as_str() {
                    "none" => Vec::new(),
                    "all" => FAULTS.iter().map(|s| s.to_string()).collect(),
                    list => list.split(',').map(str::to_owned).collect(),
                };
                if let Some(bad) = o.faults.iter().find(|f| !FAULTS.contains(&f.as_str())) {
                    return Err(format!("unknown fault `{bad}`; known: {FAULTS:?}").into());
                }
            }
            _ => return Err(format!("unknown option `{flag}`\n{USAGE}").into()),
        }
    }
    if o.lease_ms == 0 {
        o.lease_ms = if o.faults.is_empty() { 30_000 } else { 2_000 };
    }
    o.lease_ms = o.lease_ms.max(100);
    Ok(o)
}

fn check_cmd(args: &[String]) -> Res<ExitCode> {
    let dir = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .ok_or_else(|| format!("check needs a run directory\n{USAGE}"))?;
    let run = check::read_dir(Path::new(dir))?;
    Ok(report(&run, args.iter().any(|a| a == "--json")))
}

/// Checks a run, prints the report, and turns it into the exit status.
fn report(run: &check::Run, json: bool) -> ExitCode {
    let r = check::check(run);
    println!("{r}");
    if json {
        println!("{}", check::json(&r));
    }
    if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn lock_name(i: u32) -> String {
    format!("torture:lock:{i}")
}

fn counter_name(lock: &str) -> String {
    format!("{lock}:counter")
}

/// The runner: servers, workers, faults, counters, checker.
fn run(args: &[String]) -> Res<ExitCode> {
    let o = parse_opts(args)?;
    let dir = o.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("redlatch-torture-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "tsv") {
            std::fs::remove_file(path)?;
        }
    }

    let nodes = if o.kind == "redlock" { 3 } else { 1 };
    let mut servers: Vec<RedisServer> = (0..nodes)
        .map(|_| RedisServer::with_args(&["--appendonly", "no"]))
        .collect();
    let resource = RedisServer::new();
    let proxy = if o.faults.iter().any(|f| f.starts_with("proxy-")) {
        Some(proxy::Proxy::start(servers[0].addr())?)
    } else {
        None
    };
    let mut urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    if let Some(p) = &proxy {
        urls[0] = format!("redis://{}/", p.addr());
    }
    eprintln!(
        "torture: kind {}, {} s, {} processes x {} threads, {} locks, faults {:?}, seed {}, \
         lease {} ms; logs in {}",
        o.kind,
        o.seconds,
        o.processes,
        o.threads,
        o.locks,
        o.faults,
        o.seed,
        o.lease_ms,
        dir.display()
    );

    let exe = std::env::current_exe()?;
    let mut workers = Workers(
        (0..o.processes)
            .map(|p| {
                let mut cmd = Command::new(&exe);
                cmd.arg("worker")
                    .args(["--proc", &p.to_string()])
                    .args(["--threads", &o.threads.to_string()])
                    .args(["--locks", &o.locks.to_string()])
                    .args(["--seconds", &o.seconds.to_string()])
                    .args(["--kind", &o.kind])
                    .args(["--lease-ms", &o.lease_ms.to_string()])
                    .args(["--work-ms", &o.work_ms.to_string()])
                    .args(["--wait-ms", &o.wait_ms.to_string()])
                    .args(["--seed", &o.seed.wrapping_add(u64::from(p)).to_string()])
                    .args(["--resource", &resource.url()])
                    .args(["--out", &dir.join(format!("w{p}.tsv")).to_string_lossy()]);
                for u in &urls {
                    cmd.args(["--url", u]);
                }
                cmd.spawn()
            })
            .collect::<std::io::Result<_>>()?,
    );

    let mut log = vec![format!("K\t{}", o.kind)];
    let deadline = Instant::now() + Duration::from_secs(o.seconds);
    let mut rng = Rng(o.seed);
    let mut injected = 0;
    let mut round: Vec<String> = Vec::new();
    if !o.faults.is_empty() {
        let pids: Vec<u32> = workers.0.iter().map(Child::id).collect();
        let mut env = FaultEnv {
            servers: &mut servers,
            proxy: proxy.as_ref(),
            workers: &pids,
            lease: Duration::from_millis(o.lease_ms),
            dir: &dir,
            locks: o.locks,
        };
        loop {
            let gap = rng.range(o.fault_every_ms / 2, o.fault_every_ms * 3 / 2);
            thread::sleep(Duration::from_millis(gap));
            // Leave room for the longest fault (a holder paused past its lease) to end
            // before the workers stop.
            let longest = env.lease + Duration::from_secs(2);
            if Instant::now() + longest >= deadline {
                break;
            }
            if round.is_empty() {
                // Every class once per round, in a seeded order: a short run covers them all.
                round = o.faults.clone();
                for i in (1..round.len()).rev() {
                    round.swap(i, rng.range(0, i as u64) as usize);
                }
            }
            let class = round.pop().expect("refilled above");
            let class = class.as_str();
            let start = mono_ns();
            let detail = env.inject(class, &mut rng);
            log.push(format!("F\t{class}\t{start}\t{}\t{detail}", mono_ns()));
            injected += 1;
        }
        for &pid in &pids {
            signal(pid, libc::SIGCONT);
        }
    }

    // Workers finish the cycle they are in; one that outlives its time by far is hung.
    let patience =
        deadline + Duration::from_millis(o.wait_ms + o.lease_ms) + Duration::from_secs(30);
    for (p, w) in workers.0.iter_mut().enumerate() {
        loop {
            match w.try_wait()? {
                Some(status) if status.success() => break,
                Some(status) => {
                    log.push(format!("X\tworker {p} exited with {status}"));
                    break;
                }
                None if Instant::now() > patience => {
                    let _ = w.kill();
                    let _ = w.wait();
                    log.push(format!("X\tworker {p} hung: killed"));
                    break;
                }
                None => thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    let mut conn = resource.conn();
    for i in 0..o.locks {
        let name = lock_name(i);
        let value: Option<String> = redis::cmd("GET")
            .arg(counter_name(&name))
            .query(&mut conn)?;
        let value = value.map_or(Ok(0), |v| v.parse::<i64>())?;
        log.push(format!("C\t{name}\t{value}"));
    }
    let mut text = log.join("\n");
    text.push('\n');
    std::fs::write(dir.join("run.tsv"), text)?;
    eprintln!(
        "torture: {injected} faults injected; checking {}",
        dir.display()
    );
    let run = check::read_dir(&dir)?;
    Ok(report(&run, o.json))
}

/// The worker processes. If the runner fails midway (a server that does not restart), they
/// are resumed (one may be paused) and killed rather than left behind.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            if let Ok(None) = w.try_wait() {
                signal(w.id(), libc::SIGCONT);
                let _ = w.kill();
                let _ = w.wait();
            }
        }
    }
}

/// What faults act on: only what this runner started.
struct FaultEnv<'a> {
    servers: &'a mut [RedisServer],
    proxy: Option<&'a proxy::Proxy>,
    workers: &'a [u32],
    lease: Duration,
    /// The run directory, where the workers log their client ids.
    dir: &'a Path,
    locks: u32,
}

impl FaultEnv<'_> {
    /// Injects one fault of `class` (on the first lock server, or the proxy in front of it),
    /// waits for it to end, and describes it.
    fn inject(&mut self, class: &str, rng: &mut Rng) -> String {
        let ms = |rng: &mut Rng, lo, hi| Duration::from_millis(rng.range(lo, hi));
        let server = &mut self.servers[0];
        match class {
            "kill" => {
                let down = ms(rng, 100, 800);
                server.kill();
                thread::sleep(down);
                server.restart();
                format!("kill -9, restarted after {down:?} (data lost)")
            }
            "pause-holder" => {
                let (pid, who) = match self.holder() {
                    Some(p) => (self.workers[p], format!("holder worker {p}")),
                    None => {
                        let p = rng.range(0, self.workers.len() as u64 - 1) as usize;
                        (self.workers[p], format!("worker {p} (no holder seen)"))
                    }
                };
                let paused = self.lease + ms(rng, 500, 1500);
                signal(pid, libc::SIGSTOP);
                thread::sleep(paused);
                signal(pid, libc::SIGCONT);
                format!("SIGSTOP {who}, pid {pid}, for {paused:?}")
            }
            "pause-server" => {
                let paused = ms(rng, 100, 600);
                server.stop();
                thread::sleep(paused);
                server.cont();
                format!("SIGSTOP server for {paused:?}")
            }
            "client-kill" => {
                let kind = if rng.range(0, 1) == 0 {
                    "pubsub"
                } else {
                    "normal"
                };
                let killed: redis::RedisResult<i64> = server.try_conn().map_or(Ok(0), |mut c| {
                    redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg(kind)
                        .query(&mut c)
                });
                format!("CLIENT KILL TYPE {kind}: {killed:?}")
            }
            "script-flush" => {
                let flushed: redis::RedisResult<()> = server.try_conn().map_or(Ok(()), |mut c| {
                    redis::cmd("SCRIPT").arg("FLUSH").query(&mut c)
                });
                format!("SCRIPT FLUSH: {flushed:?}")
            }
            "proxy-delay" => {
                let (delay, span) = (ms(rng, 10, 80), ms(rng, 500, 2000));
                self.with_proxy(proxy::Mode::Delay(delay), span);
                format!("proxy delays every chunk by {delay:?} for {span:?}")
            }
            "proxy-blackhole" => {
                let span = ms(rng, 200, 1200);
                self.with_proxy(proxy::Mode::Blackhole, span);
                format!("proxy blackholes for {span:?}")
            }
            "proxy-reset" => {
                let n = self.proxy.map_or(0, proxy::Proxy::reset);
                format!("proxy reset {n} connections")
            }
            other => unreachable!("fault classes are checked at parse: {other}"),
        }
    }

    /// The worker process that holds one of the locks now, found by inspecting the locks on
    /// the (first) lock server and matching the holder's client id with the ids the workers
    /// logged (`I` lines).
    fn holder(&self) -> Option<usize> {
        let inspector = Config::builder(self.servers[0].url().as_str())
            .connect_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_millis(500))
            .build()
            .and_then(Client::new)
            .ok()?;
        let mut ids = std::collections::HashMap::new();
        for p in 0..self.workers.len() {
            let text = std::fs::read_to_string(self.dir.join(format!("w{p}.tsv"))).ok()?;
            let id = text.lines().find_map(|l| l.strip_prefix("I\t"))?;
            ids.insert(id.split('\t').nth(1)?.to_owned(), p);
        }
        (0..self.locks).find_map(|i| {
            let seen = inspector.inspect(&lock_name(i)).ok()??;
            seen.holders
                .iter()
                .find_map(|h| ids.get(&h.owner.client_id).copied())
        })
    }

    fn with_proxy(&self, mode: proxy::Mode, span: Duration) {
        if let Some(p) = self.proxy {
            p.set_mode(mode);
            thread::sleep(span);
            p.set_mode(proxy::Mode::Pass);
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a pid of a child this process spawned and has not reaped.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// The options of one worker process.
struct WorkerOpts {
    process: u32,
    urls: Vec<String>,
    resource: String,
    out: PathBuf,
    run: Opts,
}

fn parse_worker(args: &[String]) -> Res<WorkerOpts> {
    let (mut urls, mut rest) = (Vec::new(), Vec::new());
    let (mut process, mut resource, mut out) = (0, String::new(), PathBuf::new());
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => urls.push(value.clone()),
            "--proc" => process = value.parse()?,
            "--resource" => resource = value.clone(),
            "--out" => out = PathBuf::from(value),
            _ => rest.extend([flag.clone(), value.clone()]),
        }
    }
    Ok(WorkerOpts {
        process,
        urls,
        resource,
        out,
        run: parse_opts(&rest)?,
    })
}

/// One worker process: T threads cycling lock / probe / unlock until the time is up.
fn worker(args: &[String]) -> Res<()> {
    let w = Arc::new(parse_worker(args)?);
    let out = Arc::new(parking_lot::Mutex::new(LineWriter::new(File::create(
        &w.out,
    )?)));
    let clients: Vec<Client> = w
        .urls
        .iter()
        .map(|u| {
            let config = Config::builder(u.as_str())
                .watchdog_timeout(Duration::from_millis(w.run.lease_ms))
                .build()?;
            Client::new(config)
        })
        .collect::<redlatch::Result<_>>()?;
    let resource = Client::open(&w.resource)?;
    // Who this process is, for the runner's pause-holder fault.
    writeln!(out.lock(), "I\t{}\t{}", w.process, clients[0].id())?;
    let deadline = Instant::now() + Duration::from_secs(w.run.seconds);
    let seeds = Arc::new(AtomicU64::new(w.run.seed.wrapping_mul(1000)));
    let threads: Vec<_> = (0..w.run.threads)
        .map(|t| {
            let (w, out, clients, resource, seeds) = (
                Arc::clone(&w),
                Arc::clone(&out),
                clients.clone(),
                resource.clone(),
                Arc::clone(&seeds),
            );
            thread::spawn(move || -> Res<()> {
                let mut rng = Rng(seeds.fetch_add(1, Ordering::Relaxed));
                let mut th = Thread {
                    w: &w,
                    thread: t,
                    clients: &clients,
                    resource,
                    probe: redis::Client::open(w.resource.as_str())?.get_connection()?,
                    raw_lock: None,
                    out: &out,
                };
                while Instant::now() < deadline {
                    let lock = lock_name(rng.range(0, u64::from(w.run.locks) - 1) as u32);
                    th.cycle(&lock, &mut rng)?;
                    thread::sleep(Duration::from_micros(rng.range(0, 1000)));
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "a worker thread panicked")??;
    }
    Ok(())
}

/// One worker thread's handles.
struct Thread<'a> {
    w: &'a WorkerOpts,
    thread: u32,
    clients: &'a [Client],
    resource: Client,
    /// Plain connection to the resource server, for the probe of unfenced kinds.
    probe: redis::Connection,
    /// Plain connection to the lock server, for the broken kind (made on first use).
    raw_lock: Option<redis::Connection>,
    out: &'a parking_lot::Mutex<LineWriter<File>>,
}

/// A hold of whatever kind the run tests.
enum Held {
    Guard(redlatch::LockGuard),
    Multi(redlatch::MultiLockGuard),
    /// The deliberately broken lock: a key set with NX and a 10 ms lease.
    Broken,
}

impl Thread<'_> {
    fn log(&self, line: String) -> Res<()> {
        writeln!(self.out.lock(), "{line}")?;
        Ok(())
    }

    fn error(&self, lock: &str, phase: &str, e: impl std::fmt::Display) -> Res<()> {
        let msg = e.to_string().replace(['\t', '\n'], " ");
        let (p, t, at) = (self.w.process, self.thread, mono_ns());
        self.log(format!("E\t{p}\t{t}\t{lock}\t{at}\t{phase}\t{msg}"))
    }

    /// Waits for `lock` (up to the wait bound), as the run's kind does it.
    fn acquire(&mut self, lock: &str) -> Res<Option<Held>> {
        let wait = Duration::from_millis(self.w.run.wait_ms);
        let c = &self.clients[0];
        let guard = match self.w.run.kind.as_str() {
            "reentrant" => c.lock(lock).try_lock_for(wait)?,
            "fair" => c.fair_lock(lock).try_lock_for(wait)?,
            "rw-write" => c.read_write_lock(lock).write().try_lock_for(wait)?,
            "fenced" => c.fenced_lock(lock).try_lock_for(wait)?,
            "short-lease" => c
                .lock(lock)
                .with_lease(Duration::from_millis(10))
                .try_lock_for(wait)?,
            "redlock" => {
                let red = RedLock::new(self.clients.iter().map(|c| c.lock(lock)))?;
                return Ok(red.try_lock_for(wait)?.map(Held::Multi));
            }
            "broken" => return self.broken_acquire(lock, wait),
            other => unreachable!("kinds are checked at parse: {other}"),
        };
        Ok(guard.map(Held::Guard))
    }

    /// The broken lock: poll SET NX PX 10 every millisecond.
    fn broken_acquire(&mut self, lock: &str, wait: Duration) -> Res<Option<Held>> {
        let until = Instant::now() + wait;
        let me = self.thread;
        let conn = self.raw_lock()?;
        while Instant::now() < until {
            let set: redis::RedisResult<Option<String>> = redis::cmd("SET")
                .arg(lock)
                .arg(me)
                .arg("NX")
                .arg("PX")
                .arg(10)
                .query(conn);
            if set?.is_some() {
                return Ok(Some(Held::Broken));
            }
            thread::sleep(Duration::from_millis(1));
        }
        Ok(None)
    }

    fn raw_lock(&mut self) -> Res<&mut redis::Connection> {
        if self.raw_lock.is_none() {
            let conn = redis::Client::open(self.w.urls[0].as_str())?.get_connection()?;
            self.raw_lock = Some(conn);
        }
        Ok(self.raw_lock.as_mut().expect("just made"))
    }

    /// Releases a hold: `ok`, `lost` (the library said the hold was gone) or `err`.
    fn release(&mut self, lock: &str, held: Held) -> Res<&'static str> {
        let lost = |e: &redlatch::Error| e.is_lock_lost() || e.is_not_held();
        let result = match held {
            Held::Guard(g) => g.unlock(),
            Held::Multi(g) => {
                let was_lost = g.is_lost();
                match g.unlock() {
                    Ok(()) if was_lost => return Ok("lost"),
                    other => other,
                }
            }
            Held::Broken => {
                let _: () = redis::cmd("DEL").arg(lock).query(self.raw_lock()?)?;
                return Ok("ok");
            }
        };
        Ok(match result {
            Ok(()) => "ok",
            Err(redlatch::Error::PartialUnlock { failures, .. })
                if failures.iter().any(|(_, e)| lost(e)) =>
            {
                "lost"
            }
            Err(e) if lost(&e) => "lost",
            Err(e) => {
                self.error(lock, "unlock", &e)?;
                "err"
            }
        })
    }

    /// Lock, probe (read the counter, pause, write it + 1), unlock; one log line.
    fn cycle(&mut self, lock: &str, rng: &mut Rng) -> Res<()> {
        let held = match self.acquire(lock) {
            Ok(Some(held)) => held,
            Ok(None) => {
                let (p, t) = (self.w.process, self.thread);
                return self.log(format!("T\t{p}\t{t}\t{lock}\t{}", mono_ns()));
            }
            Err(e) => {
                self.error(lock, "lock", &e)?;
                // A dead server fails at once: do not spin.
                thread::sleep(Duration::from_millis(20));
                return Ok(());
            }
        };
        let enter = mono_ns();
        let token = match &held {
            Held::Guard(g) => g.token(),
            _ => None,
        };
        let pause = Duration::from_millis(rng.range(0, self.w.run.work_ms));
        let (write, wstart, wend) = match self.probe(lock, &held, pause) {
            Ok(done) => done,
            Err(e) => {
                self.error(lock, "probe", &e)?;
                ("err", 0, 0)
            }
        };
        let exit = mono_ns();
        let outcome = self.release(lock, held)?;
        let token = token.map_or("-".to_owned(), |t| t.to_string());
        let (p, t) = (self.w.process, self.thread);
        self.log(format!(
            "S\t{p}\t{t}\t{lock}\t{token}\t{enter}\t{exit}\t{outcome}\t{write}\t{wstart}\t{wend}"
        ))
    }

    /// The lost-update probe. Returns the write's result and its start and end times.
    fn probe(&mut self, lock: &str, held: &Held, pause: Duration) -> Res<(&'static str, u64, u64)> {
        let key = counter_name(lock);
        if let Held::Guard(g) = held {
            if g.token().is_some() {
                let resource = self.resource.fenced_resource(&key);
                let value = resource
                    .read()?
                    .map_or(Ok(0), |v| String::from_utf8_lossy(&v).parse::<i64>())?;
                thread::sleep(pause);
                let start = mono_ns();
                let written = resource.write(g, (value + 1).to_string());
                let end = mono_ns();
                return Ok(match written {
                    Ok(()) => ("acc", start, end),
                    Err(e) if e.is_stale_token() => ("rej", start, end),
                    Err(e) => return Err(e.into()),
                });
            }
        }
        let value: Option<i64> = redis::cmd("GET").arg(&key).query(&mut self.probe)?;
        thread::sleep(pause);
        let start = mono_ns();
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(value.unwrap_or(0) + 1)
            .query(&mut self.probe)?;
        Ok(("acc", start, mono_ns()))
    }
}
