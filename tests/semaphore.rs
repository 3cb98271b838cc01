//! Semaphore: permits, waking as many waiters as the permits allow, guards, no ownership.

mod support;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver};
use redis::Commands;
use redlatch::Client;
use support::{await_waiting, count_commands, numsub, wait_until, RedisServer};

fn clients(server: &RedisServer, n: usize) -> Vec<Client> {
    (0..n)
        .map(|_| Client::open(&server.url()).unwrap())
        .collect()
}

/// Spawns a thread per `(client, need)` that acquires `need` permits of `name`, reports
/// `(index, when)` on the returned channel, holds them until `hold` is signalled (or at once
/// when `hold` is `None`), and releases.
fn spawn_waiters(
    clients: &[Client],
    needs: &[u32],
    name: &str,
    hold: Option<Receiver<()>>,
) -> (Vec<JoinHandle<()>>, Receiver<(usize, Instant)>) {
    let (tx, rx) = unbounded();
    let threads = needs
        .iter()
        .enumerate()
        .map(|(i, &need)| {
            let sem = clients[i % clients.len()].semaphore(name);
            let (tx, hold) = (tx.clone(), hold.clone());
            std::thread::spawn(move || {
                sem.acquire(need).unwrap();
                tx.send((i, Instant::now())).unwrap();
                if let Some(hold) = hold {
                    let _ = hold.recv();
                }
                sem.release(need).unwrap();
            })
        })
        .collect();
    (threads, rx)
}

#[test]
fn permits_are_set_once_added_taken_and_kept_in_one_string_key() {
    let server = RedisServer::new();
    let c = &clients(&server, 2);
    let (a, b) = (c[0].semaphore("sem:basic"), c[1].semaphore("sem:basic"));
    let mut raw = server.conn();
    assert_eq!(a.available_permits().unwrap(), 0);
    assert!(a.try_set_permits(5).unwrap());
    assert!(!b.try_set_permits(9).unwrap(), "set only once");
    assert_eq!(b.available_permits().unwrap(), 5);
    assert!(a.try_acquire(3).unwrap());
    assert!(!b.try_acquire(3).unwrap(), "only 2 left");
    assert!(b.try_acquire(2).unwrap());
    assert_eq!(a.available_permits().unwrap(), 0);
    // No ownership: b gives back what a took.
    assert_eq!(b.release(3).unwrap(), 3);
    assert_eq!(a.add_permits(-4).unwrap(), -1);
    assert!(!a.try_acquire(1).unwrap());
    assert_eq!(a.add_permits(6).unwrap(), 5);
    // The raw layout: one STRING under the name, no expiry, nothing else.
    let value: String = raw.get("sem:basic").unwrap();
    assert_eq!(value, "5");
    let ttl: i64 = raw.pttl("sem:basic").unwrap();
    assert_eq!(ttl, -1);
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys, vec!["sem:basic".to_owned()]);
}

#[test]
fn a_release_wakes_as_many_waiters_as_its_permits_allow_and_no_more() {
    let server = RedisServer::new();
    let c = clients(&server, 2);
    let mut raw = server.conn();
    let (hold_tx, hold_rx) = unbounded::<()>();
    let (threads, got) = spawn_waiters(&c, &[1; 6], "sem:wake", Some(hold_rx));
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_sc:{sem:wake}"
    ) == 2));
    // Each tried, re-checked once subscribed, and blocks: nothing but our own INFO calls
    // reaches the server.
    await_waiting(&c[0], 3);
    await_waiting(&c[1], 3);
    let before = count_commands(&mut raw);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        count_commands(&mut raw) - before,
        1,
        "commands while waiting"
    );

    let released = Instant::now();
    assert_eq!(c[0].semaphore("sem:wake").release(3).unwrap(), 3);
    let mut latencies: Vec<Duration> = (0..3)
        .map(|_| got.recv_timeout(Duration::from_secs(5)).unwrap().1 - released)
        .collect();
    latencies.sort();
    // Exactly three: the others stay blocked while no permit is free.
    assert!(got.recv_timeout(Duration::from_millis(300)).is_err());
    assert_eq!(c[1].semaphore("sem:wake").available_permits().unwrap(), 0);
    assert!(latencies[2] < Duration::from_millis(50), "{latencies:?}");

    // The three holders release: their permits reach the other three.
    for _ in 0..3 {
        hold_tx.send(()).unwrap();
    }
    for _ in 0..3 {
        got.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    drop(hold_tx);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(c[0].semaphore("sem:wake").available_permits().unwrap(), 3);
}

#[test]
fn small_needs_pass_a_large_one_and_the_large_one_gets_through_later() {
    // Regression guard for lost wake-ups with mixed needs: a waiter needing more than is free
    // must not swallow the wake-up of one that fits.
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let (hold_tx, hold_rx) = unbounded::<()>();
    let (big, big_got) = spawn_waiters(&c, &[3], "sem:mixed", None);
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_sc:{sem:mixed}"
    ) == 1));
    await_waiting(&c[0], 1); // the big one waits first
    let (small, small_got) = spawn_waiters(&c, &[1, 1], "sem:mixed", Some(hold_rx));
    await_waiting(&c[0], 3);
    let sem = c[0].semaphore("sem:mixed");
    sem.release(1).unwrap();
    small_got.recv_timeout(Duration::from_secs(2)).unwrap();
    sem.release(1).unwrap();
    small_got.recv_timeout(Duration::from_secs(2)).unwrap();
    assert!(big_got.try_recv().is_err(), "3 permits were never free");
    // The small ones give back 2, a third one arrives: now the big one fits.
    hold_tx.send(()).unwrap();
    hold_tx.send(()).unwrap();
    for t in small {
        t.join().unwrap();
    }
    sem.release(1).unwrap();
    big_got.recv_timeout(Duration::from_secs(2)).unwrap();
    for t in big {
        t.join().unwrap();
    }
    assert_eq!(sem.available_permits().unwrap(), 3);
}

