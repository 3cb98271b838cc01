//! Replicas: replica-synced acquire (`sync_replicas`), and the failover hazard it narrows.

mod support;

use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error, Lock};
use support::{command_calls, key_exists, RedisServer};

fn synced_client(server: &RedisServer, wait: Duration) -> Client {
    support::client_with(server, |b| {
        b.sync_replicas(1, wait)
            .response_timeout(Duration::from_secs(2))
    })
}

/// Takes `lock` while replication is healthy. On a loaded machine a replica can miss a short
/// `WAIT` right after it linked up; the tests here are about what happens after the cut, so
/// an unconfirmed first acquire (undone by the client) is simply tried again.
fn lock_while_healthy(lock: &Lock) -> redlatch::LockGuard {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match lock.lock() {
            Ok(guard) => return guard,
            Err(e) if e.is_not_replicated() && Instant::now() < deadline => continue,
            Err(e) => panic!("acquire with healthy replication failed: {e}"),
        }
    }
}

fn hold_count(conn: &mut redis::Connection, key: &str, field: &str) -> Option<u32> {
    redis::cmd("HGET").arg(key).arg(field).query(conn).unwrap()
}

/// Every lock kind, by name suffix, with the hash field its holder writes.
fn kinds(client: &Client) -> Vec<(Lock, String)> {
    let owner = client.owner_id();
    vec![
        (client.lock("sync:plain"), owner.clone()),
        (client.fair_lock("sync:fair"), owner.clone()),
        (client.fenced_lock("sync:fenced"), owner.clone()),
        (
            client.read_write_lock("sync:rw").write(),
            format!("{owner}:write"),
        ),
        (client.read_write_lock("sync:rw2").read(), owner),
    ]
}

#[test]
fn with_healthy_replication_every_lock_write_is_on_the_replica_when_the_call_returns() {
    let master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let client = synced_client(&master, Duration::from_secs(1));
    let mut on_replica = replica.conn();
    let mut on_master = master.conn();
    let waits_before = command_calls(&mut on_master, "wait");
    for (lock, field) in kinds(&client) {
        let guard = lock.lock().unwrap();
        // WAIT returned only once the replica had applied the acquire.
        assert_eq!(
            hold_count(&mut on_replica, lock.name(), &field),
            Some(1),
            "{lock:?} on the replica"
        );
        guard.unlock().unwrap();
        assert!(
            !key_exists(&mut on_replica, lock.name()),
            "{lock:?} released"
        );
    }
    // One WAIT per acquire and per unlock, nothing more.
    assert_eq!(command_calls(&mut on_master, "wait") - waits_before, 10);

    // A busy attempt writes nothing and sends no WAIT.
    let other = Client::open(master.url()).unwrap();
    let held = other.lock("sync:busy").lock().unwrap();
    let waits_before = command_calls(&mut on_master, "wait");
    assert!(client.lock("sync:busy").try_lock().unwrap().is_none());
    assert_eq!(command_calls(&mut on_master, "wait"), waits_before);
    drop(held);
}

#[test]
fn an_acquire_no_replica_confirmed_is_undone_and_reported() {
    let master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let client = synced_client(&master, Duration::from_millis(300));
    let mut on_master = master.conn();

    // A first hold, confirmed while replication is healthy.
    let lock = client.lock("sync:cut");
    let first = lock_while_healthy(&lock);
    replica.cut_replication();

    for (kind, field) in kinds(&client) {
        let started = Instant::now();
        match kind.try_lock() {
            Err(Error::NotReplicated {
                name,
                acked,
                wanted,
            }) => assert_eq!((name.as_str(), acked, wanted), (kind.name(), 0, 1)),
            other => panic!("{kind:?}: expected NotReplicated, got {other:?}"),
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(2),
            "{kind:?}: the WAIT timeout bounds the call: {took:?}"
        );
        assert_eq!(
            hold_count(&mut on_master, kind.name(), &field),
            None,
            "{kind:?}: the unconfirmed hold was undone on the master"
        );
    }
    // The fair lock's queue is empty again; the fenced counter moved on (tokens only grow).
    assert!(!key_exists(
        &mut on_master,
        "redisson_lock_queue:{sync:fair}"
    ));
    let token: String = redis::cmd("GET")
        .arg("redisson_lock_token:{sync:fenced}")
        .query(&mut on_master)
        .unwrap();
    assert!(token.parse::<u64>().unwrap() > 1, "{token}");

    // A re-entry is undone to the previous count, and the blocking lock() reports it too.
    assert!(lock.lock().unwrap_err().is_not_replicated());
    assert_eq!(
        hold_count(&mut on_master, "sync:cut", &client.owner_id()),
        Some(1)
    );
    // The unconfirmed unlock still frees the lock on the master (and logs a warning).
    first.unlock().unwrap();
    assert!(!key_exists(&mut on_master, "sync:cut"));
}

#[test]
fn a_killed_replica_makes_acquires_fail_cleanly_and_the_setting_is_opt_in() {
    let master = RedisServer::new();
    let mut replica = RedisServer::replica_of(&master);
    let synced = synced_client(&master, Duration::from_millis(200));
    let plain = Client::open(master.url()).unwrap();
    let mut on_master = master.conn();
    replica.kill();

    let err = synced.lock("sync:dead").try_lock().unwrap_err();
    assert!(err.is_not_replicated(), "{err}");
    assert!(!key_exists(&mut on_master, "sync:dead"));

    // Without the setting nothing waits for replicas: the acquire succeeds at once.
    let waits_before = command_calls(&mut on_master, "wait");
    let started = Instant::now();
    let guard = plain.lock("sync:dead").lock().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "acquired at once"
    );
    guard.unlock().unwrap();
    assert_eq!(command_calls(&mut on_master, "wait"), waits_before);
}

