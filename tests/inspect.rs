//! `Client::inspect`, `Client::list` and `Client::watch` against real servers: every kind
//! told from its keys, holders with client id, thread and hold count, fair queues in order,
//! readers, permits, counts and tokens; SCAN-based listing with helper keys grouped, on one
//! server and on a 3-master cluster; watch events from the lock's channels and polls.

mod support;

use support::forget::ForgetAll;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{
    inspect::Inspection, inspect::Kind, watch::EventKind, Client, Config, LockKind, Owner,
};
use support::cluster::RedisCluster;
use support::{client, wait_until, RedisServer};

fn me(client: &Client) -> Owner {
    Owner::parse(&client.owner_id()).unwrap()
}

fn inspect(client: &Client, name: &str) -> Inspection {
    client
        .inspect(name)
        .unwrap()
        .unwrap_or_else(|| panic!("{name} not found"))
}

/// Waits until `name` is inspected with at least `n` clients subscribed to its channel.
fn wait_for_subscribers(client: &Client, name: &str, n: u64) {
    assert!(
        wait_until(Duration::from_secs(10), || {
            client
                .inspect(name)
                .unwrap()
                .and_then(|i| i.subscribers)
                .is_some_and(|s| s >= n)
        }),
        "nobody started waiting on {name}"
    );
}

#[test]
fn reentrant_holder_is_this_client_and_thread_with_its_hold_count_and_lease() {
    let server = RedisServer::new();
    let client = client(&server);
    let lock = client.lock("inspect:reentrant");
    let _first = lock.lock().unwrap();
    let _second = lock.lock().unwrap();
    let found = inspect(&client, "inspect:reentrant");
    assert_eq!(found.kind, Kind::Reentrant);
    assert_eq!(found.key_type, "hash");
    assert_eq!(found.holders.len(), 1);
    assert_eq!(found.holders[0].owner, me(&client));
    assert_eq!(found.holders[0].owner.client_id, client.id());
    assert_eq!(found.holders[0].holds, 2);
    let lease = found.lease.unwrap();
    assert!(
        lease > Duration::from_secs(28) && lease <= Duration::from_secs(30),
        "{lease:?}"
    );
    assert_eq!(found.keys, ["inspect:reentrant"]);
    assert_eq!(found.subscribers, Some(0));
}

#[test]
fn nothing_is_none_and_an_empty_name_is_invalid() {
    let server = RedisServer::new();
    let client = client(&server);
    assert_eq!(client.inspect("inspect:nothing").unwrap(), None);
    assert!(client.inspect("").unwrap_err().is_invalid_argument());
    assert!(client.list("").unwrap_err().is_invalid_argument());
    assert!(client.watch("").unwrap_err().is_invalid_argument());
}

#[test]
fn fair_queue_lists_waiters_in_arrival_order_with_deadlines() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "inspect:fair";
    let holder = client.fair_lock(name).lock().unwrap();
    let (owners, waiters) = support::queue_fair_waiters(&client, name, 2);
    let expected: Vec<Owner> = owners.iter().map(|o| Owner::parse(o).unwrap()).collect();
    let found = inspect(&client, name);
    assert_eq!(found.kind, Kind::Fair);
    assert_eq!(found.holders[0].owner, me(&client));
    let queued: Vec<Owner> = found.queue.iter().map(|q| q.owner.clone()).collect();
    assert_eq!(queued, expected);
    for q in &found.queue {
        let deadline = q.deadline.expect("a queued waiter has a deadline");
        assert!(deadline > Duration::from_secs(60), "{deadline:?}");
    }
    assert!(found
        .keys
        .contains(&"redisson_lock_queue:{inspect:fair}".to_owned()));
    holder.unlock().unwrap();
    support::join_within(waiters, Duration::from_secs(10), "fair waiters");
    // Free and nobody queued: the keys are gone.
    assert_eq!(client.inspect(name).unwrap(), None);
}

