//! Smoke tests for the cluster and Sentinel harnesses in `tests/support`, with raw `redis`
//! commands on connections to specific nodes only.

mod support;

use std::time::Instant;

use redis::{ErrorKind, RedisError, ServerErrorKind};
use support::cluster::{crc16_xmodem, key_slot, RedisCluster};
use support::sentinel::SentinelGroup;
use support::RedisServer;

fn set(node: &RedisServer, key: &str, value: &str) {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .exec(&mut node.conn())
        .unwrap_or_else(|e| panic!("SET {key} on {}: {e}", node.port()));
}

fn get(node: &RedisServer, key: &str) -> Result<Option<String>, RedisError> {
    redis::cmd("GET").arg(key).query(&mut node.conn())
}

fn role(node: &RedisServer) -> String {
    node.info("replication", "role:").expect("INFO replication")
}

/// Asserts that `result` is a `-MOVED`/`-ASK` (per `kind`) redirection of `slot` to `to`.
fn assert_redirect(
    result: Result<Option<String>, RedisError>,
    kind: ServerErrorKind,
    slot: u16,
    to: &RedisServer,
) {
    let err = result.expect_err("expected a redirection");
    assert_eq!(err.kind(), ErrorKind::Server(kind), "{err}");
    let addr = format!("127.0.0.1:{}", to.port());
    assert_eq!(err.redirect_node(), Some((addr.as_str(), slot)), "{err}");
}

#[test]
fn cluster_is_created_with_replicas_and_state_ok() {
    let started = Instant::now();
    let cluster = RedisCluster::new(3, 1);
    eprintln!("3 masters + 3 replicas ready in {:?}", started.elapsed());

    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.urls().len(), 6);
    for node in cluster.nodes() {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut node.conn())
            .unwrap();
        assert!(info.contains("cluster_state:ok"), "{}: {info}", node.port());
        assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    }
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    for master in &masters {
        assert_eq!(role(master), "master");
        let replicas = cluster.replicas_of(master);
        assert_eq!(replicas.len(), 1, "replicas of {}", master.port());
        assert_eq!(role(replicas[0]), "slave");
    }
    // Every slot is served by its owner.
    for slot in [0, 5460, 5461, 10922, 10923, 16383] {
        assert!(masters
            .iter()
            .any(|m| m.port() == cluster.node_for_slot(slot).port()));
    }
    let owner = cluster.node_for_key("hello");
    set(owner, "hello", "world");
    assert_eq!(get(owner, "hello").unwrap().as_deref(), Some("world"));
}

#[test]
fn slot_of_agrees_with_cluster_keyslot() {
    // The check value of CRC16/XMODEM, and the examples of the cluster specification.
    assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
    assert_eq!(
        key_slot(b"{user1000}.following"),
        key_slot(b"{user1000}.followers")
    );
    assert_eq!(key_slot(b"foo{}{bar}"), crc16_xmodem(b"foo{}{bar}") % 16384);
    assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));

    let cluster = RedisCluster::new(3, 0);
    let mut conn = cluster.nodes()[0].conn();
    let mut keys: Vec<Vec<u8>> = [
        "",
        "a",
        "foo",
        "123456789",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{}",
        "{",
        "}",
        "}{",
        "{a}",
        "x{a}y",
        "{a",
        "a}",
        "{{}}",
        "redlatch:{lock}:name",
        "redlatch_lock_queue:{my-lock}",
        "ключ{тег}",
        "emoji{🔒}",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    keys.extend((0..300).map(|i| format!("key:{i}").into_bytes()));
    keys.extend((0..=255u8).map(|b| vec![b'{', b, b'}', b'x']));
    keys.push(vec![0xff, 0x00, b'{', 0x80, b'}']);
    for key in &keys {
        let expected: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key.as_slice())
            .query(&mut conn)
            .unwrap();
        assert_eq!(
            key_slot(key),
            expected,
            "key {:?}",
            String::from_utf8_lossy(key)
        );
    }
    assert_eq!(cluster.slot_of("foo"), 12182);
}

#[test]
fn migrated_slot_moves_the_key_and_the_old_owner_answers_moved() {
    let cluster = RedisCluster::new(3, 0);
    let key = "migrate-me";
    let slot = cluster.slot_of(key);
    let source = cluster.node_for_slot(slot);
    set(source, key, "v1");
    let target = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != source.port())
        .unwrap();

    let started = Instant::now();
    cluster.migrate_slot(slot, target);
    eprintln!("slot {slot} migrated in {:?}", started.elapsed());

    assert_eq!(cluster.node_for_slot(slot).port(), target.port());
    assert_eq!(get(target, key).unwrap().as_deref(), Some("v1"));
    assert_redirect(get(source, key), ServerErrorKind::Moved, slot, target);
    // Every node, replicas included, now redirects there.
    for node in cluster.nodes() {
        if node.port() != target.port() {
            assert_redirect(get(node, key), ServerErrorKind::Moved, slot, target);
        }
    }
}

