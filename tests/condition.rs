//! Conditions on locks: a holder waits (releasing the lock fully) until another holder, in
//! any thread or process, notifies it; it returns holding the lock again with its count.
//! Notifications are neither lost nor multiplied, dead waiters are skipped, and interrupt,
//! close and timeouts leave nothing behind.

mod support;

use std::io::Write;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error, Interrupter, Lock};
use support::child::ChildTest;
use support::proxy::Proxy;
use support::{await_waiting, count_commands, wait_until, RedisServer};

const GENEROUS: Duration = Duration::from_secs(15);

fn hget(server: &RedisServer, key: &str, field: &str) -> Option<i64> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut server.conn())
        .unwrap()
}

/// The condition's keys, read raw: (waiters in the ZSET, ids in the queue LIST).
fn condition_keys(server: &RedisServer, lock: &str, condition: &str) -> (i64, i64) {
    let mut conn = server.conn();
    let waiters: i64 = redis::cmd("ZCARD")
        .arg(format!("redlatch_condition:{{{lock}}}:{condition}"))
        .query(&mut conn)
        .unwrap();
    let queue: i64 = redis::cmd("LLEN")
        .arg(format!("redlatch_condition_queue:{{{lock}}}:{condition}"))
        .query(&mut conn)
        .unwrap();
    (waiters, queue)
}

/// A thread of a client of its own that takes `lock`, says so, waits on `condition` once and
/// reports (notified, its hold count after the wait, its owner id), then releases.
fn waiter(
    server: &RedisServer,
    make: fn(&Client, &str) -> Lock,
    lock: &'static str,
    condition: &'static str,
) -> (
    Client,
    mpsc::Receiver<(bool, u32, String)>,
    thread::JoinHandle<()>,
) {
    let client = Client::open(server.url()).unwrap();
    let (tx, rx) = mpsc::channel();
    let c = client.clone();
    let handle = thread::spawn(move || {
        let lock = make(&c, lock);
        let mut guard = lock.lock().unwrap();
        let waited = lock
            .condition(condition)
            .wait_for(&mut guard, GENEROUS)
            .unwrap();
        let count = lock.hold_count().unwrap();
        tx.send((!waited.timed_out(), count, guard.owner().to_owned()))
            .unwrap();
        guard.unlock().unwrap();
    });
    (client, rx, handle)
}

#[test]
fn a_wait_releases_every_hold_and_returns_with_the_same_count() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let (tx, done) = mpsc::channel();
    let c = client.clone();
    let holder = thread::spawn(move || {
        let lock = c.lock("account");
        let _outer = lock.lock().unwrap();
        let _middle = lock.lock().unwrap();
        let mut inner = lock.lock().unwrap();
        let owner = inner.owner().to_owned();
        lock.condition("unfrozen").wait(&mut inner).unwrap();
        tx.send((owner, lock.hold_count().unwrap(), inner.is_lost()))
            .unwrap();
        // Three guards, three releases: the count was restored.
    });
    await_waiting(&client, 1);
    // Released fully while it waits: another client takes the lock at once.
    let other = Client::open(server.url()).unwrap();
    let lock = other.lock("account");
    let guard = lock
        .try_lock()
        .unwrap()
        .expect("free while the holder waits");
    assert!(lock.condition("unfrozen").notify_one().unwrap());
    assert!(done.try_recv().is_err(), "it needs the lock to return");
    drop(guard);
    let (owner, count, lost) = done.recv_timeout(GENEROUS).unwrap();
    assert_eq!(count, 3);
    assert!(!lost);
    holder.join().unwrap();
    assert_eq!(hget(&server, "account", &owner), None, "all three released");
    assert_eq!(condition_keys(&server, "account", "unfrozen"), (0, 0));
}

