//! The permit-expirable semaphore: counts and key layout, prompt hand-over, lease expiry and
//! renewal, many waiters, bad input, and interop with Redisson-style raw writes.

mod support;

use support::forget::ForgetAll;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Error, PermitExpirableSemaphore, PermitId};
use support::{assert_quiet_for, await_waiting, count_commands, numsub, wait_until, RedisServer};

const LONG: Duration = Duration::from_secs(30);

/// The server's clock in ms (`TIME`), the clock permit expiries are written in.
fn server_ms(conn: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
    s * 1000 + us / 1000
}

/// A permit's expiry in `{name}:timeout`, whose member is the 16 bytes that the id's hex
/// stands for, as Redisson stores it (an id that is not hex: its text).
fn score(conn: &mut redis::Connection, name: &str, id: &str) -> Option<i64> {
    let member = hex::decode(id).unwrap_or_else(|_| id.as_bytes().to_vec());
    conn.zscore(format!("{{{name}}}:timeout"), member).unwrap()
}

fn channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

/// Waits until `n` clients are subscribed to the semaphore's channel.
fn subscribed(conn: &mut redis::Connection, name: &str, n: i64) {
    assert!(
        wait_until(Duration::from_secs(5), || numsub(conn, &channel(name)) == n),
        "{n} subscriber(s) on {}",
        channel(name)
    );
}

