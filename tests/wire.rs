//! Redisson wire compatibility, checked on raw Redis state.

mod support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::Client;
use support::{numsub, wait_until, RedisServer};

#[test]
fn hash_field_is_owner_and_pttl_is_watchdog_timeout() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client.lock("wire:layout").lock().unwrap();
    let mut raw = server.conn();
    let kind: String = redis::cmd("TYPE")
        .arg("wire:layout")
        .query(&mut raw)
        .unwrap();
    assert_eq!(kind, "hash");
    let fields: Vec<(String, String)> = raw.hgetall("wire:layout").unwrap();
    let owner = client.owner_id();
    assert_eq!(fields, vec![(owner.clone(), "1".to_owned())]);
    let (uuid, thread) = owner.rsplit_once(':').unwrap();
    assert_eq!(uuid, client.id());
    assert!(uuid::Uuid::parse_str(uuid).is_ok() && thread.parse::<u64>().is_ok());
    let pttl: i64 = raw.pttl("wire:layout").unwrap();
    assert!((29_000..=30_000).contains(&pttl), "pttl {pttl}");
    drop(guard);
}

#[test]
fn unlock_publishes_zero_on_the_lock_channel() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client.lock("wire:pub").lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let mut sub_conn = server.conn();
    let listener = std::thread::spawn(move || {
        let mut ps = sub_conn.as_pubsub();
        ps.subscribe("redisson_lock__channel:{wire:pub}").unwrap();
        tx.send(()).unwrap();
        ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let msg = ps.get_message().unwrap();
        (
            msg.get_channel_name().to_owned(),
            msg.get_payload::<String>().unwrap(),
        )
    });
    rx.recv().unwrap();
    drop(guard);
    let (channel, payload) = listener.join().unwrap();
    assert_eq!(channel, "redisson_lock__channel:{wire:pub}");
    assert_eq!(payload, "0");
}

#[test]
fn unlock_leaves_only_what_redissons_leaves() {
    // Redisson's unlock writes a latch key per call; ours leaves only the lock itself (a
    // lost reply is settled by reading the hold count back).
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("wire:unlock");
    let g1 = lock.lock().unwrap();
    let g2 = lock.lock().unwrap();
    g2.leak();
    let owner = client.owner_id();
    let unlock = redis::Script::new(include_str!("../lua/lock_unlock.lua"));
    let mut raw = server.conn();
    let run = |raw: &mut redis::Connection| -> Option<i64> {
        unlock
            .key("wire:unlock")
            .key("redisson_lock__channel:{wire:unlock}")
            .arg(30_000)
            .arg(&owner)
            .arg("PUBLISH")
            .invoke(raw)
            .unwrap()
    };
    assert_eq!(run(&mut raw), Some(0), "one of two holds released");
    assert_eq!(lock.hold_count().unwrap(), 1);
    let pttl: i64 = raw.pttl("wire:unlock").unwrap();
    assert!(pttl > 25_000, "the lease set again: {pttl}");
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert_eq!(keys, ["wire:unlock"], "nothing written beside the lock");
    drop(g1);
    assert!(!lock.is_locked().unwrap());
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    assert_eq!(run(&mut raw), None, "not held any more");
}

#[test]
fn an_unlock_that_expects_a_count_runs_once_however_often_it_is_sent() {
    // What makes a lost unlock safe without a latch: the call says the count it expects
    // before the release, and a second delivery (or a settle after it) finds another.
    let server = RedisServer::new();
    let mut raw = server.conn();
    let _: () = raw.hset("wire:expect", "me:1", 2).unwrap();
    let unlock = redis::Script::new(include_str!("../lua/lock_unlock.lua"));
    let run = |raw: &mut redis::Connection, expect: u32| -> Option<i64> {
        unlock
            .key("wire:expect")
            .key("redisson_lock__channel:{wire:expect}")
            .arg(30_000)
            .arg("me:1")
            .arg("PUBLISH")
            .arg(expect)
            .invoke(raw)
            .unwrap()
    };
    assert_eq!(
        run(&mut raw, 2),
        Some(0),
        "2 expected, 2 found: released one"
    );
    assert_eq!(
        run(&mut raw, 2),
        Some(-2),
        "sent again: finds 1, changes nothing"
    );
    let count: i64 = raw.hget("wire:expect", "me:1").unwrap();
    assert_eq!(count, 1);
    assert_eq!(run(&mut raw, 1), Some(1), "the last hold");
    assert_eq!(run(&mut raw, 1), Some(-1), "sent again: finds none");
    let exists: bool = raw.exists("wire:expect").unwrap();
    assert!(!exists);
}