#[test]
fn notify_one_wakes_the_longest_waiting_and_notify_all_the_rest() {
    let server = RedisServer::new();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let w = waiter(&server, support::make_lock, "jobs", "not_empty");
        await_waiting(&w.0, 1);
        waiters.push(w);
    }
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("jobs");
    let cond = lock.condition("not_empty");
    let guard = lock.lock().unwrap();
    assert!(cond.notify_one().unwrap());
    drop(guard);
    let (notified, count, _) = waiters[0].1.recv_timeout(GENEROUS).unwrap();
    assert!(notified);
    assert_eq!(count, 1);
    // One notification, one waiter: the others still wait.
    assert_eq!(condition_keys(&server, "jobs", "not_empty"), (2, 2));
    assert!(waiters[1].1.try_recv().is_err() && waiters[2].1.try_recv().is_err());
    let guard = lock.lock().unwrap();
    assert_eq!(cond.notify_all().unwrap(), 2);
    assert_eq!(cond.notify_all().unwrap(), 0, "nobody left");
    drop(guard);
    for (_, rx, handle) in waiters.drain(1..) {
        assert!(rx.recv_timeout(GENEROUS).unwrap().0);
        handle.join().unwrap();
    }
    assert_eq!(condition_keys(&server, "jobs", "not_empty"), (0, 0));
}

#[test]
fn every_exclusive_kind_has_conditions() {
    let server = RedisServer::new();
    let kinds: [(&str, support::MakeLock); 7] = [
        ("plain", support::make_lock),
        ("fair", support::make_fair_lock),
        ("fenced", support::make_fenced_lock),
        ("non-reentrant", support::make_non_reentrant_lock),
        ("non-reentrant fair", support::make_non_reentrant_fair_lock),
        ("spin", |c, n| c.spin_lock(n)),
        ("write", |c, n| c.read_write_lock(n).write()),
    ];
    for (label, make) in kinds {
        let name: &'static str = Box::leak(format!("kind-{}", label.replace(' ', "-")).into());
        let client = Client::open(server.url()).unwrap();
        let (tx, done) = mpsc::channel();
        let c = client.clone();
        let waiting = thread::spawn(move || {
            let lock = make(&c, name);
            let mut guard = lock.lock().unwrap();
            let before = guard.token();
            let waited = lock
                .condition("ready")
                .wait_for(&mut guard, GENEROUS)
                .unwrap();
            tx.send((
                waited.timed_out(),
                before,
                guard.token(),
                lock.hold_count().unwrap(),
            ))
            .unwrap();
        });
        await_waiting(&client, 1);
        let notifier = Client::open(server.url()).unwrap();
        let lock = make(&notifier, name);
        let guard = lock.lock().unwrap();
        assert!(lock.condition("ready").notify_one().unwrap(), "{label}");
        drop(guard);
        let (timed_out, before, after, count) = done.recv_timeout(GENEROUS).unwrap();
        assert!(!timed_out, "{label}");
        assert_eq!(count, 1, "{label}");
        if label == "fenced" {
            // Acquired anew: a new token, newer than the notifier's.
            assert!(after.unwrap() > before.unwrap(), "{label}");
        }
        waiting.join().unwrap();
        assert!(!lock.is_locked().unwrap(), "{label}");
    }
}