/// The hazard replica sync narrows, reproduced: the master dies before the lock reached the
/// replica, the replica is promoted, and a second client takes the same lock. Both believe
/// they hold it. Fencing keeps the data consistent: the failover also lost the token
/// increment, so both hold the same token, and the resource accepts one holder per token.
#[test]
fn a_failover_before_replication_makes_two_holders_and_fencing_refuses_the_second_writer() {
    let mut master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let a = Client::open(master.url()).unwrap(); // no sync_replicas: the default
    let lock_name = "failover:acct";

    // A first holder, replicated: the counter is at its token t on both nodes, and the
    // release too. (The release is awaited as well as the counter: under load the cut below
    // could otherwise come between the acquire and the release reaching the replica, which
    // would then still hold the lock.)
    let first = a.fenced_lock(lock_name).lock().unwrap();
    let t = first.token().unwrap();
    drop(first);
    assert!(support::wait_until(Duration::from_secs(5), || {
        let mut on_replica = replica.conn();
        let token: Option<String> = redis::cmd("GET")
            .arg("redisson_lock_token:{failover:acct}")
            .query(&mut on_replica)
            .unwrap();
        token == Some(t.to_string()) && !key_exists(&mut on_replica, lock_name)
    }));

    // Replication lags (here: cut), A locks on the master, the master dies (kill -9).
    replica.cut_replication();
    let guard_a = a.fenced_lock(lock_name).lock().unwrap();
    assert_eq!(guard_a.token(), Some(t + 1));
    master.kill();
    replica.promote();

    // B, on the promoted replica, gets the lock at once: two holders.
    let b = Client::open(replica.url()).unwrap();
    let guard_b = b
        .fenced_lock(lock_name)
        .try_lock()
        .unwrap()
        .expect("the promoted replica never saw A's lock");
    assert!(!guard_a.is_lost(), "A cannot know yet: its lease is 30 s");
    // The increment was lost with the master too: the same token was handed out twice.
    assert_eq!(guard_b.token(), guard_a.token());

    // B writes first; A, following the failover to the new master, is refused.
    let resource = b.fenced_resource("failover:acct:data");
    resource.write(&guard_b, "written by B").unwrap();
    let err = resource.write(&guard_a, "written by A").unwrap_err();
    assert!(
        matches!(
            err,
            Error::StaleToken { token, newest, .. } if token == t + 1 && newest == t + 1
        ),
        "{err}"
    );
    assert_eq!(
        resource.read().unwrap().as_deref(),
        Some(&b"written by B"[..])
    );
    // The other order is just as consistent, but it is the stale holder that gets in: the
    // first writer of a token wins. Shown on a second resource.
    let other = b.fenced_resource("failover:acct:other");
    other.write(&guard_a, "written by A").unwrap();
    assert!(other.write(&guard_b, "by B").unwrap_err().is_stale_token());
    assert_eq!(other.read().unwrap().as_deref(), Some(&b"written by A"[..]));

    guard_b.unlock().unwrap();
    // A's unlock goes to the dead master.
    let err = guard_a.unlock().unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
}

/// The same failover with `sync_replicas`: A's acquire is refused while the replica does not
/// confirm, so the promoted replica's lock has a single holder.
#[test]
fn with_sync_replicas_the_failover_leaves_one_holder() {
    let mut master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let a = synced_client(&master, Duration::from_millis(200));
    replica.cut_replication();
    let err = a.fenced_lock("failover:one").lock().unwrap_err();
    assert!(err.is_not_replicated(), "{err}");
    // The undone acquire's token, which the replica never saw.
    let lost: u64 = redis::cmd("GET")
        .arg("redisson_lock_token:{failover:one}")
        .query(&mut master.conn())
        .unwrap();
    master.kill();
    replica.promote();
    let b = Client::open(replica.url()).unwrap();
    let guard_b = b.fenced_lock("failover:one").try_lock().unwrap().unwrap();
    // The counter went with the master; the new one starts above the lost tokens.
    assert!(
        guard_b.token().unwrap() > lost,
        "{:?} after {lost}",
        guard_b.token()
    );
    guard_b.unlock().unwrap();
}

/// A renewal the replicas do not confirm counts as failed: after a whole lease of them the
/// guard is lost, although the master still has the lock (a failover would lose it).
#[test]
fn unconfirmed_renewals_make_the_guard_lost_after_one_lease() {
    let master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let config = Config::builder(master.url().as_str())
        .sync_replicas(1, Duration::from_millis(100))
        .response_timeout(Duration::from_secs(1))
        .watchdog_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let guard = lock_while_healthy(&client.lock("sync:renew"));
    let (tx, lost) = std::sync::mpsc::channel();
    guard.on_lost(move |reason| {
        let _ = tx.send((reason, Instant::now()));
    });
    let cut = Instant::now();
    replica.cut_replication();
    let (reason, at) = lost
        .recv_timeout(Duration::from_secs(5))
        .expect("the guard is reported lost");
    let after = at - cut;
    eprintln!("unconfirmed renewals: lost {after:?} after the cut");
    assert_eq!(reason, redlatch::LostReason::LeaseExpired);
    assert!(after <= Duration::from_millis(1500 + 700), "{after:?}");
    assert!(guard.is_lost());
    let mut on_master = master.conn();
    assert!(
        key_exists(&mut on_master, "sync:renew"),
        "renewed on the master all along"
    );
    assert!(guard.unlock().unwrap_err().is_lock_lost());
}
