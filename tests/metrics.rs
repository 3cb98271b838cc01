//! `Client::metrics`: what each counter and histogram counts, checked against what the test
//! did and against raw server state.

mod support;

use support::forget::ForgetAll;

use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use redlatch::{Client, LostReason};
use support::{kill_pubsub_connections, numsub, wait_until, RedisServer};

fn client_with(server: &RedisServer, watchdog: Duration) -> Client {
    support::client_with(server, |b| {
        b.watchdog_timeout(watchdog)
            .connect_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(300))
    })
}

#[test]
fn uncontended_acquisitions_and_holds_are_counted() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let clone = client.clone();
    let lock = client.lock("m:solo");
    for _ in 0..10 {
        drop(lock.lock().unwrap());
    }
    // A re-entry is an acquisition too, and each guard's release a hold.
    let outer = lock.lock().unwrap();
    let inner = clone.lock("m:solo").lock().unwrap();
    drop(inner);
    std::thread::sleep(Duration::from_millis(50)); // the hold being measured
    drop(outer);
    let m = client.metrics();
    assert_eq!(m, clone.metrics(), "clones share the counters");
    assert_eq!(m.acquisitions, 12);
    assert_eq!(m.contended_acquisitions, 0);
    assert_eq!(m.timeouts, 0);
    assert_eq!(m.wait_time.count(), 12);
    assert_eq!(m.hold_time.count(), 12);
    let max = m.hold_time.max().unwrap();
    assert!(
        max >= Duration::from_millis(50) && max < Duration::from_secs(2),
        "{max:?}"
    );
    // Uncontended waits are a round trip or so; the median hold is a short one.
    assert!(m.wait_time.p50().unwrap() < Duration::from_millis(100));
    assert!(m.hold_time.p50().unwrap() < Duration::from_millis(50));
    assert_eq!(m.lost_locks, 0);
}

#[test]
fn a_contended_acquisition_records_its_wait_and_a_timeout_counts_once() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let guard = holder.lock("m:contended").lock().unwrap();

    // try_lock on a busy lock does not wait: no timeout. try_lock_for does.
    assert!(client.lock("m:contended").try_lock().unwrap().is_none());
    assert_eq!(client.metrics().timeouts, 0);
    assert!(client
        .lock("m:contended")
        .try_lock_for(Duration::from_millis(50))
        .unwrap()
        .is_none());
    let m = client.metrics();
    assert_eq!((m.timeouts, m.acquisitions), (1, 0));

    let lock = client.lock("m:contended");
    let (started_tx, started_rx) = bounded(1);
    let waiter = std::thread::spawn(move || {
        started_tx.send(Instant::now()).unwrap();
        drop(lock.lock().unwrap());
    });
    let started = started_rx.recv().unwrap();
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_lock__channel:{m:contended}"
    ) == 1));
    std::thread::sleep(Duration::from_millis(100)); // the wait being measured
    drop(guard);
    waiter.join().unwrap();
    let waited = started.elapsed();
    let m = client.metrics();
    assert_eq!((m.acquisitions, m.contended_acquisitions), (1, 1));
    let recorded = m.wait_time.max().unwrap();
    assert!(
        recorded >= Duration::from_millis(100) && recorded <= waited,
        "{recorded:?} of {waited:?}"
    );
    assert_eq!(holder.metrics().acquisitions, 1);
    assert_eq!(holder.metrics().contended_acquisitions, 0);
}

#[test]
fn renewals_and_a_lock_lost_to_force_unlock_are_counted() {
    let server = RedisServer::new();
    let client = client_with(&server, Duration::from_millis(300)); // renewed every 100 ms
    let guard = client.lock("m:renewed").lock().unwrap();
    let (lost_tx, lost_rx) = bounded(1);
    guard.on_lost(move |why| lost_tx.send(why).unwrap());
    // Outlive three leases: the lease is kept by renewals alone.
    std::thread::sleep(Duration::from_millis(900));
    assert!(!guard.is_lost());
    let renewals = client.metrics().renewals;
    assert!(
        (3..=20).contains(&renewals),
        "{renewals} renewals in 3 leases"
    );
    assert_eq!(client.metrics().failed_renewals, 0);

    assert!(Client::open(server.url())
        .unwrap()
        .lock("m:renewed")
        .force_unlock()
        .unwrap());
    let why = lost_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(why, LostReason::NotHeld);
    assert_eq!(client.metrics().lost_locks, 1);
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    let m = client.metrics();
    assert_eq!(m.lost_locks, 1, "the release does not count the loss again");
    assert_eq!(m.hold_time.count(), 1);
}

