//! Renewed permits of the permit-expirable semaphore: the watchdog keeps their lease, in
//! batched calls, until the guard is released, and reports a permit taken away.

mod support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Error, LostReason, PermitGuard, PermitId};
use support::{command_calls, wait_until, RedisServer};

const WATCHDOG: Duration = Duration::from_millis(300);

fn client(server: &RedisServer) -> Client {
    support::client_with(server, |b| b.watchdog_timeout(WATCHDOG))
}

fn timeouts(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

/// A permit's member in the timeout set: the 16 bytes its id's hex stands for (Redisson's form).
fn member(id: &PermitId) -> Vec<u8> {
    hex::decode(id.as_str()).unwrap()
}

/// The permit's expiry.
fn score(raw: &mut redis::Connection, name: &str, guard: &PermitGuard) -> Option<i64> {
    raw.zscore(timeouts(name), member(guard.id())).unwrap()
}

#[test]
fn a_renewed_permit_outlives_several_leases_and_its_release_stops_renewal() {
    let server = RedisServer::new();
    let (client, other) = (client(&server), client(&server));
    let name = "pr:long";
    let slots = client.permit_expirable_semaphore(name);
    assert!(slots.try_set_permits(1).unwrap());
    let permit = slots.acquire_renewed().unwrap();
    let mut raw = server.conn();
    let first = score(&mut raw, name, &permit).expect("taken");
    let until = Instant::now() + WATCHDOG * 5;
    while Instant::now() < until {
        // Sampled state: the permit must stay taken, and the last permit with it.
        assert!(score(&mut raw, name, &permit).is_some(), "permit expired");
        let theirs = other.permit_expirable_semaphore(name);
        assert!(theirs.try_acquire_renewed().unwrap().is_none());
        std::thread::sleep(Duration::from_millis(50));
    }
    let later = score(&mut raw, name, &permit).expect("taken");
    assert!(later > first + 500, "expiry moved from {first} to {later}");
    assert!(!permit.is_lost());
    assert!(permit.remaining_lease().unwrap().unwrap() <= WATCHDOG);

    permit.release().unwrap();
    assert_eq!(raw.zcard::<_, i64>(timeouts(name)).unwrap(), 0);
    assert_eq!(slots.available_permits().unwrap(), 1);
    let calls = command_calls(&mut raw, "evalsha");
    std::thread::sleep(WATCHDOG * 2); // 6 renewal periods: nothing may run
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        calls,
        "renewal ran after release"
    );
}

#[test]
fn dropping_a_renewed_guard_releases_its_permit() {
    let server = RedisServer::new();
    let client = client(&server);
    let slots = client.permit_expirable_semaphore("pr:drop");
    assert!(slots.try_set_permits(2).unwrap());
    let permit = slots
        .try_acquire_renewed_for(Duration::from_secs(1))
        .unwrap()
        .expect("free");
    let deadline = Instant::now() + Duration::from_secs(1);
    let second = slots
        .try_acquire_renewed_until(deadline)
        .unwrap()
        .expect("free");
    assert_eq!(slots.acquired_permits().unwrap(), 2);
    drop(permit);
    assert_eq!(slots.acquired_permits().unwrap(), 1);
    drop(second);
    assert_eq!(slots.available_permits().unwrap(), 2);
}

#[test]
fn a_permit_removed_by_hand_is_lost_as_not_held() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "pr:removed";
    let slots = client.permit_expirable_semaphore(name);
    assert!(slots.try_set_permits(1).unwrap());
    let permit = slots.acquire_renewed().unwrap();
    let (tx, rx) = mpsc::channel();
    permit.on_lost(move |reason| tx.send(reason).unwrap());
    let mut raw = server.conn();
    // As an operator (or a reclaim) would: the permit is no longer in the set.
    let removed: i64 = raw.zrem(timeouts(name), member(permit.id())).unwrap();
    assert_eq!(removed, 1);
    let reason = rx.recv_timeout(WATCHDOG * 2).expect("on_lost called");
    assert_eq!(reason, LostReason::NotHeld);
    assert!(permit.is_lost());
    // Nothing is sent for a lost permit: the count stays as the operator left it.
    let count: i64 = raw.get(name).unwrap();
    let err = permit.release().unwrap_err();
    assert!(err.is_unknown_permit(), "{err}");
    assert_eq!(raw.get::<_, i64>(name).unwrap(), count);
}

#[test]
fn a_lost_permit_calls_a_late_on_lost_at_once() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "pr:late";
    let slots = client.permit_expirable_semaphore(name);
    assert!(slots.try_set_permits(1).unwrap());
    let permit = slots.acquire_renewed().unwrap();
    let mut raw = server.conn();
    let _: i64 = raw.zrem(timeouts(name), member(permit.id())).unwrap();
    assert!(wait_until(WATCHDOG * 2, || permit.is_lost()));
    let (tx, rx) = mpsc::channel();
    permit.on_lost(move |reason| tx.send(reason).unwrap());
    assert_eq!(rx.try_recv().unwrap(), LostReason::NotHeld);
}

