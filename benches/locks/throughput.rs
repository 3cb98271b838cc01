//! `throughput`: T threads, each locking and unlocking a lock of its own as fast as it can,
//! next to the raw side: Redisson's two lock scripts (`redisson_lock.lua`,
//! `redisson_unlock.lua` beside this file: what a Redisson client sends, call for call)
//! sent on one bare connection per thread, the best a client without batching can do; and,
//! for reference, the same T cycles sent by one thread as one pipeline of T acquires and one
//! of T unlocks on one connection: at 64 threads and more, about the most batching could give
//! (every command batched, no thread to wake); at a few threads not a bound (one connection
//! waits the round trips that threads overlap).
//! Also the raw two-script cycle that `solo` alternates with.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::{memory, raw_connection, server_cpu_us, Ctx, Json};

/// Thread counts run by default, in order.
const THREADS: &[usize] = &[1, 4, 16, 64, 256];
/// Each side runs this long per round; the rounds alternate: redlatch, raw, raw, redlatch, ...
const ROUND: Duration = Duration::from_millis(1500);
/// Rounds of each side unless `--rounds=N` says otherwise. On a machine whose speed drifts
/// (a shared VM), more rounds and the median of the per-round ratios are the steadier figure.
const ROUNDS: usize = 2;
/// With `--server-first`, the client threads run this many nice levels below the server (and
/// below the rest of the bench): the server, which shares the machine's CPUs with them, then
/// runs whenever it has work, as it would on a host of its own.
const SERVER_FIRST: i32 = 10;

/// Redisson's two lock scripts, loaded on a connection, and the commands that call them: each
/// one EVALSHA built in one `redis::Cmd` (as redlatch builds its own).
pub(crate) struct RawScripts {
    acquire: String,
    unlock: String,
}

impl RawScripts {
    pub(crate) fn load(conn: &mut redis::Connection) -> RawScripts {
        let mut load = |src: &str| -> String {
            redis::Script::new(src)
                .prepare_invoke()
                .load(conn)
                .expect("SCRIPT LOAD")
        };
        RawScripts {
            acquire: load(include_str!("redisson_lock.lua")),
            unlock: load(include_str!("redisson_unlock.lua")),
        }
    }

    pub(crate) fn acquire(&self, key: &str, owner: &str) -> redis::Cmd {
        let mut cmd = redis::Cmd::with_capacity(6, 128);
        cmd.arg("EVALSHA")
            .arg(&self.acquire)
            .arg(1)
            .arg(key)
            .arg(30_000)
            .arg(owner);
        cmd
    }

    pub(crate) fn unlock(&self, key: &str, channel: &str, latch: &str, owner: &str) -> redis::Cmd {
        let mut cmd = redis::Cmd::with_capacity(11, 256);
        cmd.arg("EVALSHA")
            .arg(&self.unlock)
            .arg(3)
            .arg(key)
            .arg(channel)
            .arg(latch)
            .arg(0)
            .arg(30_000)
            .arg(owner)
            .arg("PUBLISH")
            .arg(4_000);
        cmd
    }
}

/// The keys of one raw lock: its name, channel and unlock latch prefix.
pub(crate) struct RawKeys {
    pub(crate) key: String,
    pub(crate) channel: String,
    latch_prefix: String,
}

impl RawKeys {
    pub(crate) fn new(key: &str) -> RawKeys {
        RawKeys {
            key: key.to_owned(),
            channel: format!("redisson_lock__channel:{{{key}}}"),
            latch_prefix: format!("redisson_unlock_latch:{{{key}}}:"),
        }
    }

    /// The latch of unlock number `n`: one per unlock, as Redisson's request id.
    pub(crate) fn latch(&self, n: u64) -> String {
        format!("{}{n}", self.latch_prefix)
    }
}

/// Redisson's two lock scripts on a bare connection: what `raw` sends per cycle.
pub(crate) struct RawCycle {
    conn: redis::Connection,
    scripts: RawScripts,
    keys: RawKeys,
    owner: String,
    n: u64,
}