#[test]
fn failed_renewals_then_the_lost_lease_are_counted() {
    let server = RedisServer::new();
    // A lease of 1.5 s: the first renewal (at 0.5 s) fails after its 300 ms response timeout
    // well before the lease ends, even on a loaded machine (with 600 ms, one renewal late by
    // a loaded scheduler failed only after the lease had run out: counted lost, not failed).
    let client = client_with(&server, Duration::from_millis(1500));
    let guard = client.lock("m:paused").lock().unwrap();
    let (lost_tx, lost_rx) = bounded(1);
    guard.on_lost(move |why| lost_tx.send(why).unwrap());
    server.stop(); // SIGSTOP: renewals time out
    let why = lost_rx.recv_timeout(Duration::from_secs(10));
    server.cont();
    assert_eq!(why.unwrap(), LostReason::LeaseExpired);
    let m = client.metrics();
    assert!(m.failed_renewals >= 1, "{m:?}");
    assert_eq!(m.lost_locks, 1);
    drop(guard);
}

#[test]
fn an_explicit_lease_that_ran_out_is_counted_lost_at_release() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client
        .lock("m:leased")
        .with_lease(Duration::from_millis(100))
        .lock()
        .unwrap();
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || {
        !redis::cmd("EXISTS")
            .arg("m:leased")
            .query::<bool>(&mut raw)
            .unwrap()
    }));
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert_eq!(client.metrics().lost_locks, 1);
    assert_eq!(client.metrics().renewals, 0);
}

#[test]
fn pubsub_reconnects_are_counted() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let channel = "redisson_lock__channel:{m:reconnect}";
    let guard = holder.lock("m:reconnect").lock().unwrap();
    let lock = client.lock("m:reconnect");
    let waiter = std::thread::spawn(move || drop(lock.lock().unwrap()));
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    assert_eq!(client.metrics().pubsub_reconnects, 0);
    assert_eq!(kill_pubsub_connections(&mut raw), 1);
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    assert_eq!(client.metrics().pubsub_reconnects, 1);
    drop(guard);
    waiter.join().unwrap();
    assert_eq!(holder.metrics().pubsub_reconnects, 0);
}

#[test]
fn a_reentered_lock_lost_to_force_unlock_counts_once() {
    // Both holds share one lease: the first release that finds the lock gone latches the
    // loss for the other, which then does not unlock (or count) again.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let operator = Client::open(server.url()).unwrap();
    let lock = client.lock("m:reentered");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert!(operator.lock("m:reentered").force_unlock().unwrap());
    assert!(inner.unlock().unwrap_err().is_lock_lost());
    assert!(outer.is_lost(), "the outer hold knows at once");
    assert!(outer.unlock().unwrap_err().is_lock_lost());
    assert_eq!(client.metrics().lost_locks, 1);
}

#[test]
fn the_waiting_gauge_counts_threads_blocked_in_any_wait() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let guard = holder.lock("m:gauge").lock().unwrap();
    let sem = client.semaphore("m:gauge:sem");
    sem.try_set_permits(0).unwrap();
    let latch = client.count_down_latch("m:gauge:latch");
    latch.try_set_count(1).unwrap();
    assert_eq!(client.metrics().waiting, 0);
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let client = client.clone();
            std::thread::spawn(move || match i {
                0 => drop(client.lock("m:gauge").lock().unwrap()),
                1 => client
                    .semaphore("m:gauge:sem")
                    .acquire(1)
                    .forget_all()
                    .unwrap(),
                _ => client
                    .count_down_latch("m:gauge:latch")
                    .await_zero()
                    .unwrap(),
            })
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(5), || client.metrics().waiting == 3),
        "three threads wait: {}",
        client.metrics().waiting
    );
    assert_eq!(holder.metrics().waiting, 0, "per client");
    drop(guard);
    sem.release(1).unwrap();
    latch.count_down().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(client.metrics().waiting, 0, "all left");
}
