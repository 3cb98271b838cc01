//! `Client::close`: every waiter wakes with `Error::Closed`, the client's threads stop and its
//! connections close, held locks are reported lost (not released), and later calls fail.
//! One test in this file, so that the process's thread list is ours alone.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, LostReason};
use support::{client_list, redlatch_threads, wait_until, RedisServer};

#[test]
fn close_wakes_every_waiter_stops_threads_and_refuses_later_calls() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let baseline = client_list(&mut raw).len();
    let holder = redis::Client::open(server.url()).unwrap();
    let mut holder = holder.get_connection().unwrap();
    let client = Client::open(server.url()).unwrap();

    // Busy objects, held by "another client" written raw (it must not be closed with ours).
    for (key, field) in [("c:plain", "other:1"), ("c:fair", "other:1")] {
        redis::cmd("HSET")
            .arg(key)
            .arg(field)
            .arg(1)
            .query::<()>(&mut holder)
            .unwrap();
        redis::cmd("PEXPIRE")
            .arg(key)
            .arg(60_000)
            .query::<()>(&mut holder)
            .unwrap();
    }
    client.semaphore("c:sem").try_set_permits(0).unwrap();
    client.count_down_latch("c:latch").try_set_count(1).unwrap();

    // A hold of ours, with a loss callback.
    let guard = client.lock("c:held").lock().unwrap();
    let (lost_tx, lost_rx) = mpsc::channel();
    guard.on_lost(move |reason| lost_tx.send(reason).unwrap());

    let waiters: Vec<thread::JoinHandle<(redlatch::Error, Instant)>> = (0..4)
        .map(|i| {
            let client = client.clone();
            thread::spawn(move || {
                let err = match i {
                    0 => client.lock("c:plain").lock().map(drop).unwrap_err(),
                    1 => client.fair_lock("c:fair").lock().map(drop).unwrap_err(),
                    2 => client.semaphore("c:sem").acquire(1).unwrap_err(),
                    _ => client.count_down_latch("c:latch").await_zero().unwrap_err(),
                };
                (err, Instant::now())
            })
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(10), || client.metrics().waiting == 4),
        "4 waiting: {}",
        client.metrics().waiting
    );
    let queue: i64 = redis::cmd("LLEN")
        .arg("redisson_lock_queue:{c:fair}")
        .query(&mut raw)
        .unwrap();
    assert_eq!(queue, 1, "the fair waiter is queued");

    let asked = Instant::now();
    client.close();
    let mut slowest = Duration::ZERO;
    for (i, w) in waiters.into_iter().enumerate() {
        let (err, at) = w.join().unwrap();
        assert!(err.is_closed(), "waiter {i}: {err:?}");
        let took = at.saturating_duration_since(asked);
        assert!(
            took < Duration::from_millis(500),
            "waiter {i} took {took:?}"
        );
        slowest = slowest.max(took);
    }
    eprintln!("close to the last waiter's return: {slowest:?}");
    assert_eq!(client.metrics().waiting, 0);
    let queue: i64 = redis::cmd("LLEN")
        .arg("redisson_lock_queue:{c:fair}")
        .query(&mut raw)
        .unwrap();
    assert_eq!(
        queue, 0,
        "the fair waiter left the queue before the connections closed"
    );

    // The held lock is reported lost at once, and stays held in Redis until its lease ends.
    assert_eq!(
        lost_rx.recv_timeout(Duration::from_secs(1)).unwrap(),
        LostReason::ClientClosed
    );
    assert!(guard.is_lost());
    let ttl: i64 = redis::cmd("PTTL").arg("c:held").query(&mut raw).unwrap();
    assert!(ttl > 0, "not released: PTTL {ttl}");
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    let ttl: i64 = redis::cmd("PTTL").arg("c:held").query(&mut raw).unwrap();
    assert!(ttl > 0, "the guard's release sent nothing: PTTL {ttl}");

    // Every later call fails, and close is idempotent.
    assert!(client.lock("c:new").lock().unwrap_err().is_closed());
    assert!(client.lock("c:new").try_lock().unwrap_err().is_closed());
    assert!(client
        .semaphore("c:sem")
        .release(1)
        .unwrap_err()
        .is_closed());
    assert!(client.inspect("c:held").unwrap_err().is_closed());
    client.close();

    // Threads stop and connections close, though the client itself is still alive.
    assert!(
        wait_until(Duration::from_millis(500), || redlatch_threads() == 0),
        "threads left: {}",
        redlatch_threads()
    );
    assert!(
        wait_until(Duration::from_secs(5), || client_list(&mut raw).len()
            <= baseline + 1),
        "connections left: {:?}",
        client_list(&mut raw)
    );
}