fn is_hex_id(id: &PermitId) -> bool {
    id.as_str().len() == 32
        && id
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn assert_unknown(err: Error, name: &str, id: &PermitId) {
    match err {
        Error::UnknownPermit { name: n, id: i } => {
            assert_eq!((n.as_str(), i.as_str()), (name, id.as_str()))
        }
        other => panic!("expected UnknownPermit, got {other:?}"),
    }
}

#[test]
fn counts_ids_and_key_layout_are_redissons() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:layout";
    let s = client.permit_expirable_semaphore(name);
    assert_eq!(s.name(), name);
    assert!(format!("{s:?}").contains(name));

    // Every count change is published as the new count.
    let mut sub_conn = server.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.subscribe(channel(name)).unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut next_message = || -> String { sub.get_message().unwrap().get_payload().unwrap() };

    assert_eq!(s.available_permits().unwrap(), 0);
    assert!(s.try_set_permits(3).unwrap());
    assert_eq!(next_message(), "3");
    assert!(!s.try_set_permits(5).unwrap());
    assert_eq!(raw.get::<_, String>(name).unwrap(), "3");
    assert_eq!(s.add_permits(2).unwrap(), 5);
    assert_eq!(next_message(), "5");
    assert_eq!(s.add_permits(-4).unwrap(), 1);
    assert_eq!(s.add_permits(-3).unwrap(), -2);
    assert_eq!(next_message(), "1");
    assert_eq!(next_message(), "-2");
    assert_eq!(s.available_permits().unwrap(), -2);
    assert_eq!(
        s.try_acquire(LONG).forget_all().unwrap(),
        None,
        "a negative count grants nothing"
    );
    assert_eq!(s.add_permits(4).unwrap(), 2);
    assert_eq!(next_message(), "2");

    let mut ids = Vec::new();
    for lease_ms in [10_000i64, 20_000] {
        let before = server_ms(&mut raw);
        let id = s
            .try_acquire(Duration::from_millis(lease_ms as u64))
            .forget_all()
            .unwrap()
            .unwrap();
        let after = server_ms(&mut raw);
        assert!(is_hex_id(&id), "{id}");
        let at = score(&mut raw, name, id.as_str()).expect("id in {name}:timeout");
        assert!(
            before + lease_ms <= at && at <= after + lease_ms,
            "{before} + {lease_ms} <= {at} <= {after} + {lease_ms}"
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
    assert_eq!(raw.get::<_, String>(name).unwrap(), "0");
    // The receipts of the count's changes go with later writes, or expire.
    let mut keys: Vec<String> = raw.keys("*").unwrap();
    keys.retain(|k| !k.starts_with("redisson_unlock_latch:"));
    keys.sort();
    assert_eq!(keys, ["pes:layout", "{pes:layout}:timeout"]);
    assert_eq!(s.try_acquire(LONG).forget_all().unwrap(), None);

    // Released by id, from another client: no ownership.
    let other = Client::open(server.url()).unwrap();
    let s2 = other.permit_expirable_semaphore(name);
    s2.release(&ids[0].as_str().parse().unwrap()).unwrap();
    assert_eq!(next_message(), "1");
    s2.release(&PermitId::new(ids[1].to_string())).unwrap();
    assert_eq!(next_message(), "2");
    assert_eq!(raw.get::<_, String>(name).unwrap(), "2");
    assert!(!raw.exists::<_, bool>("{pes:layout}:timeout").unwrap());
}

#[test]
fn waiter_of_another_client_gets_a_released_permit_within_50ms_and_sends_nothing_meanwhile() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let waiter_client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:handoff";
    let s = holder.permit_expirable_semaphore(name);
    assert!(s.try_set_permits(2).unwrap());
    let mut latencies = Vec::new();
    for round in 0..6 {
        let held = [
            s.try_acquire(LONG).forget_all().unwrap().unwrap(),
            s.try_acquire(LONG).forget_all().unwrap().unwrap(),
        ];
        let w = waiter_client.permit_expirable_semaphore(name);
        let waiter = thread::spawn(move || {
            let id = if round % 2 == 0 {
                w.acquire(LONG).forget_all().unwrap()
            } else {
                w.try_acquire_for(LONG, Duration::from_secs(5))
                    .forget_all()
                    .unwrap()
                    .unwrap()
            };
            (id, Instant::now())
        });
        subscribed(&mut raw, name, 1);
        await_waiting(&waiter_client, 1); // it tried, then re-checked once subscribed
        if round == 0 {
            // Blocked with both permits held for 30 s: nothing but our own INFO may arrive.
            assert_quiet_for(&mut raw, Duration::from_millis(300), "while waiting");
        }
        let released_at = Instant::now();
        s.release(&held[0]).unwrap();
        let (id, got_at) = waiter.join().unwrap();
        latencies.push(got_at - released_at);
        assert_eq!(s.available_permits().unwrap(), 0);
        s.release(&id).unwrap(); // taken by the other client, released here
        s.release(&held[1]).unwrap();
        assert_eq!(s.available_permits().unwrap(), 2);
    }
    latencies.sort();
    eprintln!("release -> waiter acquired: {latencies:?}");
    assert!(latencies[3] < Duration::from_millis(50), "{latencies:?}");
    assert!(latencies[5] < Duration::from_millis(500), "{latencies:?}");
    assert!(wait_until(Duration::from_secs(2), || numsub(
        &mut raw,
        &channel(name)
    ) == 0));
}

#[test]
fn expired_permits_come_back_and_wake_a_waiter_without_any_release() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let waiter_client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:expiry";
    let s = holder.permit_expirable_semaphore(name);
    assert!(s.try_set_permits(2).unwrap());
    let lease = Duration::from_millis(300);
    let expired = [
        s.try_acquire(lease).forget_all().unwrap().unwrap(),
        s.try_acquire(lease).forget_all().unwrap().unwrap(),
    ];
    let expiries: Vec<i64> = expired
        .iter()
        .map(|id| score(&mut raw, name, id.as_str()).unwrap())
        .collect();
    let (first, last) = (expiries[0].min(expiries[1]), expiries[0].max(expiries[1]));

    let w = waiter_client.permit_expirable_semaphore(name);
    let mut waiter_raw = server.conn();
    let waiter = thread::spawn(move || {
        let id = w.acquire(LONG).forget_all().unwrap();
        (id, server_ms(&mut waiter_raw))
    });
    let (id, got_at) = waiter.join().unwrap();
    eprintln!("first expiry -> waiter acquired: {} ms", got_at - first);
    assert!(
        got_at >= first && got_at - first < 200,
        "acquired at {got_at}, first permit expired at {first}"
    );

    // Both expired permits were counted back; the waiter holds one of them.
    let now = server_ms(&mut raw);
    if now <= last {
        thread::sleep(Duration::from_millis((last - now + 1) as u64)); // let the lease run out
    }
    assert_eq!(s.available_permits().unwrap(), 1);
    for gone in &expired {
        assert_eq!(score(&mut raw, name, gone.as_str()), None);
        assert_unknown(s.release(gone).unwrap_err(), name, gone);
        assert!(!s.try_release(gone).unwrap());
    }
    let stranger = PermitId::new("0123456789abcdef0123456789abcdef");
    assert_unknown(s.release(&stranger).unwrap_err(), name, &stranger);
    assert_eq!(s.available_permits().unwrap(), 1);
    s.release(&id).unwrap();
    assert_eq!(s.available_permits().unwrap(), 2);
    let err = s.release(&id).unwrap_err();
    assert!(err.is_unknown_permit());
    assert_unknown(err, name, &id);
    assert_eq!(
        s.available_permits().unwrap(),
        2,
        "a double release adds nothing"
    );
}

