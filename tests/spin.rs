//! The spin lock (Redisson's `RSpinLock`): the plain lock's hash, waited for by polling with
//! back-off, never by pub/sub.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Backoff, Client, Config, Interrupter};
use support::{await_waiting, command_calls, numsub, RedisServer};

/// How long an interrupted or closed wait may take to return here (the library aims at a few
/// milliseconds; this only keeps a loaded machine from failing the run).
const PROMPT: Duration = Duration::from_millis(500);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Holds `key` as a foreign owner would, for `lease_ms`.
fn hold_raw(server: &RedisServer, key: &str, lease_ms: u64) {
    let mut c = server.conn();
    redis::cmd("HSET")
        .arg(key)
        .arg("other:1")
        .arg(1)
        .query::<()>(&mut c)
        .unwrap();
    redis::cmd("PEXPIRE")
        .arg(key)
        .arg(lease_ms)
        .query::<()>(&mut c)
        .unwrap();
}

fn reset_stats(server: &RedisServer) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut server.conn())
        .unwrap();
}

/// Script calls the server counted (EVALSHA, and EVAL for a script it did not know).
fn script_calls(server: &RedisServer) -> u64 {
    let mut c = server.conn();
    command_calls(&mut c, "evalsha") + command_calls(&mut c, "eval")
}

#[test]
fn spin_and_other_locks_of_one_name_exclude_each_other() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let spin = client.spin_lock("x");
    // Held on another thread: a thread re-enters its own holds.
    let other = |f: fn(&Client) -> bool| {
        let client = client.clone();
        thread::spawn(move || f(&client)).join().unwrap()
    };

    let guard = spin.lock().unwrap();
    assert!(other(|c| c.lock("x").try_lock().unwrap().is_none()));
    assert!(other(|c| c.fenced_lock("x").try_lock().unwrap().is_none()));
    assert!(other(|c| c.fair_lock("x").try_lock().unwrap().is_none()));
    assert!(other(|c| c.spin_lock("x").try_lock().unwrap().is_none()));
    assert_eq!(spin.hold_count().unwrap(), 1);
    let again = spin.lock().unwrap();
    assert_eq!(spin.hold_count().unwrap(), 2, "reentrant");
    drop(again);
    drop(guard);
    assert!(!spin.is_locked().unwrap());

    for kind in [
        support::make_lock,
        support::make_fair_lock,
        support::make_fenced_lock,
    ] {
        let guard = kind(&client, "x").lock().unwrap();
        let spun = other(|c| {
            c.spin_lock("x").try_lock().unwrap().is_none()
                && c.spin_lock("x").try_lock_for(ms(150)).unwrap().is_none()
        });
        assert!(spun, "a spin lock waits for {:?}", guard.lock());
        drop(guard);
        // Free again: the spin lock takes it.
        assert!(other(|c| c.spin_lock("x").try_lock().unwrap().is_some()));
    }
}

#[test]
fn a_spin_waiter_gets_the_lock_after_release_without_any_pubsub() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    reset_stats(&server);
    let guard = client.spin_lock("job").lock().unwrap();

    let (tx, rx) = mpsc::channel();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            let guard = client.spin_lock("job").lock().unwrap();
            tx.send(Instant::now()).unwrap();
            guard.unlock().unwrap();
        })
    };
    await_waiting(&client, 1);
    // Let it reach the back-off's cap (128 ms by default) before the release.
    thread::sleep(ms(600));
    let released = Instant::now();
    guard.unlock().unwrap();
    let got = rx.recv_timeout(Duration::from_secs(5)).expect("acquired");
    waiter.join().unwrap();
    let latency = got - released;
    println!("spin waiter acquired {latency:?} after the release");
    // One back-off step at most (128 ms), plus scheduling.
    assert!(latency < ms(128 + 150), "{latency:?}");

    let mut c = server.conn();
    let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").query(&mut c).unwrap();
    assert!(channels.is_empty(), "{channels:?}");
    assert_eq!(numsub(&mut c, "redisson_lock__channel:{job}"), 0);
    for cmd in [
        "subscribe",
        "ssubscribe",
        "psubscribe",
        "publish",
        "spublish",
    ] {
        assert_eq!(command_calls(&mut c, cmd), 0, "{cmd}");
    }
    assert_eq!(client.metrics().waiting, 0);
}

#[test]
fn backoff_bounds_bound_the_number_of_attempts() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    hold_raw(&server, "busy", 60_000);
    // Loads the scripts, so that every later call is one EVALSHA.
    assert!(client.spin_lock("busy").try_lock().unwrap().is_none());

    // Delays of 20 ms, then between 30 and 40 ms: over 1 s, 1 + 1 + 980/40..980/30 calls.
    reset_stats(&server);
    let narrow = Backoff::new(ms(20), ms(40));
    let lock = client.spin_lock_with_backoff("busy", narrow);
    assert!(lock.try_lock_for(Duration::from_secs(1)).unwrap().is_none());
    let calls = script_calls(&server);
    println!("back-off 20..40 ms: {calls} acquire calls in 1 s (bounds allow 26..=35)");
    assert!((15..=36).contains(&calls), "{calls}");

    // The defaults: 8 calls in the first ~0.2 s, then one per 96-128 ms.
    reset_stats(&server);
    let lock = client.spin_lock("busy");
    assert!(lock.try_lock_for(Duration::from_secs(2)).unwrap().is_none());
    let calls = script_calls(&server);
    println!("default back-off: {calls} acquire calls in 2 s (bounds allow 22..=28)");
    assert!((15..=30).contains(&calls), "{calls}");
}