#[test]
fn read_write_lock_shows_its_mode_readers_and_writer() {
    let server = RedisServer::new();
    let (a, b) = (client(&server), client(&server));
    let name = "inspect:rw";
    let _ra = a.read_write_lock(name).read().lock().unwrap();
    let _rb = b.read_write_lock(name).read().lock().unwrap();
    let found = inspect(&a, name);
    assert_eq!(
        (found.kind, found.mode),
        (Kind::ReadWrite, Some(LockKind::Read))
    );
    assert!(found.holders.is_empty());
    let mut readers: Vec<Owner> = found.readers.iter().map(|r| r.owner.clone()).collect();
    readers.sort();
    let mut expected = vec![me(&a), me(&b)];
    expected.sort();
    assert_eq!(readers, expected);
    for r in &found.readers {
        assert_eq!(r.holds, 1);
        let lease = r.read_leases[0].expect("a live read hold");
        assert!(lease > Duration::from_secs(28), "{lease:?}");
    }
    assert_eq!(
        found.keys.len(),
        3,
        "the hash and one lease key per read hold"
    );
    drop((_ra, _rb));

    let _w = a.read_write_lock(name).write().lock().unwrap();
    let found = inspect(&a, name);
    assert_eq!(found.mode, Some(LockKind::Write));
    assert_eq!(found.holders[0].owner, me(&a));
    assert!(found.readers.is_empty());
}

#[test]
fn semaphore_and_latch_are_told_apart_by_their_waiters() {
    let server = RedisServer::new();
    let client = client(&server);
    // Ours: its generation beside the count says so.
    let ours = client.semaphore("inspect:ours");
    ours.try_set_permits(5).unwrap();
    let found = inspect(&client, "inspect:ours");
    assert_eq!(
        (found.kind, found.permits, found.count),
        (Kind::Semaphore, Some(5), None)
    );
    assert_eq!(
        found.keys,
        ["inspect:ours", "redlatch_semaphore:{inspect:ours}"]
    );
    // Redisson's (a bare count): its waiters tell.
    let _: () = redis::Commands::set(&mut server.conn(), "inspect:sem", 5).unwrap();
    let sem = client.semaphore("inspect:sem");
    assert!(sem.try_acquire(2).unwrap().is_some_and(|g| {
        g.forget();
        true
    }));
    let _: () =
        redis::Commands::del(&mut server.conn(), "redlatch_semaphore:{inspect:sem}").unwrap();
    let found = inspect(&client, "inspect:sem");
    assert_eq!(found.kind, Kind::SemaphoreOrLatch);
    assert_eq!((found.permits, found.count), (Some(3), Some(3)));
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            client
                .semaphore("inspect:sem")
                .try_acquire_for(10, Duration::from_secs(20))
                .forget_all()
        })
    };
    wait_for_subscribers(&client, "inspect:sem", 1);
    let found = inspect(&client, "inspect:sem");
    assert_eq!(
        (found.kind, found.permits, found.count),
        (Kind::Semaphore, Some(3), None)
    );
    sem.add_permits(7).unwrap();
    assert!(waiter.join().unwrap().unwrap());

    let latch = client.count_down_latch("inspect:latch");
    latch.try_set_count(3).unwrap();
    latch.count_down().unwrap();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            client
                .count_down_latch("inspect:latch")
                .await_for(Duration::from_secs(20))
        })
    };
    wait_for_subscribers(&client, "inspect:latch", 1);
    let found = inspect(&client, "inspect:latch");
    assert_eq!(
        (found.kind, found.count, found.permits),
        (Kind::CountDownLatch, Some(2), None)
    );
    latch.delete().unwrap();
    assert!(waiter.join().unwrap().unwrap());
}

