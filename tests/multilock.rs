//! MultiLock: all-or-nothing over locks on different servers, one wait budget, no deadlock,
//! and an unlock that releases everything it can and reports the rest.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error, MultiLock};
use support::RedisServer;

fn quick_client(server: &RedisServer) -> Client {
    let config = Config::builder(server.url().as_str())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    Client::new(config).unwrap()
}

fn exists(server: &RedisServer, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query(&mut server.conn())
        .unwrap();
    n == 1
}

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
    assert!(exists(&s2, "ml:b"));
    assert_eq!(guard.member(1).unwrap().lock().name(), "ml:b");
    guard.unlock().unwrap();
    assert!(!exists(&s1, "ml:a"));
    assert!(!exists(&s2, "ml:b"));
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
    assert!(!exists(&s1, "ml:a"), "the free member was released again");

    // The wait budget is shared: the whole call ends near it, holding nothing.
    let start = Instant::now();
    let got = multi.try_lock_for(Duration::from_millis(400)).unwrap();
    let waited = start.elapsed();
    assert!(got.is_none());
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    assert!(!exists(&s1, "ml:a"));
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
    assert!(!exists(&s2, "ml:b"), "nothing is held while waiting");
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
    assert!(!exists(&s1, "ml:a") && !exists(&s2, "ml:b"));
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
    assert!(!exists(&s2, "ml:b"), "the healthy lock was released");
}

#[test]
fn a_dead_member_fails_the_acquire_and_nothing_stays_held() {
    let (s1, mut s2) = (RedisServer::new(), RedisServer::new());
    let (c1, c2) = (quick_client(&s1), quick_client(&s2));
    s2.kill();
    let multi = MultiLock::new([c1.lock("ml:a"), c2.lock("ml:b")]).unwrap();
    let err = multi.lock().unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
    assert!(!exists(&s1, "ml:a"));
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
