//! Non-reentrant locks, plain and fair (Redisson's `RedissonNonReentrantLock` and
//! `RedissonNonReentrantFairLock`): an owner's second acquire is refused at once and changes
//! nothing, other owners wait and get the lock on release, and Java and reentrant holders of
//! the same name exclude them, checked on raw Redis state.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Error, Lock};
use support::{await_waiting, join_within, key_exists, numsub, MakeLock, RedisServer};

/// How long a refused acquire may take at most: one round trip, far below any wait asked for.
const AT_ONCE: Duration = Duration::from_millis(500);

const PLAIN: MakeLock = support::make_non_reentrant_lock;
const FAIR: MakeLock = support::make_non_reentrant_fair_lock;

/// What a Java Redisson client on its thread 57 uses as owner id.
const JAVA: &str = "3f1a7c1e-0000-4000-8000-00000000beef:57";

/// RedissonNonReentrantLock's acquire, as a Java client runs it: nil when acquired, the error
/// `NON_REENTRANT_REACQUIRE` for its holder, the PTTL when busy.
const REDISSON_NON_REENTRANT_ACQUIRE: &str = "
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return redis.error_reply('NON_REENTRANT_REACQUIRE');
end;
return redis.call('pttl', KEYS[1]);
";

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

fn hold_count(raw: &mut redis::Connection, name: &str, owner: &str) -> Option<u32> {
    raw.hget(name, owner).unwrap()
}

/// Asserts that `call` fails with `Error::AlreadyHeld` for `name`, well before `AT_ONCE`.
fn assert_refused<T: std::fmt::Debug>(name: &str, call: impl FnOnce() -> redlatch::Result<T>) {
    let started = Instant::now();
    let outcome = call();
    let took = started.elapsed();
    match outcome {
        Err(Error::AlreadyHeld { name: n }) => assert_eq!(n, name),
        other => panic!("expected Error::AlreadyHeld, got {other:?}"),
    }
    assert!(took < AT_ONCE, "refused after {took:?}");
}

/// The same thread's `lock`, `try_lock` and `try_lock_for`, through this lock and another
/// `Lock` of the same name, are refused at once; the hold count stays 1 and one release frees
/// the lock.
fn second_acquire_by_the_same_thread_is_refused(make: MakeLock, name: &'static str) {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let lock = make(&client, name);
    assert!(!lock.is_reentrant());
    let guard = lock.lock().unwrap();
    let owner = client.owner_id();
    assert_eq!(hold_count(&mut raw, name, &owner), Some(1));

    assert_refused(name, || lock.lock());
    assert_refused(name, || lock.try_lock());
    assert_refused(name, || lock.try_lock_for(Duration::from_secs(5)));
    assert_refused(name, || {
        lock.try_lock_until(Instant::now() + Duration::from_secs(5))
    });
    let other = make(&client, name);
    assert_refused(name, || other.try_lock_for(Duration::from_secs(5)));
    assert!(Error::AlreadyHeld { name: name.into() }.is_already_held());

    assert_eq!(hold_count(&mut raw, name, &owner), Some(1), "not counted");
    assert!(lock.is_held_by_current_thread().unwrap());
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert_eq!(client.metrics().waiting, 0);
    let subscribers = numsub(&mut raw, &format!("redisson_lock__channel:{{{name}}}"))
        + numsub(
            &mut raw,
            &format!("redisson_lock__channel:{{{name}}}:{owner}"),
        );
    assert_eq!(subscribers, 0, "a refused acquire subscribes nothing");

    guard.unlock().unwrap();
    assert!(!key_exists(&mut raw, name), "one release frees it");
    // Free again: the owner takes it anew.
    let again = lock.try_lock().unwrap().expect("free");
    assert_eq!(hold_count(&mut raw, name, &owner), Some(1));
    drop(again);
    assert!(!key_exists(&mut raw, name));
}

#[test]
fn plain_second_acquire_by_the_same_thread_is_refused() {
    second_acquire_by_the_same_thread_is_refused(PLAIN, "nr:again");
}

#[test]
fn fair_second_acquire_by_the_same_thread_is_refused() {
    second_acquire_by_the_same_thread_is_refused(FAIR, "nrf:again");
}