#[test]
fn fenced_lock_shows_its_latest_token_held_or_free() {
    let server = RedisServer::new();
    let client = client(&server);
    let lock = client.fenced_lock("inspect:fenced");
    drop(lock.lock().unwrap());
    let guard = lock.lock().unwrap();
    let found = inspect(&client, "inspect:fenced");
    assert_eq!(found.kind, Kind::Fenced);
    assert_eq!(found.token, guard.token());
    assert_eq!(found.holders[0].owner, me(&client));
    let token = guard.token();
    guard.unlock().unwrap();
    let found = inspect(&client, "inspect:fenced");
    assert_eq!(
        (found.kind, found.token, found.lease),
        (Kind::Fenced, token, None)
    );
    assert!(found.holders.is_empty());
}

#[test]
fn expirable_permits_show_their_leases() {
    let server = RedisServer::new();
    let client = client(&server);
    let sem = client.permit_expirable_semaphore("inspect:pes");
    sem.try_set_permits(2).unwrap();
    let id = sem.acquire(Duration::from_secs(60)).forget_all().unwrap();
    let found = inspect(&client, "inspect:pes");
    assert_eq!(
        (found.kind, found.permits),
        (Kind::PermitExpirableSemaphore, Some(1))
    );
    assert_eq!(found.permit_leases.len(), 1);
    assert_eq!(found.permit_leases[0].id, id.as_str());
    let left = found.permit_leases[0].expires_in.unwrap();
    assert!(
        left > Duration::from_secs(58) && left <= Duration::from_secs(60),
        "{left:?}"
    );
}

#[test]
fn keys_of_other_layouts_are_unknown() {
    let server = RedisServer::new();
    let client = client(&server);
    let mut raw = server.conn();
    let _: () = redis::cmd("SET")
        .arg("inspect:text")
        .arg("hello")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg("inspect:set")
        .arg("m")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("inspect:user")
        .arg("name")
        .arg("alice")
        .query(&mut raw)
        .unwrap();
    for (name, key_type) in [
        ("inspect:text", "string"),
        ("inspect:set", "set"),
        ("inspect:user", "hash"),
    ] {
        let found = inspect(&client, name);
        assert_eq!(
            (found.kind, found.key_type.as_str()),
            (Kind::Unknown, key_type),
            "{name}"
        );
        assert!(found.holders.is_empty() && found.permits.is_none());
    }
}

#[test]
fn list_matches_names_and_groups_helper_keys() {
    let server = RedisServer::new();
    let client = client(&server);
    let _a1 = client.lock("list:a:1").lock().unwrap();
    let _a2 = client.fair_lock("list:a:2").lock().unwrap();
    // A queued waiter gives list:a:2 its helper keys.
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            client
                .fair_lock("list:a:2")
                .try_lock_for(Duration::from_secs(20))
                .map(|g| g.is_some())
        })
    };
    assert!(wait_until(Duration::from_secs(10), || inspect(
        &client, "list:a:2"
    )
    .queue
    .len()
        == 1));
    let _b = client.read_write_lock("list:b").read().lock().unwrap();
    drop(client.fenced_lock("list:a:3").lock().unwrap()); // free: only its token counter
    client.semaphore("list:sem").try_set_permits(2).unwrap();

    let names = |pattern: &str| -> Vec<String> {
        client
            .list(pattern)
            .unwrap()
            .into_iter()
            .map(|i| i.name)
            .collect()
    };
    assert_eq!(names("list:a:*"), ["list:a:1", "list:a:2"]);
    let all = client.list("*").unwrap();
    let all_names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        all_names,
        ["list:a:1", "list:a:2", "list:a:3", "list:b", "list:sem"]
    );
    let kinds: Vec<Kind> = all.iter().map(|i| i.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::Reentrant,
            Kind::Fair,
            Kind::Fenced,
            Kind::ReadWrite,
            Kind::Semaphore
        ]
    );
    let fair = &all[1];
    assert_eq!(
        fair.keys,
        [
            "list:a:2",
            "redisson_lock_queue:{list:a:2}",
            "redisson_lock_timeout:{list:a:2}"
        ]
    );
    assert_eq!(names("*redisson_lock_token*"), ["list:a:3"]);
    assert!(names("nothing:*").is_empty());
    drop(_a2);
    assert!(waiter.join().unwrap().unwrap());
}

