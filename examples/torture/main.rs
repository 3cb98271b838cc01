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
//! back plus one; for `fenced` (and `election`) the counter is a `FencedResource` read for
//! update and written with the holder's token, so a stale holder's read or write is refused.
//! At the end each counter must equal the writes that completed.
//!
//! Kind `deadlock` (see `deadlock.rs`) takes two or three locks a round, in random order,
//! with `lock()` and no wait bound, so that threads of different processes close cycles of
//! waits; the library must break each (one wait ends with `Error::Deadlock`, its thread
//! releases and goes on) within a bound, and with `--ordered` (every thread takes its locks
//! in one order) report none. Every hold is a section, checked for overlaps as above.
//!
//! Kind `group` (see `group.rs`) takes a subset of a group's values with `group_lock`, and
//! logs a section per value, so that each value is checked as a lock of its own.
//!
//! Kind `rate` (see `rate.rs`) makes each lock a rate limiter of `--rate` permits per
//! `--interval-ms`, which every thread takes 1 to 3 permits of over and over, logging each
//! grant with the server's time of it. The checker (see `rate_check.rs`) finds no window of
//! an interval of server time holding more than the rate (a window near a kill, which loses
//! the limiter with the server's data, is excused and reported with its excess), and, under
//! saturating demand away from faults, throughput of at least 90% of the rate. Kind
//! `rate-broken` checks, then takes, in separate calls: the checker must find windows over
//! the rate.
//!
//! Kind `preempt` (see `preempt.rs`) takes fenced locks back: a thread waits with a
//! priority, preempts a holder with a grace, steals, or asks; a holder honours notices or
//! ignores them. The checker (see `preempt_check.rs`) matches every forced release with its
//! victim and preemptor: the victim was told before, its hold came first, an honouring
//! victim was not forced within its grace, and it was told of the loss within a renewal
//! period; every loss to a preemptor is on record, and waiters are served within their
//! aging allowance. Kind `preempt-broken` force-unlocks whoever holds the lock after the
//! grace: the checker must find holds lost with no record, and overlaps.

#[path = "../../tests/support/mod.rs"]
mod support;

mod acquires;
mod buffer_check;
mod check;
mod condition;
mod deadlock;
mod deadlock_check;
mod election;
mod election_check;
mod group;
mod preempt;
mod preempt_check;
mod proxy;
mod rate;
mod rate_check;

use std::fs::File;
use std::io::{BufRead, BufReader, LineWriter, Write as _};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use check::{FAULTS, PROXY_FAULTS, RATE_KINDS};
use redlatch::{Client, Config, RedLock};
use support::RedisServer;

const USAGE: &str = "\
usage: torture [run] [OPTIONS]       run, then check (exit 1 on a violation)
       torture check DIR [--json]    check the logs of an earlier run

  --kind K            reentrant (default), fair, rw-write, fenced, redlock, non-reentrant,
                      spin; rw (read-write, a third of the sections writers: readers may
                      overlap each other, never a writer); semaphore and expirable (each
                      lock a semaphore of --permits permits, one taken per section, the
                      expirable one renewed: never more holders than permits, and every
                      permit back at the end); latch (rounds of a count-down latch of
                      --permits counts per lock: a thread counts down or awaits; nobody may
                      pass before that many count-downs began); condition (each lock a
                      bounded buffer of --permits items with conditions not_full and
                      not_empty, even threads producing, odd ones consuming: no item lost
                      or taken twice, the buffer never over, no consumer waiting while an
                      item sits unclaimed for two leases); election (each lock an election:
                      threads campaign, a leader updates the fenced probe with its term
                      (read for update, write) and resigns; an observer per lock and
                      process logs every leader it sees: the sequences must agree with
                      the leaders and rise); deadlock (each
                      round a thread takes 2 or 3 of the locks, reentrant, in random order,
                      with lock() and no wait bound, probing each, then releases them; a
                      wait chosen to break a cycle of waits ends with Error::Deadlock, and
                      its thread releases what it holds and goes on: every hold checked as
                      reentrant's, every cycle broken within 7 x --check-ms + 1 s, every
                      lock() call within --wait-ms, every process completing rounds);
                      group (each lock a group of 6 values, group_lock: a section takes
                      1 to 3 of one group's values with the wait bound and probes each,
                      one counter per value: every value checked as a lock of its own); rate
                      (each lock a rate limiter of --rate permits per --interval-ms, set with
                      try_set_rate(Overall): a thread takes 1 to 3 permits of one, with
                      acquire or, one call in four, try_acquire_for the wait bound, logging
                      each grant's server time; a call that finds the rate gone (a kill lost
                      it) sets it again: no window of an interval of server time over the
                      rate, unless a kill was near it (reported with its excess), and under
                      saturating demand away from faults at least 90% of the rate admitted);
                      and three broken ones that the checker must catch: broken (SET NX PX
                      10 and an unconditional DEL), short-lease (a 10 ms lease, no watchdog)
                      and rate-broken (a rate limiter that reads what the last interval took,
                      then adds its own, in separate calls)
  --ordered           kind deadlock: every thread takes its locks in one order (by name), so
                      no cycle can form: any deadlock reported is a violation
  --check-ms N        kind deadlock: the clients' deadlock_check_after (default 100)
  --permits N         a semaphore kind's permits (default 2)
  --rate N            the rate kinds: each limiter's permits per interval (default 50: a
                      waiter asks for up to 3, so up to 2 may sit unused, 4% of 50)
  --interval-ms N     the rate kinds: the limiters' interval (default 1000)
  --seconds S         how long the workers run (default 20)
  --processes P       worker processes (default 3)
  --threads T         threads per process (default 4)
  --locks L           shared locks (default 3)
  --faults F          none (default), all, or a comma list of: kill, pause-holder,
                      pause-server, client-kill-pubsub, client-kill-normal, script-flush,
                      proxy-delay, proxy-blackhole, proxy-reset, drop-acquire (for 0.5-2 s
                      the proxy loses the request or, at random, the reply of up to 3
                      acquire script calls, resetting each one's connection: the acquire is
                      in doubt, settled later; kind group: the thread's next section takes
                      the failed values and one more, held for a quarter of a lease)
  --fault-every-ms N  mean time between faults (default 2000)
  --seed N            seeds the fault schedule and the workers' choices (default 1)
  --lease-ms N        the watchdog timeout (default 30000 without faults, 2000 with)
  --work-ms N         the probe pauses 0..=N ms between its read and its write (default 2)
  --wait-ms N         a thread gives up waiting for a lock after N ms (default 20000); kind
                      deadlock: a lock() call blocked longer is a violation, unless a fault
                      met it and it ended within N + 2 leases + 2 s; the rate kinds: the
                      bound of try_acquire_for (its running out is no finding)
  --slow on|off       thread 0 of each worker takes a lock of its own, torture:lock:slow,
                      and holds it for 1-3 leases, so that the watchdog renews inside
                      sections (default on with faults and 2 threads or more; never for
                      kind deadlock, whose holds span waits, nor the rate kinds)
  --priorities on|off every wait has a priority of 0 to 3, logged, and the checker bounds
                      who is served before whom by the aging allowance (kinds reentrant,
                      fenced, fair, semaphore and expirable; default off)
  --java-workers N    also start N worker processes on real Redisson (Java, from
                      tests/java-peer, built with Maven if needed) on the same locks, for
                      kinds reentrant, fair, fenced and rate (default 0)
  --java-redisson V   the Redisson version of the Java workers (default 4.7.0)
  --java-held-check on|off  a Java worker asks isHeldByCurrentThread() right after each
                      section, its only way to learn that its hold was lost before the
                      unlock (default on)
  --dir DIR           where the logs go (default: a new /tmp/redlatch-torture-<pid>)
  --json              print the report as one JSON line too";

