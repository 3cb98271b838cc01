//! Faults: script cache flushed, pub/sub connection killed or gone silent, server down or
//! paused.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use support::proxy::Proxy;
use support::{
    await_waiting, command_calls, join_within, kill_pubsub_connections, numsub, quick_client,
    wait_until, RedisServer,
};

#[test]
fn script_flush_is_invisible_to_callers() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("fault:flush");
    drop(lock.lock().unwrap());
    let mut raw = server.conn();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    let guard = lock.lock().expect("the script is reloaded transparently");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    guard.unlock().expect("unlock reloads too");
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn killed_pubsub_connection_reconnects_resubscribes_and_waiter_still_wakes() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let channel = "redisson_lock__channel:{fault:pubsub}";
    let guard = holder.lock("fault:pubsub").lock().unwrap(); // 30 s lease: no TTL rescue
    let lock = client.lock("fault:pubsub");
    let waiter = std::thread::spawn(move || {
        let g = lock.lock().unwrap();
        let at = Instant::now();
        drop(g);
        at
    });
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    assert_eq!(kill_pubsub_connections(&mut raw), 1);
    // The dispatcher reconnects and subscribes again on its own.
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    let released = Instant::now();
    drop(guard);
    let latency = waiter.join().unwrap() - released;
    assert!(
        latency < Duration::from_secs(1),
        "woken {latency:?} after unlock"
    );
}

/// A pub/sub connection that falls silent without an error (a stalled proxy, a NAT that forgot
/// it) is found out by its pings (issue 57): its waiters, deaf meanwhile, get the lock within
/// the ping bound although other holders keep it busy.
#[test]
fn waiters_on_a_pub_sub_connection_gone_silent_get_the_lock_within_the_ping_bound() {
    let server = RedisServer::new();
    let proxy = Proxy::start(server.port());
    let interval = Duration::from_millis(500);
    let hold = Duration::from_millis(500);
    let config = Config::builder(proxy.url().as_str())
        .pubsub_ping_interval(interval)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let holder = Client::open(server.url()).unwrap();
    let name = "fault:silent";
    // Another process's threads keep taking the lock, a short pause after each release: a
    // waiter that hears the release gets it, one that does not almost never finds it free.
    let (held_tx, held) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, lock) = (Arc::clone(&stop), holder.lock(name));
        std::thread::spawn(move || {
            let first = lock.lock().unwrap(); // 30 s lease, renewed: no TTL rescue
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            drop(first);
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                let guard = lock.lock().unwrap();
                std::thread::sleep(hold);
                drop(guard);
            }
        })
    };
    held.recv().unwrap();
    let waiters = (0..2)
        .map(|_| {
            let lock = client.lock(name);
            std::thread::spawn(move || {
                let guard = lock.lock().unwrap();
                let at = Instant::now();
                std::thread::sleep(hold);
                drop(guard);
                at
            })
        })
        .collect();
    await_waiting(&client, 2);
    assert!(proxy.stall_subscriber(), "the pub/sub connection is found");
    let stalled = Instant::now();
    go.send(()).unwrap();
    // Dropped within two intervals, then a hold each at most; and room for a loaded machine
    // (without the check they wait for the holder's 30 s lease and more).
    let bound = interval * 2 + hold * 3 + Duration::from_secs(4);
    let got = join_within(waiters, bound + Duration::from_secs(10), "the waiters");
    stop.store(true, Ordering::SeqCst);
    for at in got {
        let took = at - stalled;
        eprintln!("a waiter got the lock {took:?} after its pub/sub connection stalled");
        assert!(took < bound, "{took:?}");
    }
    assert!(client.metrics().pubsub_reconnects >= 1);
    churn.join().unwrap();
}

