//! Against Redisson itself: semaphores, the count-down latch, the rate limiter (for each
//! tested Redisson), the fenced lock, MultiLock and
//! RedLock, the non-reentrant and spin locks, and a name prefix, shared by a Java peer
//! (tests/java-peer) and redlatch, in both directions, on the newest Redisson.
//! Skipped, with a printed reason, where `java` or `mvn` is missing.

mod support;

use support::forget::ForgetAll;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config, MultiLock, PermitId, RateType, RedLock};
use support::java::{java_waits, monotonic_ns, JavaPeer, RustWaiter, NEWEST};
use support::{await_waiting, RedisServer};

fn pair() -> (RedisServer, Client, JavaPeer) {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let java = JavaPeer::single(NEWEST, &server.url());
    (server, client, java)
}

/// How long after `since` (a CLOCK_MONOTONIC reading) a Java reply came.
fn since(since: u64, until: u64) -> Duration {
    Duration::from_nanos(until.saturating_sub(since))
}

#[test]
fn semaphore_permits_taken_on_one_side_are_released_on_the_other() {
    require_java!();
    let (_server, client, mut java) = pair();
    let name = "interop:sem";
    let sem = client.semaphore(name);
    assert_eq!(
        java.call("a", &format!("sem trysetpermits {name} 3"))
            .value(),
        "true"
    );
    assert!(!sem.try_set_permits(5).unwrap(), "Java's count stands");
    assert_eq!(sem.available_permits().unwrap(), 3);

    // Rust takes 2, Java sees 1; Java takes 1, Rust sees 0.
    sem.acquire(2).forget_all().unwrap();
    assert_eq!(
        java.call("a", &format!("sem available {name}")).value(),
        "1"
    );
    java.call("a", &format!("sem acquire {name} 1")).value();
    assert_eq!(sem.available_permits().unwrap(), 0);

    // A Rust waiter wakes on Java's release.
    let (tx, rx) = mpsc::channel();
    let waiter = client.semaphore(name);
    let waiting = thread::spawn(move || {
        let guard = waiter.acquire(2).unwrap();
        tx.send(()).unwrap();
        guard.forget();
    });
    await_waiting(&client, 1);
    // Java gives back Rust's 2 permits.
    java.call("a", &format!("sem release {name} 2")).value();
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the Rust waiter woke on Java's release");
    waiting.join().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 0);

    // A Java waiter wakes on Rust's release.
    java_waits(&_server, &format!("redisson_sc:{{{name}}}"), || {
        java.send("b", &format!("sem acquire {name} 3"))
    });
    sem.release(3).unwrap();
    java.reply("b").value();
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert_eq!(
        java.call("a", &format!("sem available {name}")).value(),
        "0"
    );
}

