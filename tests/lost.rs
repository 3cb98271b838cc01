//! The lost-lock signal: `LockGuard::on_lost` fires once, promptly, when a hold is lost (force
//! unlock, deletion, a paused server, an explicit lease's end), never after release, and a
//! lost guard's release leaves the lock alone.

mod support;

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config, LockGuard, LostReason};
use support::{command_calls, wait_until, RedisServer};

/// Watchdog timeout of most tests: renewals every 300 ms.
const LEASE_MS: u64 = 900;
const PERIOD: Duration = Duration::from_millis(LEASE_MS / 3);
/// Allowance for a loaded 2-core machine on top of every expected latency.
const SLACK: Duration = Duration::from_millis(500);

fn client(server: &RedisServer, watchdog_ms: u64) -> Client {
    support::client_with(server, |b| {
        b.watchdog_timeout(Duration::from_millis(watchdog_ms))
    })
}

/// Registers a callback on `guard` that sends the reason and when it was called.
fn lost_signal(guard: &LockGuard) -> Receiver<(LostReason, Instant)> {
    let (tx, rx) = mpsc::channel();
    guard.on_lost(move |reason| {
        let _ = tx.send((reason, Instant::now()));
    });
    rx
}

/// Waits for the signal and returns its reason and how long after `since` it came.
fn expect_lost(rx: &Receiver<(LostReason, Instant)>, since: Instant) -> (LostReason, Duration) {
    let (reason, at) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("on_lost callback within 5 s");
    (reason, at.saturating_duration_since(since))
}

/// Samples `key`'s TTL for `how_long`: it must never run out (the watchdog keeps renewing it).
/// Sampled state, not synchronisation.
fn assert_kept_alive(raw: &mut redis::Connection, key: &str, how_long: Duration) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        let pttl: i64 = raw.pttl(key).unwrap();
        assert!(pttl > 0, "`{key}` expired: it was not renewed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn hash(raw: &mut redis::Connection, key: &str) -> HashMap<String, i64> {
    raw.hgetall(key).unwrap()
}

#[test]
fn force_unlock_is_signalled_within_one_renewal_interval_and_unlock_leaves_the_lock_alone() {
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let other = Client::open(server.url()).unwrap();
    let lock = client.lock("lost:forced");
    let guard = lock.lock().unwrap();
    let rx = lost_signal(&guard);
    assert!(other.lock("lost:forced").force_unlock().unwrap());
    let forced_at = Instant::now();
    let (reason, latency) = expect_lost(&rx, forced_at);
    eprintln!("force_unlock noticed after {latency:?} (renewal interval {PERIOD:?})");
    assert_eq!(reason, LostReason::NotHeld);
    assert!(latency <= PERIOD + SLACK, "noticed after {latency:?}");
    assert!(guard.is_lost());
    // Another owner takes it; the stale guard's unlock must not touch it, nor even send.
    let theirs = other.lock("lost:forced").lock().unwrap();
    let mut raw = server.conn();
    let scripts_before = command_calls(&mut raw, "evalsha");
    let err = guard.unlock().unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        scripts_before,
        "unlock sent a script"
    );
    assert_eq!(
        hash(&mut raw, "lost:forced"),
        HashMap::from([(theirs.owner().to_owned(), 1)])
    );
    assert!(rx.try_recv().is_err(), "the callback fired twice");
    theirs.unlock().unwrap();
}

#[test]
fn raw_del_is_signalled_within_one_renewal_interval() {
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let guard = client.lock("lost:del").lock().unwrap();
    let rx = lost_signal(&guard);
    let mut raw = server.conn();
    let _: () = raw.del("lost:del").unwrap();
    let deleted_at = Instant::now();
    let (reason, latency) = expect_lost(&rx, deleted_at);
    eprintln!("DEL noticed after {latency:?}");
    assert_eq!(reason, LostReason::NotHeld);
    assert!(latency <= PERIOD + SLACK, "noticed after {latency:?}");
    assert!(guard.is_lost());
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert!(!raw.exists::<_, bool>("lost:del").unwrap());
}

#[test]
fn raw_del_then_another_owner_taking_it_is_signalled_and_their_hold_kept() {
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let guard = client.lock("lost:taken").lock().unwrap();
    let rx = lost_signal(&guard);
    let mut raw = server.conn();
    let _: () = redis::pipe()
        .atomic()
        .del("lost:taken")
        .hset("lost:taken", "someone-else:1", 1)
        .pexpire("lost:taken", 30_000)
        .query(&mut raw)
        .unwrap();
    let taken_at = Instant::now();
    let (reason, latency) = expect_lost(&rx, taken_at);
    eprintln!("DEL + HSET by another owner noticed after {latency:?}");
    assert_eq!(reason, LostReason::NotHeld);
    assert!(latency <= PERIOD + SLACK, "noticed after {latency:?}");
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert_eq!(
        hash(&mut raw, "lost:taken"),
        HashMap::from([("someone-else:1".to_owned(), 1)])
    );
    let pttl: i64 = raw.pttl("lost:taken").unwrap();
    assert!(pttl > 25_000, "their lease was touched: {pttl} ms");
}