/// The pub/sub connection is checked only while a thread waits on it: no PING when idle.
#[test]
fn no_ping_is_sent_while_nothing_waits() {
    let server = RedisServer::new();
    let interval = Duration::from_millis(100);
    let config = Config::builder(server.url().as_str())
        .pubsub_ping_interval(interval)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let holder = Client::open(server.url()).unwrap();
    let name = "fault:idle";
    let channel = "redisson_lock__channel:{fault:idle}";
    let guard = holder.lock(name).lock().unwrap();
    let lock = client.lock(name);
    let waiter = std::thread::spawn(move || drop(lock.lock().unwrap()));
    await_waiting(&client, 1);
    let mut raw = server.conn();
    let pings = |raw: &mut redis::Connection| command_calls(raw, "ping");
    let before = pings(&mut raw);
    std::thread::sleep(interval * 10);
    let waiting = pings(&mut raw) - before;
    drop(guard);
    join_within(vec![waiter], Duration::from_secs(10), "the waiter");
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 0));
    // A PING written just before the unsubscribe's reply was read is answered after it.
    std::thread::sleep(interval * 2);
    let idle_from = pings(&mut raw);
    std::thread::sleep(interval * 20);
    let idle = pings(&mut raw) - idle_from;
    eprintln!("{waiting} PINGs in 10 intervals of waiting, {idle} in 20 idle ones");
    assert!(waiting >= 3, "{waiting} PINGs while a thread waited");
    assert_eq!(idle, 0, "PINGs while nothing waited");
}

#[test]
fn dead_server_gives_connection_error_in_time_and_client_recovers() {
    let mut server = RedisServer::new();
    let client = quick_client(&server);
    let lock = client.lock("fault:down");
    drop(lock.lock().unwrap()); // pool has a live connection now
    server.kill();
    for _ in 0..2 {
        let started = Instant::now();
        let err = lock.lock().unwrap_err();
        assert!(err.is_connection() || err.is_timeout(), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    let err = lock.try_lock().unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    server.restart();
    let guard = lock.lock().expect("works again once the server is back");
    assert!(lock.is_locked().unwrap());
    guard.unlock().unwrap();
}

#[test]
fn paused_server_gives_timeout_not_a_hang() {
    let server = RedisServer::new();
    let client = quick_client(&server);
    let lock = client.lock("fault:paused");
    drop(lock.lock().unwrap());
    server.stop();
    let started = Instant::now();
    let result = lock.lock();
    let took = started.elapsed();
    server.cont();
    let err = result.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let guard = lock.lock().expect("works again after SIGCONT");
    guard.unlock().unwrap();
}

#[test]
fn waiter_survives_a_server_restart() {
    let mut server = RedisServer::new();
    let client = quick_client(&server);
    let holder = quick_client(&server);
    let channel = "redisson_lock__channel:{fault:restart}";
    let guard = holder.lock("fault:restart").lock().unwrap();
    let lock = client.lock("fault:restart");
    let waiter = std::thread::spawn(move || {
        // Errors while the server is gone are the caller's to handle: retry.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match lock.try_lock_for(Duration::from_secs(10)) {
                Ok(Some(g)) => return g.unlock().is_ok(),
                Ok(None) => return false,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("{e}"),
            }
        }
    });
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    drop(raw);
    guard.leak(); // the restart wipes it anyway (persistence off)
    server.kill();
    server.restart();
    assert!(
        waiter.join().unwrap(),
        "the waiter acquired the lock after the restart"
    );
}

#[test]
fn a_call_that_could_not_connect_is_retried_until_the_server_is_back() {
    let mut server = RedisServer::new();
    let url = server.url();
    server.kill();
    let config = Config::builder(url.as_str())
        .connect_timeout(Duration::from_millis(200))
        .retry_attempts(25)
        .retry_delay(Duration::from_millis(200))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300)); // the outage being staged
        server.restart();
        server
    });
    let guard = client
        .lock("fault:retry")
        .lock()
        .expect("retried until the server was back");
    let server = restarter.join().unwrap();
    let count: Option<u32> = redis::cmd("HGET")
        .arg("fault:retry")
        .arg(guard.owner())
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(count, Some(1), "the acquire ran once");
    guard.unlock().unwrap();
}

#[test]
fn without_retries_a_dead_server_fails_at_once_and_readonly_is_retried_then_reported() {
    let mut dead = RedisServer::new();
    let url = dead.url();
    dead.kill();
    let config = Config::builder(url.as_str())
        .retry_attempts(0)
        .build()
        .unwrap();
    let start = Instant::now();
    let err = Client::new(config)
        .unwrap()
        .lock("fault:none")
        .lock()
        .unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );

    // A replica refuses writes with READONLY: the call did not run, so it is retried.
    let master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let config = Config::builder(replica.url().as_str())
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(150))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let start = Instant::now();
    let err = client.lock("fault:readonly").lock().unwrap_err();
    let took = start.elapsed();
    assert!(err.to_string().contains("read only replica"), "{err}");
    assert!(
        took >= Duration::from_millis(300),
        "two retries 150 ms apart, {took:?}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
}

