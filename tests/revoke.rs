//! Taking a lock back: a request its holder is told of, a preemption with grace (honoured, or
//! ignored and released by force at the deadline), a steal, unpreemptible sections, and the
//! log of it all; a force never removes a later hold, and a lock never revoked costs nothing
//! more.

mod support;

use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, LockGuard, LostReason, Preempt, Revocation};
use support::{command_calls, key_exists, RedisServer};

/// Watchdog timeout: renewals every 300 ms, so a holder is told within that.
const LEASE_MS: u64 = 900;
const PERIOD: Duration = Duration::from_millis(LEASE_MS / 3);
/// Allowance for a loaded 2-core machine on top of every expected latency.
const SLACK: Duration = Duration::from_millis(700);

fn client(server: &RedisServer) -> Client {
    support::client_with(server, |b| {
        b.watchdog_timeout(Duration::from_millis(LEASE_MS))
    })
}

/// The revocations `guard` is told of, with when.
fn told(guard: &LockGuard) -> Receiver<(Revocation, Instant)> {
    let (tx, rx) = mpsc::channel();
    guard.on_revoke(move |r| {
        let _ = tx.send((r.clone(), Instant::now()));
    });
    rx
}

fn lost(guard: &LockGuard) -> Receiver<(LostReason, Instant)> {
    let (tx, rx) = mpsc::channel();
    guard.on_lost(move |reason| {
        let _ = tx.send((reason, Instant::now()));
    });
    rx
}

fn events(client: &Client, name: &str) -> Vec<(String, String, String)> {
    client
        .lock(name)
        .revocations(100)
        .unwrap()
        .into_iter()
        .map(|e| (e.event, e.by, e.whom))
        .collect()
}

#[test]
fn a_request_is_told_to_the_holder_and_enforces_nothing() {
    let server = RedisServer::new();
    let holder = client(&server);
    let asker = Client::open(server.url()).unwrap();
    let guard = holder.lock("rv:ask").lock().unwrap();
    let rx = told(&guard);
    assert!(!guard.is_revoked());
    let asked_at = Instant::now();
    let whom = asker
        .lock("rv:ask")
        .request_release_as("ops", "disk full")
        .unwrap();
    assert_eq!(whom.as_deref(), Some(guard.owner()));
    let (r, at) = rx.recv_timeout(Duration::from_secs(5)).expect("told");
    assert!(
        at - asked_at <= PERIOD + SLACK,
        "told after {:?}",
        at - asked_at
    );
    assert_eq!((r.by.as_str(), r.reason.as_str()), ("ops", "disk full"));
    assert_eq!((r.grace, r.forced), (None, false));
    assert_eq!(r.whom, guard.owner());
    assert!(guard.is_revoked());
    assert_eq!(guard.revocation(), Some(r));
    // Nothing is enforced: the hold lives on through several renewals.
    std::thread::sleep(PERIOD * 4);
    assert!(!guard.is_lost());
    assert_eq!(holder.lock("rv:ask").hold_count().unwrap(), 1);
    let owner = guard.owner().to_owned();
    guard.unlock().unwrap();
    // The answered request is forgotten: a later hold of the same owner is a new one.
    let mut raw = server.conn();
    let victim: Option<String> = raw.hget("redlatch_revoke:{rv:ask}", "victim").unwrap();
    assert_eq!(victim, None);
    let log = events(&asker, "rv:ask");
    assert_eq!(
        log,
        vec![
            ("request".into(), "ops".into(), owner.clone()),
            ("notice".into(), "ops".into(), owner),
        ]
    );
    // Nobody holds it: nobody to ask, and nothing written.
    assert_eq!(asker.lock("rv:ask").request_release("x").unwrap(), None);
    assert_eq!(events(&asker, "rv:ask").len(), 2);
}

