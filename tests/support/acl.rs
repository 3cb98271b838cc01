//! Users with exactly a client's documented ACL rules ([`redlatch::Config::acl_rules`]), and
//! a run of every primitive as one: each acquire, release, wait (woken by pub/sub, so that
//! subscriptions and publishes are tried too) and setter.

use std::thread;
use std::time::Duration;

use redlatch::{Client, ConfigBuilder, MultiLock};

use super::{await_waiting, RedisServer};

/// The password of every test user.
pub const PASSWORD: &str = "acl-test-password";

/// Creates (or replaces) `user` on `server` with `rules` and the test password, as the
/// guide says to (`+client|setinfo` dropped on Redis 7.0 and 7.1, which refuse it). Panics
/// with the server's words if it refuses a rule.
pub fn set_user(server: &RedisServer, user: &str, rules: &[String]) {
    let version = server.info("server", "redis_version:").unwrap_or_default();
    let no_setinfo = version.starts_with("7.0.") || version.starts_with("7.1.");
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(user).arg("reset").arg("on");
    cmd.arg(format!(">{PASSWORD}"));
    for rule in rules
        .iter()
        .filter(|r| !(no_setinfo && *r == "+client|setinfo"))
    {
        cmd.arg(rule);
    }
    let set: redis::RedisResult<()> = cmd.query(&mut server.conn());
    if let Err(e) = set {
        panic!("ACL SETUSER {user} {rules:?} refused: {e}");
    }
}

/// `builder` logging in as `user`.
pub fn as_user(builder: ConfigBuilder, user: &str) -> ConfigBuilder {
    builder
        .username(user)
        .password(PASSWORD)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(5))
}

/// Why the ACL tests cannot run on this server, if they cannot: channel rules (`&`) came in
/// Redis 6.2.
pub fn lacks_channel_rules() -> Option<String> {
    let binary = super::binary::binary();
    (binary.version < (6, 2, 0)).then(|| {
        format!(
            "{} {:?} has no channel rules (`&`, Redis 6.2)",
            binary.product, binary.version
        )
    })
}

/// Runs every primitive of `client` on names starting with `prefix` (given unprefixed when
/// the client maps names itself: pass `""`), each wait woken by another thread.
pub fn every_primitive(client: &Client, prefix: &str) {
    let name = |n: &str| format!("{prefix}{n}");
    let long = Duration::from_secs(20);

    // Whether its waiter blocks on the lock's channel: a spin lock's polls, and a second
    // reader is not kept waiting.
    for (lock, blocks) in [
        (client.lock(name("plain")), true),
        (client.fair_lock(name("fair")), true),
        (client.non_reentrant_lock(name("nonreentrant")), true),
        (
            client.non_reentrant_fair_lock(name("nonreentrant-fair")),
            true,
        ),
        (client.spin_lock(name("spin")), false),
        (client.fenced_lock(name("fenced")), true),
        (client.read_write_lock(name("rw")).write(), true),
        (client.read_write_lock(name("rw2")).read(), false),
    ] {
        let guard = lock.lock().expect("lock");
        assert!(lock.is_locked().expect("is_locked"));
        // Another thread waits (subscribed) and is woken by the release.
        let waiter = {
            let lock = lock.clone();
            thread::spawn(move || lock.try_lock_for(long).map(|g| g.is_some()))
        };
        if blocks {
            await_waiting(client, 1);
        }
        guard.unlock().expect("unlock");
        assert!(waiter.join().unwrap().expect("the waiter's lock"), "woken");
        assert!(lock.try_lock().expect("try_lock").is_some());
    }

    // A fenced resource.
    let fenced = client.fenced_lock(name("ledger"));
    let guard = fenced.lock().expect("fenced lock");
    let ledger = client.fenced_resource(name("ledger-data"));
    ledger.write(&guard, "1").expect("fenced write");
    assert_eq!(ledger.read().expect("read").as_deref(), Some(&b"1"[..]));
    guard.unlock().unwrap();

    // A multi-lock.
    let both = MultiLock::new([client.lock(name("m1")), client.lock(name("m2"))]).unwrap();
    both.lock()
        .expect("multilock")
        .unlock()
        .expect("multi unlock");

    // A condition.
    let lock = client.lock(name("cond-lock"));
    let condition = lock.condition("ready");
    let waiting = {
        let (lock, condition) = (lock.clone(), condition.clone());
        thread::spawn(move || -> redlatch::Result<bool> {
            let mut guard = lock.lock()?;
            let timed_out = condition.wait_for(&mut guard, long)?.timed_out();
            guard.unlock()?;
            Ok(!timed_out)
        })
    };
    let mut notified = false;
    for _ in 0..200 {
        let guard = lock.lock().expect("condition's lock");
        notified = condition.notify_one().expect("notify");
        guard.unlock().unwrap();
        if notified {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert!(notified, "a waiter was there to notify");
    assert!(waiting.join().unwrap().expect("condition wait"), "notified");

    // A semaphore: set first, a waiter woken by a release.
    let sem = client.semaphore(name("sem"));
    sem.try_set_permits(1).expect("try_set_permits");
    let permit = sem.acquire(1).expect("acquire");
    let waiter = {
        let sem = sem.clone();
        thread::spawn(move || sem.try_acquire_for(1, long).map(|g| g.is_some()))
    };
    await_waiting(client, 1);
    permit.release().expect("release");
    assert!(waiter.join().unwrap().expect("semaphore wait"));
    sem.add_permits(1).expect("add_permits");
    assert!(sem.available_permits().expect("available") >= 1);

    // A permit-expirable semaphore, with a lease and renewed.
    let pes = client.permit_expirable_semaphore(name("pes"));
    pes.try_set_permits(1).expect("pes try_set_permits");
    let permit = pes.acquire(Duration::from_secs(30)).expect("pes acquire");
    let waiter = {
        let pes = pes.clone();
        thread::spawn(move || pes.try_acquire_renewed_for(long).map(|g| g.is_some()))
    };
    await_waiting(client, 1);
    permit.release().expect("pes release");
    assert!(waiter.join().unwrap().expect("pes wait"));
    assert!(pes.available_permits().is_ok());

    // A count-down latch: set first, a waiter woken at zero.
    let latch = client.count_down_latch(name("latch"));
    assert!(latch.try_set_count(1).expect("try_set_count"));
    let waiter = {
        let latch = latch.clone();
        thread::spawn(move || latch.await_for(long))
    };
    await_waiting(client, 1);
    latch.count_down().expect("count_down");
    assert!(waiter.join().unwrap().expect("latch wait"));

    // An election: campaign, proclaim, observe, resign.
    let election = client.election(name("leader"));
    let mut leadership = election.campaign("a").expect("campaign");
    leadership.proclaim("b").expect("proclaim");
    let leader = election.leader().expect("leader").expect("a leader");
    assert_eq!(leader.value_str(), "b");
    let mut observer = election.observe();
    assert!(observer
        .next_timeout(Duration::from_secs(5))
        .expect("observe")
        .is_some());
    leadership.resign().expect("resign");
}