#[test]
fn update_lease_keeps_a_permit_past_its_original_lease_but_cannot_revive_one() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:renew";
    let s = client.permit_expirable_semaphore(name);
    assert!(s.try_set_permits(1).unwrap());
    let id = s.acquire(Duration::from_millis(300)).forget_all().unwrap();
    let before = server_ms(&mut raw);
    s.update_lease(&id, Duration::from_secs(5)).unwrap();
    let after = server_ms(&mut raw);
    let at = score(&mut raw, name, id.as_str()).unwrap();
    assert!(before + 5000 <= at && at <= after + 5000);
    thread::sleep(Duration::from_millis(500)); // past the original lease
    assert_eq!(s.available_permits().unwrap(), 0, "not reclaimed");
    assert_eq!(s.try_acquire(LONG).forget_all().unwrap(), None);
    assert_eq!(score(&mut raw, name, id.as_str()), Some(at));
    s.release(&id).unwrap();
    assert_eq!(s.available_permits().unwrap(), 1);

    let short = s.acquire(Duration::from_millis(100)).forget_all().unwrap();
    thread::sleep(Duration::from_millis(250)); // let the lease run out
    assert_unknown(
        s.update_lease(&short, Duration::from_secs(5)).unwrap_err(),
        name,
        &short,
    );
    assert_eq!(score(&mut raw, name, short.as_str()), None);
    assert_eq!(s.available_permits().unwrap(), 1);
    let stranger = PermitId::new("ffffffffffffffffffffffffffffffff");
    assert!(s
        .update_lease(&stranger, LONG)
        .unwrap_err()
        .is_unknown_permit());
}

#[test]
fn added_permits_wake_exactly_that_many_waiters_and_releases_the_rest() {
    const WAITERS: usize = 8;
    const PERMITS: i64 = 3;
    let server = RedisServer::new();
    let clients = [
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    ];
    let admin = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:many";
    let s = admin.permit_expirable_semaphore(name);
    assert!(s.try_set_permits(0).unwrap());
    let holding = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let (tx, rx) = mpsc::channel::<PermitId>();
    let threads: Vec<_> = (0..WAITERS)
        .map(|i| {
            let sem: PermitExpirableSemaphore = clients[i % 2].permit_expirable_semaphore(name);
            let (holding, most, tx) = (Arc::clone(&holding), Arc::clone(&most), tx.clone());
            thread::spawn(move || {
                let id = sem.acquire(LONG).forget_all().unwrap();
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tx.send(id).unwrap();
            })
        })
        .collect();
    subscribed(&mut raw, name, 2);
    // Each tried, re-checked once subscribed, and blocks. No permit exists, so none can
    // expire: the waiters send nothing.
    await_waiting(&clients[0], WAITERS as u64 / 2);
    await_waiting(&clients[1], WAITERS as u64 / 2);
    assert_quiet_for(&mut raw, Duration::from_millis(200), "while waiting");

    let added_at = Instant::now();
    assert_eq!(s.add_permits(PERMITS).unwrap(), PERMITS);
    let mut held: Vec<PermitId> = (0..PERMITS)
        .map(|_| rx.recv_timeout(Duration::from_secs(1)).expect("woken"))
        .collect();
    eprintln!("add_permits(3) -> 3 acquired: {:?}", added_at.elapsed());
    assert!(added_at.elapsed() < Duration::from_millis(200));
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "extra grant"
    );
    assert_eq!(s.available_permits().unwrap(), 0);

    let mut handoffs = Vec::new();
    for _ in PERMITS as usize..WAITERS {
        holding.fetch_sub(1, Ordering::SeqCst);
        let released_at = Instant::now();
        s.release(&held.remove(0)).unwrap();
        held.push(
            rx.recv_timeout(Duration::from_secs(1))
                .expect("lost wake-up"),
        );
        handoffs.push(released_at.elapsed());
    }
    eprintln!("release -> next of 8 waiters acquired: {handoffs:?}");
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        most.load(Ordering::SeqCst) <= PERMITS,
        "more holders than permits"
    );
    for id in &held {
        s.release(id).unwrap();
    }
    assert_eq!(s.available_permits().unwrap(), PERMITS);
    assert!(wait_until(Duration::from_secs(2), || numsub(
        &mut raw,
        &channel(name)
    ) == 0));
}