const KINDS: &[&str] = &[
    "reentrant",
    "fair",
    "rw-write",
    "fenced",
    "redlock",
    "non-reentrant",
    "spin",
    "rw",
    "semaphore",
    "expirable",
    "latch",
    "condition",
    "election",
    "deadlock",
    "group",
    "rate",
    "broken",
    "short-lease",
    "rate-broken",
    "preempt",
    "preempt-broken",
];

/// The kinds whose locks are semaphores.
const SEMAPHORE_KINDS: &[&str] = &["semaphore", "expirable"];

/// The kinds a Java (Redisson) worker runs.
const JAVA_KINDS: &[&str] = &["reentrant", "fair", "fenced", "rate"];

/// The kinds whose waits may have a priority (`--priorities on`).
const PRIORITY_KINDS: &[&str] = &["reentrant", "fenced", "fair", "semaphore", "expirable"];

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        say(USAGE);
        return ExitCode::SUCCESS;
    }
    let result = match args.first().map(String::as_str) {
        Some("worker") => worker(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some("check") => check_cmd(&args[1..]),
        Some("run") => run(&args[1..]),
        _ => run(&args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("torture: {e}");
        ExitCode::from(2)
    })
}

/// Prints `text` and a newline on stdout. A reader that went away (`torture --help | head
/// -1`: a closed pipe) or any other failure to write ends nothing: what is left is not
/// printed, and the exit status stays what the run or the check says.
fn say(text: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
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
    /// Thread 0 of each worker holds `torture:lock:slow` for 1-3 leases at a time, so that
    /// renewals run inside sections; default on with faults (and 2 threads or more).
    slow: Option<bool>,
    dir: Option<PathBuf>,
    json: bool,
    /// Worker processes on real Redisson beside the Rust ones (`--java-workers`).
    java_workers: u32,
    java_redisson: String,
    java_held_check: bool,
    /// A semaphore kind's permits.
    permits: u32,
    /// Kind `deadlock`: every thread takes its locks in one order (`--ordered`).
    ordered: bool,
    /// Kind `deadlock`: the clients' `deadlock_check_after`, in ms.
    check_ms: u64,
    /// The rate kinds: each limiter's permits per interval, and the interval in ms.
    rate: u64,
    interval_ms: u64,
    /// Every wait has a priority (`--priorities on`).
    priorities: bool,
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
        slow: None,
        priorities: false,
        dir: None,
        json: false,
        java_workers: 0,
        java_redisson: "4.7.0".into(),
        java_held_check: true,
        permits: 2,
        ordered: false,
        check_ms: 100,
        rate: 50,
        interval_ms: 1000,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--json" {
            o.json = true;
            continue;
        }
        if flag == "--ordered" {
            o.ordered = true;
            continue;
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
            "--seconds" => o.seconds = num()?.min(7 * 24 * 3600),
            "--processes" => o.processes = num()?.clamp(1, 64) as u32,
            "--threads" => o.threads = num()?.clamp(1, 256) as u32,
            "--locks" => o.locks = num()?.clamp(1, 1000) as u32,
            "--fault-every-ms" => o.fault_every_ms = num()?.clamp(10, 3_600_000),
            "--seed" => o.seed = num()?,
            "--lease-ms" => o.lease_ms = num()?.min(3_600_000),
            "--work-ms" => o.work_ms = num()?.min(600_000),
            "--wait-ms" => o.wait_ms = num()?.clamp(1, 3_600_000),
            "--permits" => o.permits = num()?.clamp(1, 1000) as u32,
            "--check-ms" => o.check_ms = num()?.clamp(1, 600_000),
            "--rate" => o.rate = num()?.clamp(1, 1_000_000),
            "--interval-ms" => o.interval_ms = num()?.clamp(1, 3_600_000),
            "--slow" => {
                o.slow = Some(match value.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("--slow: `{value}` is not on or off").into()),
                })
            }
            "--priorities" => {
                o.priorities = match value.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("--priorities: `{value}` is not on or off").into()),
                }
            }
            "--dir" => o.dir = Some(PathBuf::from(value)),
            "--java-workers" => o.java_workers = num()?.min(64) as u32,
            "--java-redisson" => o.java_redisson = value.clone(),
            "--java-held-check" => {
                o.java_held_check = match value.as_str() {
                    "on" => true,
                    "off" => false,
                    _ => {
                        return Err(format!("--java-held-check: `{value}` is not on or off").into())
                    }
                }
            }
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
        o.lease_ms = if preempt::PREEMPT_KINDS.contains(&o.kind.as_str()) {
            // A holder is told at its renewals: every 300 ms.
            900
        } else if o.faults.is_empty() {
            30_000
        } else {
            2_000
        };
    }
    o.lease_ms = o.lease_ms.max(100);
    if o.kind == "deadlock" {
        if o.slow == Some(true) {
            let why = "its holds span its waits, renewed inside sections already";
            return Err(format!("--slow on: kind deadlock has no slow thread ({why})").into());
        }
        o.slow = Some(false);
    } else if o.ordered {
        return Err(format!("--ordered is for kind deadlock, not `{}`", o.kind).into());
    }
    if RATE_KINDS.contains(&o.kind.as_str()) {
        if o.slow == Some(true) {
            let why = "a limiter has no holder to renew";
            return Err(format!("--slow on: the rate kinds have no slow thread ({why})").into());
        }
        o.slow = Some(false);
    }
    if o.java_workers > 0 && !JAVA_KINDS.contains(&o.kind.as_str()) {
        return Err(format!(
            "--java-workers: Java workers run kinds {JAVA_KINDS:?}, not `{}`",
            o.kind
        )
        .into());
    }
    if o.priorities && !PRIORITY_KINDS.contains(&o.kind.as_str()) {
        return Err(format!(
            "--priorities on: waits with a priority are for kinds {PRIORITY_KINDS:?}, not `{}`",
            o.kind
        )
        .into());
    }
    if o.slow.is_none() {
        o.slow = Some(!o.faults.is_empty() && o.threads >= 2);
    }
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
    say(&r);
    if json {
        say(check::json(&r));
    }
    if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--faults` as given to a worker: `none` or the list.
fn faults_arg(faults: &[String]) -> String {
    if faults.is_empty() {
        "none".to_owned()
    } else {
        faults.join(",")
    }
}

fn lock_name(i: u32) -> String {
    format!("torture:lock:{i}")
}

/// Kind `latch`: moves `KEYS[1]` (a lock's round) from `ARGV[1]` to the next, whose latch
/// `KEYS[2]` is made first with count `ARGV[2]` (a Redisson latch: a STRING count).
const NEXT_ROUND: &str = "\
local round = tonumber(redis.call('get', KEYS[1]) or '0');
if round == tonumber(ARGV[1]) then
    redis.call('set', KEYS[2], ARGV[2], 'nx');
    redis.call('set', KEYS[1], round + 1);
end";

/// The slow thread's lock.
const SLOW_LOCK: &str = "torture:lock:slow";

/// Every lock of a run: the shared ones and, with `--slow on`, the slow one.
fn lock_names(o: &Opts) -> Vec<String> {
    let mut names: Vec<String> = (0..o.locks).map(lock_name).collect();
    if o.slow == Some(true) {
        names.push(SLOW_LOCK.to_owned());
    }
    names
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
        if path
            .file_name()
            .is_some_and(|n| check::is_log_name(&n.to_string_lossy()))
        {
            std::fs::remove_file(path)?;
        }
    }

    let nodes = if o.kind == "redlock" { 3 } else { 1 };
    let mut servers: Vec<RedisServer> = (0..nodes)
        .map(|_| RedisServer::with_args(&["--appendonly", "no"]))
        .collect();
    let resource = RedisServer::new();
    let proxy = if o.faults.iter().any(|f| PROXY_FAULTS.contains(&f.as_str())) {
        Some(proxy::Proxy::start(servers[0].addr())?)
    } else {
        None
    };
    let mut urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    if let Some(p) = &proxy {
        urls[0] = format!("redis://{}/", p.addr());
    }
    eprintln!(
        "torture: kind {}, {} s, {} processes ({} on Redisson) x {} threads, {} locks, faults \
         {:?}, seed {}, lease {} ms; logs in {}",
        o.kind,
        o.seconds,
        o.processes + o.java_workers,
        o.java_workers,
        o.threads,
        o.locks,
        o.faults,
        o.seed,
        o.lease_ms,
        dir.display()
    );

    // The Java workers first: a JVM takes seconds to start, and the run's clock starts once
    // every one of them is connected.
    let (mut java, java_stdins) = if o.java_workers > 0 {
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        start_java_workers(&o, &urls, &resource.url(), &dir)?
    } else {
        (Workers(Vec::new()), Vec::new())
    };

    let exe = std::env::current_exe()?;
    let mut workers = Workers(Vec::new());
    for p in 0..o.processes {
        let mut cmd = Command::new(&exe);
        cmd.arg("worker")
            .args(["--proc", &p.to_string()])
            .args(["--threads", &o.threads.to_string()])
            .args(["--processes", &o.processes.to_string()])
            .args(["--locks", &o.locks.to_string()])
            .args(["--seconds", &o.seconds.to_string()])
            .args(["--kind", &o.kind])
            .args(["--lease-ms", &o.lease_ms.to_string()])
            .args(["--work-ms", &o.work_ms.to_string()])
            .args(["--wait-ms", &o.wait_ms.to_string()])
            .args(["--permits", &o.permits.to_string()])
            .args(["--check-ms", &o.check_ms.to_string()])
            .args(["--rate", &o.rate.to_string()])
            .args(["--interval-ms", &o.interval_ms.to_string()])
            .args(["--faults", &faults_arg(&o.faults)])
            .args(["--slow", if o.slow == Some(true) { "on" } else { "off" }])
            .args(["--priorities", if o.priorities { "on" } else { "off" }])
            .args(["--seed", &o.seed.wrapping_add(u64::from(p)).to_string()])
            .args(["--resource", &resource.url()])
            .args(["--out", &dir.join(format!("w{p}.tsv")).to_string_lossy()]);
        for u in &urls {
            cmd.args(["--url", u]);
        }
        if o.ordered {
            cmd.arg("--ordered");
        }
        // A worker dies with the runner, even one killed without a chance to clean up.
        // SAFETY: prctl is async-signal-safe, and the closure touches nothing else.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        workers.0.push(cmd.spawn()?);
    }
    // Worker p logs to w<p>.tsv: the Rust ones are 0.., the Java ones after them.
    workers.0.append(&mut java.0);
    let until_ns = mono_ns() + o.seconds * 1_000_000_000;
    for mut stdin in java_stdins.iter() {
        writeln!(stdin, "go {until_ns}")?;
    }

    let mut log = vec![
        format!("K\t{}", o.kind),
        format!("P\t{}\t{}", o.lease_ms, o.wait_ms),
    ];
    if SEMAPHORE_KINDS.contains(&o.kind.as_str()) || o.kind == "latch" || o.kind == "condition" {
        log.push(format!("Q\t{}", o.permits));
    }
    if o.kind == "deadlock" {
        let order = if o.ordered { "ordered" } else { "unordered" };
        log.push(format!("H\t{}\t{order}", o.check_ms));
    }
    if RATE_KINDS.contains(&o.kind.as_str()) {
        log.push(format!("V\t{}\t{}", o.rate, o.interval_ms));
    }
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
            locks: lock_names(&o),
            ids: Default::default(),
            inspector: None,
            permits: SEMAPHORE_KINDS
                .contains(&o.kind.as_str())
                .then(PermitHolders::default),
            holderless: RATE_KINDS.contains(&o.kind.as_str()),
        };
        loop {
            let gap = rng.range(o.fault_every_ms / 2, o.fault_every_ms * 3 / 2);
            thread::sleep(Duration::from_millis(gap));
            // Leave room for the longest fault (a holder paused past its lease) to end
            // before the workers stop.
            let longest = env.lease + Duration::from_secs(3);
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
            match env.inject(class, &mut rng) {
                Some(detail) => {
                    log.push(format!("F\t{class}\t{start}\t{}\t{detail}", mono_ns()));
                    injected += 1;
                }
                None => eprintln!("torture: {class} had nothing to act on; not counted"),
            }
        }
        for &pid in &pids {
            signal(pid, libc::SIGCONT);
        }
    }

    // Workers finish the cycle they are in; one that outlives its time by far is hung. A
    // deadlock worker finishes its round (up to 3 calls), or reports a call blocked 5 s past
    // its bound and gives up (see `deadlock.rs`).
    let wait = if o.kind == "deadlock" {
        3 * deadlock::call_bound_ms(&o) + deadlock::stuck_after_ms(&o)
    } else {
        o.wait_ms
    };
    let patience =
        deadline + Duration::from_millis(wait + 4 * o.lease_ms) + Duration::from_secs(30);
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

    if SEMAPHORE_KINDS.contains(&o.kind.as_str()) {
        // Every permit back: what the semaphores have once the workers are gone.
        let client = Client::open(servers[0].url())?;
        for name in lock_names(&o) {
            let available = if o.kind == "semaphore" {
                client.semaphore(&name).available_permits()?
            } else {
                client
                    .permit_expirable_semaphore(&name)
                    .available_permits()?
            };
            log.push(format!("A\t{name}\t{available}"));
        }
    }
    if preempt::PREEMPT_KINDS.contains(&o.kind.as_str()) {
        // Each lock's log of revocations (the workers log the forced releases they made
        // too: a kill takes the log away).
        let mut lock_conn = servers[0].conn();
        for name in lock_names(&o) {
            log.extend(preempt::log_lines(&mut lock_conn, &name)?);
        }
    }
    let mut conn = resource.conn();
    if o.kind == "condition" {
        // The items still in each buffer.
        for name in lock_names(&o) {
            let left: Vec<String> = redis::cmd("LRANGE")
                .arg(condition::buffer_name(&name))
                .arg(0)
                .arg(-1)
                .query(&mut conn)?;
            log.extend(left.iter().map(|item| format!("R\t{name}\t{item}")));
        }
    }
    // Kind `group`: a counter per value, named as the log names the value; the rate kinds
    // probe nothing.
    let probed = if o.kind == "group" {
        group::value_locks(&lock_names(&o))
    } else if RATE_KINDS.contains(&o.kind.as_str()) {
        Vec::new()
    } else {
        lock_names(&o)
    };
    for name in probed {
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

/// Starts the `--java-workers` processes (worker numbers `processes..`) and waits until each
/// is connected and has logged its client id. They start running on a line `go UNTIL_NS`
/// on their stdin, and halt when it closes: keep the returned handles until the end.
fn start_java_workers(
    o: &Opts,
    urls: &[&str],
    resource: &str,
    dir: &Path,
) -> Res<(Workers, Vec<std::process::ChildStdin>)> {
    let cp = java_class_path(&o.java_redisson)?;
    // The fence scripts as `src/scripts.rs` makes them: the prelude, then the operation's own.
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
    let fence = |file: &str| lua.join(file).to_string_lossy().into_owned();
    let (mut workers, mut stdins) = (Workers(Vec::new()), Vec::new());
    let (tx, rx) = std::sync::mpsc::channel();
    for j in 0..o.java_workers {
        let p = o.processes + j;
        let mut cmd = Command::new("java");
        cmd.args(support::java::JVM_FLAGS)
            .arg("-cp")
            .arg(&cp)
            .arg("redlatch.peer.TortureWorker")
            .args(["--proc", &p.to_string()])
            .args(["--threads", &o.threads.to_string()])
            .args(["--locks", &o.locks.to_string()])
            .args(["--kind", &o.kind])
            .args(["--lease-ms", &o.lease_ms.to_string()])
            .args(["--work-ms", &o.work_ms.to_string()])
            .args(["--wait-ms", &o.wait_ms.to_string()])
            .args(["--rate", &o.rate.to_string()])
            .args(["--interval-ms", &o.interval_ms.to_string()])
            .args(["--seed", &o.seed.wrapping_add(u64::from(p)).to_string()])
            .args(["--url", urls[0]])
            .args(["--resource", resource])
            .args(["--out", &dir.join(format!("w{p}.tsv")).to_string_lossy()])
            .args(["--fence-prelude", &fence("fence_common.lua")])
            .args(["--fence-script", &fence("fenced_write.lua")])
            .args(["--fence-read-script", &fence("fenced_read.lua")])
            .args(["--held-check", if o.java_held_check { "on" } else { "off" }])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        // As the Rust workers: dies with the runner (and halts when its stdin closes).
        // SAFETY: prctl is async-signal-safe, and the closure touches nothing else.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        stdins.push(child.stdin.take().expect("piped"));
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        workers.0.push(child);
        let tx = tx.clone();
        thread::spawn(move || {
            let ready = stdout
                .lines()
                .map_while(|l| l.ok())
                .any(|l| l.trim() == "ready");
            let _ = tx.send((p, ready));
        });
    }
    let until = Instant::now() + Duration::from_secs(180);
    for _ in 0..o.java_workers {
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((_, true)) => {}
            Ok((p, false)) => {
                return Err(format!("Java worker {p} exited before it was connected").into())
            }
            Err(_) => return Err("the Java workers did not start within 180 s".into()),
        }
    }
    Ok((workers, stdins))
}

/// The class path of the Java worker on Redisson `version` (tests/java-peer, built first
/// where needed, as the interop tests build it).
fn java_class_path(version: &str) -> Res<String> {
    if let Some(why) = support::java::missing() {
        return Err(format!("--java-workers: {why}").into());
    }
    eprintln!("torture: the Java worker on Redisson {version} (tests/java-peer)");
    Ok(support::java::build(version)?)
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
    locks: Vec<String>,
    /// Worker client id -> worker index.
    ids: std::collections::HashMap<String, usize>,
    /// A client on the first lock server (direct), to find holders.
    inspector: Option<Client>,
    /// For the semaphore kinds, whose permits name no owner: who holds one, from the
    /// workers' logs.
    permits: Option<PermitHolders>,
    /// The rate kinds: nobody holds a limiter (pause-holder pauses a worker at random).
    holderless: bool,
}

/// The threads holding a permit now, as the workers' logs say: a `G` line (taken) not yet
/// followed by that thread's `S` line (the section over). Each log is read on from where the
/// last look stopped.
#[derive(Default)]
struct PermitHolders {
    /// Per worker: bytes of its log read, and its threads that hold a permit.
    logs: std::collections::HashMap<usize, (u64, std::collections::HashSet<String>)>,
}

impl PermitHolders {
    /// The workers (of `count`, logging in `dir`) with a thread that holds a permit.
    fn holders(&mut self, dir: &Path, count: usize) -> Vec<usize> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let mut found = Vec::new();
        for p in 0..count {
            let (read, holding) = self.logs.entry(p).or_default();
            if let Ok(mut file) = File::open(dir.join(format!("w{p}.tsv"))) {
                let mut text = String::new();
                if file.seek(SeekFrom::Start(*read)).is_ok()
                    && file.read_to_string(&mut text).is_ok()
                {
                    // Only whole lines: a line being written is read next time.
                    let whole = text.rfind('\n').map_or(0, |i| i + 1);
                    for line in text[..whole].lines() {
                        let f: Vec<&str> = line.split('\t').collect();
                        match f.first() {
                            Some(&"G") if f.len() > 2 => {
                                holding.insert(f[2].to_owned());
                            }
                            Some(&"S") if f.len() > 2 => {
                                holding.remove(f[2]);
                            }
                            _ => {}
                        }
                    }
                    *read += whole as u64;
                }
            }
            if !holding.is_empty() {
                found.push(p);
            }
        }
        found
    }
}

impl FaultEnv<'_> {
    /// Injects one fault of `class` (on the first lock server, or the proxy in front of it),
    /// waits for it to end, and describes it; `None` if it had nothing to act on (the server
    /// did not answer the admin connection). Every random draw is made whatever happens, so
    /// a seed replays the same schedule of classes, gaps and durations.
    fn inject(&mut self, class: &str, rng: &mut Rng) -> Option<String> {
        let ms = |rng: &mut Rng, lo, hi| Duration::from_millis(rng.range(lo, hi));
        let (short, long, pick) = (ms(rng, 100, 800), ms(rng, 500, 2000), rng.next());
        match class {
            "kill" => {
                let server = &mut self.servers[0];
                server.kill();
                thread::sleep(short);
                server.restart();
                Some(format!("kill -9, restarted after {short:?} (data lost)"))
            }
            "pause-holder" => Some(self.pause_holder(pick as usize, self.lease + long)),
            "pause-server" => {
                let server = &self.servers[0];
                server.stop();
                thread::sleep(short);
                server.cont();
                Some(format!("SIGSTOP server for {short:?}"))
            }
            "client-kill-pubsub" | "client-kill-normal" => {
                let kind = class.trim_start_matches("client-kill-");
                let mut c = self.servers[0].try_conn()?;
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg(kind)
                    .query(&mut c)
                    .ok()?;
                Some(format!("CLIENT KILL TYPE {kind}: {killed} connections"))
            }
            "script-flush" => {
                let mut c = self.servers[0].try_conn()?;
                redis::cmd("SCRIPT").arg("FLUSH").exec(&mut c).ok()?;
                Some("SCRIPT FLUSH".to_owned())
            }
            "proxy-delay" => {
                let delay = short / 10;
                self.with_proxy(proxy::Mode::Delay(delay), long)?;
                Some(format!(
                    "proxy delays every chunk by {delay:?} for {long:?}"
                ))
            }
            "proxy-blackhole" => {
                let span = short + short / 2;
                self.with_proxy(proxy::Mode::Blackhole, span)?;
                Some(format!("proxy blackholes for {span:?}"))
            }
            "proxy-reset" => {
                let n = self.proxy?.reset();
                Some(format!("proxy reset {n} connections"))
            }
            "drop-acquire" => {
                // Up to 3 acquires, each losing its request or its reply by a bit of `pick`.
                let n = 1 + (pick % 3) as usize;
                let plan = (0..n)
                    .map(|i| match (pick >> (8 + i)) & 1 {
                        0 => proxy::Lose::Request,
                        _ => proxy::Lose::Reply,
                    })
                    .collect();
                let p = self.proxy?;
                let hashes = acquires::acquire_hashes();
                p.lose_requests_containing(
                    hashes.into_iter().map(String::into_bytes).collect(),
                    plan,
                );
                thread::sleep(long);
                match p.disarm() {
                    (0, 0) => None,
                    (requests, replies) => Some(format!(
                        "proxy lost {requests} acquire requests and {replies} acquire replies \
                         (of up to {n}) in {long:?}, each resetting its connection"
                    )),
                }
            }
            other => unreachable!("fault classes are checked at parse: {other}"),
        }
    }

    /// SIGSTOPs a worker process that holds a lock, for `paused`. The holder is found by
    /// inspecting the locks; as it may have released by the time the signal lands, the
    /// stopped process is checked again and resumed if it holds nothing, up to 20 tries;
    /// then worker `pick` is paused anyway (at once for the rate kinds).
    fn pause_holder(&mut self, pick: usize, paused: Duration) -> String {
        // A rate limiter has no holder to find.
        let tries = if self.holderless { 0 } else { 20 };
        for _ in 0..tries {
            let Some(p) = self.holder() else {
                thread::sleep(Duration::from_millis(50));
                continue;
            };
            let pid = self.workers[p];
            signal(pid, libc::SIGSTOP);
            if self.holder_set().contains(&p) {
                thread::sleep(paused);
                signal(pid, libc::SIGCONT);
                return format!("SIGSTOP holder worker {p}, pid {pid}, for {paused:?}");
            }
            signal(pid, libc::SIGCONT);
        }
        let p = pick % self.workers.len();
        let pid = self.workers[p];
        signal(pid, libc::SIGSTOP);
        thread::sleep(paused);
        signal(pid, libc::SIGCONT);
        format!("SIGSTOP worker {p} (no holder caught), pid {pid}, for {paused:?}")
    }

    /// A worker process that holds one of the locks now.
    fn holder(&mut self) -> Option<usize> {
        self.holder_set().into_iter().next()
    }

    /// The worker processes holding a lock now, found by inspecting the locks on the (first)
    /// lock server and matching holders' client ids with the ids the workers logged (`I`
    /// lines, read once).
    fn holder_set(&mut self) -> Vec<usize> {
        if let Some(permits) = &mut self.permits {
            return permits.holders(self.dir, self.workers.len());
        }
        if self.ids.len() < self.workers.len() {
            self.ids.clear();
            for p in 0..self.workers.len() {
                let Ok(file) = File::open(self.dir.join(format!("w{p}.tsv"))) else {
                    return Vec::new();
                };
                let mut first = String::new();
                let _ = BufReader::new(file).read_line(&mut first);
                if let Some(id) = first.trim_end().split('\t').nth(2) {
                    self.ids.insert(id.to_owned(), p);
                }
            }
        }
        if self.inspector.is_none() {
            self.inspector = Config::builder(self.servers[0].url().as_str())
                .connect_timeout(Duration::from_millis(500))
                .response_timeout(Duration::from_millis(500))
                .build()
                .and_then(Client::new)
                .ok();
        }
        let Some(inspector) = &self.inspector else {
            return Vec::new();
        };
        let mut found: Vec<usize> = self
            .locks
            .iter()
            .filter_map(|name| inspector.inspect(name).ok().flatten())
            .flat_map(|seen| seen.holders)
            .filter_map(|h| self.ids.get(&h.owner.client_id).copied())
            .collect();
        found.dedup();
        found
    }

    fn with_proxy(&self, mode: proxy::Mode, span: Duration) -> Option<()> {
        let p = self.proxy?;
        p.set_mode(mode);
        thread::sleep(span);
        p.set_mode(proxy::Mode::Pass);
        Some(())
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
        if flag == "--ordered" {
            rest.push(flag.clone());
            continue;
        }
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
            let mut config =
                Config::builder(u.as_str()).watchdog_timeout(Duration::from_millis(w.run.lease_ms));
            if w.run.kind == "deadlock" {
                config = config.deadlock_check_after(Duration::from_millis(w.run.check_ms));
            }
            Client::new(config.build()?)
        })
        .collect::<redlatch::Result<_>>()?;
    let resource = Client::open(&w.resource)?;
    // Who this process is, for the runner's pause-holder fault.
    writeln!(out.lock(), "I\t{}\t{}", w.process, clients[0].id())?;
    let deadline = Instant::now() + Duration::from_secs(w.run.seconds);
    let in_flight: Arc<deadlock::InFlight> =
        Arc::new(parking_lot::Mutex::new(vec![None; w.run.threads as usize]));
    let threads: Vec<_> = (0..w.run.threads)
        .map(|t| {
            let (w, out, clients, resource, in_flight) = (
                Arc::clone(&w),
                Arc::clone(&out),
                clients.clone(),
                resource.clone(),
                Arc::clone(&in_flight),
            );
            thread::spawn(move || -> Res<()> {
                let mut rng = Rng(w.run.seed.wrapping_mul(1000).wrapping_add(u64::from(t)));
                let mut th = Thread {
                    w: &w,
                    thread: t,
                    clients: &clients,
                    resource,
                    probe: redis::Client::open(w.resource.as_str())?.get_connection()?,
                    raw_lock: None,
                    out: &out,
                    in_flight: &in_flight,
                    doubted: None,
                    priority: None,
                };
                let slow = t == 0
                    && w.run.slow == Some(true)
                    && !matches!(w.run.kind.as_str(), "latch" | "condition")
                    && !preempt::PREEMPT_KINDS.contains(&w.run.kind.as_str());
                let mut made = 0;
                if RATE_KINDS.contains(&w.run.kind.as_str()) {
                    th.rate_setup()?;
                }
                while Instant::now() < deadline {
                    if w.run.kind == "condition" {
                        // Threads numbered across processes, in pairs of a producer and a
                        // consumer, each pair on one lock: every lock in use has both (a
                        // thread moving between locks could leave producers at a full buffer
                        // and consumers at an empty one, all waiting). An odd last thread
                        // joins the first pair's lock.
                        let g = w.process * w.run.threads + t;
                        let unpaired = g + 1 == w.run.processes * w.run.threads && g % 2 == 0;
                        let lock = lock_name(if unpaired { 0 } else { g / 2 % w.run.locks });
                        th.condition_cycle(&lock, g % 2 == 0, &mut made)?;
                        thread::sleep(Duration::from_micros(rng.range(0, 1000)));
                        continue;
                    }
                    if w.run.kind == "latch" {
                        let lock = lock_name(rng.range(0, u64::from(w.run.locks) - 1) as u32);
                        th.latch_cycle(&lock, rng.range(0, 1) == 0)?;
                        continue;
                    }
                    if w.run.kind == "group" {
                        let hold =
                            slow.then(|| Duration::from_millis(w.run.lease_ms * rng.range(1, 3)));
                        th.group_cycle(&mut rng, hold)?;
                        thread::sleep(Duration::from_micros(rng.range(0, 1000)));
                        continue;
                    }
                    if slow {
                        let hold = w.run.lease_ms * rng.range(1, 3);
                        th.cycle(SLOW_LOCK, Duration::from_millis(hold), false)?;
                        continue;
                    }
                    if preempt::PREEMPT_KINDS.contains(&w.run.kind.as_str()) {
                        th.preempt_round(&mut rng)?;
                        continue;
                    }
                    if RATE_KINDS.contains(&w.run.kind.as_str()) {
                        th.rate_cycle(&mut rng)?;
                        thread::sleep(Duration::from_micros(rng.range(0, 1000)));
                        continue;
                    }
                    if w.run.kind == "deadlock" {
                        th.deadlock_round(&mut rng)?;
                        thread::sleep(Duration::from_micros(rng.range(0, 1000)));
                        continue;
                    }
                    let lock = lock_name(rng.range(0, u64::from(w.run.locks) - 1) as u32);
                    let pause = Duration::from_millis(rng.range(0, w.run.work_ms));
                    // Kind `rw`: two readers to a writer.
                    let read = rng.range(0, 2) > 0;
                    th.priority = w
                        .run
                        .priorities
                        .then(|| rng.range(0, preempt::TOP_PRIORITY) as u32);
                    th.cycle(&lock, pause, read)?;
                    thread::sleep(Duration::from_micros(rng.range(0, 1000)));
                }
                Ok(())
            })
        })
        .collect();
    // Kind `election`: observers of every election, on a client of their own.
    let observers = if w.run.kind == "election" {
        let config = Config::builder(w.urls[0].as_str())
            .watchdog_timeout(Duration::from_millis(w.run.lease_ms))
            .build()?;
        let watching = Client::new(config)?;
        election::observers(&watching, w.process, w.run.locks, deadline, &out)
    } else {
        Vec::new()
    };
    if w.run.kind == "deadlock" {
        deadlock::await_threads(&w, &threads, &in_flight, &out)?;
    }
    for t in threads.into_iter().chain(observers) {
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
    /// Kind `deadlock`: each thread's lock() call in flight.
    in_flight: &'a deadlock::InFlight,
    /// Kind `group`: the group and values of this thread's last acquire, if it failed with
    /// an error (it may be in doubt): the next section overlaps it (see `group.rs`).
    doubted: Option<(String, Vec<u32>)>,
    /// With `--priorities on`: the priority of this round's wait.
    priority: Option<u32>,
}

/// A hold of whatever kind the run tests.
enum Held {
    Guard(redlatch::LockGuard),
    Multi(redlatch::MultiLockGuard),
    Permit(redlatch::SemaphoreGuard),
    Expirable(redlatch::PermitGuard),
    /// Kind `election`: a leadership (its guard: the election's fenced lock).
    Leader(Box<redlatch::Leadership>),
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

    /// Waits for `lock` (up to the wait bound), as the run's kind does it; `read`: a read
    /// hold, for kind `rw`.
    fn acquire(&mut self, lock: &str, read: bool) -> Res<Option<Held>> {
        let Some(priority) = self.priority else {
            return self.acquire_as_kind(lock, read);
        };
        let (p, t) = (self.w.process, self.thread);
        let start = mono_ns();
        let held = self.acquire_as_kind(lock, read);
        let end = mono_ns();
        if let Ok(got) = &held {
            let got = u8::from(got.is_some());
            self.log(format!(
                "Y\t{p}\t{t}\t{lock}\t{priority}\t{start}\t{end}\t{got}"
            ))?;
        }
        held
    }

    /// [`acquire`](Self::acquire), the wait itself.
    fn acquire_as_kind(&mut self, lock: &str, read: bool) -> Res<Option<Held>> {
        let wait = Duration::from_millis(self.w.run.wait_ms);
        let c = &self.clients[0];
        let ranked = |lock: redlatch::Lock| match self.priority {
            Some(p) => lock.with_priority(p),
            None => lock,
        };
        let guard = match self.w.run.kind.as_str() {
            "reentrant" => ranked(c.lock(lock)).try_lock_for(wait)?,
            "fair" => ranked(c.fair_lock(lock)).try_lock_for(wait)?,
            "non-reentrant" => c.non_reentrant_lock(lock).try_lock_for(wait)?,
            "spin" => c.spin_lock(lock).try_lock_for(wait)?,
            "rw-write" => c.read_write_lock(lock).write().try_lock_for(wait)?,
            "rw" if read => c.read_write_lock(lock).read().try_lock_for(wait)?,
            "rw" => c.read_write_lock(lock).write().try_lock_for(wait)?,
            "semaphore" => {
                // Set once; again after a data loss took the semaphore away.
                let semaphore = c.semaphore(lock);
                semaphore.try_set_permits(self.w.run.permits)?;
                let semaphore = match self.priority {
                    Some(p) => semaphore.with_priority(p),
                    None => semaphore,
                };
                return Ok(semaphore.try_acquire_for(1, wait)?.map(Held::Permit));
            }
            "expirable" => {
                let semaphore = c.permit_expirable_semaphore(lock);
                semaphore.try_set_permits(self.w.run.permits)?;
                let semaphore = match self.priority {
                    Some(p) => semaphore.with_priority(p),
                    None => semaphore,
                };
                return Ok(semaphore
                    .try_acquire_renewed_for(wait)?
                    .map(Held::Expirable));
            }
            "fenced" => ranked(c.fenced_lock(lock)).try_lock_for(wait)?,
            "election" => {
                let value = format!("{}.{}", self.w.process, self.thread);
                let won = c.election(lock).try_campaign_for(wait, value)?;
                return Ok(won.map(|l| Held::Leader(Box::new(l))));
            }
            "short-lease" => c
                .lock(lock)
                .with_lease(Duration::from_millis(10))
                .try_lock_for(wait)?,
            "redlock" => {
                let red = RedLock::new(self.clients.iter().map(|c| c.lock(lock)))?;
                return Ok(red.try_lock_for(wait)?.map(Held::Multi));
            }
            "broken" => {
                let acquired = self.broken_acquire(lock, wait);
                if acquired.is_err() {
                    self.raw_lock = None; // reconnect next time
                }
                return acquired;
            }
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

    /// Whether the library already says the hold is lost (checked at the section's exit).
    fn known_lost(held: &Held) -> bool {
        match held {
            Held::Guard(g) => g.is_lost(),
            Held::Leader(l) => l.is_lost(),
            Held::Multi(g) => g.is_lost(),
            Held::Expirable(g) => g.is_lost(),
            Held::Permit(g) => g.is_lost(),
            Held::Broken => false,
        }
    }

    /// Releases a hold: `ok`, `late` (the unlock said the hold was gone) or `err`.
    fn release(&mut self, lock: &str, held: Held) -> Res<&'static str> {
        let lost = |e: &redlatch::Error| {
            e.is_lock_lost() || e.is_not_held() || e.is_unknown_permit() || e.is_permits_lost()
        };
        let (result, held_members) = match held {
            Held::Guard(g) => (g.unlock(), 1),
            Held::Leader(l) => (l.resign(), 1),
            Held::Permit(g) => (g.release(), 1),
            Held::Expirable(g) => (g.release(), 1),
            Held::Multi(g) => {
                let members = g.held();
                (g.unlock(), members)
            }
            Held::Broken => {
                let deleted = self
                    .raw_lock()
                    .and_then(|c| Ok(redis::cmd("DEL").arg(lock).exec(c)?));
                if let Err(e) = deleted {
                    self.raw_lock = None;
                    self.error(lock, "unlock", &e)?;
                    return Ok("err");
                }
                return Ok("ok");
            }
        };
        Ok(match result {
            Ok(()) => "ok",
            // RedLock: lost only when too few members were still held for a quorum.
            Err(redlatch::Error::PartialUnlock { failures, .. })
                if failures.iter().any(|(_, e)| lost(e)) =>
            {
                let quorum = self.clients.len() / 2 + 1;
                let gone = failures.iter().filter(|(_, e)| lost(e)).count();
                if held_members.saturating_sub(gone) < quorum {
                    "late"
                } else {
                    "ok"
                }
            }
            Err(e) if lost(&e) => "late",
            Err(e) => {
                self.error(lock, "unlock", &e)?;
                "err"
            }
        })
    }

    /// One step of kind `latch` on the latches of `lock`: the current round's latch (its
    /// number kept on the lock server beside it) is counted down once (`count`) or awaited
    /// for up to 200 ms; a pass or a count-down is logged (`L`). Whoever finds the latch at
    /// zero starts the next round: its latch made with the run's count, then the round
    /// moved on, in one script, so that nobody finds a round without its latch.
    fn latch_cycle(&mut self, lock: &str, count: bool) -> Res<()> {
        if let Err(e) = self.latch_step(lock, count) {
            self.raw_lock = None; // reconnect next time
            self.error(lock, "latch", &e)?;
            // A dead server fails at once: do not spin.
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn latch_step(&mut self, lock: &str, count: bool) -> Res<()> {
        let c = self.clients[0].clone();
        let round_key = format!("{lock}:round");
        let round: Option<u64> = redis::cmd("GET").arg(&round_key).query(self.raw_lock()?)?;
        let round = round.unwrap_or(0);
        let name = format!("{lock}:{round}");
        let latch = c.count_down_latch(&name);
        if round == 0 {
            // The first round's latch (again after a data loss took the round away).
            latch.try_set_count(u64::from(self.w.run.permits))?;
        }
        let (p, t) = (self.w.process, self.thread);
        let start = mono_ns();
        if count {
            // Logged before it is sent: one whose reply is lost may still have counted.
            self.log(format!("L\t{p}\t{t}\t{name}\tc\t{start}\t{start}"))?;
            latch.count_down()?;
        } else if latch.await_for(Duration::from_millis(200))? {
            let end = mono_ns();
            self.log(format!("L\t{p}\t{t}\t{name}\ta\t{start}\t{end}"))?;
        }
        if latch.count()? == 0 {
            let next = format!("{lock}:{}", round + 1);
            let _: () = redis::cmd("EVAL")
                .arg(NEXT_ROUND)
                .arg(2)
                .arg(&round_key)
                .arg(&next)
                .arg(round)
                .arg(self.w.run.permits)
                .query(self.raw_lock()?)?;
        }
        Ok(())
    }

    /// Lock, probe (read the counter, pause, write it + 1), unlock; one log line. `read`: a
    /// reader of kind `rw`, which only pauses (as a semaphore's holder does).
    fn cycle(&mut self, lock: &str, pause: Duration, read: bool) -> Res<()> {
        let read = read && self.w.run.kind == "rw";
        let held = match self.acquire(lock, read) {
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
        if matches!(held, Held::Permit(_) | Held::Expirable(_)) {
            // Permits name no owner the runner could find: a holder says it holds, so that
            // the pause fault can catch it (the section's line, later, says it let go).
            let (p, t) = (self.w.process, self.thread);
            self.log(format!("G\t{p}\t{t}\t{lock}\t{enter}"))?;
        }
        let token = match &held {
            Held::Guard(g) => g.token(),
            Held::Leader(l) => Some(l.term()),
            _ => None,
        };
        let mode = match &held {
            Held::Permit(_) | Held::Expirable(_) => "p",
            _ if read => "r",
            _ if self.w.run.kind == "rw" => "w",
            _ => "x",
        };
        let shared = matches!(mode, "p" | "r");
        let probed = if shared {
            // Holders side by side may not write the counter: they only stay a while.
            thread::sleep(pause);
            Ok(("none", 0, 0))
        } else {
            self.probe(lock, &held, pause)
        };
        let (write, wstart, wend) = match probed {
            Ok(done) => done,
            Err(e) => {
                self.error(lock, "probe", &e)?;
                ("err", 0, 0)
            }
        };
        let exit = mono_ns();
        let lost_at_exit = Self::known_lost(&held);
        let released = self.release(lock, held)?;
        let outcome = if lost_at_exit { "lost" } else { released };
        let token = token.map_or("-".to_owned(), |t| t.to_string());
        let (p, t) = (self.w.process, self.thread);
        self.log(format!(
            "S\t{p}\t{t}\t{lock}\t{token}\t{enter}\t{exit}\t{outcome}\t{write}\t{wstart}\t{wend}\t{mode}"
        ))
    }

    /// The lost-update probe. Returns the write's result and its start and end times.
    fn probe(&mut self, lock: &str, held: &Held, pause: Duration) -> Res<(&'static str, u64, u64)> {
        let key = counter_name(lock);
        let guard = match held {
            Held::Guard(g) => Some(g),
            Held::Leader(l) => Some(l.guard()),
            _ => None,
        };
        if let Some(g) = guard {
            if g.token().is_some() {
                let resource = self.resource.fenced_resource(&key);
                // Read for update: fenced as the write is, and it claims the counter for this
                // token, so that no staler holder's write lands between the two.
                let start = mono_ns();
                let value = match resource.read_for_update(g) {
                    Ok(value) => value,
                    Err(e) if e.is_stale_token() => return Ok(("rej", start, mono_ns())),
                    Err(e) => return Err(e.into()),
                };
                let value = value.map_or(Ok(0), |v| String::from_utf8_lossy(&v).parse::<i64>())?;
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