/// Another thread blocks while the lock is held and gets it when it is released.
fn a_contender_waits_and_gets_it_on_release(make: MakeLock, name: &'static str) {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let guard = make(&client, name).lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let contender = {
        let client = client.clone();
        thread::spawn(move || {
            let lock = make(&client, name);
            let guard = lock.lock().unwrap();
            tx.send(client.owner_id()).unwrap();
            // Its own second acquire is refused as well.
            assert!(lock.try_lock().unwrap_err().is_already_held());
            guard.unlock().unwrap();
        })
    };
    await_waiting(&client, 1);
    assert!(rx.try_recv().is_err(), "got it while held");
    guard.unlock().unwrap();
    let contender_owner = rx.recv_timeout(Duration::from_secs(5)).expect("woken");
    assert_ne!(contender_owner, client.owner_id());
    join_within(vec![contender], Duration::from_secs(10), "contender stuck");
    assert!(!key_exists(&mut raw, name));
}

#[test]
fn plain_contender_waits_and_gets_it_on_release() {
    a_contender_waits_and_gets_it_on_release(PLAIN, "nr:contend");
}

#[test]
fn fair_contender_waits_and_gets_it_on_release() {
    a_contender_waits_and_gets_it_on_release(FAIR, "nrf:contend");
}

#[test]
fn fair_refused_owner_is_not_queued_behind_itself() {
    // The refusal comes before the queue: with another waiter queued, the holder's refused
    // acquire (which would wait) neither joins the queue nor moves the waiter's deadline.
    let name = "nrf:queue";
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let lock = client.non_reentrant_fair_lock(name);
    let guard = lock.lock().unwrap();
    let owner = client.owner_id();
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            tx.send(client.owner_id()).unwrap();
            client
                .non_reentrant_fair_lock(name)
                .lock()
                .unwrap()
                .unlock()
        })
    };
    let waiter_owner = rx.recv().unwrap();
    await_waiting(&client, 1);
    let queue: Vec<String> = raw.lrange(queue_key(name), 0, -1).unwrap();
    assert_eq!(queue, [waiter_owner.as_str()]);
    let deadline: Option<i64> = raw.zscore(timeout_key(name), &waiter_owner).unwrap();
    assert!(deadline.is_some());

    assert_refused(name, || lock.lock());
    assert_refused(name, || lock.try_lock_for(Duration::from_secs(5)));
    assert_refused(name, || lock.try_lock());

    let len: usize = raw.llen(queue_key(name)).unwrap();
    assert_eq!(len, 1, "only the other waiter is queued");
    let mine: Option<i64> = raw.zscore(timeout_key(name), &owner).unwrap();
    assert_eq!(mine, None, "the refused owner has no deadline");
    let after: Option<i64> = raw.zscore(timeout_key(name), &waiter_owner).unwrap();
    assert_eq!(after, deadline, "the waiter's deadline is untouched");
    assert_eq!(hold_count(&mut raw, name, &owner), Some(1));
    assert_eq!(client.metrics().waiting, 1, "only the other waiter waits");

    guard.unlock().unwrap();
    let waited = join_within(vec![waiter], Duration::from_secs(10), "waiter stuck");
    waited.into_iter().for_each(|r| r.unwrap());
    assert!(!key_exists(&mut raw, name));
    let len: usize = raw.llen(queue_key(name)).unwrap();
    assert_eq!(len, 0);
}

#[test]
fn fair_refused_owner_alone_leaves_no_queue() {
    let name = "nrf:alone";
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let lock = client.non_reentrant_fair_lock(name);
    let guard = lock.lock().unwrap();
    assert_refused(name, || lock.lock());
    let queue: bool = raw.exists(queue_key(name)).unwrap();
    let timeouts: bool = raw.exists(timeout_key(name)).unwrap();
    assert!(!queue && !timeouts, "no queue left behind");
    drop(guard);
    assert!(!key_exists(&mut raw, name));
}