#[test]
fn bad_input_is_rejected_and_foreign_keys_are_left_alone() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let id = PermitId::new("0123456789abcdef0123456789abcdef");
    let year_and_a_day = Duration::from_secs(366 * 24 * 3600);

    let empty = client.permit_expirable_semaphore("");
    let invalid = |r: Result<(), Error>| assert!(r.unwrap_err().is_invalid_argument());
    invalid(empty.try_set_permits(1).map(drop));
    invalid(empty.add_permits(1).map(drop));
    invalid(empty.available_permits().map(drop));
    invalid(empty.acquire(LONG).forget_all().map(drop));
    invalid(empty.try_acquire(LONG).forget_all().map(drop));
    invalid(empty.try_acquire_for(LONG, LONG).forget_all().map(drop));
    invalid(
        empty
            .try_acquire_until(LONG, Instant::now())
            .forget_all()
            .map(drop),
    );
    invalid(empty.release(&id));
    invalid(empty.try_release(&id).map(drop));
    invalid(empty.update_lease(&id, LONG));

    let s = client.permit_expirable_semaphore("pes:bad");
    assert!(s.try_set_permits(1).unwrap());
    for lease in [Duration::ZERO, year_and_a_day] {
        invalid(s.acquire(lease).forget_all().map(drop));
        invalid(s.try_acquire(lease).forget_all().map(drop));
        invalid(s.try_acquire_for(lease, LONG).forget_all().map(drop));
        invalid(s.update_lease(&id, lease));
    }
    // A zero wait is one try: the one permit is free.
    assert!(s.try_acquire_for(LONG, Duration::ZERO).unwrap().is_some());
    invalid(
        s.try_acquire_for(LONG, year_and_a_day)
            .forget_all()
            .map(drop),
    );
    invalid(
        s.try_acquire_until(LONG, Instant::now() + year_and_a_day)
            .forget_all()
            .map(drop),
    );
    invalid(s.add_permits(1 << 53).map(drop));
    assert_eq!(s.available_permits().unwrap(), 1, "nothing taken");

    // Each case: the keys written raw, and which key the error names. The timeout set holds an
    // expired permit where it can, to show that nothing was reclaimed either.
    let cases: [(&str, &str, &str); 4] = [
        ("pes:hash", "hash", "name"),
        ("pes:text", "text", "name"),
        ("pes:float", "1.5", "name"),
        ("pes:zstring", "1", "timeout"),
    ];
    for (name, value, wrong) in cases {
        let timeouts = format!("{{{name}}}:timeout");
        if value == "hash" {
            let _: () = raw.hset(name, "f", "v").unwrap();
        } else {
            let _: () = raw.set(name, value).unwrap();
        }
        if wrong == "timeout" {
            let _: () = raw.set(&timeouts, "x").unwrap();
        } else {
            let _: () = raw.zadd(&timeouts, "expired", 1).unwrap();
        }
        let dump = |raw: &mut redis::Connection| -> (Vec<u8>, Vec<u8>) {
            let mut d = |k: &str| redis::cmd("DUMP").arg(k).query(raw).unwrap();
            (d(name), d(&timeouts))
        };
        let before = dump(&mut raw);
        let key = if wrong == "name" {
            name.to_owned()
        } else {
            timeouts.clone()
        };
        let s = client.permit_expirable_semaphore(name);
        let wrong_type = |r: Result<(), Error>| match r {
            Err(Error::WrongType { key: k }) => assert_eq!(k, key, "{name}"),
            other => panic!("{name}: expected WrongType, got {other:?}"),
        };
        wrong_type(s.try_set_permits(1).map(drop));
        wrong_type(s.add_permits(1).map(drop));
        wrong_type(s.available_permits().map(drop));
        wrong_type(s.acquire(LONG).forget_all().map(drop));
        wrong_type(s.try_acquire(LONG).forget_all().map(drop));
        wrong_type(s.try_acquire_for(LONG, LONG).forget_all().map(drop));
        wrong_type(s.release(&id));
        wrong_type(s.try_release(&id).map(drop));
        wrong_type(s.update_lease(&id, LONG));
        wrong_type(s.permits().map(drop));
        wrong_type(s.acquired_permits().map(drop));
        wrong_type(s.remaining_lease(&id).map(drop));
        assert_eq!(dump(&mut raw), before, "{name} changed");
    }

    // A wait that times out leaves no subscription behind.
    let s = client.permit_expirable_semaphore("pes:none");
    assert!(s.try_set_permits(0).unwrap());
    let wait = Duration::from_millis(100);
    let started = Instant::now();
    assert_eq!(s.try_acquire_for(LONG, wait).forget_all().unwrap(), None);
    let took = started.elapsed();
    assert!(
        took >= wait && took < wait + Duration::from_millis(100),
        "{took:?}"
    );
    assert!(wait_until(Duration::from_secs(2), || numsub(
        &mut raw,
        &channel("pes:none")
    ) == 0));
    assert_eq!(s.available_permits().unwrap(), 0);
}

