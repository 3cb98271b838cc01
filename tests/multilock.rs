//! MultiLock: all-or-nothing over locks on different servers, one wait budget, no deadlock,
//! and an unlock that releases everything it can and reports the rest.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error, MultiLock, ValueCodec};
use support::{key_exists, quick_client, RedisServer};

/// Takes `lock` on a thread of its own and keeps it until told; returns the release sender
/// once the lock is held.
fn hold_elsewhere(lock: redlatch::Lock) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let handle = thread::spawn(move || {
        let guard = lock.lock().unwrap();
        held_tx.send(()).unwrap();
        let _ = release_rx.recv();
        guard.unlock().unwrap();
    });
    held_rx.recv().unwrap();
    (release_tx, handle)
}

#[test]
fn takes_locks_on_two_servers_and_releases_both() {
    let (s1, s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (
        Client::open(s1.url()).unwrap(),
        Client::open(s2.url()).unwrap(),
    );
    let multi = MultiLock::new([c1.lock("ml:a"), c2.fair_lock("ml:b")]).unwrap();
    let guard = multi.lock().unwrap();
    assert_eq!(guard.held(), 2);
    assert!(!guard.is_lost());
    let owner1 = c1.owner_id();
    let count: Option<u32> = redis::cmd("HGET")
        .arg("ml:a")
        .arg(&owner1)
        .query(&mut s1.conn())
        .unwrap();
    assert_eq!(count, Some(1));
    assert!(key_exists(&mut s2.conn(), "ml:b"));
    assert_eq!(guard.member(1).unwrap().lock().name(), "ml:b");
    guard.unlock().unwrap();
    assert!(!key_exists(&mut s1.conn(), "ml:a"));
    assert!(!key_exists(&mut s2.conn(), "ml:b"));
}

#[test]
fn a_busy_member_makes_try_lock_take_nothing() {
    let (s1, s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (
        Client::open(s1.url()).unwrap(),
        Client::open(s2.url()).unwrap(),
    );
    let other = Client::open(s2.url()).unwrap();
    let (release, holder) = hold_elsewhere(other.lock("ml:b"));
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b")]).unwrap();
    assert!(multi.try_lock().unwrap().is_none());
    assert!(
        !key_exists(&mut s1.conn(), "ml:a"),
        "the free member was released again"
    );

    // The wait budget is shared: the whole call ends near it, holding nothing.
    let start = Instant::now();
    let got = multi.try_lock_for(Duration::from_millis(400)).unwrap();
    let waited = start.elapsed();
    assert!(got.is_none());
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    assert!(!key_exists(&mut s1.conn(), "ml:a"));
    release.send(()).unwrap();
    holder.join().unwrap();
}

#[test]
fn lock_waits_for_the_busy_member_then_holds_all() {
    let (s1, s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (
        Client::open(s1.url()).unwrap(),
        Client::open(s2.url()).unwrap(),
    );
    let other = Client::open(s1.url()).unwrap();
    let (release, holder) = hold_elsewhere(other.lock("ml:a"));
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b")]).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let guard = multi.lock().unwrap();
        let at = Instant::now();
        tx.send(guard.held()).unwrap();
        guard.unlock().unwrap();
        at
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "must wait"
    );
    assert!(
        !key_exists(&mut s2.conn(), "ml:b"),
        "nothing is held while waiting"
    );
    let released = Instant::now();
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 2);
    let latency = waiter.join().unwrap() - released;
    assert!(
        latency < Duration::from_secs(1),
        "woken by pub/sub, {latency:?}"
    );
}

#[test]
fn opposite_orders_do_not_deadlock_and_stay_exclusive() {
    let (s1, s2) = (RedisServer::new(), RedisServer::new());
    let inside = Arc::new(AtomicBool::new(false));
    let sections = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let (c1, c2) = (
                Client::open(s1.url()).unwrap(),
                Client::open(s2.url()).unwrap(),
            );
            let (inside, sections) = (Arc::clone(&inside), Arc::clone(&sections));
            thread::spawn(move || {
                let (a, b) = (c1.lock("ml:a"), c2.lock("ml:b"));
                let multi = if t % 2 == 0 {
                    MultiLock::new([a, b]).unwrap()
                } else {
                    MultiLock::new([b, a]).unwrap()
                };
                for _ in 0..25 {
                    let guard = multi.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    thread::sleep(Duration::from_micros(300));
                    inside.store(false, Ordering::SeqCst);
                    sections.fetch_add(1, Ordering::SeqCst);
                    guard.unlock().unwrap();
                }
            })
        })
        .collect();
    support::join_within(
        handles,
        Duration::from_secs(60),
        "multi-locks in opposite orders deadlocked",
    );
    assert_eq!(sections.load(Ordering::SeqCst), 100);
    assert!(!key_exists(&mut s1.conn(), "ml:a") && !key_exists(&mut s2.conn(), "ml:b"));
}

