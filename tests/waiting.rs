//! Waiting by pub/sub: prompt wake-ups, no commands while waiting, bounded and clean timeouts.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config};
use support::{assert_quiet_for, await_waiting, numsub, wait_until, RedisServer};

/// Subscriptions of every client connection (the `sub=` field of CLIENT LIST).
fn total_subscriptions(conn: &mut redis::Connection) -> i64 {
    support::client_list(conn)
        .iter()
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("sub=")))
        .map(|n| n.parse::<i64>().unwrap())
        .sum()
}

#[test]
fn waiter_of_another_client_acquires_within_50ms_of_unlock_and_sends_nothing_while_waiting() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let waiter_client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    // The holder's pub/sub connection up before it holds anything: one that connects late
    // checks the holds taken before it at once (a renewal inside the quiet window below).
    let warm = waiter_client.lock("wait:warm").lock().unwrap();
    let holder_waits = {
        let lock = holder.lock("wait:warm");
        std::thread::spawn(move || drop(lock.lock().unwrap()))
    };
    assert!(wait_until(Duration::from_secs(20), || numsub(
        &mut raw,
        "redisson_lock__channel:{wait:warm}"
    ) == 1));
    drop(warm);
    holder_waits.join().unwrap();
    let channel = "redisson_lock__channel:{wait:x}";
    let mut latencies = Vec::new();
    for round in 0..5 {
        let guard = holder.lock("wait:x").lock().unwrap();
        let lock = waiter_client.lock("wait:x");
        let waiter = std::thread::spawn(move || {
            let g = lock.lock().unwrap();
            let at = Instant::now();
            drop(g);
            at
        });
        assert!(wait_until(Duration::from_secs(5), || numsub(
            &mut raw, channel
        ) == 1));
        await_waiting(&waiter_client, 1); // it tried, then re-checked once subscribed
        if round == 0 {
            // Subscribed and blocked: for a second, nothing but our own INFO calls may arrive.
            assert_quiet_for(&mut raw, Duration::from_secs(1), "while waiting");
        }
        let released_at = Instant::now();
        drop(guard);
        latencies.push(waiter.join().unwrap() - released_at);
    }
    latencies.sort();
    assert!(latencies[2] < Duration::from_millis(50), "{latencies:?}");
    assert!(latencies[4] < Duration::from_millis(500), "{latencies:?}");
}

#[test]
fn try_lock_for_gives_up_in_time_and_leaves_nothing_behind() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let _guard = holder.lock("wait:timeout").lock().unwrap();
    let lock = client.lock("wait:timeout");
    let mut raw = server.conn();
    for wait_ms in [50u64, 300] {
        let lock = lock.clone();
        let (got, took) = std::thread::spawn(move || {
            let started = Instant::now();
            let g = lock.try_lock_for(Duration::from_millis(wait_ms)).unwrap();
            (g.is_some(), started.elapsed())
        })
        .join()
        .unwrap();
        assert!(!got);
        let wait = Duration::from_millis(wait_ms);
        assert!(
            took >= wait && took <= wait + Duration::from_millis(100),
            "{took:?}"
        );
        // No subscription left on the server (the dispatcher unsubscribed with its last waiter).
        assert!(wait_until(Duration::from_secs(2), || total_subscriptions(
            &mut raw
        ) == 0));
        assert_eq!(numsub(&mut raw, "redisson_lock__channel:{wait:timeout}"), 0);
    }
    // The holder is untouched and only the locks' own keys exist.
    assert_eq!(holder.lock("wait:timeout").hold_count().unwrap(), 1);
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys, vec!["wait:timeout".to_owned()]);
}

#[test]
fn each_unlock_wakes_one_waiter_and_all_get_their_turn_without_waiting_a_lease() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let holder = Client::open(server.url()).unwrap();
    let guard = holder.lock("wait:many").lock().unwrap();
    let mut raw = server.conn();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..10)
        .map(|i| {
            let lock = client.lock("wait:many");
            let order = Arc::clone(&order);
            std::thread::spawn(move || {
                let g = lock.lock().unwrap();
                order.lock().push(i);
                std::thread::sleep(Duration::from_millis(2));
                drop(g);
            })
        })
        .collect();
    // All ten block; the one client subscribes once.
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_lock__channel:{wait:many}"
    ) == 1));
    await_waiting(&client, 10);
    let released = Instant::now();
    drop(guard);
    for t in threads {
        t.join().unwrap();
    }
    // The lease is 30 s: finishing fast proves nobody waited out a lease.
    assert!(
        released.elapsed() < Duration::from_secs(3),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(order.lock().len(), 10);
    assert!(wait_until(Duration::from_secs(2), || total_subscriptions(
        &mut raw
    ) == 0));
}

#[test]
fn a_missed_message_costs_at_most_the_lease() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    // A foreign holder whose lease runs out without any unlock message.
    let _: () = raw.hset("wait:silent", "someone:1", 1).unwrap();
    let _: () = raw.pexpire("wait:silent", 400).unwrap();
    let started = Instant::now();
    let guard = client.lock("wait:silent").lock().unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1000),
        "{took:?}"
    );
    drop(guard);
}

#[test]
fn waiters_in_two_clients_are_each_woken() {
    let server = RedisServer::new();
    let config = |url: &str| Config::builder(url).build().unwrap();
    let a = Client::new(config(&server.url())).unwrap();
    let b = Client::new(config(&server.url())).unwrap();
    let holder = Client::open(server.url()).unwrap();
    let guard = holder.lock("wait:two").lock().unwrap();
    let mut raw = server.conn();
    let spawn = |c: &Client| {
        let lock = c.lock("wait:two");
        std::thread::spawn(move || drop(lock.lock().unwrap()))
    };
    let (ta, tb) = (spawn(&a), spawn(&b));
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_lock__channel:{wait:two}"
    ) == 2));
    await_waiting(&a, 1);
    await_waiting(&b, 1);
    let released = Instant::now();
    drop(guard);
    ta.join().unwrap();
    tb.join().unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
}