#[test]
fn redisson_style_raw_permits_expire_and_raw_publishes_wake_waiters() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:interop";
    let timeouts = "{pes:interop}:timeout";
    // Two permits taken the way Redisson does (the member is the id's 16 bytes): one with a
    // 300 ms lease, one non-expirable.
    let _: () = raw.set(name, 2).unwrap();
    let expires_at = server_ms(&mut raw) + 300;
    let _: () = raw.zadd(timeouts, &[0xaa_u8; 16][..], expires_at).unwrap();
    let _: () = raw.decr(name, 1).unwrap();
    let _: () = raw
        .zadd(timeouts, &[0xbb_u8; 16][..], 922_337_203_685_477i64)
        .unwrap();
    let _: () = raw.decr(name, 1).unwrap();

    let s = client.permit_expirable_semaphore(name);
    let mut waiter_raw = server.conn();
    let sem = s.clone();
    let (first, got_at) = thread::spawn(move || {
        let id = sem.acquire(LONG).forget_all().unwrap();
        (id, server_ms(&mut waiter_raw))
    })
    .join()
    .unwrap();
    eprintln!(
        "raw permit expiry -> waiter acquired: {} ms",
        got_at - expires_at
    );
    assert!(
        got_at >= expires_at && got_at - expires_at < 200,
        "acquired at {got_at}, raw permit expired at {expires_at}"
    );
    assert_eq!(
        score(&mut raw, name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        None
    );
    assert_eq!(
        score(&mut raw, name, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"),
        Some(922_337_203_685_477),
        "a non-expirable permit stays"
    );
    assert_eq!(s.available_permits().unwrap(), 0);

    // A raw INCR + PUBLISH (a Redisson release) wakes a waiter whose next re-check is 30 s away.
    let sem = s.clone();
    let waiter = thread::spawn(move || {
        let id = sem.acquire(LONG).forget_all().unwrap();
        (id, Instant::now())
    });
    subscribed(&mut raw, name, 1);
    await_waiting(&client, 1); // it re-checked and blocks
    let _: () = raw.incr(name, 1).unwrap();
    let released_at = Instant::now();
    let _: () = raw.publish(channel(name), 1).unwrap();
    let (second, got_at) = waiter.join().unwrap();
    eprintln!("raw PUBLISH -> waiter acquired: {:?}", got_at - released_at);
    assert!(got_at - released_at < Duration::from_millis(100));
    s.release(&first).unwrap();
    s.release(&second).unwrap();
    assert_eq!(s.available_permits().unwrap(), 2);
}

#[test]
fn a_waiter_learns_the_expiry_of_a_permit_another_waiter_of_its_client_took() {
    // Two waiters of one client, no permit anywhere. One permit is added: only the first is
    // woken, takes it with a 300 ms lease, and its holder never releases. The second, which
    // saw no permit that could expire, learns that one's expiry and takes it as the lease ends,
    // not at its own deadline.
    let server = RedisServer::new();
    let c = Client::open(server.url()).unwrap();
    let admin = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    c.permit_expirable_semaphore("pes:chain")
        .try_set_permits(0)
        .unwrap();
    let spawn = || {
        let s = c.permit_expirable_semaphore("pes:chain");
        thread::spawn(move || {
            let got = s
                .try_acquire_for(Duration::from_millis(300), Duration::from_secs(5))
                .forget_all()
                .unwrap();
            (got.is_some(), Instant::now())
        })
    };
    let first = spawn();
    await_waiting(&c, 1); // the first waits first
    let second = spawn();
    subscribed(&mut raw, "pes:chain", 1);
    await_waiting(&c, 2); // both blocked: each tried and re-checked once
    admin
        .permit_expirable_semaphore("pes:chain")
        .add_permits(1)
        .unwrap();
    let (got1, at1) = first.join().unwrap();
    let (got2, at2) = second.join().unwrap();
    assert!(got1 && got2);
    let after = at2 - at1;
    assert!(
        after >= Duration::from_millis(250) && after < Duration::from_millis(600),
        "the second got the first's permit {after:?} after it (lease 300 ms)"
    );
}

#[test]
fn shortening_a_lease_wakes_a_waiter_to_its_new_expiry() {
    // update_lease to a shorter lease wakes the waiter, which saw the 30 s expiry: it takes the
    // permit at the new expiry, not at the first one or at its deadline.
    let server = RedisServer::new();
    let c1 = Client::open(server.url()).unwrap();
    let c2 = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let s1 = c1.permit_expirable_semaphore("pes:short");
    s1.try_set_permits(1).unwrap();
    let id = s1.acquire(LONG).forget_all().unwrap();
    let s2 = c2.permit_expirable_semaphore("pes:short");
    let waiter = thread::spawn(move || {
        let got = s2
            .try_acquire_for(LONG, Duration::from_secs(5))
            .forget_all()
            .unwrap();
        (got.is_some(), Instant::now())
    });
    subscribed(&mut raw, "pes:short", 1);
    await_waiting(&c2, 1); // it re-checked: it saw the 30 s expiry
    let shortened = Instant::now();
    s1.update_lease(&id, Duration::from_millis(200)).unwrap();
    let (got, at) = waiter.join().unwrap();
    assert!(got);
    let after = at - shortened;
    assert!(
        after >= Duration::from_millis(150) && after < Duration::from_millis(600),
        "{after:?} after the lease was cut to 200 ms"
    );
}

#[test]
fn a_count_that_incrby_would_refuse_is_a_wrong_type_before_any_write() {
    // A count Lua reads as an integer but INCRBY refuses ("007", "-0", "+1") fails a release
    // as a wrong type before the reclaim and the ZREM run: the permits and the count stay as
    // they are, rather than a permit being removed and INCRBY failing after it.
    let server = RedisServer::new();
    let c = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let now = server_ms(&mut raw);
    for value in ["007", "-0", "+1"] {
        let _: () = raw.set("pes:odd", value).unwrap();
        let _: () = raw.zadd("{pes:odd}:timeout", "p1", now + 60_000).unwrap();
        let _: () = raw.zadd("{pes:odd}:timeout", "old", now - 1_000).unwrap();
        let s = c.permit_expirable_semaphore("pes:odd");
        let err = s.release(&PermitId::new("p1")).unwrap_err();
        assert!(err.is_wrong_type(), "{value}: {err:?}");
        assert!(score(&mut raw, "pes:odd", "p1").is_some(), "{value}");
        assert!(score(&mut raw, "pes:odd", "old").is_some(), "{value}");
        let count: String = raw.get("pes:odd").unwrap();
        assert_eq!(count, value);
    }
}

/// Reads `{name}:timeout` whole: permit id (its bytes) → score.
fn timeouts(conn: &mut redis::Connection, name: &str) -> Vec<(Vec<u8>, i64)> {
    conn.zrange_withscores(format!("{{{name}}}:timeout"), 0, -1)
        .unwrap()
}

#[test]
fn a_dropped_permit_guard_releases_its_permit_to_a_waiter_of_another_client() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let waiter_client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:guard";
    let s = holder.permit_expirable_semaphore(name);
    assert!(s.try_set_permits(1).unwrap());

    let guard = s.acquire(LONG).unwrap();
    assert!(is_hex_id(guard.id()));
    assert_eq!(guard.semaphore().name(), name);
    assert!(format!("{guard:?}").contains(guard.id().as_str()));
    assert!(score(&mut raw, name, guard.id().as_str()).is_some());
    assert!(s.try_acquire(LONG).unwrap().is_none());
    let deadline = Instant::now() + Duration::from_millis(50);
    assert!(s.try_acquire_until(LONG, deadline).unwrap().is_none());

    let w = waiter_client.permit_expirable_semaphore(name);
    let waiter = thread::spawn(move || {
        let got = w.try_acquire_for(LONG, Duration::from_secs(5)).unwrap();
        got.map(|g| g.forget())
    });
    await_waiting(&waiter_client, 1);
    let first = guard.id().clone();
    // The guard is Send: it is dropped by another thread.
    thread::spawn(move || drop(guard)).join().unwrap();
    assert_eq!(score(&mut raw, name, first.as_str()), None);
    let second = waiter.join().unwrap().expect("the waiter got the permit");
    assert_ne!(second, first);
    assert_eq!(timeouts(&mut raw, name).len(), 1, "forget kept it taken");
    assert_eq!(s.available_permits().unwrap(), 0);

    // release(self) reports; a permit gone before its guard is reported, not revived.
    s.release(&second).unwrap();
    s.acquire(LONG).unwrap().release().unwrap();
    let short = s.acquire(Duration::from_millis(50)).unwrap();
    thread::sleep(Duration::from_millis(80));
    let id = short.id().clone();
    assert_unknown(short.release().unwrap_err(), name, &id);
    let gone = s.acquire(LONG).unwrap();
    s.release(gone.id()).unwrap();
    drop(gone); // logs, changes nothing
    assert_eq!(s.available_permits().unwrap(), 1);
    assert!(timeouts(&mut raw, name).is_empty());
}