/// A "Java" holder written with Redisson's layout (HSET owner 1, PEXPIRE) excludes our lock;
/// its release (DEL, publish 0) wakes our waiter.
fn a_java_holder_excludes_us(make: MakeLock, name: &'static str) {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let _: () = raw.hset(name, JAVA, 1).unwrap();
    let _: () = raw.pexpire(name, 30_000).unwrap();
    let lock = make(&client, name);
    assert!(lock.try_lock().unwrap().is_none());
    assert!(lock
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            let guard = make(&client, name).lock().unwrap();
            let owner = client.owner_id();
            guard.unlock().unwrap();
            owner
        })
    };
    await_waiting(&client, 1);
    // Redisson's release of its last hold: delete, publish 0 on the lock channel; a fair
    // lock's (RedissonFairLock) on the channel of the head of the queue, our waiter.
    let _: () = raw.del(name).unwrap();
    let channel = if lock.is_fair() {
        let head: String = raw.lindex(queue_key(name), 0).unwrap();
        format!("redisson_lock__channel:{{{name}}}:{head}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    };
    let _: () = raw.publish(channel, "0").unwrap();
    let owners = join_within(vec![waiter], Duration::from_secs(10), "waiter stuck");
    assert_ne!(owners[0], JAVA);
    assert!(!key_exists(&mut raw, name));
}

#[test]
fn plain_java_holder_excludes_us() {
    a_java_holder_excludes_us(PLAIN, "nr:java-holds");
}

#[test]
fn plain_we_exclude_a_java_client_and_it_refuses_itself_as_we_do() {
    let name = "nr:java-waits";
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let script = redis::Script::new(REDISSON_NON_REENTRANT_ACQUIRE);
    let guard = client.non_reentrant_lock(name).lock().unwrap();
    // Our hold has Redisson's layout.
    let fields: Vec<(String, String)> = raw.hgetall(name).unwrap();
    assert_eq!(fields, vec![(client.owner_id(), "1".to_owned())]);
    let pttl: i64 = raw.pttl(name).unwrap();
    assert!((29_000..=30_000).contains(&pttl), "pttl {pttl}");
    // Java's acquire finds it busy.
    let busy: Option<i64> = script
        .key(name)
        .arg(30_000)
        .arg(JAVA)
        .invoke(&mut raw)
        .unwrap();
    assert!(busy.is_some_and(|ms| ms > 0), "{busy:?}");
    guard.unlock().unwrap();
    // Java takes it; its own re-acquire is refused, as ours is.
    let taken: Option<i64> = script
        .key(name)
        .arg(30_000)
        .arg(JAVA)
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(taken, None);
    let again: redis::RedisResult<Option<i64>> =
        script.key(name).arg(30_000).arg(JAVA).invoke(&mut raw);
    assert!(again
        .unwrap_err()
        .to_string()
        .contains("NON_REENTRANT_REACQUIRE"));
    assert_eq!(hold_count(&mut raw, name, JAVA), Some(1));
    assert!(client
        .non_reentrant_lock(name)
        .try_lock()
        .unwrap()
        .is_none());
}

#[test]
fn fair_java_holder_excludes_us() {
    a_java_holder_excludes_us(FAIR, "nrf:java-holds");
}

#[test]
fn fair_we_exclude_a_java_waiter_and_hand_it_the_lock() {
    let name = "nrf:java-waits";
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let lock = client.non_reentrant_fair_lock(name);
    let guard = lock.lock().unwrap();
    let fields: Vec<(String, String)> = raw.hgetall(name).unwrap();
    assert_eq!(fields, vec![(client.owner_id(), "1".to_owned())]);
    // A Java thread queues as RedissonFairLock does: RPUSH the owner, ZADD its deadline.
    let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut raw).unwrap();
    let _: () = raw.rpush(queue_key(name), JAVA).unwrap();
    let _: () = raw
        .zadd(timeout_key(name), JAVA, s * 1000 + us / 1000 + 330_000)
        .unwrap();
    // Our refused re-acquire neither jumps the Java waiter nor queues behind it.
    assert_refused(name, || lock.lock());
    let queue: Vec<String> = raw.lrange(queue_key(name), 0, -1).unwrap();
    assert_eq!(queue, [JAVA]);
    // Our release wakes the Java head on its own channel.
    let (tx, rx) = mpsc::channel();
    let mut sub = server.conn();
    let java_channel = format!("redisson_lock__channel:{{{name}}}:{JAVA}");
    let listener = {
        let java_channel = java_channel.clone();
        thread::spawn(move || {
            let mut ps = sub.as_pubsub();
            ps.subscribe(&java_channel).unwrap();
            tx.send(()).unwrap();
            ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            ps.get_message().unwrap().get_payload::<String>().unwrap()
        })
    };
    rx.recv().unwrap();
    guard.unlock().unwrap();
    assert_eq!(listener.join().unwrap(), "0");
    // The Java thread takes it (leaves the queue, HSET owner 1, PEXPIRE): it excludes us.
    let _: () = redis::pipe()
        .lpop(queue_key(name), None)
        .zrem(timeout_key(name), JAVA)
        .hset(name, JAVA, 1)
        .pexpire(name, 30_000)
        .query(&mut raw)
        .unwrap();
    assert!(lock.try_lock().unwrap().is_none());
    assert!(lock
        .try_lock_for(Duration::from_millis(100))
        .unwrap()
        .is_none());
    let len: usize = raw.llen(queue_key(name)).unwrap();
    assert_eq!(len, 0, "a wait given up leaves the queue");
}