const STOPPED_ENV: &str = "REDLATCH_STOPPED_URL";

/// Every kind the stopped child cycles through, as its `COUNT` lines name them.
const STOPPED_KINDS: [&str; 12] = [
    "lock",
    "fair",
    "non-reentrant",
    "spin",
    "fenced",
    "read",
    "write",
    "semaphore",
    "expirable",
    "latch",
    "condition",
    "election",
];

/// A process stopped and resumed (SIGSTOP/SIGCONT: a debugger, `kill -STOP`, a frozen
/// container) gets `EINTR` from a socket read with a timeout; that once reached the caller as
/// "Interrupted system call". A child cycles through every kind, each taken by one client
/// while the other waits for it, and is stopped 100 times: no call may fail.
#[test]
fn a_process_stopped_and_resumed_again_and_again_sees_no_error() {
    use std::io::Write;
    let server = RedisServer::new();
    let mut child =
        support::child::ChildTest::start("stopped_child", &[(STOPPED_ENV, server.url())]);
    child.next("STARTED", Duration::from_secs(30));
    let pid = child.pid() as i32;
    // Stops of 2 to 100 ms, 2 to 30 ms apart, at points no test could pick: some land
    // while a reply is read, some while a call waits, some while the other side releases.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    for _ in 0..100 {
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        std::thread::sleep(Duration::from_millis(2 + next(99)));
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        std::thread::sleep(Duration::from_millis(2 + next(29)));
    }
    let stdin = child.child.stdin.as_mut().unwrap();
    stdin.write_all(b"stop\n").unwrap();
    stdin.flush().unwrap();
    let lines = child.until("DONE", Duration::from_secs(60));
    let errors: Vec<&String> = lines.iter().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "{} errors: {errors:#?}", errors.len());
    for kind in STOPPED_KINDS {
        let done = lines
            .iter()
            .find_map(|l| l.split_once(&format!("COUNT {kind} ")))
            .map(|(_, n)| n.trim().parse::<u64>().unwrap());
        assert!(done.unwrap_or(0) > 0, "no {kind} done: {lines:#?}");
    }
}