#[test]
fn an_honoured_preemption_hands_the_lock_over_without_overlap_or_force() {
    let server = RedisServer::new();
    let holder = client(&server);
    let preemptor = client(&server);
    let (go, release) = mpsc::channel();
    let holding = std::thread::spawn({
        let holder = holder.clone();
        move || {
            let guard = holder.lock("rv:honour").lock().unwrap();
            let (tx, rx) = mpsc::channel();
            guard.on_revoke(move |r| {
                let _ = tx.send(r.clone());
            });
            go.send(guard.owner().to_owned()).unwrap();
            let r = rx.recv_timeout(Duration::from_secs(10)).expect("told");
            let released_at = Instant::now();
            guard.unlock().unwrap();
            (r, released_at)
        }
    });
    let victim = release.recv().unwrap();
    let how = Preempt::with_grace(Duration::from_secs(30)).reason("deploy");
    let started = Instant::now();
    let guard = preemptor.lock("rv:honour").preempt(&how).unwrap();
    let entered = Instant::now();
    let (r, released_at) = holding.join().unwrap();
    assert!(
        released_at <= entered,
        "the preemptor entered before the release"
    );
    assert_eq!(
        (r.reason.as_str(), r.grace),
        ("deploy", Some(Duration::from_secs(30)))
    );
    assert_eq!(r.by, guard.owner());
    assert!(
        entered - started <= PERIOD + SLACK * 2,
        "took {:?}",
        entered - started
    );
    let log: Vec<String> = events(&preemptor, "rv:honour")
        .into_iter()
        .map(|(e, _, whom)| {
            assert_eq!(whom, victim);
            e
        })
        .collect();
    assert_eq!(log, ["preempt", "notice"]);
    assert_eq!(preemptor.lock("rv:honour").hold_count().unwrap(), 1);
    drop(guard);
}

#[test]
fn an_ignored_preemption_releases_by_force_at_the_deadline_with_a_higher_token() {
    let server = RedisServer::new();
    let holder = client(&server);
    let preemptor = client(&server);
    let guard = holder.fenced_lock("rv:force").lock().unwrap();
    let old_token = guard.token().unwrap();
    let notices = told(&guard);
    let losses = lost(&guard);
    let resource = holder.fenced_resource("rv:force:data");
    resource.write(&guard, "old").unwrap();
    let grace = Duration::from_millis(800);
    let how = Preempt::with_grace(grace).reason("urgent");
    let started = Instant::now();
    let taken = preemptor.fenced_lock("rv:force").preempt(&how).unwrap();
    let entered = Instant::now();
    let (_, told_at) = notices.try_recv().expect("told before the force");
    assert!(
        entered >= told_at + grace - Duration::from_millis(50),
        "forced {:?} after the notice, grace {grace:?}",
        entered - told_at
    );
    assert!(
        entered - started <= PERIOD + grace + SLACK,
        "{:?}",
        entered - started
    );
    let new_token = taken.token().unwrap();
    assert!(new_token > old_token, "{new_token} <= {old_token}");
    // The old holder is told of the loss within one renewal period.
    let (reason, lost_at) = losses.recv_timeout(Duration::from_secs(5)).expect("lost");
    assert_eq!(reason, LostReason::Preempted);
    assert!(
        lost_at - entered <= PERIOD + SLACK,
        "{:?}",
        lost_at - entered
    );
    assert!(guard.is_lost());
    assert!(guard
        .revocation()
        .is_some_and(|r| r.forced && r.reason == "urgent"));
    // Fencing: the preemptor writes; the old holder's write is refused.
    preemptor
        .fenced_resource("rv:force:data")
        .write(&taken, "new")
        .unwrap();
    assert!(resource.write(&guard, "late").unwrap_err().is_stale_token());
    assert_eq!(resource.read().unwrap().as_deref(), Some(&b"new"[..]));
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert_eq!(preemptor.fenced_lock("rv:force").hold_count().unwrap(), 1);
    let log = preemptor.fenced_lock("rv:force").revocations(10).unwrap();
    let kinds: Vec<&str> = log.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["preempt", "notice", "forced"]);
    assert!(log
        .iter()
        .all(|e| e.token == Some(old_token) && e.reason == "urgent"));
}

#[test]
fn a_steal_takes_at_once_and_a_section_defers_it_by_at_most_the_accepted_deferral() {
    let server = RedisServer::new();
    let holder = client(&server);
    let thief = client(&server);
    let guard = holder.lock("rv:steal").lock().unwrap();
    let losses = lost(&guard);
    let started = Instant::now();
    let stolen = thief.lock("rv:steal").preempt(&Preempt::steal()).unwrap();
    assert!(
        started.elapsed() <= SLACK,
        "a steal waited {:?}",
        started.elapsed()
    );
    let (reason, _) = losses.recv_timeout(Duration::from_secs(5)).expect("lost");
    assert_eq!(reason, LostReason::Preempted);
    drop(stolen);

    // A section of 3 s; the thief accepts 1 s of deferral.
    let (in_tx, in_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let section = std::thread::spawn({
        let holder = holder.clone();
        move || {
            let guard = holder.lock("rv:steal").lock().unwrap();
            guard
                .unpreemptible(Duration::from_secs(3), || {
                    in_tx.send(()).unwrap();
                    let _ = stop_rx.recv_timeout(Duration::from_secs(10));
                })
                .unwrap();
            wait_lost(&guard)
        }
    });
    in_rx.recv().unwrap();
    let started = Instant::now();
    let how = Preempt::steal().max_deferral(Duration::from_secs(1));
    let stolen = thief.lock("rv:steal").preempt(&how).unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited <= Duration::from_secs(1) + SLACK,
        "deferred {waited:?}"
    );
    stop_tx.send(()).unwrap();
    assert!(
        section.join().unwrap(),
        "the robbed holder was told of its loss"
    );
    drop(stolen);
    // Without a deferral accepted, a section does not hold a steal back.
    let guard = holder.lock("rv:steal").lock().unwrap();
    let got = guard.unpreemptible(Duration::from_secs(5), || {
        let started = Instant::now();
        let stolen = thief.lock("rv:steal").preempt(&Preempt::steal()).unwrap();
        (started.elapsed(), stolen.owner().to_owned())
    });
    let (waited, by) = got.unwrap();
    assert!(waited <= SLACK, "{waited:?}");
    assert_ne!(by, guard.owner());
}

