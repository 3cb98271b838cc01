//! Semaphore: permits, waking as many waiters as the permits allow, guards, no ownership.

mod support;

use support::forget::ForgetAll;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver};
use redis::Commands;
use redlatch::Client;
use support::{assert_quiet_for, await_waiting, numsub, wait_until, RedisServer};

fn clients(server: &RedisServer, n: usize) -> Vec<Client> {
    (0..n).map(|_| support::client(server)).collect()
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
                sem.acquire(need).forget_all().unwrap();
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
    assert!(a.try_acquire(3).forget_all().unwrap());
    assert!(!b.try_acquire(3).forget_all().unwrap(), "only 2 left");
    assert!(b.try_acquire(2).forget_all().unwrap());
    assert_eq!(a.available_permits().unwrap(), 0);
    // No ownership: b gives back what a took.
    assert_eq!(b.release(3).unwrap(), 3);
    assert_eq!(a.add_permits(-4).unwrap(), -1);
    assert!(!a.try_acquire(1).forget_all().unwrap());
    assert_eq!(a.add_permits(6).unwrap(), 5);
    // The raw layout: one STRING under the name, no expiry; beside it its generation (ours:
    // a STRING, no expiry either) and the short-lived receipts of acquires (deleted 16 to a
    // later write, else expiring).
    let value: String = raw.get("sem:basic").unwrap();
    assert_eq!(value, "5");
    let ttl: i64 = raw.pttl("sem:basic").unwrap();
    assert_eq!(ttl, -1);
    let mut keys: Vec<String> = raw.keys("*").unwrap();
    keys.retain(|k| {
        let receipt = k.starts_with("redisson_unlock_latch:{sem:basic}:");
        assert!(
            !receipt || raw.pttl::<_, i64>(k).unwrap() > 0,
            "{k} expires"
        );
        !receipt
    });
    keys.sort();
    assert_eq!(keys, ["redlatch_semaphore:{sem:basic}", "sem:basic"]);
    let ttl: i64 = raw.pttl("redlatch_semaphore:{sem:basic}").unwrap();
    assert_eq!(ttl, -1);
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
    assert_quiet_for(&mut raw, Duration::from_millis(500), "while waiting");

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
    // Mixed needs: a waiter needing more than is free does not swallow the wake-up of one that
    // fits, and gets through itself once enough is free.
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
                    let permit = sem.acquire(need).unwrap();
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
    let permit = sem.acquire(2).unwrap();
    assert_eq!(permit.permits(), 2);
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert!(sem.try_acquire(1).unwrap().is_none());
    std::thread::spawn(move || drop(permit)).join().unwrap();
    assert_eq!(sem.available_permits().unwrap(), 2);
    sem.try_acquire(1).unwrap().unwrap().forget();
    assert_eq!(sem.available_permits().unwrap(), 1);
    sem.acquire(1).unwrap().release().unwrap();
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
    assert!(!sem
        .try_acquire_for(2, Duration::from_millis(200))
        .forget_all()
        .unwrap());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(400),
        "{took:?}"
    );
    assert!(sem
        .try_acquire_for(1, Duration::from_millis(50))
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
    assert!(empty
        .acquire(1)
        .forget_all()
        .unwrap_err()
        .is_invalid_argument());
    assert!(empty.available_permits().unwrap_err().is_invalid_argument());
    let sem = c[0].semaphore("sem:bad");
    assert!(sem
        .acquire(0)
        .forget_all()
        .unwrap_err()
        .is_invalid_argument());
    assert!(sem
        .try_acquire(0)
        .forget_all()
        .unwrap_err()
        .is_invalid_argument());
    assert!(sem.release(0).unwrap_err().is_invalid_argument());
    // A zero wait is one try: no permits were set, and it writes nothing.
    assert!(sem.try_acquire_for(1, Duration::ZERO).unwrap().is_none());
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");

    // A hash, and a string that is not a number, under the name.
    let _: () = raw.hset("sem:bad", "f", "v").unwrap();
    let _: () = raw.set("sem:text", "many").unwrap();
    for name in ["sem:bad", "sem:text"] {
        let sem = c[0].semaphore(name);
        let check = |e: redlatch::Error| assert!(e.is_wrong_type(), "{name}: {e:?}");
        check(sem.try_acquire(1).forget_all().unwrap_err());
        check(sem.acquire(1).forget_all().unwrap_err());
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

/// Subscribes `conn` to the semaphore channel of `name` (until the returned value drops).
fn listen<'a>(conn: &'a mut redis::Connection, name: &str) -> redis::PubSub<'a> {
    let mut sub = conn.as_pubsub();
    sub.subscribe(format!("redisson_sc:{{{name}}}")).unwrap();
    sub
}