#[test]
fn list_on_a_cluster_finds_every_name_once_across_masters() {
    let cluster = RedisCluster::new(3, 0);
    let config = Config::cluster(cluster.urls()).build().unwrap();
    let client = Client::new(config).unwrap();
    let names: Vec<String> = (0..24).map(|i| format!("spread:{i}")).collect();
    let guards: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| match i % 3 {
            0 => client.lock(n).lock().unwrap(),
            1 => client.fair_lock(n).lock().unwrap(),
            _ => client.fenced_lock(n).lock().unwrap(),
        })
        .collect();
    let nodes: std::collections::BTreeSet<u16> = names
        .iter()
        .map(|n| cluster.node_for_key(n).port())
        .collect();
    assert_eq!(nodes.len(), 3, "the names are spread over all masters");
    let mut found: Vec<String> = client
        .list("spread:*")
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    let mut expected = names.clone();
    expected.sort();
    found.sort();
    assert_eq!(found, expected);
    let all = client.list("*").unwrap();
    assert_eq!(
        all.len(),
        names.len(),
        "token counters are grouped, not listed"
    );
    assert!(all.iter().all(|i| i.holders[0].owner == me(&client)));

    // Watch on a cluster: SSUBSCRIBE on the slot's master.
    let mut watch = client
        .watch("spread:0")
        .unwrap()
        .poll_interval(Duration::from_secs(30));
    drop(guards);
    let event = watch
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("the release");
    assert_eq!(event.kind, EventKind::Released);
}

#[test]
fn watch_sees_acquire_reentry_and_release_with_the_owner() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "watch:lib";
    let mut watch = client
        .watch(name)
        .unwrap()
        .poll_interval(Duration::from_millis(50));
    assert!(watch.current().is_none());
    let lock = client.lock(name);
    let first = lock.lock().unwrap();
    let event = watch
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("acquired");
    assert_eq!(
        (event.kind, event.owner.clone(), event.holds),
        (EventKind::Acquired, Some(me(&client)), Some(1))
    );
    let second = lock.lock().unwrap();
    let event = watch
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("re-entered");
    assert_eq!((event.kind, event.holds), (EventKind::Acquired, Some(2)));
    drop(second);
    drop(first);
    let mut released = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while released.last().map(|e: &redlatch::watch::Event| e.holds) != Some(Some(0)) {
        assert!(Instant::now() < deadline, "no final release: {released:?}");
        if let Some(e) = watch.next_timeout(Duration::from_millis(200)).unwrap() {
            released.push(e);
        }
    }
    assert!(released
        .iter()
        .all(|e| e.kind == EventKind::Released && e.owner == Some(me(&client))));
    assert!(watch.current().is_none());
    // A hold shorter than a poll still shows, as a release without owner.
    let mut slow = client
        .watch(name)
        .unwrap()
        .poll_interval(Duration::from_secs(60));
    drop(lock.lock().unwrap());
    let event = slow
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("the release");
    assert_eq!((event.kind, event.owner), (EventKind::Released, None));
}

