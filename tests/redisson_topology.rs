//! Against Redisson on a Redis Cluster and with Sentinel: a Java peer (tests/java-peer) in
//! cluster or sentinel mode and redlatch share `RLock`s and wake each other by pub/sub.
//!
//! On a cluster of 3 masters, for each pub/sub mode Redisson has (sharded `ON`, `AUTO`, and
//! plain `OFF`, redlatch set to the same): hand-overs both ways for names on every master,
//! with the subscriptions and the publish commands checked on the node that owns each name's
//! slot. With Sentinel: a hand-over before a failover, and after it both sides on the new
//! master. Skipped, with a printed reason, where `java` or `mvn` is missing (and the sharded
//! cases on a server without sharded pub/sub).

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redis::Commands;
use redlatch::{Client, Config, ShardedSubscriptionMode};
use support::binary::Need;
use support::cluster::RedisCluster;
use support::java::{monotonic_ns, versions, JavaPeer, NEWEST};
use support::sentinel::{SentinelConfig, SentinelGroup};
use support::{await_waiting, command_calls, subscribers, wait_until, RedisServer};

/// A wake-up by message comes well within this, even on a loaded machine; a lease running
/// out (30 s, renewed by the holder's watchdog) never would.
const WAKE_BOUND: Duration = Duration::from_secs(5);
/// How long Redisson has to subscribe a Java waiter (a JVM on a loaded machine).
const SUBSCRIBE_BOUND: Duration = Duration::from_secs(20);

/// `redis://127.0.0.1:P` for Redisson (its URIs take no path).
fn redisson_url(node: &RedisServer) -> String {
    format!("redis://127.0.0.1:{}", node.port())
}

/// The time between two `monotonic_ns` readings (the later first).
fn elapsed(later: u64, earlier: u64) -> Duration {
    Duration::from_nanos(later.saturating_sub(earlier))
}

/// The lock's fields on `node`: owner and hold count.
fn holders(node: &RedisServer, name: &str) -> Vec<(String, u32)> {
    node.conn().hgetall(name).unwrap()
}

