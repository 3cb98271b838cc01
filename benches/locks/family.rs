//! `family`: what each common cycle of the family costs the server, ours against Redisson's
//! own scripts for the same work, sent raw (EVALSHA on a bare connection) on the same server
//! in the same run: server CPU per cycle (`INFO cpu`, user + system), and its ratio to the
//! cheaper of Redisson 4.7.0 and 3.17.0.
//!
//! **One pace.** What a command costs the server depends on how fast its client sends: a
//! server kept busy handles each event-loop turn's reads together, an idle one wakes for
//! every command. A side that runs flat out would be measured at its own speed, flattering the
//! faster. So every side runs its cycles at one pace, [`PACE`] apart (a cycle starts at its
//! slot, or at once if the previous one overran it; a side that falls behind is reported),
//! and the sides alternate in [`ROUNDS`] rounds of [`CYCLES`], the median round counting.
//!
//! Redisson's scripts, as its Java sends them (tags of github.com/redisson/redisson,
//! `redisson/src/main/java/org/redisson/`):
//! - lock: `RedissonLock.java` `tryLockInnerAsync` lines 214-222 and `unlockInnerAsync`
//!   lines 347-370 at `redisson-4.7.0`; lines 196-208 and 340-355 at `redisson-3.17.0`;
//! - semaphore: `RedissonSemaphore.java` `tryAcquireAsync0` lines 265-273 and
//!   `releaseAsync` lines 458-461 at 4.7.0; lines 266-273 and 451-454 at 3.17.0;
//! - latch: `RedissonCountDownLatch.java` `trySetCountAsync` lines 286-297 and
//!   `countDownAsync` lines 253-258 at 4.7.0; lines 285-296 and 253-258 at 3.17.0;
//! - fair, read and write locks, the permit-expirable semaphore and the rate limiter's
//!   `tryAcquire`: the files in `benches/locks/redisson/`, each naming its source lines, its
//!   keys and arguments (the fair lock's `lock()` is its `EVAL_LONG` acquire).
//!
//! With `BENCH_CALLGRIND=1` the server runs under valgrind's callgrind, and each side's
//! count is the server's user-space instructions per cycle instead (see [`counted`]).
//! `BENCH_FAMILY_ROWS=rate,semaphore` runs those rows only (the names they print).
//!
//! The floor: two PINGs a cycle at the same pace, what the round trips cost with no work in
//! them; each side's cost above it is its scripts'. Keys left: the keys of ours naming the
//! object that [`KEPT`] cycles of ours left alive (receipts waiting for their batched
//! delete).

use std::time::{Duration, Instant};

use super::{raw_connection, server_cpu_us, Ctx, Json};

/// How far apart the cycles of every side start.
const PACE: Duration = Duration::from_micros(500);
/// Cycles per round.
const CYCLES: usize = 2000;
/// Rounds per side; the median counts.
const ROUNDS: usize = 3;
/// The cycles of ours after which the keys of ours left alive are counted.
const KEPT: usize = 10_000;

/// Redisson 4.7.0's lock acquire (`tryLockInnerAsync`).
const LOCK_4_7: &str = "if ((redis.call('exists', KEYS[1]) == 0) \
    or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
    return redis.call('pttl', KEYS[1]);";
/// Redisson 4.7.0's unlock (`unlockInnerAsync`), with its unlock latch.
const UNLOCK_4_7: &str = "local val = redis.call('get', KEYS[3]); \
    if val ~= false then return tonumber(val); end; \
    if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); \
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; \
    else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); \
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";
/// Redisson 3.17.0's lock acquire.
const LOCK_3_17: &str = "if (redis.call('exists', KEYS[1]) == 0) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; end; \
    if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; end; \
    return redis.call('pttl', KEYS[1]);";
/// Redisson 3.17.0's unlock.
const UNLOCK_3_17: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil; end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; \
    else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; \
    return nil;";
/// Redisson's semaphore acquire, the same in 4.7.0 and 3.17.0.
const SEM_ACQUIRE: &str = "local value = redis.call('get', KEYS[1]); \
    if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then \
    local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";
/// Redisson 4.7.0's semaphore release (the publish command an argument).
const SEM_RELEASE_4_7: &str = "local value = redis.call('incrby', KEYS[1], ARGV[1]); \
    redis.call(ARGV[2], KEYS[2], value); ";
/// Redisson 3.17.0's semaphore release.
const SEM_RELEASE_3_17: &str = "local value = redis.call('incrby', KEYS[1], ARGV[1]); \
    redis.call('publish', KEYS[2], value); ";
/// Redisson 4.7.0's latch `trySetCount`.
const LATCH_SET_4_7: &str = "if redis.call('exists', KEYS[1]) == 0 then \
    redis.call('set', KEYS[1], ARGV[2]); redis.call(ARGV[3], KEYS[2], ARGV[1]); \
    return 1 else return 0 end";
/// Redisson 4.7.0's latch `countDown`.
const LATCH_DOWN_4_7: &str = "local v = redis.call('decr', KEYS[1]);\
    if v <= 0 then redis.call('del', KEYS[1]) end;\
    if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";
/// Redisson 3.17.0's latch `trySetCount`.
const LATCH_SET_3_17: &str = "if redis.call('exists', KEYS[1]) == 0 then \
    redis.call('set', KEYS[1], ARGV[2]); redis.call('publish', KEYS[2], ARGV[1]); \
    return 1 else return 0 end";
