//! A cap on holding: a hold renewed by the watchdog is renewed no further than its maximum
//! hold time, then its lease runs out in Redis, the guard turns lost (`MaxHoldReached`, to
//! `on_lost` once) and its release leaves the next holder alone.

mod support;

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config, LockGuard, LostReason, MultiLock};
use support::{command_calls, wait_until, RedisServer};

/// Watchdog timeout of the tests: renewals every 100 ms.
const LEASE: Duration = Duration::from_millis(300);
/// The cap of most tests: three leases.
const CAP: Duration = Duration::from_millis(900);
/// Allowance for a loaded 2-core machine on top of every expected latency.
const SLACK: Duration = Duration::from_millis(700);

fn client(server: &RedisServer, max_hold: Option<Duration>) -> Client {
    support::client_with(server, |b| {
        let b = b.watchdog_timeout(LEASE);
        match max_hold {
            Some(max_hold) => b.max_hold(max_hold),
            None => b,
        }
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

/// Waits for the signal and returns its reason and how long after `since` it came; then
/// checks that it came once (the callback, and its sender, are gone).
fn expect_lost_once(
    rx: &Receiver<(LostReason, Instant)>,
    since: Instant,
) -> (LostReason, Duration) {
    let (reason, at) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("on_lost callback within 10 s");
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)),
        Err(RecvTimeoutError::Disconnected),
        "on_lost called more than once, or kept after it was called"
    );
    (reason, at.saturating_duration_since(since))
}

/// Samples `key`'s TTL for `how_long`: it must never run out (the watchdog keeps renewing it).
/// Sampled state, not synchronisation.
fn assert_kept_alive(raw: &mut redis::Connection, key: &str, how_long: Duration) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        let pttl: i64 = raw.pttl(key).unwrap();
        assert!(pttl > 0, "`{key}` expired: it was not renewed");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn hash(raw: &mut redis::Connection, key: &str) -> HashMap<String, i64> {
    raw.hgetall(key).unwrap()
}

#[test]
fn a_hold_is_renewed_until_its_cap_then_expires_is_lost_and_its_unlock_leaves_the_next_holder_alone(
) {
    let server = RedisServer::new();
    let client = client(&server, Some(CAP));
    let other = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let key = "maxhold:capped";
    let t0 = Instant::now();
    let guard = client.lock(key).lock().unwrap();
    let rx = lost_signal(&guard);
    // The key outlives its first lease (renewed), and is gone by the cap (no renewal past it).
    assert!(
        wait_until(CAP + LEASE + SLACK, || {
            raw.pttl::<_, i64>(key).unwrap() == -2
        }),
        "`{key}` still held {:?} after the acquire",
        t0.elapsed()
    );
    let expired_after = t0.elapsed();
    eprintln!("key expired {expired_after:?} after the acquire (cap {CAP:?}, lease {LEASE:?})");
    assert!(
        expired_after >= 2 * LEASE,
        "expired after {expired_after:?}: not renewed up to the cap"
    );
    let (reason, latency) = expect_lost_once(&rx, t0);
    eprintln!("lost signalled {latency:?} after the acquire");
    assert_eq!(reason, LostReason::MaxHoldReached);
    assert!(latency <= CAP + SLACK, "signalled after {latency:?}");
    assert!(guard.is_lost());
    // Another owner takes it; the capped guard's unlock neither sends nor deletes anything.
    let theirs = other
        .lock(key)
        .try_lock_for(Duration::from_secs(2))
        .unwrap()
        .expect("the lock is free once the capped hold ran out");
    let scripts_before = command_calls(&mut raw, "evalsha");
    let err = guard.unlock().unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    assert_eq!(command_calls(&mut raw, "evalsha"), scripts_before);
    assert_eq!(hash(&mut raw, key).get(theirs.owner()), Some(&1));
    theirs.unlock().unwrap();
}

#[test]
fn a_hold_released_before_its_cap_is_unaffected() {
    let server = RedisServer::new();
    let client = client(&server, Some(Duration::from_secs(60)));
    let mut raw = server.conn();
    let key = "maxhold:released";
    let guard = client.lock(key).lock().unwrap();
    let rx = lost_signal(&guard);
    // Renewed past its first lease, well before its cap.
    assert_kept_alive(&mut raw, key, 2 * LEASE);
    assert!(!guard.is_lost());
    guard.unlock().unwrap();
    assert_eq!(raw.pttl::<_, i64>(key).unwrap(), -2);
    // The release dropped the callback uncalled.
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)),
        Err(RecvTimeoutError::Disconnected)
    );
    // A new hold has a new cap: taken and released again.
    client.lock(key).lock().unwrap().unlock().unwrap();
}