#[test]
fn counts_and_remaining_lease_are_read_without_writing() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:counts";
    let s = client.permit_expirable_semaphore(name);
    assert_eq!(
        (s.permits().unwrap(), s.acquired_permits().unwrap()),
        (0, 0)
    );
    assert!(s.try_set_permits(5).unwrap());
    let long = s.acquire(Duration::from_secs(10)).forget_all().unwrap();
    let short = s.acquire(Duration::from_millis(300)).unwrap();
    assert_eq!(s.acquired_permits().unwrap(), 2);
    assert_eq!(s.available_permits().unwrap(), 3);
    assert_eq!(s.permits().unwrap(), 5);

    let first = s.remaining_lease(&long).unwrap().unwrap();
    assert!(
        Duration::from_secs(9) < first && first <= Duration::from_secs(10),
        "{first:?}"
    );
    let left = short.remaining_lease().unwrap().unwrap();
    assert!(left <= Duration::from_millis(300), "{left:?}");
    thread::sleep(Duration::from_millis(350));
    let later = s.remaining_lease(&long).unwrap().unwrap();
    assert!(later <= first - Duration::from_millis(300), "{later:?}");
    assert_eq!(short.remaining_lease().unwrap(), None, "expired");

    // The expired permit counts as available, but is still in the set: nothing was written.
    let calls = count_commands(&mut raw);
    assert_eq!(s.acquired_permits().unwrap(), 1);
    assert_eq!(s.permits().unwrap(), 5);
    assert_eq!(timeouts(&mut raw, name).len(), 2);
    assert_eq!(raw.get::<_, i64>(name).unwrap(), 3);
    assert!(count_commands(&mut raw) > calls);
    drop(short);

    s.release(&long).unwrap();
    assert_eq!(s.remaining_lease(&long).unwrap(), None);
    assert_eq!(s.remaining_lease(&PermitId::new("nope")).unwrap(), None);
    assert_eq!(s.acquired_permits().unwrap(), 0);
    assert_eq!(s.available_permits().unwrap(), 5);

    // A Redisson permit taken without a lease never expires.
    let _: () = raw
        .zadd(format!("{{{name}}}:timeout"), "java", 922337203685477i64)
        .unwrap();
    let _: () = raw.decr(name, 1).unwrap();
    assert_eq!(
        s.remaining_lease(&PermitId::new("java")).unwrap(),
        Some(Duration::MAX)
    );
    assert_eq!(s.acquired_permits().unwrap(), 1);
    assert_eq!(s.permits().unwrap(), 5);
}