/// A Rust thread blocked in `lock.lock()`: it reports the moment it acquired and its owner
/// id, then holds until told to release.
struct RustWaiter {
    woke: mpsc::Receiver<(u64, String)>,
    release: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl RustWaiter {
    fn spawn(client: &Client, name: &str) -> RustWaiter {
        let lock = client.lock(name);
        let client = client.clone();
        let (woke_tx, woke) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let guard = lock.lock().unwrap();
            woke_tx.send((monotonic_ns(), client.owner_id())).unwrap();
            release_rx.recv().unwrap();
            guard.unlock().unwrap();
        });
        RustWaiter {
            woke,
            release,
            thread,
        }
    }

    /// When it acquired and as whom, panicking unless that came within [`WAKE_BOUND`].
    fn woke(&self, what: &str) -> (u64, String) {
        self.woke.recv_timeout(WAKE_BOUND).unwrap_or_else(|_| {
            panic!("the Rust waiter did not wake within {WAKE_BOUND:?} ({what})")
        })
    }

    fn release(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// Names `prefix:N` until each master owns one: one name per master, in port order.
fn one_name_per_master(cluster: &RedisCluster, prefix: &str) -> Vec<String> {
    let masters: Vec<u16> = cluster.masters().iter().map(|m| m.port()).collect();
    let mut names: Vec<(u16, String)> = Vec::new();
    for i in 0.. {
        let name = format!("{prefix}:{i}");
        let port = cluster.node_for_slot(cluster.slot_of(&name)).port();
        if !names.iter().any(|(p, _)| *p == port) {
            names.push((port, name));
        }
        if names.len() == masters.len() {
            break;
        }
    }
    names.sort();
    names.into_iter().map(|(_, n)| n).collect()
}

/// Publish commands (`SPUBLISH` or `PUBLISH`, scripts' calls included) served by `node`.
fn published(node: &RedisServer, sharded: bool) -> u64 {
    command_calls(
        &mut node.conn(),
        if sharded { "spublish" } else { "publish" },
    )
}

/// Both kinds of publish command served by each master, in port order.
fn publish_counts(cluster: &RedisCluster) -> Vec<(u16, u64, u64)> {
    let mut counts: Vec<(u16, u64, u64)> = cluster
        .masters()
        .iter()
        .map(|m| (m.port(), published(m, true), published(m, false)))
        .collect();
    counts.sort_unstable();
    counts
}

/// `before` with one more publish of the kind `sharded` names on the master at `port`.
fn one_more_publish(before: &[(u16, u64, u64)], port: u16, sharded: bool) -> Vec<(u16, u64, u64)> {
    before
        .iter()
        .map(|&(p, s, n)| match (p == port, sharded) {
            (true, true) => (p, s + 1, n),
            (true, false) => (p, s, n + 1),
            _ => (p, s, n),
        })
        .collect()
}

/// Subscribers of `channel` on every master, both kinds: `(port, sharded, plain)` (no sharded
/// ones on a server without sharded pub/sub, Redis 6).
fn subscriptions(cluster: &RedisCluster, channel: &str) -> Vec<(u16, i64, i64)> {
    let has_sharded = support::auto_is_sharded();
    let mut subs: Vec<(u16, i64, i64)> = cluster
        .masters()
        .iter()
        .map(|m| {
            let mut conn = m.conn();
            let sharded = if has_sharded {
                subscribers(&mut conn, channel, true)
            } else {
                0
            };
            (m.port(), sharded, subscribers(&mut conn, channel, false))
        })
        .collect();
    subs.sort_unstable();
    subs
}

/// One subscriber of `channel`, of the kind `sharded` names, on the master at `owner`, and
/// none anywhere else.
fn only_subscriber_on(owner: u16, sharded: bool, cluster: &RedisCluster) -> Vec<(u16, i64, i64)> {
    let mut subs: Vec<(u16, i64, i64)> = cluster
        .masters()
        .iter()
        .map(|m| match (m.port() == owner, sharded) {
            (true, true) => (m.port(), 1, 0),
            (true, false) => (m.port(), 0, 1),
            _ => (m.port(), 0, 0),
        })
        .collect();
    subs.sort_unstable();
    subs
}

/// On a fresh 3-master cluster, Redisson `version` set to `java_mode` (`--sharded`; `None`:
/// not set, for versions before the setting) and redlatch to `rust_mode`, which both pick
/// `sharded` pub/sub: for one name on each master, a Java hold
/// blocks a Rust waiter that Java's unlock wakes, and a Rust hold blocks a Java waiter that
/// redlatch's release wakes; each waiter subscribes on the name's master only, and each
/// release publishes there only, with the command of that mode.
fn cluster_handovers(
    version: &str,
    java_mode: Option<&str>,
    rust_mode: ShardedSubscriptionMode,
    sharded: bool,
) {
    let cluster = RedisCluster::new(3, 0);
    let client = Client::new(
        Config::cluster(cluster.urls())
            .sharded_subscription_mode(rust_mode)
            .connect_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut args = vec!["--cluster".to_owned()];
    args.extend(cluster.nodes().iter().map(redisson_url));
    if let Some(mode) = java_mode {
        args.extend(["--sharded".to_owned(), mode.to_owned()]);
    }
    let mut java = JavaPeer::start(version, &args);
    let kind = if sharded { "sharded" } else { "plain" };
    let java_mode = java_mode.unwrap_or("unset");

    for name in one_name_per_master(&cluster, &format!("topo:{version}:{java_mode}")) {
        let owner = cluster.node_for_key(&name);
        let port = owner.port();
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let lock = client.lock(&name);

        // Java holds; a Rust waiter blocks, subscribed on the name's master.
        java.call("a", &format!("lock lock {name}")).value();
        let java_owner = java.owner("a");
        assert_eq!(holders(owner, &name), vec![(java_owner, 1)]);
        assert!(lock.try_lock().unwrap().is_none());
        let waiter = RustWaiter::spawn(&client, &name);
        await_waiting(&client, 1);
        assert_eq!(
            subscriptions(&cluster, &channel),
            only_subscriber_on(port, sharded, &cluster),
            "redlatch's waiter on {name} listens ({kind}) on its master {port} only"
        );
        // Java's unlock publishes on the name's master, with the mode's command, and wakes it.
        let before = publish_counts(&cluster);
        let released = java.call("a", &format!("unlock lock {name}"));
        released.value();
        let (woke, rust_owner) = waiter.woke(&format!("{name}, {kind}, Java's unlock"));
        let java_to_rust = elapsed(woke, released.t0);
        assert!(java_to_rust < WAKE_BOUND, "{java_to_rust:?}");
        assert_eq!(
            publish_counts(&cluster),
            one_more_publish(&before, port, sharded),
            "Redisson's unlock of {name} published ({kind}) on its master {port} only"
        );
        assert_eq!(holders(owner, &name), vec![(rust_owner, 1)]);
        assert_eq!(
            java.call("b", &format!("trylock lock {name} 0")).value(),
            "false"
        );
        waiter.release();
        assert!(!lock.is_locked().unwrap());
        // redlatch's last waiter unsubscribes: the subscriber count seen next is Redisson's.
        assert!(
            wait_until(Duration::from_secs(5), || subscriptions(&cluster, &channel)
                .iter()
                .all(|&(_, s, p)| s == 0 && p == 0)),
            "redlatch's subscription to {channel} stays: {:?}",
            subscriptions(&cluster, &channel)
        );

        // redlatch holds; a Java waiter blocks, subscribed on the name's master.
        let guard = lock.lock().unwrap();
        assert_eq!(holders(owner, &name), vec![(client.owner_id(), 1)]);
        java.send("b", &format!("lock lock {name}"));
        let expected = only_subscriber_on(port, sharded, &cluster);
        assert!(
            wait_until(SUBSCRIBE_BOUND, || subscriptions(&cluster, &channel)
                == expected),
            "Redisson's waiter on {name} did not listen ({kind}) on its master {port} only: {:?}",
            subscriptions(&cluster, &channel)
        );
        // redlatch's release publishes on the name's master, with the mode's command, and
        // wakes it.
        let before = publish_counts(&cluster);
        let start = monotonic_ns();
        guard.unlock().unwrap();
        let acquired = java.reply("b");
        acquired.value();
        let rust_to_java = elapsed(acquired.t1, start);
        assert!(rust_to_java < WAKE_BOUND, "{rust_to_java:?}");
        assert_eq!(
            publish_counts(&cluster),
            one_more_publish(&before, port, sharded),
            "redlatch's release of {name} published ({kind}) on its master {port} only"
        );
        assert_eq!(holders(owner, &name), vec![(java.owner("b"), 1)]);
        assert!(lock.is_locked().unwrap());
        java.call("b", &format!("unlock lock {name}")).value();
        assert!(!lock.is_locked().unwrap());
        eprintln!(
            "cluster, Redisson {version} --sharded {java_mode}, redlatch {rust_mode:?} ({kind}): {name} on \
             {port}: Java->Rust {java_to_rust:?}, Rust->Java {rust_to_java:?}"
        );
    }
}

#[test]
fn cluster_sharded_pubsub_wakes_both_ways_on_every_master() {
    require_java!();
    require!(Need::ShardedPubSub);
    cluster_handovers(NEWEST, Some("on"), ShardedSubscriptionMode::On, true);
}

#[test]
fn cluster_auto_pubsub_wakes_both_ways_on_every_master() {
    require_java!();
    // Both ask the cluster (PUBSUB SHARDNUMSUB): sharded where it has it, else plain.
    cluster_handovers(
        NEWEST,
        Some("auto"),
        ShardedSubscriptionMode::Auto,
        support::auto_is_sharded(),
    );
}

#[test]
fn cluster_plain_pubsub_wakes_both_ways_on_every_master() {
    require_java!();
    cluster_handovers(NEWEST, Some("off"), ShardedSubscriptionMode::Off, false);
}

/// Redisson versions without the `shardedSubscriptionMode` setting (3.29.0 brought it), in
/// their only mode, with redlatch set to match: from 3.22.0 Redisson uses sharded pub/sub
/// where the cluster has it (it tries `SPUBLISH` at start), as redlatch's `Auto` does;
/// before 3.22.0 it has plain pub/sub only, so redlatch must be set `Off` on a cluster that
/// has sharded pub/sub.
#[test]
fn cluster_older_redisson_wakes_both_ways_in_its_only_mode() {
    require_java!();
    let older: Vec<String> = versions().into_iter().filter(|v| v != NEWEST).collect();
    if older.is_empty() {
        eprintln!("no Redisson version but {NEWEST} asked for: nothing to run");
    }
    for version in older {
        let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap()).collect();
        if parts >= vec![3, 29] {
            continue; // has the setting: the tests above
        }
        if parts >= vec![3, 22] {
            cluster_handovers(
                &version,
                None,
                ShardedSubscriptionMode::Auto,
                support::auto_is_sharded(),
            );
        } else {
            cluster_handovers(&version, None, ShardedSubscriptionMode::Off, false);
        }
    }
}

/// Subscribers of `channel` on `server` (plain pub/sub, as with Sentinel).
fn numsub(server: &RedisServer, channel: &str) -> i64 {
    support::numsub(&mut server.conn(), channel)
}

#[test]
fn sentinel_hand_over_before_and_after_a_failover() {
    require_java!();
    let group = SentinelGroup::with_config(SentinelConfig {
        replicas: 1,
        ..SentinelConfig::default()
    });
    let client = Client::new(
        Config::sentinel(group.sentinel_urls(), group.master_name())
            .connect_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_secs(1))
            .retry_attempts(10)
            .retry_delay(Duration::from_millis(200))
            .build()
            .unwrap(),
    )
    .unwrap();
    let mut args = vec!["--sentinel".to_owned(), group.master_name().to_owned()];
    args.extend(group.sentinels().iter().map(redisson_url));
    let mut java = JavaPeer::start(NEWEST, &args);
    let name = "topo:sentinel";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let lock = client.lock(name);

    // Before the failover: a Java hold blocks a Rust waiter, which stays blocked while Java
    // holds and wakes on Java's unlock.
    let master = group.master();
    java.call("a", &format!("lock lock {name}")).value();
    assert_eq!(holders(master, name), vec![(java.owner("a"), 1)]);
    let waiter = RustWaiter::spawn(&client, name);
    await_waiting(&client, 1);
    assert_eq!(
        numsub(master, &channel),
        1,
        "redlatch listens on the master"
    );
    assert!(
        waiter.woke.recv_timeout(Duration::from_secs(1)).is_err(),
        "the Rust waiter acquired while Java held"
    );
    assert_eq!(client.metrics().waiting, 1);
    assert_eq!(java.call("a", &format!("count lock {name}")).value(), "1");
    let released = java.call("a", &format!("unlock lock {name}"));
    released.value();
    let (woke, rust_owner) = waiter.woke("Java's unlock, before the failover");
    let before_failover = elapsed(woke, released.t0);
    assert!(before_failover < WAKE_BOUND, "{before_failover:?}");
    assert_eq!(holders(master, name), vec![(rust_owner, 1)]);
    waiter.release();
    assert!(!lock.is_locked().unwrap());

    let (old, new) = group.failover();
    assert_ne!(old, new);
    let new_master = group.server_at(new);
    assert_eq!(new_master.port(), group.master().port());

    // After it: Java takes the lock, on the new master; Rust sees it locked, waits there and
    // wakes on Java's unlock.
    java.call("a", &format!("lock lock {name}")).value();
    assert_eq!(
        holders(new_master, name),
        vec![(java.owner("a"), 1)],
        "Redisson's lock on the new master"
    );
    assert!(lock.is_locked().unwrap());
    assert!(lock.try_lock().unwrap().is_none());
    let waiter = RustWaiter::spawn(&client, name);
    await_waiting(&client, 1);
    assert_eq!(
        numsub(new_master, &channel),
        1,
        "redlatch listens on the new master"
    );
    let released = java.call("a", &format!("unlock lock {name}"));
    released.value();
    let (woke, rust_owner) = waiter.woke("Java's unlock, after the failover");
    let after_failover = elapsed(woke, released.t0);
    assert!(after_failover < WAKE_BOUND, "{after_failover:?}");

    // Rust holds, on the new master; Redisson cannot take it, then waits and wakes on the
    // release.
    assert_eq!(
        holders(new_master, name),
        vec![(rust_owner, 1)],
        "redlatch's lock on the new master"
    );
    assert_eq!(
        java.call("b", &format!("trylock lock {name} 0")).value(),
        "false"
    );
    assert_eq!(
        java.call("b", &format!("locked lock {name}")).value(),
        "true"
    );
    waiter.release();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        new_master, &channel
    ) == 0));
    let guard = lock.lock().unwrap();
    java.send("b", &format!("lock lock {name}"));
    assert!(
        wait_until(SUBSCRIBE_BOUND, || numsub(new_master, &channel) == 1),
        "Redisson did not subscribe on the new master"
    );
    let start = monotonic_ns();
    guard.unlock().unwrap();
    let acquired = java.reply("b");
    acquired.value();
    let rust_to_java = elapsed(acquired.t1, start);
    assert!(rust_to_java < WAKE_BOUND, "{rust_to_java:?}");
    assert_eq!(holders(new_master, name), vec![(java.owner("b"), 1)]);
    java.call("b", &format!("unlock lock {name}")).value();
    assert!(!lock.is_locked().unwrap());
    eprintln!(
        "sentinel {old} -> {new}: Java->Rust {before_failover:?} before, {after_failover:?} \
         after; Rust->Java {rust_to_java:?} after"
    );
}
