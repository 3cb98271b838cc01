//! Read-write lock: sharing, exclusion, reentrancy, downgrade (and no upgrade), per-hold leases,
//! wake-ups, and the raw key layout.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use redis::Commands;
use redlatch::Client;
use support::{assert_quiet_for, await_waiting, numsub, wait_until, RedisServer};

const CHANNEL: fn(&str) -> String = |name| format!("redisson_rwlock:{{{name}}}");

fn client_with_watchdog(server: &RedisServer, ms: u64) -> Client {
    support::client_with(server, |b| b.watchdog_timeout(Duration::from_millis(ms)))
}

fn hash(raw: &mut redis::Connection, name: &str) -> HashMap<String, String> {
    raw.hgetall(name).unwrap()
}

/// Every key but the short-lived unlock latches (which make retried unlocks idempotent).
fn lock_keys(raw: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = raw.keys("*").unwrap();
    keys.into_iter()
        .filter(|k| !k.starts_with("redisson_unlock_latch:"))
        .collect()
}

#[test]
fn readers_share_across_threads_and_clients_and_exclude_writers() {
    let server = RedisServer::new();
    let clients = [
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    ];
    let mut raw = server.conn();
    let barrier = Arc::new(Barrier::new(7));
    let (tx, rx) = unbounded();
    let readers: Vec<_> = (0..6)
        .map(|i| {
            let rw = clients[i % 2].read_write_lock("rw:share");
            let (barrier, tx) = (Arc::clone(&barrier), tx.clone());
            std::thread::spawn(move || {
                let guard = rw.read().lock().unwrap();
                let again = rw.read().lock().unwrap(); // reentrant
                tx.send(rw.read().hold_count().unwrap()).unwrap();
                barrier.wait(); // all six hold at once
                barrier.wait(); // until the main thread has looked
                drop(again);
                drop(guard);
            })
        })
        .collect();
    barrier.wait();
    assert_eq!(rx.iter().take(6).collect::<Vec<_>>(), [2; 6]);
    // Raw layout: mode read, six owners with 2 holds each, a timeout key per hold.
    let h = hash(&mut raw, "rw:share");
    assert_eq!(h["mode"], "read");
    assert_eq!(h.len(), 7, "{h:?}");
    for (owner, count) in h.iter().filter(|(f, _)| *f != "mode") {
        assert_eq!(count, "2");
        for n in 1..=2 {
            let key = format!("{{rw:share}}:{owner}:rwlock_timeout:{n}");
            let ttl: i64 = raw.pttl(&key).unwrap();
            assert!(ttl > 0 && ttl <= 30_000, "{key}: {ttl}");
        }
    }
    let rw = clients[0].read_write_lock("rw:share");
    assert!(rw.read().is_locked().unwrap());
    assert!(!rw.write().is_locked().unwrap());
    assert!(
        rw.write().try_lock().unwrap().is_none(),
        "readers exclude a writer"
    );
    barrier.wait();
    for t in readers {
        t.join().unwrap();
    }
    // The last hold removed the hash; the timeout keys went with their holds.
    let keys = lock_keys(&mut raw);
    assert!(keys.is_empty(), "{keys:?}");
    assert!(rw.write().try_lock().unwrap().is_some());
}

#[test]
fn a_writer_excludes_readers_and_writers_and_reenters() {
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let rw = a.read_write_lock("rw:excl");
    let w1 = rw.write().lock().unwrap();
    let w2 = rw.write().lock().unwrap();
    assert_eq!(rw.write().hold_count().unwrap(), 2);
    let h = hash(&mut raw, "rw:excl");
    assert_eq!(h["mode"], "write");
    assert_eq!(h[&format!("{}:write", a.owner_id())], "2");
    let other = b.read_write_lock("rw:excl");
    let (read, write) = std::thread::spawn(move || {
        (
            other.read().try_lock().unwrap().is_some(),
            other.write().try_lock().unwrap().is_some(),
        )
    })
    .join()
    .unwrap();
    assert!(!read && !write);
    // Not held by this thread on the read side: NotHeld, nothing touched.
    assert!(rw.read().unlock().unwrap_err().is_not_held());
    assert!(!rw.read().force_unlock().unwrap(), "not in read mode");
    drop(w2);
    assert_eq!(rw.write().hold_count().unwrap(), 1);
    drop(w1);
    assert!(!raw.exists::<_, bool>("rw:excl").unwrap());
}