#[test]
fn several_permits_are_taken_all_or_nothing_and_a_waiter_for_n_wakes_only_when_n_are_free() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let waiter_client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let name = "pes:many";
    let s = holder.permit_expirable_semaphore(name);
    assert!(s.try_set_permits(3).unwrap());

    assert_eq!(s.try_acquire_many(4, LONG).forget_all().unwrap(), None);
    assert!(timeouts(&mut raw, name).is_empty(), "nothing written");
    assert_eq!(raw.get::<_, i64>(name).unwrap(), 3);

    let before = server_ms(&mut raw);
    let ids = s
        .acquire_many(2, Duration::from_secs(20))
        .forget_all()
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(is_hex_id) && ids[0] != ids[1]);
    let stored = timeouts(&mut raw, name);
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].1, stored[1].1, "one lease for all");
    assert!(stored[0].1 >= before + 20_000);
    assert_eq!(raw.get::<_, i64>(name).unwrap(), 1);

    let w = waiter_client.permit_expirable_semaphore(name);
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let got = w
            .try_acquire_many_for(3, LONG, Duration::from_secs(5))
            .forget_all()
            .unwrap();
        tx.send(()).unwrap();
        got
    });
    await_waiting(&waiter_client, 1);
    s.release(&ids[0]).unwrap();
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "2 free are not 3"
    );
    assert_eq!(timeouts(&mut raw, name).len(), 1);
    assert_eq!(s.try_release_many(&ids).unwrap(), 1, "one was released");
    let got = waiter.join().unwrap().expect("3 permits");
    assert_eq!(got.len(), 3);
    assert_eq!(s.available_permits().unwrap(), 0);
    assert_eq!(s.acquired_permits().unwrap(), 3);
    let deadline = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        s.try_acquire_many_until(1, LONG, deadline)
            .forget_all()
            .unwrap(),
        None
    );
    assert_eq!(s.try_release_many(&got).unwrap(), 3);
    assert_eq!(s.try_release_many(&got).unwrap(), 0);
    assert_eq!(s.available_permits().unwrap(), 3);
}