#[test]
fn watch_sees_fair_waiters_join_the_queue() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "watch:fair";
    let holder = client.fair_lock(name).lock().unwrap();
    let mut watch = client
        .watch(name)
        .unwrap()
        .poll_interval(Duration::from_millis(50));
    let (tx, rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            tx.send(client.owner_id()).unwrap();
            let guard = client.fair_lock(name).lock().unwrap();
            let _ = done_rx.recv();
            guard.unlock().unwrap();
        })
    };
    let owner = Owner::parse(&rx.recv().unwrap()).unwrap();
    let event = watch
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("waiting");
    assert_eq!(
        (event.kind, event.owner.as_ref(), event.position),
        (EventKind::Waiting, Some(&owner), Some(1))
    );
    holder.unlock().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen.contains(&(EventKind::Acquired, Some(owner.clone()))) {
        assert!(
            Instant::now() < deadline,
            "the waiter's turn was not seen: {seen:?}"
        );
        if let Some(e) = watch.next_timeout(Duration::from_millis(100)).unwrap() {
            seen.push((e.kind, e.owner));
        }
    }
    assert_eq!(seen[0], (EventKind::Released, Some(me(&client))));
    assert!(
        !seen.iter().any(|(k, _)| *k == EventKind::Left),
        "it was granted, not gone: {seen:?}"
    );
    done_tx.send(()).unwrap();
    waiter.join().unwrap();
}

/// A short binary value (not UTF-8) is another application's key: inspect must call it
/// `Kind::Unknown`, and `list` must not fail because of it. Broke: Error::Protocol.
#[test]
fn inspect_and_list_survive_a_value_that_is_not_utf8() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut conn = server.conn();
    redis::cmd("SET")
        .arg("app:bin")
        .arg(&b"\xff\xfe\x00"[..])
        .exec(&mut conn)
        .unwrap();
    redis::cmd("HSET")
        .arg("app:h")
        .arg("f")
        .arg(&b"\xc3\x28"[..])
        .exec(&mut conn)
        .unwrap();
    let _held = client.lock("app:lock").lock().unwrap();
    let bin = client.inspect("app:bin");
    let hash = client.inspect("app:h");
    let listed = client.list("app:*");
    assert!(
        matches!(bin, Ok(Some(ref i)) if i.kind == Kind::Unknown),
        "inspect(app:bin) = {bin:?}"
    );
    assert!(
        matches!(hash, Ok(Some(ref i)) if i.kind == Kind::Unknown),
        "inspect(app:h) = {hash:?}"
    );
    assert!(listed.is_ok(), "list(app:*) = {:?}", listed.map(|_| ()));
}

/// Keys that only a scan finds (a condition's waiters and queue, an election's record and
/// log) are listed under the lock they belong to, not as objects of their own.
#[test]
fn list_groups_condition_and_election_keys_under_their_lock() {
    let server = RedisServer::new();
    let client = client(&server);
    let waiting = {
        let client = client.clone();
        thread::spawn(move || {
            let lock = client.lock("buffer");
            let mut guard = lock.lock().unwrap();
            lock.condition("not-empty")
                .wait_for(&mut guard, Duration::from_secs(20))
                .map(|r| r.timed_out())
        })
    };
    let mut con = server.conn();
    assert!(wait_until(Duration::from_secs(10), || redis::cmd("EXISTS")
        .arg("redlatch_condition:{buffer}:not-empty")
        .query::<u32>(&mut con)
        .unwrap()
        == 1));
    let leadership = client.election("leader").campaign("me").unwrap();
    let lock = client.lock("buffer");
    let guard = lock.lock().unwrap();

    let all = client.list("*").unwrap();
    let names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["buffer", "leader"], "{all:?}");
    assert_eq!(all[0].kind, Kind::Reentrant);
    assert_eq!(
        all[0].keys,
        [
            "buffer",
            "redlatch_condition:{buffer}:not-empty",
            "redlatch_condition_queue:{buffer}:not-empty"
        ]
    );
    assert_eq!(all[1].kind, Kind::Fenced);
    assert_eq!(
        all[1].keys,
        [
            "leader",
            "redisson_lock_token:{leader}",
            "redlatch_election:{leader}",
            "redlatch_election_log:{leader}"
        ]
    );
    drop(leadership);
    lock.condition("not-empty").notify_all().unwrap();
    drop(guard);
    assert!(!waiting.join().unwrap().unwrap(), "notified");
}

