//! Redis Cluster (3 masters started by the harness with `redis-cli --cluster create`): every
//! lock kind over names in all slots, helper keys in their lock's slot, sharded pub/sub
//! wake-ups, batched renewals per slot, and a held lock surviving a slot migration (MOVED),
//! a migration in progress (ASK) and a master failover.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use support::cluster::RedisCluster;
use support::RedisServer;

fn client(cluster: &RedisCluster) -> Client {
    client_with(cluster, |b| b)
}

fn client_with(
    cluster: &RedisCluster,
    tune: impl FnOnce(redlatch::ConfigBuilder) -> redlatch::ConfigBuilder,
) -> Client {
    let builder = Config::cluster(cluster.urls())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(2));
    Client::new(tune(builder).build().unwrap()).unwrap()
}

fn exists(node: &RedisServer, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query(&mut node.conn())
        .unwrap();
    n == 1
}

/// `EXISTS` on a node importing the key's slot (which answers only after `ASKING`).
fn exists_importing(node: &RedisServer, key: &str) -> bool {
    let mut conn = node.conn();
    let _: () = redis::cmd("ASKING").query(&mut conn).unwrap();
    let n: i64 = redis::cmd("EXISTS").arg(key).query(&mut conn).unwrap();
    n == 1
}

fn shard_subscribers(node: &RedisServer, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(&mut node.conn())
        .unwrap();
    reply.1
}

/// Names whose slots fall on every master.
fn names_on_every_master(cluster: &RedisCluster, prefix: &str, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}:{i}")).collect();
    let mut ports: Vec<u16> = names
        .iter()
        .map(|k| cluster.node_for_key(k).port())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(
        ports.len(),
        cluster.masters().len(),
        "names spread over all masters"
    );
    names
}

/// Waits on `lock` on another thread; returns when the waiter got it.
fn waiter(lock: redlatch::Lock) -> (thread::JoinHandle<Instant>, mpsc::Receiver<()>) {
    let (started_tx, started_rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        started_tx.send(()).unwrap();
        let guard = lock.lock().unwrap();
        let at = Instant::now();
        guard.unlock().unwrap();
        at
    });
    (handle, started_rx)
}

#[test]
fn every_lock_kind_works_for_names_in_all_slots() {
    let cluster = RedisCluster::new(3, 0);
    let client = client(&cluster);
    for name in names_on_every_master(&cluster, "kinds", 12) {
        let node = cluster.node_for_key(&name);
        let plain = client.lock(&name).lock().unwrap();
        assert!(exists(node, &name), "{name} on its slot's master");
        plain.unlock().unwrap();

        let fenced = client.fenced_lock(&format!("{name}:f")).lock().unwrap();
        assert!(fenced.token().is_some());
        fenced.unlock().unwrap();

        let fair = client.fair_lock(&format!("{name}:fair")).lock().unwrap();
        fair.unlock().unwrap();

        let rw = client.read_write_lock(&format!("{name}:rw"));
        let r1 = rw.read().lock().unwrap();
        let r2 = rw.read().lock().unwrap();
        drop((r1, r2));
        rw.write().lock().unwrap().unlock().unwrap();

        let sem = client.semaphore(&format!("{name}:sem"));
        assert!(sem.try_set_permits(2).unwrap());
        let permit = sem.acquire_guard(1).unwrap();
        assert_eq!(sem.available_permits().unwrap(), 1);
        drop(permit);

        let latch = client.count_down_latch(&format!("{name}:latch"));
        assert!(latch.try_set_count(1).unwrap());
        latch.count_down().unwrap();
        assert_eq!(latch.count().unwrap(), 0);
    }
}

#[test]
fn helper_keys_and_channels_share_the_lock_slot() {
    let cluster = RedisCluster::new(3, 0);
    let holder = client(&cluster);
    let other = client(&cluster);
    let name = "orders:42";
    let node = cluster.node_for_key(name);
    let guard = holder.fair_lock(name).lock().unwrap();
    let (handle, started) = waiter(other.fair_lock(name));
    started.recv().unwrap();
    let queue = format!("redisson_lock_queue:{{{name}}}");
    assert!(support::wait_until(Duration::from_secs(5), || exists(
        node, &queue
    )));
    for key in [
        name.to_owned(),
        queue,
        format!("redisson_lock_timeout:{{{name}}}"),
    ] {
        assert_eq!(cluster.slot_of(&key), cluster.slot_of(name), "{key}");
        assert!(exists(node, &key), "{key} on the lock's master");
    }
    drop(guard);
    handle.join().unwrap();
}

#[test]
fn waiters_wake_by_sharded_pubsub_with_one_connection_per_node() {
    let cluster = RedisCluster::new(3, 0);
    let holder = client(&cluster);
    let waiting = client(&cluster);
    let names = names_on_every_master(&cluster, "wake", 12);
    let guards: Vec<_> = names
        .iter()
        .map(|n| holder.lock(n).lock().unwrap())
        .collect();
    let waiters: Vec<_> = names.iter().map(|n| waiter(waiting.lock(n))).collect();
    for (_, started) in &waiters {
        started.recv().unwrap();
    }
    for name in &names {
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let node = cluster.node_for_key(name);
        assert!(
            support::wait_until(Duration::from_secs(5), || shard_subscribers(node, &channel)
                == 1),
            "{channel} is subscribed on its slot's master"
        );
    }
    // One pub/sub connection per node for the waiting client (12 channels, 3 nodes).
    for master in cluster.masters() {
        let pubsub = support::client_list(&mut master.conn())
            .iter()
            .filter(|l| l.contains("flags=P"))
            .count();
        assert_eq!(pubsub, 1, "pub/sub connections on {}", master.port());
    }
    let released = Instant::now();
    drop(guards); // 30 s leases: only a message can wake them in time
    for (handle, _) in waiters {
        let latency = handle.join().unwrap() - released;
        assert!(latency < Duration::from_secs(2), "{latency:?}");
    }
}