#[test]
fn expirable_permits_cross_sides_and_leases_run_out_on_both_clocks() {
    require_java!();
    let (_server, client, mut java) = pair();
    let name = "interop:pes";
    let sem = client.permit_expirable_semaphore(name);
    assert_eq!(
        java.call("a", &format!("pes trysetpermits {name} 2"))
            .value(),
        "true"
    );
    assert_eq!(sem.available_permits().unwrap(), 2);

    // A permit Java took, released by Rust; one Rust took, released by Java.
    let theirs = java
        .call("a", &format!("pes acquire {name} 60000"))
        .value()
        .to_owned();
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert!(sem
        .remaining_lease(&PermitId::new(theirs.clone()))
        .unwrap()
        .is_some());
    sem.release(&PermitId::new(theirs)).unwrap();
    assert_eq!(
        java.call("a", &format!("pes available {name}")).value(),
        "2"
    );
    let ours = sem.acquire(Duration::from_secs(60)).forget_all().unwrap();
    assert_eq!(
        java.call("a", &format!("pes available {name}")).value(),
        "1"
    );
    java.call("a", &format!("pes release {name} {ours}"))
        .value();
    assert_eq!(sem.available_permits().unwrap(), 2);

    // A permit the watchdog renews for Rust is the permit Java updates and reads, and the
    // other way.
    let renewed = sem.acquire_renewed().unwrap();
    let id = renewed.id().to_string();
    assert_eq!(
        java.call("a", &format!("pes updatelease {name} {id} 90000"))
            .value(),
        "true"
    );
    let left = sem.remaining_lease(renewed.id()).unwrap().unwrap();
    assert!(left > Duration::from_secs(80), "{left:?}");
    let theirs: i64 = java.call("a", &format!("pes lease {name} {id}")).parse();
    assert!((80_000..=90_000).contains(&theirs), "{theirs}");
    renewed.release().unwrap();
    let theirs = java
        .call("a", &format!("pes acquire {name} 60000"))
        .value()
        .to_owned();
    sem.update_lease(
        &PermitId::new(theirs.to_uppercase()),
        Duration::from_secs(120),
    )
    .unwrap();
    let left: i64 = java
        .call("a", &format!("pes lease {name} {theirs}"))
        .parse();
    assert!((110_000..=120_000).contains(&left), "{left}");
    sem.release(&PermitId::new(theirs)).unwrap();

    // A Java waiter wakes on a Rust release (the permits' leases are far off).
    let a = sem.acquire(Duration::from_secs(60)).forget_all().unwrap();
    let _b = sem.acquire(Duration::from_secs(60)).forget_all().unwrap();
    java_waits(&_server, &format!("redisson_sc:{{{name}}}"), || {
        java.send("w", &format!("pes tryacquire {name} 10000 60000"))
    });
    let before = monotonic_ns();
    sem.release(&a).unwrap();
    let got = java.reply("w");
    assert_ne!(got.value(), "-");
    assert!(since(before, got.t1) < Duration::from_secs(5));
    java.call("w", &format!("pes release {name} {}", got.value()))
        .value();
    sem.release(&_b).unwrap();

    // Rust's permits with a 1 s lease run out for Java: its wait ends about then.
    let before = monotonic_ns();
    let _a = sem.acquire(Duration::from_secs(1)).forget_all().unwrap();
    let _b = sem.acquire(Duration::from_secs(1)).forget_all().unwrap();
    let got = java.call("a", &format!("pes tryacquire {name} 10000 60000"));
    assert_ne!(
        got.value(),
        "-",
        "Java got a permit once Rust's lease ran out"
    );
    let waited = since(before, got.t1);
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    java.call("a", &format!("pes release {name} {}", got.value()))
        .value();
    // Java's permits with a 1 s lease run out for Rust.
    java.call("a", &format!("pes acquire {name} 1000")).value();
    java.call("a", &format!("pes acquire {name} 1000")).value();
    let start = Instant::now();
    let got = sem
        .try_acquire_for(Duration::from_secs(60), Duration::from_secs(10))
        .forget_all()
        .unwrap();
    assert!(got.is_some());
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
}

#[test]
fn count_down_latch_awaited_on_one_side_counted_down_on_the_other() {
    require_java!();
    let (server, client, mut java) = pair();
    let name = "interop:latch";
    let latch = client.count_down_latch(name);
    assert_eq!(
        java.call("a", &format!("latch trysetcount {name} 2"))
            .value(),
        "true"
    );
    assert_eq!(latch.count().unwrap(), 2);
    let (tx, rx) = mpsc::channel();
    let waiter = client.count_down_latch(name);
    let waiting = thread::spawn(move || {
        tx.send(waiter.await_for(Duration::from_secs(20))).unwrap();
    });
    await_waiting(&client, 1);
    java.call("a", &format!("latch countdown {name}")).value();
    assert!(rx.try_recv().is_err(), "woke at a count of 1");
    java.call("a", &format!("latch countdown {name}")).value();
    assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap());
    waiting.join().unwrap();

    assert!(latch.try_set_count(2).unwrap());
    assert_eq!(java.call("a", &format!("latch count {name}")).value(), "2");
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    java_waits(&server, &channel, || {
        java.send("b", &format!("latch await {name} 20000"))
    });
    assert_eq!(latch.count_down().unwrap(), 1);
    assert!(java.reply_within("b", Duration::from_millis(300)).is_none());
    assert_eq!(latch.count_down().unwrap(), 0);
    assert_eq!(java.reply("b").value(), "true");
}