/// The next message on a [`listen`] subscription, if one comes within `within`.
fn next_message(sub: &mut redis::PubSub<'_>, within: Duration) -> Option<String> {
    sub.set_read_timeout(Some(within)).unwrap();
    sub.get_message().ok().map(|m| m.get_payload().unwrap())
}

#[test]
fn drain_takes_every_permit_leaves_zero_and_publishes_nothing() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let sem = c[0].semaphore("sem:drain");
    assert_eq!(sem.drain_permits().unwrap(), 0, "absent: nothing to take");
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "drain of nothing writes nothing: {keys:?}");

    assert!(sem
        .try_set_permits_with_expiry(5, Duration::from_secs(60))
        .unwrap());
    let mut sub_conn = server.conn();
    let mut sub = listen(&mut sub_conn, "sem:drain");
    assert_eq!(sem.drain_permits().unwrap(), 5);
    let value: String = raw.get("sem:drain").unwrap();
    assert_eq!(value, "0");
    let ttl: i64 = raw.pttl("sem:drain").unwrap();
    assert!(ttl > 50_000, "the expiry is kept: {ttl}");
    assert!(!sem.try_acquire(1).forget_all().unwrap());
    assert_eq!(sem.drain_permits().unwrap(), 0);
    // A negative count is raised to 0 and returned, as java.util.concurrent's drainPermits.
    assert_eq!(sem.add_permits(-3).unwrap(), -3);
    assert_eq!(sem.drain_permits().unwrap(), -3);
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert_eq!(
        next_message(&mut sub, Duration::from_millis(200)),
        Some("-3".to_owned()),
        "only add_permits published: drain sends nothing"
    );
    assert_eq!(next_message(&mut sub, Duration::from_millis(200)), None);
}

#[test]
fn set_permits_overwrites_publishes_the_count_and_wakes_the_waiters_it_serves() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let sem = c[0].semaphore("sem:set");
    sem.set_permits(2).unwrap(); // creates
    assert_eq!(sem.available_permits().unwrap(), 2);
    sem.set_permits(0).unwrap(); // lowers
    assert_eq!(sem.available_permits().unwrap(), 0);

    let (hold_tx, hold_rx) = unbounded::<()>();
    let (threads, got) = spawn_waiters(&c, &[1; 4], "sem:set", Some(hold_rx));
    await_waiting(&c[0], 4);
    let mut sub_conn = server.conn();
    let mut sub = listen(&mut sub_conn, "sem:set");
    sem.set_permits(3).unwrap();
    assert_eq!(
        next_message(&mut sub, Duration::from_secs(2)),
        Some("3".to_owned())
    );
    // 3 permits: exactly three waiters get one each, the fourth stays blocked.
    for _ in 0..3 {
        got.recv_timeout(Duration::from_secs(2)).unwrap();
    }
    assert!(got.recv_timeout(Duration::from_millis(300)).is_err());
    assert_eq!(sem.available_permits().unwrap(), 0);
    await_waiting(&c[0], 1);
    // Overwriting ignores the permits held: their releases add to the new count.
    sem.set_permits(2).unwrap();
    got.recv_timeout(Duration::from_secs(2)).unwrap();
    for _ in 0..4 {
        hold_tx.send(()).unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(sem.available_permits().unwrap(), 5);
    let value: String = raw.get("sem:set").unwrap();
    assert_eq!(value, "5");
    let ttl: i64 = raw.pttl("sem:set").unwrap();
    assert_eq!(ttl, -1);
}