impl RawCycle {
    pub(crate) fn new(mut conn: redis::Connection, key: &str, owner: &str) -> RawCycle {
        RawCycle {
            scripts: RawScripts::load(&mut conn),
            conn,
            keys: RawKeys::new(key),
            owner: owner.to_owned(),
            n: 0,
        }
    }

    /// One lock + unlock: two round trips, as a client without batching sends them.
    pub(crate) fn cycle(&mut self) {
        let k = &self.keys;
        let reply: redis::Value = self
            .scripts
            .acquire(&k.key, &self.owner)
            .query(&mut self.conn)
            .expect("raw acquire");
        assert!(
            matches!(reply, redis::Value::Nil),
            "raw acquire of {} found it held: {reply:?}",
            k.key
        );
        self.n += 1;
        let released: i64 = self
            .scripts
            .unlock(&k.key, &k.channel, &k.latch(self.n), &self.owner)
            .query(&mut self.conn)
            .expect("raw unlock");
        assert_eq!(released, 1, "raw unlock of {}", k.key);
    }
}

/// The pipelined reference: T cycles per call, as one pipeline of T acquires then one of T unlocks on
/// one bare connection.
struct RawPipeline {
    conn: redis::Connection,
    scripts: RawScripts,
    locks: Vec<(RawKeys, String)>,
    n: u64,
}

impl RawPipeline {
    fn new(mut conn: redis::Connection, locks: usize) -> RawPipeline {
        RawPipeline {
            scripts: RawScripts::load(&mut conn),
            conn,
            locks: (0..locks)
                .map(|i| {
                    (
                        RawKeys::new(&format!("bench:throughput:pipe:{i}")),
                        format!("pipe:{i}"),
                    )
                })
                .collect(),
            n: 0,
        }
    }

    /// One pipeline of acquires, one of unlocks; returns the cycles done.
    fn cycle(&mut self) -> u64 {
        let mut acquires = redis::pipe();
        for (k, owner) in &self.locks {
            acquires.add_command(self.scripts.acquire(&k.key, owner));
        }
        let replies: Vec<redis::Value> =
            acquires.query(&mut self.conn).expect("pipelined acquires");
        assert!(
            replies.iter().all(|r| matches!(r, redis::Value::Nil)),
            "a pipelined acquire found its lock held: {replies:?}"
        );
        self.n += 1;
        let mut unlocks = redis::pipe();
        for (k, owner) in &self.locks {
            unlocks.add_command(
                self.scripts
                    .unlock(&k.key, &k.channel, &k.latch(self.n), owner),
            );
        }
        let released: Vec<i64> = unlocks.query(&mut self.conn).expect("pipelined unlocks");
        assert!(
            released.iter().all(|&r| r == 1),
            "pipelined unlocks: {released:?}"
        );
        self.locks.len() as u64
    }
}

/// What one side did in one round.
#[derive(Clone, Copy, Default)]
struct Side {
    cycles: u64,
    secs: f64,
    /// The server's CPU time meanwhile (`INFO cpu`, user + system), in µs.
    server_cpu_us: f64,
    /// This process's CPU time meanwhile (every thread of it), in µs.
    client_cpu_us: f64,
    /// This process's context switches meanwhile.
    client_switches: u64,
}

impl Side {
    fn add(&mut self, other: Side) {
        self.cycles += other.cycles;
        self.secs += other.secs;
        self.server_cpu_us += other.server_cpu_us;
        self.client_cpu_us += other.client_cpu_us;
        self.client_switches += other.client_switches;
    }

    fn rate(&self) -> f64 {
        self.cycles as f64 / self.secs.max(1e-9)
    }

    /// `total` (of this side's rounds) per cycle.
    fn per_cycle(&self, total: f64) -> f64 {
        total / (self.cycles as f64).max(1.0)
    }

    /// The server's CPU time per cycle, in µs: what a cycle costs the server, whatever
    /// machine the clients run on.
    fn server_cpu_per_cycle(&self) -> f64 {
        self.per_cycle(self.server_cpu_us)
    }

    /// The client's CPU time per cycle, in µs: on a machine with fewer cores than the client
    /// and server could use, what is left for the server depends on it.
    fn client_cpu_per_cycle(&self) -> f64 {
        self.per_cycle(self.client_cpu_us)
    }
}

