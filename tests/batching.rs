//! Calls from threads that call at the same moment share round trips
//! (`ConfigBuilder::batch_lanes`): what each caller gets, on a healthy server and under faults.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use support::proxy::Proxy;
use support::{client_list, command_calls, unread_connections, wait_until, RedisServer};

fn client(url: &str, lanes: usize, response: Duration) -> Client {
    let config = Config::builder(url)
        .batch_lanes(lanes)
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(response)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    // The client's own thread opens its pub/sub connection and names it: wait until the
    // server has read that, so that a server paused later counts no unread bytes on it.
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let named = format!("name=redlatch:{} ", client.id());
    assert!(wait_until(Duration::from_secs(5), || {
        client_list(&mut conn).iter().any(|l| l.contains(&named))
    }));
    client
}

/// A client on `server` with its scripts loaded (one lock taken and released), and the
/// server's counts then (see [`Counts`]).
fn warmed(server: &RedisServer, lanes: usize, response: Duration) -> (Client, Counts) {
    let client = client(&server.url(), lanes, response);
    drop(client.lock("warm").lock().unwrap());
    (client, Counts::now(server))
}

/// What the server has run: script calls (one may run several callers' calls, merged), and
/// the commands a plain lock's scripts run once per acquire (`HINCRBY`) and once per release
/// of a last hold (`DEL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    evalsha: u64,
    acquires: u64,
    releases: u64,
}

impl Counts {
    fn now(server: &RedisServer) -> Counts {
        let mut raw = server.conn();
        Counts {
            evalsha: command_calls(&mut raw, "evalsha"),
            acquires: command_calls(&mut raw, "hincrby"),
            releases: command_calls(&mut raw, "del"),
        }
    }

    fn since(self, before: Counts) -> Counts {
        Counts {
            evalsha: self.evalsha - before.evalsha,
            acquires: self.acquires - before.acquires,
            releases: self.releases - before.releases,
        }
    }
}

/// Connections open on the server whose last command was a lock script (or a latch `DEL`).
fn command_connections(server: &RedisServer) -> usize {
    client_list(&mut server.conn())
        .iter()
        .filter(|l| {
            l.split_whitespace()
                .any(|f| f == "cmd=evalsha" || f == "cmd=del")
        })
        .count()
}