/// Redisson 3.17.0's latch `countDown`.
const LATCH_DOWN_3_17: &str = "local v = redis.call('decr', KEYS[1]);\
    if v <= 0 then redis.call('del', KEYS[1]) end;\
    if v == 0 then redis.call('publish', KEYS[2], ARGV[1]) end;";

/// One cycle of one side.
type Cycle<'a> = Box<dyn FnMut() + 'a>;

/// One cycle kind: ours (on the object `object`), and Redisson's at 4.7.0 and 3.17.0 where
/// that version has the object (its group lock is new in 4.x; nothing of Redisson's is a
/// condition or an election).
struct Kind<'a> {
    name: &'static str,
    object: &'static str,
    ours: Cycle<'a>,
    theirs: [Option<Cycle<'a>>; 2],
}

impl<'a> Kind<'a> {
    /// The cycle of side 0 (ours), 1 (4.7.0) or 2 (3.17.0), if that side has one.
    fn side(&mut self, side: usize) -> Option<&mut Cycle<'a>> {
        match side {
            0 => Some(&mut self.ours),
            n => self.theirs[n - 1].as_mut(),
        }
    }
}

/// `x`, or `n/a` for a side without the object (NaN).
fn shown(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        "n/a".to_owned()
    } else {
        format!("{x:.decimals$}")
    }
}

pub(super) fn family(ctx: &mut Ctx) -> Json {
    let client = ctx.client();
    let holder = ctx.client();
    let url = ctx.url.clone();
    let held = holder
        .lock("fam:held")
        .lock()
        .expect("the lock held elsewhere");
    ballast(&mut ctx.raw, BALLAST);
    let mut kinds = vec![
        lock_kind("lock", "fam:lock", &url, client.lock("fam:lock"), 30_000),
        lock_kind(
            "lock_leased",
            "fam:leased",
            &url,
            client
                .lock("fam:leased")
                .with_lease(Duration::from_secs(60)),
            60_000,
        ),
        busy_kind(&url, client.lock("fam:held")),
        fair_kind(&url, client.fair_lock("fam:fair")),
        read_kind(&url, client.read_write_lock("fam:rw").read()),
        write_kind(&url, client.read_write_lock("fam:rww").write()),
        semaphore_kind(&url, &client),
        pes_kind(&url, &client),
        latch_kind(&url, &client),
        rate_kind(&url, &client),
        lock_set_kind(&url, &client),
        group_kind(&url, &client),
        redlock_kind(&url, &client),
        condition_kind(&client),
        election_kind(&client),
    ];
    // `BENCH_FAMILY_ROWS=rate,lock`: those rows only (by the names the rows print).
    if let Ok(rows) = std::env::var("BENCH_FAMILY_ROWS") {
        let rows: Vec<&str> = rows.split(',').map(str::trim).collect();
        kinds.retain(|kind| rows.contains(&kind.name));
        assert!(!kinds.is_empty(), "BENCH_FAMILY_ROWS names no row");
    }
    if let Some((pid, dir)) = ctx.callgrind.clone() {
        let json = counted(ctx.json("family"), &mut kinds, &url, pid, &dir);
        drop(held);
        return json;
    }
    let mut json = ctx.json("family");
    // The floor: what two round trips at the pace cost the server with no work in them.
    let mut ping = raw_connection(&url);
    let mut floor: Cycle<'_> = Box::new(move || {
        for _ in 0..2 {
            let _: String = redis::cmd("PING").query(&mut ping).expect("PING");
        }
    });
    let mut floors: Vec<f64> = (0..ROUNDS)
        .map(|_| paced(&mut ctx.raw, &mut floor).0)
        .collect();
    let floor_us = median(&mut floors);
    eprintln!(
        "family: two PINGs a cycle cost the server {floor_us:.1} us at one cycle per {} us",
        PACE.as_micros()
    );
    let mut worst: f64 = 0.0;
    for kind in &mut kinds {
        let mut sides: Vec<Vec<f64>> = vec![Vec::new(); 3];
        let mut behind = [false; 3];
        for _ in 0..ROUNDS {
            for (side, samples) in sides.iter_mut().enumerate() {
                let Some(cycle) = kind.side(side) else {
                    continue;
                };
                let (cpu, late) = paced(&mut ctx.raw, cycle);
                samples.push(cpu);
                behind[side] |= late;
            }
        }
        // Ours runs on, unpaced, to KEPT cycles in all: the keys of ours it left alive then.
        for _ in ROUNDS * (CYCLES + 50)..KEPT {
            (kind.ours)();
        }
        let left = left_behind(&mut ctx.raw, kind.object);
        let [ours, v47, v317] = [0, 1, 2].map(|i| median(&mut sides[i]));
        // NaN for a side without the object: `min` takes the other.
        let ratio = ours / v47.min(v317);
        if !ratio.is_nan() {
            worst = worst.max(ratio);
        }
        eprintln!(
            "family {:<13} server CPU per cycle: ours {ours:5.1} us, 4.7.0 {} us, 3.17.0 {} us: \
             ratio {} to the cheaper ({} to 4.7.0); above the floor {:.1} / {} / {} us; our keys \
             alive after {} cycles: {} {:?}{}",
            kind.name,
            shown(v47, 1),
            shown(v317, 1),
            shown(ratio, 2),
            shown(ours / v47, 2),
            ours - floor_us,
            shown(v47 - floor_us, 1),
            shown(v317 - floor_us, 1),
            KEPT,
            left.len(),
            left,
            if behind.iter().any(|b| *b) {
                "; a side fell behind the pace"
            } else {
                ""
            }
        );
        json = sides_json(json, kind.name, "server_us", [ours, v47, v317])
            .num(&format!("{}_keys_left", kind.name), left.len() as f64);
    }
    drop(held);
    json.num("pace_us", PACE.as_micros() as f64)
        .num("floor_server_us", floor_us)
        .num2("worst_ratio", worst)
}

