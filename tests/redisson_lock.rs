//! Against Redisson itself: `RLock`, `RFairLock` and `RReadWriteLock` shared by a Java peer
//! (tests/java-peer) and redlatch on one server, in both directions.
//!
//! The scenarios that the issue names for every Redisson version (the lock, fair lock and
//! read-write lock) run for each of `support::java::versions()`; the rest for the newest.
//! Skipped, with a printed reason, where `java` or `mvn` is missing.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config, ValueCodec};
use support::java::{java_waits, monotonic_ns, versions, JavaPeer, RustWaiter, NEWEST};
use support::{await_waiting, wait_until, RedisServer};

/// A server, a redlatch client and a Redisson peer on it.
struct Pair {
    server: RedisServer,
    client: Client,
    java: JavaPeer,
}

fn pair(version: &str) -> Pair {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let java = JavaPeer::single(version, &server.url());
    Pair {
        server,
        client,
        java,
    }
}

/// A pair whose two sides renew every `watchdog / 3`.
fn pair_with_watchdog(version: &str, watchdog: Duration) -> Pair {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let java = JavaPeer::start(
        version,
        &[
            "--single".to_owned(),
            server.url(),
            "--watchdog".to_owned(),
            watchdog.as_millis().to_string(),
        ],
    );
    Pair {
        server,
        client,
        java,
    }
}

fn p50(mut samples: Vec<u64>) -> u64 {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// 50 hand-overs each way on `kind` ("lock" or "fair"): a Rust waiter woken by Java's
/// `unlock()`, and a Java waiter woken by redlatch's release. Returns the p50 latencies (µs)
/// from the release call's start to the waiter's acquire returning.
fn handovers(version: &str, kind: &str, rounds: usize) -> (u64, u64) {
    let mut p = pair(version);
    let name = format!("interop:{kind}:handover");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let lock = match kind {
        "fair" => p.client.fair_lock(&name),
        _ => p.client.lock(&name),
    };
    let mut java_to_rust = Vec::new();
    let mut java_unlock_calls = Vec::new();
    for _ in 0..rounds {
        p.java.call("a", &format!("lock {kind} {name}")).value();
        let rust = RustWaiter::spawn(lock.clone());
        await_waiting(&p.client, 1);
        let released = p.java.call("a", &format!("unlock {kind} {name}"));
        let woke = rust.woke("on Java's unlock");
        java_to_rust.push((woke - released.t0) / 1000);
        java_unlock_calls.push((released.t1 - released.t0) / 1000);
    }
    let mut rust_to_java = Vec::new();
    for _ in 0..rounds {
        let guard = lock.lock().unwrap();
        // A fair waiter subscribes to a channel of its own (the lock's channel, a colon and
        // its owner id).
        let pattern = match kind {
            "fair" => format!("{channel}:*"),
            _ => channel.clone(),
        };
        java_waits(&p.server, &pattern, || {
            p.java.send("b", &format!("lock {kind} {name}"))
        });
        let start = monotonic_ns();
        guard.unlock().unwrap();
        let acquired = p.java.reply("b");
        acquired.value();
        rust_to_java.push((acquired.t1 - start) / 1000);
        p.java.call("b", &format!("unlock {kind} {name}")).value();
    }
    assert!(!lock.is_locked().unwrap());
    let (jr, rj) = (p50(java_to_rust.clone()), p50(rust_to_java.clone()));
    eprintln!(
        "Redisson {version} {kind}: hand-over p50 Java->Rust {jr} us (max {}; Java's unlock call alone p50 {} us), Rust->Java {rj} us (max {}), {rounds} each way",
        java_to_rust.iter().max().unwrap(),
        p50(java_unlock_calls),
        rust_to_java.iter().max().unwrap()
    );
    // Woken by pub/sub, not by the lease (30 s) running out: far below it, even on a loaded
    // machine.
    for latency in java_to_rust.iter().chain(&rust_to_java) {
        assert!(*latency < 5_000_000, "a hand-over took {latency} us");
    }
    (jr, rj)
}

#[test]
fn rlock_unlock_on_either_side_wakes_the_other_by_pubsub() {
    require_java!();
    for version in versions() {
        let rounds = if version == NEWEST { 50 } else { 10 };
        handovers(&version, "lock", rounds);
    }
}

#[test]
fn fair_lock_hand_over_both_ways() {
    require_java!();
    for version in versions() {
        handovers(&version, "fair", 10);
    }
}

#[test]
fn java_and_rust_threads_lose_no_update_under_one_lock() {
    require_java!();
    const EACH: u32 = 100;
    const THREADS: usize = 3;
    let mut p = pair(NEWEST);
    let name = "interop:counter:lock";
    let counter = "interop:counter";
    for t in 0..THREADS {
        p.java.send(
            &format!("j{t}"),
            &format!("incr lock {name} {counter} {EACH}"),
        );
    }
    let rust: Vec<_> = (0..THREADS)
        .map(|_| {
            let lock = p.client.lock(name);
            let mut conn = p.server.conn();
            thread::spawn(move || {
                for _ in 0..EACH {
                    let guard = lock.lock().unwrap();
                    let v: Option<u64> = conn.get(counter).unwrap();
                    let _: () = conn.set(counter, v.unwrap_or(0) + 1).unwrap();
                    guard.unlock().unwrap();
                }
            })
        })
        .collect();
    for t in 0..THREADS {
        assert_eq!(p.java.reply(&format!("j{t}")).value(), EACH.to_string());
    }
    for r in rust {
        r.join().unwrap();
    }
    let total: u64 = p.server.conn().get(counter).unwrap();
    assert_eq!(total, 2 * THREADS as u64 * u64::from(EACH), "lost updates");
    assert!(!p.client.lock(name).is_locked().unwrap());
}

#[test]
fn hold_counts_and_queries_agree_on_both_sides() {
    require_java!();
    let mut p = pair(NEWEST);
    let name = "interop:queries";
    let lock = p.client.lock(name);
    let mut raw = p.server.conn();

    // A Java hold of count 2, as redlatch sees it.
    p.java.call("a", &format!("lock lock {name}")).value();
    p.java.call("a", &format!("lock lock {name}")).value();
    let java_owner = p.java.owner("a");
    let tid = java_owner.rsplit(':').next().unwrap().to_owned();
    let fields: Vec<(String, u32)> = raw.hgetall(name).unwrap();
    assert_eq!(fields, vec![(java_owner.clone(), 2)]);
    assert_eq!(p.java.call("a", &format!("count lock {name}")).value(), "2");
    assert_eq!(
        p.java
            .call("b", &format!("heldby lock {name} {tid}"))
            .value(),
        "true"
    );
    assert_eq!(
        p.java.call("b", &format!("held lock {name}")).value(),
        "false"
    );
    assert!(lock.is_locked().unwrap());
    assert!(!lock.is_held_by_current_thread().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 0);
    let ours = lock.remaining_lease().unwrap().unwrap();
    let theirs: u64 = p.java.call("b", &format!("ttl lock {name}")).parse();
    assert!(ours <= Duration::from_secs(30) && theirs <= 30_000);
    assert!(ours.as_millis().abs_diff(u128::from(theirs)) < 2_000);
    let inspected = p.client.inspect(name).unwrap().unwrap();
    assert_eq!(inspected.holders.len(), 1);
    assert_eq!(inspected.holders[0].owner.to_string(), java_owner);
    assert_eq!(inspected.holders[0].holds, 2);
    // `top` shows a lock only Java uses: its holder, no history.
    let top = p.client.top(name, Duration::from_secs(10)).unwrap();
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].holders.len(), 1);
    assert_eq!(top[0].holders[0].owner.to_string(), java_owner);
    assert_eq!(
        (top[0].holders[0].held_for, top[0].acquisitions_per_s),
        (None, 0.0)
    );

    // redlatch's force unlock frees Java's hold; Java's own unlock then fails as Redisson's does.
    assert!(lock.force_unlock().unwrap());
    assert_eq!(
        p.java.call("b", &format!("locked lock {name}")).value(),
        "false"
    );
    let err = p.java.call("a", &format!("unlock lock {name}"));
    assert!(
        err.error().contains("IllegalMonitorStateException"),
        "{err:?}"
    );

    // A redlatch hold of count 2, as Redisson sees it.
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    let fields: Vec<(String, u32)> = raw.hgetall(name).unwrap();
    assert_eq!(fields, vec![(p.client.owner_id(), 2)]);
    assert_eq!(
        p.java.call("a", &format!("locked lock {name}")).value(),
        "true"
    );
    assert_eq!(
        p.java.call("a", &format!("held lock {name}")).value(),
        "false"
    );
    assert_eq!(p.java.call("a", &format!("count lock {name}")).value(), "0");
    assert_eq!(
        p.java.call("a", &format!("trylock lock {name} 0")).value(),
        "false"
    );
    let theirs: u64 = p.java.call("a", &format!("ttl lock {name}")).parse();
    let ours = lock.remaining_lease().unwrap().unwrap();
    assert!(ours.as_millis().abs_diff(u128::from(theirs)) < 2_000);
    drop(inner);
    assert_eq!(lock.hold_count().unwrap(), 1);

    // Redisson's force unlock frees it; the guard's release then reports the hold lost.
    assert_eq!(
        p.java.call("a", &format!("force lock {name}")).value(),
        "true"
    );
    assert!(!lock.is_locked().unwrap());
    let err = outer.unlock().unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
}