#[test]
fn unlock_releases_every_lock_and_reports_each_failure() {
    let (mut s1, s2, s3) = (RedisServer::new(), RedisServer::new(), RedisServer::new());
    let (c1, c2, c3) = (quick_client(&s1), quick_client(&s2), quick_client(&s3));
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b"), c3.lock("ml:c")]).unwrap();
    let guard = multi.lock().unwrap();
    // The first lock's server dies and the third lock is broken by an operator: Redisson
    // would stop at the first failure and leave the second lock held.
    s1.kill();
    let _: i64 = redis::cmd("DEL").arg("ml:c").query(&mut s3.conn()).unwrap();
    let err = guard.unlock().unwrap_err();
    match &err {
        Error::PartialUnlock {
            released,
            total,
            failures,
        } => {
            assert_eq!((*released, *total), (1, 3));
            assert_eq!(failures.len(), 2);
            assert!(failures[0].0.starts_with("#0 `ml:a`"), "{err}");
            assert!(
                failures[0].1.is_connection() || failures[0].1.is_timeout(),
                "{err}"
            );
            assert!(failures[1].0.starts_with("#2 `ml:c`"), "{err}");
            assert!(failures[1].1.is_lock_lost(), "{err}");
        }
        other => panic!("expected PartialUnlock, got {other:?}"),
    }
    assert!(err.is_partial_unlock());
    assert!(
        !key_exists(&mut s2.conn(), "ml:b"),
        "the healthy lock was released"
    );
}

