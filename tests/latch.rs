//! Count-down latch: counting across threads and clients, prompt wake-ups without commands
//! while waiting, Redisson's wire format, and rejected input that leaves Redis untouched.

mod support;

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, CountDownLatch, Error};
use support::{
    assert_quiet_for, client_list, command_calls, count_commands, numsub, wait_until, RedisServer,
};

/// Most a waiter may take to return after the count-down (or delete) that opens the latch.
const WAKE_BOUND: Duration = Duration::from_millis(50);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// Starts `n` threads blocked on `latch`, cycling through the three ways to wait; each
/// returns the instant its wait ended.
fn spawn_waiters(latch: &CountDownLatch, n: usize) -> Vec<JoinHandle<Instant>> {
    (0..n)
        .map(|i| {
            let latch = latch.clone();
            std::thread::spawn(move || {
                match i % 3 {
                    0 => latch.await_zero().unwrap(),
                    1 => assert!(latch.await_for(Duration::from_secs(10)).unwrap()),
                    _ => assert!(latch
                        .await_until(Instant::now() + Duration::from_secs(10))
                        .unwrap()),
                }
                Instant::now()
            })
        })
        .collect()
}

/// Waits until `waiters` threads of `clients` clients are blocked on `name`: each client has
/// subscribed once, and each waiter has made its two GETs (the check before subscribing and
/// the re-check after the confirmation). `gets_before` is the GET count before they started.
fn wait_blocked(
    raw: &mut redis::Connection,
    name: &str,
    clients: i64,
    waiters: u64,
    gets_before: u64,
) {
    let blocked = wait_until(Duration::from_secs(5), || {
        numsub(raw, &channel(name)) == clients
            && command_calls(raw, "get") == gets_before + 2 * waiters
    });
    assert!(
        blocked,
        "numsub {}, gets {} (expected {clients}, {})",
        numsub(raw, &channel(name)),
        command_calls(raw, "get") - gets_before,
        2 * waiters
    );
}

