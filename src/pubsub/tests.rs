//! The connection, registry and node waiter against a scripted server.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver};
use redis::Value;

use super::connection::PubSub;
use super::node_waiter::NodeWaiter;
use super::registry::{wake_all, wake_one, wake_permits, Chan, Entry, Moved};
use super::testing::accept_set_up;
use super::vocabulary::{Alarms, Mode, Wake, Wakeup};
use crate::interrupt::Interrupter;
use crate::net::Dial;
use crate::testing::{Server, PATIENCE};

fn chan_with(n: usize) -> (Chan, Vec<Receiver<()>>) {
    let mut chan = Chan::default();
    let mut rxs = Vec::new();
    for id in 0..n {
        let (tx, rx) = bounded(1);
        chan.waiters.push_back(Entry {
            id: id as u64,
            tx,
            need: 1,
            heard: None,
            every: false,
            moved: Moved::default(),
        });
        rxs.push(rx);
    }
    (chan, rxs)
}

#[test]
fn wake_one_skips_waiters_already_woken() {
    let (chan, rxs) = chan_with(3);
    wake_one(&chan);
    wake_one(&chan);
    assert!(rxs[0].try_recv().is_ok());
    assert!(rxs[1].try_recv().is_ok());
    assert!(rxs[2].try_recv().is_err());
}

#[test]
fn wake_one_passes_over_waiters_that_hear_every_message() {
    let (mut chan, rxs) = chan_with(2);
    chan.waiters[0].every = true;
    wake_one(&chan);
    assert!(
        rxs[0].try_recv().is_err(),
        "an every-message waiter took the one wake-up"
    );
    assert!(rxs[1].try_recv().is_ok());
}

/// A pub/sub handle whose connection never comes up: the registry works without one.
fn offline() -> PubSub {
    let info = redis::IntoConnectionInfo::into_connection_info("redis://127.0.0.1:1/").unwrap();
    let target = Arc::new(info);
    let timeout = Duration::from_millis(50);
    PubSub::start(target, Dial::plain(timeout), Mode::Plain).unwrap()
}

fn message(channel: &str, payload: &str) -> Value {
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    Value::Array(vec![bulk("message"), bulk(channel), bulk(payload)])
}

#[test]
fn an_interrupted_or_closed_waiter_hands_its_wake_up_on() {
    // The unlock's wake-up sits in the first waiter's slot as its thread is interrupted
    // (or its client closed): the wait returns at once, and the wake-up goes to the next.
    let ps = offline();
    for alarm in [Wakeup::Interrupt, Wakeup::Closed] {
        let mut a = ps.register("c");
        let b = ps.register("c");
        ps.shared.route(message("c", "0"));
        assert!(b.rx.try_recv().is_err(), "wake one: the first waiter only");
        let alarms = Alarms::none();
        match alarm {
            Wakeup::Interrupt => Interrupter(Arc::clone(&alarms.interruption)).interrupt(),
            _ => alarms.closed.store(true, Ordering::SeqCst),
        }
        let started = Instant::now();
        let got = a.wait_until(started + Duration::from_secs(5), &alarms);
        assert_eq!(got, alarm);
        assert!(started.elapsed() < Duration::from_millis(100));
        drop(a);
        assert!(b.rx.try_recv().is_ok(), "{alarm:?}: handed on");
        drop(b);
    }
    assert!(ps.shared.registry.lock().channels.is_empty());
}

#[test]
fn a_wake_up_and_an_overheard_message_are_told_apart() {
    // The second of a fair queue also hears the head's channel, in a slot of its own: a
    // release to it that comes before it read what it overheard is not hidden by it.
    let ps = offline();
    let mut a = ps.register("c");
    let (ear_tx, ear_rx) = crossbeam_channel::bounded(1);
    let mut alarms = Alarms::none();
    alarms.ear = Some(ear_rx);
    ear_tx.try_send(()).unwrap();
    ps.shared.route(message("c", "0"));
    let soon = Instant::now() + Duration::from_secs(5);
    assert_eq!(a.wait_until(soon, &alarms), Wakeup::Woken, "its own first");
    assert_eq!(a.wait_until(soon, &alarms), Wakeup::Overheard);
    let now = Instant::now();
    assert_eq!(a.wait_until(now, &alarms), Wakeup::Deadline);
}

