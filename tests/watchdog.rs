//! The watchdog, for both lock kinds: one thread renews held locks at lease/3, in batches, and stops when released.

mod support;

use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config};
use support::{command_calls, wait_until, RedisServer};

fn client(server: &RedisServer, watchdog_ms: u64, batch: usize) -> Client {
    support::client_with(server, |b| {
        b.watchdog_timeout(Duration::from_millis(watchdog_ms))
            .renew_batch_size(batch)
    })
}

for_each_kind! {
    fn guard_held_five_timeouts_keeps_its_lock_and_renewal_stops_after_drop(make) {
        let server = RedisServer::new();
        let client = client(&server, 600, 100);
        let lock = make(&client, "wd:long");
        let guard = lock.lock().unwrap();
        let mut raw = server.conn();
        let until = Instant::now() + Duration::from_millis(3000);
        while Instant::now() < until {
            // Sampled state, never a sleep as synchronisation: the lease must never run low.
            let pttl: i64 = raw.pttl("wd:long").unwrap();
            assert!(pttl > 0, "lease ran out while the guard lived");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!guard.is_lost());
        assert_eq!(lock.hold_count().unwrap(), 1);
        drop(guard);
        assert!(!raw.exists::<_, bool>("wd:long").unwrap());
        let calls = command_calls(&mut raw, "evalsha");
        std::thread::sleep(Duration::from_millis(800)); // > 3 renewal periods: nothing may run
        assert_eq!(
            command_calls(&mut raw, "evalsha"),
            calls,
            "renewal ran after release"
        );
        assert!(!raw.exists::<_, bool>("wd:long").unwrap());
    }

    fn renewals_are_batched_per_call(make) {
        let server = RedisServer::new();
        let client = client(&server, 900, 100);
        let guards: Vec<_> = (0..250)
            .map(|i| make(&client, &format!("wd:batch:{i}")).lock().unwrap())
            .collect();
        let mut raw = server.conn();
        // Let the first renewals settle, then count script calls over 10 periods (300 ms each).
        std::thread::sleep(Duration::from_millis(400));
        let before = command_calls(&mut raw, "evalsha");
        std::thread::sleep(Duration::from_millis(3000));
        let calls = command_calls(&mut raw, "evalsha") - before;
        // 250 locks / 100 per call = 3 calls a period; ~10 periods (+1 at the edges).
        assert!(
            (20..=36).contains(&calls),
            "renewal calls in 10 periods: {calls}"
        );
        for i in 0..250 {
            let pttl: i64 = raw.pttl(format!("wd:batch:{i}")).unwrap();
            assert!(pttl > 0, "lock {i} expired");
        }
        assert!(guards.iter().all(|g| !g.is_lost()));
    }

    fn force_unlocked_lock_is_reported_lost_and_no_longer_renewed(make) {
        let server = RedisServer::new();
        let client = client(&server, 600, 100);
        let lock = make(&client, "wd:lost");
        let guard = lock.lock().unwrap();
        let forced_at = Instant::now();
        assert!(make(&client, "wd:lost").force_unlock().unwrap());
        assert!(wait_until(Duration::from_secs(2), || guard.is_lost()));
        // The next renewal runs within one period (200 ms) of the force-unlock.
        assert!(
            forced_at.elapsed() < Duration::from_millis(600),
            "{:?}",
            forced_at.elapsed()
        );
        // Another owner takes it; the lost guard's release must not touch it.
        let other = lock.clone();
        let taker = std::thread::spawn(move || {
            let g = other.lock().unwrap();
            g.leak();
        });
        taker.join().unwrap();
        let err = guard.unlock().unwrap_err();
        assert!(err.is_lock_lost(), "{err:?}");
        assert!(lock.is_locked().unwrap(), "the new holder keeps the lock");
    }

    fn reentrant_holds_keep_renewing_until_the_last_is_released(make) {
        let server = RedisServer::new();
        let client = client(&server, 600, 100);
        let lock = make(&client, "wd:reentrant");
        let outer = lock.lock().unwrap();
        let inner = lock.lock().unwrap();
        drop(inner);
        std::thread::sleep(Duration::from_millis(1500)); // 2.5 leases: only renewal keeps it
        assert_eq!(lock.hold_count().unwrap(), 1);
        assert!(!outer.is_lost());
        drop(outer);
        assert!(!lock.is_locked().unwrap());
    }

    fn explicit_lease_is_never_renewed(make) {
        let server = RedisServer::new();
        let client = client(&server, 600, 100);
        let mut raw = server.conn();
        drop(make(&client, "wd:warmup").lock().unwrap()); // loads the scripts (NOSCRIPT counts as a call)
        let before = command_calls(&mut raw, "evalsha");
        let guard = make(&client, "wd:leased")
            .with_lease(Duration::from_millis(500))
            .lock()
            .unwrap();
        assert!(wait_until(Duration::from_secs(3), || !raw
            .exists::<_, bool>("wd:leased")
            .unwrap()));
        assert_eq!(
            command_calls(&mut raw, "evalsha") - before,
            1,
            "only the acquire ran"
        );
        assert!(guard.is_lost());
    }

    fn guard_reports_lost_while_the_server_is_paused_past_the_lease(make) {
        // is_lost() turns true once the lease has run out, while the server is paused, not
        // only when a renewal retry finishes (with the server unreachable, minutes late).
        let server = RedisServer::new();
        let config = Config::builder(server.url().as_str())
            .watchdog_timeout(Duration::from_millis(600))
            .response_timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        let client = Client::new(config).unwrap();
        // The lease counts from when the acquire was sent: measure from before it (measured
        // from its return, a slow reply on a loaded machine would make the loss look early).
        let sent = Instant::now();
        let guard = make(&client, "wd:paused").lock().unwrap();
        server.stop();
        let noticed = wait_until(Duration::from_secs(2), || guard.is_lost());
        let after = sent.elapsed();
        server.cont();
        assert!(noticed, "lost not reported during a pause of 3 leases");
        assert!(
            after >= Duration::from_millis(600),
            "not before the lease: {after:?}"
        );
        assert!(after < Duration::from_millis(1100), "{after:?}");
    }

    fn leased_unlock_of_a_leaked_hold_leaves_the_watchdog_hold_renewed(make) {
        // Lock::unlock on a lock with an explicit lease leaves the watchdog entry of the
        // thread's other (watchdog) hold: that hold is renewed, not left to expire while its
        // guard looks fine.
        let server = RedisServer::new();
        let client = client(&server, 600, 100);
        let lock = make(&client, "wd:mixed");
        let outer = lock.lock().unwrap();
        let leased = lock.clone().with_lease(Duration::from_millis(300));
        leased.lock().unwrap().leak();
        leased.unlock().unwrap();
        std::thread::sleep(Duration::from_millis(1500)); // 2.5 watchdog leases
        assert_eq!(lock.hold_count().unwrap(), 1);
        assert!(!outer.is_lost());
        outer.unlock().unwrap();
    }
}