/// Keys written before the cycles run (see [`ballast`]).
const BALLAST: usize = 20_000;

/// Fills the server with `n` keys of no use, so that its key table is grown before any side
/// runs: a side that makes a key per cycle (Redisson 4.7.0's unlock latch, our receipts)
/// would otherwise pay for growing it while it runs, and the next side writing keys find it
/// grown. (No time to live: keys that expire make the server's periodic expiry sampling
/// cost more, in every side's count alike.)
fn ballast(raw: &mut redis::Connection, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("SET")
                .arg(format!("fam:ballast:{i}"))
                .arg(1)
                .ignore();
        }
        let () = pipe.query(raw).expect("ballast");
    }
}

/// Cycles a side runs for a count of the server's instructions.
const COUNTED: usize = 400;

/// With the server under callgrind (`BENCH_CALLGRIND=1`): the server's user-space
/// instructions per cycle of each side, [`COUNTED`] cycles after a warm-up, its counts zeroed
/// before and dumped after (`callgrind_control`). Exact where the CPU times are noisy, and
/// without the kernel's part (wake-ups, reads, writes), which both sides pay alike.
/// The parts a script call is made of, each the only thing a script does, sent raw
/// [`COUNTED`] times under callgrind: what explains the rows (a key for the JSON, what it is,
/// the script, how many arguments). A script's calls touch keys of no use.
const PARTS: [(&str, &str, &str, usize); 12] = [
    ("call", "a script call (`return 1`)", "return 1", 0),
    ("arg", "one argument", "return 1", 1),
    (
        "get",
        "GET of a missing key",
        "redis.call('get', 'fam:part:none') return 1",
        0,
    ),
    (
        "pcall_get",
        "the same GET under pcall",
        "redis.pcall('get', 'fam:part:none') return 1",
        0,
    ),
    (
        "type",
        "TYPE",
        "redis.call('type', 'fam:part:none') return 1",
        0,
    ),
    (
        "write",
        "INCRBY (a write)",
        "redis.call('incrby', 'fam:part:n', 1) return 1",
        0,
    ),
    (
        "set_px",
        "SET ... PX (a receipt)",
        "redis.call('set', 'fam:part:r', '1', 'px', 20000) return 1",
        0,
    ),
    (
        "pexpire",
        "PEXPIRE",
        "redis.call('pexpire', 'fam:part:n', 1000000) return 1",
        0,
    ),
    ("time", "TIME", "redis.call('time') return 1", 0),
    (
        "publish",
        "PUBLISH (nobody listening)",
        "redis.call('publish', 'fam:part:c', '0') return 1",
        0,
    ),
    ("array", "an array reply `{1}`", "return {1}", 0),
    (
        "string",
        "a string reply of 40 bytes",
        "return '0123456789012345678901234567890123456789'",
        0,
    ),
];

/// [`PARTS`], counted: each part's instructions above a bare script call (the call's own).
fn parts(mut json: Json, count: &mut dyn FnMut(&mut dyn FnMut()) -> f64, url: &str) -> Json {
    let mut conn = raw_connection(url);
    let mut base = 0.0;
    for (key, what, source, args) in PARTS {
        let script = redis::Script::new(source);
        let mut call = || {
            let mut invocation = script.prepare_invoke();
            for _ in 0..args {
                invocation.arg("0123456789");
            }
            let _: redis::Value = invocation.invoke(&mut conn).expect("a part");
        };
        let n = count(&mut call);
        let above = if key == "call" {
            base = n;
            n
        } else {
            n - base
        };
        eprintln!("family part {what:<34} {above:8.0} server instructions");
        json = json.num(&format!("part_{key}_instructions"), above);
    }
    json
}