#[test]
fn a_writer_may_read_and_its_downgrade_lets_blocked_readers_in_at_once() {
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let rw = a.read_write_lock("rw:down");
    let write = rw.write().lock().unwrap();
    let read = rw.read().lock().unwrap(); // downgrade step 1: read while writing
    let reader = b.read_write_lock("rw:down");
    let waiting = std::thread::spawn(move || {
        let g = reader.read().lock().unwrap();
        let at = Instant::now();
        drop(g);
        at
    });
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        &CHANNEL("rw:down")
    ) == 1));
    await_waiting(&b, 1); // the reader re-checked and blocks
    let released = Instant::now();
    drop(write); // step 2: mode becomes read, and blocked readers are told
    let latency = waiting.join().unwrap() - released;
    assert!(latency < Duration::from_millis(50), "{latency:?}");
    assert_eq!(hash(&mut raw, "rw:down")["mode"], "read");
    assert!(rw.read().is_held_by_current_thread().unwrap());
    drop(read);
    assert!(!raw.exists::<_, bool>("rw:down").unwrap());
}

#[test]
fn a_reader_asking_for_the_write_lock_waits_for_every_read_hold_including_its_own() {
    // Documented behaviour (no upgrade), shown without hiding a deadlock behind a timeout:
    // this thread's own read hold has a 1 s lease, and its write lock comes right after that
    // hold expires (not at the 10 s timeout), while the raw state shows what it waited for.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let owner = client.owner_id();
    let rw = client.read_write_lock("rw:up");
    rw.read()
        .with_lease(Duration::from_millis(1000))
        .lock()
        .unwrap()
        .leak();
    let watcher = {
        let mut raw = server.conn();
        let client = client.clone();
        std::thread::spawn(move || {
            await_waiting(&client, 1); // the write waits
            hash(&mut raw, "rw:up")
        })
    };
    let asked = Instant::now();
    let write = rw.write().try_lock_for(Duration::from_secs(10)).unwrap();
    let waited = asked.elapsed();
    let during = watcher.join().unwrap();
    assert_eq!(during["mode"], "read", "{during:?}");
    assert_eq!(
        during.get(&owner).map(String::as_str),
        Some("1"),
        "{during:?}"
    );
    assert_eq!(
        during.len(),
        2,
        "its own read hold was the only one: {during:?}"
    );
    assert!(write.is_some(), "granted once its own read hold expired");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_millis(2500),
        "waited {waited:?}: for its own 1 s read lease, not for the 10 s timeout"
    );
    let mut raw = server.conn();
    let h = hash(&mut raw, "rw:up");
    assert_eq!(h["mode"], "write");
    assert!(
        !h.contains_key(&owner),
        "the expired read hold is gone: {h:?}"
    );
}

