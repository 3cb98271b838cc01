//! Log messages: routine ones at debug, a lost lock at warn, each naming the lock and owner.
//! (One test: the logger is global to the test binary.)

mod support;

use std::sync::Mutex;
use std::time::Duration;

use crossbeam_channel::bounded;
use log::{Level, Log, Metadata, Record};
use redlatch::{Client, Config};
use support::RedisServer;

struct Capture(Mutex<Vec<(Level, String)>>);

impl Log for Capture {
    fn enabled(&self, m: &Metadata) -> bool {
        m.target().starts_with("redlatch")
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

fn take() -> Vec<(Level, String)> {
    std::mem::take(&mut *LOGS.0.lock().unwrap())
}

#[test]
fn routine_at_debug_and_a_lost_lock_at_warn_with_name_and_owner() {
    log::set_logger(&LOGS).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let server = RedisServer::new();
    take();
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let lock = client.lock("log:ledger");

    // Connection setup, command and pub/sub (a wait subscribes): a server that refuses
    // `CLIENT SETINFO` (before 7.2) or `HELLO` is expected, not worth a warning.
    let other = Client::open(server.url()).unwrap();
    let held = other.lock("log:ledger").lock().unwrap();
    assert!(lock
        .try_lock_for(Duration::from_millis(50))
        .unwrap()
        .is_none());
    drop(held);
    let setup = take();
    assert!(setup.iter().all(|(l, _)| *l >= Level::Debug), "{setup:#?}");

    drop(lock.lock().unwrap());
    let owner = client.owner_id();
    let logs = take();
    for event in ["acquired `log:ledger`", "released `log:ledger`"] {
        let (level, msg) = logs
            .iter()
            .find(|(_, m)| m.contains(event))
            .unwrap_or_else(|| panic!("no `{event}` in {logs:#?}"));
        assert_eq!(*level, Level::Debug, "{msg}");
        assert!(msg.contains(&owner), "names the owner: {msg}");
    }
    assert!(logs.iter().all(|(l, _)| *l >= Level::Debug), "{logs:#?}");

    // Lost: force-unlocked elsewhere; the watchdog finds out.
    let guard = lock.lock().unwrap();
    let (tx, rx) = bounded(1);
    guard.on_lost(move |why| tx.send(why).unwrap());
    take();
    assert!(Client::open(server.url())
        .unwrap()
        .lock("log:ledger")
        .force_unlock()
        .unwrap());
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let err = guard.unlock().unwrap_err();
    assert!(err.is_lock_lost());
    let logs = take();
    let warns: Vec<&String> = logs
        .iter()
        .filter(|(l, _)| *l == Level::Warn)
        .map(|(_, m)| m)
        .collect();
    assert!(!warns.is_empty(), "a lost lock is a warning: {logs:#?}");
    for msg in &warns {
        assert!(
            msg.contains("`log:ledger`") && msg.contains(&owner),
            "names lock and owner: {msg}"
        );
    }
    assert!(logs.iter().all(|(l, _)| *l != Level::Error), "{logs:#?}");
}
