//! Rate limiter: Redisson's layout, what is left after acquires of several permits, waits
//! that sleep until permits come back, releases that give permits back once, recounts of a
//! count that cannot be right, and rejected input that leaves Redis untouched.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Commands;
use redlatch::{Client, Error, Interrupter, RateType};
use support::{await_waiting, command_calls, RedisServer};

const SECOND: Duration = Duration::from_secs(1);

fn setup() -> (RedisServer, Client, redis::Connection) {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let raw = server.conn();
    (server, client, raw)
}

/// The permits and score of each entry of a limiter's ZSET, oldest first.
fn entries(raw: &mut redis::Connection, key: &str) -> Vec<(u32, u64)> {
    let mut entries: Vec<(u32, u64)> = support::rate_entries(raw, key).into_values().collect();
    entries.sort_by_key(|e| e.1);
    entries
}

fn server_ms(raw: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(raw).unwrap();
    s * 1000 + us / 1000
}

fn ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn config_is_redissons_hash_and_set_once() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:config");
    assert_eq!(api.config().unwrap(), None);
    assert!(api
        .try_set_rate(RateType::Overall, 10, Duration::from_millis(1500))
        .unwrap());
    assert!(!api.try_set_rate(RateType::PerClient, 99, SECOND).unwrap());
    let hash: std::collections::HashMap<String, String> = raw.hgetall("rl:config").unwrap();
    assert_eq!(hash.len(), 3, "{hash:?}");
    assert_eq!(hash["rate"], "10");
    assert_eq!(hash["interval"], "1500");
    assert_eq!(hash["type"], "0");
    let config = api.config().unwrap().unwrap();
    assert_eq!(
        (
            config.rate_type,
            config.rate,
            config.interval,
            config.keep_alive
        ),
        (RateType::Overall, 10, Duration::from_millis(1500), None)
    );

    // A half-made config (Redisson sets its fields one by one) is replaced whole.
    let _: () = raw.hset("rl:half", "rate", "7").unwrap();
    let half = client.rate_limiter("rl:half");
    assert_eq!(half.config().unwrap(), None);
    assert!(half.try_set_rate(RateType::PerClient, 3, SECOND).unwrap());
    let config = half.config().unwrap().unwrap();
    assert_eq!((config.rate_type, config.rate), (RateType::PerClient, 3));
}

#[test]
fn acquires_of_several_permits_leave_the_rate_less_what_they_took() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:multi");
    api.try_set_rate(RateType::Overall, 5, Duration::from_secs(60))
        .unwrap();
    let before = server_ms(&mut raw);
    let first = api.try_acquire(3).unwrap().expect("3 of 5");
    assert_eq!(first.permits, 3);
    let at = ms(first.at);
    assert!(at >= before && at <= server_ms(&mut raw), "server time");
    assert_eq!(api.try_acquire(3).unwrap(), None);
    assert!(api.try_acquire(2).unwrap().is_some());
    assert_eq!(api.try_acquire(1).unwrap(), None);
    assert_eq!(api.available_permits().unwrap(), 0);

    // Redisson's layout: the count, and one entry per acquire with its permits.
    let value: String = raw.get("{rl:multi}:value").unwrap();
    assert_eq!(value, "0");
    let mut taken = entries(&mut raw, "{rl:multi}:permits");
    taken.sort();
    assert_eq!(taken.iter().map(|e| e.0).collect::<Vec<_>>(), [2, 3]);
    assert!(taken.iter().any(|&(_, score)| score == at));
    let status = api.status().unwrap();
    assert!(status.next_back_in.unwrap() <= Duration::from_secs(60));

    // A count that cannot be right is recounted from the entries, not from their number
    // (Redisson before 3.35 counts `rate - ZCARD`: here 3, though none is left).
    let _: () = raw.del("{rl:multi}:value").unwrap();
    assert_eq!(api.available_permits().unwrap(), 0);
    assert_eq!(api.try_acquire(1).unwrap(), None);
    let _: () = raw.set("{rl:multi}:value", "5").unwrap();
    assert_eq!(api.available_permits().unwrap(), 0);
    assert_eq!(api.try_acquire(1).unwrap(), None);
}

