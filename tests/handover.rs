//! Hand-overs inside one client: a thread releasing the last hold of a plain lock that
//! another thread of the same client waits for passes it in the release's own script call
//! (the field changes hands, the lease is set anew, nothing is published), and the waiter
//! takes it without a call of its own. Other clients are not starved, and interrupts, lost
//! leases, reentrancy and owners that are not threads keep their meaning.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error, Interrupter};
use support::{await_waiting, command_calls, wait_until, RedisServer};

const GENEROUS: Duration = Duration::from_secs(15);

/// The lock hash `name`, read raw: (field, count) pairs, sorted.
fn holds(server: &RedisServer, name: &str) -> Vec<(String, i64)> {
    let mut all: Vec<(String, i64)> = redis::cmd("HGETALL")
        .arg(name)
        .query(&mut server.conn())
        .unwrap();
    all.sort();
    all
}

fn pttl(server: &RedisServer, name: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(name)
        .query(&mut server.conn())
        .unwrap()
}

/// Script calls and publishes so far (a script's own PUBLISH counts as one).
fn calls(server: &RedisServer) -> (u64, u64) {
    let mut conn = server.conn();
    (
        command_calls(&mut conn, "evalsha"),
        command_calls(&mut conn, "publish"),
    )
}

/// A thread of `client` that locks `name` and reports its owner id, then holds until told.
fn waiter(
    client: &Client,
    name: &'static str,
    make: fn(&Client, &str) -> redlatch::Lock,
) -> (
    mpsc::Receiver<redlatch::Result<String>>,
    mpsc::Sender<()>,
    thread::JoinHandle<()>,
) {
    let (got_tx, got) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let client = client.clone();
    let handle = thread::spawn(move || match make(&client, name).lock() {
        Ok(guard) => {
            got_tx.send(Ok(guard.owner().to_owned())).unwrap();
            let _ = release_rx.recv();
            guard.unlock().unwrap();
        }
        Err(e) => got_tx.send(Err(e)).unwrap(),
    });
    (got, release, handle)
}

#[test]
fn a_release_passes_the_lock_to_a_waiting_thread_in_its_own_call() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    // The scripts loaded (a first call's NOSCRIPT and its resend would count twice).
    drop(client.lock("warm-up").lock().unwrap());
    let guard = client.lock("pass").lock().unwrap();
    let (got, release, handle) = waiter(&client, "pass", |c, n| c.lock(n));
    await_waiting(&client, 1);
    let (scripts, published) = calls(&server);
    drop(guard);
    let owner = got.recv_timeout(GENEROUS).unwrap().unwrap();
    let (scripts_after, published_after) = calls(&server);
    assert_eq!(
        scripts_after - scripts,
        1,
        "the release's own call, and no acquire"
    );
    assert_eq!(published_after, published, "nothing published");
    assert_eq!(holds(&server, "pass"), vec![(owner.clone(), 1)]);
    let ttl = pttl(&server, "pass");
    assert!(
        ttl > 20_000,
        "the lease set anew for the new holder: {ttl} ms"
    );
    assert_eq!(client.metrics().waiting, 0);
    assert_eq!(client.metrics().handovers, 1, "the pass is counted");
    release.send(()).unwrap();
    handle.join().unwrap();
    assert!(holds(&server, "pass").is_empty());
    assert_eq!(calls(&server).1, published + 1, "its release publishes");
    let m = client.metrics();
    assert_eq!(m.handovers, 1, "a release to nobody is no hand-over");
    assert_eq!(
        m.hold_time.count(),
        3,
        "each release ends a hold, the pass too"
    );
}

#[test]
fn a_release_of_one_of_two_holds_keeps_the_lock() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("twice");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    let me = outer.owner().to_owned();
    let (got, release, handle) = waiter(&client, "twice", |c, n| c.lock(n));
    await_waiting(&client, 1);
    drop(inner);
    assert_eq!(holds(&server, "twice"), vec![(me, 1)]);
    assert!(got.try_recv().is_err(), "still held");
    drop(outer);
    let owner = got.recv_timeout(GENEROUS).unwrap().unwrap();
    assert_eq!(holds(&server, "twice"), vec![(owner, 1)]);
    release.send(()).unwrap();
    handle.join().unwrap();
}