fn counted(
    mut json: Json,
    kinds: &mut [Kind<'_>],
    url: &str,
    pid: u32,
    dir: &std::path::Path,
) -> Json {
    let control = |what: &str| {
        let done = std::process::Command::new("callgrind_control")
            .arg(what)
            .arg(pid.to_string())
            .output()
            .expect("callgrind_control (valgrind)");
        assert!(done.status.success(), "callgrind_control {what} failed");
    };
    // The server's instructions per call of `cycle`, after a warm-up.
    let mut count = |cycle: &mut dyn FnMut()| -> f64 {
        for _ in 0..50 {
            cycle();
        }
        control("--zero");
        for _ in 0..COUNTED {
            cycle();
        }
        control("--dump");
        newest_total(dir) as f64 / COUNTED as f64
    };
    let mut worst: f64 = 0.0;
    for kind in kinds {
        let mut counts = [f64::NAN; 3];
        for (side, counted) in counts.iter_mut().enumerate() {
            if let Some(cycle) = kind.side(side) {
                *counted = count(cycle);
            }
        }
        let [ours, v47, v317] = counts;
        let ratio = ours / v47.min(v317);
        if !ratio.is_nan() {
            worst = worst.max(ratio);
        }
        eprintln!(
            "family {:<13} server instructions per cycle: ours {ours:8.0}, 4.7.0 {:>8}, \
             3.17.0 {:>8}: ratio {} to the cheaper ({} to 4.7.0)",
            kind.name,
            shown(v47, 0),
            shown(v317, 0),
            shown(ratio, 2),
            shown(ours / v47, 2),
        );
        json = sides_json(json, kind.name, "instructions", counts);
    }
    parts(json, &mut count, url).num2("worst_ratio", worst)
}

/// The total instructions of the newest callgrind dump in `dir`.
fn newest_total(dir: &std::path::Path) -> u64 {
    let newest = std::fs::read_dir(dir)
        .expect("the dump folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("cg."))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .expect("a callgrind dump");
    let text = std::fs::read_to_string(newest.path()).expect("the dump");
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|n| n.trim().parse().ok())
        .expect("the dump's total")
}

/// Runs `cycle` [`CYCLES`] times, [`PACE`] apart: the server's CPU per cycle in µs, and
/// whether the cycles fell behind their slots by more than a tenth of the round.
fn paced(raw: &mut redis::Connection, cycle: &mut Cycle<'_>) -> (f64, bool) {
    for _ in 0..50 {
        cycle();
    }
    let cpu0 = server_cpu_us(raw);
    let start = Instant::now();
    for i in 0..CYCLES {
        let due = start + PACE * i as u32;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        cycle();
    }
    let late = start.elapsed() > PACE * (CYCLES as u32) * 11 / 10;
    let cpu = server_cpu_us(raw) - cpu0;
    (cpu / CYCLES as f64, late)
}

/// The median; NaN for no samples (a side without the object).
fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Each side's `what` of cycle `name` (ours, 4.7.0, 3.17.0; a side without the object left
/// out), and the ratios to the cheaper and to 4.7.0 where there is one.
fn sides_json(json: Json, name: &str, what: &str, [ours, v47, v317]: [f64; 3]) -> Json {
    let mut json = json.num(&format!("{name}_{what}"), ours);
    for (suffix, theirs) in [("4_7_0", v47), ("3_17_0", v317)] {
        if !theirs.is_nan() {
            json = json.num(&format!("{name}_{what}_{suffix}"), theirs);
        }
    }
    let ratio = ours / v47.min(v317);
    if !ratio.is_nan() {
        json = json.num2(&format!("{name}_ratio"), ratio);
    }
    if !v47.is_nan() {
        json = json.num2(&format!("{name}_ratio_4_7_0"), ours / v47);
    }
    json
}

/// The keys of ours that `object`'s cycles left alive: every key naming it in a hash tag
/// (receipts, latches) but the semaphore's generation, which is kept for good.
fn left_behind(raw: &mut redis::Connection, object: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{{{object}}}*"))
        .query(raw)
        .expect("KEYS");
    keys.retain(|k| !k.starts_with("redlatch_semaphore:"));
    keys.sort();
    keys
}

/// Redisson's lock and unlock, raw, on `name` as owner `owner`, with `lease` ms.
fn redisson_lock_cycle<'a>(url: &str, version: usize, name: &'a str, lease: u64) -> Cycle<'a> {
    redisson_locks_cycle(url, version, vec![name.to_owned()], lease)
}

/// Redisson's locks of `names` taken one by one, then released one by one (its
/// `RedissonMultiLock` does no better: a call per lock), raw, with `lease` ms.
fn redisson_locks_cycle<'a>(
    url: &str,
    version: usize,
    names: Vec<String>,
    lease: u64,
) -> Cycle<'a> {
    let mut conn = raw_connection(url);
    let (lock, unlock) = match version {
        0 => (LOCK_4_7, UNLOCK_4_7),
        _ => (LOCK_3_17, UNLOCK_3_17),
    };
    let (lock, unlock) = (redis::Script::new(lock), redis::Script::new(unlock));
    Box::new(move || {
        for name in &names {
            let _: Option<i64> = lock
                .key(name)
                .arg(lease)
                .arg(OWNER)
                .invoke(&mut conn)
                .expect("raw lock");
        }
        for name in &names {
            let mut call = unlock.key(name);
            call.key(format!("redisson_lock__channel:{{{name}}}"));
            if version == 0 {
                call.key(latch_4_7(name));
            }
            call.arg(0).arg(lease).arg(OWNER);
            if version == 0 {
                call.arg("publish").arg(LATCH_TTL);
            }
            let _: Option<i64> = call.invoke(&mut conn).expect("raw unlock");
        }
    })
}

/// A lock set of 10 names taken and released (ours: one script a slot group each way),
/// against Redisson taking the 10 locks one by one.
fn lock_set_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let names: Vec<String> = (0..10).map(|i| format!("fam:set:{i}")).collect();
    let set = client.lock_set(&names);
    let theirs = [0, 1].map(|version| {
        let raw: Vec<String> = (0..10)
            .map(|i| format!("fam:raw:set:{version}:{i}"))
            .collect();
        redisson_locks_cycle(url, version, raw, 30_000)
    });
    Kind {
        name: "lock_set_10",
        object: "fam:set",
        ours: Box::new(move || drop(set.lock().expect("lock set"))),
        theirs: theirs.map(Some),
    }
}

fn lock_kind<'a>(
    name: &'static str,
    object: &'static str,
    url: &str,
    lock: redlatch::Lock,
    lease: u64,
) -> Kind<'a> {
    let raw = ["fam:raw:lock:4", "fam:raw:lock:3"];
    Kind {
        name,
        object,
        ours: Box::new(move || drop(lock.lock().expect("lock"))),
        theirs: [0, 1].map(|v| Some(redisson_lock_cycle(url, v, raw[v], lease))),
    }
}