/// Runs `f(i)` on `n` threads released at once; returns each thread's result and how long it
/// took, in thread order. `called` counts the threads that have started their call.
fn at_once<T: Send>(
    n: usize,
    called: &AtomicUsize,
    f: impl Fn(usize) -> T + Sync,
) -> Vec<(T, Duration)> {
    let start = Barrier::new(n);
    thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (start, f) = (&start, &f);
                s.spawn(move || {
                    start.wait();
                    called.fetch_add(1, Ordering::SeqCst);
                    let t = Instant::now();
                    let out = f(i);
                    (out, t.elapsed())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Pauses the server at `port` (with `pause`), runs `f(i)` on `threads` threads at once, and
/// once every thread has called and `written` connections hold calls the server has not read
/// (or after 5 s), runs `resume`. Returns each thread's outcome and time, and whether that
/// point was reached.
fn while_paused<T: Send>(
    port: u16,
    threads: usize,
    written: usize,
    (pause, resume): (impl FnOnce(), impl FnOnce()),
    f: impl Fn(usize) -> T + Sync + Send,
) -> (Vec<(T, Duration)>, bool) {
    let called = AtomicUsize::new(0);
    pause();
    thread::scope(|s| {
        let calls = s.spawn(|| at_once(threads, &called, &f));
        let reached = wait_until(Duration::from_secs(5), || {
            called.load(Ordering::SeqCst) == threads && unread_connections(port) == written
        });
        resume();
        (calls.join().unwrap(), reached)
    })
}

#[test]
fn threads_calling_at_once_share_the_lanes_connections() {
    let server = RedisServer::new();
    let (client, before) = warmed(&server, 2, Duration::from_secs(5));
    let threads = 24;
    // The server is paused until all threads have called: two lanes have written, the rest
    // wait for their next writes.
    let (outcomes, written) = while_paused(
        server.port(),
        threads,
        2,
        (|| server.stop(), || server.cont()),
        |i| {
            let lock = client.lock(format!("batch:{i}"));
            let guard = lock.lock()?;
            let count = lock.hold_count()?;
            guard.unlock().map(|()| count)
        },
    );
    assert!(written, "two connections written");
    for (i, (outcome, _)) in outcomes.iter().enumerate() {
        assert_eq!(*outcome.as_ref().unwrap(), 1, "thread {i}");
    }
    let ran = Counts::now(&server).since(before);
    assert_eq!(
        (ran.acquires, ran.releases),
        (threads as u64, threads as u64),
        "each acquire and unlock ran once"
    );
    // The calls queued behind the two lanes went as one script call per write.
    assert!(
        ran.evalsha < 2 * threads as u64,
        "{} script calls for {} lock calls: none merged",
        ran.evalsha,
        2 * threads
    );
    let mut raw = server.conn();
    for i in 0..threads {
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("batch:{i}"))
            .query(&mut raw)
            .unwrap();
        assert!(!exists, "batch:{i} released");
    }
    let used = command_connections(&server);
    assert!(
        used <= 2,
        "{threads} threads used {used} command connections"
    );
}

#[test]
fn a_merged_call_that_fails_fails_alone() {
    // Calls queued behind a paused lane go as one script call: the one on a key of the wrong
    // type gets its own error, and the calls before and after it run as if sent alone.
    let server = RedisServer::new();
    let (client, _) = warmed(&server, 1, Duration::from_secs(5));
    // A first merged call finds the batch script not loaded: loaded then, and its calls sent
    // as they were.
    let (first, _) = while_paused(
        server.port(),
        4,
        1,
        (|| server.stop(), || server.cont()),
        |i| client.lock(format!("first:{i}")).lock().map(drop),
    );
    assert!(first.iter().all(|(outcome, _)| outcome.is_ok()));
    let before = Counts::now(&server);
    let mut raw = server.conn();
    let _: () = redis::cmd("SET")
        .arg("merged:3")
        .arg("not a lock")
        .query(&mut raw)
        .unwrap();
    let threads = 8;
    let (outcomes, written) = while_paused(
        server.port(),
        threads,
        1,
        (|| server.stop(), || server.cont()),
        |i| {
            client
                .lock(format!("merged:{i}"))
                .try_lock()
                .map(|g| g.map(|g| g.leak()))
        },
    );
    assert!(written, "one lane written, the others queued");
    for (i, (outcome, _)) in outcomes.iter().enumerate() {
        match (i, outcome) {
            (3, Err(e)) => assert!(matches!(e, redlatch::Error::WrongType { .. }), "{e:?}"),
            (3, Ok(_)) => panic!("a lock on a string was taken"),
            (i, outcome) => assert!(matches!(outcome, Ok(Some(_))), "thread {i}: {outcome:?}"),
        }
    }
    let ran = Counts::now(&server).since(before);
    assert_eq!(
        ran.acquires,
        threads as u64 - 1,
        "each other acquire ran once"
    );
    assert_eq!(
        ran.evalsha, 2,
        "{ran:?}: one written alone, the queued ones as one"
    );
    for i in (0..threads).filter(|&i| i != 3) {
        let counts: Vec<u32> = redis::cmd("HVALS")
            .arg(format!("merged:{i}"))
            .query(&mut raw)
            .unwrap();
        assert_eq!(counts, [1], "merged:{i}");
    }
    let kept: String = redis::cmd("GET").arg("merged:3").query(&mut raw).unwrap();
    assert_eq!(kept, "not a lock");
}

#[test]
fn merged_calls_of_several_lock_kinds_each_get_their_own_reply() {
    let server = RedisServer::new();
    let (client, _) = warmed(&server, 1, Duration::from_secs(5));
    let threads = 9;
    let make = |i: usize| match i % 3 {
        0 => client.lock(format!("kinds:{i}")),
        1 => client.fenced_lock(format!("kinds:{i}")),
        _ => client.non_reentrant_lock(format!("kinds:{i}")),
    };
    let round = |n: usize| {
        while_paused(
            server.port(),
            threads,
            1,
            (|| server.stop(), || server.cont()),
            |i| {
                let guard = make(i).try_lock()?.expect("free");
                let token = guard.token();
                guard.unlock().map(|()| (n, token))
            },
        )
    };
    // The first round loads the batch script; the second is counted.
    let (first, _) = round(1);
    let before = Counts::now(&server);
    let (second, written) = round(2);
    assert!(written);
    for (i, ((outcome, _), (earlier, _))) in second.iter().zip(&first).enumerate() {
        let (_, token) = outcome.as_ref().unwrap();
        let (_, earlier) = earlier.as_ref().unwrap();
        match i % 3 {
            1 => assert!(
                token > earlier,
                "kinds:{i}: tokens {earlier:?} then {token:?}"
            ),
            _ => assert_eq!(*token, None, "kinds:{i}"),
        }
    }
    let ran = Counts::now(&server).since(before);
    assert_eq!((ran.acquires, ran.releases), (9, 9));
    assert!(ran.evalsha < 18, "{ran:?}: none merged");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("kinds:*")
        .query(&mut server.conn())
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn calls_merge_after_every_lane_found_the_batch_script_missing_at_once() {
    // On a new server the first merged call of each lane finds no batch script: each loads
    // it and sends its calls again, and merging goes on (a NOSCRIPT is not a refusal, which
    // would turn merging off for good).
    let server = RedisServer::new();
    let client = client(&server.url(), 4, Duration::from_secs(10));
    let (threads, cycles) = (32, 100);
    thread::scope(|s| {
        for t in 0..threads {
            let client = &client;
            s.spawn(move || {
                let lock = client.lock(format!("cold:{t}"));
                for _ in 0..cycles {
                    lock.lock().unwrap().unlock().unwrap();
                }
            });
        }
    });
    let ran = Counts::now(&server);
    let calls = (threads * cycles) as u64;
    assert_eq!((ran.acquires, ran.releases), (calls, calls));
    assert!(
        ran.evalsha < calls,
        "{ran:?}: {} lock calls mostly unmerged",
        2 * calls
    );
}

#[test]
fn a_flushed_batch_script_is_loaded_again_however_often() {
    // Each `SCRIPT FLUSH` costs the next merged call one NOSCRIPT (its calls are sent again,
    // unmerged) and never turns merging off.
    let server = RedisServer::new();
    let (client, _) = warmed(&server, 1, Duration::from_secs(5));
    let threads = 6;
    let round = |r: usize| {
        let (outcomes, written) = while_paused(
            server.port(),
            threads,
            1,
            (|| server.stop(), || server.cont()),
            // Kept (leaked): only the acquires are counted.
            |i| {
                client
                    .lock(format!("flushed:{r}:{i}"))
                    .lock()
                    .map(|g| g.leak())
            },
        );
        assert!(written, "round {r}");
        assert!(outcomes.iter().all(|(o, _)| o.is_ok()), "round {r}");
    };
    for r in 0..4 {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut server.conn())
            .unwrap();
        round(r);
    }
    let before = Counts::now(&server);
    round(4);
    let ran = Counts::now(&server).since(before);
    assert_eq!(ran.acquires, threads as u64);
    assert_eq!(ran.evalsha, 2, "{ran:?}: one call alone, the others merged");
}

#[test]
fn without_batching_each_call_has_a_connection_of_its_own() {
    let server = RedisServer::new();
    let client = client(&server.url(), 0, Duration::from_secs(5));
    let threads = 8;
    let (outcomes, written) = while_paused(
        server.port(),
        threads,
        threads,
        (|| server.stop(), || server.cont()),
        |i| client.lock(format!("alone:{i}")).lock().map(drop),
    );
    assert!(written, "one connection written per call");
    for (outcome, _) in outcomes {
        outcome.unwrap();
    }
    assert_eq!(command_connections(&server), threads);
}

#[test]
fn a_flushed_script_cache_is_reloaded_by_each_call_in_a_batch() {
    let server = RedisServer::new();
    let (client, _) = warmed(&server, 1, Duration::from_secs(5));
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.conn())
        .unwrap();
    let threads = 16;
    let (outcomes, _) = while_paused(
        server.port(),
        threads,
        1,
        (|| server.stop(), || server.cont()),
        |i| {
            let guard = client.lock(format!("noscript:{i}")).lock()?;
            let held: bool = redis::cmd("EXISTS")
                .arg(format!("noscript:{i}"))
                .query(&mut server.conn())
                .unwrap();
            guard.unlock().map(|()| held)
        },
    );
    for (i, (outcome, _)) in outcomes.iter().enumerate() {
        assert!(outcome.as_ref().unwrap(), "thread {i} held its lock");
    }
    // The EVALSHAs of the first write found no script (NOSCRIPT): their callers loaded it
    // (SCRIPT LOAD; `script|load` in the stats of Redis 7) and sent again.
    let mut raw = server.conn();
    let loads = command_calls(&mut raw, "script|load") + command_calls(&mut raw, "script");
    assert!(loads >= 1, "the script was loaded again");
}

#[test]
fn a_reply_that_never_comes_times_out_every_call_of_the_write() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .batch_lanes(1)
        .retry_attempts(0)
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    drop(client.lock("warm").lock().unwrap());
    let threads = 12;
    let called = AtomicUsize::new(0);
    server.stop();
    let outcomes = at_once(threads, &called, |i| {
        client
            .lock(format!("paused:{i}"))
            .try_lock()
            .map(|g| g.is_some())
    });
    server.cont();
    for (i, (outcome, took)) in outcomes.iter().enumerate() {
        let err = outcome.as_ref().expect_err("no reply from a paused server");
        assert!(err.is_timeout(), "thread {i}: {err}");
        // The first write times out; the calls queued behind it then time out connecting
        // (the handshake gets no reply either): a few timeouts, not one per caller in turn.
        assert!(*took < Duration::from_secs(4), "thread {i} waited {took:?}");
    }
    // The connections that timed out were dropped: new calls get fresh ones and succeed.
    let guard = client.lock("after").try_lock().unwrap().expect("free");
    guard.unlock().unwrap();
}