#[test]
fn renewals_of_one_semaphores_permits_are_batched() {
    let server = RedisServer::new();
    let client = client(&server);
    let slots = client.permit_expirable_semaphore("pr:batch");
    assert!(slots.try_set_permits(8).unwrap());
    let permits: Vec<PermitGuard> = (0..8).map(|_| slots.acquire_renewed().unwrap()).collect();
    let mut raw = server.conn();
    // Let the acquires' spread settle into one batch.
    std::thread::sleep(WATCHDOG);
    let before = command_calls(&mut raw, "evalsha");
    let rounds = 6;
    std::thread::sleep(WATCHDOG / 3 * rounds);
    let calls = command_calls(&mut raw, "evalsha") - before;
    assert!(
        calls <= u64::from(rounds) + 1,
        "{calls} renewal calls in {rounds} rounds for {} permits",
        permits.len()
    );
    assert!(calls >= 2, "renewals ran: {calls}");
    assert!(permits.iter().all(|p| !p.is_lost()));
}

#[test]
fn forgetting_a_renewed_permit_stops_renewal_and_its_lease_ends() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "pr:forget";
    let slots = client.permit_expirable_semaphore(name);
    assert!(slots.try_set_permits(1).unwrap());
    let id = slots.acquire_renewed().unwrap().forget();
    assert!(slots.remaining_lease(&id).unwrap().is_some());
    // Its lease (the watchdog timeout) runs out: the permit comes back.
    let back = slots
        .try_acquire_renewed_for(WATCHDOG * 4)
        .unwrap()
        .expect("the forgotten permit expired");
    assert_eq!(slots.remaining_lease(&id).unwrap(), None);
    drop(back);
}

#[test]
fn closing_the_client_marks_renewed_permits_lost() {
    let server = RedisServer::new();
    let client = client(&server);
    let slots = client.permit_expirable_semaphore("pr:close");
    assert!(slots.try_set_permits(1).unwrap());
    let permit = slots.acquire_renewed().unwrap();
    let (tx, rx) = mpsc::channel();
    permit.on_lost(move |reason| tx.send(reason).unwrap());
    client.close();
    assert_eq!(rx.try_recv().unwrap(), LostReason::ClientClosed);
    assert!(permit.is_lost());
    assert!(permit.release().unwrap_err().is_unknown_permit());
}

#[test]
fn renewed_acquires_reject_bad_input() {
    let server = RedisServer::new();
    let client = client(&server);
    let year_and_a_day = Duration::from_secs(366 * 24 * 3600);
    let invalid = |r: Result<(), Error>| assert!(r.unwrap_err().is_invalid_argument());
    let empty = client.permit_expirable_semaphore("");
    invalid(empty.acquire_renewed().map(drop));
    invalid(empty.try_acquire_renewed().map(drop));
    invalid(
        empty
            .try_acquire_renewed_for(Duration::from_secs(1))
            .map(drop),
    );
    invalid(empty.try_acquire_renewed_until(Instant::now()).map(drop));
    let s = client.permit_expirable_semaphore("pr:bad");
    // A zero wait is one try: no permits were set.
    assert!(s.try_acquire_renewed_for(Duration::ZERO).unwrap().is_none());
    invalid(s.try_acquire_renewed_for(year_and_a_day).map(drop));
    invalid(
        s.try_acquire_renewed_until(Instant::now() + year_and_a_day)
            .map(drop),
    );
    // No permits set: a past deadline makes one attempt.
    assert!(s
        .try_acquire_renewed_until(Instant::now() - Duration::from_secs(1))
        .unwrap()
        .is_none());
}

#[test]
fn a_permit_without_lease_is_left_so_by_renewal() {
    // Renewal leaves Redisson's "no lease" score (922337203685477 and above) as it is, rather
    // than turning it into an expiring one.
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = client(&server);
    let name = "pr:forever";
    let sem = client.permit_expirable_semaphore(name);
    sem.try_set_permits(1).unwrap();
    let guard = sem.acquire_renewed().unwrap();
    let forever: i64 = 922_337_203_685_477;
    let _: () = raw
        .zadd(timeouts(name), member(guard.id()), forever)
        .unwrap();
    let renewals = client.metrics().renewals;
    assert!(wait_until(Duration::from_secs(5), || client
        .metrics()
        .renewals
        >= renewals + 2));
    assert_eq!(
        score(&mut raw, name, &guard),
        Some(forever),
        "left as it was"
    );
    assert!(!guard.is_lost());
    guard.release().unwrap();
}