#[test]
fn waiting_or_notifying_without_the_lock_is_an_error() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("guarded");
    let cond = lock.condition("c");
    assert!(matches!(cond.notify_one(), Err(Error::NotHeld { .. })));
    assert!(matches!(cond.notify_all(), Err(Error::NotHeld { .. })));
    // A guard of another lock.
    let mut other = client.lock("elsewhere").lock().unwrap();
    assert!(matches!(
        cond.wait_for(&mut other, Duration::from_millis(10)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(client.lock("elsewhere").hold_count().unwrap(), 1);
    // A read lock has none.
    let rw = client.read_write_lock("rw");
    let mut read = rw.read().lock().unwrap();
    let on_read = rw.read().condition("c");
    assert!(matches!(
        on_read.notify_one(),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        on_read.wait(&mut read),
        Err(Error::InvalidArgument(_))
    ));
    // An empty name.
    let mut guard = lock.lock().unwrap();
    assert!(matches!(
        lock.condition("").wait(&mut guard),
        Err(Error::InvalidArgument(_))
    ));
    // A guard whose hold is gone (force-unlocked): nothing is queued.
    lock.force_unlock().unwrap();
    assert!(matches!(cond.wait(&mut guard), Err(Error::NotHeld { .. })));
    assert!(guard.is_lost());
    assert_eq!(condition_keys(&server, "guarded", "c"), (0, 0));
}

#[test]
fn a_timed_wait_times_out_holding_the_lock_and_leaves_nothing() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("timed");
    let cond = lock.condition("c");
    let mut guard = lock.lock().unwrap();
    let started = Instant::now();
    let waited = cond
        .wait_for(&mut guard, Duration::from_millis(300))
        .unwrap();
    assert!(waited.timed_out());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < GENEROUS);
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(!guard.is_lost());
    assert_eq!(condition_keys(&server, "timed", "c"), (0, 0));
    // The guard still releases the lock.
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_notification_right_after_the_release_is_not_lost() {
    // The notifier waits for the lock, so it runs the moment the waiter's release frees it,
    // before the waiter has subscribed to its channel.
    let server = RedisServer::new();
    for round in 0..20 {
        let client = Client::open(server.url()).unwrap();
        let lock = client.lock("race");
        let mut guard = lock.lock().unwrap();
        let notifier_client = Client::open(server.url()).unwrap();
        let notifier = thread::spawn(move || {
            let lock = notifier_client.lock("race");
            let guard = lock.lock().unwrap();
            let picked = lock.condition("c").notify_one().unwrap();
            drop(guard);
            picked
        });
        await_waiting(&client, 0);
        // The notifier is queued on the lock (its first attempt found it busy).
        assert!(wait_until(GENEROUS, || {
            support::numsub(&mut server.conn(), "redisson_lock__channel:{race}") == 1
        }));
        let waited = lock.condition("c").wait_for(&mut guard, GENEROUS).unwrap();
        assert!(!waited.timed_out(), "round {round}");
        assert!(notifier.join().unwrap(), "round {round}");
        drop(guard);
    }
    assert_eq!(condition_keys(&server, "race", "c"), (0, 0));
}

#[test]
fn no_wake_up_without_a_notification() {
    // Releases of the lock and notifications of another condition publish near the waiter;
    // none of them ends its wait.
    let server = RedisServer::new();
    let (client, rx, handle) = {
        let client = Client::open(server.url()).unwrap();
        let (tx, rx) = mpsc::channel();
        let c = client.clone();
        let handle = thread::spawn(move || {
            let lock = c.lock("quiet");
            let mut guard = lock.lock().unwrap();
            let waited = lock
                .condition("mine")
                .wait_for(&mut guard, Duration::from_millis(1500))
                .unwrap();
            tx.send(waited.timed_out()).unwrap();
        });
        (client, rx, handle)
    };
    await_waiting(&client, 1);
    let other = Client::open(server.url()).unwrap();
    let lock = other.lock("quiet");
    for _ in 0..20 {
        let guard = lock.lock().unwrap();
        assert_eq!(lock.condition("theirs").notify_all().unwrap(), 0);
        drop(guard);
    }
    assert!(rx.recv_timeout(GENEROUS).unwrap(), "timed out, never woken");
    handle.join().unwrap();
    // The waiter looked at its place once, after subscribing, and once at the end.
    assert_eq!(condition_keys(&server, "quiet", "mine"), (0, 0));
}

#[test]
fn an_interrupted_wait_leaves_the_queue_and_holds_the_lock_again() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let (tx, done) = mpsc::channel();
    let c = client.clone();
    let handle = thread::spawn(move || {
        tx.send(Interrupter::current()).unwrap();
        let lock = c.lock("intr");
        let mut guard = lock.lock().unwrap();
        let waited = lock.condition("c").wait(&mut guard);
        (
            matches!(waited, Err(Error::Interrupted)),
            lock.hold_count().unwrap(),
            guard.is_lost(),
        )
    });
    let interrupter = done.recv().unwrap();
    await_waiting(&client, 1);
    interrupter.interrupt();
    let (interrupted, count, lost) = handle.join().unwrap();
    assert!(interrupted);
    assert_eq!(count, 1, "acquired again before the error, as in Java");
    assert!(!lost);
    assert_eq!(condition_keys(&server, "intr", "c"), (0, 0));
    assert!(!client.lock("intr").is_locked().unwrap());
}