#[test]
fn an_interrupt_wakes_a_blocked_waiter_through_its_slot() {
    let ps = offline();
    let mut a = ps.register("c");
    let alarms = Alarms::none();
    let interrupter = Interrupter(Arc::clone(&alarms.interruption));
    std::thread::scope(|s| {
        let blocked = s.spawn(|| {
            let got = a.wait_until(Instant::now() + Duration::from_secs(10), &alarms);
            (got, Instant::now())
        });
        // Whenever it lands (before the slot is armed, or while blocked), it is seen.
        std::thread::sleep(Duration::from_millis(20));
        let asked = Instant::now();
        interrupter.interrupt();
        let (got, at) = blocked.join().unwrap();
        assert_eq!(got, Wakeup::Interrupt);
        assert!(at.duration_since(asked) < Duration::from_millis(100));
    });
    assert!(
        alarms.interruption.take(),
        "the wait leaves the interrupt to be taken"
    );
}

#[test]
fn leaving_waiter_hands_an_unused_wake_up_on() {
    // Regression: a waiter timing out while the unlock's wake-up was routed to it used to
    // take that wake-up away, and the next waiter slept a whole lease.
    let ps = offline();
    let a = ps.register("c");
    let b = ps.register("c");
    ps.shared.route(message("c", "0"));
    assert!(b.rx.try_recv().is_err(), "wake one: the first waiter only");
    drop(a); // still in its slot
    assert!(b.rx.try_recv().is_ok(), "handed on");
    drop(b);

    let mut a = ps.register("c");
    let b = ps.register("c");
    ps.shared.route(message("c", "0"));
    assert!(a.wait_until(Instant::now(), &Alarms::none()) == Wakeup::Woken);
    drop(a); // taken, but no attempt completed (the attempt failed with an error)
    assert!(b.rx.try_recv().is_ok(), "handed on after a failed attempt");
    drop(b);
}

#[test]
fn waiters_leaving_from_the_front_or_the_middle_keep_the_others_in_order() {
    // Unregistering removes just the one entry: the others keep their registration
    // order, in which unlocks wake them.
    let ps = offline();
    let mut waiters: Vec<NodeWaiter> = (0..5).map(|_| ps.register("c")).collect();
    for w in &mut waiters {
        w.succeeded(); // leaves without handing anything on
    }
    drop(waiters.remove(2));
    drop(waiters.remove(0));
    // Each unlock wakes the first waiter not woken yet (tokens stay in their slots).
    for unlocks in 1..=waiters.len() {
        ps.shared.route(message("c", "0"));
        let woken: Vec<bool> = waiters.iter().map(|w| w.rx.is_full()).collect();
        let want: Vec<bool> = (0..waiters.len()).map(|i| i < unlocks).collect();
        assert_eq!(woken, want, "after {unlocks} unlocks");
    }
    drop(waiters);
    assert!(ps.shared.registry.lock().channels.is_empty());
}

#[test]
fn waiter_that_used_its_wake_up_hands_nothing_on() {
    let ps = offline();
    let mut a = ps.register("c");
    let b = ps.register("c");
    ps.shared.route(message("c", "0"));
    assert!(a.wait_until(Instant::now(), &Alarms::none()) == Wakeup::Woken);
    a.attempted(); // re-checked and lost the race: the wake-up was used
    drop(a);
    assert!(b.rx.try_recv().is_err());
    let mut c = ps.register("c");
    ps.shared.route(message("c", "0"));
    c.succeeded();
    drop(b);
    ps.shared.route(message("c", "0"));
    drop(c);
    assert!(
        ps.shared.registry.lock().channels.is_empty(),
        "nothing left behind"
    );
}

