//! The name mapper (Redisson's `NameMapper`) against a real server: the mapped name is in
//! every key and channel, a prefixed client and an unprefixed one using the full name share
//! one lock, `inspect`, `list`, `watch` and the CLI show names as given, and bad mappers
//! are refused.

mod support;

use support::forget::ForgetAll;

#[cfg(feature = "cli")]
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{inspect::Kind, watch::EventKind, Client, Config, NameMapper};
use support::{client, numsub, wait_until, RedisServer};

fn prefixed(server: &RedisServer, prefix: &str) -> Client {
    support::client_with(server, |b| b.name_prefix(prefix))
}

/// Waits until `n` connections subscribe `channel`.
fn await_subscribers(conn: &mut redis::Connection, channel: &str, n: i64) {
    assert!(
        wait_until(Duration::from_secs(10), || numsub(conn, channel) == n),
        "nobody subscribed {channel}"
    );
}

#[test]
fn the_prefix_is_in_every_key_and_channel() {
    let server = RedisServer::new();
    let client = prefixed(&server, "app1:");
    let other = prefixed(&server, "app1:");
    let mut conn = server.conn();

    let lock = client.lock("orders");
    assert_eq!(lock.name(), "orders");
    let guard = lock.lock().unwrap();
    assert!(conn.exists::<_, bool>("app1:orders").unwrap());
    assert!(!conn.exists::<_, bool>("orders").unwrap());
    let waiter = {
        let other = other.clone();
        thread::spawn(move || other.lock("orders").lock().map(drop))
    };
    await_subscribers(&mut conn, "redisson_lock__channel:{app1:orders}", 1);
    drop(guard);
    waiter.join().unwrap().unwrap();

    let fair = client.fair_lock("fq");
    let held = fair.lock().unwrap();
    let waiter = {
        let other = other.clone();
        thread::spawn(move || other.fair_lock("fq").lock().map(drop))
    };
    assert!(wait_until(Duration::from_secs(10), || {
        conn.llen::<_, u64>("redisson_lock_queue:{app1:fq}")
            .unwrap()
            == 1
    }));
    assert!(conn
        .exists::<_, bool>("redisson_lock_timeout:{app1:fq}")
        .unwrap());
    assert!(conn.exists::<_, bool>("app1:fq").unwrap());
    drop(held);
    waiter.join().unwrap().unwrap();

    let fenced = client.fenced_lock("ledger");
    let guard = fenced.lock().unwrap();
    let token: u64 = conn.get("redisson_lock_token:{app1:ledger}").unwrap();
    assert_eq!(Some(token), guard.token());
    let resource = client.fenced_resource("balance");
    assert_eq!(resource.name(), "balance");
    resource.write(&guard, "100").unwrap();
    assert_eq!(conn.get::<_, String>("app1:balance").unwrap(), "100");
    assert!(conn
        .exists::<_, bool>("redlatch_fence:{app1:balance}")
        .unwrap());
    drop(guard);

    let rw = client.read_write_lock("catalog");
    assert_eq!(rw.name(), "catalog");
    let reading = rw.read().lock().unwrap();
    assert_eq!(
        conn.hget::<_, _, String>("app1:catalog", "mode").unwrap(),
        "read"
    );
    drop(reading);

    let semaphore = client.semaphore("slots");
    assert_eq!(semaphore.name(), "slots");
    assert!(semaphore.try_set_permits(2).unwrap());
    assert_eq!(conn.get::<_, u32>("app1:slots").unwrap(), 2);

    let latch = client.count_down_latch("ready");
    assert_eq!(latch.name(), "ready");
    assert!(latch.try_set_count(3).unwrap());
    assert_eq!(conn.get::<_, u64>("app1:ready").unwrap(), 3);

    let expirable = client.permit_expirable_semaphore("render");
    assert_eq!(expirable.name(), "render");
    assert!(expirable.try_set_permits(1).unwrap());
    let id = expirable
        .acquire(Duration::from_secs(60))
        .forget_all()
        .unwrap();
    assert_eq!(conn.zcard::<_, u64>("{app1:render}:timeout").unwrap(), 1);
    expirable.release(&id).unwrap();
}