#[test]
fn mid_migration_the_source_answers_ask_for_moved_keys() {
    let cluster = RedisCluster::new(3, 0);
    let (moved, kept) = ("{mid}moved", "{mid}kept");
    let slot = cluster.slot_of(moved);
    assert_eq!(slot, cluster.slot_of(kept));
    let source = cluster.node_for_slot(slot);
    set(source, moved, "m");
    set(source, kept, "k");
    let target = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != source.port())
        .unwrap();

    let migration = cluster.begin_migration(slot, target);
    assert_eq!(migration.source().port(), source.port());
    assert!(migration.move_key(moved));
    assert!(!migration.move_key(moved), "already moved");

    // The source still owns the slot: it serves the key it holds and sends clients to the
    // target for the one it no longer has (and for new keys).
    assert_eq!(get(source, kept).unwrap().as_deref(), Some("k"));
    assert_redirect(get(source, moved), ServerErrorKind::Ask, slot, target);
    assert_redirect(get(source, "{mid}new"), ServerErrorKind::Ask, slot, target);
    // The target serves the moved key only to a client that sent ASKING.
    assert_redirect(get(target, moved), ServerErrorKind::Moved, slot, source);
    let (asked,): (String,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("GET")
        .arg(moved)
        .query(&mut target.conn())
        .unwrap();
    assert_eq!(asked, "m");
    assert_eq!(cluster.node_for_slot(slot).port(), source.port());

    assert_eq!(migration.move_keys(), 1);
    migration.finish();
    assert_eq!(cluster.node_for_slot(slot).port(), target.port());
    assert_eq!(get(target, kept).unwrap().as_deref(), Some("k"));
    assert_redirect(get(source, kept), ServerErrorKind::Moved, slot, target);
}

#[test]
fn manual_failover_swaps_master_and_replica() {
    let cluster = RedisCluster::new(3, 1);
    let key = "before-failover";
    let slot = cluster.slot_of(key);
    let old_master = cluster.node_for_slot(slot);
    let replica = cluster.replicas_of(old_master)[0];
    set(old_master, key, "x");

    let started = Instant::now();
    cluster.failover(replica);
    eprintln!("manual cluster failover took {:?}", started.elapsed());

    assert_eq!(cluster.node_for_slot(slot).port(), replica.port());
    assert_eq!(role(replica), "master");
    assert_eq!(role(old_master), "slave");
    let masters: Vec<u16> = cluster.masters().iter().map(|m| m.port()).collect();
    assert!(masters.contains(&replica.port()) && !masters.contains(&old_master.port()));
    let new_replicas = cluster.replicas_of(replica);
    assert_eq!(new_replicas.len(), 1);
    assert_eq!(new_replicas[0].port(), old_master.port());
    // The data came along, the new master takes writes and the old one redirects there.
    assert_eq!(get(replica, key).unwrap().as_deref(), Some("x"));
    set(replica, key, "y");
    assert_redirect(get(old_master, key), ServerErrorKind::Moved, slot, replica);
}

#[test]
fn killed_master_is_replaced_by_its_replica() {
    let mut cluster = RedisCluster::new(3, 1);
    let slot = cluster.slot_of("doomed");
    let old_port = cluster.node_for_slot(slot).port();
    let replica_port = cluster.replicas_of(cluster.node_for_slot(slot))[0].port();

    let started = Instant::now();
    cluster.node_for_slot_mut(slot).kill();
    let new_owner = cluster.wait_for_failover(slot);
    eprintln!(
        "automatic cluster failover (node timeout {:?}) took {:?}",
        cluster.node_timeout(),
        started.elapsed()
    );

    assert_eq!(new_owner.port(), replica_port);
    assert_ne!(new_owner.port(), old_port);
    set(new_owner, "doomed", "survived");
    assert_eq!(cluster.masters().len(), 3);
}

#[test]
fn sentinel_group_reports_the_master_and_fails_over() {
    let started = Instant::now();
    let group = SentinelGroup::new();
    eprintln!(
        "1 master + 2 replicas + 3 Sentinels ready in {:?}",
        started.elapsed()
    );

    let initial = group.servers()[0].addr();
    assert_eq!(group.sentinel_urls().len(), 3);
    for sentinel in group.sentinels() {
        let (ip, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(group.master_name())
            .query(&mut sentinel.conn())
            .unwrap();
        assert_eq!(format!("{ip}:{port}"), initial.to_string());
    }
    assert_eq!(group.master_addr(), initial);
    assert_eq!(group.master().port(), initial.port());
    set(group.master(), "before", "x");

    let started = Instant::now();
    let (old, new) = group.failover();
    eprintln!(
        "Sentinel failover {old} -> {new} settled in {:?}",
        started.elapsed()
    );

    assert_eq!(old, initial);
    assert_ne!(new, old);
    assert_eq!(group.master_addr(), new);
    let new_master = group.master();
    assert_eq!(new_master.addr(), new);
    assert_eq!(role(new_master), "master");
    set(new_master, "after", "y");
    assert_eq!(get(new_master, "before").unwrap().as_deref(), Some("x"));
    assert_eq!(role(group.server_at(old)), "slave");
}
