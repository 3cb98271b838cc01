//! Interruptible waits: every blocking call of every primitive returns `Error::Interrupted`
//! promptly when its thread is interrupted, and leaves nothing behind in Redis.

mod support;

use support::forget::ForgetAll;

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redlatch::{Client, Interrupter, MultiLock, RedLock};
use support::{numsub, wait_until, RedisServer};

/// How long an interrupted wait may take to return in these tests: the library aims at a few
/// milliseconds (the 1,000-waiter test checks the median against 10 ms); this bound only keeps
/// a loaded machine from failing the run.
const PROMPT: Duration = Duration::from_millis(500);

fn await_waiting(client: &Client, n: u64) {
    assert!(
        wait_until(Duration::from_secs(10), || client.metrics().waiting == n),
        "expected {n} waiting threads, saw {}",
        client.metrics().waiting
    );
}

/// A thread running `f`, which first hands back its interrupter; the thread returns what `f`
/// returned and when.
fn spawn_waiter<T: Send + 'static>(
    f: impl FnOnce() -> redlatch::Result<T> + Send + 'static,
) -> (Interrupter, JoinHandle<(redlatch::Result<T>, Instant)>) {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        tx.send(Interrupter::current()).unwrap();
        let out = f();
        (out, Instant::now())
    });
    (rx.recv().unwrap(), handle)
}

/// Interrupts the waiting thread (`client` counts it waiting) and checks that it returns
/// `Error::Interrupted` promptly; returns how long it took.
fn interrupt_and_check<T: std::fmt::Debug>(
    client: &Client,
    what: &str,
    interrupter: Interrupter,
    handle: JoinHandle<(redlatch::Result<T>, Instant)>,
) -> Duration {
    await_waiting(client, 1);
    let asked = Instant::now();
    interrupter.interrupt();
    let (out, at) = handle.join().unwrap();
    let took = at.saturating_duration_since(asked);
    match out {
        Err(e) if e.is_interrupted() => {}
        other => panic!("{what}: expected Error::Interrupted, got {other:?}"),
    }
    assert!(took < PROMPT, "{what}: returned after {took:?}");
    assert!(
        !interrupter.is_interrupted(),
        "{what}: the wait took the interrupt"
    );
    assert_eq!(client.metrics().waiting, 0, "{what}: left the wait");
    took
}

fn await_no_subscriber(raw: &mut redis::Connection, channel: &str) {
    assert!(
        wait_until(Duration::from_secs(5), || numsub(raw, channel) == 0),
        "`{channel}` still has {} subscriber(s)",
        numsub(raw, channel)
    );
}

fn len(raw: &mut redis::Connection, cmd: &str, key: &str) -> i64 {
    redis::cmd(cmd).arg(key).query(raw).unwrap()
}

#[test]
fn every_lock_kind_returns_interrupted_and_leaves_nothing_behind() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    type Make = fn(&Client, &str) -> redlatch::Lock;
    let kinds: [(&str, Make, &str); 3] = [
        (
            "plain",
            support::make_lock,
            "redisson_lock__channel:{i:plain}",
        ),
        ("fair", support::make_fair_lock, ""),
        (
            "fenced",
            support::make_fenced_lock,
            "redisson_lock__channel:{i:fenced}",
        ),
    ];
    for (kind, make, channel) in kinds {
        let name = format!("i:{kind}");
        let guard = make(&holder, &name).lock().unwrap();
        for timed in [false, true] {
            let lock = make(&client, &name);
            let (interrupter, handle) = spawn_waiter(move || match timed {
                false => lock.lock().map(drop),
                true => lock.try_lock_for(Duration::from_secs(60)).map(drop),
            });
            interrupt_and_check(&client, kind, interrupter, handle);
            if channel.is_empty() {
                // Fair: the waiter left the queue, and its own channel.
                assert_eq!(
                    len(&mut raw, "LLEN", &format!("redisson_lock_queue:{{{name}}}")),
                    0
                );
                assert_eq!(
                    len(
                        &mut raw,
                        "ZCARD",
                        &format!("redisson_lock_timeout:{{{name}}}")
                    ),
                    0
                );
                let channels: Vec<String> = redis::cmd("PUBSUB")
                    .arg("CHANNELS")
                    .arg(format!("redisson_lock__channel:{{{name}}}*"))
                    .query(&mut raw)
                    .unwrap();
                assert!(
                    wait_until(Duration::from_secs(5), || {
                        redis::cmd("PUBSUB")
                            .arg("CHANNELS")
                            .arg(format!("redisson_lock__channel:{{{name}}}*"))
                            .query::<Vec<String>>(&mut raw)
                            .unwrap()
                            .is_empty()
                    }),
                    "{channels:?}"
                );
            } else {
                await_no_subscriber(&mut raw, channel);
            }
        }
        // The lock is untouched, and a later wait works.
        assert!(make(&holder, &name).is_held_by_current_thread().unwrap());
        let lock = make(&client, &name);
        let later = thread::spawn(move || lock.lock().map(drop));
        await_waiting(&client, 1);
        drop(guard);
        later.join().unwrap().unwrap();
    }
}