#[test]
fn fenced_tokens_from_both_sides_form_one_increasing_sequence() {
    require_java!();
    let (_server, client, mut java) = pair();
    let name = "interop:fenced";
    let lock = client.fenced_lock(name);
    let mut tokens = Vec::new();
    for _ in 0..5 {
        let token: u64 = java.call("a", &format!("token {name}")).parse();
        tokens.push(token);
        assert!(lock.try_lock().unwrap().is_none(), "Java holds it");
        java.call("a", &format!("unlock fenced {name}")).value();
        let guard = lock.lock().unwrap();
        tokens.push(guard.token().unwrap());
        assert_eq!(lock.latest_token().unwrap(), guard.token());
        assert_eq!(
            java.call("b", &format!("trylock fenced {name} 0")).value(),
            "false"
        );
        guard.unlock().unwrap();
    }
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "not strictly increasing: {tokens:?}"
    );
    // A Java waiter with a token wakes on Rust's release.
    let guard = lock.lock().unwrap();
    java_waits(
        &_server,
        &format!("redisson_lock__channel:{{{name}}}"),
        || java.send("a", &format!("token {name} 10000")),
    );
    let last = guard.token().unwrap();
    guard.unlock().unwrap();
    let token: u64 = java.reply("a").parse();
    assert!(token > last);
}

/// Three servers, a redlatch client and a Redisson client on each (one JVM).
fn three() -> (Vec<RedisServer>, Vec<Client>, JavaPeer) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::new()).collect();
    let clients = servers
        .iter()
        .map(|s| Client::open(s.url()).unwrap())
        .collect();
    let mut args = Vec::new();
    for s in &servers {
        args.push("--single".to_owned());
        args.push(s.url());
    }
    (servers, clients, JavaPeer::start(NEWEST, &args))
}

/// Java and Rust threads increment a counter under a lock over three servers: no update is
/// lost, so they never held it at once; and each side's hold blocks the other.
fn over_three(
    kind: &str,
    rust: impl Fn(&[Client]) -> Box<dyn Fn() -> redlatch::MultiLockGuard + Send>,
) {
    let (servers, clients, mut java) = three();
    let name = format!("interop:{kind}");
    let counter = format!("interop:{kind}:counter");
    const EACH: u64 = 40;

    java.call("a", &format!("lock {kind} {name}")).value();
    let take = rust(&clients);
    let (tx, rx) = mpsc::channel();
    let blocked = thread::spawn(move || {
        let guard = take();
        tx.send(()).unwrap();
        guard.unlock().unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "both held it"
    );
    java.call("a", &format!("unlock {kind} {name}")).value();
    rx.recv_timeout(Duration::from_secs(20))
        .expect("Rust got it after Java's unlock");
    blocked.join().unwrap();

    java.send("j", &format!("incr {kind} {name} {counter} {EACH}"));
    let take = rust(&clients);
    let url = servers[0].url();
    let rust_side = thread::spawn(move || {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        for _ in 0..EACH {
            let guard = take();
            let v: Option<u64> = conn.get(&counter).unwrap();
            let _: () = conn.set(&counter, v.unwrap_or(0) + 1).unwrap();
            guard.unlock().unwrap();
        }
    });
    assert_eq!(java.reply("j").value(), EACH.to_string());
    rust_side.join().unwrap();
    let total: u64 = servers[0]
        .conn()
        .get(format!("interop:{kind}:counter"))
        .unwrap();
    assert_eq!(total, 2 * EACH, "lost updates: both held it at once");
    for s in &servers {
        assert!(!s.conn().exists::<_, bool>(&name).unwrap());
    }
}

#[test]
fn multilock_over_three_servers_is_never_held_by_both() {
    require_java!();
    over_three("multi", |clients| {
        let multi = MultiLock::new(clients.iter().map(|c| c.lock("interop:multi"))).unwrap();
        Box::new(move || multi.lock().unwrap())
    });
}

#[test]
fn redlock_over_three_servers_is_never_held_by_both() {
    require_java!();
    over_three("red", |clients| {
        let red = RedLock::new(clients.iter().map(|c| c.lock("interop:red"))).unwrap();
        Box::new(move || red.lock().unwrap())
    });
}

#[test]
fn non_reentrant_and_spin_locks_exclude_and_wake_across_languages() {
    require_java!();
    let (server, client, mut java) = pair();
    for (kind, lock) in [
        ("nrlock", client.non_reentrant_lock("interop:nr")),
        ("nrfair", client.non_reentrant_fair_lock("interop:nrfair")),
        ("spin", client.spin_lock("interop:spin")),
    ] {
        let name = lock.name().to_owned();
        java.call("a", &format!("lock {kind} {name}")).value();
        assert!(lock.try_lock().unwrap().is_none(), "{kind}: both held it");
        // A Rust waiter gets it after Java's unlock.
        let waiter = RustWaiter::spawn(lock.clone());
        if kind != "spin" {
            await_waiting(&client, 1);
        }
        java.call("a", &format!("unlock {kind} {name}")).value();
        waiter.woke(kind);
        // A Java waiter gets it after Rust's release.
        let guard = lock.lock().unwrap();
        assert_eq!(
            java.call("a", &format!("trylock {kind} {name} 0")).value(),
            "false"
        );
        let before = monotonic_ns();
        let mut send = || java.send("a", &format!("trylock {kind} {name} 10000"));
        match kind {
            // A spin lock's waiter polls; a fair one subscribes to a channel of its own.
            "spin" => send(),
            "nrfair" => java_waits(
                &server,
                &format!("redisson_lock__channel:{{{name}}}:*"),
                send,
            ),
            _ => java_waits(&server, &format!("redisson_lock__channel:{{{name}}}"), send),
        }
        guard.unlock().unwrap();
        let got = java.reply("a");
        assert_eq!(got.value(), "true", "{kind}");
        assert!(since(before, got.t1) < Duration::from_secs(8));
        java.call("a", &format!("unlock {kind} {name}")).value();
        assert!(!lock.is_locked().unwrap());
    }
}

#[test]
fn a_name_prefix_on_both_sides_makes_the_same_keys() {
    require_java!();
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .name_prefix("app1:")
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let mut java = JavaPeer::start(
        NEWEST,
        &[
            "--single".to_owned(),
            server.url(),
            "--prefix".to_owned(),
            "app1:".to_owned(),
        ],
    );
    let mut raw = server.conn();
    let lock = client.lock("orders");
    java.call("a", "lock lock orders").value();
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys, vec!["app1:orders".to_owned()]);
    assert!(lock.is_locked().unwrap());
    assert!(lock.try_lock().unwrap().is_none());
    let waiter = RustWaiter::spawn(lock.clone());
    await_waiting(&client, 1);
    java.call("a", "unlock lock orders").value();
    waiter.woke("on the prefixed lock's channel");

    let guard = lock.lock().unwrap();
    assert_eq!(java.call("a", "locked lock orders").value(), "true");
    assert!(raw.exists::<_, bool>("app1:orders").unwrap());
    java_waits(&server, "redisson_lock__channel:{app1:orders}", || {
        java.send("a", "trylock lock orders 10000")
    });
    guard.unlock().unwrap();
    assert_eq!(java.reply("a").value(), "true");
    let sem = client.semaphore("permits");
    assert!(sem.try_set_permits(2).unwrap());
    assert_eq!(java.call("a", "sem available permits").value(), "2");
    assert!(raw.exists::<_, bool>("app1:permits").unwrap());
}