#[test]
fn locks_acquired_apart_are_renewed_in_full_batches() {
    // Two groups of locks taken 150 ms apart (more than the coalescing slack) are renewed
    // together after the first renewals: one full call per period, not two half-empty ones.
    let server = RedisServer::new();
    let client = client(&server, 900, 100);
    let mut guards = Vec::new();
    for group in 0..2 {
        for i in 0..50 {
            guards.push(client.lock(format!("wd:apart:{group}:{i}")).lock().unwrap());
        }
        std::thread::sleep(Duration::from_millis(150)); // staging the spread, not a sync
    }
    let mut raw = server.conn();
    // After the first renewals merge the groups: one call per period (300 ms).
    std::thread::sleep(Duration::from_millis(700));
    let before = command_calls(&mut raw, "evalsha");
    std::thread::sleep(Duration::from_millis(3000));
    let calls = command_calls(&mut raw, "evalsha") - before;
    assert!(
        (8..=12).contains(&calls),
        "renewal calls in 10 periods for 100 locks in 2 groups: {calls}"
    );
    assert!(guards.iter().all(|g| !g.is_lost()));
}

/// A thread holding a read lock: told to, it re-enters and releases that hold by name
/// (`Lock::unlock`); told again, it releases its guard.
struct Reader {
    owner: String,
    tell: std::sync::mpsc::Sender<()>,
    done: std::sync::mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<bool>,
}

impl Reader {
    fn start(lock: redlatch::Lock) -> Reader {
        let (owner_tx, owner_rx) = std::sync::mpsc::channel();
        let (tell, told) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let guard = lock.lock().unwrap();
            owner_tx.send(guard.owner().to_owned()).unwrap();
            told.recv().unwrap();
            lock.lock().unwrap().leak();
            lock.unlock().unwrap();
            done_tx.send(()).unwrap();
            told.recv().unwrap();
            let lost = guard.is_lost();
            guard.unlock().unwrap();
            lost
        });
        let owner = owner_rx.recv().unwrap();
        Reader {
            owner,
            tell,
            done,
            thread,
        }
    }

    fn reenter(&self) {
        self.tell.send(()).unwrap();
        self.done.recv().unwrap();
    }

    /// Releases the guard; true if it was lost.
    fn release(self) -> bool {
        self.tell.send(()).unwrap();
        self.thread.join().unwrap()
    }
}

#[test]
fn read_holds_of_several_threads_on_one_lock_are_renewed_until_each_is_released() {
    // The watchdog indexes a lock's first hash field apart from its others (the read holds of
    // other threads): each must be found (a re-entry joins its entry, `Lock::unlock` releases
    // a hold of it) while the first is held and after it is released, the others must stay
    // renewed, and the last release must stop every renewal.
    let server = RedisServer::new();
    let client = client(&server, 600, 100);
    let mut raw = server.conn();
    let mut readers: Vec<Reader> = (0..3)
        .map(|_| Reader::start(client.read_write_lock("wd:readers").read()))
        .collect();
    // The others re-enter while the first reader holds, then it re-enters and leaves.
    readers[1..].iter().for_each(Reader::reenter);
    let first = readers.remove(0);
    first.reenter();
    assert!(!first.release());
    std::thread::sleep(Duration::from_millis(2000)); // more than three leases
    for reader in readers {
        let key = format!("{{wd:readers}}:{}:rwlock_timeout:1", reader.owner);
        let pttl: i64 = raw.pttl(&key).unwrap();
        assert!(pttl > 0, "{key} ran out while its guard lived: {pttl}");
        assert!(!reader.release(), "a reader's hold was lost");
    }
    assert!(!raw.exists::<_, bool>("wd:readers").unwrap());
    // A renewal the thread sent as the last hold was released may still land (a loaded
    // machine delays it): wait for a renewal period without a call. After it, nothing.
    let mut calls = command_calls(&mut raw, "evalsha");
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let now = command_calls(&mut raw, "evalsha");
        if now == calls {
            break;
        }
        calls = now;
    }
    std::thread::sleep(Duration::from_millis(800)); // > 3 renewal periods: nothing may run
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        calls,
        "renewal ran after release"
    );
}