#[test]
fn a_connection_that_dies_fails_each_waiting_call_at_once() {
    let mut server = RedisServer::new();
    let (client, _) = warmed(&server, 1, Duration::from_secs(10));
    let threads = 12;
    server.stop();
    let port = server.port();
    let (outcomes, _) = while_paused(port, threads, 1, (|| {}, || server.kill()), |i| {
        client
            .lock(format!("dead:{i}"))
            .try_lock()
            .map(|g| g.is_some())
    });
    for (i, (outcome, took)) in outcomes.iter().enumerate() {
        let err = outcome.as_ref().expect_err("the server died");
        assert!(err.is_connection() || err.is_timeout(), "thread {i}: {err}");
        // Not a response timeout (10 s): the broken connection is reported at once, and the
        // calls that were not sent fail their connect (and its retries) quickly.
        assert!(*took < Duration::from_secs(5), "thread {i} waited {took:?}");
    }
    server.restart();
    let guard = client.lock("after").try_lock().unwrap().expect("free");
    guard.unlock().unwrap();
}

#[test]
fn calls_queued_when_the_client_closes_are_not_sent() {
    // Guards against a lane sending what was queued behind it after `Client::close`.
    let server = RedisServer::new();
    let (client, before) = warmed(&server, 1, Duration::from_secs(10));
    let threads = 6;
    let close_took = std::cell::Cell::new(Duration::ZERO);
    let closing = (
        || server.stop(),
        || {
            let t = Instant::now();
            client.close();
            close_took.set(t.elapsed());
            server.cont();
        },
    );
    // One call written (the lane's), the others queued behind it when the client closes.
    let (outcomes, reached) = while_paused(server.port(), threads, 1, closing, |i| {
        client
            .lock(format!("closing:{i}"))
            .try_lock()
            .map(|g| g.is_some())
    });
    assert!(reached, "the first call was not written");
    // Calls that do not wait are not waited for (the response timeout is 10 s).
    assert!(
        close_took.get() < Duration::from_secs(2),
        "close took {:?}",
        close_took.get()
    );
    let sent: Vec<usize> = (0..threads)
        .filter(|&i| matches!(outcomes[i].0, Ok(true)))
        .collect();
    assert_eq!(sent.len(), 1, "one call was written: {outcomes:?}");
    for (i, (outcome, _)) in outcomes.iter().enumerate() {
        if let Err(err) = outcome {
            assert!(err.is_closed(), "thread {i}: {err}");
        }
    }
    let mut conn = server.conn();
    // Only the written call ran; its guard's release found the client closed, so its lock
    // stays until its lease ends.
    assert_eq!(Counts::now(&server).since(before).evalsha, 1);
    let held: Vec<String> = redis::cmd("KEYS")
        .arg("closing:*")
        .query(&mut conn)
        .unwrap();
    assert_eq!(held, vec![format!("closing:{}", sent[0])]);
}