#[test]
fn the_watchdog_renews_read_and_write_holds() {
    let server = RedisServer::new();
    let client = client_with_watchdog(&server, 600);
    let mut raw = server.conn();
    let owner = client.owner_id();
    let read = client.read_write_lock("rw:wd-read").read().lock().unwrap();
    let read2 = client.read_write_lock("rw:wd-read").read().lock().unwrap();
    let write = client
        .read_write_lock("rw:wd-write")
        .write()
        .lock()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000)); // more than three leases
    assert!(!read.is_lost() && !write.is_lost());
    for n in 1..=2 {
        let ttl: i64 = raw
            .pttl(format!("{{rw:wd-read}}:{owner}:rwlock_timeout:{n}"))
            .unwrap();
        assert!(ttl > 0 && ttl <= 600, "hold {n}: {ttl}");
    }
    for name in ["rw:wd-read", "rw:wd-write"] {
        let ttl: i64 = raw.pttl(name).unwrap();
        assert!(ttl > 0 && ttl <= 600, "{name}: {ttl}");
    }
    drop(read2);
    read.unlock().unwrap();
    write.unlock().unwrap();
    let keys = lock_keys(&mut raw);
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn an_expired_read_hold_does_not_keep_the_lock_from_a_writer() {
    // Reader A's hold has a 500 ms lease and is never released (a dead reader). Reader B is
    // renewed by the watchdog; Redisson's renewal also extends every other reader's timeout
    // key, which keeps A alive as long as B lives. Ours renews B's only: when B unlocks, the
    // waiting writer gets the lock at once.
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = client_with_watchdog(&server, 600);
    let w = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    a.read_write_lock("rw:dead")
        .read()
        .with_lease(Duration::from_millis(500))
        .lock()
        .unwrap()
        .leak();
    let (b_tx, b_rx) = unbounded::<()>();
    let (b_done_tx, b_done_rx) = unbounded::<Instant>();
    let b_lock = b.read_write_lock("rw:dead");
    let b_owner = std::thread::spawn(move || {
        let g = b_lock.read().lock().unwrap();
        b_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(1200)); // A expires; B is renewed twice
        let at = Instant::now();
        drop(g);
        b_done_tx.send(at).unwrap();
    });
    b_rx.recv().unwrap();
    let writer_lock = w.read_write_lock("rw:dead");
    let writer = std::thread::spawn(move || {
        let g = writer_lock
            .write()
            .try_lock_for(Duration::from_secs(10))
            .unwrap();
        (g.is_some(), Instant::now())
    });
    await_waiting(&w, 1);
    std::thread::sleep(Duration::from_millis(900));
    let a_key = format!("{{rw:dead}}:{}:1:rwlock_timeout:1", a.id());
    let a_owner_key = raw
        .keys::<_, Vec<String>>(format!("{{rw:dead}}:{}:*", a.id()))
        .unwrap();
    assert!(
        a_owner_key.is_empty(),
        "A's hold expired: {a_owner_key:?} ({a_key})"
    );
    assert_eq!(hash(&mut raw, "rw:dead")["mode"], "read");
    b_owner.join().unwrap();
    let b_released = b_done_rx.recv().unwrap();
    let (got, at) = writer.join().unwrap();
    assert!(got);
    let latency = at - b_released;
    assert!(latency < Duration::from_millis(100), "{latency:?}");
}