#[test]
fn a_dead_member_fails_the_acquire_and_nothing_stays_held() {
    let (s1, mut s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (quick_client(&s1), quick_client(&s2));
    s2.kill();
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b")]).unwrap();
    let err = multi.lock().unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
    assert!(!key_exists(&mut s1.conn(), "ml:a"));
}

#[test]
fn explicit_lease_bounds_the_validity() {
    let (s1, s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (
        Client::open(s1.url()).unwrap(),
        Client::open(s2.url()).unwrap(),
    );
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b")])
        .unwrap()
        .with_lease(Duration::from_secs(5));
    let guard = multi.lock().unwrap();
    let validity = guard.validity();
    // 5 s minus the drift allowance (52 ms) minus the round trips.
    assert!(validity <= Duration::from_millis(4948), "{validity:?}");
    assert!(validity > Duration::from_millis(4000), "{validity:?}");
    let pttl: i64 = redis::cmd("PTTL")
        .arg("ml:b")
        .query(&mut s2.conn())
        .unwrap();
    assert!(pttl > 4000 && pttl <= 5000, "{pttl}");
    guard.unlock().unwrap();
}

#[test]
fn no_locks_is_an_invalid_argument() {
    let err = MultiLock::new(Vec::new()).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}

/// A failed multi-lock attempt over a lock the thread already holds leaves that hold (count 1,
/// still renewed) as it was: only what the attempt took is released.
#[test]
fn a_failed_member_attempt_leaves_the_threads_own_hold_alone() {
    let (s1, mut s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (quick_client(&s1), quick_client(&s2));
    let own = c1.lock("ml:a").lock().unwrap();
    s2.kill();
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b")]).unwrap();
    assert!(multi.try_lock().is_err());
    let count: Option<u32> = redis::cmd("HGET")
        .arg("ml:a")
        .arg(own.owner())
        .query(&mut s1.conn())
        .unwrap();
    assert_eq!(count, Some(1), "the thread's own hold is intact");
    assert!(!own.is_lost());
    own.unlock().unwrap();
}

// The group lock (`Client::group_lock`, Redisson's `RedissonFasterMultiLock`): values of one
// hash, all taken at once.

fn group(c: &Client, values: &[&str]) -> redlatch::Lock {
    let values = values.iter().map(|v| ValueCodec::String.encode_str(v));
    c.group_lock("class_100", values)
}

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut server.conn())
        .unwrap()
}

/// Redisson's field of StringCodec's "a" (`Hash.hash128toBase64`, computed by Redisson 4.7.0).
const FIELD_A: &str = "qwvAS12pR0CgRitaypEjUw";

#[test]
fn group_values_shared_exclude_disjoint_ones_are_held_at_once() {
    let server = RedisServer::new();
    let (c1, c2) = (
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    );
    let ab = group(&c1, &["a", "b"]).lock().unwrap();
    // Redisson's layout: the value names its owner, beside its expire_time and lock_count.
    let owner = c1.owner_id();
    assert_eq!(hget(&server, "class_100", FIELD_A), Some(owner.clone()));
    let count = format!("{FIELD_A}:{owner}:lock_count");
    assert_eq!(hget(&server, "class_100", &count).as_deref(), Some("1"));
    let expire: i64 = hget(
        &server,
        "class_100",
        &format!("{FIELD_A}:{owner}:expire_time"),
    )
    .unwrap()
    .parse()
    .unwrap();
    assert!(expire > 1_700_000_000_000, "ms since the epoch: {expire}");

    assert!(group(&c2, &["b", "c"]).try_lock().unwrap().is_none());
    let cd = group(&c2, &["c", "d"]).try_lock().unwrap();
    assert!(cd.is_some(), "values no other holds");
    assert!(group(&c2, &["a"]).is_locked().unwrap());
    assert!(!group(&c2, &["e"]).is_locked().unwrap());

    // A waiter for {b, c}... once {c, d} goes too: woken by the releases' message.
    let waiter = {
        let lock = group(&c2, &["b", "c"]);
        thread::spawn(move || {
            let guard = lock.try_lock_for(Duration::from_secs(30)).unwrap();
            let at = Instant::now();
            (guard.map(|g| g.unlock()).is_some(), at)
        })
    };
    support::await_waiting(&c2, 1);
    drop(cd);
    let released = Instant::now();
    ab.unlock().unwrap();
    let (got, at) = waiter.join().unwrap();
    assert!(got, "the waiter got b and c");
    assert!(
        at.duration_since(released) < Duration::from_secs(5),
        "woken by the release, not its lease"
    );
    assert!(
        !key_exists(&mut server.conn(), "class_100"),
        "every value freed: the hash is gone"
    );
}

#[test]
fn a_group_lock_reenters_and_its_last_release_frees_the_values() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = group(&client, &["a", "b"]);
    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());
    // A lock of some of the same values, by the same thread, re-enters those.
    let a = group(&client, &["a"]).lock().unwrap();
    assert_eq!(group(&client, &["a"]).hold_count().unwrap(), 3);
    a.unlock().unwrap();
    second.unlock().unwrap();
    assert!(key_exists(&mut server.conn(), "class_100"));
    first.unlock().unwrap();
    assert!(!key_exists(&mut server.conn(), "class_100"));
    assert_eq!(lock.hold_count().unwrap(), 0);
    assert!(group(&client, &[])
        .try_lock()
        .unwrap_err()
        .is_invalid_argument());
}

#[test]
fn a_group_lock_is_renewed_past_its_lease_and_lost_when_forced() {
    let server = RedisServer::new();
    let watchdog = Duration::from_millis(900);
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let other = Client::open(server.url()).unwrap();
    let guard = group(&client, &["a", "b"]).lock().unwrap();
    thread::sleep(watchdog * 3);
    assert!(!guard.is_lost());
    assert!(group(&other, &["b"]).try_lock().unwrap().is_none());
    // Forced free: the next renewal finds it gone and the guard says so.
    assert!(group(&other, &["b"]).force_unlock().unwrap());
    assert!(support::wait_until(Duration::from_secs(10), || guard.is_lost()));
    assert!(group(&other, &["b"]).try_lock().unwrap().is_some());
}