#[test]
fn a_watchdog_renewed_hold_outlives_three_timeouts_on_either_side() {
    require_java!();
    let watchdog = Duration::from_secs(2);
    let mut p = pair_with_watchdog(NEWEST, watchdog);
    let name = "interop:watchdog";
    let lock = p.client.lock(name);
    let span = watchdog * 3 + watchdog / 2;

    // Java holds with no lease: its watchdog renews; redlatch waits in vain all along.
    p.java.call("a", &format!("lock lock {name}")).value();
    let start = Instant::now();
    assert!(lock.try_lock_for(span).unwrap().is_none());
    assert!(start.elapsed() >= span);
    assert_eq!(p.java.call("a", &format!("count lock {name}")).value(), "1");
    p.java.call("a", &format!("unlock lock {name}")).value();

    // redlatch holds with no lease: ours renews; Redisson waits in vain all along.
    let guard = lock.lock().unwrap();
    let tried = p
        .java
        .call("b", &format!("trylock lock {name} {}", span.as_millis()));
    assert_eq!(tried.value(), "false");
    assert!(Duration::from_nanos(tried.t1 - tried.t0) >= span - Duration::from_millis(50));
    assert!(!guard.is_lost());
    assert_eq!(lock.hold_count().unwrap(), 1);
    guard.unlock().unwrap();
}

#[test]
fn a_lease_running_out_on_either_side_frees_the_lock_for_the_other() {
    require_java!();
    let mut p = pair(NEWEST);
    let name = "interop:lease";
    let lock = p.client.lock(name);

    // Java takes it with a 1 s lease and never unlocks: redlatch gets it once the lease ends.
    let taken = p.java.call("a", &format!("lock lock {name} 1000"));
    taken.value();
    let guard = lock.lock().unwrap();
    // From the call's start: the lease began after it.
    let waited = Duration::from_nanos(monotonic_ns() - taken.t0);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
    guard.unlock().unwrap();

    // redlatch takes it with a 1 s lease and lets it go without releasing: Redisson gets it.
    let leased = p.client.lock(name).with_lease(Duration::from_secs(1));
    let before = monotonic_ns();
    leased.lock().unwrap().leak();
    let tried = p.java.call("b", &format!("trylock lock {name} 10000"));
    assert_eq!(tried.value(), "true");
    let waited = Duration::from_nanos(tried.t1 - before);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
    assert_eq!(p.java.call("b", &format!("count lock {name}")).value(), "1");
}