/// A `try_lock` of a lock another owner holds: refused.
fn busy_kind<'a>(url: &str, lock: redlatch::Lock) -> Kind<'a> {
    let theirs = [0, 1].map(|version| {
        let mut conn = raw_connection(url);
        let _: () = redis::cmd("HSET")
            .arg("fam:raw:held")
            .arg("someone-else:1")
            .arg(1)
            .query(&mut conn)
            .expect("raw holder");
        let script = redis::Script::new(if version == 0 { LOCK_4_7 } else { LOCK_3_17 });
        Box::new(move || {
            let ttl: Option<i64> = script
                .key("fam:raw:held")
                .arg(30_000)
                .arg(OWNER)
                .invoke(&mut conn)
                .expect("raw try_lock");
            assert!(ttl.is_some(), "the raw lock is held");
        }) as Cycle<'a>
    });
    Kind {
        name: "try_lock_busy",
        object: "fam:held",
        ours: Box::new(move || assert!(lock.try_lock().expect("try_lock").is_none())),
        theirs: theirs.map(Some),
    }
}

/// A raw connection, with Redisson's semaphore `key` set to one permit.
fn one_permit(url: &str, key: &str) -> redis::Connection {
    let mut conn = raw_connection(url);
    let () = redis::cmd("SET")
        .arg(key)
        .arg(1)
        .query(&mut conn)
        .expect("raw permits");
    conn
}

fn semaphore_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let sem = client.semaphore("fam:sem");
    sem.try_set_permits(1).expect("permits");
    let theirs = [0, 1].map(|version| {
        let key = ["fam:raw:sem:4", "fam:raw:sem:3"][version];
        let mut conn = one_permit(url, key);
        let acquire = redis::Script::new(SEM_ACQUIRE);
        let release = redis::Script::new(if version == 0 {
            SEM_RELEASE_4_7
        } else {
            SEM_RELEASE_3_17
        });
        let channel = format!("redisson_sc:{{{key}}}");
        Box::new(move || {
            let got: i64 = acquire
                .key(key)
                .arg(1)
                .invoke(&mut conn)
                .expect("raw acquire");
            assert_eq!(got, 1);
            let mut call = release.key(key);
            call.key(&channel).arg(1);
            if version == 0 {
                call.arg("publish");
            }
            let _: () = call.invoke(&mut conn).expect("raw release");
        }) as Cycle<'a>
    });
    Kind {
        name: "semaphore",
        object: "fam:sem",
        ours: Box::new(move || sem.acquire(1).expect("acquire").release().expect("release")),
        theirs: theirs.map(Some),
    }
}

/// A permit-expirable semaphore's `acquire` with a 60 s lease and its release, against
/// Redisson's `RPermitExpirableSemaphore.acquire(60, SECONDS)` and `release(id)`.
fn pes_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let pes = client.permit_expirable_semaphore("fam:pes");
    pes.try_set_permits(1).expect("permits");
    let theirs = [0, 1].map(|version| {
        let key = ["fam:raw:pes:4", "fam:raw:pes:3"][version];
        let mut conn = one_permit(url, key);
        let (acquire, release) = (
            redisson("pes_acquire", version),
            redisson("pes_release", version),
        );
        let timeouts = format!("{{{key}}}:timeout");
        let channel = format!("redisson_sc:{{{key}}}");
        let mut n: u128 = 0;
        Box::new(move || {
            // A new random 16-byte id per acquire, as Redisson's `generateId`.
            n += 1;
            let id = (n ^ 0x5bd1_e995_9e37_79b9_7f4a_7c15_f39c_c060).to_be_bytes();
            let now = now_ms();
            let mut call = acquire.key(key);
            call.key(&timeouts).key(&channel);
            if version == 0 {
                call.arg(1)
                    .arg(now + 60_000)
                    .arg(now)
                    .arg(NO_EXPIRY)
                    .arg("publish")
                    .arg(&id[..]);
            } else {
                call.arg(1)
                    .arg(now + 60_000)
                    .arg(&id[..])
                    .arg(now)
                    .arg(NO_EXPIRY);
            }
            let got: Option<Vec<u8>> = call.invoke(&mut conn).expect("raw pes acquire");
            assert!(got.is_some_and(|g| !g.starts_with(b":")));
            let mut call = release.key(key);
            call.key(&channel)
                .key(&timeouts)
                .arg(&id[..])
                .arg(1)
                .arg(now_ms());
            if version == 0 {
                call.arg("publish");
            }
            let released: i64 = call.invoke(&mut conn).expect("raw pes release");
            assert_eq!(released, 1);
        }) as Cycle<'a>
    });
    Kind {
        name: "pes",
        object: "fam:pes",
        ours: Box::new(move || {
            pes.acquire(Duration::from_secs(60))
                .expect("acquire")
                .release()
                .expect("release")
        }),
        theirs: theirs.map(Some),
    }
}