fn wait_lost(guard: &LockGuard) -> bool {
    support::wait_until(Duration::from_secs(5), || guard.is_lost())
}

#[test]
fn a_force_never_removes_a_later_hold() {
    let server = RedisServer::new();
    let holders = client(&server);
    let preemptor = client(&server);
    let name = "rv:later";
    // V holds; W, a thread of the same client, waits: V's release hands W the lock.
    let (v_release, v_told) = mpsc::channel();
    let v = std::thread::spawn({
        let holders = holders.clone();
        move || {
            let guard = holders.lock(name).lock().unwrap();
            v_release.send(guard.owner().to_owned()).unwrap();
            let rx = told(&guard);
            rx.recv_timeout(Duration::from_secs(10)).expect("V told");
            guard.unlock().unwrap();
        }
    });
    let v_owner = v_told.recv().unwrap();
    let (w_out, w_in) = mpsc::channel();
    let w = std::thread::spawn({
        let holders = holders.clone();
        move || {
            let guard = holders.lock(name).lock().unwrap();
            let (notices, losses) = (told(&guard), lost(&guard));
            let (_, told_at) = notices
                .recv_timeout(Duration::from_secs(10))
                .expect("W told");
            let (reason, lost_at) = losses
                .recv_timeout(Duration::from_secs(10))
                .expect("W lost");
            w_out
                .send((guard.owner().to_owned(), told_at, reason, lost_at))
                .unwrap();
        }
    });
    support::await_waiting(&holders, 1);
    // P preempts V with a grace; V answers by releasing, and W holds it next: a later hold,
    // which P asks anew and gives its own grace before the force.
    let grace = Duration::from_millis(600);
    let taken = preemptor
        .lock(name)
        .preempt(&Preempt::with_grace(grace).reason("later"))
        .unwrap();
    let entered = Instant::now();
    v.join().unwrap();
    let (w_owner, w_told_at, reason, _) = w_in.recv().unwrap();
    w.join().unwrap();
    assert_eq!(reason, LostReason::Preempted);
    assert!(
        entered >= w_told_at + grace - Duration::from_millis(50),
        "W forced {:?} after it was told",
        entered.saturating_duration_since(w_told_at)
    );
    let log: Vec<(String, String)> = preemptor
        .lock(name)
        .revocations(10)
        .unwrap()
        .into_iter()
        .map(|e| (e.event, e.whom))
        .collect();
    let expect = |e: &str, who: &str| (e.to_owned(), who.to_owned());
    assert_eq!(
        log,
        [
            expect("preempt", &v_owner),
            expect("notice", &v_owner),
            expect("preempt", &w_owner),
            expect("notice", &w_owner),
            expect("forced", &w_owner),
        ]
    );
    drop(taken);
}

#[test]
fn revoking_an_unrevocable_kind_is_refused_and_leaves_nothing() {
    let server = RedisServer::new();
    let c = client(&server);
    let _held = c.fair_lock("rv:fair").lock().unwrap();
    let err = c
        .fair_lock("rv:fair")
        .preempt(&Preempt::steal())
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err:?}");
    assert!(c
        .read_write_lock("rv:rw")
        .write()
        .request_release("x")
        .unwrap_err()
        .is_invalid_argument());
    let too_long = Preempt::with_grace(Duration::from_secs(400 * 86_400));
    assert!(c
        .lock("rv:plain")
        .preempt(&too_long)
        .unwrap_err()
        .is_invalid_argument());
    let mut raw = server.conn();
    for key in [
        "redlatch_revoke:{rv:fair}",
        "redlatch_revokes:{rv:fair}",
        "redlatch_revoke:{rv:plain}",
        "redlatch_revoke:{rv:rw}",
    ] {
        assert!(!key_exists(&mut raw, key), "{key} left behind");
    }
}