/// A lock named with its own hash tag, `{user:1}`, shares its helper keys with the name
/// `user:1`: list must show the lock once, under its own name. Broke: a phantom `user:1`.
#[test]
fn list_shows_a_hash_tagged_lock_once_under_its_own_name() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let _held = client.fenced_lock("{user:1}").lock().unwrap();
    let names: Vec<String> = client
        .list("*")
        .unwrap()
        .into_iter()
        .map(|i| format!("{} ({})", i.name, i.kind))
        .collect();
    assert_eq!(names, ["{user:1} (fenced)"]);
}

/// inspect.lua reads one PTTL per read hold, up to 10 000 per reader field, for up to
/// 10 000 fields of any hash that has a `mode` field: a read-only tool must not block the
/// server for seconds. Broke: ~N*10 000 PTTL calls in one script.
#[test]
fn inspecting_an_app_hash_with_a_mode_field_is_cheap() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut conn = server.conn();
    let mut hset = redis::cmd("HSET");
    hset.arg("settings").arg("mode").arg("dark");
    for i in 0..300 {
        hset.arg(format!("counter{i}")).arg("10000");
    }
    hset.exec(&mut conn).unwrap();
    let pttls = support::command_calls(&mut conn, "pttl");
    let start = Instant::now();
    let found = client.inspect("settings");
    let took = start.elapsed();
    // Not a read-write lock (`mode` is neither `read` nor `write`): no hold timeouts read.
    let read = support::command_calls(&mut conn, "pttl") - pttls;
    assert!(read <= 1, "{read} PTTL calls");
    assert!(
        took < Duration::from_secs(2),
        "inspect took {took:?} ({:?})",
        found.map(|f| f.map(|i| i.kind))
    );
}

/// `poll_interval(Duration::MAX)` ("never poll, only messages") must not panic.
#[test]
fn a_watch_with_the_longest_poll_interval_does_not_panic() {
    let server = RedisServer::new();
    let client = client(&server);
    let watch = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.watch("w:max").unwrap().poll_interval(Duration::MAX)
    }));
    assert!(watch.is_ok());
}

/// On a cluster, another application's key whose name does not share a slot with its
/// (never existing) helper keys, such as `a}b` (helpers `prefix:{a}b}`, slot of `a`), makes
/// the inspect script CROSSSLOT, and `list` fails for every pattern that matches it.
#[test]
fn list_on_a_cluster_survives_a_key_whose_helpers_hash_elsewhere() {
    let cluster = RedisCluster::new(3, 0);
    let config = Config::cluster(cluster.urls()).build().unwrap();
    let client = Client::new(config).unwrap();
    let mut conn = cluster.node_for_key("a}b").conn();
    redis::cmd("SET")
        .arg("a}b")
        .arg("x")
        .exec(&mut conn)
        .unwrap();
    let _held = client.lock("app:lock").lock().unwrap();
    let one = client.inspect("a}b");
    let all = client.list("*");
    assert!(one.is_ok(), "inspect(a}}b) = {one:?}");
    assert!(all.is_ok(), "list(*) = {:?}", all.map(|_| ()));
}

#[test]
fn a_watch_counts_the_waiters_of_its_own_client() {
    // A watch listens on its client's own connection: that connection is not counted as a
    // waiter, unless a thread of the same client does wait there.
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let guard = holder.lock("w:own").lock().unwrap();
    let watch = client.watch("w:own").unwrap();
    assert_eq!(watch.current().unwrap().subscribers, Some(0));
    let lock = client.lock("w:own");
    let waiter = std::thread::spawn(move || lock.lock().map(drop));
    support::await_waiting(&client, 1);
    let again = client.watch("w:own").unwrap();
    assert_eq!(
        again.current().unwrap().subscribers,
        Some(1),
        "its own waiter"
    );
    // Seen from another client, a connection that watches is taken off the count even when
    // it also waits (its watch channel says "watcher", and nothing tells the two apart): the
    // cost of not counting every running watch as a waiting client.
    let other = holder.watch("w:own").unwrap();
    assert_eq!(other.current().unwrap().subscribers, Some(0));
    drop((watch, again, other));
    let watchers = "redlatch_watch:redisson_lock__channel:{w:own}";
    assert!(support::wait_until(Duration::from_secs(10), || {
        support::numsub(&mut server.conn(), watchers) == 0
    }));
    let after = holder.watch("w:own").unwrap();
    assert_eq!(
        after.current().unwrap().subscribers,
        Some(1),
        "a waiter alone"
    );
    drop(guard);
    waiter.join().unwrap().unwrap();
}