/// Java and Rust waiters queued alternately on a fair lock are served in arrival order.
fn fair_order(version: &str) {
    let mut p = pair(version);
    let name = "interop:fair:order";
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let mut raw = p.server.conn();
    let holder = p.client.fair_lock(name).lock().unwrap();
    // Places 0, 2, 4 are Java actors; 1, 3, 5 Rust threads, each told when to release.
    let (acquired_tx, acquired_rx) = mpsc::channel();
    let mut release = Vec::new();
    let mut threads = Vec::new();
    for place in 0..6 {
        if place % 2 == 0 {
            p.java
                .send(&format!("w{place}"), &format!("lock fair {name}"));
        } else {
            let (tx, rx) = mpsc::channel::<()>();
            release.push(tx);
            let lock = p.client.fair_lock(name);
            let acquired = acquired_tx.clone();
            threads.push(thread::spawn(move || {
                let guard = lock.lock().unwrap();
                acquired.send(place).unwrap();
                rx.recv().unwrap();
                guard.unlock().unwrap();
            }));
        }
        assert!(
            wait_until(Duration::from_secs(20), || raw
                .llen::<_, usize>(&queue)
                .unwrap()
                == place + 1),
            "waiter {place} did not queue"
        );
    }
    holder.unlock().unwrap();
    for place in 0..6 {
        if place % 2 == 0 {
            let actor = format!("w{place}");
            let reply = p
                .java
                .reply_within(&actor, Duration::from_secs(20))
                .unwrap_or_else(|| panic!("Java waiter {place} was not served next"));
            reply.value();
            assert!(acquired_rx.try_recv().is_err());
            p.java.call(&actor, &format!("unlock fair {name}")).value();
        } else {
            let got = acquired_rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("Rust waiter {place} was not served next"));
            assert_eq!(got, place, "served out of arrival order");
            release[place / 2].send(()).unwrap();
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert!(wait_until(Duration::from_secs(5), || !raw
        .exists::<_, bool>(name)
        .unwrap()));
    assert_eq!(raw.llen::<_, usize>(&queue).unwrap(), 0);
}

#[test]
fn fair_lock_serves_java_and_rust_waiters_in_arrival_order() {
    require_java!();
    for version in versions() {
        fair_order(&version);
    }
}

/// A Rust waiter with a priority takes its place in Redisson's fair queue by rank, behind the
/// Java head and before the Java waiters ranked after it; the deadlines along the queue stay
/// in its order, and every Java waiter is served in turn, none skipped as dead.
fn fair_priority(version: &str) {
    let mut p = pair(version);
    let name = "interop:fair:priority";
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let mut raw = p.server.conn();
    let holder = p.client.fair_lock(name).lock().unwrap();
    let queued = |raw: &mut redis::Connection, n: usize| {
        wait_until(Duration::from_secs(20), || {
            raw.llen::<_, usize>(&queue).unwrap() == n
        })
    };
    p.java.send("j0", &format!("lock fair {name}"));
    assert!(queued(&mut raw, 1));
    p.java.send("j1", &format!("lock fair {name}"));
    assert!(queued(&mut raw, 2));
    let (acquired_tx, acquired_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let lock = p.client.fair_lock(name).with_priority(5);
    let rust = thread::spawn(move || {
        let guard = lock.lock().unwrap();
        acquired_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        guard.unlock().unwrap();
    });
    assert!(queued(&mut raw, 3));
    p.java.send("j2", &format!("lock fair {name}"));
    assert!(queued(&mut raw, 4));
    let order: Vec<String> = raw.lrange(&queue, 0, -1).unwrap();
    let ours: Vec<bool> = order.iter().map(|w| w.starts_with(p.client.id())).collect();
    assert_eq!(ours, [false, true, false, false], "{order:?}");
    let deadlines: Vec<f64> = order
        .iter()
        .map(|w| raw.zscore(&timeouts, w).unwrap())
        .collect();
    assert!(
        deadlines.windows(2).all(|d| d[0] < d[1]),
        "deadlines along the queue {deadlines:?}"
    );
    holder.unlock().unwrap();
    for step in ["j0", "rust", "j1", "j2"] {
        if step == "rust" {
            acquired_rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the Rust waiter with a priority served second");
            release_tx.send(()).unwrap();
            continue;
        }
        p.java
            .reply_within(step, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("Java waiter {step} was not served in its turn"))
            .value();
        assert!(acquired_rx.try_recv().is_err());
        p.java.call(step, &format!("unlock fair {name}")).value();
    }
    rust.join().unwrap();
    assert!(wait_until(Duration::from_secs(5), || !raw
        .exists::<_, bool>(name)
        .unwrap()));
    assert_eq!(raw.llen::<_, usize>(&queue).unwrap(), 0);
}

#[test]
fn fair_lock_places_a_rust_waiter_with_a_priority_among_java_waiters() {
    require_java!();
    for version in versions() {
        fair_priority(&version);
    }
}

/// A Java waiter that times out leaves the queue as Redisson does, and the Rust waiter behind
/// it is served at once on the release.
fn fair_java_timeout(version: &str) {
    let mut p = pair(version);
    let name = "interop:fair:timeout";
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let mut raw = p.server.conn();
    let holder = p.client.fair_lock(name).lock().unwrap();
    p.java.send("j", &format!("trylock fair {name} 5000"));
    assert!(wait_until(Duration::from_secs(20), || raw
        .llen::<_, usize>(&queue)
        .unwrap()
        == 1));
    let rust = RustWaiter::spawn(p.client.fair_lock(name));
    assert!(wait_until(Duration::from_secs(20), || raw
        .llen::<_, usize>(&queue)
        .unwrap()
        == 2));
    let both: Vec<String> = raw.lrange(&queue, 0, -1).unwrap();
    assert!(
        both[0].starts_with(&p.java.id) && both[1].starts_with(p.client.id()),
        "the Java waiter first, the Rust one behind it: {both:?}"
    );
    let timed_out = p.java.reply("j");
    assert_eq!(timed_out.value(), "false");
    let queued: Vec<String> = raw.lrange(&queue, 0, -1).unwrap();
    assert_eq!(
        queued.len(),
        1,
        "the Java waiter left the queue: {queued:?}"
    );
    assert!(queued[0].starts_with(p.client.id()));
    let timed: Vec<String> = raw.zrange(&timeouts, 0, -1).unwrap();
    assert_eq!(timed, queued);
    let released = monotonic_ns();
    holder.unlock().unwrap();
    let delay = Duration::from_nanos(rust.woke("behind the Java waiter that left") - released);
    assert!(
        delay < Duration::from_secs(2),
        "the Rust waiter was delayed {delay:?}"
    );
}

#[test]
fn fair_lock_java_waiter_timing_out_does_not_delay_rust_waiters() {
    require_java!();
    for version in versions() {
        fair_java_timeout(&version);
    }
}

/// A pair whose fair locks skip a silent head after `thread_wait` on both sides (`None`: the
/// default, 5 minutes), and whose watchdogs renew every `watchdog / 3`.
fn fair_pair(version: &str, thread_wait: Option<Duration>, watchdog: Duration) -> Pair {
    let server = RedisServer::new();
    let mut config = Config::builder(server.url().as_str()).watchdog_timeout(watchdog);
    let mut args = vec![
        "--single".to_owned(),
        server.url(),
        "--watchdog".to_owned(),
        watchdog.as_millis().to_string(),
    ];
    if let Some(wait) = thread_wait {
        config = config.fair_thread_wait(wait);
        args.extend(["--fair-wait".to_owned(), wait.as_millis().to_string()]);
    }
    let client = Client::new(config.build().unwrap()).unwrap();
    let java = JavaPeer::start(version, &args);
    Pair {
        server,
        client,
        java,
    }
}

/// The server's clock in ms, as the scripts read it.
fn server_ms(raw: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(raw).unwrap();
    s * 1000 + us / 1000
}

/// A Rust thread that takes `lock` (blocking as long as it must), reports when, and holds it
/// until told to release.
fn rust_holder(
    lock: redlatch::Lock,
) -> (
    mpsc::Receiver<u64>,
    mpsc::Sender<()>,
    thread::JoinHandle<()>,
) {
    let (acquired_tx, acquired) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let thread = thread::spawn(move || {
        let guard = lock.lock().expect("the Rust waiter's lock()");
        acquired_tx.send(monotonic_ns()).unwrap();
        let _ = release_rx.recv();
        guard.unlock().expect("the Rust waiter's unlock");
    });
    (acquired, release, thread)
}

/// Waits until the fair queue of `name` is `n` long, and returns it.
fn queued(raw: &mut redis::Connection, name: &str, n: usize) -> Vec<String> {
    let key = format!("redisson_lock_queue:{{{name}}}");
    let mut seen = Vec::new();
    let reached = wait_until(Duration::from_secs(20), || {
        seen = raw.lrange(&key, 0, -1).unwrap();
        seen.len() == n
    });
    assert!(reached, "the queue of {name} did not reach {n}: {seen:?}");
    seen
}

/// A Java waiter ahead that takes the lock through `tryLock(1 hour)` lowers every deadline by
/// an hour (RedissonFairLock's acquire): the Rust waiter behind it keeps its place, a
/// newcomer's `tryLock(0)` (which prunes dead-looking heads first) does not get ahead of it,
/// and Java's release wakes it by pub/sub.
fn fair_long_java_wait(version: &str, thread_wait: Option<Duration>) {
    let mut p = fair_pair(version, thread_wait, Duration::from_secs(30));
    let name = "interop:fair:long-wait";
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let mut raw = p.server.conn();
    let holder = p.client.fair_lock(name).lock().unwrap();
    p.java.send("j", &format!("trylock fair {name} 3600000"));
    queued(&mut raw, name, 1);
    let (acquired, release, rust) = rust_holder(p.client.fair_lock(name));
    let both = queued(&mut raw, name, 2);
    assert!(both[0].starts_with(&p.java.id) && both[1].starts_with(p.client.id()));
    let ours = both[1].clone();
    holder.unlock().unwrap();
    assert_eq!(p.java.reply("j").value(), "true");
    let deadline: i64 = raw.zscore(&timeouts, &ours).unwrap();
    let now = server_ms(&mut raw);
    assert!(
        deadline > now,
        "Redisson {version}, thread wait {thread_wait:?}: the live waiter's deadline passed ({} ms ago)",
        now - deadline
    );
    assert_eq!(
        p.java.call("n", &format!("trylock fair {name} 0")).value(),
        "false"
    );
    let rest: Vec<String> = raw
        .lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .unwrap();
    assert_eq!(
        rest,
        std::slice::from_ref(&ours),
        "Redisson {version}: the live waiter was dropped"
    );
    let released = p.java.call("j", &format!("unlock fair {name}"));
    let woke = acquired
        .recv_timeout(Duration::from_secs(10))
        .expect("the Rust waiter was not served after the Java holder");
    let delay = Duration::from_nanos(woke.saturating_sub(released.t0));
    assert!(
        delay < Duration::from_secs(2),
        "woken {delay:?} after the release"
    );
    assert_eq!(
        p.java.call("n", &format!("trylock fair {name} 0")).value(),
        "false",
        "a newcomer got the lock the Rust waiter holds"
    );
    release.send(()).unwrap();
    rust.join().unwrap();
    assert_eq!(
        p.java.call("n", &format!("trylock fair {name} 0")).value(),
        "true"
    );
    p.java.call("n", &format!("unlock fair {name}")).value();
}

#[test]
fn fair_rust_waiter_behind_a_java_try_lock_of_an_hour_keeps_its_place() {
    require_java!();
    for version in versions() {
        fair_long_java_wait(&version, None);
        fair_long_java_wait(&version, Some(Duration::from_secs(1)));
    }
}

/// A Java waiter ahead that gives up after a wait longer than the thread wait lowers the
/// deadlines behind it by that wait (RedissonFairLock's acquireFailedAsync), into the past: a
/// Redisson script then pops the live Rust waiter behind it. The Rust waiter finds itself gone
/// at its next check-in and takes back the head, ahead of a Java waiter that queued after it,
/// and is served first.
fn fair_java_leaver(version: &str) {
    let mut p = fair_pair(
        version,
        Some(Duration::from_secs(1)),
        Duration::from_secs(3),
    );
    let name = "interop:fair:leaver";
    let mut raw = p.server.conn();
    let holder = p.client.fair_lock(name).lock().unwrap();
    p.java.send("j", &format!("trylock fair {name} 6000"));
    queued(&mut raw, name, 1);
    let (acquired, release, rust) = rust_holder(p.client.fair_lock(name));
    let ours = queued(&mut raw, name, 2)[1].clone();
    assert_eq!(p.java.reply("j").value(), "false");
    // Lowered by 6 s, the Rust waiter's deadline is in the past: the newcomer's Redisson
    // acquire pops it (unless the waiter checked in first) and queues behind.
    p.java.send("k", &format!("lock fair {name}"));
    let key = format!("redisson_lock_queue:{{{name}}}");
    let mut seen: Vec<String> = Vec::new();
    let order = wait_until(Duration::from_secs(10), || {
        seen = raw.lrange(&key, 0, -1).unwrap();
        seen.len() == 2 && seen[0] == ours && seen[1].starts_with(&p.java.id)
    });
    assert!(
        order,
        "Redisson {version}: the Rust waiter is not back ahead of the Java newcomer: {seen:?}"
    );
    holder.unlock().unwrap();
    acquired
        .recv_timeout(Duration::from_secs(10))
        .expect("the Rust waiter was not served first");
    assert!(p
        .java
        .reply_within("k", Duration::from_millis(200))
        .is_none());
    release.send(()).unwrap();
    rust.join().unwrap();
    p.java.reply("k").value();
    p.java.call("k", &format!("unlock fair {name}")).value();
}

#[test]
fn fair_rust_waiter_popped_by_a_java_leavers_decrement_takes_back_the_head() {
    require_java!();
    for version in versions() {
        fair_java_leaver(&version);
    }
}

/// The fair waiter of `fair_dead_heads`, in a process of its own (killed there while it
/// waits): takes the fair lock `name` with a thread wait of `wait_ms` and prints its owner id.
#[test]
#[ignore = "run by fair_lock_dead_heads_cost_one_thread_wait_after_a_release"]
fn fair_waiter_child() {
    let spec = std::env::var("REDLATCH_FAIR_WAITER").expect("run by its parent test");
    let mut parts = spec.split(' ');
    let (url, name, wait_ms) = (
        parts.next().unwrap(),
        parts.next().unwrap().to_owned(),
        parts.next().unwrap().parse().unwrap(),
    );
    let config = Config::builder(url)
        .fair_thread_wait(Duration::from_millis(wait_ms))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    println!("OWNER {}", client.owner_id());
    let _guard = client.fair_lock(&name).lock().unwrap();
    println!("ACQUIRED");
}

/// A fair queue J1 R1 C J2 R2 behind a Java holder (J: Java waiters, J1 in a JVM of its own;
/// R: Rust waiters; C: a Rust waiter in a process of its own), thread wait 2 s on both sides
/// and 30 s leases. J1's JVM and C's process are killed; each dead head costs the live waiter
/// behind it one thread wait after the release that woke it (plus a second), not its lease,
/// whether the release was Redisson's (which wakes the head alone and moves no deadline) or
/// ours, and the live waiters keep their places.
fn fair_dead_heads(version: &str) {
    let wait = Duration::from_secs(2);
    let mut p = fair_pair(version, Some(wait), Duration::from_secs(30));
    let url = p.server.url();
    let mut dying = JavaPeer::start(
        version,
        &[
            "--single".to_owned(),
            url.clone(),
            "--fair-wait".to_owned(),
            wait.as_millis().to_string(),
        ],
    );
    let name = "interop:fair:dead-heads";
    let mut raw = p.server.conn();
    p.java.call("h", &format!("lock fair {name}")).value();
    dying.send("j1", &format!("lock fair {name}"));
    queued(&mut raw, name, 1);
    let (r1_got, r1_release, r1) = rust_holder(p.client.fair_lock(name));
    queued(&mut raw, name, 2);
    let mut child = support::child::ChildTest::start(
        "fair_waiter_child",
        &[(
            "REDLATCH_FAIR_WAITER",
            format!("{url} {name} {}", wait.as_millis()),
        )],
    );
    let child_owner = child.next("OWNER", Duration::from_secs(60));
    queued(&mut raw, name, 3);
    p.java.send("j2", &format!("lock fair {name}"));
    queued(&mut raw, name, 4);
    let (r2_got, r2_release, r2) = rust_holder(p.client.fair_lock(name));
    let all = queued(&mut raw, name, 5);
    assert!(
        all[0].starts_with(&dying.id)
            && all[1].starts_with(p.client.id())
            && all[2] == child_owner
            && all[3].starts_with(&p.java.id)
            && all[4].starts_with(p.client.id()),
        "{all:?}"
    );
    dying.kill();
    let _ = child.child.kill();
    let _ = child.child.wait();

    // The Java holder wakes the dead J1: R1 hears it on J1's channel, and gets the lock once
    // J1's thread wait is over.
    let unlocked = p.java.call("h", &format!("unlock fair {name}"));
    unlocked.value();
    let released = unlocked.t0;
    let got = r1_got
        .recv_timeout(Duration::from_secs(90))
        .expect("R1 was served behind the dead JVM");
    let behind_java = Duration::from_nanos(got.saturating_sub(released));
    assert_eq!(
        queued(&mut raw, name, 3)[1..],
        all[3..],
        "Redisson {version}: a live waiter lost its place"
    );
    // R1 wakes the dead C: J2 gets the lock once C's thread wait is over.
    let released = monotonic_ns();
    r1_release.send(()).unwrap();
    r1.join().unwrap();
    let j2 = p
        .java
        .reply_within("j2", Duration::from_secs(90))
        .expect("J2 was served behind the dead Rust process");
    j2.value();
    let behind_rust = Duration::from_nanos(j2.t1.saturating_sub(released));
    assert_eq!(queued(&mut raw, name, 1), all[4..]);
    eprintln!(
        "Redisson {version}: served {behind_java:?} after the release behind a dead JVM, \
         {behind_rust:?} behind a dead Rust process"
    );
    // And J2's release serves R2 at once.
    let released = p.java.call("j2", &format!("unlock fair {name}"));
    let got = r2_got
        .recv_timeout(Duration::from_secs(20))
        .expect("R2 was served after J2");
    assert!(Duration::from_nanos(got.saturating_sub(released.t0)) < Duration::from_secs(2));
    r2_release.send(()).unwrap();
    r2.join().unwrap();
    for (what, took) in [
        ("a dead JVM", behind_java),
        ("a dead Rust process", behind_rust),
    ] {
        assert!(
            took < wait + Duration::from_secs(1),
            "Redisson {version}: the waiter behind {what} was served {took:?} after the release"
        );
    }
}

#[test]
fn fair_lock_dead_heads_cost_one_thread_wait_after_a_release() {
    require_java!();
    for version in versions() {
        fair_dead_heads(&version);
    }
}

/// Readers share across languages; a writer on either side excludes readers on both; a
/// write-to-read downgrade on either side is seen by the other.
fn read_write(version: &str) {
    let mut p = pair(version);
    let name = "interop:rw";
    let rw = p.client.read_write_lock(name);
    let mut raw = p.server.conn();

    // Readers share.
    p.java.call("a", &format!("lock read {name}")).value();
    let ours = rw.read().try_lock().unwrap().expect("a Rust reader shares");
    let mode: String = raw.hget(name, "mode").unwrap();
    assert_eq!(mode, "read");
    assert!(rw.write().try_lock().unwrap().is_none());
    assert_eq!(
        p.java.call("b", &format!("trylock write {name} 0")).value(),
        "false"
    );
    drop(ours);
    p.java.call("a", &format!("unlock read {name}")).value();
    assert!(!rw.read().is_locked().unwrap());

    // A Java writer excludes Rust readers, and its unlock wakes them.
    p.java.call("a", &format!("lock write {name}")).value();
    assert!(rw.read().try_lock().unwrap().is_none());
    let reader = RustWaiter::spawn(rw.read());
    await_waiting(&p.client, 1);
    p.java.call("a", &format!("unlock write {name}")).value();
    reader.woke("a reader, on the Java writer's unlock");

    // A Rust writer excludes Java readers, and its release wakes them.
    let writer = rw.write().lock().unwrap();
    assert_eq!(
        p.java.call("a", &format!("trylock read {name} 0")).value(),
        "false"
    );
    java_waits(&p.server, &format!("redisson_rwlock:{{{name}}}"), || {
        p.java.send("a", &format!("lock read {name}"))
    });
    writer.unlock().unwrap();
    p.java.reply("a").value();
    p.java.call("a", &format!("unlock read {name}")).value();

    // Readers on one side hold off a writer on the other, which wakes when the last leaves.
    let reading = rw.read().lock().unwrap();
    java_waits(&p.server, &format!("redisson_rwlock:{{{name}}}"), || {
        p.java.send("w", &format!("lock write {name}"))
    });
    assert!(p
        .java
        .reply_within("w", Duration::from_millis(200))
        .is_none());
    reading.unlock().unwrap();
    p.java.reply("w").value();
    p.java.call("w", &format!("unlock write {name}")).value();
    p.java.call("a", &format!("lock read {name}")).value();
    let writer = RustWaiter::spawn(rw.write());
    await_waiting(&p.client, 1);
    p.java.call("a", &format!("unlock read {name}")).value();
    writer.woke("a writer, when the Java reader left");

    // Java downgrades: write, read, unlock write; Rust readers now share, writers wait.
    p.java.call("a", &format!("lock write {name}")).value();
    p.java.call("a", &format!("lock read {name}")).value();
    p.java.call("a", &format!("unlock write {name}")).value();
    let mode: String = raw.hget(name, "mode").unwrap();
    assert_eq!(mode, "read");
    let shared = rw
        .read()
        .try_lock()
        .unwrap()
        .expect("read after a Java downgrade");
    assert!(rw.write().try_lock().unwrap().is_none());
    drop(shared);
    p.java.call("a", &format!("unlock read {name}")).value();

    // Rust downgrades: Java readers now share, writers wait.
    let write = rw.write().lock().unwrap();
    let read = rw.read().lock().unwrap();
    write.unlock().unwrap();
    assert_eq!(
        p.java.call("a", &format!("trylock read {name} 0")).value(),
        "true"
    );
    assert_eq!(
        p.java.call("b", &format!("trylock write {name} 0")).value(),
        "false"
    );
    p.java.call("a", &format!("unlock read {name}")).value();
    read.unlock().unwrap();
    assert!(!rw.read().is_locked().unwrap());
}

#[test]
fn read_write_lock_shared_and_excluded_across_languages() {
    require_java!();
    for version in versions() {
        read_write(&version);
    }
}

/// Two threads of one redlatch client take turns on a lock, passing it to each other inside
/// the client (no message), while a Redisson thread waits: to Redisson that is one long hold,
/// and it gets the lock once a release goes to everyone (after at most 8 passes), woken by
/// the message Redisson's waiters expect.
#[test]
fn a_redisson_waiter_gets_a_lock_passed_between_threads_of_one_client() {
    require_java!();
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let mut p = pair(NEWEST);
    let name = "interop:passed";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let first = p.client.lock(name).lock().unwrap();
    java_waits(&p.server, &channel, || {
        p.java.send("b", &format!("lock lock {name}"))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let turns = Arc::new(AtomicU64::new(0));
    let takers: Vec<_> = (0..2)
        .map(|_| {
            let (client, stop, turns) = (p.client.clone(), stop.clone(), turns.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let guard = client.lock(name).lock().unwrap();
                    thread::sleep(Duration::from_millis(2));
                    drop(guard);
                    turns.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    await_waiting(&p.client, 2);
    let mut raw = p.server.conn();
    let published = support::command_calls(&mut raw, "publish");
    drop(first);
    let acquired = p.java.reply_within("b", Duration::from_secs(20));
    let java_owner = p.java.owner("b");
    let fields: Vec<String> = raw.hkeys(name).unwrap();
    stop.store(true, Ordering::SeqCst);
    let turns_before = turns.load(Ordering::SeqCst);
    let publishes = support::command_calls(&mut raw, "publish") - published;
    acquired.expect("Redisson got the lock").value();
    assert_eq!(fields, vec![java_owner], "Redisson alone holds it");
    assert!(
        publishes <= turns_before / 2 + 1,
        "most releases were passes: {publishes} publishes in {turns_before} turns"
    );
    p.java.call("b", &format!("unlock lock {name}")).value();
    for t in takers {
        t.join().unwrap();
    }
    assert!(!p.client.lock(name).is_locked().unwrap());
}

#[test]
fn a_redisson_waiter_gets_a_lock_whose_holder_waits_on_a_condition() {
    // The wait's release is the plain unlock: Redisson's waiter hears it and takes the lock,
    // and sees one field, its own, while the Rust thread waits.
    require_java!();
    let mut p = pair(NEWEST);
    let name = "interop:condition";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let (tx, done) = mpsc::channel();
    let client = p.client.clone();
    let (held_tx, held) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        let lock = client.lock(name);
        let _outer = lock.lock().unwrap();
        let mut guard = lock.lock().unwrap();
        held_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        let waited = lock
            .condition("ready")
            .wait_for(&mut guard, Duration::from_secs(30))
            .unwrap();
        tx.send((!waited.timed_out(), lock.hold_count().unwrap()))
            .unwrap();
    });
    held.recv().unwrap();
    java_waits(&p.server, &channel, || {
        p.java.send("b", &format!("lock lock {name}"))
    });
    // The Rust holder starts waiting only now: Redisson is queued on the channel.
    go.send(()).unwrap();
    let acquired = p.java.reply_within("b", Duration::from_secs(20));
    acquired.expect("Redisson got the lock").value();
    let mut raw = p.server.conn();
    let fields: Vec<String> = raw.hkeys(name).unwrap();
    assert_eq!(fields, vec![p.java.owner("b")], "Redisson alone holds it");
    p.java.call("b", &format!("unlock lock {name}")).value();
    let notifier = Client::open(p.server.url()).unwrap();
    let lock = notifier.lock(name);
    let guard = lock.lock().unwrap();
    assert!(lock.condition("ready").notify_one().unwrap());
    drop(guard);
    let (notified, count) = done.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(notified);
    assert_eq!(count, 2, "the holder's two holds are back");
    holder.join().unwrap();
}

#[test]
fn a_cycle_through_a_java_waiter_is_never_reported() {
    // Redisson records no waits: a cycle through one of its threads is missed (the guide says
    // so), never taken for one that is not there.
    require_java!();
    let p = pair(NEWEST);
    let mut java = p.java;
    let config = Config::builder(p.server.url().as_str())
        .deadlock_check_after(Duration::from_millis(100))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    java.call("a", "lock lock interop:cycle:1").value();
    let mine = client.lock("interop:cycle:2").lock().unwrap();
    java.send("a", "lock lock interop:cycle:2");
    let started = Instant::now();
    let got = client
        .lock("interop:cycle:1")
        .try_lock_for(Duration::from_millis(1500))
        .expect("no deadlock reported");
    assert!(got.is_none(), "Java holds it");
    assert!(started.elapsed() >= Duration::from_millis(1400));
    drop(mine);
    java.reply("a").value(); // the Java thread gets interop:cycle:2
    java.call("a", "unlock lock interop:cycle:2").value();
    java.call("a", "unlock lock interop:cycle:1").value();
}

// The group lock (`Client::group_lock`, Redisson's `getMultiLock(group, values)`,
// `RedissonFasterMultiLock`): only Redisson 3.38.0 and later have it; the peer's values are
// Strings written by its codec (Kryo5Codec by default), ours the same bytes (`ValueCodec`).

/// Whether Redisson `version` has the group lock, printing why a test skips it if not.
fn has_group_lock(version: &str) -> bool {
    let number = |part: Option<&str>| part.and_then(|p| p.parse::<u32>().ok()).unwrap_or(0);
    let mut parts = version.split('.');
    let (major, minor) = (number(parts.next()), number(parts.next()));
    let has = (major, minor) >= (3, 38);
    if !has {
        eprintln!("skipped on Redisson {version}: getMultiLock(group, values) came in 3.38.0");
    }
    has
}

fn group_of(client: &Client, codec: ValueCodec, values: &[&str]) -> redlatch::Lock {
    client.group_lock("class_100", values.iter().map(|v| codec.encode_str(v)))
}

#[test]
fn group_values_block_across_languages_and_disjoint_ones_are_held_at_once() {
    require_java!();
    let channel = "redisson_lock__channel:{class_100}";
    for version in versions() {
        if !has_group_lock(&version) {
            continue;
        }
        let mut p = pair(&version);
        let kryo = ValueCodec::Kryo5;
        // Java holds {a, b}: a Rust acquirer of {b, c} waits, and gets them on Java's unlock.
        p.java.call("a", "lock group class_100=a,b").value();
        let rust = RustWaiter::spawn(group_of(&p.client, kryo, &["b", "c"]));
        await_waiting(&p.client, 1);
        let released = p.java.call("a", "unlock group class_100=a,b");
        let woke = rust.woke("on Java's unlock");
        let latency = Duration::from_nanos(woke.saturating_sub(released.t0));
        assert!(latency < Duration::from_secs(5), "took {latency:?}");

        // Rust holds {b, c}: a Java acquirer of {a, b} waits, and gets them on our release.
        let guard = group_of(&p.client, kryo, &["b", "c"]).lock().unwrap();
        assert_eq!(p.java.call("b", "locked group class_100=c").value(), "true");
        assert_eq!(
            p.java.call("b", "trylock group class_100=a,b 0").value(),
            "false"
        );
        java_waits(&p.server, channel, || {
            p.java.send("b", "lock group class_100=a,b")
        });
        let start = monotonic_ns();
        guard.unlock().unwrap();
        let acquired = p.java.reply("b");
        acquired.value();
        let latency = Duration::from_nanos(acquired.t1.saturating_sub(start));
        assert!(latency < Duration::from_secs(5), "took {latency:?}");

        // Disjoint values of the group, held at once from both sides.
        let cd = group_of(&p.client, kryo, &["c", "d"]).try_lock().unwrap();
        assert!(cd.is_some(), "Redisson {version}: c and d are free");
        assert!(group_of(&p.client, kryo, &["a"])
            .try_lock()
            .unwrap()
            .is_none());
        assert_eq!(
            p.java.call("c", "trylock group class_100=d,e 0").value(),
            "false"
        );
        assert_eq!(
            p.java.call("c", "trylock group class_100=e 0").value(),
            "true"
        );
        p.java.call("c", "unlock group class_100=e").value();
        p.java.call("b", "unlock group class_100=a,b").value();
        drop(cd);
        let mut raw = p.server.conn();
        let left: bool = raw.exists("class_100").unwrap();
        assert!(
            !left,
            "Redisson {version}: every value freed, the hash is gone"
        );
    }
}

#[test]
fn group_values_written_by_string_codec_exclude_across_languages() {
    require_java!();
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let args = ["--single", &server.url(), "--codec", "string"].map(str::to_owned);
    let mut java = JavaPeer::start(NEWEST, &args);
    java.call("a", "lock group class_100=001,002").value();
    let codec = ValueCodec::String;
    assert!(group_of(&client, codec, &["002", "003"])
        .try_lock()
        .unwrap()
        .is_none());
    let other = group_of(&client, codec, &["003"]).try_lock().unwrap();
    assert!(other.is_some());
    // Redisson's field of StringCodec's "001" names Java's owner.
    let mut raw = server.conn();
    let fields: Vec<String> = raw.hkeys("class_100").unwrap();
    let owner = java.owner("a");
    assert!(fields.contains(&format!("{}:{owner}:lock_count", fields_of("001"))));
    java.call("a", "unlock group class_100=001,002").value();
    assert!(group_of(&client, codec, &["002"])
        .try_lock()
        .unwrap()
        .is_some());
}

/// Redisson's field of StringCodec's `value`, read back from a hash a Rust lock wrote.
fn fields_of(value: &str) -> String {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let _guard = group_of(&client, ValueCodec::String, &[value])
        .lock()
        .unwrap();
    let owner = client.owner_id();
    let fields: Vec<String> = server.conn().hkeys("class_100").unwrap();
    let field = fields.iter().find(|f| !f.contains(':')).unwrap().clone();
    assert!(fields.contains(&format!("{field}:{owner}:expire_time")));
    field
}

#[test]
fn group_watchdogs_on_both_sides_renew_past_the_lease() {
    require_java!();
    if !has_group_lock(NEWEST) {
        return;
    }
    let watchdog = Duration::from_secs(2);
    let mut p = pair_with_watchdog(NEWEST, watchdog);
    let span = watchdog * 3 + watchdog / 2;
    let kryo = ValueCodec::Kryo5;

    // Java holds {a, b} with no lease: its watchdog renews; a Rust acquirer of {b} waits in vain.
    p.java.call("a", "lock group class_100=a,b").value();
    let start = Instant::now();
    assert!(group_of(&p.client, kryo, &["b"])
        .try_lock_for(span)
        .unwrap()
        .is_none());
    assert!(start.elapsed() >= span);
    p.java.call("a", "unlock group class_100=a,b").value();

    // Rust holds {a, b}: ours renews; Redisson's acquirer of {a} waits in vain.
    let guard = group_of(&p.client, kryo, &["a", "b"]).lock().unwrap();
    let tried = p.java.call(
        "b",
        &format!("trylock group class_100=a {}", span.as_millis()),
    );
    assert_eq!(tried.value(), "false");
    assert!(Duration::from_nanos(tried.t1 - tried.t0) >= span - Duration::from_millis(50));
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
}

#[test]
fn a_group_lease_running_out_on_either_side_frees_the_values_for_the_other() {
    require_java!();
    if !has_group_lock(NEWEST) {
        return;
    }
    let mut p = pair(NEWEST);
    let kryo = ValueCodec::Kryo5;

    // Java takes {a, b} with a 1 s lease and never unlocks: Rust gets {b} once it ends.
    let taken = p.java.call("a", "lock group class_100=a,b 1000");
    taken.value();
    let guard = group_of(&p.client, kryo, &["b"]).lock().unwrap();
    let waited = Duration::from_nanos(monotonic_ns() - taken.t0);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
    guard.unlock().unwrap();

    // Rust takes {a} with a 1 s lease and lets it go without releasing: Redisson gets {a, c}.
    let leased = group_of(&p.client, kryo, &["a"]).with_lease(Duration::from_secs(1));
    let before = monotonic_ns();
    leased.lock().unwrap().leak();
    let tried = p.java.call("b", "trylock group class_100=a,c 10000");
    assert_eq!(tried.value(), "true");
    let waited = Duration::from_nanos(tried.t1 - before);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
}

#[test]
fn a_killed_java_group_holder_frees_its_values_within_a_lease() {
    require_java!();
    if !has_group_lock(NEWEST) {
        return;
    }
    let watchdog = Duration::from_secs(2);
    let mut p = pair_with_watchdog(NEWEST, watchdog);
    p.java.call("a", "lock group class_100=a,b").value();
    let killed = Instant::now();
    p.java.kill();
    let guard = group_of(&p.client, ValueCodec::Kryo5, &["b", "c"])
        .try_lock_for(Duration::from_secs(30))
        .unwrap();
    assert!(guard.is_some(), "the dead holder's values came free");
    // Within one lease (its last renewal's), with slack for a loaded machine.
    assert!(
        killed.elapsed() < watchdog + Duration::from_secs(5),
        "took {:?}",
        killed.elapsed()
    );
}

/// The Rust holder of `a_killed_rust_group_holder_frees_its_values_within_a_lease`, in a
/// process of its own: holds {a, b} with a 2 s watchdog timeout until killed.
#[test]
#[ignore = "run by a_killed_rust_group_holder_frees_its_values_within_a_lease"]
fn group_holder_child() {
    let url = std::env::var("REDLATCH_GROUP_URL").expect("run by its parent test");
    let config = Config::builder(url.as_str())
        .watchdog_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let _guard = group_of(&client, ValueCodec::Kryo5, &["a", "b"])
        .lock()
        .unwrap();
    println!("HELD");
    // Until the parent kills this process (or its stdin closes).
    let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
}

#[test]
fn a_killed_rust_group_holder_frees_its_values_within_a_lease() {
    require_java!();
    if !has_group_lock(NEWEST) {
        return;
    }
    let mut p = pair(NEWEST);
    let mut child = support::child::ChildTest::start(
        "group_holder_child",
        &[("REDLATCH_GROUP_URL", p.server.url())],
    );
    child.next("HELD", Duration::from_secs(60));
    assert_eq!(
        p.java.call("a", "trylock group class_100=b,c 0").value(),
        "false"
    );
    let _ = child.child.kill();
    let _ = child.child.wait();
    let tried = p.java.call("a", "trylock group class_100=b,c 30000");
    assert_eq!(tried.value(), "true", "the dead holder's values came free");
    // Within one lease (2 s, from its last renewal), with slack for a loaded machine.
    let waited = Duration::from_nanos(tried.t1 - tried.t0);
    assert!(waited < Duration::from_secs(7), "took {waited:?}");
}

/// A Redisson holder (never told: it knows no revocation) is released by force at the
/// deadline: its remaining lease at the request plus the grace. Nothing is published on
/// Redisson's lock channel meanwhile; the Java side's renewal and unlock find the hold gone
/// and leave the preemptor's alone; its waiters get the lock after the preemptor as usual.
fn preempt_java_holder(version: &str) {
    let watchdog = Duration::from_millis(3000);
    let mut p = pair_with_watchdog(version, watchdog);
    let name = "interop:preempt";
    p.java.call("a", &format!("lock lock {name}")).value();
    let java_owner = p.java.owner("a");
    let mut listen = p.server.conn();
    let mut ps = listen.as_pubsub();
    ps.subscribe(format!("redisson_lock__channel:{{{name}}}"))
        .unwrap();
    ps.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let grace = Duration::from_millis(500);
    let how = redlatch::Preempt::with_grace(grace).reason("interop");
    let started = Instant::now();
    let guard = p.client.lock(name).preempt(&how).unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= grace && waited <= watchdog + grace + Duration::from_secs(2),
        "{version}: forced after {waited:?}"
    );
    assert!(
        ps.get_message().is_err(),
        "{version}: something was published on Redisson's lock channel"
    );
    // Two Java renewal periods: its watchdog finds the hold gone and does not bring it back.
    thread::sleep(watchdog * 2 / 3);
    assert_eq!(
        p.java.call("a", &format!("held lock {name}")).value(),
        "false"
    );
    let err = p.java.call("a", &format!("unlock lock {name}"));
    assert!(
        err.error().contains("IllegalMonitorState") || err.error().contains("not locked"),
        "{version}: {}",
        err.error()
    );
    assert_eq!(p.client.lock(name).hold_count().unwrap(), 1, "{version}");
    let log = p.client.lock(name).revocations(10).unwrap();
    let events: Vec<(&str, &str)> = log
        .iter()
        .map(|e| (e.event.as_str(), e.whom.as_str()))
        .collect();
    assert_eq!(
        events,
        [
            ("preempt", java_owner.as_str()),
            ("forced", java_owner.as_str())
        ],
        "{version}: a Java holder is never told"
    );
    // A Java waiter gets the lock once the preemptor releases it, woken by `0` as usual.
    p.java.send("b", &format!("trylock lock {name} 10000"));
    assert!(wait_until(Duration::from_secs(10), || {
        support::java::subscribers_matching(&mut p.server.conn(), "redisson_lock__channel:*") >= 2
    }));
    guard.unlock().unwrap();
    assert_eq!(p.java.reply("b").value(), "true", "{version}");
}

#[test]
fn a_java_holder_is_preempted_by_a_forced_release_at_the_deadline() {
    require_java!();
    for version in versions() {
        preempt_java_holder(&version);
    }
}