/// The most permits that entries (permits, score in ms) put in any window
/// `[t, t + interval_ms)`.
fn most_in_a_window(entries: &[(u32, u64)], interval_ms: u64) -> u32 {
    let mut by_time = entries.to_vec();
    by_time.sort_by_key(|e| e.1);
    let (mut most, mut sum, mut first) = (0, 0, 0);
    for &(permits, at) in &by_time {
        sum += permits;
        while by_time[first].1 + interval_ms <= at {
            sum -= by_time[first].0;
            first += 1;
        }
        most = most.max(sum);
    }
    most
}

#[test]
fn a_rate_limiter_is_one_limit_and_one_config_for_redisson_and_redlatch() {
    require_java!();
    for version in support::java::versions() {
        let server = RedisServer::new();
        let client = Client::open(server.url()).unwrap();
        let mut java = JavaPeer::single(&version, &server.url());
        let mut raw = server.conn();
        let name = "interop:rate";
        let api = client.rate_limiter(name);

        // Java sets the rate; redlatch reads it and cannot set another.
        let set = java.call("a", &format!("rate trysetrate {name} OVERALL 5 60000"));
        assert_eq!(set.value(), "true", "{version}");
        let config = api.config().unwrap().expect("Java's config");
        assert_eq!(
            (config.rate_type, config.rate, config.interval),
            (RateType::Overall, 5, Duration::from_secs(60)),
            "{version}"
        );
        assert!(!api
            .try_set_rate(RateType::Overall, 50, Duration::from_secs(1))
            .unwrap());

        // Permits taken on one side are gone on the other, several at a time.
        assert!(api.try_acquire(3).unwrap().is_some(), "{version}");
        let left = java.call("a", &format!("rate available {name}"));
        assert_eq!(left.value(), "2", "{version}");
        let three = java.call("a", &format!("rate tryacquire {name} 3"));
        assert_eq!(three.value(), "false", "{version}");
        let two = java.call("a", &format!("rate tryacquire {name} 2"));
        assert_eq!(two.value(), "true", "{version}");
        assert_eq!(api.try_acquire(1).unwrap(), None, "{version}");
        assert_eq!(api.available_permits().unwrap(), 0, "{version}");
        let entries = support::rate_entries(&mut raw, &format!("{{{name}}}:permits"));
        let mut permits: Vec<u32> = entries.values().map(|e| e.0).collect();
        permits.sort();
        assert_eq!(permits, [2, 3], "{version}");
        // Redisson's random is 8 bytes before 3.21, 16 after; ours is 16.
        let java_random = if version == "3.17.0" { 8 } else { 16 };
        let mut sizes: Vec<usize> = entries.keys().map(|m| m[0] as usize).collect();
        sizes.sort();
        let mut want = vec![java_random, 16];
        want.sort();
        assert_eq!(sizes, want, "{version}");

        // A limiter redlatch sets is Java's to read, type and all; per client, each has
        // its own count.
        let each = client.rate_limiter("interop:rate:each");
        assert!(each
            .try_set_rate(RateType::PerClient, 7, Duration::from_millis(2500))
            .unwrap());
        let config = java.call("a", "rate config interop:rate:each");
        assert_eq!(config.value(), "PER_CLIENT/7/2500", "{version}");
        let seven = java.call("a", "rate tryacquire interop:rate:each 7");
        assert_eq!(seven.value(), "true", "{version}");
        assert!(each.try_acquire(7).unwrap().is_some(), "{version}");
        assert_eq!(each.try_acquire(1).unwrap(), None, "{version}");
        let java_more = java.call("a", "rate tryacquire interop:rate:each 1");
        assert_eq!(java_more.value(), "false", "{version}");
    }
}