#[test]
fn set_permits_keeps_an_expiry_and_try_set_with_expiry_sets_a_pttl_once() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let sem = c[0].semaphore("sem:ttl");
    let mut sub_conn = server.conn();
    let mut sub = listen(&mut sub_conn, "sem:ttl");
    assert!(sem
        .try_set_permits_with_expiry(4, Duration::from_secs(30))
        .unwrap());
    assert_eq!(
        next_message(&mut sub, Duration::from_secs(2)),
        Some("4".to_owned())
    );
    let ttl: i64 = raw.pttl("sem:ttl").unwrap();
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
    // Refused once set, with or without expiry: the count and the expiry stay.
    assert!(!sem
        .try_set_permits_with_expiry(9, Duration::from_secs(1000))
        .unwrap());
    assert!(!sem.try_set_permits(9).unwrap());
    assert_eq!(next_message(&mut sub, Duration::from_millis(200)), None);
    assert_eq!(sem.available_permits().unwrap(), 4);
    let ttl: i64 = raw.pttl("sem:ttl").unwrap();
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
    sem.set_permits(7).unwrap();
    let ttl: i64 = raw.pttl("sem:ttl").unwrap();
    assert!(ttl > 25_000 && ttl <= 30_000, "set keeps the expiry: {ttl}");

    // A short expiry runs out: the semaphore is gone and may be set again.
    let short = c[0].semaphore("sem:short");
    assert!(short
        .try_set_permits_with_expiry(1, Duration::from_micros(1500))
        .unwrap());
    let ttl: i64 = raw.pttl("sem:short").unwrap();
    assert!((0..=2).contains(&ttl), "rounded up to 2 ms: {ttl}");
    assert!(wait_until(Duration::from_secs(2), || !raw
        .exists::<_, bool>("sem:short")
        .unwrap()));
    assert_eq!(short.available_permits().unwrap(), 0);
    assert!(short.try_set_permits(3).unwrap());
}

#[test]
fn try_acquire_until_gets_permits_in_time_or_gives_up_at_the_deadline() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let sem = c[0].semaphore("sem:until");
    sem.set_permits(2).unwrap();
    let guard = sem
        .try_acquire_until(2, Instant::now() + Duration::from_millis(100))
        .unwrap()
        .expect("free permits are taken at once");
    assert_eq!(guard.permits(), 2);
    // A deadline already past makes one attempt.
    assert!(sem
        .try_acquire_until(1, Instant::now() - Duration::from_secs(1))
        .unwrap()
        .is_none());
    let started = Instant::now();
    assert!(sem
        .try_acquire_until(1, started + Duration::from_millis(200))
        .unwrap()
        .is_none());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(400),
        "{took:?}"
    );
    // Released while another waits: it gets them before its deadline.
    let waiter = {
        let sem = sem.clone();
        std::thread::spawn(move || {
            sem.try_acquire_until(2, Instant::now() + Duration::from_secs(5))
                .unwrap()
                .map(|g| g.permits())
        })
    };
    await_waiting(&c[0], 1);
    drop(guard);
    assert_eq!(waiter.join().unwrap(), Some(2));
    assert_eq!(sem.available_permits().unwrap(), 2);
    assert_eq!(numsub(&mut raw, "redisson_sc:{sem:until}"), 0);
}

#[test]
fn bad_input_to_the_new_calls_is_refused_and_writes_nothing() {
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let sem = c[0].semaphore("sem:bad-new");
    let soon = Instant::now() + Duration::from_secs(1);
    let invalid = |e: redlatch::Error| assert!(e.is_invalid_argument(), "{e:?}");
    invalid(sem.try_acquire_until(0, soon).unwrap_err());
    invalid(
        sem.try_acquire_until(1, Instant::now() + Duration::from_secs(400 * 24 * 3600))
            .unwrap_err(),
    );
    invalid(
        sem.try_set_permits_with_expiry(1, Duration::ZERO)
            .unwrap_err(),
    );
    invalid(
        sem.try_set_permits_with_expiry(1, Duration::from_secs(400 * 24 * 3600))
            .unwrap_err(),
    );
    let empty = c[0].semaphore("");
    invalid(empty.set_permits(1).unwrap_err());
    invalid(empty.drain_permits().unwrap_err());
    invalid(
        empty
            .try_set_permits_with_expiry(1, Duration::from_secs(1))
            .unwrap_err(),
    );
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");

    // Not a number under the name: refused, left as it was.
    let _: () = raw.hset("sem:hash", "f", "v").unwrap();
    let _: () = raw.set("sem:text", "many").unwrap();
    for name in ["sem:hash", "sem:text"] {
        let sem = c[0].semaphore(name);
        let check = |e: redlatch::Error| assert!(e.is_wrong_type(), "{name}: {e:?}");
        check(sem.set_permits(1).unwrap_err());
        check(sem.drain_permits().unwrap_err());
    }
    let hash: Vec<(String, String)> = raw.hgetall("sem:hash").unwrap();
    assert_eq!(hash, vec![("f".to_owned(), "v".to_owned())]);
    let text: String = raw.get("sem:text").unwrap();
    assert_eq!(text, "many");
}

