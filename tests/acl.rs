//! The documented ACL ([`Config::acl_rules`]): a user given exactly those rules runs every
//! primitive on names under its prefix, and a user without a command it needs gets an error
//! that names the command. (The cluster's run is in `tests/cluster.rs`.)

mod support;

use std::time::Duration;

use redlatch::{Client, Config};
use support::acl::{as_user, every_primitive, lacks_channel_rules, set_user};
use support::RedisServer;

#[test]
fn a_user_with_exactly_the_documented_rules_runs_every_primitive() {
    if let Some(why) = lacks_channel_rules() {
        eprintln!("skipped: {why}");
        return;
    }
    let server = RedisServer::new();
    // Every optional feature that writes, and deadlock detection early enough that the
    // waits below record themselves.
    let config = Config::builder(server.url())
        .name_prefix("app:")
        .deadlock_check_after(Duration::from_millis(20))
        .lock_order_checks(true)
        .history(true);
    let rules = config.clone().build().unwrap().acl_rules();
    set_user(&server, "app", &rules);
    let client = Client::new(as_user(config, "app").build().unwrap()).unwrap();
    client.ping().expect("ping as the ACL user");
    every_primitive(&client, "");
    // Nested holds, for a lock-order record.
    let outer = client.lock("outer").lock().unwrap();
    client.lock("inner").lock().unwrap().unlock().unwrap();
    outer.unlock().unwrap();
    // The history's last events are written as the client closes.
    client.close();
    let mut admin = server.conn();
    let history: i64 = redis::cmd("XLEN")
        .arg(format!("redlatch_history:{{{}}}", client.id()))
        .query(&mut admin)
        .unwrap();
    assert!(history > 0, "the history was written");
    let orders: Vec<String> = redis::cmd("KEYS")
        .arg("redlatch_order:*")
        .query(&mut admin)
        .unwrap();
    assert!(!orders.is_empty(), "the lock order was recorded");
    // Nothing was refused on the way, in the background neither (a refusal there is only
    // logged).
    let refused: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    // Names of another application are refused.
    let other = Client::new(
        as_user(Config::builder(server.url()), "app")
            .retry_attempts(0)
            .build()
            .unwrap(),
    )
    .unwrap();
    let err = other.lock("billing:orders").lock().unwrap_err();
    assert!(err.to_string().contains("NoPerm"), "{err}");
}

#[test]
fn a_user_without_a_needed_command_gets_an_error_naming_it() {
    if let Some(why) = lacks_channel_rules() {
        eprintln!("skipped: {why}");
        return;
    }
    let server = RedisServer::new();
    let config = Config::builder(server.url()).name_prefix("app:");
    let rules: Vec<String> = config.clone().build().unwrap().acl_rules();
    let without: Vec<String> = rules.into_iter().filter(|r| r != "+evalsha").collect();
    set_user(&server, "noscripts", &without);
    let client = Client::new(as_user(config, "noscripts").build().unwrap()).unwrap();
    let started = std::time::Instant::now();
    let err = client.lock("orders").lock().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("evalsha"), "{text}");
    assert!(!err.is_connection() && !err.is_timeout(), "{err:?}");
    // Refused, not retried for seconds.
    assert!(started.elapsed() < Duration::from_secs(5));
}