#[test]
fn a_per_lock_cap_beats_the_client_default_and_there_is_no_cap_by_default() {
    let server = RedisServer::new();
    let capped = client(&server, Some(CAP));
    let free = client(&server, None);
    let mut raw = server.conn();
    let t0 = Instant::now();
    // The client default applies; a lock's own (longer, or where the client has none) wins.
    let by_default = capped.lock("maxhold:default").lock().unwrap();
    let lifted = capped
        .lock("maxhold:lifted")
        .with_max_hold(Duration::from_secs(3600))
        .lock()
        .unwrap();
    let uncapped = free.lock("maxhold:uncapped").lock().unwrap();
    let own = free.lock("maxhold:own").with_max_hold(CAP).lock().unwrap();
    let (rx_default, rx_lifted) = (lost_signal(&by_default), lost_signal(&lifted));
    let (rx_uncapped, rx_own) = (lost_signal(&uncapped), lost_signal(&own));
    for (rx, what) in [(&rx_default, "client default"), (&rx_own, "per lock")] {
        let (reason, latency) = expect_lost_once(rx, t0);
        assert_eq!(reason, LostReason::MaxHoldReached, "{what}");
        assert!(
            latency <= CAP + SLACK,
            "{what}: signalled after {latency:?}"
        );
    }
    assert!(by_default.is_lost() && own.is_lost());
    // The others are renewed on, past twice the cap.
    let past = (2 * CAP).saturating_sub(t0.elapsed());
    for key in ["maxhold:lifted", "maxhold:uncapped"] {
        assert_kept_alive(&mut raw, key, past.max(LEASE));
    }
    assert!(!lifted.is_lost() && !uncapped.is_lost());
    assert_eq!(
        rx_lifted.try_recv().map(|(r, _)| r),
        Err(mpsc::TryRecvError::Empty)
    );
    assert_eq!(
        rx_uncapped.try_recv().map(|(r, _)| r),
        Err(mpsc::TryRecvError::Empty)
    );
    lifted.unlock().unwrap();
    uncapped.unlock().unwrap();
    assert!(by_default.unlock().unwrap_err().is_lock_lost());
    assert!(own.unlock().unwrap_err().is_lock_lost());
}

#[test]
fn a_reentry_keeps_the_cap_of_the_first_hold() {
    let server = RedisServer::new();
    let client = client(&server, None);
    let cap = Duration::from_millis(1200);
    let lock = client.lock("maxhold:reentrant").with_max_hold(cap);
    let t0 = Instant::now();
    let first = lock.lock().unwrap();
    // A deliberate delay, not a wait for an event: the re-entry comes half way to the cap,
    // and asks for a much longer cap.
    std::thread::sleep(cap / 2);
    let second = lock
        .clone()
        .with_max_hold(Duration::from_secs(3600))
        .lock()
        .unwrap();
    let (rx_first, rx_second) = (lost_signal(&first), lost_signal(&second));
    for rx in [&rx_first, &rx_second] {
        let (reason, latency) = expect_lost_once(rx, t0);
        assert_eq!(reason, LostReason::MaxHoldReached);
        // Counted from the re-entry, the hold would end no earlier than cap / 2 + cap - LEASE / 3.
        assert!(
            latency < cap + cap / 2 - LEASE / 3,
            "signalled after {latency:?}: the re-entry extended the cap"
        );
    }
    assert!(second.unlock().unwrap_err().is_lock_lost());
    assert!(first.unlock().unwrap_err().is_lock_lost());
}

#[test]
fn a_zero_or_absurd_max_hold_is_refused_and_leaves_nothing_behind() {
    let server = RedisServer::new();
    let year = Duration::from_secs(365 * 24 * 3600);
    for bad in [Duration::ZERO, year + Duration::from_secs(1)] {
        let err = Config::builder(server.url().as_str())
            .max_hold(bad)
            .build()
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{bad:?}: {err:?}");
    }
    let client = client(&server, None);
    let mut raw = server.conn();
    let scripts_before = command_calls(&mut raw, "evalsha") + command_calls(&mut raw, "eval");
    for bad in [Duration::ZERO, year + Duration::from_secs(1)] {
        let lock = client.lock("maxhold:bad").with_max_hold(bad);
        let errors = [
            lock.lock().err(),
            lock.try_lock().err(),
            lock.try_lock_for(Duration::from_secs(1)).err(),
        ];
        for err in errors {
            let err = err.expect("refused");
            assert!(err.is_invalid_argument(), "{bad:?}: {err:?}");
        }
        let pair = MultiLock::new([client.lock("maxhold:m1"), client.lock("maxhold:m2")])
            .unwrap()
            .with_max_hold(bad);
        let err = pair.lock().unwrap_err();
        assert!(err.is_invalid_argument(), "{bad:?}: {err:?}");
    }
    let scripts_after = command_calls(&mut raw, "evalsha") + command_calls(&mut raw, "eval");
    assert_eq!(
        scripts_after, scripts_before,
        "a refused acquire sent a script"
    );
    for key in ["maxhold:bad", "maxhold:m1", "maxhold:m2"] {
        assert!(!raw.exists::<_, bool>(key).unwrap(), "{key} left behind");
    }
    assert!(client.lock("maxhold:bad").lock().unwrap().unlock().is_ok());
}

