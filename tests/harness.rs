//! Smoke tests for the shared test harness in `tests/support`.

mod support;

use support::binary::{binary, parse_version};
use support::{count_commands, RedisServer};

#[test]
fn server_serves_and_restarts_on_same_port() {
    let mut server = RedisServer::new();
    let mut conn = server.conn();
    redis::cmd("SET").arg("k").arg("v").exec(&mut conn).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut conn).unwrap();
    assert_eq!(v, "v");

    let port = server.port();
    server.kill();
    server.kill(); // idempotent
    server.restart();
    assert_eq!(server.port(), port);
    let pong: String = redis::cmd("PING").query(&mut server.conn()).unwrap();
    assert_eq!(pong, "PONG");
}

/// A port picked as free may be taken by another test's server before ours binds it: that
/// server answers `PING` too, and must not be taken for ours (which exits at once).
#[test]
fn a_port_another_server_holds_is_left_for_a_fresh_one() {
    let other = RedisServer::new();
    let picks = std::sync::atomic::AtomicUsize::new(0);
    let server = RedisServer::launch_on(
        || match picks.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
            0 => other.port(),
            _ => support::free_port(),
        },
        None,
        |_| Vec::new(),
    );
    assert_eq!(picks.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_ne!(server.port(), other.port());
    let pid: String = server
        .info("server", "process_id:")
        .expect("the new server answers INFO");
    assert_eq!(pid, server.pid().to_string());
}

#[test]
fn count_commands_increases_after_a_command() {
    let server = RedisServer::new();
    let mut conn = server.conn();
    let before = count_commands(&mut conn);
    redis::cmd("PING").exec(&mut conn).unwrap();
    assert!(count_commands(&mut conn) > before);
}

#[test]
fn server_versions_parse_for_redis_and_valkey() {
    assert_eq!(
        parse_version("Redis server v=6.0.9 sha=00000000:0 malloc=jemalloc-5.1.0 bits=64"),
        Some(("Redis".to_string(), (6, 0, 9)))
    );
    // Also when run as `redis-server`, a link to valkey-server.
    assert_eq!(
        parse_version("Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64"),
        Some(("Valkey".to_string(), (9, 1, 2)))
    );
    assert_eq!(parse_version("redis-cli 7.0.15"), None);
}

#[test]
fn the_binary_under_test_is_the_one_that_runs() {
    let server = RedisServer::new();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut server.conn())
        .unwrap();
    let (a, b, c) = binary().version;
    let version = format!("{a}.{b}.{c}");
    // Valkey reports its own version beside the Redis one it is compatible with.
    let field = if binary().product == "Valkey" {
        "valkey_version:"
    } else {
        "redis_version:"
    };
    assert_eq!(
        support::info_field(&info, field),
        Some(version.as_str()),
        "{}",
        binary().describe()
    );
}