#[test]
fn server_paused_past_the_lease_is_signalled_and_the_next_holder_is_left_alone() {
    let server = RedisServer::new();
    let lease = Duration::from_secs(1);
    let pause = Duration::from_millis(2500);
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(lease)
        .response_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    // The lease counts from when the acquire was sent.
    let sent = Instant::now();
    let guard = client.lock("lost:paused").lock().unwrap();
    let rx = lost_signal(&guard);
    server.stop();
    let stopped = Instant::now();
    let during_pause = rx.recv_timeout(pause);
    // The pause is the fault being staged, not a synchronisation: keep it up its full length.
    std::thread::sleep(pause.saturating_sub(stopped.elapsed()));
    server.cont();
    let (reason, at) = match during_pause {
        Ok(signal) => signal,
        Err(_) => rx
            .recv_timeout(Duration::from_secs(3))
            .expect("no on_lost callback after a pause of 2.5 leases"),
    };
    let after_lease_end = at.saturating_duration_since(sent + lease);
    eprintln!(
        "paused server: signalled {reason:?} {:?} after the acquire was sent, {after_lease_end:?} \
         after the lease end (during the pause: {})",
        at - sent,
        during_pause.is_ok()
    );
    assert!(
        matches!(reason, LostReason::LeaseExpired | LostReason::NotHeld),
        "{reason:?}"
    );
    assert!(at >= sent + lease, "signalled before the lease end");
    // Within about one renewal call (response + connect timeout) after the lease end.
    assert!(
        after_lease_end <= Duration::from_millis(600) + SLACK,
        "{after_lease_end:?}"
    );
    assert!(guard.is_lost());

    let other = Client::open(server.url()).unwrap();
    let theirs = other
        .lock("lost:paused")
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("another client acquires after the resume");
    let err = guard.unlock().unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    let mut raw = server.conn();
    assert_eq!(
        hash(&mut raw, "lost:paused"),
        HashMap::from([(theirs.owner().to_owned(), 1)])
    );
    theirs.unlock().unwrap();
}

#[test]
fn explicit_lease_guard_is_signalled_at_its_lease_end() {
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let lease = Duration::from_millis(800);
    let sent = Instant::now();
    let guard = client.lock("lost:leased").with_lease(lease).lock().unwrap();
    let rx = lost_signal(&guard);
    let (reason, at) = expect_lost(&rx, sent);
    eprintln!("explicit lease of {lease:?}: signalled after {at:?}");
    assert_eq!(reason, LostReason::LeaseExpired);
    assert!(at >= lease, "signalled before the lease end: {at:?}");
    assert!(at <= lease + SLACK, "signalled late: {at:?}");
    assert!(guard.is_lost());
    assert!(guard.unlock().unwrap_err().is_lock_lost());
}