#[test]
fn nested_holds_set_no_lease_past_the_cap() {
    // Near the cap, neither a re-entry nor the release of an inner hold sets a lease past it:
    // the key is gone by the cap (not a lease later), as the outer guard is reported lost.
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = client(&server, Some(CAP));
    let lock = client.lock("cap:nested");
    let started = Instant::now();
    let outer = lock.lock().unwrap();
    // Near the cap (within one lease of it), re-enter and release the inner hold.
    while started.elapsed() < CAP - LEASE / 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let inner = lock.lock().unwrap();
    let left = CAP.saturating_sub(started.elapsed());
    let pttl: i64 = raw.pttl("cap:nested").unwrap();
    assert!(
        pttl > 0 && (pttl as u128) <= left.as_millis() + 50,
        "the re-entry set {pttl} ms with {left:?} left to the cap"
    );
    drop(inner);
    let left = CAP.saturating_sub(started.elapsed());
    let pttl: i64 = raw.pttl("cap:nested").unwrap();
    assert!(
        pttl <= 0 || (pttl as u128) <= left.as_millis() + 50,
        "the partial release set {pttl} ms with {left:?} left to the cap"
    );
    // The key is gone by the cap, and the outer guard knows.
    assert!(wait_until(CAP + SLACK, || {
        !raw.exists::<_, bool>("cap:nested").unwrap()
    }));
    assert!(started.elapsed() < CAP + SLACK);
    assert!(wait_until(SLACK, || outer.is_lost()));
    assert!(outer.unlock().unwrap_err().is_lock_lost());
}

/// Waiters in the queue of condition `condition` of `lock`, read raw: (ZSET, LIST).
fn condition_waiters(raw: &mut redis::Connection, lock: &str, condition: &str) -> (i64, i64) {
    let waiters: i64 = raw
        .zcard(format!("redlatch_condition:{{{lock}}}:{condition}"))
        .unwrap();
    let queue: i64 = raw
        .llen(format!("redlatch_condition_queue:{{{lock}}}:{condition}"))
        .unwrap();
    (waiters, queue)
}

#[test]
fn a_condition_wait_ends_at_the_cap_and_the_lock_is_not_held_again() {
    let server = RedisServer::new();
    let client = client(&server, Some(CAP));
    let mut raw = server.conn();
    let key = "maxhold:wait";
    let lock = client.lock(key);
    let t0 = Instant::now();
    let mut guard = lock.lock().unwrap();
    let rx = lost_signal(&guard);
    // Nobody notifies: the cap ends the wait, long before its timeout.
    let err = lock
        .condition("never")
        .wait_for(&mut guard, Duration::from_secs(10))
        .unwrap_err();
    let ended = t0.elapsed();
    assert!(err.is_lock_lost(), "{err:?}");
    assert!(
        ended >= CAP && ended <= CAP + SLACK,
        "the wait ended {ended:?} after the acquire (cap {CAP:?})"
    );
    let (reason, _) = expect_lost_once(&rx, t0);
    assert_eq!(reason, LostReason::MaxHoldReached);
    assert!(guard.is_lost());
    // Nothing left: the lock free, the waiter out of the queue.
    assert_eq!(raw.exists::<_, i64>(key).unwrap(), 0);
    assert_eq!(condition_waiters(&mut raw, key, "never"), (0, 0));
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert_eq!(client.lock(key).hold_count().unwrap(), 0);
}

