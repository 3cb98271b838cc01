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