#[test]
fn wake_permits_serves_needs_in_order_counting_pending_wake_ups() {
    let (mut chan, rxs) = chan_with(4);
    chan.wake = Wake::Permits;
    for (w, need) in chan.waiters.iter_mut().zip([3, 1, 2, 1]) {
        w.need = need;
    }
    // 2 permits: the first (needs 3) is passed over, the second (1) fits, the third (2)
    // no longer does, the fourth (1) takes the last one.
    wake_permits(&chan, 2, None);
    let woken = |rxs: &[Receiver<()>]| -> Vec<bool> {
        rxs.iter().map(|rx| rx.try_recv().is_ok()).collect()
    };
    assert_eq!(woken(&rxs), [false, true, false, true]);
    // A pending wake-up counts: with the second still woken, 1 permit wakes nobody else.
    chan.waiters[1].tx.try_send(()).unwrap();
    wake_permits(&chan, 1, None);
    assert_eq!(woken(&rxs), [false, true, false, false]);
    // The reporting waiter is skipped.
    wake_permits(&chan, 3, Some(0));
    assert_eq!(woken(&rxs), [false, true, true, false]);
    wake_permits(&chan, 0, None);
    assert_eq!(woken(&rxs), [false; 4]);
}

#[test]
fn semaphore_waiter_that_fails_passes_the_permits_it_saw_to_smaller_needs() {
    // Regression guard: a big waiter with a pending wake-up absorbed a release message
    // meant for a small one, failed its attempt, and the small one slept forever.
    let ps = offline();
    let mut big = ps.register_with("s", Wake::Permits, 3).unwrap();
    let small = ps.register_with("s", Wake::Permits, 1).unwrap();
    big.tx_for_test().try_send(()).unwrap(); // e.g. the subscription confirmation
    ps.shared.route(message("s", "1"));
    assert!(small.rx.try_recv().is_err(), "the pending wake-up counted");
    assert!(big.wait_until(Instant::now(), &Alarms::none()) == Wakeup::Woken);
    big.attempted(); // failed: needs 3, saw 1
    big.observed(1);
    assert!(small.rx.try_recv().is_ok(), "the 1 permit it saw went on");
    drop(small);
    drop(big);
}

#[test]
fn semaphore_waiter_that_succeeded_hands_on_a_later_wake_up() {
    // A release announced while the winner's attempt ran may not have been seen by it.
    let ps = offline();
    let mut a = ps.register_with("s", Wake::Permits, 1).unwrap();
    let b = ps.register_with("s", Wake::Permits, 1).unwrap();
    ps.shared.route(message("s", "1"));
    assert!(a.wait_until(Instant::now(), &Alarms::none()) == Wakeup::Woken);
    ps.shared.route(message("s", "1")); // a's slot is empty again: a is told once more
    assert!(b.rx.try_recv().is_err());
    a.attempted();
    a.observed(0);
    a.succeeded();
    drop(a);
    assert!(b.rx.try_recv().is_ok(), "handed on");
    drop(b);
}

#[test]
fn wake_all_reaches_everyone_once() {
    let (chan, rxs) = chan_with(3);
    wake_all(&chan);
    wake_all(&chan);
    for rx in &rxs {
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err());
    }
}

use super::testing::{moved_error, push, reply, wired};

/// True if the waiter has a wake-up in its slot (which this takes).
fn woken(w: &NodeWaiter) -> bool {
    w.rx.try_recv().is_ok()
}

#[test]
fn sharded_mode_subscribes_with_ssubscribe_and_routes_smessage() {
    let (ps, mut peer) = wired(Mode::Sharded);
    let w = ps.register("c");
    assert_eq!(peer.command(), ["SSUBSCRIBE", "c"]);
    assert!(!woken(&w), "not before the confirmation");
    ps.shared.route(reply("ssubscribe", "c", 1));
    assert!(woken(&w), "confirmed");
    ps.shared.route(push("smessage", "c", "0"));
    assert!(woken(&w), "the unlock");
    assert!(!w.moved());
    drop(w);
    assert_eq!(peer.command(), ["SUNSUBSCRIBE", "c"]);
    ps.shared.route(reply("sunsubscribe", "c", 0));
    let reg = ps.shared.registry.lock();
    assert!(reg.channels.is_empty() && reg.wire.inflight.is_empty());
}