#[test]
fn a_group_lease_that_runs_out_frees_the_values() {
    let server = RedisServer::new();
    let (c1, c2) = (
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    );
    let lease = Duration::from_millis(500);
    let held = group(&c1, &["a", "b"]).with_lease(lease).lock().unwrap();
    let at = Instant::now();
    let got = group(&c2, &["b"])
        .try_lock_for(Duration::from_secs(20))
        .unwrap();
    assert!(got.is_some());
    assert!(at.elapsed() >= lease - Duration::from_millis(100));
    assert!(held.is_lost() || held.unlock().is_err());
}

/// An acquire in the very millisecond the group's key expires (the last hold's lease out, the
/// key still there for the script, its PTTL already 0) sets the key's expiry for the new hold,
/// so that the key, with the new hold in it, is not gone right after.
#[test]
fn a_group_taken_as_the_last_lease_runs_out_keeps_its_key() {
    let server = RedisServer::new();
    let (c1, c2) = (
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    );
    for round in 0..10 {
        let _old = group(&c1, &["a"])
            .with_lease(Duration::from_millis(30))
            .lock()
            .unwrap();
        // A waiter tries again as the lease ends: in the millisecond the key expires.
        let guard = group(&c2, &["a"])
            .try_lock_for(Duration::from_secs(20))
            .unwrap()
            .expect("the lease ran out");
        let pttl: i64 = redis::cmd("PTTL")
            .arg("class_100")
            .query(&mut server.conn())
            .unwrap();
        assert!(
            pttl > 0,
            "round {round}: the new hold's key expires at once ({pttl})"
        );
        guard.unlock().unwrap();
    }
}

#[test]
fn a_group_waiter_returns_when_interrupted_and_when_its_client_closes() {
    let server = RedisServer::new();
    let (holder, waiter) = (
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    );
    let _held = group(&holder, &["a", "b"]).lock().unwrap();
    let wait = |lock: redlatch::Lock| {
        let (tx, rx) = mpsc::channel();
        let handle = thread::spawn(move || {
            tx.send(redlatch::Interrupter::current()).unwrap();
            lock.lock().map(drop)
        });
        (rx.recv().unwrap(), handle)
    };
    let (interrupter, handle) = wait(group(&waiter, &["b", "c"]));
    support::await_waiting(&waiter, 1);
    interrupter.interrupt();
    assert!(handle.join().unwrap().unwrap_err().is_interrupted());

    let (_, handle) = wait(group(&waiter, &["a"]));
    support::await_waiting(&waiter, 1);
    waiter.close();
    assert!(handle.join().unwrap().unwrap_err().is_closed());
}

// Lock sets: many plain locks, all or none, one script per slot group.

fn set_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn keys_like(server: &RedisServer, pattern: &str) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut server.conn())
        .unwrap();
    keys.len()
}

#[test]
fn a_lock_set_takes_nothing_while_one_name_is_held_elsewhere() {
    let server = RedisServer::new();
    let (client, other) = (quick_client(&server), quick_client(&server));
    let names = set_names("ls-none", 50);
    let (release, holder) = hold_elsewhere(other.lock(&names[37]));
    assert!(client.lock_set(&names).try_lock().unwrap().is_none());
    // Only the name held elsewhere exists: no hash of ours was left behind.
    assert_eq!(keys_like(&server, "ls-none:*"), 1);
    let owner = client.owner_id();
    let ours: Option<u32> = redis::cmd("HGET")
        .arg(&names[37])
        .arg(&owner)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(ours, None);
    release.send(()).unwrap();
    holder.join().unwrap();
    let guard = client
        .lock_set(&names)
        .try_lock()
        .unwrap()
        .expect("free now");
    assert_eq!(guard.held(), 50);
    guard.unlock().unwrap();
    assert_eq!(keys_like(&server, "ls-none:*"), 0);
}