#[test]
fn a_lock_never_revoked_sends_nothing_more_in_its_cycle() {
    let server = RedisServer::new();
    let c = client(&server);
    let lock = c.lock("rv:cycle");
    drop(lock.lock().unwrap());
    let mut raw = server.conn();
    let before = command_calls(&mut raw, "evalsha") + command_calls(&mut raw, "eval");
    for _ in 0..10 {
        drop(lock.lock().unwrap());
    }
    let after = command_calls(&mut raw, "evalsha") + command_calls(&mut raw, "eval");
    assert_eq!(after - before, 20, "an acquire and a release per cycle");
    assert!(!key_exists(&mut raw, "redlatch_revoke:{rv:cycle}"));
}

/// How many waiters with a priority are queued on `name`.
fn queued(raw: &mut redis::Connection, name: &str) -> usize {
    raw.zcard(format!("redlatch_priority:{{{name}}}")).unwrap()
}

/// Starts a thread that waits for `name` with `priority`, notes its turn in `order`, and
/// holds the lock a moment.
fn prioritized_waiter(
    client: &Client,
    name: &'static str,
    priority: u32,
    order: &std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
) -> std::thread::JoinHandle<()> {
    let (client, order) = (client.clone(), std::sync::Arc::clone(order));
    std::thread::spawn(move || {
        let guard = client.lock(name).with_priority(priority).lock().unwrap();
        order.lock().unwrap().push(priority);
        std::thread::sleep(Duration::from_millis(20));
        drop(guard);
    })
}

#[test]
fn waiters_with_a_priority_are_served_highest_first_and_aging_bounds_overtaking() {
    let server = RedisServer::new();
    let c = client(&server);
    let other = client(&server);
    let mut raw = server.conn();
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = c.lock("pr:order").lock().unwrap();
    let mut threads = Vec::new();
    for (i, p) in [1u32, 5, 3].into_iter().enumerate() {
        let on = if i % 2 == 0 { &c } else { &other };
        threads.push(prioritized_waiter(on, "pr:order", p, &order));
        assert!(support::wait_until(Duration::from_secs(5), || queued(
            &mut raw, "pr:order"
        ) == i + 1));
    }
    drop(held);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [5, 3, 1]);
    assert_eq!(queued(&mut raw, "pr:order"), 0);

    // Aging: L (priority 0) joins; H1 (priority 2) joins at once and gets ahead; H2
    // (priority 2) joins more than two aging steps after L and does not.
    order.lock().unwrap().clear();
    let held = c.lock("pr:age").lock().unwrap();
    let low = prioritized_waiter(&c, "pr:age", 0, &order);
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, "pr:age"
    ) == 1));
    let l_joined = Instant::now();
    let h1 = prioritized_waiter(&other, "pr:age", 2, &order);
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, "pr:age"
    ) == 2));
    std::thread::sleep(
        (l_joined + Duration::from_millis(2_600)).saturating_duration_since(Instant::now()),
    );
    let h2 = prioritized_waiter(&other, "pr:age", 7, &order);
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, "pr:age"
    ) == 3));
    drop(held);
    for t in [low, h1, h2] {
        t.join().unwrap();
    }
    // H2 has priority 7: it joined 2.6 s after L, within 7 steps, so it is first; H1
    // (priority 2, at once) next; L before nobody else.
    assert_eq!(*order.lock().unwrap(), [7, 2, 0]);
    let order2 = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = c.lock("pr:age2").lock().unwrap();
    let low = prioritized_waiter(&c, "pr:age2", 0, &order2);
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, "pr:age2"
    ) == 1));
    let l_joined = Instant::now();
    std::thread::sleep(
        (l_joined + Duration::from_millis(2_600)).saturating_duration_since(Instant::now()),
    );
    let late = prioritized_waiter(&other, "pr:age2", 2, &order2);
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, "pr:age2"
    ) == 2));
    drop(held);
    for t in [low, late] {
        t.join().unwrap();
    }
    // Priority 2 joining 2.6 s (over two aging steps) after priority 0: served after it.
    assert_eq!(*order2.lock().unwrap(), [0, 2]);
}