#[test]
fn a_blocked_acquire_sleeps_until_its_permits_come_back() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:wait");
    let interval = Duration::from_millis(800);
    api.try_set_rate(RateType::Overall, 2, interval).unwrap();
    let first = api.acquire(1).unwrap();
    thread::sleep(Duration::from_millis(200));
    api.acquire(1).unwrap();
    let calls = command_calls(&mut raw, "evalsha");
    let started = Instant::now();
    // Two permits: the second one comes back 200 ms after the first.
    let admitted = api.acquire(2).unwrap();
    let waited = started.elapsed();
    assert!(
        ms(admitted.at) >= ms(first.at) + 800 + 200,
        "admitted at {} ms, the first taken at {} ms",
        ms(admitted.at),
        ms(first.at)
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    // It slept: a refusal, then the attempt when they came back (one more where the
    // first permit's return woke it: each refusal says when the second comes back).
    let sent = command_calls(&mut raw, "evalsha") - calls;
    assert!(sent <= 3, "{sent} scripts sent while waiting");
}

#[test]
fn a_release_gives_permits_back_once_and_wakes_a_waiter() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:release");
    api.try_set_rate(RateType::Overall, 10, Duration::from_secs(60))
        .unwrap();
    api.acquire(5).unwrap();
    assert_eq!(api.release(5).unwrap(), 5);
    assert_eq!(api.available_permits().unwrap(), 10);
    assert!(entries(&mut raw, "{rl:release}:permits").is_empty());
    api.acquire(5).unwrap();
    // Redisson 4 keeps the first entry, so it comes back again when it expires: 15 in one
    // interval. Here the interval holds what is taken, no more.
    assert_eq!(
        entries(&mut raw, "{rl:release}:permits")
            .iter()
            .map(|e| e.0)
            .sum::<u32>(),
        5
    );
    assert_eq!(api.available_permits().unwrap(), 5);
    // Part of an entry, then more than was taken: what was taken, no more.
    assert_eq!(api.release(2).unwrap(), 2);
    assert_eq!(entries(&mut raw, "{rl:release}:permits")[0].0, 3);
    assert_eq!(api.release(9).unwrap(), 3);
    assert_eq!(api.available_permits().unwrap(), 10);

    // A waiter sleeping for a minute is woken by a release.
    api.acquire(10).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = api.clone();
    let t = thread::spawn(move || {
        let admitted = waiter.acquire(4);
        tx.send(Instant::now()).unwrap();
        admitted
    });
    await_waiting(&client, 1);
    let released = Instant::now();
    assert_eq!(api.release(4).unwrap(), 4);
    let woke = rx.recv_timeout(Duration::from_secs(10)).expect("woken");
    assert!(woke - released < Duration::from_secs(2));
    assert_eq!(t.join().unwrap().unwrap().permits, 4);
    assert_eq!(api.available_permits().unwrap(), 0);
}

#[test]
fn a_new_rate_keeps_what_was_taken() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:set");
    api.set_rate(RateType::Overall, 5, Duration::from_secs(60))
        .unwrap();
    api.acquire(5).unwrap();
    api.set_rate(RateType::Overall, 8, Duration::from_secs(60))
        .unwrap();
    assert_eq!(api.available_permits().unwrap(), 3);
    api.set_rate(RateType::Overall, 2, Duration::from_secs(60))
        .unwrap();
    assert_eq!(api.available_permits().unwrap(), 0);
    // A shorter interval lets what is older go.
    api.set_rate(RateType::Overall, 2, Duration::from_millis(1))
        .unwrap();
    assert_eq!(api.available_permits().unwrap(), 2);
    // A change of type starts afresh on this client's keys.
    api.set_rate(RateType::Overall, 2, Duration::from_secs(60))
        .unwrap();
    api.acquire(2).unwrap();
    api.set_rate(RateType::PerClient, 2, Duration::from_secs(60))
        .unwrap();
    assert!(!support::key_exists(&mut raw, "{rl:set}:permits"));
    assert_eq!(api.available_permits().unwrap(), 2);
}

#[test]
fn per_client_rates_bind_each_client_apart() {
    let (server, one, mut raw) = setup();
    let two = Client::open(server.url()).unwrap();
    let name = "rl:each";
    one.rate_limiter(name)
        .try_set_rate(RateType::PerClient, 2, Duration::from_secs(60))
        .unwrap();
    for client in [&one, &two] {
        let api = client.rate_limiter(name);
        assert!(api.try_acquire(2).unwrap().is_some());
        assert_eq!(api.try_acquire(1).unwrap(), None);
        let key = format!("{{{name}}}:permits:{}", client.id());
        assert_eq!(entries(&mut raw, &key).len(), 1, "{key}");
    }
    assert!(!support::key_exists(&mut raw, "{rl:each}:permits"));
}