#[test]
fn both_sides_of_a_read_write_lock_return_interrupted() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let channel = "redisson_rwlock:{i:rw}";

    let writing = holder.read_write_lock("i:rw").write().lock().unwrap();
    let read = client.read_write_lock("i:rw").read();
    let (interrupter, handle) = spawn_waiter(move || read.lock().map(drop));
    interrupt_and_check(&client, "read", interrupter, handle);
    await_no_subscriber(&mut raw, channel);
    drop(writing);

    let reading = holder.read_write_lock("i:rw").read().lock().unwrap();
    let write = client.read_write_lock("i:rw").write();
    let (interrupter, handle) = spawn_waiter(move || write.lock().map(drop));
    interrupt_and_check(&client, "write", interrupter, handle);
    await_no_subscriber(&mut raw, channel);
    let mode: Option<String> = redis::cmd("HGET")
        .arg("i:rw")
        .arg("mode")
        .query(&mut raw)
        .unwrap();
    assert_eq!(mode.as_deref(), Some("read"), "the reader still holds it");
    drop(reading);
}

#[test]
fn multilock_and_redlock_return_interrupted_holding_nothing() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();

    let busy = holder.lock("i:m2").lock().unwrap();
    let multi = MultiLock::new([client.lock("i:m1"), client.lock("i:m2")]).unwrap();
    let (interrupter, handle) = spawn_waiter(move || multi.lock().map(drop));
    interrupt_and_check(&client, "multilock", interrupter, handle);
    assert_eq!(
        len(&mut raw, "EXISTS", "i:m1"),
        0,
        "the free member was released"
    );
    await_no_subscriber(&mut raw, "redisson_lock__channel:{i:m2}");
    drop(busy);

    let busy: Vec<_> = ["i:r2", "i:r3"]
        .iter()
        .map(|n| holder.lock(n).lock().unwrap())
        .collect();
    let redlock = RedLock::new(["i:r1", "i:r2", "i:r3"].map(|n| client.lock(n))).unwrap();
    let (interrupter, handle) = spawn_waiter(move || redlock.lock().map(drop));
    interrupt_and_check(&client, "redlock", interrupter, handle);
    assert_eq!(
        len(&mut raw, "EXISTS", "i:r1"),
        0,
        "the free member was released"
    );
    drop(busy);
}

#[test]
fn semaphores_and_the_latch_return_interrupted_and_take_nothing() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();

    let sem = client.semaphore("i:sem");
    sem.try_set_permits(1).unwrap();
    let waiting = sem.clone();
    let (interrupter, handle) = spawn_waiter(move || waiting.acquire(2).forget_all());
    interrupt_and_check(&client, "semaphore", interrupter, handle);
    assert_eq!(sem.available_permits().unwrap(), 1, "no permit taken");
    await_no_subscriber(&mut raw, "redisson_sc:{i:sem}");

    let pes = client.permit_expirable_semaphore("i:pes");
    pes.try_set_permits(0).unwrap();
    let waiting = pes.clone();
    let (interrupter, handle) = spawn_waiter(move || {
        waiting
            .try_acquire_for(Duration::from_secs(5), Duration::from_secs(60))
            .forget_all()
    });
    interrupt_and_check(&client, "permit-expirable semaphore", interrupter, handle);
    assert_eq!(pes.available_permits().unwrap(), 0);
    assert_eq!(
        len(&mut raw, "ZCARD", "{i:pes}:timeout"),
        0,
        "no permit leased"
    );
    await_no_subscriber(&mut raw, "redisson_sc:{i:pes}");

    let latch = client.count_down_latch("i:latch");
    latch.try_set_count(1).unwrap();
    let waiting = latch.clone();
    let (interrupter, handle) = spawn_waiter(move || waiting.await_zero());
    interrupt_and_check(&client, "latch", interrupter, handle);
    assert_eq!(latch.count().unwrap(), 1);
    await_no_subscriber(&mut raw, "redisson_countdownlatch__channel__{i:latch}");
}