#[test]
fn a_prefixed_and_a_plain_client_share_the_lock_and_wake_each_other() {
    let server = RedisServer::new();
    let app = prefixed(&server, "app1:");
    let java_like = client(&server);
    let mut conn = server.conn();

    let guard = app.lock("orders").lock().unwrap();
    assert!(java_like.lock("app1:orders").try_lock().unwrap().is_none());
    let waiter = {
        let java_like = java_like.clone();
        thread::spawn(move || {
            let start = Instant::now();
            java_like.lock("app1:orders").lock().map(|g| {
                drop(g);
                start.elapsed()
            })
        })
    };
    await_subscribers(&mut conn, "redisson_lock__channel:{app1:orders}", 1);
    drop(guard);
    // Woken by the release message, not by the 30 s lease running out.
    let waited = waiter.join().unwrap().unwrap();
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");

    // And the other way round; a name given with the prefix is not prefixed again, as in
    // Redisson's PrefixNameMapper.
    let guard = java_like.lock("app1:orders").lock().unwrap();
    assert!(app.lock("orders").try_lock().unwrap().is_none());
    assert!(app.lock("app1:orders").try_lock().unwrap().is_none());
    let waiter = {
        let app = app.clone();
        thread::spawn(move || app.lock("orders").lock().map(drop))
    };
    await_subscribers(&mut conn, "redisson_lock__channel:{app1:orders}", 1);
    let start = Instant::now();
    drop(guard);
    waiter.join().unwrap().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn inspect_list_and_watch_show_names_as_given() {
    let server = RedisServer::new();
    let app = prefixed(&server, "app1:");
    let other_app = prefixed(&server, "app2:");
    let _theirs = other_app.lock("orders-archive").lock().unwrap();
    let _unprefixed = client(&server).lock("order-book").lock().unwrap();

    let mut watch = app
        .watch("orders")
        .unwrap()
        .poll_interval(Duration::from_millis(50));
    assert_eq!(watch.name(), "orders");
    assert!(watch.current().is_none());

    let guard = app.lock("orders").lock().unwrap();
    let found = app.inspect("orders").unwrap().expect("held");
    assert_eq!(found.name, "orders");
    assert_eq!(found.kind, Kind::Reentrant);
    assert_eq!(found.keys, ["app1:orders"]);
    assert_eq!(found.holders[0].owner.client_id, app.id());

    let event = watch
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("acquired");
    assert_eq!(event.kind, EventKind::Acquired);
    assert_eq!(watch.current().unwrap().name, "orders");

    let _fair = app.fair_lock("ord-fair").lock().unwrap();
    let listed = app.list("ord*").unwrap();
    let names: Vec<&str> = listed.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["ord-fair", "orders"]);
    let all = app.list("*").unwrap();
    let names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        ["ord-fair", "orders"],
        "other applications' keys are left out"
    );

    drop(guard);
    let event = watch
        .next_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("released");
    assert_eq!(event.kind, EventKind::Released);
}

#[test]
fn a_custom_mapper_works_end_to_end() {
    let server = RedisServer::new();
    let mapper = NameMapper::custom(
        |n| format!("{n}@eu"),
        |n| n.strip_suffix("@eu").unwrap_or(n).to_owned(),
    );
    let config = Config::builder(server.url().as_str())
        .name_mapper(mapper)
        .build()
        .unwrap();
    let eu = Client::new(config).unwrap();
    let other = client(&server);
    let mut conn = server.conn();
    let _unmapped = other.lock("stray").lock().unwrap();

    let guard = eu.lock("orders").lock().unwrap();
    assert_eq!(guard.lock().name(), "orders");
    assert!(conn.exists::<_, bool>("orders@eu").unwrap());
    assert!(other.lock("orders@eu").try_lock().unwrap().is_none());
    let waiter = {
        let other = other.clone();
        thread::spawn(move || other.lock("orders@eu").lock().map(drop))
    };
    await_subscribers(&mut conn, "redisson_lock__channel:{orders@eu}", 1);
    let found = eu.inspect("orders").unwrap().expect("held");
    assert_eq!(
        (found.name.as_str(), found.kind),
        ("orders", Kind::Reentrant)
    );
    let names: Vec<String> = eu.list("*").unwrap().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["orders"], "`stray` has no name under this mapper");
    let start = Instant::now();
    guard.unlock().unwrap();
    waiter.join().unwrap().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// Runs the CLI binary, which only the `cli` feature builds.
#[test]
#[cfg(feature = "cli")]
fn the_cli_takes_and_shows_names_without_the_prefix() {
    let server = RedisServer::new();
    let app = prefixed(&server, "app1:");
    let _guard = app.lock("orders").lock().unwrap();
    let url = server.url();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_redlatch"))
            .args(["--url", url.as_str(), "--name-prefix", "app1:"])
            .args(args)
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .output()
            .expect("run redlatch");
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "redlatch {args:?}: {stderr}");
        stdout
    };
    let text = run(&["inspect", "orders"]);
    // The name as given; the keys as they are in Redis.
    assert!(text.starts_with("name:    orders\n"), "{text}");
    assert!(text.contains("keys:    app1:orders\n"), "{text}");
    let list = run(&["list", "ord*"]);
    let rows: Vec<&str> = list
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(rows, ["orders"], "{list}");
    let json = run(&["inspect", "--json", "orders"]);
    assert!(json.contains("\"name\":\"orders\""), "{json}");
}

#[test]
fn bad_mappers_and_names_are_refused() {
    let server = RedisServer::new();
    let err = Config::builder(server.url().as_str())
        .name_prefix("app1\n")
        .build()
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    let lossy = NameMapper::custom(|n| n.to_uppercase(), |n| n.to_owned());
    let err = Config::builder(server.url().as_str())
        .name_mapper(lossy)
        .build()
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    // An empty name is refused, prefix or not.
    let app = prefixed(&server, "app1:");
    assert!(app.lock("").try_lock().unwrap_err().is_invalid_argument());
    assert!(app.inspect("").unwrap_err().is_invalid_argument());
    assert!(app.watch("").unwrap_err().is_invalid_argument());
    // An empty prefix maps nothing.
    let none = prefixed(&server, "");
    let _g = none.lock("bare").lock().unwrap();
    assert!(server.conn().exists::<_, bool>("bare").unwrap());
}