#[test]
fn a_lock_set_holds_each_name_as_an_ordinary_lock_a_peer_sees() {
    let server = RedisServer::new();
    let (client, other) = (quick_client(&server), quick_client(&server));
    let names = set_names("ls-java", 20);
    // A name this thread holds already is re-entered, and keeps its own hold after.
    let before = client.lock(&names[3]).lock().unwrap();
    let guard = client.lock_set(&names).lock().unwrap();
    let owner = client.owner_id();
    let mut conn = server.conn();
    for (i, name) in names.iter().enumerate() {
        let kind: String = redis::cmd("TYPE").arg(name).query(&mut conn).unwrap();
        assert_eq!(kind, "hash", "{name}");
        let count: u32 = redis::cmd("HGET")
            .arg(name)
            .arg(&owner)
            .query(&mut conn)
            .unwrap();
        assert_eq!(count, if i == 3 { 2 } else { 1 }, "{name}");
        let pttl: i64 = redis::cmd("PTTL").arg(name).query(&mut conn).unwrap();
        assert!(pttl > 0, "{name} has a lease: {pttl}");
        assert!(other.lock(name).is_locked().unwrap());
    }
    guard.unlock().unwrap();
    assert_eq!(keys_like(&server, "ls-java:*"), 1);
    let count: u32 = redis::cmd("HGET")
        .arg(&names[3])
        .arg(&owner)
        .query(&mut conn)
        .unwrap();
    assert_eq!(count, 1);
    before.unlock().unwrap();
    assert_eq!(keys_like(&server, "ls-java:*"), 0);
}

#[test]
fn a_lock_set_gives_up_at_its_deadline_holding_nothing() {
    let server = RedisServer::new();
    let (client, other) = (quick_client(&server), quick_client(&server));
    let names = set_names("ls-deadline", 30);
    let (release, holder) = hold_elsewhere(other.lock(&names[0]));
    let wait = Duration::from_millis(400);
    let start = Instant::now();
    assert!(client
        .lock_set(&names)
        .try_lock_for(wait)
        .unwrap()
        .is_none());
    let took = start.elapsed();
    assert!(took >= wait, "returned before its deadline: {took:?}");
    assert!(
        took < wait + Duration::from_secs(3),
        "long past it: {took:?}"
    );
    assert_eq!(keys_like(&server, "ls-deadline:*"), 1);
    release.send(()).unwrap();
    holder.join().unwrap();
    assert!(client
        .lock_set(&names)
        .try_lock_for(wait)
        .unwrap()
        .is_some());
    assert!(client
        .lock_set(Vec::<String>::new())
        .lock()
        .unwrap_err()
        .is_invalid_argument());
}

#[test]
fn a_lock_set_is_renewed_past_its_lease_and_reports_a_lost_member() {
    let server = RedisServer::new();
    let watchdog = Duration::from_millis(900);
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(watchdog)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let names = set_names("ls-renew", 100);
    let guard = client.lock_set(&names).lock().unwrap();
    let lost = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&lost);
    guard.on_lost(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    thread::sleep(watchdog * 3);
    assert!(!guard.is_lost());
    assert_eq!(keys_like(&server, "ls-renew:*"), 100);
    let _: () = redis::cmd("DEL")
        .arg(&names[50])
        .arg(&names[60])
        .query(&mut server.conn())
        .unwrap();
    assert!(support::wait_until(Duration::from_secs(10), || guard.is_lost()));
    assert!(support::wait_until(Duration::from_secs(5), || lost
        .load(Ordering::SeqCst)
        > 0));
    let err = guard.unlock().unwrap_err();
    assert!(err.is_partial_unlock(), "{err}");
    assert_eq!(lost.load(Ordering::SeqCst), 1, "called once for the set");
    assert_eq!(keys_like(&server, "ls-renew:*"), 0);
}