#[test]
fn the_watchdog_renews_a_passed_hold() {
    let server = RedisServer::new();
    let config = Config::builder(server.url())
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let guard = client.lock("renewed").lock().unwrap();
    let (passed_tx, passed) = mpsc::channel();
    let (done_tx, done) = mpsc::channel::<()>();
    let waiting = {
        let client = client.clone();
        thread::spawn(move || {
            let guard = client.lock("renewed").lock().unwrap();
            passed_tx.send(guard.owner().to_owned()).unwrap();
            done.recv().unwrap();
            let lost = guard.is_lost();
            guard.unlock().map(|()| lost)
        })
    };
    await_waiting(&client, 1);
    drop(guard);
    let owner = passed.recv_timeout(GENEROUS).unwrap();
    // Three leases: only renewals keep it.
    let until = Instant::now() + Duration::from_millis(2_700);
    while Instant::now() < until {
        assert_eq!(holds(&server, "renewed"), vec![(owner.clone(), 1)]);
        thread::sleep(Duration::from_millis(100));
    }
    done_tx.send(()).unwrap();
    assert!(!waiting.join().unwrap().unwrap(), "never lost");
}

/// Two threads of one client take turns on a lock, with a little work outside it; a waiter
/// of another client still gets it (after at most 8 passes, a release goes to everyone).
#[test]
fn a_waiter_of_another_client_is_not_starved() {
    let server = RedisServer::new();
    let local = Client::open(server.url()).unwrap();
    let other = Client::open(server.url()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let first = local.lock("turns").lock().unwrap();
    let takers: Vec<_> = (0..2)
        .map(|_| {
            let (local, stop, cycles) = (local.clone(), stop.clone(), cycles.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let guard = local.lock("turns").lock().unwrap();
                    thread::sleep(Duration::from_millis(2));
                    drop(guard);
                    cycles.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    await_waiting(&local, 2);
    let (scripts, published) = calls(&server);
    drop(first);
    let turns = cycles.clone();
    assert!(
        wait_until(GENEROUS, || turns.load(Ordering::SeqCst) >= 20),
        "the local threads take turns"
    );
    let (scripts_now, published_now) = calls(&server);
    let done = cycles.load(Ordering::SeqCst);
    assert!(
        published_now - published < done,
        "most turns were passed: {} publishes in {done} releases ({} script calls)",
        published_now - published,
        scripts_now - scripts
    );
    let started = Instant::now();
    let guard = other.lock("turns").try_lock_for(GENEROUS).unwrap();
    assert!(guard.is_some(), "the other client got it");
    let waited = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    drop(guard);
    for t in takers {
        t.join().unwrap();
    }
    assert!(waited < GENEROUS, "{waited:?}");
}

#[test]
fn an_interrupted_waiter_is_not_passed_the_lock() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client.lock("int").lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let waiting = {
        let client = client.clone();
        thread::spawn(move || {
            tx.send(Interrupter::current()).unwrap();
            client.lock("int").lock().map(drop)
        })
    };
    let interrupter = rx.recv().unwrap();
    await_waiting(&client, 1);
    interrupter.interrupt();
    assert!(matches!(waiting.join().unwrap(), Err(Error::Interrupted)));
    let (_, published) = calls(&server);
    drop(guard);
    assert!(holds(&server, "int").is_empty(), "released, not passed");
    assert_eq!(calls(&server).1, published + 1);
}

#[test]
fn a_close_wakes_the_waiter_and_passes_nothing() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client.lock("closing").lock().unwrap();
    let holder = guard.owner().to_owned();
    let waiting = {
        let client = client.clone();
        thread::spawn(move || client.lock("closing").lock().map(drop))
    };
    await_waiting(&client, 1);
    client.close();
    assert!(matches!(waiting.join().unwrap(), Err(Error::Closed)));
    // A closed client releases nothing: the hold stays until its lease runs out.
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    assert_eq!(holds(&server, "closing"), vec![(holder, 1)]);
}

#[test]
fn a_waiting_lock_owner_is_not_passed_the_lock() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client.lock("owned").lock().unwrap();
    let owner = client.lock_owner();
    let waiting = {
        let (client, owner) = (client.clone(), owner.clone());
        thread::spawn(move || {
            let guard = client.lock("owned").with_owner(&owner).lock().unwrap();
            guard.unlock().unwrap();
        })
    };
    await_waiting(&client, 1);
    let (scripts, published) = calls(&server);
    drop(guard);
    waiting.join().unwrap();
    let (scripts_after, published_after) = calls(&server);
    assert_eq!(published_after - published, 2, "both releases publish");
    assert!(scripts_after - scripts >= 3, "it acquired by itself");
}

#[test]
fn a_lost_hold_is_not_passed() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let guard = client.lock("lost").lock().unwrap();
    let (got, release, handle) = waiter(&client, "lost", |c, n| c.lock(n));
    await_waiting(&client, 1);
    // The holder's lease ran out and somebody else took the lock.
    redis::pipe()
        .del("lost")
        .hset("lost", "someone:1", 1)
        .pexpire("lost", 30_000)
        .query::<()>(&mut server.conn())
        .unwrap();
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    assert_eq!(holds(&server, "lost"), vec![("someone:1".into(), 1)]);
    assert!(got.try_recv().is_err(), "not passed");
    // That holder releases as Redisson does: the waiter acquires by itself.
    redis::pipe()
        .del("lost")
        .publish("redisson_lock__channel:{lost}", 0)
        .query::<()>(&mut server.conn())
        .unwrap();
    let owner = got.recv_timeout(GENEROUS).unwrap().unwrap();
    assert_eq!(holds(&server, "lost"), vec![(owner, 1)]);
    release.send(()).unwrap();
    handle.join().unwrap();
}