#[test]
fn a_crashed_waiters_place_holds_the_queue_up_only_until_it_ends() {
    let server = RedisServer::new();
    let c = client(&server);
    let mut raw = server.conn();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut raw).unwrap();
    let now_ms = secs * 1000 + micros / 1000;
    let _: () = raw
        .zadd("redlatch_priority:{pr:ghost}", "ghost", now_ms - 1_000_000)
        .unwrap();
    let _: () = raw
        .zadd(
            "redlatch_priority_alive:{pr:ghost}",
            "ghost",
            now_ms + 1_000,
        )
        .unwrap();
    let lock = c.lock("pr:ghost").with_priority(0);
    assert!(
        lock.try_lock().unwrap().is_none(),
        "taken ahead of a live place"
    );
    let started = Instant::now();
    let guard = lock
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("taken");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited <= Duration::from_millis(1_000) + SLACK,
        "waited {waited:?}"
    );
    drop(guard);
    assert_eq!(queued(&mut raw, "pr:ghost"), 0);
}

#[test]
fn a_waiter_with_a_priority_that_gives_up_leaves_nothing_and_bad_priorities_are_refused() {
    let server = RedisServer::new();
    let c = client(&server);
    let other = client(&server);
    let mut raw = server.conn();
    let _held = other.lock("pr:leave").lock().unwrap();
    let got = c
        .lock("pr:leave")
        .with_priority(3)
        .try_lock_for(Duration::from_millis(200))
        .unwrap();
    assert!(got.is_none());
    assert!(!key_exists(&mut raw, "redlatch_priority:{pr:leave}"));
    assert!(!key_exists(&mut raw, "redlatch_priority_alive:{pr:leave}"));
    assert!(c
        .read_write_lock("pr:rw")
        .write()
        .with_priority(1)
        .try_lock()
        .unwrap_err()
        .is_invalid_argument());
    assert!(c
        .lock("pr:high")
        .with_priority(redlatch::MAX_PRIORITY + 1)
        .try_lock()
        .unwrap_err()
        .is_invalid_argument());
    // Without a priority a waiter behaves as before: it queues nowhere.
    assert!(c
        .lock("pr:leave")
        .try_lock_for(Duration::from_millis(100))
        .unwrap()
        .is_none());
    assert!(!key_exists(&mut raw, "redlatch_priority:{pr:leave}"));
}

#[test]
fn a_preemptor_that_gives_up_withdraws_and_a_holder_is_told_of_each_new_request() {
    let server = RedisServer::new();
    let holder = client(&server);
    let first = client(&server);
    let second = client(&server);
    let guard = holder.lock("rv:again").lock().unwrap();
    let (tx, rx) = mpsc::channel();
    guard.on_revoke(move |r| {
        let _ = tx.send(r.clone());
    });
    // A request only: told, with no grace.
    second
        .lock("rv:again")
        .request_release("just asking")
        .unwrap();
    let r = rx.recv_timeout(Duration::from_secs(5)).expect("told");
    assert_eq!((r.grace, r.reason.as_str()), (None, "just asking"));
    // A preemptor with an hour's grace gives up: its request goes with it.
    let hour = Preempt::with_grace(Duration::from_secs(3600)).reason("an hour");
    let gave_up = first
        .lock("rv:again")
        .try_preempt_for(&hour, Duration::from_millis(200))
        .unwrap();
    assert!(gave_up.is_none());
    let mut raw = server.conn();
    let by: Option<String> = raw.hget("redlatch_revoke:{rv:again}", "by").unwrap();
    assert_eq!(by, None, "the request of a preemptor that gave up stayed");
    // Another preemptor is not held back by it, and the holder is told of this request too.
    let how = Preempt::with_grace(Duration::from_millis(300)).reason("now");
    let started = Instant::now();
    let taken = second.lock("rv:again").preempt(&how).unwrap();
    assert!(started.elapsed() <= PERIOD + Duration::from_millis(300) + SLACK * 2);
    let r = loop {
        let r = rx.recv_timeout(Duration::from_secs(5)).expect("told again");
        if r.reason == "now" {
            break r;
        }
    };
    assert_eq!(r.grace, Some(Duration::from_millis(300)));
    // The preemptor's guard and its lock do not preempt again: its lock is the caller's.
    let lock = taken.lock().clone();
    drop(taken);
    let _theirs = first.lock("rv:again").lock().unwrap();
    let stole = std::thread::spawn(move || {
        lock.try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_some()
    });
    assert!(
        !stole.join().unwrap(),
        "a plain acquire of the preemptor's lock preempted"
    );
    assert!(wait_lost(&guard));
}