#[test]
fn close_takes_the_waiter_out_and_leaves_nothing() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let c = client.clone();
    let handle = thread::spawn(move || {
        let lock = c.lock("closing");
        let mut guard = lock.lock().unwrap();
        let waited = lock.condition("c").wait(&mut guard);
        (matches!(waited, Err(Error::Closed)), guard.is_lost())
    });
    await_waiting(&client, 1);
    client.close();
    let (closed, lost) = handle.join().unwrap();
    assert!(closed);
    assert!(lost, "the guard no longer holds the lock");
    assert_eq!(condition_keys(&server, "closing", "c"), (0, 0));
    let other = Client::open(server.url()).unwrap();
    assert!(!other.lock("closing").is_locked().unwrap());
}

/// A waiter that took a notification and waits to hold the lock again when its client
/// closes hands the notification on before `close` returns: the next waiter gets it.
#[test]
fn a_notification_taken_by_a_waiter_whose_client_closes_goes_to_the_next_waiter() {
    let server = RedisServer::new();
    let key = "closing-notified";
    let first = Client::open(server.url()).unwrap();
    let c = first.clone();
    let handle = thread::spawn(move || {
        let lock = c.lock(key);
        let mut guard = lock.lock().unwrap();
        let waited = lock.condition("c").wait(&mut guard);
        (matches!(waited, Err(Error::Closed)), guard.is_lost())
    });
    assert!(wait_until(GENEROUS, || condition_keys(&server, key, "c") == (1, 1)));
    let (_second, notified, second) = waiter(&server, |c, n| c.lock(n), key, "c");
    assert!(wait_until(GENEROUS, || condition_keys(&server, key, "c") == (2, 2)));
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock(key);
    let guard = lock.lock().unwrap();
    assert!(lock.condition("c").notify_one().unwrap());
    // The first waiter takes it (leaving the condition) and waits for the lock, held here.
    assert!(wait_until(GENEROUS, || condition_keys(&server, key, "c") == (1, 1)));
    first.close();
    let (closed, lost) = handle.join().unwrap();
    assert!(closed && lost);
    // Handed on: the second waiter was picked.
    assert!(wait_until(GENEROUS, || condition_keys(&server, key, "c") == (0, 0)));
    guard.unlock().unwrap();
    let (was_notified, count, _) = notified.recv_timeout(GENEROUS).unwrap();
    assert!(was_notified, "the second waiter timed out instead");
    assert_eq!(count, 1);
    second.join().unwrap();
}

#[test]
fn idle_waiters_send_no_commands() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut handles = Vec::new();
    for _ in 0..50 {
        let c = client.clone();
        handles.push(thread::spawn(move || {
            let lock = c.lock("idle");
            let mut guard = lock.lock().unwrap();
            let waited = lock.condition("c").wait_for(&mut guard, GENEROUS).unwrap();
            !waited.timed_out()
        }));
    }
    // All 50 queued (none still on its way through the lock), and blocked.
    assert!(wait_until(GENEROUS, || condition_keys(
        &server, "idle", "c"
    ) == (50, 50)));
    await_waiting(&client, 50);
    let mut conn = server.conn();
    let before = count_commands(&mut conn);
    // Idle for a while: the watchdog renews (every 10 s by default) nothing in this time.
    let idle = Instant::now();
    while idle.elapsed() < Duration::from_millis(500) {
        thread::yield_now();
    }
    let after = count_commands(&mut conn);
    // The two INFO calls of count_commands themselves.
    assert!(
        after - before <= 2,
        "{} commands while idle",
        after - before
    );
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock("idle");
    let guard = lock.lock().unwrap();
    assert_eq!(lock.condition("c").notify_all().unwrap(), 50);
    drop(guard);
    for h in handles {
        assert!(h.join().unwrap());
    }
}