#[test]
fn redisson_and_redlatch_acquiring_together_stay_within_the_rate() {
    require_java!();
    const RATE: u32 = 4;
    const INTERVAL_MS: u64 = 1000;
    for version in support::java::versions() {
        let server = RedisServer::new();
        let client = Client::open(server.url()).unwrap();
        let mut java = JavaPeer::single(&version, &server.url());
        let name = "interop:rate:shared";
        let set = java.call(
            "a",
            &format!("rate trysetrate {name} OVERALL {RATE} {INTERVAL_MS}"),
        );
        assert_eq!(set.value(), "true");

        // Every entry lives an interval in the ZSET before a script prunes it: a look
        // every 25 ms sees each one.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = {
            let stop = stop.clone();
            let mut raw = server.conn();
            let key = format!("{{{name}}}:permits");
            thread::spawn(move || {
                let mut seen = std::collections::HashMap::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    seen.extend(support::rate_entries(&mut raw, &key));
                    thread::sleep(Duration::from_millis(25));
                }
                seen.extend(support::rate_entries(&mut raw, &key));
                seen
            })
        };
        let until = Instant::now() + Duration::from_millis(3 * INTERVAL_MS);
        let rust: Vec<_> = (0..2u32)
            .map(|i| {
                let api = client.rate_limiter(name);
                thread::spawn(move || {
                    let mut taken = 0;
                    while Instant::now() < until {
                        taken += api.acquire(1 + i).unwrap().permits;
                    }
                    taken
                })
            })
            .collect();
        let mut java_taken = 0;
        while Instant::now() < until {
            java.call("a", &format!("rate acquire {name} 2")).value();
            java_taken += 2;
        }
        let rust_taken: u32 = rust.into_iter().map(|t| t.join().unwrap()).sum();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let entries: Vec<(u32, u64)> = seen.join().unwrap().into_values().collect();
        assert_eq!(
            entries.iter().map(|e| e.0).sum::<u32>(),
            rust_taken + java_taken,
            "{version}: every permit taken is an entry"
        );
        assert!(
            rust_taken > 0 && java_taken > 0,
            "{version}: both sides took permits ({rust_taken}, {java_taken})"
        );
        let most = most_in_a_window(&entries, INTERVAL_MS);
        assert!(
            most <= RATE,
            "{version}: {most} permits in one window of {INTERVAL_MS} ms, over {RATE}"
        );
    }
}
