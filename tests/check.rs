//! `Client::check`: what threatens locks in a deployment, found on real servers configured
//! each way, and logged at connect when asked; `Client::ping`, and errors that name the server.

mod support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use log::{Level, Log, Metadata, Record};
use redlatch::{check::Risk, Client, Config};
use support::RedisServer;

fn risks(client: &Client) -> Vec<Risk> {
    let mut r: Vec<Risk> = client
        .check()
        .unwrap()
        .into_iter()
        .map(|f| f.risk)
        .collect();
    r.sort_by_key(|r| format!("{r:?}"));
    r
}

#[test]
fn each_threat_is_found_where_it_is_and_only_there() {
    // The harness's servers persist nothing (`--save ""`, no AOF): a restart frees every lock.
    let bare = RedisServer::new();
    let client = Client::open(bare.url()).unwrap();
    let findings = client.check().unwrap();
    assert_eq!(
        findings.iter().map(|f| f.risk).collect::<Vec<_>>(),
        [Risk::NoPersistence]
    );
    let f = &findings[0];
    assert_eq!(f.server, format!("127.0.0.1:{}", bare.port()));
    assert!(f.advice.contains("appendonly"), "{f}");
    assert!(f.to_string().contains("NoPersistence"), "{f}");

    // Evicting keys with a TTL (every lock key has one), with the AOF on.
    let evicting = RedisServer::with_args(&[
        "--maxmemory",
        "64mb",
        "--maxmemory-policy",
        "volatile-lru",
        "--appendonly",
        "yes",
    ]);
    let client = Client::open(evicting.url()).unwrap();
    assert_eq!(risks(&client), [Risk::Eviction]);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut evicting.conn())
        .unwrap();
    assert_eq!(risks(&client), [], "noeviction is safe");

    // A replica the client does not wait for.
    let master = RedisServer::with_args(&["--appendonly", "yes"]);
    let _replica = RedisServer::replica_of(&master); // counted by the master when it returns
    let plain = Client::open(master.url()).unwrap();
    assert_eq!(risks(&plain), [Risk::UnsyncedReplicas]);
    let synced = Config::builder(master.url())
        .sync_replicas(1, Duration::from_secs(1))
        .build()
        .unwrap();
    assert_eq!(risks(&Client::new(synced).unwrap()), []);
}

#[test]
fn what_cannot_be_read_is_a_finding_to_check_by_hand() {
    let locked_down = RedisServer::with_args(&["--rename-command", "CONFIG", ""]);
    let client = Client::open(locked_down.url()).unwrap();
    let findings = client.check().unwrap();
    let unknown: Vec<_> = findings
        .iter()
        .filter(|f| f.risk == Risk::Unknown)
        .collect();
    assert_eq!(unknown.len(), 2, "eviction and persistence: {findings:?}");
    assert!(findings.iter().all(|f| !f.advice.is_empty()));
}

#[test]
fn a_server_that_does_not_answer_is_an_error() {
    let mut gone = RedisServer::new();
    let config = Config::builder(gone.url())
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    gone.kill();
    let err = client.check().unwrap_err();
    assert!(err.is_connection() || err.is_timeout(), "{err}");
}

struct Capture(Mutex<Vec<(Level, String)>>);

impl Log for Capture {
    fn enabled(&self, m: &Metadata) -> bool {
        m.target() == "redlatch::check"
    }
    fn log(&self, r: &Record) {
        if self.enabled(r.metadata()) {
            self.0
                .lock()
                .unwrap()
                .push((r.level(), r.args().to_string()));
        }
    }
    fn flush(&self) {}
}

static LOGS: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn check_on_connect_logs_each_finding_as_a_warning() {
    log::set_logger(&LOGS).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let server = RedisServer::new();
    let config = Config::builder(server.url())
        .check_on_connect(true)
        .build()
        .unwrap();
    let _client = Client::new(config).unwrap();
    let logs = std::mem::take(&mut *LOGS.0.lock().unwrap());
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0].0, Level::Warn);
    assert!(logs[0].1.contains("NoPersistence"), "{logs:?}");
    // Off by default.
    let _quiet = Client::open(server.url()).unwrap();
    assert!(LOGS.0.lock().unwrap().is_empty());
}

#[test]
fn ping_answers_with_the_round_trip_on_a_live_server() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let round_trip = client.ping().unwrap();
    assert!(round_trip < Duration::from_secs(10), "{round_trip:?}");
}

#[test]
fn an_unreachable_server_is_named_at_once() {
    let port = support::free_port();
    let client = Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let address = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let err = client.ping().unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    // connection error: cannot connect to 127.0.0.1:<port>: Connection refused (os error 111)
    assert!(err.to_string().contains(&address), "{err}");
    assert!(err.to_string().contains("cannot connect to"), "{err}");
    // Once, not retried.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A lock's call (retried, as a restarting server may come back) names it too.
    let err = client.lock("orders").lock().unwrap_err();
    assert!(
        err.is_connection() && err.to_string().contains(&address),
        "{err}"
    );
}

#[test]
fn refused_credentials_name_the_server_and_are_not_retried() {
    // Set after the start: the harness PINGs the server first.
    let server = RedisServer::new();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right")
        .query(&mut server.conn())
        .unwrap();
    let address = format!("127.0.0.1:{}", server.port());
    let url = format!("redis://127.0.0.1:{}/", server.port());
    // Retried, these would take 3 x 5 s.
    let slow_retries =
        |b: redlatch::ConfigBuilder| b.retry_attempts(3).retry_delay(Duration::from_secs(5));
    let wrong = slow_retries(Config::builder(url.as_str()).password("wrong"));
    let none = slow_retries(Config::builder(url.as_str()));
    for (config, said) in [(wrong, "refused"), (none, "NOAUTH")] {
        let client = Client::new(config.build().unwrap()).unwrap();
        let started = Instant::now();
        for err in [
            client.ping().unwrap_err(),
            client.lock("orders").lock().unwrap_err(),
        ] {
            // redis error: authentication failed on 127.0.0.1:<port>: NOAUTH Authentication required.
            assert!(err.is_auth_failed(), "{err:?}");
            let text = err.to_string();
            assert!(text.contains("authentication failed on"), "{text}");
            assert!(text.contains(&address), "{text}");
            assert!(text.contains(said), "{text}");
        }
        assert!(started.elapsed() < Duration::from_secs(5), "not retried");
    }
    let right = Config::builder(url.as_str())
        .password("right")
        .build()
        .unwrap();
    Client::new(right).unwrap().ping().unwrap();
}