/// The server's memory and key count, sampled during a run.
#[derive(Default)]
struct Memory {
    peak_used_bytes: u64,
    peak_keys: u64,
    baseline_used_bytes: u64,
}

/// Runs `body(thread)` on `threads` threads for [`ROUND`], each [`SERVER_FIRST`] nice levels
/// below the rest of the process when `server_first`; each call returns the cycles it did.
/// Reads the server's CPU time on `raw` before and after, and samples its memory every 100 ms
/// meanwhile when `memory` is given.
fn round<F>(
    side: &str,
    threads: usize,
    body: F,
    raw: &mut redis::Connection,
    mut memory: Option<&mut Memory>,
    server_first: bool,
) -> Side
where
    F: Fn(usize) -> Box<dyn FnMut() -> u64 + Send> + Sync,
{
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let secs = thread::scope(|s| {
        for t in 0..threads {
            let mut cycle = body(t);
            let (stop, total, barrier) =
                (Arc::clone(&stop), Arc::clone(&total), Arc::clone(&barrier));
            thread::Builder::new()
                .name(format!("{side}-{t}"))
                .stack_size(256 * 1024)
                .spawn_scoped(s, move || {
                    if server_first {
                        memory::lower_own_priority(SERVER_FIRST);
                    }
                    let mut n = 0;
                    barrier.wait();
                    while !stop.load(Ordering::Relaxed) {
                        n += cycle();
                    }
                    total.fetch_add(n, Ordering::Relaxed);
                })
                .expect("spawn throughput thread");
        }
        let before = (server_cpu_us(raw), memory::process_cpu_us_and_switches());
        barrier.wait();
        let start = Instant::now();
        while start.elapsed() < ROUND {
            thread::sleep(Duration::from_millis(100));
            if let Some(mem) = memory.as_mut() {
                let (used, keys) = server_memory(raw);
                mem.peak_used_bytes = mem.peak_used_bytes.max(used);
                mem.peak_keys = mem.peak_keys.max(keys);
            }
        }
        stop.store(true, Ordering::Relaxed);
        (start.elapsed().as_secs_f64(), before)
    });
    let (secs, (server_before, (client_before, switches_before))) = secs;
    let (client_after, switches_after) = memory::process_cpu_us_and_switches();
    Side {
        cycles: total.load(Ordering::Relaxed),
        secs,
        server_cpu_us: server_cpu_us(raw) - server_before,
        client_cpu_us: client_after - client_before,
        client_switches: switches_after - switches_before,
    }
}

/// Deletes every key (nothing is held between rounds).
fn flush(raw: &mut redis::Connection) {
    let _: () = redis::cmd("FLUSHALL").query(raw).expect("FLUSHALL");
}

/// `used_memory` and the key count of db 0.
fn server_memory(raw: &mut redis::Connection) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(raw)
        .expect("INFO memory");
    let used = info
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("used_memory:"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let keys: u64 = redis::cmd("DBSIZE").query(raw).expect("DBSIZE");
    (used, keys)
}