#[test]
fn a_lock_set_release_wakes_a_lone_waiter() {
    let server = RedisServer::new();
    let (client, other) = (quick_client(&server), Client::open(server.url()).unwrap());
    let names = set_names("ls-wake", 10);
    let guard = client.lock_set(&names).lock().unwrap();
    let lone = other.lock(&names[4]);
    let waiter = thread::spawn(move || {
        let start = Instant::now();
        let g = lone.lock().unwrap();
        drop(g);
        start.elapsed()
    });
    support::await_waiting(&other, 1);
    // The lease is 30 s: only the release's message can wake the waiter this soon.
    guard.unlock().unwrap();
    let waited = waiter.join().unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[test]
fn a_lock_set_looping_does_not_starve_a_lone_waiter() {
    let server = RedisServer::new();
    let (client, other) = (
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    );
    let names = set_names("ls-fair", 100);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let looping = {
        let (stop, rounds, names) = (Arc::clone(&stop), Arc::clone(&rounds), names.clone());
        thread::spawn(move || {
            let set = client.lock_set(&names);
            while !stop.load(Ordering::SeqCst) {
                let guard = set.lock().unwrap();
                thread::sleep(Duration::from_millis(1));
                guard.unlock().unwrap();
                rounds.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    assert!(support::wait_until(Duration::from_secs(10), || rounds
        .load(Ordering::SeqCst)
        > 5));
    let lone = other.lock(&names[42]);
    for round in 0..20 {
        // Each try begins while the set loops again (not in the gap its wait for us left).
        let seen = rounds.load(Ordering::SeqCst);
        assert!(support::wait_until(Duration::from_secs(10), || {
            rounds.load(Ordering::SeqCst) >= seen + 3
        }));
        let start = Instant::now();
        let guard = lone.try_lock_for(Duration::from_secs(5)).unwrap();
        assert!(
            guard.is_some(),
            "round {round}: starved for {:?}",
            start.elapsed()
        );
        drop(guard);
    }
    stop.store(true, Ordering::SeqCst);
    looping.join().unwrap();
}

#[test]
fn a_lock_set_of_10000_names_is_taken_and_released_quickly() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let names = set_names("ls-big", 10_000);
    let start = Instant::now();
    let guard = client.lock_set(&names).lock().unwrap();
    assert_eq!(guard.held(), 10_000);
    assert_eq!(keys_like(&server, "ls-big:*"), 10_000);
    guard.unlock().unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(keys_like(&server, "ls-big:*"), 0);
}

#[test]
fn a_lock_set_on_a_cluster_takes_names_of_every_slot_and_shared_tags() {
    use support::cluster::RedisCluster;
    let cluster = RedisCluster::new(3, 0);
    let config = Config::cluster(cluster.urls())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let other = Client::new(
        Config::cluster(cluster.urls())
            .response_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut names = set_names("ls-cl", 200);
    names.extend((0..50).map(|i| format!("{{ls-tag}}:{i}")));
    let guard = client.lock_set(&names).lock().unwrap();
    for name in &names {
        let n: i64 = redis::cmd("EXISTS")
            .arg(name)
            .query(&mut cluster.node_for_key(name).conn())
            .unwrap();
        assert_eq!(n, 1, "{name} on its slot's master");
    }
    // Held elsewhere in a later slot group: nothing of the set is taken.
    assert!(other.lock_set(&names).try_lock().unwrap().is_none());
    guard.unlock().unwrap();
    let (release, holder) = hold_elsewhere(other.lock("{ls-tag}:7"));
    assert!(client.lock_set(&names).try_lock().unwrap().is_none());
    for name in &names[..200] {
        let n: i64 = redis::cmd("EXISTS")
            .arg(name)
            .query(&mut cluster.node_for_key(name).conn())
            .unwrap();
        assert_eq!(n, 0, "{name} left behind");
    }
    release.send(()).unwrap();
    holder.join().unwrap();
    client.lock_set(&names).lock().unwrap().unlock().unwrap();
}

#[test]
fn a_lock_set_leaves_a_name_it_freed_to_a_listening_waiter_for_a_moment() {
    let server = RedisServer::new();
    let (client, other) = (quick_client(&server), quick_client(&server));
    let names = set_names("ls-yield", 5);
    // A waiter of some other process, as the server sees it: a subscriber of the channel.
    let mut listener = server.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{ls-yield:2}")
        .unwrap();
    let set = client.lock_set(&names);
    set.lock().unwrap().unlock().unwrap();
    let owner: String = redis::cmd("GET")
        .arg("redlatch_lockset_yield:{ls-yield:2}")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(owner, client.owner_id());
    // This owner's set leaves it alone meanwhile; anybody else may take it.
    assert!(set.try_lock().unwrap().is_none());
    assert_eq!(keys_like(&server, "ls-yield:*"), 0);
    other
        .lock_set(&names)
        .try_lock()
        .unwrap()
        .expect("free to others")
        .unlock()
        .unwrap();
    // Its turn is short: the set takes it after it.
    let guard = set.try_lock_for(Duration::from_secs(5)).unwrap();
    assert!(guard.is_some());
}