/// A waiter in a process of its own, run by the tests below: takes the lock, waits once on
/// the condition with a short lease, and prints what happened.
#[test]
#[ignore = "the child half of the cross-process condition tests"]
fn condition_waiter_child() {
    let Ok(url) = std::env::var("REDLATCH_CONDITION_URL") else {
        return;
    };
    let config = Config::builder(url.as_str())
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let lock = client.lock("xproc");
    let mut guard = lock.lock().unwrap();
    println!("OWNER {}", guard.owner());
    std::io::stdout().flush().unwrap();
    let waited = lock
        .condition("c")
        .wait_for(&mut guard, Duration::from_secs(30))
        .unwrap();
    println!(
        "NOTIFIED {} {}",
        !waited.timed_out(),
        lock.hold_count().unwrap()
    );
    std::io::stdout().flush().unwrap();
}

/// Starts a waiter process.
fn child_waiter(server: &RedisServer) -> ChildTest {
    ChildTest::start(
        "condition_waiter_child",
        &[("REDLATCH_CONDITION_URL", server.url())],
    )
}

/// Waits until `n` waiters are queued on `xproc`'s condition `c`, as the server sees it.
fn await_queued(server: &RedisServer, n: i64) {
    assert!(
        wait_until(GENEROUS, || condition_keys(server, "xproc", "c").1 == n),
        "{n} queued waiters awaited"
    );
}

#[test]
fn notifications_cross_processes() {
    let server = RedisServer::new();
    // Two waiter processes, queued one after the other; this process notifies.
    let a = child_waiter(&server);
    a.next("OWNER", GENEROUS);
    await_queued(&server, 1);
    let b = child_waiter(&server);
    b.next("OWNER", GENEROUS);
    await_queued(&server, 2);
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("xproc");
    let guard = lock.lock().unwrap();
    assert!(lock.condition("c").notify_one().unwrap());
    drop(guard);
    assert_eq!(a.next("NOTIFIED", GENEROUS), "true 1", "the first to wait");
    await_queued(&server, 1);
    let guard = lock.lock().unwrap();
    assert_eq!(lock.condition("c").notify_all().unwrap(), 1);
    drop(guard);
    assert_eq!(b.next("NOTIFIED", GENEROUS), "true 1");
}

#[test]
fn a_killed_waiter_is_skipped_within_a_lease() {
    let server = RedisServer::new();
    let mut dead = child_waiter(&server);
    let dead_owner = dead.next("OWNER", GENEROUS);
    await_queued(&server, 1);
    // A live waiter behind it, in this process.
    let (client, rx, handle) = waiter(&server, support::make_lock, "xproc", "c");
    await_waiting(&client, 1);
    await_queued(&server, 2);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let killed = Instant::now();
    // Its place is no longer renewed: its deadline (at most a lease, 0.9 s, away) passes.
    let deadline_passed = || {
        let mut conn = server.conn();
        let places: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg("redlatch_condition:{xproc}:c")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut conn)
            .unwrap();
        let time: (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
        let now = (time.0 * 1000 + time.1 / 1000) as f64;
        places
            .iter()
            .filter(|(id, _)| id.starts_with(&format!("{dead_owner}:")))
            .all(|&(_, deadline)| deadline <= now)
    };
    assert!(wait_until(GENEROUS, deadline_passed));
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "{:?}",
        killed.elapsed()
    );
    // The next notification skips it and reaches the live waiter.
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock("xproc");
    let guard = lock.lock().unwrap();
    assert!(lock.condition("c").notify_one().unwrap());
    drop(guard);
    let (notified, count, _) = rx.recv_timeout(GENEROUS).unwrap();
    assert!(notified && count == 1);
    handle.join().unwrap();
    assert_eq!(condition_keys(&server, "xproc", "c"), (0, 0));
}