#[test]
fn bad_counts_and_leases_of_the_new_calls_are_rejected_before_anything_is_written() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let s = client.permit_expirable_semaphore("pes:bad-many");
    let absurd = Duration::from_secs(366 * 24 * 3600);
    let invalid = |r: Result<(), Error>| assert!(r.unwrap_err().is_invalid_argument());
    for permits in [0, 10_001] {
        invalid(s.acquire_many(permits, LONG).forget_all().map(drop));
        invalid(s.try_acquire_many(permits, LONG).forget_all().map(drop));
        invalid(
            s.try_acquire_many_for(permits, LONG, LONG)
                .forget_all()
                .map(drop),
        );
        invalid(
            s.try_acquire_many_until(permits, LONG, Instant::now())
                .forget_all()
                .map(drop),
        );
    }
    for lease in [Duration::ZERO, absurd] {
        invalid(s.acquire_many(2, lease).forget_all().map(drop));
        invalid(s.try_acquire_many(2, lease).forget_all().map(drop));
        invalid(s.acquire(lease).map(drop));
        invalid(s.try_acquire(lease).map(drop));
        invalid(s.try_acquire_for(lease, LONG).map(drop));
        invalid(s.try_acquire_until(lease, Instant::now()).map(drop));
    }
    // A zero wait is one try: no permits were set.
    assert!(s.try_acquire_for(LONG, Duration::ZERO).unwrap().is_none());
    invalid(
        s.try_acquire_many_for(1, LONG, absurd)
            .forget_all()
            .map(drop),
    );
    invalid(s.try_acquire_until(LONG, Instant::now() + absurd).map(drop));
    invalid(s.try_release_many(&[]).map(drop));
    let too_many = vec![PermitId::new("x"); 10_001];
    invalid(s.try_release_many(&too_many).map(drop));
    let empty = client.permit_expirable_semaphore("");
    invalid(empty.acquired_permits().map(drop));
    invalid(empty.permits().map(drop));
    invalid(empty.remaining_lease(&PermitId::new("x")).map(drop));
    let keys: Vec<String> = raw.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}