#[test]
fn unlocks_whose_replies_are_lost_mid_batch_are_settled_and_run_once() {
    let server = RedisServer::new();
    let proxy = Proxy::start(server.port());
    let client = client(&proxy.url(), 1, Duration::from_secs(5));
    let threads = 8;
    let (held, go) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
    let outcomes = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (client, held, go) = (&client, &held, &go);
                s.spawn(move || {
                    let guard = client.lock(format!("lost:{i}")).lock().unwrap();
                    held.wait();
                    go.wait();
                    guard.unlock()
                })
            })
            .collect();
        held.wait();
        // The next reply read from the server (one write's worth of unlocks) is lost.
        proxy.lose_next_reply();
        go.wait();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(proxy.cuts(), 1, "a reply was lost");
    for (i, outcome) in outcomes.iter().enumerate() {
        outcome
            .as_ref()
            .unwrap_or_else(|e| panic!("unlock {i}: {e}"));
    }
    let mut raw = server.conn();
    for i in 0..threads {
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("lost:{i}"))
            .query(&mut raw)
            .unwrap();
        assert!(!exists, "lost:{i} released");
    }
    // Each lost unlock ran once: its caller read the lock back (HGET), found its hold gone
    // and sent no second unlock.
    assert_eq!(
        command_calls(&mut raw, "del"),
        threads as u64,
        "one release each"
    );
    assert!(
        command_calls(&mut raw, "hget") > 0,
        "the lost unlocks were read back"
    );
}