#[test]
fn a_notification_held_by_a_waiter_that_died_goes_to_a_live_one_within_a_lease() {
    // The waiter picked is stopped before it can take the notification, then killed: the
    // next live waiter gets it, with no new notify, once the dead one's lease ran out (a
    // renewal of the live one passes it on).
    let server = RedisServer::new();
    let mut dead = child_waiter(&server);
    dead.next("OWNER", GENEROUS);
    await_queued(&server, 1);
    // The live waiter's lease is longer than the dead one's (900 ms): a loaded machine that
    // renews it late must not drop it from the queue too. Its renewals, every second, pass
    // the notification on.
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let (tx, rx) = mpsc::channel();
    let c = client.clone();
    let live = thread::spawn(move || {
        let lock = c.lock("xproc");
        let mut guard = lock.lock().unwrap();
        let waited = lock.condition("c").wait_for(&mut guard, GENEROUS).unwrap();
        tx.send((!waited.timed_out(), Instant::now())).unwrap();
    });
    await_waiting(&client, 1);
    await_queued(&server, 2);
    let pid = dead.pid().to_string();
    let stopped = Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    assert!(stopped.success());
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock("xproc");
    let guard = lock.lock().unwrap();
    assert!(
        lock.condition("c").notify_one().unwrap(),
        "the stopped waiter"
    );
    drop(guard);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let killed = Instant::now();
    let (notified, at) = rx.recv_timeout(GENEROUS).unwrap();
    assert!(notified, "passed on, not timed out");
    let took = at.saturating_duration_since(killed);
    assert!(took < Duration::from_secs(5), "{took:?}");
    live.join().unwrap();
    assert_eq!(condition_keys(&server, "xproc", "c"), (0, 0));
}

#[test]
fn a_wait_with_an_explicit_lease_comes_back_with_a_fresh_lease() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let (tx, done) = mpsc::channel();
    let c = client.clone();
    let holder = thread::spawn(move || {
        let lock = c.lock("leased").with_lease(Duration::from_secs(5));
        let mut guard = lock.lock().unwrap();
        // Longer than its whole lease: the hold is not lost by the wait.
        let waited = lock.condition("c").wait_for(&mut guard, GENEROUS).unwrap();
        let left = lock.remaining_lease().unwrap().unwrap();
        tx.send((!waited.timed_out(), guard.is_lost(), left))
            .unwrap();
        guard.unlock().unwrap();
    });
    await_waiting(&client, 1);
    let other = Client::open(server.url()).unwrap();
    let lock = other.lock("leased");
    let guard = lock.lock().unwrap();
    // The waiter's lease would have run out by now, had the wait not released the lock.
    let mut conn = server.conn();
    assert!(wait_until(GENEROUS, || {
        let ttl: i64 = redis::cmd("PTTL").arg("leased").query(&mut conn).unwrap();
        ttl > 0 && ttl < 25_000
    }));
    assert!(lock.condition("c").notify_one().unwrap());
    drop(guard);
    let (notified, lost, left) = done.recv_timeout(GENEROUS).unwrap();
    assert!(notified && !lost);
    assert!(
        left > Duration::from_secs(3) && left <= Duration::from_secs(5),
        "{left:?}"
    );
    holder.join().unwrap();
    assert!(!other.lock("leased").is_locked().unwrap());
}

#[test]
fn an_interrupt_while_acquiring_again_is_kept_for_later() {
    // Notified, the waiter takes its notification and waits for the lock, which the notifier
    // still holds: an interrupt then does not cost it the lock (as Java's await), and stays
    // pending for the thread's next wait.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let (tx, rx) = mpsc::channel();
    let c = client.clone();
    let waiter = thread::spawn(move || {
        tx.send(Interrupter::current()).unwrap();
        let lock = c.lock("again");
        let mut guard = lock.lock().unwrap();
        let waited = lock.condition("c").wait(&mut guard);
        let pending = Interrupter::current().clear();
        (waited.is_ok(), lock.hold_count().unwrap(), pending)
    });
    let interrupter = rx.recv().unwrap();
    await_waiting(&client, 1);
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock("again");
    let guard = lock.lock().unwrap();
    assert!(lock.condition("c").notify_one().unwrap());
    // It took the notification (its place is gone) and waits for the lock.
    assert!(wait_until(GENEROUS, || condition_keys(
        &server, "again", "c"
    ) == (0, 0)));
    await_waiting(&client, 1);
    interrupter.interrupt();
    drop(guard);
    let (ok, count, pending) = waiter.join().unwrap();
    assert!(ok, "the wait succeeded");
    assert_eq!(count, 1);
    assert!(pending, "the interrupt is kept");
}