#[test]
fn contended_permits_are_never_over_granted_and_every_waiter_finishes() {
    // Mixed needs over three clients: a lost wake-up leaves a thread blocked for good (no
    // lease bounds a semaphore wait), so finishing at all is the assertion that matters.
    let server = RedisServer::new();
    let c = clients(&server, 3);
    let sem = c[0].semaphore("sem:stress");
    assert!(sem.try_set_permits(4).unwrap());
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..18)
        .map(|i| {
            let sem = c[i % 3].semaphore("sem:stress");
            let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
            std::thread::spawn(move || {
                for round in 0..15 {
                    let need = 1 + ((i + round) % 3) as u32;
                    let permit = sem.acquire_guard(need).unwrap();
                    let n = i64::from(need);
                    most.fetch_max(inside.fetch_add(n, Ordering::SeqCst) + n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200 * (1 + (i as u64 % 4))));
                    inside.fetch_sub(n, Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        most.load(Ordering::SeqCst) <= 4,
        "more permits in use than exist"
    );
    assert_eq!(sem.available_permits().unwrap(), 4);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn guard_releases_on_drop_even_on_another_thread_and_forget_keeps_the_permits() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let sem = c[0].semaphore("sem:guard");
    sem.try_set_permits(2).unwrap();
    let permit = sem.acquire_guard(2).unwrap();
    assert_eq!(permit.permits(), 2);
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert!(sem.try_acquire_guard(1).unwrap().is_none());
    std::thread::spawn(move || drop(permit)).join().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);
    sem.try_acquire_guard(1).unwrap().unwrap().forget();
    assert_eq!(sem.available_permits().unwrap(), 1);
    sem.acquire_guard(1).unwrap().release().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 1);
}

#[test]
fn try_acquire_for_gives_up_in_time_and_leaves_no_subscription() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let sem = c[0].semaphore("sem:timeout");
    sem.try_set_permits(1).unwrap();
    let started = Instant::now();
    assert!(!sem.try_acquire_for(2, Duration::from_millis(200)).unwrap());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(400),
        "{took:?}"
    );
    assert!(sem
        .try_acquire_guard_for(1, Duration::from_millis(50))
        .unwrap()
        .is_some());
    assert_eq!(numsub(&mut raw, "redisson_sc:{sem:timeout}"), 0);
    assert_eq!(sem.available_permits().unwrap(), 1);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let empty = c[0].semaphore("");
    assert!(empty.try_set_permits(1).unwrap_err().is_invalid_argument());
    assert!(empty.acquire(1).unwrap_err().is_invalid_argument());
    assert!(empty.available_permits().unwrap_err().is_invalid_argument());
    let sem = c[0].semaphore("sem:bad");
    assert!(sem.acquire(0).unwrap_err().is_invalid_argument());
    assert!(sem.try_acquire(0).unwrap_err().is_invalid_argument());
    assert!(sem.release(0).unwrap_err().is_invalid_argument());
    assert!(sem
        .try_acquire_for(1, Duration::ZERO)
        .unwrap_err()
        .is_invalid_argument());
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");

    // A hash, and a string that is not a number, under the name.
    let _: () = raw.hset("sem:bad", "f", "v").unwrap();
    let _: () = raw.set("sem:text", "many").unwrap();
    for name in ["sem:bad", "sem:text"] {
        let sem = c[0].semaphore(name);
        let check = |e: redlatch::Error| assert!(e.is_wrong_type(), "{name}: {e:?}");
        check(sem.try_acquire(1).unwrap_err());
        check(sem.acquire(1).unwrap_err());
        check(sem.release(1).unwrap_err());
        check(sem.add_permits(-1).unwrap_err());
        check(sem.available_permits().unwrap_err());
        if name == "sem:bad" {
            check(sem.try_set_permits(1).unwrap_err());
        } else {
            assert!(!sem.try_set_permits(1).unwrap(), "exists already");
        }
    }
    let hash: Vec<(String, String)> = raw.hgetall("sem:bad").unwrap();
    assert_eq!(hash, vec![("f".to_owned(), "v".to_owned())]);
    let text: String = raw.get("sem:text").unwrap();
    assert_eq!(text, "many");
}

#[test]
fn redisson_style_release_wakes_us_and_our_release_publishes_the_count() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let (threads, got) = spawn_waiters(&c, &[2], "sem:interop", None);
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_sc:{sem:interop}"
    ) == 1));
    await_waiting(&c[0], 1); // it re-checked and blocks

    // What Redisson's release script does: INCRBY, then publish the new count.
    let count: i64 = raw.incr("sem:interop", 2).unwrap();
    let _: () = raw.publish("redisson_sc:{sem:interop}", count).unwrap();
    got.recv_timeout(Duration::from_secs(2)).unwrap();
    for t in threads {
        t.join().unwrap();
    }

    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("redisson_sc:{sem:interop}").unwrap();
    c[0].semaphore("sem:interop").release(3).unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_sc:{sem:interop}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "5");
}
