//! Redis Cluster (3 masters started by the harness with `redis-cli --cluster create`): every
//! lock kind over names in all slots, helper keys in their lock's slot, sharded pub/sub
//! wake-ups, batched renewals per slot, and a held lock surviving a slot migration (MOVED),
//! a migration in progress (ASK) and a master failover (manual, and automatic after a kill).

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, ShardedSubscriptionMode};
use support::binary::Need;
use support::cluster::RedisCluster;
use support::{key_exists, unread_connections, RedisServer};

fn client(cluster: &RedisCluster, mode: ShardedSubscriptionMode) -> Client {
    client_with(cluster, mode, |b| b)
}

fn client_with(
    cluster: &RedisCluster,
    mode: ShardedSubscriptionMode,
    tune: impl FnOnce(redlatch::ConfigBuilder) -> redlatch::ConfigBuilder,
) -> Client {
    let builder = Config::cluster(cluster.urls())
        .sharded_subscription_mode(mode)
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(2));
    Client::new(tune(builder).build().unwrap()).unwrap()
}

/// `EXISTS` on a node importing the key's slot (which answers only after `ASKING`).
fn exists_importing(node: &RedisServer, key: &str) -> bool {
    let mut conn = node.conn();
    let _: () = redis::cmd("ASKING").query(&mut conn).unwrap();
    key_exists(&mut conn, key)
}

/// How often command `name` (e.g. `"evalsha"`) was refused before it ran (a `MOVED` or `ASK`
/// redirection counts), from `INFO commandstats`.
fn rejected_calls(node: &RedisServer, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node.conn())
        .unwrap();
    let prefix = format!("cmdstat_{name}:");
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(prefix.as_str()))
        .and_then(|stats| {
            stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("rejected_calls="))
        })
        .map_or(0, |v| v.parse().unwrap())
}

/// `CLUSTER SLOTS` calls served by the cluster's live nodes (the harness's own topology
/// polls make them too: read this only between its waits). Before Redis 7.0, every
/// `CLUSTER` call: between the harness's waits the client sends no other.
fn slot_map_reads(cluster: &RedisCluster) -> u64 {
    let command = if support::binary::binary().has_subcommand_stats() {
        "cluster|slots"
    } else {
        "cluster"
    };
    cluster
        .nodes()
        .iter()
        .filter_map(RedisServer::try_conn)
        .map(|mut conn| support::command_calls(&mut conn, command))
        .sum()
}