#[test]
fn sharded_error_reply_goes_to_the_channel_of_the_oldest_unanswered_command() {
    let (ps, mut peer) = wired(Mode::Sharded);
    let a = ps.register("a");
    let b = ps.register("b");
    assert_eq!(peer.command(), ["SSUBSCRIBE", "a"]);
    assert_eq!(peer.command(), ["SSUBSCRIBE", "b"]);
    ps.shared.route(reply("ssubscribe", "a", 1));
    ps.shared.route(moved_error()); // answers SSUBSCRIBE b
    assert!(woken(&a) && !a.moved(), "a is confirmed");
    assert!(woken(&b) && b.moved(), "b is told to look elsewhere");
    {
        let reg = ps.shared.registry.lock();
        assert!(reg.wire.inflight.is_empty());
        let chan = &reg.channels["b"];
        assert!(chan.pending == 0 && !chan.sub_sent && !chan.subscribed);
    }
    drop(b); // nothing subscribed: nothing to unsubscribe
    assert!(!ps.shared.registry.lock().channels.contains_key("b"));
    drop(a);
    assert_eq!(peer.command(), ["SUNSUBSCRIBE", "a"]);
}

#[test]
fn unsolicited_sunsubscribe_marks_the_channel_moved_and_wakes_all_its_waiters() {
    let (ps, _peer) = wired(Mode::Sharded);
    let mut a1 = ps.register("a");
    let mut a2 = ps.register("a");
    let other = ps.register("z");
    ps.shared.route(reply("ssubscribe", "a", 1));
    ps.shared.route(reply("ssubscribe", "z", 2));
    for w in [&mut a1, &mut a2] {
        assert!(w.wait_until(Instant::now(), &Alarms::none()) == Wakeup::Woken);
        w.attempted();
    }
    assert!(woken(&other));
    // The slot of `a` migrated: the node unsubscribes us without being asked.
    ps.shared.route(reply("sunsubscribe", "a", 1));
    for w in [&a1, &a2] {
        assert!(w.moved() && woken(w));
    }
    assert!(
        !other.moved() && !woken(&other),
        "other channels are untouched"
    );
    let reg = ps.shared.registry.lock();
    let chan = &reg.channels["a"];
    assert!(!chan.sub_sent && !chan.subscribed);
    assert_eq!(reg.wire.inflight.len(), 0, "nothing was popped or added");
}

#[test]
fn solicited_sunsubscribe_moves_nothing() {
    let (ps, mut peer) = wired(Mode::Sharded);
    let first = ps.register("a");
    ps.shared.route(reply("ssubscribe", "a", 1));
    drop(first);
    let second = ps.register("a");
    assert_eq!(peer.command(), ["SSUBSCRIBE", "a"]);
    assert_eq!(peer.command(), ["SUNSUBSCRIBE", "a"]);
    assert_eq!(peer.command(), ["SSUBSCRIBE", "a"]);
    ps.shared.route(reply("sunsubscribe", "a", 0)); // answers our SUNSUBSCRIBE
    assert!(!second.moved() && !woken(&second));
    ps.shared.route(reply("ssubscribe", "a", 1));
    assert!(!second.moved() && woken(&second), "confirmed");
    assert!(ps.shared.registry.lock().wire.inflight.is_empty());
}

#[test]
fn sharded_unsolicited_sunsubscribe_defers_to_a_pending_ssubscribe() {
    let (ps, _peer) = wired(Mode::Sharded);
    let w = ps.register("a"); // SSUBSCRIBE a, unanswered
    ps.shared.route(reply("sunsubscribe", "a", 0)); // an older subscription dropped
    assert!(!w.moved() && !woken(&w));
    ps.shared.route(moved_error()); // the node did not take the new one either
    assert!(w.moved() && woken(&w));
}

#[test]
fn sharded_reply_out_of_order_resyncs_the_connection() {
    let (ps, _peer) = wired(Mode::Sharded);
    let w = ps.register("a");
    ps.shared.route(reply("ssubscribe", "b", 1));
    assert!(ps.shared.registry.lock().wire.writer.is_none(), "closed");
    assert!(!woken(&w), "the reader's reconnect wakes it");
}

#[test]
fn sharded_lost_connection_marks_every_channel_moved() {
    let (ps, _peer) = wired(Mode::Sharded);
    let w = ps.register("a");
    ps.shared.route(reply("ssubscribe", "a", 1));
    assert!(woken(&w));
    assert!(!ps.shared.disconnected());
    assert!(w.moved() && woken(&w));
    assert!(!ps.shared.connect_failed());
    assert!(!woken(&w), "told once");
}