/// A group lock of 3 values taken and released, against Redisson 4.7.0's
/// `RedissonFasterMultiLock` (3.17.0 has none).
fn group_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let group = client.group_lock("fam:group", ["a", "b", "c"]);
    let mut conn = raw_connection(url);
    let (lock, unlock) = (redisson("group_lock", 0), redisson("group_unlock", 0));
    let key = "fam:raw:group:4";
    let channel = format!("redisson_lock__channel:{{{key}}}");
    // Three fields as long as Redisson's (`Hash.hash128toBase64` of each value).
    let fields = [
        "AAECAwQFBgcICQoLDA0ODw==",
        "EBESExQVFhcYGRobHB0eHw==",
        "ICEiIyQlJicoKSorLC0uLw==",
    ];
    let theirs: Cycle<'a> = Box::new(move || {
        let mut call = lock.key(key);
        call.arg(30_000).arg(now_ms()).arg(OWNER).arg(&fields[..]);
        let _: Option<i64> = call.invoke(&mut conn).expect("raw group lock");
        let mut call = unlock.key(key);
        call.key(&channel)
            .key(latch_4_7(key))
            .arg(OWNER)
            .arg(0)
            .arg(30_000)
            .arg("publish")
            .arg(LATCH_TTL)
            .arg(now_ms())
            .arg(&fields[..]);
        let released: Option<i64> = call.invoke(&mut conn).expect("raw group unlock");
        assert_eq!(released, Some(1));
    });
    Kind {
        name: "group_lock_3",
        object: "fam:group",
        ours: Box::new(move || drop(group.lock().expect("group lock"))),
        theirs: [Some(theirs), None],
    }
}

/// A RedLock of 3 members (one server here, three names: a member's calls are what they
/// would be on its own server), against Redisson's `RedissonRedLock`, which takes and
/// releases its members' locks one by one.
fn redlock_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let names = ["fam:red:0", "fam:red:1", "fam:red:2"];
    let red = redlatch::RedLock::new(names.map(|n| client.lock(n))).expect("RedLock");
    let theirs = [0, 1].map(|version| {
        let raw: Vec<String> = (0..3)
            .map(|i| format!("fam:raw:red:{version}:{i}"))
            .collect();
        Some(redisson_locks_cycle(url, version, raw, 30_000))
    });
    Kind {
        name: "redlock_3",
        object: "fam:red",
        ours: Box::new(move || drop(red.lock().expect("RedLock"))),
        theirs,
    }
}

/// A condition's wait and notify: a waiting thread (holding the lock between waits), and each
/// cycle the lock taken, `notify_one`, the lock released, and the waiter's wake-up awaited
/// (its re-acquire, and its next wait's own script). Redisson has no condition.
fn condition_kind<'a>(client: &redlatch::Client) -> Kind<'a> {
    let (woke_tx, woke) = std::sync::mpsc::channel::<()>();
    let waiting = client.clone();
    std::thread::spawn(move || {
        let lock = waiting.lock("fam:cond");
        let cond = lock.condition("ready");
        let mut guard = lock.lock().expect("lock");
        // Until the bench's client goes (the wait then fails) or nobody listens.
        while cond.wait(&mut guard).is_ok() && woke_tx.send(()).is_ok() {}
    });
    let lock = client.lock("fam:cond");
    let cond = lock.condition("ready");
    Kind {
        name: "condition",
        object: "fam:cond",
        ours: Box::new(move || {
            // The lock is free only once the waiter waits again: no notification is lost.
            let guard = lock.lock().expect("lock");
            cond.notify_one().expect("notify");
            drop(guard);
            woke.recv().expect("the waiter woke");
        }),
        theirs: [None, None],
    }
}

/// An election's campaign won at once and its resignation. Redisson has no election.
fn election_kind<'a>(client: &redlatch::Client) -> Kind<'a> {
    let election = client.election("fam:elect");
    Kind {
        name: "election",
        object: "fam:elect",
        ours: Box::new(move || {
            election
                .campaign("me")
                .expect("campaign")
                .resign()
                .expect("resign")
        }),
        theirs: [None, None],
    }
}

/// Redisson's deadline of a permit that does not expire (`nonExpirableTimeout`).
const NO_EXPIRY: u64 = 922_337_203_685_477;

fn latch_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let latch = client.count_down_latch("fam:latch");
    let theirs = [0, 1].map(|version| {
        let mut conn = raw_connection(url);
        let key = ["fam:raw:latch:4", "fam:raw:latch:3"][version];
        let (set, down) = match version {
            0 => (LATCH_SET_4_7, LATCH_DOWN_4_7),
            _ => (LATCH_SET_3_17, LATCH_DOWN_3_17),
        };
        let (set, down) = (redis::Script::new(set), redis::Script::new(down));
        let channel = format!("redisson_countdownlatch__channel__{{{key}}}");
        Box::new(move || {
            let mut call = set.key(key);
            call.key(&channel).arg(1).arg(1);
            if version == 0 {
                call.arg("publish");
            }
            let set: i64 = call.invoke(&mut conn).expect("raw trySetCount");
            assert_eq!(set, 1);
            let mut call = down.key(key);
            call.key(&channel).arg(0);
            if version == 0 {
                call.arg("publish");
            }
            let _: Option<i64> = call.invoke(&mut conn).expect("raw countDown");
        }) as Cycle<'a>
    });
    Kind {
        name: "latch",
        object: "fam:latch",
        ours: Box::new(move || {
            assert!(latch.try_set_count(1).expect("try_set_count"));
            latch.count_down().expect("count_down");
        }),
        theirs: theirs.map(Some),
    }
}

/// The `rate` row's interval: short, so that a limiter acquired at the pace holds few
/// entries (about 20 at one cycle per 500 µs, 6 or 7 under callgrind) and each acquire, on
/// average, adds one entry and finds one expired.
const RATE_INTERVAL_MS: u64 = 10;
/// The `rate` row's rate per interval: far above what any side takes in one (about 20 at
/// the pace, under 200 unpaced), so that every acquire is granted.
const RATE: u64 = 1000;