#[test]
fn a_redisson_style_ttl_semaphore_is_read_and_a_set_wakes_a_redisson_style_waiter() {
    // Redisson's trySetPermits(permits, timeToLive): SET name permits PX ttl, PUBLISH permits.
    let server = RedisServer::new();
    let c = clients(&server, 1);
    let mut raw = server.conn();
    let _: () = redis::cmd("SET")
        .arg("sem:java")
        .arg(3)
        .arg("PX")
        .arg(60_000)
        .query(&mut raw)
        .unwrap();
    let sem = c[0].semaphore("sem:java");
    assert!(!sem
        .try_set_permits_with_expiry(5, Duration::from_secs(1))
        .unwrap());
    assert_eq!(sem.drain_permits().unwrap(), 3);
    // A Java waiter listens on redisson_sc:{name} and wakes for the published count.
    let mut sub_conn = server.conn();
    let mut sub = listen(&mut sub_conn, "sem:java");
    sem.set_permits(2).unwrap();
    assert_eq!(
        next_message(&mut sub, Duration::from_secs(2)),
        Some("2".to_owned())
    );
    // The drain's receipt goes with a later write, or expires.
    let keys: Vec<String> = raw.keys("*").unwrap();
    let left: Vec<&String> = keys
        .iter()
        .filter(|k| !k.starts_with("redisson_unlock_latch:"))
        .collect();
    assert_eq!(left, vec!["sem:java"], "{keys:?}");
}

#[test]
fn drain_and_set_refuse_a_value_decrby_would_not_take() {
    // Values Lua's `tonumber` takes but DECRBY refuses (`0x10`, `5.5`, `1e3`, ` 7`) are
    // refused with WRONGTYPE before anything is written, not left to fail in DECRBY with a
    // generic error.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let sem = client.semaphore("s:odd");
    for odd in ["0x10", "5.5", "1e3", " 7"] {
        let _: () = raw.set("s:odd", odd).unwrap();
        let err = sem.drain_permits().unwrap_err();
        assert!(
            matches!(err, redlatch::Error::WrongType { .. }),
            "{odd}: {err:?}"
        );
        let err = sem.set_permits(3).unwrap_err();
        assert!(
            matches!(err, redlatch::Error::WrongType { .. }),
            "{odd}: {err:?}"
        );
        let kept: String = raw.get("s:odd").unwrap();
        assert_eq!(kept, odd, "nothing written");
    }
    // An integer past 2^53 cannot be drained exactly (Lua numbers are doubles): refused too.
    let _: () = raw.set("s:odd", "9007199254740993").unwrap();
    let err = sem.drain_permits().unwrap_err();
    assert!(matches!(err, redlatch::Error::WrongType { .. }), "{err:?}");
    let kept: String = raw.get("s:odd").unwrap();
    assert_eq!(kept, "9007199254740993");
}