#[test]
fn a_pending_interrupt_fails_the_next_wait_at_once_but_not_a_call_that_needs_none() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let me = Interrupter::current();
    me.interrupt();
    // No wait needed: the lock is free, and a try_lock never waits.
    drop(client.lock("i:pending:free").lock().unwrap());
    let guard = holder.lock("i:pending").lock().unwrap();
    assert!(client.lock("i:pending").try_lock().unwrap().is_none());
    assert!(me.is_interrupted(), "kept for the next wait");
    let started = Instant::now();
    let err = client.lock("i:pending").lock().unwrap_err();
    assert!(err.is_interrupted(), "{err:?}");
    assert!(started.elapsed() < PROMPT);
    assert!(!me.is_interrupted(), "taken by the wait");
    assert_eq!(client.metrics().waiting, 0);
    // Cleared, it does not fail a wait.
    me.interrupt();
    assert!(me.clear());
    let got = client
        .lock("i:pending")
        .try_lock_for(Duration::from_millis(100))
        .unwrap();
    assert!(got.is_none(), "waited and timed out");
    drop(guard);
}

#[test]
fn an_interrupted_waiter_hands_its_wake_up_to_the_next() {
    // The unlock wakes one waiter of this client (the first registered). If that one is
    // interrupted as the wake-up arrives, the next must get it, not sleep for a lease.
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let config = redlatch::Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    for round in 0..10 {
        let name = format!("i:handon:{round}");
        let guard = holder.lock(&name).lock().unwrap();
        let first = client.lock(&name);
        let (interrupter, a) = spawn_waiter(move || first.lock().map(drop));
        await_waiting(&client, 1);
        let second = client.lock(&name);
        let b = thread::spawn(move || {
            let started = Instant::now();
            second.lock().map(|g| {
                drop(g);
                started.elapsed()
            })
        });
        await_waiting(&client, 2);
        drop(guard);
        interrupter.interrupt();
        let (a_out, _) = a.join().unwrap();
        let waited = b.join().unwrap().unwrap();
        assert!(
            waited < Duration::from_secs(10),
            "round {round}: the second waiter slept {waited:?} (a lost wake-up waits a lease)"
        );
        // The first either got the lock before the interrupt came, or was interrupted.
        assert!(a_out.is_ok() || a_out.unwrap_err().is_interrupted());
        Interrupter::current().clear();
    }
}