#[test]
fn an_unlock_whose_expected_count_is_off_releases_as_redissons_does() {
    // A leaked guard's hold is not among the holds the client counts: the unlock expects 1,
    // finds 2, and sends the release again without a count.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("wire:off");
    let g1 = lock.lock().unwrap();
    lock.lock().unwrap().leak();
    g1.unlock().unwrap();
    let mut raw = server.conn();
    let counts: Vec<i64> = redis::cmd("HVALS").arg("wire:off").query(&mut raw).unwrap();
    assert_eq!(counts, [1], "one hold released, the leaked one left");
    lock.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn foreign_owner_excludes_us_and_its_unlock_wakes_our_waiter() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    // What a Java Redisson client writes for lock("wire:java") on its thread 57.
    let java_owner = "3f1a7c1e-0000-4000-8000-00000000beef:57";
    let _: () = raw.hset("wire:java", java_owner, 1).unwrap();
    let _: () = raw.pexpire("wire:java", 30_000).unwrap();
    let lock = client.lock("wire:java");
    assert!(lock.try_lock().unwrap().is_none());
    assert!(lock.is_locked().unwrap());
    let waiter = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            let guard = lock.lock().unwrap();
            let at = Instant::now();
            drop(guard);
            at
        })
    };
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_lock__channel:{wire:java}"
    ) == 1));
    // Redisson's unlock of its last hold: delete, publish 0.
    let released_at = Instant::now();
    let _: () = raw.del("wire:java").unwrap();
    let _: () = raw
        .publish("redisson_lock__channel:{wire:java}", "0")
        .unwrap();
    let acquired_at = waiter.join().unwrap();
    let latency = acquired_at - released_at;
    assert!(
        latency < Duration::from_millis(50),
        "woken after {latency:?}"
    );
}

#[test]
fn a_pass_runs_once_and_only_a_resent_one_takes_a_passed_hold_for_its_own() {
    // A pass (the last hold to a waiter of the same client) writes what the waiter's own
    // acquire would, and publishes nothing; sent again ("again"), it finds the hold passed
    // and says so; a first call that finds the waiter holding by itself changes nothing.
    let server = RedisServer::new();
    let mut raw = server.conn();
    let _: () = raw.hset("wire:pass", "me:1", 1).unwrap();
    let unlock = redis::Script::new(include_str!("../lua/lock_unlock.lua"));
    let run = |raw: &mut redis::Connection, again: bool| -> Option<i64> {
        let mut call = unlock.key("wire:pass");
        call.key("redisson_lock__channel:{wire:pass}")
            .arg(30_000)
            .arg("me:1")
            .arg("PUBLISH")
            .arg(1)
            .arg("you:2")
            .arg(7_000);
        if again {
            call.arg("again");
        }
        call.invoke(raw).unwrap()
    };
    let published = support::command_calls(&mut raw, "publish");
    assert_eq!(run(&mut raw, false), Some(3), "passed");
    let holds: Vec<(String, i64)> = raw.hgetall("wire:pass").unwrap();
    assert_eq!(holds, vec![("you:2".to_owned(), 1)]);
    let pttl: i64 = raw.pttl("wire:pass").unwrap();
    assert!(pttl > 6_000 && pttl <= 7_000, "the waiter's lease: {pttl}");
    assert_eq!(run(&mut raw, true), Some(3), "sent again: passed already");
    assert_eq!(run(&mut raw, false), Some(-1), "a first call: not its pass");
    assert_eq!(
        support::command_calls(&mut raw, "publish"),
        published,
        "nothing published"
    );
    let holds: Vec<(String, i64)> = raw.hgetall("wire:pass").unwrap();
    assert_eq!(holds, vec![("you:2".to_owned(), 1)], "unchanged");
}