#[test]
fn watchdog_renews_locks_on_every_node_in_per_slot_calls() {
    let cluster = RedisCluster::new(3, 0);
    let client = client_with(&cluster, |b| b.watchdog_timeout(Duration::from_millis(900)));
    let names = names_on_every_master(&cluster, "renew", 30);
    let guards: Vec<_> = names
        .iter()
        .map(|n| client.lock(n).lock().unwrap())
        .collect();
    // Three leases long: without renewals every lock would have expired twice over.
    let until = Instant::now() + Duration::from_millis(2700);
    while Instant::now() < until {
        thread::sleep(Duration::from_millis(100)); // observing leases as time passes
    }
    for (name, guard) in names.iter().zip(&guards) {
        assert!(!guard.is_lost(), "{name}");
        let pttl: i64 = redis::cmd("PTTL")
            .arg(name)
            .query(&mut cluster.node_for_key(name).conn())
            .unwrap();
        assert!(pttl > 0, "{name} pttl {pttl}");
    }
}

#[test]
fn a_held_lock_survives_the_migration_of_its_slot() {
    let cluster = RedisCluster::new(3, 0);
    let holder = client(&cluster);
    let waiting = client(&cluster);
    let name = "migrating:lock";
    let slot = cluster.slot_of(name);
    let guard = holder.lock(name).lock().unwrap();
    let (handle, started) = waiter(waiting.lock(name));
    started.recv().unwrap();
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let source = cluster.node_for_key(name);
    assert!(support::wait_until(
        Duration::from_secs(5),
        || shard_subscribers(source, &channel) == 1
    ));
    let target = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != source.port())
        .unwrap();
    cluster.migrate_slot(slot, target);
    assert!(exists(target, name), "the held lock moved with its slot");
    // The waiter's subscription follows the slot to its new master.
    assert!(
        support::wait_until(Duration::from_secs(10), || shard_subscribers(
            target, &channel
        ) == 1),
        "the waiter re-subscribed on the new master"
    );
    let released = Instant::now();
    guard.unlock().expect("unlock follows MOVED");
    let latency = handle.join().unwrap() - released;
    assert!(
        latency < Duration::from_secs(2),
        "waiter woken after the move, {latency:?}"
    );
    assert!(!exists(target, name));
}

#[test]
fn calls_during_a_migration_follow_ask_and_wait_out_tryagain() {
    let cluster = RedisCluster::new(3, 0);
    let client = client_with(&cluster, |b| {
        b.retry_attempts(40).retry_delay(Duration::from_millis(50))
    });
    let held = "{ask}:held";
    let fresh = "{ask}:fresh";
    let slot = cluster.slot_of(held);
    let source = cluster.node_for_key(held);
    let target = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != source.port())
        .unwrap();
    let guard = client.lock(held).lock().unwrap();
    let migration = cluster.begin_migration(slot, target);
    assert!(migration.move_key(held));
    // A key the source does not have: ASK, then ASKING + the script on the importing node.
    let fresh_guard = client.lock(fresh).lock().expect("acquire follows ASK");
    assert!(
        exists_importing(target, fresh),
        "taken on the importing node"
    );
    // The unlock script's keys are split between the nodes (the lock moved, its unlock latch
    // is new): the importing node answers TRYAGAIN until the slot is settled, and the call is
    // retried (it did not run) until then.
    thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_millis(300)); // the migration in progress being staged
            migration.finish();
        });
        guard
            .unlock()
            .expect("unlock ran once the migration finished");
    });
    assert!(!exists(target, held));
    fresh_guard
        .unlock()
        .expect("unlock after the migration finished");
    assert!(!exists(target, fresh));
}

#[test]
fn a_master_failover_keeps_the_lock_usable() {
    let cluster = RedisCluster::new(3, 1);
    let holder = client(&cluster);
    let waiting = client(&cluster);
    let name = "failover:lock";
    let guard = holder.lock(name).lock().unwrap();
    let (handle, started) = waiter(waiting.lock(name));
    started.recv().unwrap();
    let master = cluster.node_for_key(name);
    let replica = cluster.replicas_of(master)[0];
    let replica_port = replica.port();
    // A manual failover waits for the replica to catch up: the lock is on it.
    cluster.failover(replica);
    assert_eq!(cluster.node_for_key(name).port(), replica_port);
    assert!(exists(cluster.node_for_key(name), name));
    let released = Instant::now();
    guard.unlock().expect("unlock reaches the new master");
    let latency = handle.join().unwrap() - released;
    assert!(
        latency < Duration::from_secs(3),
        "waiter woken after the failover, {latency:?}"
    );
    let again = holder.lock(name).lock().unwrap();
    again.unlock().unwrap();
}