#[test]
fn a_spin_wait_is_capped_by_the_remaining_lease() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    hold_raw(&server, "short", 300);
    // Back-off of 10 s: only the lease (300 ms) bounds the first sleep.
    let lock = client.spin_lock_with_backoff("short", Backoff::new(ms(10_000), ms(10_000)));
    let started = Instant::now();
    let guard = lock.try_lock_for(Duration::from_secs(5)).unwrap();
    let took = started.elapsed();
    println!("acquired {took:?} after the start, the lease being 300 ms");
    assert!(guard.is_some());
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn interrupt_and_close_end_a_spinning_wait_promptly() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    hold_raw(&server, "held", 60_000);
    // Long sleeps: only the alarms can end them early.
    let slow = Backoff::new(ms(300), ms(5_000));

    let spawn = |client: &Client| {
        let client = client.clone();
        let (tx, rx) = mpsc::channel();
        let handle = thread::spawn(move || {
            tx.send(Interrupter::current()).unwrap();
            let out = client.spin_lock_with_backoff("held", slow).lock().map(drop);
            (out, Instant::now())
        });
        (rx.recv().unwrap(), handle)
    };

    let (interrupter, handle) = spawn(&client);
    await_waiting(&client, 1);
    thread::sleep(ms(50)); // into its second, longer sleep
    let asked = Instant::now();
    interrupter.interrupt();
    let (out, at) = handle.join().unwrap();
    let took = at - asked;
    println!("interrupted spin wait returned in {took:?}");
    assert!(out.unwrap_err().is_interrupted());
    assert!(took < PROMPT, "{took:?}");
    assert_eq!(client.metrics().waiting, 0);

    let (_, handle) = spawn(&client);
    await_waiting(&client, 1);
    thread::sleep(ms(50));
    let asked = Instant::now();
    client.close();
    let (out, at) = handle.join().unwrap();
    let took = at - asked;
    println!("closed spin wait returned in {took:?}");
    assert!(out.unwrap_err().is_closed());
    assert!(took < PROMPT, "{took:?}");
}

#[test]
fn bad_backoff_bounds_are_invalid_arguments() {
    let server = RedisServer::new();
    let bad = [
        Backoff::new(Duration::ZERO, ms(10)),
        Backoff::new(ms(50), ms(10)),
        Backoff::default().multiplier(0),
        Backoff::new(ms(1), Duration::from_secs(400 * 24 * 3600)),
    ];
    let client = Client::open(server.url()).unwrap();
    for b in bad {
        let err = Config::builder(server.url().as_str())
            .spin_backoff(b)
            .build()
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{b:?}: {err}");
        let lock = client.spin_lock_with_backoff("x", b);
        assert!(lock.lock().unwrap_err().is_invalid_argument(), "{b:?}");
        assert!(lock.try_lock().unwrap_err().is_invalid_argument(), "{b:?}");
    }
    assert!(!client.spin_lock("x").is_locked().unwrap(), "nothing taken");
}

#[test]
fn the_watchdog_renews_a_spin_lock() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(ms(600))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let lock = client.spin_lock("renewed");
    let guard = lock.lock().unwrap();
    thread::sleep(ms(2_000));
    assert!(!guard.is_lost());
    let lease = lock.remaining_lease().unwrap().expect("still held");
    assert!(lease <= ms(600), "{lease:?}");
    let taken = {
        let client = client.clone();
        thread::spawn(move || client.lock("renewed").try_lock().unwrap().is_none())
            .join()
            .unwrap()
    };
    assert!(taken, "still excludes others after three leases");
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_spin_unlock_refuses_a_hold_count_that_is_not_a_number() {
    // A hold count that is not a number is refused with WRONGTYPE and left as it is (the
    // unlock script must not compare it, as `nil`, with a number: a Lua runtime error).
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let _: () = redis::cmd("HSET")
        .arg("spin:odd")
        .arg(client.owner_id())
        .arg("abc")
        .query(&mut raw)
        .unwrap();
    let err = client.spin_lock("spin:odd").unlock().unwrap_err();
    assert!(matches!(err, redlatch::Error::WrongType { .. }), "{err:?}");
    let kept: Option<String> = redis::cmd("HGET")
        .arg("spin:odd")
        .arg(client.owner_id())
        .query(&mut raw)
        .unwrap();
    assert_eq!(kept.as_deref(), Some("abc"), "nothing changed");
}