#[test]
fn a_group_shows_each_locked_value_with_its_owner_and_list_finds_it() {
    let server = RedisServer::new();
    let (c1, c2) = (client(&server), client(&server));
    let codec = redlatch::ValueCodec::String;
    let values = |vs: &[&str]| vs.iter().map(|v| codec.encode_str(v)).collect::<Vec<_>>();
    let ab = c1.group_lock("class_100", values(&["a", "b"]));
    let (_g1, _g2) = (ab.lock().unwrap(), ab.lock().unwrap());
    let _c = c2.group_lock("class_100", values(&["c"])).lock().unwrap();
    let found = inspect(&c1, "class_100");
    assert_eq!(found.kind, Kind::Group);
    assert_eq!(found.values.len(), 3);
    // Redisson's field of StringCodec's "a", held twice by this thread.
    let a = found
        .values
        .iter()
        .find(|v| v.field == "qwvAS12pR0CgRitaypEjUw")
        .unwrap();
    assert_eq!((&a.owner, a.holds), (&me(&c1), 2));
    assert!(a.lease > Duration::from_secs(20) && a.lease <= Duration::from_secs(30));
    let mut owners: Vec<(Owner, u32)> = found
        .holders
        .iter()
        .map(|h| (h.owner.clone(), h.holds))
        .collect();
    owners.sort();
    let mut want = vec![(me(&c1), 2), (me(&c2), 1)];
    want.sort();
    assert_eq!(owners, want, "each owner once, with its number of values");
    let listed = c1.list("class_*").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].kind, listed[0].values.len()), (Kind::Group, 3));
}

#[test]
fn a_rate_limiter_shows_its_rate_what_is_left_and_when_the_next_permit_comes_back() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "inspect:rate";
    let api = client.rate_limiter(name);
    assert!(api
        .try_set_rate(redlatch::RateType::Overall, 5, Duration::from_secs(60))
        .unwrap());
    let fresh = inspect(&client, name);
    assert_eq!(fresh.kind, Kind::RateLimiter);
    let rate = fresh.rate.expect("a rate limiter's state");
    assert_eq!((rate.available, rate.next_back_in), (Some(5), None));
    assert_eq!(fresh.keys, [name], "nothing taken: the config alone");

    api.acquire(2).unwrap();
    let found = inspect(&client, name);
    assert_eq!(
        (found.kind, found.key_type.as_str()),
        (Kind::RateLimiter, "hash")
    );
    assert!(found.holders.is_empty() && found.queue.is_empty());
    let rate = found.rate.expect("a rate limiter's state");
    assert_eq!(rate.config.rate_type, redlatch::RateType::Overall);
    assert_eq!(
        (rate.config.rate, rate.config.interval),
        (5, Duration::from_secs(60))
    );
    assert_eq!(rate.available, Some(3));
    let back = rate.next_back_in.expect("2 permits were taken");
    assert!(
        back > Duration::from_secs(55) && back <= Duration::from_secs(60),
        "{back:?}"
    );
    assert_eq!(rate.available, Some(api.status().unwrap().available));
    assert!(rate.clients.is_empty());
    assert_eq!(
        found.keys,
        [name, "{inspect:rate}:value", "{inspect:rate}:permits"]
    );
    assert_eq!(found.subscribers, Some(0));

    // A count that cannot be right is recounted from the permits taken, as an acquire does.
    let _: () = redis::cmd("SET")
        .arg("{inspect:rate}:value")
        .arg(40)
        .query(&mut server.conn())
        .unwrap();
    let recounted = inspect(&client, name).rate.unwrap();
    assert_eq!(recounted.available, Some(3));

    // A waiter for more than is left is a client waiting on the limiter's channel.
    let other = Client::open(server.url()).unwrap();
    let waiter = {
        let other = other.clone();
        thread::spawn(move || {
            other
                .rate_limiter("inspect:rate")
                .try_acquire_for(5, Duration::from_secs(20))
        })
    };
    support::await_waiting(&other, 1);
    assert_eq!(inspect(&client, name).subscribers, Some(1));
    assert_eq!(api.release(2).unwrap(), 2);
    let admitted = waiter.join().unwrap().unwrap();
    assert_eq!(admitted.map(|a| a.permits), Some(5));
    let after = inspect(&client, name).rate.unwrap();
    assert_eq!(after.available, Some(0));
}

