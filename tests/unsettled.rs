//! An acquire whose reply never came (the server paused past the response timeout) leaves
//! nothing behind: once the server answers, what the acquire took when it ran is given back,
//! by the watchdog thread or by the owner's next call on the lock.

mod support;

use std::time::Duration;

use redlatch::{Client, Config, Lock, MultiLock, ValueCodec};
use support::proxy::Proxy;
use support::{wait_until, RedisServer};

const REPLY: Duration = Duration::from_millis(300);
/// A settle runs within a second of the server answering; generous for a loaded machine.
const SETTLED: Duration = Duration::from_secs(15);

fn client(server: &RedisServer) -> Client {
    client_at(server.url())
}

/// A client of the server at `url` (a proxy's, say) that gives up on a reply soon.
fn client_at(url: String) -> Client {
    let config = Config::builder(url)
        .response_timeout(REPLY)
        .connect_timeout(REPLY)
        .retry_attempts(0)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    // The pub/sub connection opens before the server pauses.
    drop(client.lock("warm-up").lock().unwrap());
    client
}

fn keys(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    // Unlock latches expire by themselves; a fenced lock's token counter stays by design.
    keys.retain(|k| !k.contains("unlock_latch") && !k.starts_with("redisson_lock_token"));
    keys.sort();
    keys
}

/// The hold counts in lock `name`'s hash, read raw.
fn hold_counts(server: &RedisServer, name: &str) -> Vec<i64> {
    redis::cmd("HVALS")
        .arg(name)
        .query(&mut server.conn())
        .unwrap()
}

/// The server paused while `acquire` runs: it fails with a timeout; the server, resumed, runs
/// the queued acquire. A connection is opened first (a timeout drops the pool's), so that the
/// acquire is sent at once rather than stalling in the handshake of a new one.
fn lost_reply<T: std::fmt::Debug>(
    server: &RedisServer,
    client: &Client,
    acquire: impl FnOnce() -> redlatch::Result<T>,
) {
    client.lock("warm-up").is_locked().unwrap();
    server.stop();
    let outcome = acquire();
    server.cont();
    let err = outcome.expect_err("no reply while the server is paused");
    assert!(err.is_timeout(), "{err:?}");
}

type Make = fn(&Client, &str) -> Lock;