#[test]
fn a_victim_learns_it_was_preempted_even_when_a_later_request_replaced_the_record() {
    let server = RedisServer::new();
    let holder = client(&server);
    let thief = client(&server);
    let guard = holder.lock("rv:later-request").lock().unwrap();
    let losses = lost(&guard);
    let stolen = thief
        .lock("rv:later-request")
        .preempt(&Preempt::steal().reason("mine"))
        .unwrap();
    // At once, before the victim's renewal: a request to the new holder.
    Client::open(server.url())
        .unwrap()
        .lock("rv:later-request")
        .request_release("next")
        .unwrap();
    let (reason, _) = losses.recv_timeout(Duration::from_secs(5)).expect("lost");
    assert_eq!(reason, LostReason::Preempted);
    let r = guard.revocation().expect("who forced it");
    assert!(r.forced);
    assert_eq!(r.by, stolen.owner());
}

/// The fair lock's queue, as the raw LIST holds it.
fn fair_queue(raw: &mut redis::Connection, name: &str) -> Vec<String> {
    raw.lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .unwrap()
}

#[test]
fn a_fair_lock_places_waiters_with_a_priority_by_rank_but_never_before_its_head() {
    let server = RedisServer::new();
    let c = client(&server);
    let other = client(&server);
    let mut raw = server.conn();
    let name = "pr:fair";
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = c.fair_lock(name).lock().unwrap();
    // A and D wait without a priority; B, C and E with 1, 5 and 3.
    let mut threads = Vec::new();
    for (i, (label, priority)) in [("A", None), ("B", Some(1)), ("C", Some(5)), ("D", None)]
        .into_iter()
        .chain([("E", Some(3))])
        .enumerate()
    {
        let on = if i % 2 == 0 { c.clone() } else { other.clone() };
        let order = std::sync::Arc::clone(&order);
        threads.push(std::thread::spawn(move || {
            let lock = on.fair_lock(name);
            let lock = match priority {
                Some(p) => lock.with_priority(p),
                None => lock,
            };
            let guard = lock.lock().unwrap();
            order.lock().unwrap().push(label);
            drop(guard);
        }));
        assert!(support::wait_until(Duration::from_secs(5), || fair_queue(
            &mut raw, name
        )
        .len()
            == i + 1));
    }
    // Deadlines keep the queue's order, as Redisson's scripts expect.
    let queue = fair_queue(&mut raw, name);
    let deadlines: Vec<f64> = queue
        .iter()
        .map(|w| {
            raw.zscore(format!("redisson_lock_timeout:{{{name}}}"), w)
                .unwrap()
        })
        .collect();
    assert!(
        deadlines.windows(2).all(|d| d[0] < d[1]),
        "deadlines along the queue {deadlines:?}"
    );
    drop(held);
    for t in threads {
        t.join().unwrap();
    }
    // A was the head before anybody with a priority came: it stays first. D, without a
    // priority, counts as priority 0 from when it was seen: after B (priority 1, earlier).
    assert_eq!(*order.lock().unwrap(), ["A", "C", "E", "B", "D"]);
    assert!(fair_queue(&mut raw, name).is_empty());
    let ranks = format!("redlatch_priority:{{{name}}}");
    let left: i64 = raw.pttl(&ranks).unwrap();
    assert!(left == -2 || left <= 600_000, "ranks expire: {left}");
}

/// Starts a thread that takes `permits` of `name` with `priority`, notes its turn in
/// `order`, and keeps them (the test gives permits out one release at a time).
fn prioritized_taker(
    client: &Client,
    name: &'static str,
    priority: u32,
    permits: u32,
    order: &std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
) -> std::thread::JoinHandle<()> {
    let (client, order) = (client.clone(), std::sync::Arc::clone(order));
    std::thread::spawn(move || {
        let sem = client.semaphore(name).with_priority(priority);
        sem.acquire(permits).unwrap().forget();
        order.lock().unwrap().push(priority);
    })
}

/// Gives three waiters of `name`, the first in line needing two permits and the others one,
/// a permit at a time with `give`: the first serves nobody (the first in line is served
/// strictly: no waiter with a priority behind it takes what it waits for; checked once every
/// waiter has looked again since, each attempt renewing its place), then each next one serves
/// the next waiter, which notes its turn in `order` before the next permit comes, so that the
/// order noted is the order served.
fn serve_one_permit_at_a_time(
    raw: &mut redis::Connection,
    name: &str,
    order: &std::sync::Mutex<Vec<u32>>,
    mut give: impl FnMut(),
) {
    let alive = format!("redlatch_priority_alive:{{{name}}}");
    let places = |raw: &mut redis::Connection| -> Vec<(Vec<u8>, i64)> {
        raw.zrange_withscores(&alive, 0, -1).unwrap()
    };
    let before = places(raw);
    assert_eq!(before.len(), 3, "{before:?}");
    // The server's clock past the last attempt: any later one renews its place to more.
    let latest = before.iter().map(|(_, s)| *s).max().unwrap();
    assert!(support::wait_until(Duration::from_secs(5), || server_ms(
        raw
    ) + 15_000
        > latest));
    give();
    assert!(support::wait_until(Duration::from_secs(5), || {
        let now = places(raw);
        now.len() == 3
            && before
                .iter()
                .all(|(w, s)| now.iter().any(|(v, t)| v == w && t > s))
    }));
    assert!(
        order.lock().unwrap().is_empty(),
        "taken before the first in line"
    );
    for served in 1..=3 {
        give();
        assert!(support::wait_until(Duration::from_secs(5), || order
            .lock()
            .unwrap()
            .len()
            == served));
    }
}