#[test]
fn a_writer_holding_read_locks_too_cannot_wait() {
    // Its release would leave the lock in read mode, which nobody could take for writing.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let rw = client.read_write_lock("rw-cond");
    let mut write = rw.write().lock().unwrap();
    let read = rw.read().lock().unwrap();
    let waited = rw.write().condition("c").wait(&mut write);
    assert!(
        matches!(waited, Err(Error::InvalidArgument(_))),
        "{waited:?}"
    );
    assert!(!write.is_lost());
    assert_eq!(condition_keys(&server, "rw-cond", "c"), (0, 0));
    drop(read);
    // Without them it waits.
    let waited = rw
        .write()
        .condition("c")
        .wait_for(&mut write, Duration::from_millis(50))
        .unwrap();
    assert!(waited.timed_out());
    write.unlock().unwrap();
    assert!(!rw.write().is_locked().unwrap());
}

#[test]
fn after_waits_the_watchdog_renews_and_signals_each_hold_once() {
    // A hold put back after a wait is one entry: renewed at its pace (not once more per
    // wait), and an explicit lease's end signalled once, by a watchdog that keeps running.
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let leased = client
        .lock("timed-hold")
        .with_lease(Duration::from_millis(1000));
    let mut guard = leased.lock().unwrap();
    let (lost_tx, lost) = mpsc::channel();
    guard.on_lost(move |reason| lost_tx.send(reason).unwrap());
    let cond = leased.condition("c");
    for _ in 0..3 {
        assert!(cond
            .wait_for(&mut guard, Duration::from_millis(100))
            .unwrap()
            .timed_out());
    }
    let reason = lost.recv_timeout(GENEROUS).unwrap();
    assert_eq!(reason, redlatch::LostReason::LeaseExpired);
    assert!(lost.try_recv().is_err(), "signalled once");
    drop(guard);
    // A renewed hold waited on five times is renewed every third of its lease, no faster.
    let renewed = client.lock("renewed-hold");
    let mut guard = renewed.lock().unwrap();
    for _ in 0..5 {
        renewed
            .condition("c")
            .wait_for(&mut guard, Duration::from_millis(20))
            .unwrap();
    }
    let mut conn = server.conn();
    let calls = |conn: &mut redis::Connection| support::command_calls(conn, "evalsha");
    let before = calls(&mut conn);
    let started = Instant::now();
    assert!(wait_until(GENEROUS, || calls(&mut conn) >= before + 6));
    // Six renewal calls take at least five periods of 300 ms (they would come five times
    // as often with an entry per wait).
    assert!(
        started.elapsed() >= Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
}

#[test]
fn a_plain_lock_is_queued_and_released_in_one_call() {
    // Queue and release in one script: then one look once subscribed, and nothing more.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    // The scripts loaded: a whole wait, notified (a first call's NOSCRIPT and its resend
    // would count twice where the server counts refused calls, as Redis 6.0 does).
    let c = client.clone();
    let warm_up = thread::spawn(move || {
        let lock = c.lock("warm-up");
        let mut guard = lock.lock().unwrap();
        lock.condition("c").wait(&mut guard).unwrap();
    });
    await_waiting(&client, 1);
    {
        let notifier = Client::open(server.url()).unwrap();
        let lock = notifier.lock("warm-up");
        let _guard = lock.lock().unwrap();
        assert!(lock.condition("c").notify_one().unwrap());
    }
    warm_up.join().unwrap();
    let (held_tx, held) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let c = client.clone();
    let waiter = thread::spawn(move || {
        let lock = c.lock("one-call");
        let mut guard = lock.lock().unwrap();
        held_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        lock.condition("c").wait(&mut guard).unwrap();
    });
    held.recv().unwrap();
    let mut conn = server.conn();
    let scripts = support::command_calls(&mut conn, "evalsha");
    let publishes = support::command_calls(&mut conn, "publish");
    go.send(()).unwrap();
    await_waiting(&client, 1);
    assert_eq!(
        support::command_calls(&mut conn, "evalsha") - scripts,
        2,
        "the wait's one call, and its look"
    );
    assert_eq!(
        support::command_calls(&mut conn, "publish") - publishes,
        1,
        "`0` on the lock channel, as an unlock"
    );
    let exists: i64 = redis::cmd("EXISTS")
        .arg("one-call")
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, 0, "released");
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock("one-call");
    let guard = lock.lock().unwrap();
    assert!(lock.condition("c").notify_one().unwrap());
    drop(guard);
    waiter.join().unwrap();
}

