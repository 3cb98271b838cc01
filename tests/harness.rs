//! Smoke tests for the shared test harness in `tests/support`.

mod support;

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