#[test]
fn a_semaphore_serves_waiters_with_a_priority_first_strictly_and_a_leaver_wakes_the_next() {
    let server = RedisServer::new();
    let c = client(&server);
    let other = client(&server);
    let mut raw = server.conn();
    let name = "pr:sem";
    let sem = c.semaphore(name);
    assert!(sem.try_set_permits(0).unwrap());
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for (i, (p, n)) in [(1u32, 1u32), (5, 2), (3, 1)].into_iter().enumerate() {
        let on = if i % 2 == 0 { &c } else { &other };
        threads.push(prioritized_taker(on, name, p, n, &order));
        assert!(support::wait_until(Duration::from_secs(5), || queued(
            &mut raw, name
        ) == i + 1));
    }
    // An operator sees the line: highest effective priority first, each place kept alive.
    let seen = c.inspect(name).unwrap().expect("the semaphore");
    let effective: Vec<f64> = seen.priorities.iter().map(|w| w.effective).collect();
    assert_eq!(effective.len(), 3, "{:?}", seen.priorities);
    assert!(
        effective[0] >= 5.0 && effective[1] >= 3.0 && effective[1] < 5.0 && effective[2] < 3.0,
        "{effective:?}"
    );
    assert!(seen.priorities.iter().all(|w| w
        .place_ends_in
        .is_some_and(|t| t <= Duration::from_secs(15))));
    assert!(seen.keys.contains(&"redlatch_priority:{pr:sem}".to_owned()));
    serve_one_permit_at_a_time(&mut raw, name, &order, || assert!(sem.release(1).is_ok()));
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [5, 3, 1]);
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert_eq!(queued(&mut raw, name), 0);

    // The first in line gives up: the next is woken at once, not at its place's refresh.
    sem.release(1).unwrap();
    let big = c.semaphore(name).with_priority(9);
    let waiting = std::thread::spawn(move || big.try_acquire_for(5, Duration::from_secs(1)));
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, name
    ) == 1));
    let small = {
        let other = other.clone();
        std::thread::spawn(move || {
            other
                .semaphore(name)
                .with_priority(0)
                .acquire(1)
                .unwrap()
                .forget();
            Instant::now()
        })
    };
    assert!(support::wait_until(Duration::from_secs(5), || queued(
        &mut raw, name
    ) == 2));
    assert!(waiting.join().unwrap().unwrap().is_none());
    let gave_up = Instant::now();
    let took = small.join().unwrap();
    assert!(
        took.saturating_duration_since(gave_up) < SLACK,
        "the next waiter took its permit {:?} after the first gave up",
        took.saturating_duration_since(gave_up)
    );
    assert!(!key_exists(&mut raw, "redlatch_priority:{pr:sem}"));
    assert!(!key_exists(&mut raw, "redlatch_priority_alive:{pr:sem}"));
    assert!(c
        .semaphore(name)
        .with_priority(redlatch::MAX_PRIORITY + 1)
        .try_acquire(1)
        .unwrap_err()
        .is_invalid_argument());
}