/// A reentrant `Client::lock` and a non-reentrant lock of the same name are one lock: held by
/// one owner through either, the other owner's either is refused.
fn reentrant_and_non_reentrant_exclude_each_other(
    reentrant: MakeLock,
    once: MakeLock,
    name: &'static str,
) {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let other = Client::open(server.url()).unwrap();

    let held = reentrant(&client, name).lock().unwrap();
    assert!(once(&other, name).try_lock().unwrap().is_none());
    assert!(once(&other, name)
        .try_lock_for(Duration::from_millis(100))
        .unwrap()
        .is_none());
    // The same thread holds it through the reentrant lock: the non-reentrant one refuses.
    assert_refused(name, || once(&client, name).try_lock());
    assert_eq!(hold_count(&mut raw, name, &client.owner_id()), Some(1));
    drop(held);
    assert!(!key_exists(&mut raw, name));

    let held = once(&client, name).lock().unwrap();
    assert!(reentrant(&other, name).try_lock().unwrap().is_none());
    assert!(reentrant(&other, name)
        .try_lock_for(Duration::from_millis(100))
        .unwrap()
        .is_none());
    drop(held);
    assert!(!key_exists(&mut raw, name));
    // Free: the other client takes it through either kind.
    let taken = reentrant(&other, name).try_lock().unwrap().expect("free");
    drop(taken);
}

#[test]
fn plain_reentrant_and_non_reentrant_exclude_each_other() {
    reentrant_and_non_reentrant_exclude_each_other(support::make_lock, PLAIN, "nr:mixed");
}

#[test]
fn fair_reentrant_and_non_reentrant_exclude_each_other() {
    reentrant_and_non_reentrant_exclude_each_other(support::make_fair_lock, FAIR, "nrf:mixed");
}

/// A `LockOwner` holding a non-reentrant lock is refused on any thread; its guard released on
/// another thread frees the lock.
fn lock_owner_is_refused_from_another_thread(make: MakeLock, name: &'static str) {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let owner = client.lock_owner();
    let lock = make(&client, name).with_owner(&owner);
    let guard = lock.lock().unwrap();
    let refused = {
        let lock = lock.clone();
        let client = client.clone();
        thread::spawn(move || {
            assert_refused(name, || lock.try_lock());
            assert_refused(name, || lock.lock());
            assert_refused(name, || lock.try_lock_for(Duration::from_secs(5)));
            // The thread itself is another owner: it is excluded, not refused.
            let mine: Lock = make(&client, name);
            mine.try_lock().unwrap().is_none()
        })
    };
    let excluded = join_within(vec![refused], Duration::from_secs(10), "refusal stuck");
    assert!(excluded[0], "the thread's own acquire found it held");
    assert_eq!(hold_count(&mut raw, name, owner.id()), Some(1));
    thread::spawn(move || guard.unlock())
        .join()
        .unwrap()
        .unwrap();
    assert!(!key_exists(&mut raw, name));
}

#[test]
fn plain_lock_owner_is_refused_from_another_thread() {
    lock_owner_is_refused_from_another_thread(PLAIN, "nr:owner");
}

#[test]
fn fair_lock_owner_is_refused_from_another_thread() {
    lock_owner_is_refused_from_another_thread(FAIR, "nrf:owner");
}

#[test]
fn non_reentrant_kinds_say_what_they_are() {
    let client = Client::open("redis://127.0.0.1/").unwrap();
    let plain = client.non_reentrant_lock("k");
    let fair = client.non_reentrant_fair_lock("k");
    assert!(!plain.is_fair() && !plain.is_reentrant() && !plain.is_fenced());
    assert!(fair.is_fair() && !fair.is_reentrant());
    assert!(client.lock("k").is_reentrant() && client.fair_lock("k").is_reentrant());
    assert!(format!("{plain:?}").contains("non-reentrant"));
    assert!(format!("{fair:?}").contains("non-reentrant fair"));
}