/// Notified half a lease before its cap, the waiter holds the lock again with a lease that
/// ends by the cap (the watchdog's lease would end a second after it), and loses it there.
#[test]
fn a_condition_wait_notified_near_the_cap_holds_the_lock_no_longer_than_the_cap() {
    let server = RedisServer::new();
    let lease = Duration::from_secs(2);
    let cap = Duration::from_secs(3);
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(lease)
        .max_hold(cap)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let other = Client::open(server.url()).unwrap();
    let key = "maxhold:notified";
    let mut raw = server.conn();
    let mut waiter_raw = server.conn();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let lock = client.lock(key);
        let t0 = Instant::now();
        let mut guard = lock.lock().unwrap();
        // The cap is the acquire's send time plus `cap`: between these two.
        let caps = (t0 + cap, Instant::now() + cap);
        let lost = lost_signal(&guard);
        tx.send(t0).unwrap();
        let waited = lock
            .condition("near")
            .wait_for(&mut guard, Duration::from_secs(10))
            .unwrap();
        let now = Instant::now();
        let pttl: i64 = waiter_raw.pttl(key).unwrap();
        assert!(pttl > 0, "held again: {pttl}");
        let expires = now + Duration::from_millis(pttl as u64);
        // The guard stays on its thread (and holds) until the cap ends its hold.
        let (reason, after) = expect_lost_once(&lost, caps.0);
        (
            waited.timed_out(),
            expires,
            caps,
            reason,
            after,
            guard.is_lost(),
        )
    });
    let t0 = rx.recv().unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        condition_waiters(&mut raw, key, "near").0 == 1
    }));
    // Staging, not synchronisation: the notification comes half a lease before the cap.
    std::thread::sleep((t0 + cap - lease / 2).saturating_duration_since(Instant::now()));
    let lock = other.lock(key);
    let notifier = lock.lock().unwrap();
    assert!(lock.condition("near").notify_one().unwrap());
    notifier.unlock().unwrap();
    let (timed_out, expires, (earliest_cap, latest_cap), reason, after, lost) =
        waiter.join().unwrap();
    assert!(!timed_out);
    assert!(
        expires <= latest_cap + Duration::from_millis(300),
        "held again, its lease ends {:?} after the cap",
        expires.saturating_duration_since(latest_cap)
    );
    assert_eq!(reason, LostReason::MaxHoldReached);
    assert!(
        after <= latest_cap - earliest_cap + SLACK,
        "lost {after:?} after the cap"
    );
    assert!(lost);
    assert!(
        wait_until(SLACK, || raw.exists::<_, i64>(key).unwrap() == 0),
        "expired in Redis"
    );
}

/// A waiter notified just before its cap, while the notifier holds the lock past the cap,
/// cannot take the lock again: it returns `LockLost` and hands the notification on, so the
/// next waiter (no cap) is woken by it instead of sleeping to its timeout.
#[test]
fn a_notification_that_woke_a_waiter_its_cap_then_ended_goes_to_the_next_waiter() {
    let server = RedisServer::new();
    let key = "maxhold:handed-on";
    let capped = client(&server, Some(Duration::from_millis(1500)));
    let uncapped = client(&server, None);
    let notifier = client(&server, None);
    let mut raw = server.conn();
    let first = std::thread::spawn(move || {
        let lock = capped.lock(key);
        let mut guard = lock.lock().unwrap();
        let err = lock
            .condition("on")
            .wait_for(&mut guard, Duration::from_secs(30))
            .unwrap_err();
        (err.is_lock_lost(), guard.is_lost())
    });
    assert!(wait_until(Duration::from_secs(10), || {
        condition_waiters(&mut raw, key, "on") == (1, 1)
    }));
    let second = std::thread::spawn(move || {
        let lock = uncapped.lock(key);
        let mut guard = lock.lock().unwrap();
        let waited = lock
            .condition("on")
            .wait_for(&mut guard, Duration::from_secs(20))
            .unwrap();
        let held = lock.hold_count().unwrap();
        guard.unlock().unwrap();
        (waited.timed_out(), held, Instant::now())
    });
    assert!(wait_until(Duration::from_secs(10), || {
        condition_waiters(&mut raw, key, "on") == (2, 2)
    }));
    // The first waiter queued first: it is picked, and the lock stays held past its cap.
    let lock = notifier.lock(key);
    let guard = lock.lock().unwrap();
    assert!(lock.condition("on").notify_one().unwrap());
    let (lock_lost, guard_lost) = first.join().unwrap();
    assert!(lock_lost && guard_lost);
    // Handed on: the second waiter was picked, and holds the lock once it is free.
    let released = Instant::now();
    guard.unlock().unwrap();
    let (timed_out, held, returned) = second.join().unwrap();
    assert!(
        !timed_out,
        "the notification did not reach the second waiter"
    );
    assert_eq!(held, 1);
    assert!(
        returned.saturating_duration_since(released) < Duration::from_secs(5),
        "the second waiter returned {:?} after the release",
        returned.saturating_duration_since(released)
    );
    assert_eq!(condition_waiters(&mut raw, key, "on"), (0, 0));
    assert_eq!(raw.exists::<_, i64>(key).unwrap(), 0);
}