/// A thread of a client connected through `proxy` that takes `key`, waits on its condition
/// `c` and reports (notified, or the error; its hold count after the wait), then releases.
/// Returns once it is queued and counted waiting.
fn proxied_waiter(
    server: &RedisServer,
    proxy: &Proxy,
    key: &'static str,
) -> (Client, thread::JoinHandle<(redlatch::Result<bool>, u32)>) {
    let client = Client::open(proxy.url()).unwrap();
    let c = client.clone();
    let handle = thread::spawn(move || {
        let lock = c.lock(key);
        let mut guard = lock.lock().unwrap();
        let waited = lock.condition("c").wait_for(&mut guard, GENEROUS);
        let count = lock.hold_count().unwrap();
        guard.unlock().unwrap();
        (waited.map(|w| !w.timed_out()), count)
    });
    assert!(wait_until(GENEROUS, || condition_keys(server, key, "c") == (1, 1)));
    await_waiting(&client, 1);
    (client, handle)
}

/// Takes `key` with a client of its own (not proxied), notifies one waiter of its condition
/// `c`, and releases; returns that client.
fn notify_one_directly(server: &RedisServer, key: &str) -> Client {
    let notifier = Client::open(server.url()).unwrap();
    let lock = notifier.lock(key);
    let guard = lock.lock().unwrap();
    assert!(lock.condition("c").notify_one().unwrap());
    guard.unlock().unwrap();
    notifier
}

/// The waiter's look after its wake-up runs and takes the notification, and its reply is
/// lost (the connection dies): the wait still ends notified, holding the lock again, and
/// does not fail with the notification spent.
#[test]
fn a_notification_whose_look_lost_its_reply_still_ends_the_wait() {
    let server = RedisServer::new();
    let proxy = Proxy::start(server.port());
    let key = "lost-look";
    let (_client, handle) = proxied_waiter(&server, &proxy, key);
    // The look's reply (`1`: notified, entry taken) is the next `:1` the server sends.
    proxy.lose_next_reply_equal_to(b":1\r\n");
    let notifier = notify_one_directly(&server, key);
    let (outcome, count) = handle.join().unwrap();
    assert_eq!(proxy.cuts(), 1, "the look's reply was lost");
    assert!(
        matches!(outcome, Ok(true)),
        "the wait ended {outcome:?}, not notified"
    );
    assert_eq!(count, 1);
    assert_eq!(condition_keys(&server, key, "c"), (0, 0));
    assert!(!notifier.lock(key).is_locked().unwrap());
}

/// The look after a wake-up takes the notification and loses its reply, and so does the
/// leave that asks what became of it: the wait fails (holding the lock again, as after any
/// error), and the notification it may have taken goes to the next waiter.
#[test]
fn a_notification_whose_look_and_leave_lost_their_replies_goes_to_the_next_waiter() {
    let server = RedisServer::new();
    let proxy = Proxy::start(server.port());
    let key = "lost-look-and-leave";
    let (_client, handle) = proxied_waiter(&server, &proxy, key);
    let (_second, notified, second) = waiter(&server, |c, n| c.lock(n), key, "c");
    assert!(wait_until(GENEROUS, || condition_keys(&server, key, "c") == (2, 2)));
    // The look's reply (`1`: notified, entry taken), then the leave's (`-1`: not there).
    proxy.lose_next_reply_equal_to(b":1\r\n");
    proxy.lose_next_reply_equal_to(b":-1\r\n");
    notify_one_directly(&server, key);
    let (outcome, count) = handle.join().unwrap();
    let failed = outcome.is_err();
    assert_eq!(proxy.cuts(), 2, "both replies were lost");
    assert!(failed, "the wait could not tell it was notified");
    assert_eq!(count, 1, "held again");
    let (was_notified, count, _) = notified.recv_timeout(GENEROUS).unwrap();
    assert!(
        was_notified,
        "the notification did not reach the second waiter"
    );
    assert_eq!(count, 1);
    second.join().unwrap();
    assert_eq!(condition_keys(&server, key, "c"), (0, 0));
}