#[test]
fn many_threads_on_one_lane_each_get_every_reply() {
    // Guards against a queued caller left parked (a lost wake-up) or answered with another's
    // reply, where callers queue, take over the lane and wake each other all the time.
    let server = RedisServer::new();
    let (client, before) = warmed(&server, 1, Duration::from_secs(5));
    let (threads, cycles) = (32, 300);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for t in 0..threads {
        let (client, done_tx) = (client.clone(), done_tx.clone());
        thread::spawn(move || {
            let lock = client.lock(format!("lane:{t}"));
            let cycle = || lock.lock()?.unlock();
            let outcome = (0..cycles).try_for_each(|_| cycle());
            done_tx.send((t, outcome)).unwrap();
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..threads {
        let left = deadline.saturating_duration_since(Instant::now());
        let (t, outcome) = done_rx
            .recv_timeout(left)
            .expect("a thread still waits for a reply");
        // A reply given to the wrong caller fails its decoding (or its unlock).
        outcome.unwrap_or_else(|e| panic!("thread {t}: {e}"));
    }
    let mut conn = server.conn();
    // Each lock and each unlock ran once: no call lost, none sent twice.
    let ran = Counts::now(&server).since(before);
    let cycles = (threads * cycles) as u64;
    assert_eq!((ran.acquires, ran.releases), (cycles, cycles));
    assert!(ran.evalsha < 2 * cycles, "merged: {ran:?}");
    let held: Vec<String> = redis::cmd("KEYS").arg("lane:*").query(&mut conn).unwrap();
    assert!(held.is_empty(), "{held:?}");
}

#[test]
fn unlock_latches_are_deleted_by_later_writes() {
    // A semaphore's acquire and release each write a receipt (a lock's unlock writes none).
    let server = RedisServer::new();
    let client = client(&server.url(), 4, Duration::from_secs(5));
    let semaphore = client.semaphore("latches");
    assert!(semaphore.try_set_permits(1).unwrap());
    for _ in 0..50 {
        drop(semaphore.acquire(1).unwrap());
    }
    // Receipts go 16 to a `DEL` with later calls: fewer than 16 are left of 100.
    assert_eq!(semaphore.available_permits().unwrap(), 1);
    let mut raw = server.conn();
    let latches: Vec<String> = redis::cmd("KEYS")
        .arg("redisson_unlock_latch:*")
        .query(&mut raw)
        .unwrap();
    assert!(latches.len() < 16, "{} latches left", latches.len());
    redis::cmd("DEL").arg(&latches).query::<()>(&mut raw).ok();
    // Without batching they are left to expire, as before.
    let alone = client_with_lanes_zero(&server);
    drop(alone.semaphore("latches").acquire(1).unwrap());
    let latches: Vec<String> = redis::cmd("KEYS")
        .arg("redisson_unlock_latch:*")
        .query(&mut raw)
        .unwrap();
    assert_eq!(latches.len(), 2, "{latches:?}");
    let ttl: i64 = redis::cmd("PTTL").arg(&latches[0]).query(&mut raw).unwrap();
    assert!(ttl > 0, "a latch expires by itself: {ttl}");
}

fn client_with_lanes_zero(server: &RedisServer) -> Client {
    client(&server.url(), 0, Duration::from_secs(5))
}