/// Milliseconds from `from` to each waiter's return, sorted; every waiter must return after it.
fn latencies_ms(waiters: Vec<JoinHandle<Instant>>, from: Instant) -> Vec<f64> {
    let mut ms: Vec<f64> = waiters
        .into_iter()
        .map(|t| {
            let at = t.join().unwrap();
            assert!(at >= from, "a waiter returned before the latch opened");
            (at - from).as_secs_f64() * 1000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms
}

/// `rdb_changes_since_last_save` from INFO persistence: goes up with every write.
fn writes(raw: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("persistence").query(raw).unwrap();
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn count_down_from_threads_of_two_clients_takes_each_step_once_and_deletes_the_key_at_zero() {
    let server = RedisServer::new();
    let clients = [
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    ];
    let latches = clients
        .each_ref()
        .map(|c| c.count_down_latch("latch:count"));
    let mut raw = server.conn();
    assert_eq!(latches[0].count().unwrap(), 0);
    assert!(latches[0].try_set_count(20).unwrap());
    assert_eq!(latches[1].count().unwrap(), 20);
    let value: String = raw.get("latch:count").unwrap();
    assert_eq!(value, "20");
    assert_eq!(raw.ttl::<_, i64>("latch:count").unwrap(), -1, "no expiry");

    // 2 clients x 3 threads x 3 count-downs: 18 steps, each count seen exactly once.
    let threads: Vec<_> = latches
        .iter()
        .flat_map(|latch| (0..3).map(move |_| latch.clone()))
        .map(|latch| {
            std::thread::spawn(move || {
                (0..3)
                    .map(|_| latch.count_down().unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seen: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    seen.sort();
    assert_eq!(seen, (2..20).collect::<Vec<u64>>());
    assert_eq!(latches[0].count().unwrap(), 2);
    assert_eq!(latches[1].count().unwrap(), 2);
    let value: String = raw.get("latch:count").unwrap();
    assert_eq!(value, "2");
    assert_eq!(raw.ttl::<_, i64>("latch:count").unwrap(), -1);

    assert_eq!(latches[1].count_down().unwrap(), 1);
    assert_eq!(latches[0].count_down().unwrap(), 0);
    assert!(
        !raw.exists::<_, bool>("latch:count").unwrap(),
        "key gone at zero"
    );
    assert_eq!(latches[1].count().unwrap(), 0);
    // Counting down an open latch changes nothing (Redisson would DECR to -1 and delete).
    assert_eq!(latches[1].count_down().unwrap(), 0);
    assert!(!raw.exists::<_, bool>("latch:count").unwrap());
    // The count-downs' receipts go with later writes, or expire.
    let keys: Vec<String> = raw.keys("*").unwrap();
    let left: Vec<&String> = keys
        .iter()
        .filter(|k| !k.starts_with("redisson_unlock_latch:"))
        .collect();
    assert!(left.is_empty(), "{keys:?}");
}

#[test]
fn waiters_of_two_clients_return_promptly_after_the_last_count_down_and_send_nothing_while_waiting()
{
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let (la, lb) = (
        a.count_down_latch("latch:wake"),
        b.count_down_latch("latch:wake"),
    );
    let mut raw = server.conn();
    assert!(la.try_set_count(3).unwrap());
    assert_eq!(lb.count_down().unwrap(), 2);

    let gets = command_calls(&mut raw, "get");
    let mut waiters = spawn_waiters(&la, 4);
    waiters.extend(spawn_waiters(&lb, 4));
    wait_blocked(&mut raw, "latch:wake", 2, 8, gets);

    // All blocked: for 500 ms nothing but our own INFO reaches the server.
    assert_quiet_for(&mut raw, Duration::from_millis(500), "while waiting");

    assert_eq!(la.count_down().unwrap(), 1); // publishes nothing: nobody wakes
    let last = Instant::now();
    assert_eq!(lb.count_down().unwrap(), 0);
    let ms = latencies_ms(waiters, last);
    eprintln!("wake-up latencies after the last count_down (ms): {ms:.2?}");
    assert!(
        ms[ms.len() - 1] <= WAKE_BOUND.as_secs_f64() * 1000.0,
        "{ms:?}"
    );
    assert!(wait_until(Duration::from_secs(2), || numsub(
        &mut raw,
        &channel("latch:wake")
    ) == 0));
}

#[test]
fn await_for_times_out_with_false_and_leaves_no_subscription() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let latch = client.count_down_latch("latch:timeout");
    let mut raw = server.conn();
    // An open latch: every wait returns true at once, without subscribing.
    assert!(latch.await_for(Duration::from_millis(1)).unwrap());
    latch.await_zero().unwrap();

    assert!(latch.try_set_count(1).unwrap());
    for wait_ms in [50u64, 200] {
        let started = Instant::now();
        assert!(!latch.await_for(Duration::from_millis(wait_ms)).unwrap());
        let took = started.elapsed();
        let wait = Duration::from_millis(wait_ms);
        assert!(
            took >= wait && took <= wait + Duration::from_millis(100),
            "{took:?}"
        );
        assert!(wait_until(Duration::from_secs(2), || numsub(
            &mut raw,
            &channel("latch:timeout")
        ) == 0));
    }
    // A deadline in the past checks once.
    assert!(!latch.await_until(Instant::now()).unwrap());
    assert_eq!(latch.count().unwrap(), 1);

    // A zero wait looks once.
    assert!(!latch.await_for(Duration::ZERO).unwrap());
    let year_and_more = Duration::from_secs(400 * 24 * 3600);
    assert!(latch
        .await_for(year_and_more)
        .unwrap_err()
        .is_invalid_argument());
    let far = Instant::now() + Duration::from_secs(400 * 24 * 3600);
    assert!(latch.await_until(far).unwrap_err().is_invalid_argument());
}

#[test]
fn redisson_style_count_down_wakes_our_waiters_and_ours_publishes_on_the_exact_channel() {
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    // A name with its own hash tag: the channel still wraps it in braces.
    let name = "{job:7}:done";
    let chan = "redisson_countdownlatch__channel__{{job:7}:done}";
    let mut raw = server.conn();

    // What a Redisson client sees of our calls: "1" on each new count, "0" on opening only.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut sub_conn = server.conn();
    let listener = std::thread::spawn(move || {
        let mut ps = sub_conn.as_pubsub();
        ps.subscribe(chan).unwrap();
        tx.send(()).unwrap();
        ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (0..4)
            .map(|_| {
                let msg = ps.get_message().unwrap();
                (
                    msg.get_channel_name().to_owned(),
                    msg.get_payload::<String>().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    });
    rx.recv().unwrap();
    let latch = a.count_down_latch(name);
    assert!(latch.try_set_count(2).unwrap()); // "1"
    assert_eq!(latch.count_down().unwrap(), 1); // nothing
    assert_eq!(latch.count_down().unwrap(), 0); // "0"
    assert_eq!(latch.count_down().unwrap(), 0); // no-op: nothing
    assert!(latch.try_set_count(1).unwrap()); // "1"
    assert!(latch.delete().unwrap()); // "0"
    let messages = listener.join().unwrap();
    let payloads: Vec<&str> = messages.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(payloads, ["1", "0", "1", "0"]);
    assert!(messages.iter().all(|(c, _)| c == chan), "{messages:?}");

    // Redisson's countDown on a plain connection (DECR, DEL at zero, PUBLISH 0) wakes ours.
    assert!(latch.try_set_count(1).unwrap());
    let gets = command_calls(&mut raw, "get");
    let mut waiters = spawn_waiters(&a.count_down_latch(name), 2);
    waiters.extend(spawn_waiters(&b.count_down_latch(name), 2));
    wait_blocked(&mut raw, name, 2, 4, gets);
    assert_eq!(raw.decr::<_, _, i64>(name, 1).unwrap(), 0);
    let _: i64 = raw.del(name).unwrap();
    // Without the message nothing re-checks: every waiter returns after the PUBLISH.
    let published = Instant::now();
    let receivers: i64 = raw.publish(chan, "0").unwrap();
    assert_eq!(receivers, 2, "one subscription per client");
    let ms = latencies_ms(waiters, published);
    eprintln!("wake-up latencies after a Redisson-style PUBLISH (ms): {ms:.2?}");
    assert!(
        ms[ms.len() - 1] <= WAKE_BOUND.as_secs_f64() * 1000.0,
        "{ms:?}"
    );
}

#[test]
fn bad_input_is_rejected_and_leaves_redis_unchanged() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    // The client sets its pub/sub connection up from a thread of its own (CLIENT SETNAME,
    // then SETINFO, in one write): wait until its name is set, so that none of it lands
    // between the two counts below.
    assert!(wait_until(Duration::from_secs(5), || client_list(&mut raw)
        .iter()
        .any(|line| line.contains(" name=redlatch:"))));

    // An empty name: rejected by every call before anything is sent.
    let empty = client.count_down_latch("");
    let before = count_commands(&mut raw);
    let secs = Duration::from_secs(1);
    assert!(empty.try_set_count(1).unwrap_err().is_invalid_argument());
    assert!(empty.count_down().unwrap_err().is_invalid_argument());
    assert!(empty.count().unwrap_err().is_invalid_argument());
    assert!(empty.await_zero().unwrap_err().is_invalid_argument());
    assert!(empty.await_for(secs).unwrap_err().is_invalid_argument());
    let deadline = Instant::now() + secs;
    assert!(empty
        .await_until(deadline)
        .unwrap_err()
        .is_invalid_argument());
    assert!(empty.delete().unwrap_err().is_invalid_argument());
    assert_eq!(count_commands(&mut raw) - before, 1, "only our INFO");

    // Counts: zero (an open latch is the absent key) and beyond i64 are rejected; i64::MAX
    // is exact both ways.
    let latch = client.count_down_latch("latch:bad");
    for count in [0, i64::MAX as u64 + 1, u64::MAX] {
        assert!(latch
            .try_set_count(count)
            .unwrap_err()
            .is_invalid_argument());
    }
    assert!(!raw.exists::<_, bool>("latch:bad").unwrap());
    assert!(latch.try_set_count(i64::MAX as u64).unwrap());
    assert_eq!(latch.count().unwrap(), i64::MAX as u64);
    assert_eq!(latch.count_down().unwrap(), i64::MAX as u64 - 1);
    assert!(latch.delete().unwrap());

    // An existing latch keeps its count.
    assert!(latch.try_set_count(3).unwrap());
    assert!(!latch.try_set_count(7).unwrap());
    assert_eq!(latch.count().unwrap(), 3);
    assert_eq!(raw.get::<_, String>("latch:bad").unwrap(), "3");
    assert!(latch.delete().unwrap());

    // Keys that are not latches: WrongType from every call, nothing written.
    let check_wrong_type = |raw: &mut redis::Connection, name: &str| {
        let latch = client.count_down_latch(name);
        let writes_before = writes(raw);
        let errors = [
            latch.try_set_count(5).unwrap_err(),
            latch.count_down().unwrap_err(),
            latch.count().unwrap_err(),
            latch.await_zero().unwrap_err(),
            latch.await_for(secs).unwrap_err(),
            latch.delete().unwrap_err(),
        ];
        for e in errors {
            assert!(
                matches!(&e, Error::WrongType { key } if key == name),
                "{name}: {e:?}"
            );
        }
        assert_eq!(writes(raw), writes_before, "{name}: nothing written");
    };
    let _: () = raw.hset("latch:hash", "f", "v").unwrap();
    check_wrong_type(&mut raw, "latch:hash");
    let fields: Vec<(String, String)> = raw.hgetall("latch:hash").unwrap();
    assert_eq!(fields, [("f".to_owned(), "v".to_owned())]);
    for value in [
        "abc",
        "",
        "1.5",
        "007",
        "+5",
        "-x",
        "-0",
        "99999999999999999999",
    ] {
        let _: () = raw.set("latch:str", value).unwrap();
        check_wrong_type(&mut raw, "latch:str");
        assert_eq!(raw.get::<_, String>("latch:str").unwrap(), value);
    }
}

#[test]
fn delete_wakes_waiters_and_the_latch_reads_open() {
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let latch = a.count_down_latch("latch:del");
    let mut raw = server.conn();
    assert!(latch.try_set_count(5).unwrap());
    let gets = command_calls(&mut raw, "get");
    let mut waiters = spawn_waiters(&latch, 2);
    waiters.extend(spawn_waiters(&b.count_down_latch("latch:del"), 2));
    wait_blocked(&mut raw, "latch:del", 2, 4, gets);
    let deleted = Instant::now();
    assert!(latch.delete().unwrap());
    let ms = latencies_ms(waiters, deleted);
    eprintln!("wake-up latencies after delete (ms): {ms:.2?}");
    assert!(
        ms[ms.len() - 1] <= WAKE_BOUND.as_secs_f64() * 1000.0,
        "{ms:?}"
    );
    assert_eq!(latch.count().unwrap(), 0);
    assert!(!raw.exists::<_, bool>("latch:del").unwrap());
    assert!(!latch.delete().unwrap(), "nothing left to delete");
}

#[test]
fn a_count_down_racing_the_waiters_subscription_is_never_missed() {
    // Guards the lost wake-up: a count-down to zero between a waiter's check and its block.
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let (la, lb) = (
        a.count_down_latch("latch:race"),
        b.count_down_latch("latch:race"),
    );
    for round in 0..200 {
        assert!(la.try_set_count(1).unwrap());
        let waiter = {
            let la = la.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let open = la.await_for(Duration::from_secs(2)).unwrap();
                (open, started.elapsed())
            })
        };
        if round % 2 == 0 {
            std::thread::yield_now();
        }
        assert_eq!(lb.count_down().unwrap(), 0);
        // A lost wake-up costs the whole 2 s wait (the final re-check then reads it open).
        let (open, took) = waiter.join().unwrap();
        assert!(
            open && took < Duration::from_secs(1),
            "round {round}: {took:?}"
        );
    }
}
