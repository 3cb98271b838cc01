//! Dropping the last clone of a client stops its threads and closes its connections.
//! One test in this file, so that the process's thread list is ours alone.

mod support;

use std::time::Duration;

use redlatch::Client;
use support::{client_list, redlatch_threads, wait_until, RedisServer};

#[test]
fn last_clone_dropped_stops_threads_and_closes_connections() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let baseline = client_list(&mut raw).len();
    assert_eq!(redlatch_threads(), 0);

    let client = Client::open(server.url()).unwrap();
    let clone = client.clone();
    let lock = clone.lock("drop:me");
    // Use the pool from several threads, and the pub/sub connection through a waiter.
    let holder = lock.lock().unwrap();
    let waiter = {
        let lock = lock.clone();
        std::thread::spawn(move || drop(lock.lock().unwrap()))
    };
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let c = client.clone();
            std::thread::spawn(move || drop(c.lock(format!("drop:{i}")).lock().unwrap()))
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert!(wait_until(Duration::from_secs(5), || {
        client_list(&mut raw).iter().any(|l| l.contains("sub=1"))
    }));
    drop(holder);
    waiter.join().unwrap();
    assert_eq!(redlatch_threads(), 2, "one pub/sub and one watchdog thread");
    let during = client_list(&mut raw).len();
    assert!(
        during > baseline + 1,
        "pool and pub/sub connections are open"
    );
    assert!(during <= baseline + 16 + 1, "at most pool size + 1");

    drop(client);
    assert_eq!(
        redlatch_threads(),
        2,
        "a clone (inside the lock) keeps the client alive"
    );
    drop(clone);
    drop(lock);
    // `join` returns when the thread has finished, but the kernel lists it in
    // /proc/self/task until it is reaped, a moment later: wait briefly for that. A detached
    // thread would outlive this bound (it ends only after a connect timeout or never).
    assert!(
        wait_until(Duration::from_millis(500), || redlatch_threads() == 0),
        "threads are joined when the last clone drops: {} left",
        redlatch_threads()
    );
    assert!(
        wait_until(Duration::from_secs(5), || client_list(&mut raw).len()
            == baseline),
        "connections left: {:?}",
        client_list(&mut raw)
    );
}