fn each_kind() -> [(&'static str, Make); 7] {
    [
        ("lock", support::make_lock),
        ("fair", support::make_fair_lock),
        ("spin", |c, n| c.spin_lock(n)),
        ("fenced", support::make_fenced_lock),
        ("non-reentrant", support::make_non_reentrant_lock),
        ("read", |c, n| c.read_write_lock(n).read()),
        ("write", |c, n| c.read_write_lock(n).write()),
    ]
}

#[test]
fn a_lost_acquire_reply_leaves_no_hold_once_the_server_answers() {
    let server = RedisServer::new();
    let client = client(&server);
    for (kind, make) in each_kind() {
        let lock = make(&client, "job");
        lost_reply(&server, &client, || lock.lock());
        assert!(
            wait_until(SETTLED, || keys(&server).iter().all(|k| !k.contains("job"))),
            "{kind}: left behind {:?}",
            keys(&server)
        );
        // The lock is free for anybody.
        let other = Client::open(server.url()).unwrap();
        let guard = make(&other, "job").try_lock().unwrap();
        assert!(guard.is_some(), "{kind}: free");
    }
}

#[test]
fn a_reentry_after_a_lost_reply_counts_one_hold_and_its_unlock_frees_the_lock() {
    let server = RedisServer::new();
    let client = client(&server);
    for (kind, make) in each_kind() {
        if kind == "non-reentrant" {
            continue;
        }
        let lock = make(&client, "job");
        lost_reply(&server, &client, || {
            lock.try_lock_for(Duration::from_millis(100))
        });
        // At once: the owner's own call settles first (unless the watchdog has already).
        let guard = lock
            .try_lock_for(Duration::from_secs(10))
            .unwrap()
            .expect("acquired");
        assert_eq!(lock.hold_count().unwrap(), 1, "{kind}");
        guard.unlock().unwrap();
        assert!(
            keys(&server).iter().all(|k| !k.contains("job")),
            "{kind}: {:?}",
            keys(&server)
        );
    }
}

#[test]
fn a_held_reentrant_lock_keeps_its_hold_when_a_reentry_reply_is_lost() {
    let server = RedisServer::new();
    let client = client(&server);
    let lock = client.lock("job");
    let held = lock.lock().unwrap();
    lost_reply(&server, &client, || lock.lock());
    // The re-entry ran when the server resumed (count 2); settled back to the guard's one.
    assert!(wait_until(SETTLED, || hold_counts(&server, "job") == [1]));
    held.unlock().unwrap();
    assert!(keys(&server).iter().all(|k| !k.contains("job")));
}

#[test]
fn a_queued_fair_waiter_whose_reply_was_lost_leaves_the_queue() {
    let server = RedisServer::new();
    let client = client(&server);
    let other = Client::open(server.url()).unwrap();
    let held = other.fair_lock("job").lock().unwrap();
    let lock = client.fair_lock("job");
    lost_reply(&server, &client, || lock.lock());
    let mut conn = server.conn();
    assert!(wait_until(SETTLED, || {
        let queued: i64 = redis::cmd("LLEN")
            .arg("redisson_lock_queue:{job}")
            .query(&mut conn)
            .unwrap();
        queued == 0
    }));
    // The holder is the other client's only.
    let fields: Vec<String> = redis::cmd("HKEYS").arg("job").query(&mut conn).unwrap();
    assert_eq!(fields.len(), 1);
    assert!(fields[0].starts_with(other.owner_id().split(':').next().unwrap()));
    held.unlock().unwrap();
    assert!(lock.try_lock().unwrap().is_some());
}

#[test]
fn a_hold_with_an_explicit_lease_is_not_given_back_by_a_settle() {
    let server = RedisServer::new();
    let client = client(&server);
    // The second acquire is refused (non-reentrant): it took nothing, and the one hold, the
    // guard's, stays: its release settles first, and finds the hold it knows of.
    let lock = client
        .non_reentrant_lock("job")
        .with_lease(Duration::from_secs(60));
    let held = lock.lock().unwrap();
    lost_reply(&server, &client, || lock.try_lock());
    let fields: Vec<(String, i64)> = redis::cmd("HGETALL")
        .arg("job")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert_eq!(fields[0].1, 1);
    held.unlock().unwrap();
    assert!(keys(&server).iter().all(|k| !k.contains("job")));
}

#[test]
fn permits_taken_by_an_acquire_whose_reply_was_lost_are_given_back() {
    let server = RedisServer::new();
    let client = client(&server);
    let semaphore = client.permit_expirable_semaphore("pool");
    assert!(semaphore.try_set_permits(3).unwrap());
    // The script loaded: else the paused server answers the lost call with NOSCRIPT.
    drop(semaphore.acquire(Duration::from_secs(1)).unwrap());
    lost_reply(&server, &client, || {
        semaphore.acquire_many(2, Duration::from_secs(600))
    });
    assert!(
        wait_until(SETTLED, || semaphore.acquired_permits().unwrap() == 0),
        "{} permits still out",
        semaphore.acquired_permits().unwrap()
    );
    assert_eq!(semaphore.available_permits().unwrap(), 3);
}

#[test]
fn semaphore_permits_taken_by_an_acquire_whose_reply_was_lost_are_given_back() {
    let server = RedisServer::new();
    let client = client(&server);
    let semaphore = client.semaphore("pool");
    assert!(semaphore.try_set_permits(3).unwrap());
    // The script loaded: else the paused server answers the lost call with NOSCRIPT.
    drop(semaphore.acquire(1).unwrap());
    lost_reply(&server, &client, || semaphore.acquire(2));
    assert!(
        wait_until(SETTLED, || semaphore.available_permits().unwrap() == 3),
        "{} permits available",
        semaphore.available_permits().unwrap()
    );
    // Nothing more is given back later.
    let other = Client::open(server.url()).unwrap();
    let taken = other.semaphore("pool").try_acquire(3).unwrap();
    assert!(taken.is_some());
    taken.unwrap().forget();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(semaphore.available_permits().unwrap(), 0);
}

#[test]
fn a_semaphore_release_whose_reply_was_lost_gives_the_permits_back_once() {
    let server = RedisServer::new();
    let client = client(&server);
    let semaphore = client.semaphore("pool");
    assert!(semaphore.try_set_permits(2).unwrap());
    drop(semaphore.acquire(1).unwrap());
    let permit = semaphore.acquire(1).unwrap();
    assert_eq!(semaphore.available_permits().unwrap(), 1);
    lost_reply(&server, &client, || permit.release());
    assert!(wait_until(SETTLED, || {
        semaphore.available_permits().unwrap() == 2
    }));
    // The release ran when the server resumed, and its retry found the latch: once only.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(semaphore.available_permits().unwrap(), 2);
}

#[test]
fn an_unlock_whose_reply_was_lost_releases_one_hold_once() {
    // No reentrant kind's unlock takes a latch: its lost reply is settled by the holds left.
    let server = RedisServer::new();
    let client = client(&server);
    for (kind, make) in each_kind() {
        if kind == "non-reentrant" {
            continue;
        }
        let lock = make(&client, "job");
        let outer = lock.lock().unwrap();
        let inner = lock.lock().unwrap();
        lost_reply(&server, &client, || inner.unlock());
        // The owner's count fields (a read-write lock's hash also has its `mode`).
        let counts = || -> Vec<i64> {
            let all: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg("job")
                .query(&mut server.conn())
                .unwrap();
            all.iter()
                .filter(|(field, _)| field != "mode")
                .map(|(_, v)| v.parse().unwrap())
                .collect()
        };
        assert!(
            wait_until(SETTLED, || counts() == [1]),
            "{kind}: {:?}",
            counts()
        );
        // The outer guard's release settles first: a settle that released a second hold
        // would leave it nothing to release (`LockLost`).
        outer.unlock().unwrap();
        assert!(
            keys(&server).iter().all(|k| !k.contains("job")),
            "{kind}: {:?}",
            keys(&server)
        );
    }
}

#[test]
fn a_lost_reply_of_a_last_unlock_frees_the_lock_for_others() {
    let server = RedisServer::new();
    let client = client(&server);
    let lock = client.lock("job");
    let guard = lock.lock().unwrap();
    lost_reply(&server, &client, || guard.unlock());
    let other = Client::open(server.url()).unwrap();
    let taken = other
        .lock("job")
        .try_lock_for(SETTLED)
        .unwrap()
        .expect("the lock is free once the server answers");
    taken.unlock().unwrap();
    assert!(keys(&server).is_empty(), "{:?}", keys(&server));
}

#[test]
fn a_settle_the_owner_could_not_finish_is_finished_by_the_watchdog() {
    let server = RedisServer::new();
    // A lease so long that no renewal wakes the watchdog thread meanwhile.
    let config = Config::builder(server.url())
        .response_timeout(REPLY)
        .connect_timeout(REPLY)
        .retry_attempts(0)
        .watchdog_timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    drop(client.lock("warm-up").lock().unwrap());
    let lock = client.lock("job");
    client.lock("warm-up").is_locked().unwrap();
    server.stop();
    assert!(lock.lock().unwrap_err().is_timeout());
    // The owner's next call settles first, and fails: the server is still paused.
    assert!(lock.lock().is_err());
    server.cont();
    // The owner calls no more: the watchdog thread settles.
    assert!(
        wait_until(SETTLED, || keys(&server).iter().all(|k| !k.contains("job"))),
        "left behind {:?}",
        keys(&server)
    );
}

#[test]
fn a_lock_set_whose_acquire_reply_was_lost_leaves_no_hold_once_the_server_answers() {
    let server = RedisServer::new();
    let client = client(&server);
    let names: Vec<String> = (0..200).map(|i| format!("set-job:{i}")).collect();
    // The scripts loaded: the lost call runs when the server resumes.
    client
        .lock_set(["set-warm"])
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    // One of them held by this thread already: its own hold stays.
    let held = client.lock(&names[9]).lock().unwrap();
    lost_reply(&server, &client, || client.lock_set(&names).lock());
    assert!(
        wait_until(SETTLED, || keys(&server)
            .iter()
            .all(|k| !k.contains("set-job") || k == "set-job:9")),
        "left behind {:?}",
        keys(&server)
    );
    assert!(wait_until(SETTLED, || hold_counts(&server, "set-job:9") == [1]));
    held.unlock().unwrap();
    let other = Client::open(server.url()).unwrap();
    assert!(other.lock_set(&names).try_lock().unwrap().is_some());
}

/// `acquire` loses its request on the way (the first that contains `marker`): it fails, the
/// server never runs it, and its doubt is settled (on the watchdog thread: the owner makes no
/// call on that hold meanwhile).
fn never_ran<T: std::fmt::Debug>(
    proxy: &Proxy,
    client: &Client,
    marker: &str,
    acquire: impl FnOnce() -> redlatch::Result<T>,
) {
    let cuts = proxy.cuts();
    proxy.lose_next_request_containing(marker.as_bytes());
    acquire().expect_err("its request was lost");
    assert_eq!(proxy.cuts(), cuts + 1, "the request was lost");
    assert!(
        wait_until(SETTLED, || client.metrics().unsettled == 0),
        "the lost acquire is settled"
    );
}

/// Raw fields and values of hash `key`.
fn hash(server: &RedisServer, key: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap();
    fields.sort();
    fields
}

/// A group lock of StringCodec `values`.
fn group(c: &Client, values: &[&str]) -> Lock {
    let values = values.iter().map(|v| ValueCodec::String.encode_str(v));
    c.group_lock("class", values)
}

/// Redisson's field of group value `value` (as another client's hold of it shows it).
fn group_field(server: &RedisServer, value: &str) -> String {
    let other = Client::open(server.url()).unwrap();
    let guard = group(&other, &[value]).lock().unwrap();
    let owner = format!("{}:", other.id());
    let field = hash(server, "class")
        .into_iter()
        .find(|(f, v)| v.starts_with(&owner) && !f.contains(':'))
        .map(|(f, _)| f)
        .expect("the value's field");
    guard.unlock().unwrap();
    field
}

/// The owner's lock counts in group `class`, by value field.
fn group_counts(server: &RedisServer) -> Vec<(String, String)> {
    hash(server, "class")
        .into_iter()
        .filter(|(f, _)| f.ends_with(":lock_count"))
        .collect()
}

// A settle gives back only what its own acquire could have taken: never what the same owner
// holds elsewhere. A group acquire of {v0, v3, v5} whose request was lost is not settled by
// the first value's count, which counts the thread's live hold of {v0, v2, v5} too: that
// would free v0 and v5 of the live hold behind its guard.
#[test]
fn a_settle_never_gives_back_a_hold_the_owner_has_elsewhere() {
    let server = RedisServer::new();
    let proxy = Proxy::start(server.port());
    let client = client_at(proxy.url());
    let other = Client::open(server.url()).unwrap();
    let v3 = group_field(&server, "v3");

    // A group: an acquire of an overlapping set that never ran.
    let live = group(&client, &["v0", "v2", "v5"]).lock().unwrap();
    never_ran(&proxy, &client, &v3, || {
        group(&client, &["v0", "v3", "v5"]).try_lock()
    });
    assert!(!live.is_lost());
    let counts = group_counts(&server);
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(counts.iter().all(|(_, n)| n == "1"), "{counts:?}");
    assert!(group(&other, &["v5"]).try_lock().unwrap().is_none());
    assert!(group(&other, &["v0"]).try_lock().unwrap().is_none());
    // ...and one that ran: it alone is given back.
    lost_reply(&server, &client, || {
        group(&client, &["v0", "v3", "v5"]).try_lock()
    });
    assert!(
        wait_until(SETTLED, || client.metrics().unsettled == 0
            && group_counts(&server).len() == 3),
        "{:?}",
        hash(&server, "class")
    );
    assert!(group_counts(&server).iter().all(|(_, n)| n == "1"));
    assert!(group(&other, &["v5"]).try_lock().unwrap().is_none());
    assert!(group(&other, &["v3"]).try_lock().unwrap().is_some());
    assert!(!live.is_lost());
    live.unlock().unwrap();
    assert!(hash(&server, "class").is_empty());

    // A lock set over a lock the thread holds.
    let held = client.lock("ls:3").lock().unwrap();
    never_ran(&proxy, &client, "ls:1", || {
        client.lock_set(["ls:1", "ls:2", "ls:3"]).try_lock()
    });
    assert_eq!(hold_counts(&server, "ls:3"), [1]);
    assert!(other.lock("ls:3").try_lock().unwrap().is_none());
    held.unlock().unwrap();

    // A MultiLock whose first member the thread holds.
    let held = client.lock("ml:a").lock().unwrap();
    let multi = MultiLock::new([client.lock("ml:a"), client.lock("ml:b")]).unwrap();
    never_ran(&proxy, &client, "ml:a", || multi.try_lock());
    assert_eq!(hold_counts(&server, "ml:a"), [1]);
    assert!(other.lock("ml:a").try_lock().unwrap().is_none());
    held.unlock().unwrap();

    // A read lock taken by the thread that holds the write lock.
    let rw = client.read_write_lock("rw");
    let write = rw.write().lock().unwrap();
    let read = rw.read().lock().unwrap();
    never_ran(&proxy, &client, "rw", || rw.read().try_lock());
    assert!(!read.is_lost() && !write.is_lost());
    let owner = client.owner_id();
    let fields = hash(&server, "rw");
    assert!(fields.contains(&(owner.clone(), "1".into())), "{fields:?}");
    assert!(
        fields.contains(&(format!("{owner}:write"), "1".into())),
        "{fields:?}"
    );
    assert!(other
        .read_write_lock("rw")
        .read()
        .try_lock()
        .unwrap()
        .is_none());
    read.unlock().unwrap();
    write.unlock().unwrap();
    assert!(
        keys(&server)
            .iter()
            .all(|k| !k.contains("ls:") && !k.contains("ml:") && !k.contains("rw")),
        "{:?}",
        keys(&server)
    );
}