#[test]
fn interrupting_1000_waiters_of_a_fair_lock_leaves_no_subscription_and_no_queue_entry() {
    const WAITERS: usize = 1000;
    let server = RedisServer::new();
    let mut raw = server.conn();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let guard = holder.fair_lock("i:many").lock().unwrap();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let lock = client.fair_lock("i:many");
            let (tx, rx) = mpsc::channel();
            let handle = thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    tx.send(Interrupter::current()).unwrap();
                    let out = lock.lock().map(drop);
                    (out, Instant::now())
                })
                .unwrap();
            (rx.recv().unwrap(), handle)
        })
        .collect();
    await_waiting(&client, WAITERS as u64);
    assert_eq!(
        len(&mut raw, "LLEN", "redisson_lock_queue:{i:many}"),
        WAITERS as i64
    );
    let mut took = Vec::with_capacity(WAITERS);
    for (interrupter, handle) in waiters {
        let asked = Instant::now();
        interrupter.interrupt();
        let (out, at) = handle.join().unwrap();
        assert!(out.unwrap_err().is_interrupted());
        took.push(at.saturating_duration_since(asked));
    }
    took.sort();
    let p50 = took[WAITERS / 2];
    let max = took[WAITERS - 1];
    eprintln!("interrupt to return: p50 {p50:?}, max {max:?}");
    assert!(p50 < Duration::from_millis(10), "p50 {p50:?}");
    assert!(max < PROMPT, "max {max:?}");
    assert_eq!(client.metrics().waiting, 0);
    assert_eq!(len(&mut raw, "LLEN", "redisson_lock_queue:{i:many}"), 0);
    assert_eq!(len(&mut raw, "ZCARD", "redisson_lock_timeout:{i:many}"), 0);
    assert!(
        wait_until(Duration::from_secs(10), || {
            redis::cmd("PUBSUB")
                .arg("CHANNELS")
                .query::<Vec<String>>(&mut raw)
                .unwrap()
                .is_empty()
        }),
        "subscriptions left"
    );
    assert!(holder
        .fair_lock("i:many")
        .is_held_by_current_thread()
        .unwrap());
    drop(guard);
}

/// The handles a program hands to other threads stay `Send + Sync`.
#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Client>();
    send_sync::<redlatch::Lock>();
    send_sync::<redlatch::ReadWriteLock>();
    send_sync::<MultiLock>();
    send_sync::<RedLock>();
    send_sync::<redlatch::Semaphore>();
    send_sync::<redlatch::PermitExpirableSemaphore>();
    send_sync::<redlatch::CountDownLatch>();
    send_sync::<redlatch::watch::Watch>();
    send_sync::<Interrupter>();
}

#[test]
fn concurrent_closes_let_a_fair_waiter_leave_its_queue_first() {
    // Two closes at once: neither returns, nor closes the connections, before the fair waiter
    // has left the queue (a place left behind would stay there for minutes).
    let server = RedisServer::new();
    let mut raw = server.conn();
    let holder = Client::open(server.url()).unwrap();
    let _guard = holder.fair_lock("i:closes").lock().unwrap();
    for round in 0..20 {
        let client = Client::open(server.url()).unwrap();
        let lock = client.fair_lock("i:closes");
        let waiter = thread::spawn(move || lock.lock().map(drop).unwrap_err());
        await_waiting(&client, 1);
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let closers: Vec<_> = (0..2)
            .map(|_| {
                let (client, barrier) = (client.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    client.close();
                })
            })
            .collect();
        for c in closers {
            c.join().unwrap();
        }
        // Both closes have returned: the waiter has left the queue.
        assert_eq!(
            len(&mut raw, "LLEN", "redisson_lock_queue:{i:closes}"),
            0,
            "round {round}"
        );
        assert!(waiter.join().unwrap().is_closed());
    }
}

#[test]
fn a_guard_with_an_explicit_lease_is_lost_once_its_client_closes() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let guard = client
        .lock("i:leased")
        .with_lease(Duration::from_secs(60))
        .lock()
        .unwrap();
    let (before_tx, before_rx) = mpsc::channel();
    guard.on_lost(move |reason| before_tx.send(reason).unwrap());
    let other = client
        .lock("i:leased:2")
        .with_lease(Duration::from_secs(60))
        .lock()
        .unwrap();
    client.close();
    // A callback registered before the close, and one registered after it.
    assert_eq!(
        before_rx.recv_timeout(Duration::from_secs(1)).unwrap(),
        redlatch::LostReason::ClientClosed
    );
    assert!(other.is_lost());
    let (after_tx, after_rx) = mpsc::channel();
    other.on_lost(move |reason| after_tx.send(reason).unwrap());
    assert_eq!(
        after_rx.try_recv().unwrap(),
        redlatch::LostReason::ClientClosed,
        "called at once"
    );
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert!(other.unlock().unwrap_err().is_lock_lost());
    let ttl: i64 = redis::cmd("PTTL").arg("i:leased").query(&mut raw).unwrap();
    assert!(ttl > 50_000, "left to its lease: PTTL {ttl}");
}