#[test]
fn a_fenced_lock_does_not_pass() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.fenced_lock("fenced");
    let guard = lock.lock().unwrap();
    let (tx, got) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let waiting = {
        let lock = lock.clone();
        thread::spawn(move || {
            let guard = lock.lock().unwrap();
            tx.send(guard.token()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        })
    };
    await_waiting(&client, 1);
    let (_, published) = calls(&server);
    let first = guard.token();
    drop(guard);
    let token = got.recv_timeout(GENEROUS).unwrap();
    assert_eq!(calls(&server).1, published + 1, "the release published");
    assert!(token > first, "a new token: {first:?} then {token:?}");
    release.send(()).unwrap();
    waiting.join().unwrap();
}

/// Queued A (this client), B (another), C (this client): the holder's release passes to A,
/// the head; A's release may not pass to C, since B is ahead: B is woken as Redisson's fair
/// lock wakes it; C gets it after B.
#[test]
fn a_fair_lock_passes_only_to_the_head_of_its_queue() {
    let server = RedisServer::new();
    let local = Client::open(server.url()).unwrap();
    let other = Client::open(server.url()).unwrap();
    drop(local.fair_lock("warm-up").lock().unwrap());
    drop(other.fair_lock("warm-up").lock().unwrap());
    let guard = local.fair_lock("fq").lock().unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    let mut owners = Vec::new();
    for (place, client) in [&local, &other, &local].into_iter().enumerate() {
        let (client, order) = (client.clone(), order.clone());
        let (tx, rx) = mpsc::channel();
        threads.push(thread::spawn(move || {
            tx.send(client.owner_id()).unwrap();
            let guard = client.fair_lock("fq").lock().unwrap();
            order.lock().unwrap().push(guard.owner().to_owned());
            thread::sleep(Duration::from_millis(20));
            guard.unlock().unwrap();
        }));
        owners.push(rx.recv().unwrap());
        assert!(wait_until(GENEROUS, || local
            .inspect("fq")
            .unwrap()
            .is_some_and(|i| i.queue.len() == place + 1)));
    }
    await_waiting(&local, 2);
    await_waiting(&other, 1);
    let (_, published) = calls(&server);
    drop(guard);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), owners, "FIFO");
    assert_eq!(
        calls(&server).1 - published,
        2,
        "passed to A; B and C woken by a message each"
    );
    assert!(holds(&server, "fq").is_empty());
}