#[test]
fn callback_of_a_released_guard_never_fires() {
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let lock = client.lock("lost:released");
    let mut raw = server.conn();

    // Released by unlock: the callback is dropped with the release (its sender with it).
    let guard = lock.lock().unwrap();
    let rx = lost_signal(&guard);
    guard.unlock().unwrap();
    assert_eq!(rx.recv_timeout(SLACK), Err(RecvTimeoutError::Disconnected));

    // Released by drop while the thread holds the lock again: its callback belongs to it.
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    let rx_inner = lost_signal(&inner);
    let rx_outer = lost_signal(&outer);
    drop(inner);
    assert_eq!(
        rx_inner.recv_timeout(SLACK),
        Err(RecvTimeoutError::Disconnected)
    );
    // The lock is then force-unlocked and re-taken by another owner: only `outer` hears it.
    let _: () = redis::pipe()
        .atomic()
        .del("lost:released")
        .hset("lost:released", "someone-else:1", 1)
        .query(&mut raw)
        .unwrap();
    assert_eq!(
        expect_lost(&rx_outer, Instant::now()).0,
        LostReason::NotHeld
    );
    drop(outer);
    let _: () = raw.del("lost:released").unwrap();

    // Leaked: the callbacks go with the guard; the hold is still renewed.
    let guard = lock.lock().unwrap();
    let rx = lost_signal(&guard);
    guard.leak();
    assert_eq!(rx.recv_timeout(SLACK), Err(RecvTimeoutError::Disconnected));
    lock.unlock().unwrap();

    // An explicit lease released before its end: its timer goes too.
    let guard = lock
        .clone()
        .with_lease(Duration::from_millis(500))
        .lock()
        .unwrap();
    let rx = lost_signal(&guard);
    guard.unlock().unwrap();
    assert_eq!(rx.recv_timeout(SLACK), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn callback_on_an_already_lost_guard_runs_at_once_on_the_calling_thread() {
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let guard = client.lock("lost:already").lock().unwrap();
    let rx = lost_signal(&guard);
    let _: () = server.conn().del("lost:already").unwrap();
    assert_eq!(expect_lost(&rx, Instant::now()).0, LostReason::NotHeld);
    let (tx, late) = mpsc::channel();
    guard.on_lost(move |reason| tx.send((reason, std::thread::current().id())).unwrap());
    assert_eq!(
        late.try_recv(),
        Ok((LostReason::NotHeld, std::thread::current().id())),
        "not called at once on this thread"
    );

    // The same for an explicit lease that has run out.
    let leased = client
        .lock("lost:already:leased")
        .with_lease(Duration::from_millis(50))
        .lock()
        .unwrap();
    let first = lost_signal(&leased);
    assert_eq!(
        expect_lost(&first, Instant::now()).0,
        LostReason::LeaseExpired
    );
    let (tx, late) = mpsc::channel();
    leased.on_lost(move |reason| tx.send(reason).unwrap());
    assert_eq!(late.try_recv(), Ok(LostReason::LeaseExpired));
}

#[test]
fn panicking_callback_does_not_stop_the_watchdog() {
    let server = RedisServer::new();
    // A 2 s lease: printing the panic (with RUST_BACKTRACE, a symbolized backtrace) holds up
    // the watchdog thread, for over 600 ms with two busy loops beside the suite.
    let client = client(&server, 2000);
    let doomed = client.lock("lost:panics").lock().unwrap();
    doomed.on_lost(|_| panic!("a callback panics on the watchdog thread"));
    let after_panic = lost_signal(&doomed); // callbacks run in order: this one comes after
    let kept = client.lock("lost:kept").lock().unwrap();
    let mut raw = server.conn();
    let _: () = raw.del("lost:panics").unwrap();
    assert_eq!(
        expect_lost(&after_panic, Instant::now()).0,
        LostReason::NotHeld
    );
    assert_kept_alive(&mut raw, "lost:kept", Duration::from_millis(4500)); // over 2 leases
    assert!(!kept.is_lost());
    kept.unlock().unwrap();
}

#[test]
fn lost_guard_unlock_does_not_release_the_threads_newer_hold() {
    // A lost guard's release runs no unlock script: that would decrement (and so release) the
    // hold the same thread took again after the loss.
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let lock = client.lock("lost:newer");
    let old = lock.lock().unwrap();
    let rx = lost_signal(&old);
    let _: () = server.conn().del("lost:newer").unwrap();
    assert_eq!(expect_lost(&rx, Instant::now()).0, LostReason::NotHeld);
    let newer = lock.lock().unwrap();
    drop(old);
    assert_eq!(lock.hold_count().unwrap(), 1, "the newer hold was released");
    assert!(!newer.is_lost());
    newer.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn reentry_after_the_lease_ran_out_does_not_resurrect_the_lost_guard() {
    // A re-entry after the lease ran out by the clock, before the watchdog noticed, does not
    // join (and confirm again) the expired watchdog entry: the lost guard stays lost, its
    // callback fires, and the newer hold has an entry of its own.
    let server = RedisServer::new();
    let client = client(&server, LEASE_MS);
    let mut raw = server.conn();
    // Stage a late watchdog: a callback that blocks it until told to go (real callbacks must
    // not block). `go` is declared after `blocker`, so a failing test unblocks it first.
    let blocker = client.lock("lost:blocker").lock().unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    blocker.on_lost(move |_| {
        entered_tx.send(()).unwrap();
        let _ = go_rx.recv();
    });
    let lock = client.lock("lost:reentry");
    let old = lock.lock().unwrap();
    let rx = lost_signal(&old);
    let _: () = raw.del("lost:blocker").unwrap();
    entered
        .recv_timeout(Duration::from_secs(5))
        .expect("the blocking callback ran");
    // The watchdog is stuck: the lease runs out, and the server expires the key. (Not asking
    // `old.is_lost()` here, which would latch the loss before the re-entry.)
    assert!(wait_until(Duration::from_secs(5), || !raw
        .exists::<_, bool>("lost:reentry")
        .unwrap()));
    let newer = lock.lock().unwrap();
    assert!(old.is_lost(), "the re-entry resurrected the lost guard");
    assert!(!newer.is_lost());
    go.send(()).unwrap();
    assert_eq!(expect_lost(&rx, Instant::now()).0, LostReason::LeaseExpired);
    assert!(old.unlock().unwrap_err().is_lock_lost());
    assert_eq!(lock.hold_count().unwrap(), 1);
    // The newer hold has an entry of its own, renewed past its lease.
    assert_kept_alive(
        &mut raw,
        "lost:reentry",
        Duration::from_millis(2 * LEASE_MS),
    );
    assert!(!newer.is_lost());
    newer.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    drop(blocker);
}

#[test]
fn a_reentry_that_finds_the_lock_gone_marks_the_outer_guard_lost_at_once() {
    // The lock deleted on the server and locked again by the same thread before the next
    // renewal (30 s here) is a new hold, not a re-entry: the outer guard is marked lost at
    // once, and its release leaves the inner, new hold alone.
    for make in [
        support::make_lock,
        support::make_fair_lock,
        support::make_fenced_lock,
    ] {
        let server = RedisServer::new();
        let client = Client::open(server.url()).unwrap();
        let lock = make(&client, "lost:reentry");
        let outer = lock.lock().unwrap();
        let rx = lost_signal(&outer);
        let _: () = server.conn().del("lost:reentry").unwrap();
        let inner = lock.lock().unwrap(); // a new hold, not a re-entry: the server says count 1
        assert_eq!(
            expect_lost(&rx, Instant::now()).0,
            LostReason::NotHeld,
            "{lock:?}"
        );
        assert!(outer.is_lost() && !inner.is_lost(), "{lock:?}");
        assert!(outer.unlock().unwrap_err().is_lock_lost(), "{lock:?}");
        assert_eq!(lock.hold_count().unwrap(), 1, "{lock:?}: the new hold kept");
        inner.unlock().unwrap();
        assert!(!lock.is_locked().unwrap(), "{lock:?}");
    }
    // The same for the two sides of a read-write lock.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let rw = client.read_write_lock("lost:rw");
    for side in [rw.read(), rw.write()] {
        let outer = side.lock().unwrap();
        let _: () = server.conn().del("lost:rw").unwrap();
        let inner = side.lock().unwrap();
        assert!(outer.is_lost() && !inner.is_lost(), "{side:?}");
        drop(outer);
        assert_eq!(side.hold_count().unwrap(), 1, "{side:?}: the new hold kept");
        inner.unlock().unwrap();
    }
}

/// A server restarted without its data is noticed at once, not at the next renewal: the
/// client's pub/sub connection breaks with it and, back, has every hold renewed (or, for a
/// plain semaphore's permits, checked) now, which finds them gone. 20 rounds of SIGKILL and
/// restart; each time the holder (30 s watchdog: its next renewal would be 10 s away) is told
/// within a second of the kill. The semaphore set up again after the loss keeps its permits:
/// the lost guards' releases give nothing back into it.
#[test]
fn a_restart_without_data_is_reported_within_a_second() {
    let mut server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut slowest = Duration::ZERO;
    for round in 0..20 {
        let name = format!("restart:{round}");
        let guard = client.lock(&name).lock().unwrap();
        let fair = client.fair_lock(format!("{name}:fair")).lock().unwrap();
        let sem = client.semaphore(format!("{name}:sem"));
        assert!(sem.try_set_permits(2).unwrap());
        let permits = sem.acquire(2).unwrap();
        let pes = client.permit_expirable_semaphore(format!("{name}:pes"));
        assert!(pes.try_set_permits(1).unwrap());
        let permit = pes.acquire_renewed().unwrap();
        let (tx, rx) = mpsc::channel();
        let report = |tx: &mpsc::Sender<_>| {
            let tx = tx.clone();
            move |why| {
                let _ = tx.send((why, Instant::now()));
            }
        };
        for g in [&guard, &fair] {
            g.on_lost(report(&tx));
        }
        permits.on_lost(report(&tx));
        permit.on_lost(report(&tx));
        let killed = Instant::now();
        server.restart();
        for _ in 0..4 {
            let (why, at) = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the lost hold is reported");
            assert_eq!(why, LostReason::NotHeld);
            slowest = slowest.max(at - killed);
        }
        assert!(guard.is_lost() && fair.is_lost() && permits.is_lost() && permit.is_lost());
        assert!(guard.unlock().unwrap_err().is_lock_lost());
        assert!(fair.unlock().unwrap_err().is_lock_lost());
        assert!(sem.try_set_permits(2).unwrap(), "made anew after the loss");
        assert!(permits.release().unwrap_err().is_permits_lost());
        assert_eq!(
            sem.available_permits().unwrap(),
            2,
            "nothing given back into it"
        );
        assert!(permit.release().unwrap_err().is_unknown_permit());
    }
    println!("slowest report after a kill: {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
}