/// A rate limiter's `acquire(1)`, granted, against Redisson's `tryAcquire(1)` (the script
/// its blocking `acquire` sends too), on limiters of [`RATE`] per [`RATE_INTERVAL_MS`] ms:
/// each side's permits taken in the last interval stay in its ZSET, so each side is in the
/// steady state of a limiter at its rate, one entry added and, on average, one expired and
/// removed per acquire, without the refusals. Every side reads the same clock (ours the
/// server's `TIME`, Redisson's the client's ms on the same machine) at the same pace, so
/// they hold as many entries and expire them alike. A cycle is one permit.
fn rate_kind<'a>(url: &str, client: &redlatch::Client) -> Kind<'a> {
    let limiter = client.rate_limiter("fam:rate");
    let interval = Duration::from_millis(RATE_INTERVAL_MS);
    let set = limiter.try_set_rate(redlatch::RateType::Overall, RATE, interval);
    assert!(set.expect("try_set_rate"), "a new limiter");
    let client_id = OWNER.split(':').next().expect("the owner's client id");
    let theirs = [0, 1].map(|version| {
        let mut conn = raw_connection(url);
        let name = ["fam:raw:rate:4", "fam:raw:rate:3"][version];
        // The config as each version's `trySetRate(OVERALL, ...)` writes it.
        let mut config = redis::cmd("HSET");
        config.arg(name).arg("rate").arg(RATE).arg("interval");
        config.arg(RATE_INTERVAL_MS);
        if version == 0 {
            config.arg("keepAliveTime").arg(0);
        }
        let _: i64 = config
            .arg("type")
            .arg(0)
            .query(&mut conn)
            .expect("raw config");
        let keys = [
            format!("{{{name}}}:value"),
            format!("{{{name}}}:value:{client_id}"),
            format!("{{{name}}}:permits"),
            format!("{{{name}}}:permits:{client_id}"),
        ];
        let acquire = redisson("rate_acquire", version);
        // Redisson's random member bytes: 16 at 4.7.0, 8 at 3.17.0, new for every call.
        let random_len = [16, 8][version];
        let mut random = Random(0x243f_6a88_85a3_08d3 + version as u64);
        Box::new(move || {
            let bytes = random.bytes();
            let mut call = acquire.key(name);
            for key in &keys {
                call.key(key);
            }
            let wait: Option<i64> = call
                .arg(1)
                .arg(now_ms())
                .arg(&bytes[..random_len])
                .invoke(&mut conn)
                .expect("raw tryAcquire");
            assert_eq!(wait, None, "the raw limiter admits");
        }) as Cycle<'a>
    });
    Kind {
        name: "rate",
        object: "fam:rate",
        ours: Box::new(move || {
            limiter.acquire(1).expect("acquire");
        }),
        theirs: theirs.map(Some),
    }
}

/// Random bytes as Redisson's members carry (splitmix64: cheap, and as scattered as
/// `ThreadLocalRandom`'s in a ZSET's order).
struct Random(u64);