/// Permits taken before a data loss (here `FLUSHALL`, which no connection notices) are found
/// lost by the watchdog's check within a third of its timeout, and never go back into the
/// semaphore set up after it; a guard of the new generation is not lost and gives back. A
/// release of permits no guard here took (as Redisson's) names no generation and still adds.
/// A semaphore that expired and was set up again is a new generation too.
#[test]
fn permits_taken_before_a_data_loss_never_go_back_into_the_semaphore_made_after_it() {
    let server = RedisServer::new();
    let config = redlatch::Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let sem = client.semaphore("sem:loss");
    assert!(sem.try_set_permits(3).unwrap());
    let a = sem.acquire(2).unwrap();
    let b = sem.acquire(1).unwrap();
    let (tx, rx) = unbounded();
    a.on_lost(move |why| tx.send(why).unwrap());
    let mut raw = server.conn();
    let _: () = redis::cmd("FLUSHALL").query(&mut raw).unwrap();
    assert!(sem.try_set_permits(3).unwrap(), "made anew");
    let c = sem.acquire(1).unwrap();
    let why = rx.recv_timeout(Duration::from_secs(5)).expect("told");
    assert_eq!(why, redlatch::LostReason::NotHeld);
    assert!(a.is_lost());
    assert!(wait_until(Duration::from_secs(5), || b.is_lost()));
    assert!(!c.is_lost(), "of the new generation");
    assert!(a.release().unwrap_err().is_permits_lost());
    drop(b); // logged; nothing given back
    assert_eq!(sem.available_permits().unwrap(), 2);
    c.release().unwrap();
    assert_eq!(
        sem.available_permits().unwrap(),
        3,
        "what try_set_permits set"
    );
    assert_eq!(
        sem.release(1).unwrap(),
        4,
        "an unowned release adds, as Redisson's"
    );

    let expiring = client.semaphore("sem:expiring");
    assert!(expiring
        .try_set_permits_with_expiry(1, Duration::from_millis(300))
        .unwrap());
    let held = expiring.acquire(1).unwrap();
    let gen_ttl: i64 = raw.pttl("redlatch_semaphore:{sem:expiring}").unwrap();
    assert!(
        gen_ttl > 0 && gen_ttl <= 300,
        "expires with the count: {gen_ttl}"
    );
    assert!(wait_until(Duration::from_secs(5), || {
        !raw.exists::<_, bool>("redlatch_semaphore:{sem:expiring}")
            .unwrap()
    }));
    assert!(expiring.try_set_permits(1).unwrap());
    assert!(held.release().unwrap_err().is_permits_lost());
    assert_eq!(expiring.available_permits().unwrap(), 1);

    // Deleted: count and generation go; a guard still out is lost to the one set up again.
    let held = sem.acquire(1).unwrap();
    assert!(sem.delete().unwrap());
    assert!(!sem.delete().unwrap(), "gone already");
    let left: Vec<String> = raw.keys("*{sem:loss}*").unwrap();
    assert!(
        left.iter().all(|k| k.starts_with("redisson_unlock_latch:")),
        "{left:?}"
    );
    assert!(sem.try_set_permits(3).unwrap());
    assert!(held.release().unwrap_err().is_permits_lost());
    assert_eq!(sem.available_permits().unwrap(), 3);
}

#[test]
fn a_change_sent_again_after_its_reply_was_lost_changes_the_semaphore_once() {
    // What a call made again after an interrupted read (a process stopped and resumed)
    // relies on: its own generation or receipt makes the second delivery answer as the
    // first, and change nothing.
    let server = RedisServer::new();
    let mut raw = server.conn();
    let (name, channel, generation) = (
        "sem:again",
        "redisson_sc:{sem:again}",
        "redlatch_semaphore:{sem:again}",
    );
    let try_set = redis::Script::new(include_str!("../lua/semaphore_try_set_permits.lua"));
    let set = |raw: &mut redis::Connection, of: &str| -> i64 {
        try_set
            .key(name)
            .key(channel)
            .key(generation)
            .arg(3)
            .arg("PUBLISH")
            .arg(of)
            .invoke(raw)
            .unwrap()
    };
    assert_eq!(set(&mut raw, "c-1"), 1);
    assert_eq!(set(&mut raw, "c-1"), 1, "the same call, sent again");
    assert_eq!(set(&mut raw, "c-2"), 0, "another call");
    let add = redis::Script::new(include_str!("../lua/semaphore_add_permits.lua"));
    let added = |raw: &mut redis::Connection, receipt: &str| -> i64 {
        add.key(name)
            .key(channel)
            .key(receipt)
            .arg(2)
            .arg("PUBLISH")
            .arg(20_000)
            .invoke(raw)
            .unwrap()
    };
    let receipt = "redisson_unlock_latch:{sem:again}:c-3";
    assert_eq!(added(&mut raw, receipt), 5);
    assert_eq!(added(&mut raw, receipt), 5, "the same call, sent again");
    assert_eq!(raw.get::<_, i64>(name).unwrap(), 5);
    let drain = redis::Script::new(include_str!("../lua/semaphore_drain.lua"));
    let drained = |raw: &mut redis::Connection, receipt: &str| -> i64 {
        drain
            .key(name)
            .key(receipt)
            .arg(20_000)
            .invoke(raw)
            .unwrap()
    };
    let receipt = "redisson_unlock_latch:{sem:again}:c-4";
    assert_eq!(drained(&mut raw, receipt), 5);
    assert_eq!(added(&mut raw, "redisson_unlock_latch:{sem:again}:c-5"), 2);
    assert_eq!(drained(&mut raw, receipt), 5, "the same call, sent again");
    assert_eq!(raw.get::<_, i64>(name).unwrap(), 2, "drained once");
    let pttl: i64 = raw.pttl(receipt).unwrap();
    assert!(pttl > 0 && pttl <= 20_000, "the receipt expires: {pttl}");
}