/// Not a test by itself: the body of the child of
/// `a_process_stopped_and_resumed_again_and_again_sees_no_error`. Until a line comes on its
/// stdin, takes each kind with one client while a thread of another waits for it; prints a
/// line per error, `COUNT kind n` per kind (the waits that ended holding it), then `DONE`.
#[test]
#[ignore = "run as a child process by the stop-and-resume test"]
fn stopped_child() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Ok(url) = std::env::var(STOPPED_ENV) else {
        return;
    };
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopping = std::sync::Arc::clone(&stop);
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_line(&mut String::new());
        stopping.store(true, Ordering::SeqCst);
    });
    let config = |url: &str| {
        Config::builder(url)
            .watchdog_timeout(Duration::from_secs(3))
            .build()
            .unwrap()
    };
    let (a, b) = (
        Client::new(config(&url)).unwrap(),
        Client::new(config(&url)).unwrap(),
    );
    assert!(b.semaphore("stopped:semaphore").try_set_permits(1).unwrap());
    let expirable = b.permit_expirable_semaphore("stopped:expirable");
    assert!(expirable.try_set_permits(1).unwrap());
    let mut counts = std::collections::BTreeMap::new();
    println!("STARTED");
    type Make = fn(&Client) -> redlatch::Lock;
    let locks: [(&str, Make); 7] = [
        ("lock", |c| c.lock("stopped:lock")),
        ("fair", |c| c.fair_lock("stopped:fair")),
        ("non-reentrant", |c| c.non_reentrant_lock("stopped:nr")),
        ("spin", |c| c.spin_lock("stopped:spin")),
        ("fenced", |c| c.fenced_lock("stopped:fenced")),
        ("read", |c| c.read_write_lock("stopped:rw").read()),
        ("write", |c| c.read_write_lock("stopped:rw").write()),
    ];
    const WAIT: Duration = Duration::from_secs(5);
    const LEASE: Duration = Duration::from_secs(10);
    while !stop.load(Ordering::SeqCst) {
        for (kind, make) in locks {
            // The other side of a read-write lock: a reader waits for a writer, and back.
            let holder = match kind {
                "read" => b.read_write_lock("stopped:rw").write(),
                "write" => b.read_write_lock("stopped:rw").read(),
                _ => make(&b),
            };
            contend(
                kind,
                &mut counts,
                || holder.lock().map(Some),
                |g| g.unlock(),
                || make(&a).try_lock_for(WAIT),
                |g| g.unlock(),
            );
        }
        contend(
            "semaphore",
            &mut counts,
            || b.semaphore("stopped:semaphore").acquire(1).map(Some),
            |g| g.release(),
            || a.semaphore("stopped:semaphore").try_acquire_for(1, WAIT),
            |g| g.release(),
        );
        contend(
            "expirable",
            &mut counts,
            || expirable.acquire(LEASE).map(Some),
            |g| g.release(),
            || {
                a.permit_expirable_semaphore("stopped:expirable")
                    .try_acquire_for(LEASE, WAIT)
            },
            |g| g.release(),
        );
        contend(
            "latch",
            &mut counts,
            || {
                let latch = b.count_down_latch("stopped:latch");
                latch.try_set_count(1).map(|set| set.then_some(()))
            },
            |_| b.count_down_latch("stopped:latch").count_down().map(drop),
            || {
                let zero = a.count_down_latch("stopped:latch").await_for(WAIT)?;
                Ok(zero.then_some(()))
            },
            |()| Ok(()),
        );
        contend(
            "election",
            &mut counts,
            || b.election("stopped:election").campaign("b").map(Some),
            |l| l.resign(),
            || a.election("stopped:election").try_campaign_for(WAIT, "a"),
            |l| l.resign(),
        );
        // A condition: a thread of `a` waits on it, `b` notifies it once it waits.
        let waiting = AtomicBool::new(false);
        contend(
            "condition",
            &mut counts,
            || Ok(Some(())),
            |()| {
                let lock = b.lock("stopped:condition");
                let condition = lock.condition("ready");
                let until = Instant::now() + WAIT;
                while Instant::now() < until {
                    let guard = lock.lock()?;
                    let woke = waiting.load(Ordering::SeqCst) && condition.notify_one()?;
                    guard.unlock()?;
                    if woke {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(redlatch::Error::Timeout(
                    "nobody waited on the condition".into(),
                ))
            },
            || {
                let lock = a.lock("stopped:condition");
                let mut guard = lock.lock()?;
                waiting.store(true, Ordering::SeqCst);
                let timed_out = lock.condition("ready").wait_for(&mut guard, WAIT)?;
                guard.unlock()?;
                Ok((!timed_out.timed_out()).then_some(()))
            },
            |()| Ok(()),
        );
    }
    for (kind, n) in &counts {
        println!("COUNT {kind} {n}");
    }
    println!("DONE");
}

/// One contention: `hold` takes a kind (or does nothing, `None` being an error), a thread
/// then `take`s it (waiting), `release` gives the held one back, and the thread `give`s back
/// what it took. Errors are printed; a take that ended holding counts for `kind`.
fn contend<H, G>(
    kind: &'static str,
    counts: &mut std::collections::BTreeMap<&'static str, u64>,
    hold: impl FnOnce() -> redlatch::Result<Option<H>>,
    release: impl FnOnce(H) -> redlatch::Result<()>,
    take: impl FnOnce() -> redlatch::Result<Option<G>> + Send,
    give: impl FnOnce(G) -> redlatch::Result<()> + Send,
) {
    let held = match hold() {
        Ok(Some(held)) => held,
        Ok(None) => return println!("ERROR {kind} hold: refused"),
        Err(e) => return println!("ERROR {kind} hold: {e}"),
    };
    let took = std::thread::scope(|s| {
        let taker = s.spawn(move || match take() {
            Ok(Some(got)) => match give(got) {
                Ok(()) => true,
                Err(e) => {
                    println!("ERROR {kind} give back: {e}");
                    true
                }
            },
            Ok(None) => {
                println!("ERROR {kind} take: timed out");
                false
            }
            Err(e) => {
                println!("ERROR {kind} take: {e}");
                false
            }
        });
        // Let the taker find it held and wait.
        std::thread::sleep(Duration::from_millis(3));
        if let Err(e) = release(held) {
            println!("ERROR {kind} release: {e}");
        }
        taker.join().unwrap()
    });
    if took {
        *counts.entry(kind).or_insert(0) += 1;
    }
}