/// The workload: for each thread count, alternating rounds of redlatch (one client shared by
/// all threads) and raw (one connection per thread); then the ratio of their rates. During
/// the redlatch rounds at the largest thread count, the server's memory and key count.
pub(crate) fn throughput(ctx: &mut Ctx) -> Json {
    let client = ctx.client();
    let counts: Vec<usize> = match &ctx.threads {
        Some(list) => list.clone(),
        None => THREADS.to_vec(),
    };
    let largest = counts.iter().copied().max().unwrap_or(1);
    let server_first = ctx.server_first;
    let mut json = ctx
        .json("throughput")
        .int("server_first", usize::from(server_first));
    if server_first {
        eprintln!("throughput: client threads {SERVER_FIRST} nice levels below the server");
    }
    let mut memory = Memory::default();
    flush(&mut ctx.raw);
    memory.baseline_used_bytes = server_memory(&mut ctx.raw).0;
    for &threads in &counts {
        let locks: Vec<redlatch::Lock> = (0..threads)
            .map(|t| client.lock(format!("bench:throughput:{t}")))
            .collect();
        let (mut ours, mut raw, mut piped) = (Side::default(), Side::default(), Side::default());
        // Each round's redlatch rate over the raw rate of the round next to it; and its server
        // CPU per cycle over the pipelined reference's of the round after it.
        let mut ratios = Vec::new();
        let mut cpu_ratios = Vec::new();
        let url = ctx.url.clone();
        let run_ours = |raw: &mut redis::Connection, memory: &mut Memory| {
            // Each round starts on an empty server: the raw side's unlock latches (which
            // a client without batching leaves to expire) do not count against redlatch.
            flush(raw);
            let sample = (threads == largest).then_some(memory);
            round(
                "ours",
                threads,
                |t| {
                    let lock = locks[t].clone();
                    Box::new(move || {
                        drop(lock.lock().expect("lock"));
                        1
                    })
                },
                raw,
                sample,
                server_first,
            )
        };
        let run_raw = |raw: &mut redis::Connection| {
            flush(raw);
            round(
                "raw",
                threads,
                |t| {
                    let key = format!("bench:throughput:raw:{t}");
                    let mut raw = RawCycle::new(raw_connection(&url), &key, &format!("raw:{t}"));
                    Box::new(move || {
                        raw.cycle();
                        1
                    })
                },
                raw,
                None,
                server_first,
            )
        };
        for r in 0..ctx.rounds.unwrap_or(ROUNDS) {
            // Which side goes first alternates, so that neither always follows the other.
            let (ours_round, raw_round) = if r % 2 == 0 {
                let o = run_ours(&mut ctx.raw, &mut memory);
                (o, run_raw(&mut ctx.raw))
            } else {
                let w = run_raw(&mut ctx.raw);
                (run_ours(&mut ctx.raw, &mut memory), w)
            };
            ratios.push(ours_round.rate() / raw_round.rate());
            ours.add(ours_round);
            raw.add(raw_round);
            if threads > 1 {
                flush(&mut ctx.raw);
                let piped_round = round(
                    "pipe",
                    1,
                    |_| {
                        let mut pipe = RawPipeline::new(raw_connection(&url), threads);
                        Box::new(move || pipe.cycle())
                    },
                    &mut ctx.raw,
                    None,
                    server_first,
                );
                cpu_ratios
                    .push(ours_round.server_cpu_per_cycle() / piped_round.server_cpu_per_cycle());
                piped.add(piped_round);
            }
        }
        // Heap blocks allocated per cycle (by any thread), in a round of each side of its own:
        // counting slows allocation down.
        let allocs = |run: &mut dyn FnMut() -> Side| {
            memory::start_counting();
            let side = run();
            let blocks = memory::blocks_allocated();
            memory::stop_counting();
            side.per_cycle(blocks as f64)
        };
        let ours_allocs = allocs(&mut || run_ours(&mut ctx.raw, &mut Memory::default()));
        let raw_allocs = allocs(&mut || run_raw(&mut ctx.raw));
        let ratio = ours.rate() / raw.rate();
        eprintln!(
            "throughput: {threads} threads: redlatch {:.0} cycles/s, raw {:.0} cycles/s, ratio \
             {ratio:.2} (target >= 2.0 at 64 and 256, >= 0.97 at 1 and 4)",
            ours.rate(),
            raw.rate()
        );
        let (ours_cpu, raw_cpu) = (ours.server_cpu_per_cycle(), raw.server_cpu_per_cycle());
        eprintln!(
            "throughput: {threads} threads: server CPU per cycle: redlatch {ours_cpu:.1} us, \
             raw {raw_cpu:.1} us ({:.2} times less); heap blocks allocated per cycle: redlatch \
             {ours_allocs:.1}, raw {raw_allocs:.1}",
            raw_cpu / ours_cpu
        );
        let (ours_client, raw_client) = (ours.client_cpu_per_cycle(), raw.client_cpu_per_cycle());
        eprintln!(
            "throughput: {threads} threads: client CPU per cycle (this process, all threads): \
             redlatch {ours_client:.1} us, raw {raw_client:.1} us; context switches per cycle: \
             redlatch {:.2}, raw {:.2}",
            ours.per_cycle(ours.client_switches as f64),
            raw.per_cycle(raw.client_switches as f64)
        );
        json = json
            .num(&format!("t{threads}_cycles_per_s"), ours.rate())
            .num(&format!("t{threads}_raw_cycles_per_s"), raw.rate())
            .num2(&format!("t{threads}_ratio"), ratio)
            .num(&format!("t{threads}_server_cpu_us_per_cycle"), ours_cpu)
            .num(&format!("t{threads}_raw_server_cpu_us_per_cycle"), raw_cpu)
            .num(&format!("t{threads}_client_cpu_us_per_cycle"), ours_client)
            .num(
                &format!("t{threads}_raw_client_cpu_us_per_cycle"),
                raw_client,
            )
            .num(&format!("t{threads}_allocs_per_cycle"), ours_allocs)
            .num(&format!("t{threads}_raw_allocs_per_cycle"), raw_allocs);
        if ratios.len() > 2 {
            let (median, low, high) = spread(&mut ratios);
            eprintln!(
                "throughput: {threads} threads: ratio per round: median {median:.2}, from \
                 {low:.2} to {high:.2} ({} rounds)",
                ratios.len()
            );
            json = json
                .num2(&format!("t{threads}_ratio_median"), median)
                .num2(&format!("t{threads}_ratio_low"), low)
                .num2(&format!("t{threads}_ratio_high"), high);
        }
        if cpu_ratios.len() > 2 {
            let (median, low, high) = spread(&mut cpu_ratios);
            eprintln!(
                "throughput: {threads} threads: server CPU per cycle over the pipelined \
                 reference's, per round: median {median:.2}, from {low:.2} to {high:.2}"
            );
            json = json
                .num2(
                    &format!("t{threads}_server_cpu_of_pipelined_median"),
                    median,
                )
                .num2(&format!("t{threads}_server_cpu_of_pipelined_low"), low)
                .num2(&format!("t{threads}_server_cpu_of_pipelined_high"), high);
        }
        if threads > 1 {
            let cpu_of_piped = ours_cpu / piped.server_cpu_per_cycle();
            eprintln!(
                "throughput: {threads} threads: one connection pipelining {threads} Redisson \
                 acquires then {threads} unlocks: {:.0} cycles/s (redlatch reaches {:.2} of it), \
                 server CPU per cycle {:.1} us (redlatch's is {cpu_of_piped:.2} of it, target \
                 <= 0.75), client {:.1} us",
                piped.rate(),
                ours.rate() / piped.rate(),
                piped.server_cpu_per_cycle(),
                piped.client_cpu_per_cycle()
            );
            json = json
                .num(&format!("t{threads}_pipelined_cycles_per_s"), piped.rate())
                .num(
                    &format!("t{threads}_pipelined_server_cpu_us_per_cycle"),
                    piped.server_cpu_per_cycle(),
                )
                .num(
                    &format!("t{threads}_pipelined_client_cpu_us_per_cycle"),
                    piped.client_cpu_per_cycle(),
                )
                .num2(
                    &format!("t{threads}_of_pipelined"),
                    ours.rate() / piped.rate(),
                )
                .num2(&format!("t{threads}_server_cpu_of_pipelined"), cpu_of_piped);
        }
    }
    eprintln!(
        "throughput: during the {largest}-thread redlatch rounds the server held at most {} keys \
         and {:.1} MB (used_memory; {:.1} MB before)",
        memory.peak_keys,
        memory.peak_used_bytes as f64 / 1e6,
        memory.baseline_used_bytes as f64 / 1e6
    );
    json.int("peak_keys", memory.peak_keys as usize)
        .num("peak_used_mb", memory.peak_used_bytes as f64 / 1e6)
        .num("baseline_used_mb", memory.baseline_used_bytes as f64 / 1e6)
}

/// The median, lowest and highest of `values` (not empty).
fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (
        (values[(n - 1) / 2] + values[n / 2]) / 2.0,
        values[0],
        values[n - 1],
    )
}