#[test]
fn write_unlock_wakes_every_waiter_with_1_and_read_unlock_wakes_a_writer_with_0() {
    let server = RedisServer::new();
    let clients = [
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    ];
    let mut raw = server.conn();
    let mut sub_conn = server.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.subscribe(CHANNEL("rw:wake")).unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(2))).unwrap();

    let holder = Client::open(server.url()).unwrap();
    let write = holder.read_write_lock("rw:wake").write().lock().unwrap();
    let (tx, rx) = unbounded();
    let (hold_tx, hold_rx) = unbounded::<()>();
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let rw = clients[i % 2].read_write_lock("rw:wake");
            let (tx, hold_rx) = (tx.clone(), hold_rx.clone());
            std::thread::spawn(move || {
                let g = rw.read().lock().unwrap();
                tx.send(Instant::now()).unwrap();
                let _ = hold_rx.recv();
                drop(g);
            })
        })
        .collect();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        &CHANNEL("rw:wake")
    ) == 3));
    // Every reader tried, re-checked and blocks: nothing but our own INFO calls arrive.
    await_waiting(&clients[0], 2);
    await_waiting(&clients[1], 2);
    assert_quiet_for(&mut raw, Duration::from_millis(300), "while waiting");
    let released = Instant::now();
    drop(write);
    let mut latencies: Vec<Duration> = (0..4)
        .map(|_| rx.recv_timeout(Duration::from_secs(2)).unwrap() - released)
        .collect();
    latencies.sort();
    assert!(latencies[3] < Duration::from_millis(50), "{latencies:?}");
    assert_eq!(
        sub.get_message().unwrap().get_payload::<String>().unwrap(),
        "1"
    );

    // Four readers hold; a writer waits and gets the lock when the last one leaves.
    let writer_lock = holder.read_write_lock("rw:wake");
    let writer = std::thread::spawn(move || {
        let g = writer_lock.write().lock().unwrap();
        let at = Instant::now();
        drop(g);
        at
    });
    await_waiting(&holder, 1);
    for _ in 0..3 {
        hold_tx.send(()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(!writer.is_finished(), "one reader still holds");
    let released = Instant::now();
    drop(hold_tx);
    for t in readers {
        t.join().unwrap();
    }
    let latency = writer.join().unwrap() - released;
    assert!(latency < Duration::from_millis(50), "{latency:?}");
    let payloads: Vec<String> = std::iter::from_fn(|| sub.get_message().ok())
        .map(|m| m.get_payload::<String>().unwrap())
        .take(2)
        .collect();
    assert_eq!(
        payloads,
        ["0", "1"],
        "read unlock freed it (0), then the write unlock (1)"
    );
}

#[test]
fn bad_input_and_foreign_keys_are_refused_without_writes() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let empty = client.read_write_lock("");
    assert!(empty.read().lock().unwrap_err().is_invalid_argument());
    assert!(empty.write().try_lock().unwrap_err().is_invalid_argument());
    let rw = client.read_write_lock("rw:bad");
    assert!(rw
        .read()
        .with_lease(Duration::ZERO)
        .lock()
        .unwrap_err()
        .is_invalid_argument());
    // A plain lock's hash (no mode field) and a string under the name.
    client.lock("rw:plain").lock().unwrap().leak();
    let _: () = raw.set("rw:text", "x").unwrap();
    for name in ["rw:plain", "rw:text"] {
        let before: Vec<u8> = redis::cmd("DUMP").arg(name).query(&mut raw).unwrap();
        let rw = client.read_write_lock(name);
        assert!(rw.read().try_lock().unwrap_err().is_wrong_type(), "{name}");
        assert!(rw.write().try_lock().unwrap_err().is_wrong_type(), "{name}");
        let after: Vec<u8> = redis::cmd("DUMP").arg(name).query(&mut raw).unwrap();
        assert_eq!(before, after, "{name} unchanged");
    }
}

#[test]
fn force_unlock_breaks_the_held_side_and_wakes_waiters() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let other = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let guard = holder.read_write_lock("rw:force").read().lock().unwrap();
    let rw = other.read_write_lock("rw:force");
    let writer = {
        let rw = rw.clone();
        std::thread::spawn(move || rw.write().lock().map(|g| g.unlock().is_ok()).unwrap())
    };
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        &CHANNEL("rw:force")
    ) == 1));
    await_waiting(&other, 1); // the writer re-checked and blocks
    assert!(!rw.write().force_unlock().unwrap(), "not in write mode");
    assert!(rw.read().force_unlock().unwrap());
    assert!(writer.join().unwrap());
    assert!(guard.unlock().unwrap_err().is_lock_lost());
}

#[test]
fn a_redisson_reader_blocks_our_writer_and_its_release_wakes_it() {
    // A Java reader, written as Redisson's read-lock script writes it, with a Java owner id.
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let java = "6f1e1f5c-0000-4000-8000-000000000001:57";
    let _: () = redis::pipe()
        .hset("rw:java", "mode", "read")
        .hset("rw:java", java, 1)
        .pexpire("rw:java", 30_000)
        .set(format!("{{rw:java}}:{java}:rwlock_timeout:1"), 1)
        .pexpire(format!("{{rw:java}}:{java}:rwlock_timeout:1"), 30_000)
        .query(&mut raw)
        .unwrap();
    let rw = client.read_write_lock("rw:java");
    assert!(
        rw.read().try_lock().unwrap().is_some(),
        "readers share with Java"
    );
    let writer = {
        let rw = rw.clone();
        std::thread::spawn(move || {
            let g = rw.write().lock().unwrap();
            let at = Instant::now();
            drop(g);
            at
        })
    };
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        &CHANNEL("rw:java")
    ) == 1));
    await_waiting(&client, 1); // the writer re-checked and blocks

    // Redisson's read unlock of the last hold: HINCRBY -1, HDEL, DEL its timeout key, then
    // (only `mode` left) DEL the lock and publish 0.
    let released = Instant::now();
    let _: () = redis::pipe()
        .hdel("rw:java", java)
        .del(format!("{{rw:java}}:{java}:rwlock_timeout:1"))
        .del("rw:java")
        .publish(CHANNEL("rw:java"), "0")
        .query(&mut raw)
        .unwrap();
    let latency = writer.join().unwrap() - released;
    assert!(latency < Duration::from_millis(50), "{latency:?}");
}