/// Queued B (another client), then A (this client): the holder's release cannot pass to A,
/// which is not the head, and releases; its reply is lost, and the call sent again finds the
/// owner holding nothing and A not passed it. That is a release (the first call ran), not a
/// loss: `unlock` succeeds, B gets the lock, then A.
#[test]
fn a_fair_release_whose_reply_was_lost_while_the_head_was_elsewhere_succeeds() {
    let server = RedisServer::new();
    let proxy = support::proxy::Proxy::start(server.port());
    let local = Client::open(proxy.url()).unwrap();
    let other = Client::open(server.url()).unwrap();
    drop(local.fair_lock("warm-up").lock().unwrap());
    let guard = local.fair_lock("fq").lock().unwrap();
    let mut waiting = Vec::new();
    for (place, client) in [&other, &local].into_iter().enumerate() {
        waiting.push(waiter(client, "fq", |c, n| c.fair_lock(n)));
        assert!(wait_until(GENEROUS, || local
            .inspect("fq")
            .unwrap()
            .is_some_and(|i| i.queue.len() == place + 1)));
    }
    await_waiting(&local, 1);
    let cuts = proxy.cuts();
    // The release's reply: 1, the lock freed and the head woken.
    proxy.lose_next_reply_equal_to(b":1\r\n");
    guard.unlock().expect("released by its first call");
    assert_eq!(proxy.cuts(), cuts + 1, "the reply was lost");
    let [(b_got, b_release, b), (a_got, a_release, a)] = <[_; 2]>::try_from(waiting).ok().unwrap();
    let b_owner = b_got.recv_timeout(GENEROUS).unwrap().unwrap();
    assert_eq!(holds(&server, "fq"), vec![(b_owner, 1)], "the head has it");
    b_release.send(()).unwrap();
    let a_owner = a_got.recv_timeout(GENEROUS).unwrap().unwrap();
    assert_eq!(holds(&server, "fq"), vec![(a_owner, 1)]);
    a_release.send(()).unwrap();
    b.join().unwrap();
    a.join().unwrap();
    assert!(holds(&server, "fq").is_empty());
}

/// The pass's reply is lost twice (the server paused), and the waiter cannot settle it
/// either: whichever of the two holds the lock when the server answers is given back.
#[test]
fn a_pass_nobody_could_settle_leaves_nothing_behind() {
    nobody_settles(|c: &Client, n: &str| c.lock(n));
}

#[test]
fn a_fair_pass_nobody_could_settle_leaves_nothing_behind() {
    nobody_settles(|c, n| c.fair_lock(n));
}

fn nobody_settles(make: fn(&Client, &str) -> redlatch::Lock) {
    let server = RedisServer::new();
    let reply = Duration::from_millis(300);
    let config = Config::builder(server.url())
        .response_timeout(reply)
        .connect_timeout(reply)
        .retry_attempts(0)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let guard = make(&client, "doubt").lock().unwrap();
    let (got, _release, handle) = waiter(&client, "doubt", make);
    await_waiting(&client, 1);
    server.stop();
    let released = guard.unlock();
    let waited = got.recv_timeout(GENEROUS).unwrap();
    server.cont();
    assert!(
        released.is_ok(),
        "the waiter took the pass over: {released:?}"
    );
    assert!(
        waited.is_err(),
        "the waiter could not settle it: {waited:?}"
    );
    handle.join().unwrap();
    assert!(
        wait_until(GENEROUS, || holds(&server, "doubt").is_empty()),
        "left: {:?}",
        holds(&server, "doubt")
    );
}