/// Subscribers of `channel` on `node` in `mode`'s kind of pub/sub (`PUBSUB SHARDNUMSUB` or
/// `PUBSUB NUMSUB`).
fn subscribers(mode: ShardedSubscriptionMode, node: &RedisServer, channel: &str) -> i64 {
    support::subscribers(
        &mut node.conn(),
        channel,
        mode == ShardedSubscriptionMode::On,
    )
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

/// `n` names spread over every master (as [`names_on_every_master`]), each locked by `client`.
fn held_on_every_master(
    cluster: &RedisCluster,
    client: &Client,
    prefix: &str,
    n: usize,
) -> (Vec<String>, Vec<redlatch::LockGuard>) {
    let names = names_on_every_master(cluster, prefix, n);
    let guards = names
        .iter()
        .map(|n| client.lock(n).lock().unwrap())
        .collect();
    (names, guards)
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

/// Calls `f` until it succeeds; returns its value and how many calls failed. For calls made
/// while a node is dying: a call on a pooled connection to it fails (it may have run, so it
/// is not retried), and the errors of a node that is gone are the caller's to handle. Each
/// failing call has spent the client's retries (seconds here), so this does not spin.
fn until_ok<T>(mut f: impl FnMut() -> redlatch::Result<T>) -> (T, usize) {
    let mut failed = 0;
    loop {
        match f() {
            Ok(v) => return (v, failed),
            Err(e) => {
                failed += 1;
                assert!(failed < 5, "call keeps failing: {e}");
            }
        }
    }
}

/// Defines each test once per pub/sub mode, as `sharded::NAME` (Java services set to
/// `ON`; skipped, saying why, on a server without sharded pub/sub) and `plain::NAME` (set to
/// `OFF`, and what `Auto` picks before Redis 7.0); the body gets the mode under the given
/// name (`fn NAME(mode) { .. client(&cluster, mode) .. }`).
macro_rules! in_both_modes {
    ($($(#[$meta:meta])* fn $name:ident($mode:ident) $body:block)*) => {
        mod sharded {
            #[allow(unused_imports)]
            use super::*;
            $($(#[$meta])* #[test] fn $name() {
                $crate::require!(Need::ShardedPubSub);
                let $mode = ShardedSubscriptionMode::On;
                $body
            })*
        }
        mod plain {
            #[allow(unused_imports)]
            use super::*;
            $($(#[$meta])* #[test] fn $name() {
                let $mode = ShardedSubscriptionMode::Off;
                $body
            })*
        }
    };
}

in_both_modes! {
    fn every_lock_kind_works_for_names_in_all_slots(mode) {
        let cluster = RedisCluster::new(3, 0);
        let client = client(&cluster, mode);
        for name in names_on_every_master(&cluster, "kinds", 12) {
            let node = cluster.node_for_key(&name);
            let plain = client.lock(&name).lock().unwrap();
            assert!(key_exists(&mut node.conn(), &name), "{name} on its slot's master");
            plain.unlock().unwrap();

            let fenced = client.fenced_lock(format!("{name}:f")).lock().unwrap();
            assert!(fenced.token().is_some());
            fenced.unlock().unwrap();

            let fair = client.fair_lock(format!("{name}:fair")).lock().unwrap();
            fair.unlock().unwrap();

            let rw = client.read_write_lock(format!("{name}:rw"));
            let r1 = rw.read().lock().unwrap();
            let r2 = rw.read().lock().unwrap();
            drop((r1, r2));
            rw.write().lock().unwrap().unlock().unwrap();

            let sem = client.semaphore(format!("{name}:sem"));
            assert!(sem.try_set_permits(2).unwrap());
            let permit = sem.acquire(1).unwrap();
            assert_eq!(sem.available_permits().unwrap(), 1);
            drop(permit);

            let latch = client.count_down_latch(format!("{name}:latch"));
            assert!(latch.try_set_count(1).unwrap());
            latch.count_down().unwrap();
            assert_eq!(latch.count().unwrap(), 0);
        }
    }

    fn helper_keys_and_channels_share_the_lock_slot(mode) {
        let cluster = RedisCluster::new(3, 0);
        let holder = client(&cluster, mode);
        let other = client(&cluster, mode);
        let name = "orders:42";
        let node = cluster.node_for_key(name);
        let guard = holder.fair_lock(name).lock().unwrap();
        let (handle, started) = waiter(other.fair_lock(name));
        started.recv().unwrap();
        let queue = format!("redisson_lock_queue:{{{name}}}");
        assert!(support::wait_until(Duration::from_secs(5), || key_exists(
            &mut node.conn(), &queue
        )));
        for key in [
            name.to_owned(),
            queue,
            format!("redisson_lock_timeout:{{{name}}}"),
        ] {
            assert_eq!(cluster.slot_of(&key), cluster.slot_of(name), "{key}");
            assert!(key_exists(&mut node.conn(), &key), "{key} on the lock's master");
        }
        drop(guard);
        handle.join().unwrap();
    }

    fn a_condition_follows_its_lock_slot(mode) {
        let cluster = RedisCluster::new(3, 0);
        let waiting = client(&cluster, mode);
        let notifying = client(&cluster, mode);
        for name in names_on_every_master(&cluster, "cond", 6) {
            let node = cluster.node_for_key(&name);
            let (tx, done) = mpsc::channel();
            let (c, n) = (waiting.clone(), name.clone());
            let handle = thread::spawn(move || {
                let lock = c.lock(&n);
                let mut guard = lock.lock().unwrap();
                let waited = lock
                    .condition("ready")
                    .wait_for(&mut guard, Duration::from_secs(15))
                    .unwrap();
                tx.send(!waited.timed_out()).unwrap();
            });
            support::await_waiting(&waiting, 1);
            let waiters = format!("redlatch_condition:{{{name}}}:ready");
            assert_eq!(cluster.slot_of(&waiters), cluster.slot_of(&name));
            assert!(key_exists(&mut node.conn(), &waiters), "{waiters} on the lock's master");
            let lock = notifying.lock(&name);
            let guard = lock.lock().unwrap();
            assert!(lock.condition("ready").notify_one().unwrap());
            drop(guard);
            assert!(done.recv_timeout(Duration::from_secs(15)).unwrap(), "{name}");
            handle.join().unwrap();
            assert!(!key_exists(&mut node.conn(), &waiters));
        }
    }

    fn an_election_keeps_its_keys_in_its_lock_slot(mode) {
        let cluster = RedisCluster::new(3, 0);
        let client = client(&cluster, mode);
        let watcher = client_with(&cluster, mode, |b| b);
        for name in names_on_every_master(&cluster, "elect", 6) {
            let node = cluster.node_for_key(&name);
            let election = client.election(&name);
            let mut observer = watcher.election(&name).observe();
            let leadership = election.campaign("v").unwrap();
            for key in [
                format!("redlatch_election:{{{name}}}"),
                format!("redlatch_election_log:{{{name}}}"),
            ] {
                assert_eq!(cluster.slot_of(&key), cluster.slot_of(&name), "{key}");
                assert!(key_exists(&mut node.conn(), &key), "{key} on the lock's master");
            }
            let seen = observer.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
            assert_eq!(seen.term, leadership.term());
            // The next leader is heard by pub/sub on the lock's slot.
            leadership.resign().unwrap();
            let next = election.campaign("w").unwrap();
            let seen = observer.next_timeout(Duration::from_secs(10)).unwrap().unwrap();
            assert_eq!((seen.term, seen.value), (next.term(), b"w".to_vec()));
            next.resign().unwrap();
        }
    }

    fn waiters_wake_by_pubsub_with_one_connection_per_node(mode) {
        let cluster = RedisCluster::new(3, 0);
        let holder = client(&cluster, mode);
        let waiting = client(&cluster, mode);
        let (names, guards) = held_on_every_master(&cluster, &holder, "wake", 12);
        let waiters: Vec<_> = names.iter().map(|n| waiter(waiting.lock(n))).collect();
        for (_, started) in &waiters {
            started.recv().unwrap();
        }
        for name in &names {
            let channel = format!("redisson_lock__channel:{{{name}}}");
            let node = cluster.node_for_key(name);
            assert!(
                support::wait_until(Duration::from_secs(5), || subscribers(mode, node, &channel)
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
        let published = |command: &str| -> u64 {
            cluster
                .masters()
                .into_iter()
                .map(|m| support::command_calls(&mut m.conn(), command))
                .sum()
        };
        let released = Instant::now();
        drop(guards); // 30 s leases: only a message can wake them in time
        for (handle, _) in waiters {
            let latency = handle.join().unwrap() - released;
            assert!(latency < Duration::from_secs(2), "{latency:?}");
        }
        // The unlock scripts published in the mode's kind only.
        let (used, unused) = match mode {
            ShardedSubscriptionMode::On => ("spublish", "publish"),
            _ => ("publish", "spublish"),
        };
        assert!(published(used) >= names.len() as u64, "{used} calls");
        assert_eq!(published(unused), 0, "{unused} calls");
    }

    fn watchdog_renews_locks_on_every_node_in_per_slot_calls(mode) {
        let cluster = RedisCluster::new(3, 0);
        let client = client_with(&cluster, mode, |b| b.watchdog_timeout(Duration::from_millis(900)));
        let (names, guards) = held_on_every_master(&cluster, &client, "renew", 30);
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

    fn a_held_lock_survives_the_migration_of_its_slot(mode) {
        let cluster = RedisCluster::new(3, 0);
        let holder = client(&cluster, mode);
        let waiting = client(&cluster, mode);
        let name = "migrating:lock";
        let slot = cluster.slot_of(name);
        let guard = holder.lock(name).lock().unwrap();
        let (handle, started) = waiter(waiting.lock(name));
        started.recv().unwrap();
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let source = cluster.node_for_key(name);
        assert!(support::wait_until(
            Duration::from_secs(5),
            || subscribers(mode, source, &channel) == 1
        ));
        let target = cluster
            .masters()
            .into_iter()
            .find(|m| m.port() != source.port())
            .unwrap();
        cluster.migrate_slot(slot, target);
        assert!(key_exists(&mut target.conn(), name), "the held lock moved with its slot");
        if mode == ShardedSubscriptionMode::On {
            // The waiter's subscription follows the slot to its new master.
            assert!(
                support::wait_until(Duration::from_secs(10), || subscribers(mode,
                    target, &channel
                ) == 1),
                "the waiter re-subscribed on the new master"
            );
        } else {
            // Plain: every node hears PUBLISH, and the old master keeps the subscription.
            assert_eq!(subscribers(mode, source, &channel), 1);
        }
        let released = Instant::now();
        guard.unlock().expect("unlock follows MOVED");
        let latency = handle.join().unwrap() - released;
        assert!(
            latency < Duration::from_secs(2),
            "waiter woken after the move, {latency:?}"
        );
        assert!(!key_exists(&mut target.conn(), name));
    }

    fn calls_during_a_migration_follow_ask_and_wait_out_tryagain(mode) {
        let cluster = RedisCluster::new(3, 0);
        let client = client_with(&cluster, mode, |b| {
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
        let asking = support::command_calls(&mut target.conn(), "asking");
        thread::scope(|scope| {
            scope.spawn(|| {
                // The unlock has reached the importing node (its ASKING, then the script that
                // is answered TRYAGAIN): only now is the slot settled. (ASKING counts on every
                // server version; the TRYAGAIN itself is in `INFO errorstats` only from 6.2.)
                assert!(support::wait_until(Duration::from_secs(10), || {
                    support::command_calls(&mut target.conn(), "asking") > asking
                }));
                migration.finish();
            });
            guard
                .unlock()
                .expect("unlock ran once the migration finished");
        });
        assert!(!key_exists(&mut target.conn(), held));
        fresh_guard
            .unlock()
            .expect("unlock after the migration finished");
        assert!(!key_exists(&mut target.conn(), fresh));
    }

    fn a_master_failover_keeps_the_lock_usable(mode) {
        let cluster = RedisCluster::new(3, 1);
        let holder = client(&cluster, mode);
        let waiting = client(&cluster, mode);
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
        assert!(key_exists(&mut cluster.node_for_key(name).conn(), name));
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

    fn threads_redirected_at_once_share_slot_map_reads(mode) {
        crate::require!(Need::RejectedCallsStat);
        // Each MOVED re-read the slot map, one read after the other: N threads, N reads.
        let cluster = RedisCluster::new(3, 0);
        // Each call on a connection of its own, so that the stopped node holds one unread
        // call per thread (batched, they would share a few connections).
        let client = client_with(&cluster, mode, |b| b.batch_lanes(0));
        let threads = 16;
        let names: Vec<String> = (0..threads).map(|i| format!("{{moved}}:{i}")).collect();
        let all_at_once = |names: &[String]| {
            let start = std::sync::Barrier::new(names.len());
            thread::scope(|s| {
                for name in names {
                    let (client, start) = (&client, &start);
                    s.spawn(move || {
                        start.wait();
                        let guard = client.lock(name).try_lock().unwrap().expect("free");
                        guard.unlock().unwrap();
                    });
                }
            });
        };
        all_at_once(&names); // the map is known, connections to the slot's master are open
        let slot = cluster.slot_of(&names[0]);
        let source = cluster.node_for_slot(slot);
        let target = cluster
            .masters()
            .into_iter()
            .find(|m| m.port() != source.port())
            .unwrap();
        cluster.migrate_slot(slot, target);
        let (reads_before, moved_before) =
            (slot_map_reads(&cluster), rejected_calls(source, "evalsha"));
        // The old master is stopped until every call waits in its socket buffers: it then answers
        // them all with MOVED at once, as a busy node would.
        source.stop();
        thread::scope(|s| {
            let calls = s.spawn(|| all_at_once(&names));
            let queued = support::wait_until(Duration::from_secs(5), || {
                unread_connections(source.port()) >= threads
            });
            source.cont();
            assert!(
                queued,
                "only {} calls queued",
                unread_connections(source.port())
            );
            calls.join().unwrap();
        });
        let reads = slot_map_reads(&cluster) - reads_before;
        let redirected = rejected_calls(source, "evalsha") - moved_before;
        eprintln!(
            "{threads} threads: {redirected} calls redirected by MOVED, {reads} CLUSTER SLOTS reads"
        );
        assert!(
            redirected >= threads as u64 / 2,
            "{redirected} calls redirected, of {threads}"
        );
        // Without sharing, every redirected call reads the map. With it, the callers that
        // learn of the move before a read begins share that read; on a loaded machine they
        // wake in a few waves, a read each: at most half as many reads as calls, not one each.
        assert!(
            (1..=(redirected / 2).max(1)).contains(&reads),
            "{reads} slot-map reads for {redirected} redirected calls"
        );
        for name in &names {
            assert!(!key_exists(&mut target.conn(), name), "{name} released on the new master");
        }
    }

    fn ask_then_noscript_asks_again_instead_of_following_moved_back(mode) {
        crate::require!(Need::RejectedCallsStat);
        // An importing node that lacked the script answered the re-sent EVALSHA (after NOSCRIPT
        // used up the ASKING) with MOVED back to the owner: one more redirect and a map read.
        let cluster = RedisCluster::new(3, 0);
        let client = client(&cluster, mode);
        let held = "{asknoscript}:held";
        let fresh = "{asknoscript}:fresh";
        let slot = cluster.slot_of(held);
        let source = cluster.node_for_key(held);
        let target = cluster
            .masters()
            .into_iter()
            .find(|m| m.port() != source.port())
            .unwrap();
        let guard = client.lock(held).lock().unwrap(); // the map is known
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut target.conn())
            .unwrap();
        let migration = cluster.begin_migration(slot, target);
        let (reads_before, asked_before) =
            (slot_map_reads(&cluster), rejected_calls(source, "evalsha"));
        let fresh_guard = client.lock(fresh).lock().expect("acquire follows ASK");
        assert!(
            exists_importing(target, fresh),
            "taken on the importing node"
        );
        assert_eq!(
            rejected_calls(source, "evalsha") - asked_before,
            1,
            "one ASK from the owner, no second trip there"
        );
        assert_eq!(
            slot_map_reads(&cluster) - reads_before,
            0,
            "no MOVED, no map read"
        );
        migration.finish();
        fresh_guard.unlock().unwrap();
        guard.unlock().unwrap();
        assert!(!key_exists(&mut target.conn(), fresh) && !key_exists(&mut target.conn(), held));
    }

    fn a_killed_master_fails_over_and_its_lock_becomes_usable_again(mode) {
        let mut cluster = RedisCluster::new(3, 1);
        let lease = Duration::from_secs(2);
        // Calls made while the slot has no live master are retried through the failover (a node
        // timeout, then an election).
        let patient = |b: redlatch::ConfigBuilder| {
            b.retry_attempts(100)
                .retry_delay(Duration::from_millis(200))
        };
        let holder = client(&cluster, mode);
        let waiting = client_with(&cluster, mode, patient);
        let probing = client_with(&cluster, mode, patient);
        let name = "autofailover:lock";
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let slot = cluster.slot_of(name);
        let old_port = cluster.node_for_slot(slot).port();
        let waiter_id = waiting.id().to_owned();

        let guard = holder.lock(name).with_lease(lease).lock().unwrap();
        let acquired = Instant::now();
        assert!(probing.lock(name).is_locked().unwrap()); // its map names the master
        let (got_tx, got_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let waiter = thread::spawn(move || {
            let (guard, failed) = until_ok(|| waiting.lock(name).lock());
            got_tx
                .send((Instant::now(), guard.owner().to_owned(), failed))
                .unwrap();
            release_rx.recv().unwrap();
            guard.unlock()
        });
        assert!(
            support::wait_until(Duration::from_secs(5), || subscribers(mode,
                cluster.node_for_slot(slot),
                &channel
            ) == 1),
            "the waiter is blocked, subscribed on the master"
        );

        cluster.node_for_slot_mut(slot).kill();
        let killed = Instant::now();
        assert!(
            killed < acquired + lease,
            "setup outlasted the holder's lease"
        );
        let probe = thread::spawn(move || {
            until_ok(|| probing.lock(name).is_locked());
            Instant::now()
        });
        let new_master = cluster.wait_for_failover(slot);
        let failed_over = Instant::now();
        assert_ne!(new_master.port(), old_port);

        // The holder's client still maps the slot to the dead master.
        let asked = Instant::now();
        let (_, failed) = until_ok(|| holder.lock(name).is_locked());
        let call = asked.elapsed();
        assert!(call < Duration::from_secs(5), "{call:?}");
        assert!(
            failed <= 1,
            "only the call on its pooled connection to the dead master fails"
        );

        // The lock may or may not have reached the replica before the kill: either way it is free
        // by the end of the holder's lease, and the waiter (re-subscribed on the new master, or
        // woken by its wait bound) takes it.
        let (got_at, owner, waiter_failed) = got_rx
            .recv_timeout(lease + Duration::from_secs(10))
            .expect("the waiter got the lock");
        assert!(
            got_at > killed,
            "not before the kill: the holder's lease was running"
        );
        assert!(
            got_at < failed_over + lease + Duration::from_secs(5),
            "waiter took {:?} after the failover",
            got_at.saturating_duration_since(failed_over)
        );
        let first_success = probe.join().unwrap();
        eprintln!(
            "automatic failover: first successful lock call {:?} after the kill (the harness saw \
             the failover after {:?}); a client with the old map took {call:?} ({failed} failed \
             call); the waiter got the lock {:?} after the kill ({waiter_failed} failed calls)",
            first_success - killed,
            failed_over - killed,
            got_at - killed
        );
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(name)
            .query(&mut new_master.conn())
            .unwrap();
        assert_eq!(
            fields,
            std::slice::from_ref(&owner),
            "the promoted master's lock names the waiter"
        );
        assert!(owner.starts_with(&waiter_id), "{owner}");
        release_tx.send(()).unwrap();
        waiter.join().unwrap().expect("unlock on the new master");
        assert!(!key_exists(&mut new_master.conn(), name));
        assert!(guard.unlock().is_err(), "the holder's lease ran out");
    }

    fn close_wakes_cluster_waiters_on_every_node(mode) {
        // Closing a cluster client with waiters on every node ends each wait as closed within
        // 2 s and unsubscribes each channel, dropping its node connections only after their
        // waiters left them (in a debug build, an assertion in `close` fails otherwise).
        let cluster = RedisCluster::new(3, 0);
        let holder = client(&cluster, mode);
        let closing = client(&cluster, mode);
        let (names, guards) = held_on_every_master(&cluster, &holder, "close", 6);
        let waiters: Vec<_> = names
            .iter()
            .map(|n| {
                let lock = closing.lock(n);
                thread::spawn(move || lock.lock().map(drop).unwrap_err())
            })
            .collect();
        support::await_waiting(&closing, names.len() as u64);
        let asked = Instant::now();
        closing.close();
        for w in waiters {
            let err = w.join().unwrap();
            assert!(err.is_closed(), "{err:?}");
        }
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "{:?}",
            asked.elapsed()
        );
        for name in &names {
            let channel = format!("redisson_lock__channel:{{{name}}}");
            let node = cluster.node_for_key(name);
            assert!(
                support::wait_until(Duration::from_secs(5), || subscribers(mode, node, &channel)
                    == 0),
                "{channel} unsubscribed"
            );
        }
        assert!(holder.lock(&names[0]).is_held_by_current_thread().unwrap());
        drop(guards);
    }
}

#[test]
fn auto_mode_waits_with_sharded_pubsub_where_the_cluster_has_it_else_plain() {
    // Auto subscribes in the pub/sub the cluster has (sharded from Redis 7.0, plain before),
    // so that a message wakes the waiter on any server, well before the holder's lease ends.
    let cluster = RedisCluster::new(3, 0);
    let config = |b: redlatch::ConfigBuilder| b;
    let holder = client_with(&cluster, ShardedSubscriptionMode::Auto, config);
    let waiting = client_with(&cluster, ShardedSubscriptionMode::Auto, config);
    let name = "auto:lock";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = cluster.node_for_key(name);
    for other in names_on_every_master(&cluster, "auto:other", 6) {
        holder.lock(&other).lock().unwrap().unlock().unwrap(); // publishes
    }
    let guard = holder.lock(name).lock().unwrap();
    let (handle, started) = waiter(waiting.lock(name));
    started.recv().unwrap();
    support::await_waiting(&waiting, 1);
    // Asked once per client (the holder's first unlock, the waiter's first subscription),
    // not once per call.
    let asked = if support::binary::binary().has_subcommand_stats() {
        "pubsub|shardnumsub"
    } else {
        "pubsub"
    };
    let asked: u64 = cluster
        .masters()
        .into_iter()
        .map(|m| support::command_calls(&mut m.conn(), asked))
        .sum();
    assert_eq!(asked, 2, "PUBSUB SHARDNUMSUB calls");
    let sharded = support::auto_is_sharded();
    eprintln!(
        "{}: Auto picks {} pub/sub",
        support::binary::binary().describe(),
        if sharded { "sharded" } else { "plain" }
    );
    assert_eq!(
        support::subscribers(&mut node.conn(), &channel, sharded),
        1,
        "subscribed in the kind the server has"
    );
    if sharded {
        assert_eq!(
            support::subscribers(&mut node.conn(), &channel, false),
            0,
            "and not in the other"
        );
    }
    let released = Instant::now();
    guard.unlock().unwrap(); // a 30 s lease: only a message wakes it in time
    let latency = handle.join().unwrap() - released;
    assert!(latency < Duration::from_secs(2), "{latency:?}");
}

#[test]
fn a_plain_waiter_wakes_on_a_publish_sent_to_any_node() {
    // As a Java service set to OFF releases: PUBLISH on whichever node, which the cluster
    // passes to every node.
    let cluster = RedisCluster::new(3, 0);
    let mode = ShardedSubscriptionMode::Off;
    let holder = client(&cluster, mode);
    let waiting = client(&cluster, mode);
    let name = "plain:anywhere";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = cluster.node_for_key(name);
    let other = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != node.port())
        .unwrap();
    let guard = holder.lock(name).lock().unwrap();
    let (handle, started) = waiter(waiting.lock(name));
    started.recv().unwrap();
    support::await_waiting(&waiting, 1);
    guard.leak(); // released below by hand, as another service would
    let _: i64 = redis::cmd("DEL").arg(name).query(&mut node.conn()).unwrap();
    let released = Instant::now();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg("0")
        .query(&mut other.conn())
        .unwrap();
    let latency = handle.join().unwrap() - released;
    assert!(latency < Duration::from_secs(2), "{latency:?}");
}

#[test]
fn a_cycle_of_waits_across_nodes_ends_one_wait() {
    let cluster = RedisCluster::new(3, 0);
    let tune = |b: redlatch::ConfigBuilder| b.deadlock_check_after(Duration::from_millis(200));
    let a = client_with(&cluster, ShardedSubscriptionMode::Off, tune);
    let b = client_with(&cluster, ShardedSubscriptionMode::Off, tune);
    // Two locks on two different masters.
    let names = names_on_every_master(&cluster, "cycle", 12);
    let first = &names[0];
    let second = names
        .iter()
        .find(|n| cluster.node_for_key(n).port() != cluster.node_for_key(first).port())
        .unwrap()
        .clone();
    let held_b = b.lock(&second).lock().unwrap();
    let (release_tx, release) = mpsc::channel::<()>();
    let waiter = {
        let (a, first, second) = (a.clone(), first.clone(), second.clone());
        thread::spawn(move || {
            // One owner (this thread) holds the first lock and waits for the second.
            let held = a.lock(&first).lock().unwrap();
            let got = a.lock(&second).try_lock_for(Duration::from_secs(20));
            let _ = release.recv();
            drop(held);
            (a.owner_id(), got.map(|g| g.is_some()))
        })
    };
    // a's wait is recorded on second's node before b waits: b's is the younger.
    let node = cluster.node_for_key(&second);
    let recorded = support::wait_until(Duration::from_secs(20), || {
        let n: i64 = redis::cmd("HLEN")
            .arg(format!("redlatch_waits:{{{second}}}"))
            .query(&mut node.conn())
            .unwrap();
        n == 1
    });
    assert!(recorded);
    let err = b
        .lock(first)
        .try_lock_for(Duration::from_secs(20))
        .expect_err("b's wait is the victim");
    assert!(err.is_deadlock(), "{err}");
    drop(held_b);
    release_tx.send(()).unwrap();
    let (owner, got) = waiter.join().unwrap();
    assert!(got.expect("no error"), "a gets the lock b released");
    assert!(err.to_string().contains(&owner), "{err}");
}

/// How many times `PING` ran on `node`, from `INFO commandstats`.
fn pings(node: &RedisServer) -> u64 {
    support::command_calls(&mut node.conn(), "ping")
}

#[test]
fn the_documented_acl_runs_every_primitive_and_ping_reaches_every_master() {
    if let Some(why) = support::acl::lacks_channel_rules() {
        eprintln!("skipped: {why}");
        return;
    }
    let cluster = RedisCluster::new(3, 0);
    // Sharded pub/sub where the servers have it (its commands are in the rules then).
    let sharded = support::binary::binary()
        .lacks(Need::ShardedPubSub)
        .is_none();
    let mode = if sharded {
        ShardedSubscriptionMode::Auto
    } else {
        ShardedSubscriptionMode::Off
    };
    let config = Config::cluster(cluster.urls())
        .sharded_subscription_mode(mode)
        .name_prefix("app:");
    let rules = config.clone().build().unwrap().acl_rules();
    for node in cluster.nodes() {
        support::acl::set_user(node, "app", &rules);
    }
    let client = Client::new(support::acl::as_user(config, "app").build().unwrap()).unwrap();
    let before: Vec<u64> = cluster.masters().into_iter().map(pings).collect();
    client.ping().expect("ping as the ACL user");
    let after: Vec<u64> = cluster.masters().into_iter().map(pings).collect();
    for (b, a) in before.iter().zip(&after) {
        assert!(a > b, "every master was pinged: {before:?} -> {after:?}");
    }
    support::acl::every_primitive(&client, "");
    for node in cluster.nodes() {
        let refused: Vec<redis::Value> = redis::cmd("ACL")
            .arg("LOG")
            .query(&mut node.conn())
            .unwrap();
        assert!(refused.is_empty(), "{}: {refused:?}", node.port());
    }
}