#[test]
fn a_writer_wakes_when_a_read_unlock_cuts_the_expiry_it_waits_for() {
    // A live reader's unlock that cuts the hash's expiry to a dead reader's remaining 1.2 s
    // publishes: the writer, which saw a 30 s expiry, takes the lock as the dead hold expires.
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let w = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    a.read_write_lock("rw:cut")
        .read()
        .with_lease(Duration::from_millis(1500))
        .lock()
        .unwrap()
        .leak();
    let dead_until = Instant::now() + Duration::from_millis(1500);
    let live = b.read_write_lock("rw:cut").read().lock().unwrap();
    let writer_lock = w.read_write_lock("rw:cut");
    let writer = std::thread::spawn(move || {
        let g = writer_lock
            .write()
            .try_lock_for(Duration::from_secs(10))
            .unwrap();
        (g.is_some(), Instant::now())
    });
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        &CHANNEL("rw:cut")
    ) == 1));
    await_waiting(&w, 1); // the writer re-checked: it saw a ~30 s expiry
    drop(live);
    let pttl: i64 = raw.pttl("rw:cut").unwrap();
    assert!(
        pttl > 0 && pttl <= 1500,
        "cut to the dead reader's hold: {pttl}"
    );
    let (got, at) = writer.join().unwrap();
    assert!(got);
    assert!(
        at >= dead_until - Duration::from_millis(50),
        "not before the dead hold expired"
    );
    let late = at.saturating_duration_since(dead_until);
    assert!(
        late < Duration::from_millis(300),
        "{late:?} after the dead hold expired"
    );
}

#[test]
fn unlocking_a_read_hold_whose_lease_ran_out_reports_it_lost() {
    // With another reader keeping the hash alive, the unlock of a read hold whose lease ran
    // out reports the guard lost, not Ok.
    let server = RedisServer::new();
    let a = Client::open(server.url()).unwrap();
    let b = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let _other = b.read_write_lock("rw:exp").read().lock().unwrap();
    let guard = a
        .read_write_lock("rw:exp")
        .read()
        .with_lease(Duration::from_millis(300))
        .lock()
        .unwrap();
    std::thread::sleep(Duration::from_millis(450));
    assert!(guard.is_lost());
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    // Nothing is sent for a lost guard (it could release a newer hold of the thread): its
    // stale field stays beside the other reader's hold, and does not keep the lock held.
    let h = hash(&mut raw, "rw:exp");
    assert!(h.contains_key(&b.owner_id()), "{h:?}");
    drop(_other);
    assert!(
        !raw.exists::<_, bool>("rw:exp").unwrap(),
        "freed with the last live hold"
    );
}

#[test]
fn a_corrupt_read_hold_does_not_fail_the_renewal_of_other_locks_in_its_batch() {
    // A read renewal script error fails that hold only, not the whole watchdog batch: the
    // plain lock renewed in the same tick stays renewed and is not marked lost.
    let server = RedisServer::new();
    let c = client_with_watchdog(&server, 600);
    let mut raw = server.conn();
    let plain = c.lock("rw:batch-plain").lock().unwrap();
    let read = c.read_write_lock("rw:batch").read().lock().unwrap();
    let _: () = raw.hset("rw:batch", c.owner_id(), "abc").unwrap();
    std::thread::sleep(Duration::from_millis(1500)); // several renewals
    assert!(!plain.is_lost());
    let pttl: i64 = raw.pttl("rw:batch-plain").unwrap();
    assert!(pttl > 0 && pttl <= 600, "{pttl}");
    assert!(read.is_lost(), "the corrupt hold is reported lost");
    read.leak();
    plain.unlock().unwrap();
}