impl Random {
    fn bytes(&mut self) -> [u8; 16] {
        let mut next = || {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let (a, b) = (next(), next());
        let mut out = [0; 16];
        out[..8].copy_from_slice(&a.to_le_bytes());
        out[8..].copy_from_slice(&b.to_le_bytes());
        out
    }
}

/// The owner the raw sides hold as.
const OWNER: &str = "3f2a0c1e-6d1b-4c55-9b7e-2f0a9d8c7b61:1";
/// The time to live Redisson 4.x gives an unlock latch (its default `timeout`, ms).
const LATCH_TTL: u64 = 13_500;

/// A new unlock latch of lock `name` for Redisson 4.7.0's unlock, its request id unique in
/// the run: rows that share a lock name must not find each other's latches (an unlock that
/// finds one does nothing).
fn latch_4_7(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("redisson_unlock_latch:{{{name}}}:{n:032x}")
}

/// Redisson's script `name` at `version` (0: 4.7.0, 1: 3.17.0), from `benches/locks/redisson/`.
fn redisson(name: &str, version: usize) -> redis::Script {
    let source = match (name, version) {
        ("fair_lock", 0) => include_str!("redisson/fair_lock_4_7_0.lua"),
        ("fair_lock", _) => include_str!("redisson/fair_lock_3_17_0.lua"),
        ("fair_unlock", 0) => include_str!("redisson/fair_unlock_4_7_0.lua"),
        ("fair_unlock", _) => include_str!("redisson/fair_unlock_3_17_0.lua"),
        ("read_lock", 0) => include_str!("redisson/read_lock_4_7_0.lua"),
        ("read_lock", _) => include_str!("redisson/read_lock_3_17_0.lua"),
        ("read_unlock", 0) => include_str!("redisson/read_unlock_4_7_0.lua"),
        ("read_unlock", _) => include_str!("redisson/read_unlock_3_17_0.lua"),
        ("write_lock", 0) => include_str!("redisson/write_lock_4_7_0.lua"),
        ("write_lock", _) => include_str!("redisson/write_lock_3_17_0.lua"),
        ("write_unlock", 0) => include_str!("redisson/write_unlock_4_7_0.lua"),
        ("write_unlock", _) => include_str!("redisson/write_unlock_3_17_0.lua"),
        ("pes_acquire", 0) => include_str!("redisson/pes_acquire_4_7_0.lua"),
        ("pes_acquire", _) => include_str!("redisson/pes_acquire_3_17_0.lua"),
        ("pes_release", 0) => include_str!("redisson/pes_release_4_7_0.lua"),
        ("pes_release", _) => include_str!("redisson/pes_release_3_17_0.lua"),
        ("rate_acquire", 0) => include_str!("redisson/rate_acquire_4_7_0.lua"),
        ("rate_acquire", _) => include_str!("redisson/rate_acquire_3_17_0.lua"),
        ("group_lock", 0) => include_str!("redisson/group_lock_4_7_0.lua"),
        ("group_unlock", 0) => include_str!("redisson/group_unlock_4_7_0.lua"),
        _ => panic!("no Redisson script {name}"),
    };
    redis::Script::new(source)
}

/// The client's clock in ms, as Redisson's fair lock sends it.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fair lock's `lock()` (Redisson's `EVAL_LONG` acquire) and unlock, nobody waiting.
fn fair_kind<'a>(url: &str, lock: redlatch::Lock) -> Kind<'a> {
    let theirs = [0, 1].map(|version| {
        let mut conn = raw_connection(url);
        let name = ["fam:raw:fair:4", "fam:raw:fair:3"][version];
        let (queue, timeouts) = (
            format!("redisson_lock_queue:{{{name}}}"),
            format!("redisson_lock_timeout:{{{name}}}"),
        );
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let (acquire, release) = (
            redisson("fair_lock", version),
            redisson("fair_unlock", version),
        );
        Box::new(move || {
            let ttl: Option<i64> = acquire
                .key(name)
                .key(&queue)
                .key(&timeouts)
                .arg(30_000)
                .arg(OWNER)
                .arg(300_000)
                .arg(now_ms())
                .invoke(&mut conn)
                .expect("raw fair lock");
            assert!(ttl.is_none(), "the raw fair lock is free");
            let mut call = release.key(name);
            call.key(&queue).key(&timeouts).key(&channel);
            if version == 0 {
                call.key(latch_4_7(name));
            }
            call.arg(0).arg(30_000).arg(OWNER).arg(now_ms());
            if version == 0 {
                call.arg("publish").arg(LATCH_TTL);
            }
            let _: Option<i64> = call.invoke(&mut conn).expect("raw fair unlock");
        }) as Cycle<'a>
    });
    Kind {
        name: "fair_lock",
        object: "fam:fair",
        ours: Box::new(move || drop(lock.lock().expect("fair lock"))),
        theirs: theirs.map(Some),
    }
}

/// A read lock's acquire and unlock, nobody else holding.
fn read_kind<'a>(url: &str, lock: redlatch::Lock) -> Kind<'a> {
    let theirs = [0, 1].map(|version| {
        let mut conn = raw_connection(url);
        let name = ["fam:raw:rw:4", "fam:raw:rw:3"][version];
        let timeouts = format!("{{{name}}}:{OWNER}:rwlock_timeout");
        let channel = format!("redisson_rwlock:{{{name}}}");
        let prefix = format!("{{{name}}}");
        let (acquire, release) = (
            redisson("read_lock", version),
            redisson("read_unlock", version),
        );
        Box::new(move || {
            let ttl: Option<i64> = acquire
                .key(name)
                .key(&timeouts)
                .arg(30_000)
                .arg(OWNER)
                .arg(format!("{OWNER}:write"))
                .invoke(&mut conn)
                .expect("raw read lock");
            assert!(ttl.is_none(), "the raw read lock is free");
            let mut call = release.key(name);
            call.key(&channel).key(&timeouts).key(&prefix);
            if version == 0 {
                call.key(latch_4_7(name));
            }
            call.arg(0).arg(OWNER);
            if version == 0 {
                call.arg("publish").arg(LATCH_TTL);
            }
            let _: Option<i64> = call.invoke(&mut conn).expect("raw read unlock");
        }) as Cycle<'a>
    });
    Kind {
        name: "read_lock",
        object: "fam:rw",
        ours: Box::new(move || drop(lock.lock().expect("read lock"))),
        theirs: theirs.map(Some),
    }
}

/// A write lock's acquire and unlock, nobody else holding.
fn write_kind<'a>(url: &str, lock: redlatch::Lock) -> Kind<'a> {
    let theirs = [0, 1].map(|version| {
        let mut conn = raw_connection(url);
        let name = ["fam:raw:rww:4", "fam:raw:rww:3"][version];
        let channel = format!("redisson_rwlock:{{{name}}}");
        let writer = format!("{OWNER}:write");
        let (acquire, release) = (
            redisson("write_lock", version),
            redisson("write_unlock", version),
        );
        Box::new(move || {
            let ttl: Option<i64> = acquire
                .key(name)
                .arg(30_000)
                .arg(&writer)
                .invoke(&mut conn)
                .expect("raw write lock");
            assert!(ttl.is_none(), "the raw write lock is free");
            let mut call = release.key(name);
            call.key(&channel);
            if version == 0 {
                call.key(latch_4_7(name));
            }
            call.arg(1).arg(30_000).arg(&writer);
            if version == 0 {
                call.arg("publish").arg(LATCH_TTL);
            }
            let _: Option<i64> = call.invoke(&mut conn).expect("raw write unlock");
        }) as Cycle<'a>
    });
    Kind {
        name: "write_lock",
        object: "fam:rww",
        ours: Box::new(move || drop(lock.lock().expect("write lock"))),
        theirs: theirs.map(Some),
    }
}