#[test]
fn bad_input_and_missing_rates_change_nothing() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:bad");
    assert!(matches!(api.try_acquire(1), Err(Error::RateNotSet { .. })));
    assert!(api.acquire(1).unwrap_err().is_rate_not_set());
    assert!(api.status().unwrap_err().is_rate_not_set());
    assert!(api.release(1).unwrap_err().is_rate_not_set());
    let keys: Vec<String> = raw.keys("*rl:bad*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");

    for (rate, interval) in [
        (0, SECOND),
        (1, Duration::ZERO),
        (1, Duration::from_micros(999)),
        (1, Duration::from_secs(400 * 24 * 3600)),
        (u64::MAX, SECOND),
        ((1 << 50) + 1, SECOND),
    ] {
        let err = api
            .try_set_rate(RateType::Overall, rate, interval)
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{rate} per {interval:?}: {err}");
        let err = api.set_rate(RateType::Overall, rate, interval).unwrap_err();
        assert!(err.is_invalid_argument(), "{rate} per {interval:?}: {err}");
    }
    assert!(api.try_acquire(0).unwrap_err().is_invalid_argument());
    assert!(api.release(0).unwrap_err().is_invalid_argument());
    assert!(client
        .rate_limiter("")
        .try_acquire(1)
        .unwrap_err()
        .is_invalid_argument());

    api.try_set_rate(RateType::Overall, 3, SECOND).unwrap();
    let err = api.acquire(4).unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(err.to_string().contains("rl:bad"), "{err}");
    assert!(!support::key_exists(&mut raw, "{rl:bad}:permits"));

    let _: () = raw.set("rl:string", "x").unwrap();
    let wrong = client.rate_limiter("rl:string");
    assert!(matches!(wrong.try_acquire(1), Err(Error::WrongType { .. })));
    assert!(matches!(wrong.config(), Err(Error::WrongType { .. })));
    let v: String = raw.get("rl:string").unwrap();
    assert_eq!(v, "x");
}

#[test]
fn interrupted_closed_and_deleted_waits_take_nothing() {
    let (server, client, mut raw) = setup();
    let name = "rl:stop";
    let api = client.rate_limiter(name);
    api.try_set_rate(RateType::Overall, 1, Duration::from_secs(60))
        .unwrap();
    api.acquire(1).unwrap();

    // Interrupted.
    let (tx, rx) = mpsc::channel();
    let waiter = api.clone();
    let t = thread::spawn(move || {
        tx.send(Interrupter::current()).unwrap();
        waiter.acquire(1)
    });
    let interrupter = rx.recv().unwrap();
    await_waiting(&client, 1);
    interrupter.interrupt();
    assert!(t.join().unwrap().unwrap_err().is_interrupted());

    // Deleted: the waiter wakes and finds no rate.
    let waiter = api.clone();
    let t = thread::spawn(move || waiter.acquire(1));
    await_waiting(&client, 1);
    let started = Instant::now();
    assert!(api.delete().unwrap());
    assert!(t.join().unwrap().unwrap_err().is_rate_not_set());
    assert!(started.elapsed() < Duration::from_secs(5));
    // The receipt of the first call that set the rate waits for its batched delete.
    let keys: Vec<String> = raw.keys("*rl:stop*").unwrap();
    assert!(
        keys.iter().all(|k| k.starts_with("redisson_unlock_latch:")),
        "{keys:?}"
    );

    // Closed.
    api.try_set_rate(RateType::Overall, 1, Duration::from_secs(60))
        .unwrap();
    api.acquire(1).unwrap();
    let other = Client::open(server.url()).unwrap();
    let waiter = other.rate_limiter(name);
    let t = thread::spawn(move || waiter.acquire(1));
    await_waiting(&other, 1);
    other.close();
    assert!(matches!(t.join().unwrap(), Err(Error::Closed)));
    assert_eq!(entries(&mut raw, "{rl:stop}:permits").len(), 1);
}