#[test]
fn a_per_client_rate_limiter_shows_each_clients_permits_and_list_groups_its_keys() {
    let server = RedisServer::new();
    let (a, b) = (client(&server), client(&server));
    let name = "rl:api";
    let type_ = redlatch::RateType::PerClient;
    assert!(a
        .rate_limiter(name)
        .try_set_rate(type_, 3, Duration::from_secs(60))
        .unwrap());
    a.rate_limiter(name).acquire(1).unwrap();
    b.rate_limiter(name).acquire(2).unwrap();
    let found = inspect(&a, name);
    assert_eq!(found.kind, Kind::RateLimiter);
    let rate = found.rate.clone().unwrap();
    assert_eq!(rate.config.rate_type, type_);
    assert_eq!(rate.available, None, "per client: no one count");
    let mut left: Vec<(String, u64)> = rate
        .clients
        .iter()
        .map(|c| (c.client_id.clone(), c.available))
        .collect();
    left.sort();
    let mut want = vec![(a.id().to_owned(), 2), (b.id().to_owned(), 1)];
    want.sort();
    assert_eq!(left, want);
    assert!(rate.clients.iter().all(|c| c.next_back_in.is_some()));
    let mut keys = found.keys.clone();
    keys.sort();
    let mut want: Vec<String> = vec![name.to_owned()];
    for id in [a.id(), b.id()] {
        want.push(format!("{{rl:api}}:value:{id}"));
        want.push(format!("{{rl:api}}:permits:{id}"));
    }
    want.sort();
    assert_eq!(keys, want);

    // Keys laid out as a limiter's, beside names that are none: another application's.
    let mut conn = server.conn();
    let _: () = redis::cmd("SET")
        .arg("{rl:stray}:value")
        .arg(7)
        .query(&mut conn)
        .unwrap();
    let _lock = a.lock("rl:lock").lock().unwrap();
    let _: () = redis::cmd("SET")
        .arg("{rl:lock}:value")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let listed = a.list("*").unwrap();
    let rows: Vec<(&str, Kind)> = listed.iter().map(|i| (i.name.as_str(), i.kind)).collect();
    assert_eq!(
        rows,
        [
            ("rl:api", Kind::RateLimiter),
            ("rl:lock", Kind::Reentrant),
            ("{rl:lock}:value", Kind::Unknown),
            ("{rl:stray}:value", Kind::SemaphoreOrLatch),
        ]
    );
    let limiter = &listed[0];
    let mut listed_keys = limiter.keys.clone();
    listed_keys.sort();
    assert_eq!(listed_keys, keys, "every bucket grouped under its limiter");
    assert_eq!(limiter.rate.as_ref().unwrap().clients.len(), 2);
    assert_eq!(listed[1].keys, ["rl:lock"]);
}
