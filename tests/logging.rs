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

    // A read lock whose expiry a peer cut below what our renewals left (as Redisson's
    // read-lock renewal does with a shorter watchdog timeout): one warning naming the cause,
    // the hold kept; a second cut is not warned of again.
    // Renewed every 2 s (a 6 s lease, so each renewal leaves about 4 s); each cut leaves
    // 3 s, which the next renewal finds well below that, with a second to spare before the
    // key would expire (a cut to 1 s with renewals every second raced the renewal: seen
    // failing on Valkey 9.1.2 under load, the key gone before it came).
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_secs(6))
        .build()
        .unwrap();
    let readers = Client::new(config).unwrap();
    let read = readers.read_write_lock("log:rw").read().lock().unwrap();
    let mut raw = server.conn();
    take();
    let renewed = |logs: &[(Level, String)]| {
        logs.iter()
            .filter(|(_, m)| m.contains("`log:rw`") && m.contains("expiry was cut"))
            .count()
    };
    let mut logs = Vec::new();
    for _ in 0..2 {
        let _: () = redis::cmd("PEXPIRE")
            .arg("log:rw")
            .arg(3_000)
            .query(&mut raw)
            .unwrap();
        let before = renewed(&logs);
        assert!(
            support::wait_until(Duration::from_secs(5), || {
                logs.extend(take());
                renewed(&logs) > before
            }),
            "no renewal reported the cut: {logs:#?}"
        );
    }
    let warns: Vec<&String> = logs
        .iter()
        .filter(|(l, _)| *l == Level::Warn)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(warns.len(), 1, "{logs:#?}");
    assert!(
        warns[0].contains("shorter watchdog timeout") && warns[0].contains(&readers.owner_id()),
        "{}",
        warns[0]
    );
    assert!(!read.is_lost());
    let pttl: i64 = redis::cmd("PTTL").arg("log:rw").query(&mut raw).unwrap();
    assert!(pttl > 2_000, "renewed to the lease again: {pttl}");
    read.unlock().unwrap();

    // A wait on a semaphore nobody set up: warned of once per client (then at debug), naming
    // the semaphore and what sets it up; a try that does not wait, or a wait on a semaphore
    // that was set up, is not warned of.
    let sem = client.semaphore("log:unset");
    take();
    assert!(sem.try_acquire(1).unwrap().is_none());
    let unset = |logs: &[(Level, String)], level| {
        logs.iter()
            .filter(|(l, m)| *l == level && m.contains("`log:unset`") && m.contains("set up"))
            .count()
    };
    assert_eq!(unset(&take(), Level::Warn), 0, "a try waits for nothing");
    for level in [Level::Warn, Level::Debug] {
        let got = sem.try_acquire_for(1, Duration::from_millis(20)).unwrap();
        assert!(got.is_none());
        let logs = take();
        assert_eq!(unset(&logs, level), 1, "{level}: {logs:#?}");
        assert!(logs.iter().all(|(l, _)| *l != Level::Error), "{logs:#?}");
    }
    let set = client.semaphore("log:set");
    assert!(set.try_set_permits(0).unwrap());
    take();
    assert!(set
        .try_acquire_for(1, Duration::from_millis(20))
        .unwrap()
        .is_none());
    let logs = take();
    assert!(logs.iter().all(|(l, _)| *l > Level::Warn), "{logs:#?}");
    assert!(!logs.iter().any(|(_, m)| m.contains("set up")), "{logs:#?}");
}