#[test]
fn an_acquire_whose_reply_is_lost_is_sent_again_and_takes_once() {
    let server = RedisServer::new();
    let proxy = support::proxy::Proxy::start(server.port());
    let client = Client::open(proxy.url()).unwrap();
    let mut raw = server.conn();
    let api = client.rate_limiter("rl:lost");
    api.try_set_rate(RateType::Overall, 3, Duration::from_secs(60))
        .unwrap();
    api.status().unwrap();
    // The reply of the next call (the acquire) is lost with its connection.
    proxy.lose_next_reply();
    let admitted = api.acquire(2).unwrap();
    assert_eq!(proxy.cuts(), 1, "a reply was lost");
    let taken = entries(&mut raw, "{rl:lost}:permits");
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(
        taken[0],
        (2, ms(admitted.at)),
        "the first call's entry and time"
    );
    assert_eq!(api.available_permits().unwrap(), 1);
}

#[test]
fn a_lowered_rate_stays_over_committed_until_enough_comes_back() {
    let (server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:lower");
    api.try_set_rate(RateType::Overall, 10, Duration::from_secs(60))
        .unwrap();
    for _ in 0..3 {
        api.acquire(3).unwrap();
    }
    // 9 taken against a rate of 4: 5 over, kept as a count below 0, not raised to 0 (from
    // 0, the release below would make 3 free and 12 would be taken in one interval).
    api.set_rate(RateType::Overall, 4, Duration::from_secs(60))
        .unwrap();
    let value: String = raw.get("{rl:lower}:value").unwrap();
    assert_eq!(value, "-5");
    assert_eq!(api.available_permits().unwrap(), 0);
    assert_eq!(api.release(3).unwrap(), 3);
    assert_eq!(api.try_acquire(1).unwrap(), None);
    assert_eq!(api.available_permits().unwrap(), 0);
    assert_eq!(api.release(6).unwrap(), 6);
    assert_eq!(api.available_permits().unwrap(), 4);

    // A count too low for an empty interval heals: nothing is taken, the rate is left.
    let _: () = raw.set("{rl:lower}:value", "0").unwrap();
    assert_eq!(api.available_permits().unwrap(), 4);

    // Per client, a rate another client sets binds every bucket at its next call.
    let other = Client::open(server.url()).unwrap();
    let each = client.rate_limiter("rl:lower:each");
    each.try_set_rate(RateType::PerClient, 10, Duration::from_secs(60))
        .unwrap();
    each.acquire(7).unwrap();
    let setter = other.rate_limiter("rl:lower:each");
    setter
        .set_rate(RateType::PerClient, 5, Duration::from_secs(60))
        .unwrap();
    assert_eq!(each.available_permits().unwrap(), 0);
    assert_eq!(each.try_acquire(1).unwrap(), None);
    setter
        .set_rate(RateType::PerClient, 12, Duration::from_secs(60))
        .unwrap();
    assert_eq!(each.available_permits().unwrap(), 5);
}

#[test]
fn a_new_rate_wakes_every_waiter_and_a_bad_one_changes_nothing() {
    let (_server, client, mut raw) = setup();
    let api = client.rate_limiter("rl:wake");
    api.try_set_rate(RateType::Overall, 2, Duration::from_secs(60))
        .unwrap();
    api.acquire(2).unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let api = api.clone();
            thread::spawn(move || api.try_acquire_for(1, Duration::from_secs(30)))
        })
        .collect();
    await_waiting(&client, 2);
    let started = Instant::now();
    // Nothing is free yet, but both waiters learn that the permits come back within a
    // second, not a minute.
    api.set_rate(RateType::Overall, 2, Duration::from_millis(1000))
        .unwrap();
    for w in waiters {
        assert!(w.join().unwrap().unwrap().is_some());
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // A key of the wrong type is found before anything is written.
    let _: () = raw.set("{rl:wake}:permits", "x").unwrap();
    let err = api
        .set_rate(RateType::Overall, 9, Duration::from_secs(5))
        .unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
    let rate: String = raw.hget("rl:wake", "rate").unwrap();
    assert_eq!(rate, "2");

    // A config no client writes (an interval below 1 ms) is no config.
    let _: () = redis::cmd("HSET")
        .arg("rl:foreign")
        .arg(&["rate", "5", "interval", "-1000", "type", "0"][..])
        .query(&mut raw)
        .unwrap();
    let foreign = client.rate_limiter("rl:foreign");
    assert!(foreign.try_acquire(1).unwrap_err().is_rate_not_set());
    assert_eq!(foreign.config().unwrap(), None);
}