#[test]
fn a_permit_expirable_semaphore_serves_waiters_with_a_priority_first() {
    let server = RedisServer::new();
    let c = client(&server);
    let other = client(&server);
    let mut raw = server.conn();
    let name = "pr:pes";
    let sem = c.permit_expirable_semaphore(name);
    assert!(sem.try_set_permits(0).unwrap());
    let lease = Duration::from_secs(60);
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for (i, (p, n)) in [(1u32, 1u32), (4, 2), (2, 1)].into_iter().enumerate() {
        let on = if i % 2 == 0 { c.clone() } else { other.clone() };
        let order = std::sync::Arc::clone(&order);
        threads.push(std::thread::spawn(move || {
            let sem = on.permit_expirable_semaphore(name).with_priority(p);
            for permit in sem.acquire_many(n, lease).unwrap() {
                permit.forget();
            }
            order.lock().unwrap().push(p);
        }));
        assert!(support::wait_until(Duration::from_secs(5), || queued(
            &mut raw, name
        ) == i + 1));
    }
    serve_one_permit_at_a_time(&mut raw, name, &order, || {
        assert!(sem.add_permits(1).is_ok())
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [4, 2, 1]);
    assert_eq!(sem.available_permits().unwrap(), 0);
    // A waiter that gives up leaves no place behind; a bad priority is refused.
    let gave_up = other
        .permit_expirable_semaphore(name)
        .with_priority(3)
        .try_acquire_for(lease, Duration::from_millis(200))
        .unwrap();
    assert!(gave_up.is_none());
    assert!(!key_exists(&mut raw, "redlatch_priority:{pr:pes}"));
    assert!(!key_exists(&mut raw, "redlatch_priority_alive:{pr:pes}"));
    assert!(c
        .permit_expirable_semaphore(name)
        .with_priority(redlatch::MAX_PRIORITY + 1)
        .try_acquire(lease)
        .unwrap_err()
        .is_invalid_argument());
}

/// The server's clock in ms.
fn server_ms(raw: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(raw).unwrap();
    secs * 1000 + micros / 1000
}

#[test]
fn a_fair_waiter_with_a_priority_joins_behind_the_first_live_waiter_and_stale_ranks_go() {
    let server = RedisServer::new();
    let c = client(&server);
    let mut raw = server.conn();
    let name = "pr:fairgate";
    let (queue, timeouts, ranks) = (
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("redlatch_priority:{{{name}}}"),
    );
    // A dead head (its deadline passed), then R, alive, then X, ranked now: R has the next
    // turn, and the waiter with a priority joins behind it, with a deadline, before X (not
    // before R, to be popped with the dead head as a waiter without a deadline).
    let now = server_ms(&mut raw);
    let _: () = redis::pipe()
        .rpush(&queue, &["dead:1", "r:1", "x:1"])
        .zadd(&timeouts, "dead:1", now - 1_000)
        .zadd(&timeouts, "r:1", now + 60_000)
        .zadd(&timeouts, "x:1", now + 60_500)
        .zadd(&ranks, "x:1", now)
        .query(&mut raw)
        .unwrap();
    let waiter = {
        let lock = c.fair_lock(name).with_priority(5);
        std::thread::spawn(move || lock.try_lock_for(Duration::from_secs(1)).unwrap().is_none())
    };
    assert!(support::wait_until(Duration::from_secs(5), || {
        let q: Vec<String> = raw.lrange(&queue, 0, -1).unwrap();
        q.len() == 3 && q[0] == "r:1"
    }));
    let placed: Vec<String> = raw.lrange(&queue, 0, -1).unwrap();
    assert!(
        placed[1].starts_with(c.id()) && placed[2] == "x:1",
        "{placed:?}"
    );
    let deadline: Option<f64> = raw.zscore(&timeouts, &placed[1]).unwrap();
    assert!(deadline.is_some());
    assert!(waiter.join().unwrap());
    let _: () = raw.lrem(&queue, 0, "x:1").unwrap();
    // Ranks: A (valid) ahead of J, whose rank is older than A's, so J left and came back
    // unseen: it is ranked anew, and the ranks of waiters gone go.
    let now = server_ms(&mut raw);
    let _: () = redis::pipe()
        .del(&queue)
        .rpush(&queue, &["r:1", "a:1", "j:1"])
        .zadd(&timeouts, "a:1", now + 61_000)
        .zadd(&timeouts, "j:1", now + 62_000)
        .zadd(&ranks, "a:1", now - 100)
        .zadd(&ranks, "j:1", now - 5_000)
        .zadd(&ranks, "gone:1", now - 9_000)
        .query(&mut raw)
        .unwrap();
    let joined = server_ms(&mut raw);
    let waiter = {
        let lock = c.fair_lock(name).with_priority(0);
        std::thread::spawn(move || lock.try_lock_for(Duration::from_secs(1)).unwrap().is_none())
    };
    assert!(support::wait_until(Duration::from_secs(5), || raw
        .llen::<_, usize>(&queue)
        .unwrap()
        == 4));
    let j: f64 = raw.zscore(&ranks, "j:1").unwrap();
    assert!(j >= joined as f64, "j ranked anew: {j} < {joined}");
    let gone: Option<f64> = raw.zscore(&ranks, "gone:1").unwrap();
    assert!(gone.is_none());
    assert!(waiter.join().unwrap());
}