#[test]
fn plain_mode_is_not_affected_by_error_replies_or_lost_connections() {
    let (ps, mut peer) = wired(Mode::Plain);
    let w = ps.register("a");
    assert_eq!(peer.command(), ["SUBSCRIBE", "a"]);
    ps.shared.route(moved_error());
    assert!(!w.moved() && !woken(&w));
    ps.shared.route(reply("subscribe", "a", 1));
    assert!(woken(&w));
    assert!(ps.shared.registry.lock().wire.inflight.is_empty());
    assert!(!ps.shared.disconnected());
    assert!(!w.moved() && woken(&w));
}

#[test]
fn sharded_connection_to_a_real_server_wakes_a_waiter_on_spublish() {
    let Some(server) = Server::start_sharded() else {
        return;
    };
    let target = Arc::new(server.info());
    let pubsub = PubSub::start(target, Dial::plain(PATIENCE), Mode::Sharded).unwrap();
    let channel = "redisson_lock__channel:{sharded}";
    let mut w = pubsub.register_with(channel, Wake::Lock, 1).unwrap();
    let deadline = Instant::now() + PATIENCE;
    assert!(
        (w.wait_until(deadline, &Alarms::none()) == Wakeup::Woken),
        "subscription confirmed"
    );
    w.attempted();
    let mut conn = server.conn();
    let plain: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg("0")
        .query(&mut conn)
        .unwrap();
    assert_eq!(plain, 0, "a sharded subscriber does not hear PUBLISH");
    let receivers: i64 = redis::cmd("SPUBLISH")
        .arg(channel)
        .arg("0")
        .query(&mut conn)
        .unwrap();
    assert_eq!(receivers, 1);
    assert!(
        (w.wait_until(deadline, &Alarms::none()) == Wakeup::Woken) && Instant::now() < deadline,
        "the unlock"
    );
    w.attempted();
    w.succeeded();
}

/// A pub/sub connection to `listener`, which the test plays as the server; what the
/// connection reports of its (re)connects (`first` or not) comes out of the receiver.
fn reporting(listener: &std::net::TcpListener, placed: bool) -> (PubSub, Receiver<bool>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut dial = Dial::plain(PATIENCE);
    dial.reconnected = Some(Arc::new(move |first| {
        let _ = tx.send(first);
    }));
    let address = format!("redis://{}/", listener.local_addr().unwrap());
    let target = Arc::new(redis::IntoConnectionInfo::into_connection_info(address).unwrap());
    let shared = super::connection::Shared::new(target, dial, Mode::Plain, placed);
    (PubSub::spawn(shared).unwrap(), rx)
}

#[test]
fn the_first_connection_is_reported_as_such_and_every_reconnect_after_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (_pubsub, reports) = reporting(&listener, false);
    let first = accept_set_up(&listener);
    assert_eq!(
        reports.recv_timeout(PATIENCE),
        Ok(true),
        "the first connection"
    );
    drop(first);
    let _second = accept_set_up(&listener);
    assert_eq!(reports.recv_timeout(PATIENCE), Ok(false), "a reconnect");
    assert!(reports.try_recv().is_err(), "once each");
}

/// The server down at the first try (a client's thread that started late, while the server
/// restarted): the connection made next is a reconnect, which has the client's holds checked.
#[test]
fn a_failed_first_try_makes_the_next_connection_a_reconnect() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (_pubsub, reports) = reporting(&listener, false);
    // Closed before the setup's replies: the first try fails.
    drop(listener.accept().unwrap());
    let _up = accept_set_up(&listener);
    assert_eq!(reports.recv_timeout(PATIENCE), Ok(false), "a reconnect");
    assert!(reports.try_recv().is_err(), "not also a first connection");
}

/// A cluster node's connection comes and goes with its waiters: its first connection says
/// nothing about the client's holds, its reconnects do.
#[test]
fn a_node_connection_reports_only_its_reconnects() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (_pubsub, reports) = reporting(&listener, true);
    let first = accept_set_up(&listener);
    drop(first);
    let _second = accept_set_up(&listener);
    assert_eq!(
        reports.recv_timeout(PATIENCE),
        Ok(false),
        "the reconnect, first"
    );
    assert!(reports.try_recv().is_err());
}
