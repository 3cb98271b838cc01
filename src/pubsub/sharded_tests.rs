//! The cluster dispatcher driven through its waiters: over nodes driven by hand, a waiter
//! follows its channel when it moves, backs off, shares a slot-map refresh and keeps trying
//! to be located, and idle node connections close; over real servers, SPUBLISH and PUBLISH
//! wake it, and it moves when its node dies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::Mutex;
use redis::{ConnectionInfo, IntoConnectionInfo, Value};

use super::sharded::{Locator, ModeOf, NodeFactory, Sharded, IDLE_CLOSE, SWEEP_EVERY};
use super::sharded_waiter::ShardedWaiter;
use super::testing::{moved_error, push, reply, wired, Peer};
use super::vocabulary::{Alarms, Interest, Mode, Wake, Wakeup};
use crate::error::Error;
use crate::net::Dial;
use crate::testing::{Server, PATIENCE};

fn node_info(port: u16) -> ConnectionInfo {
    format!("redis://127.0.0.1:{port}/")
        .into_connection_info()
        .unwrap()
}

/// A dispatcher over hand-driven nodes; each node's address and write side's far end
/// arrive on the receiver as the node is opened.
fn hand_driven(locate: Locator) -> (Arc<Sharded>, Receiver<(String, Peer)>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let start: NodeFactory = Box::new(move |info| {
        let (pubsub, peer) = wired(Mode::Sharded);
        tx.send((info.addr().to_string(), peer)).unwrap();
        pubsub
    });
    (Arc::new(Sharded::with_nodes(locate, start)), rx)
}

#[test]
fn moved_waiter_follows_its_channel_and_returns_once_subscribed_on_the_new_node() {
    let (a, b) = (node_info(7001), node_info(7002));
    // A stale map names A; a refreshed one names B.
    let locate: Locator = Box::new(move |_, refresh| Ok(if refresh { &b } else { &a }.clone()));
    let (dispatcher, opened) = hand_driven(locate);
    let nodes = &dispatcher;
    let mut w = dispatcher.register_lock("c");
    let (addr_a, mut peer_a) = opened.recv_timeout(PATIENCE).unwrap();
    assert_eq!(peer_a.command(), ["SSUBSCRIBE", "c"]);
    let node_a = nodes.node_for_test(&addr_a);
    node_a.route(reply("ssubscribe", "c", 1));
    assert!(w.wait_until(Instant::now() + PATIENCE), "confirmed");
    w.attempted();

    node_a.route(reply("sunsubscribe", "c", 0)); // the slot migrated to B
    let deadline = Instant::now() + PATIENCE;
    let node_b = std::thread::scope(|s| {
        let waiting = s.spawn(|| (w.wait_until(deadline), Instant::now()));
        let (addr_b, mut peer_b) = opened.recv_timeout(PATIENCE).unwrap();
        assert_eq!(peer_b.command(), ["SSUBSCRIBE", "c"]);
        let node_b = nodes.node_for_test(&addr_b);
        assert!(!waiting.is_finished(), "not before the new confirmation");
        node_b.route(reply("ssubscribe", "c", 1));
        let (woken, at) = waiting.join().unwrap();
        assert!(woken && at < deadline, "woken by the confirmation");
        node_b
    });
    assert!(
        node_a.is_idle(),
        "left A, without unsubscribing what A dropped"
    );
    w.attempted();
    node_b.route(push("smessage", "c", "0"));
    assert!(w.wait_until(Instant::now()), "B's messages wake it");
    w.attempted();
    w.succeeded();
    drop(w);
    drop(dispatcher);
    assert!(peer_a.rest().is_empty(), "nothing more written to A");
}

/// A locator that always names `port` and records the `refresh` of each call.
fn recording(port: u16) -> (Locator, Arc<Mutex<Vec<bool>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&calls);
    let locate: Locator = Box::new(move |_, refresh| {
        recorded.lock().push(refresh);
        Ok(node_info(port))
    });
    (locate, calls)
}

#[test]
fn waiter_named_a_node_that_keeps_refusing_retries_with_back_off_not_spinning() {
    let (locate, calls) = recording(7001);
    let (dispatcher, opened) = hand_driven(locate);
    let mut w = dispatcher.register_lock("c");
    let (addr, mut peer) = opened.recv_timeout(PATIENCE).unwrap();
    let node = dispatcher.node_for_test(&addr);
    // The node refuses every SSUBSCRIBE (its map disagrees with the locator's), until
    // its connection closes.
    let refusing = std::thread::spawn(move || {
        let mut commands = Vec::new();
        while let Some(command) = peer.next_command() {
            if command[0] == "SSUBSCRIBE" {
                node.route(moved_error());
            }
            commands.push(command);
        }
        commands
    });
    let started = Instant::now();
    let deadline = started + Duration::from_secs(1);
    assert!(w.wait_until(deadline), "a move is a reason to re-check");
    assert!(
        Instant::now() >= deadline,
        "never confirmed: the deadline ends it"
    );
    drop(w);
    drop(dispatcher);
    let commands = refusing.join().unwrap();
    let subscribes = commands.iter().filter(|c| c[0] == "SSUBSCRIBE").count();
    // Registration, then relocations at once and 50, 100, 200 and 400 ms after the
    // previous one: at most five within the second, each one locator call and one
    // SSUBSCRIBE.
    assert!((2..=6).contains(&subscribes), "{commands:?}");
    assert_eq!(calls.lock().len(), subscribes);
    assert!(calls.lock()[1..].iter().all(|refresh| *refresh));
}

#[test]
fn waiters_told_of_one_move_share_one_slot_map_refresh() {
    let (locate, calls) = recording(7001);
    let (dispatcher, opened) = hand_driven(locate);
    let mut w1 = dispatcher.register_lock("c");
    let mut w2 = dispatcher.register_lock("c");
    let (addr, mut peer) = opened.recv_timeout(PATIENCE).unwrap();
    assert_eq!(peer.command(), ["SSUBSCRIBE", "c"]);
    dispatcher.node_for_test(&addr).route(moved_error());
    assert!(w1.wait_until(Instant::now()));
    assert!(w2.wait_until(Instant::now()));
    assert_eq!(*calls.lock(), [false, false, true, false]);
    assert_eq!(peer.command(), ["SSUBSCRIBE", "c"], "once for both");
}

#[test]
fn waiter_that_cannot_be_located_keeps_trying_until_it_is() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let a = node_info(7001);
    let locate: Locator = Box::new(move |_, _| match counted.fetch_add(1, Ordering::SeqCst) {
        0 | 1 => Err(Error::invalid("no slot map yet")),
        _ => Ok(a.clone()),
    });
    let (dispatcher, opened) = hand_driven(locate);
    let mut w = dispatcher.register_lock("c"); // fails
    assert!(!w.wait_until(Instant::now()), "nowhere to listen"); // fails again
    w.attempted();
    w.nudge();
    w.observed(3);
    assert!(opened.try_recv().is_err(), "no node yet");
    let deadline = Instant::now() + PATIENCE;
    std::thread::scope(|s| {
        let waiting = s.spawn(|| w.wait_until(deadline));
        // Located after the back-off, without waiting for the deadline.
        let (addr, mut peer) = opened.recv_timeout(PATIENCE).unwrap();
        assert_eq!(peer.command(), ["SSUBSCRIBE", "c"]);
        dispatcher
            .node_for_test(&addr)
            .route(reply("ssubscribe", "c", 1));
        assert!(waiting.join().unwrap(), "confirmed");
    });
    assert!(Instant::now() < deadline);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// Nudges `alarms`' thread (a lock passed to it in-process) 50 ms from now, and blocks `w`
/// until a deadline far off: the nudge must end the block, whatever the registration's state.
fn nudged_while_blocked(w: &mut ShardedWaiter) -> (Wakeup, Duration) {
    let alarms = Alarms::none();
    let interruption = Arc::clone(&alarms.interruption);
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            interruption.nudge();
        });
        let got = w.block_until(started + PATIENCE, &alarms);
        (got, started.elapsed())
    })
}

#[test]
fn a_nudge_ends_the_block_of_a_waiter_that_cannot_be_located() {
    let locate: Locator = Box::new(|_, _| Err(Error::invalid("no slot map")));
    let (dispatcher, _opened) = hand_driven(locate);
    let mut w = dispatcher.register_lock("c");
    let (got, after) = nudged_while_blocked(&mut w);
    assert_eq!(got, Wakeup::Nudged);
    assert!(after < PATIENCE / 2, "{after:?}");
}

#[test]
fn a_nudge_does_not_end_the_block_of_an_observer_that_cannot_be_located() {
    let locate: Locator = Box::new(|_, _| Err(Error::invalid("no slot map")));
    let (dispatcher, _opened) = hand_driven(locate);
    let (heard, _) = crossbeam_channel::unbounded();
    let interest = Interest {
        wake: Wake::All,
        need: 1,
        heard: Some(crate::pubsub::vocabulary::Ear::Feed(heard)),
        every: false,
    };
    let mut observer = dispatcher.register_with("c", interest);
    let alarms = Alarms::none();
    alarms.interruption.nudge();
    let deadline = Instant::now() + Duration::from_millis(300);
    // It waits for its subscription, not for a lock: not confirmed, so not woken.
    assert_eq!(observer.block_until(deadline, &alarms), Wakeup::Deadline);
    assert!(Instant::now() >= deadline);
}

#[test]
fn a_nudge_ends_the_block_of_a_waiter_whose_node_refuses_its_channel() {
    let (locate, _) = recording(7001);
    let (dispatcher, opened) = hand_driven(locate);
    let mut w = dispatcher.register_lock("c");
    let (addr, mut peer) = opened.recv_timeout(PATIENCE).unwrap();
    let node = dispatcher.node_for_test(&addr);
    let refusing = std::thread::spawn(move || {
        while let Some(command) = peer.next_command() {
            if command[0] == "SSUBSCRIBE" {
                node.route(moved_error());
            }
        }
    });
    let (got, after) = nudged_while_blocked(&mut w);
    assert_eq!(got, Wakeup::Nudged);
    assert!(after < PATIENCE / 2, "{after:?}");
    drop(w);
    drop(dispatcher);
    refusing.join().unwrap();
}

#[test]
fn idle_node_connections_are_closed_and_reopened_on_demand() {
    let locate: Locator =
        Box::new(|channel, _| Ok(node_info(if channel == "a" { 7001 } else { 7002 })));
    let (dispatcher, opened) = hand_driven(locate);
    let nodes = &dispatcher;
    drop(dispatcher.register_lock("a"));
    let (addr_a, mut peer_a) = opened.recv_timeout(PATIENCE).unwrap();
    assert_eq!(peer_a.command(), ["SSUBSCRIBE", "a"]);
    assert_eq!(peer_a.command(), ["SUNSUBSCRIBE", "a"]);
    let node_a = nodes.node_for_test(&addr_a);
    node_a.route(reply("ssubscribe", "a", 1));
    node_a.route(reply("sunsubscribe", "a", 0));
    assert!(node_a.is_idle());
    {
        // As if the last sweep found A idle long ago.
        let mut map = nodes.nodes.lock();
        let long_ago = Instant::now() - IDLE_CLOSE - SWEEP_EVERY;
        map.last_sweep = long_ago;
        map.by_addr.get_mut(&addr_a).unwrap().idle_since = Some(long_ago);
    }
    let b = dispatcher.register_lock("b");
    let (addr_b, _peer_b) = opened.recv_timeout(PATIENCE).unwrap();
    assert_ne!(addr_a, addr_b);
    assert!(
        node_a
            .register("a", &Interest::waiter(Wake::Lock, 1))
            .is_none(),
        "A is closed"
    );
    assert!(peer_a.rest().is_empty(), "and its socket with it");
    let _a = dispatcher.register_lock("a");
    let (reopened, _) = opened.recv_timeout(PATIENCE).unwrap();
    assert_eq!(reopened, addr_a);
    drop(b);
}

#[test]
fn sharded_dispatcher_over_a_real_server_wakes_a_waiter_on_spublish() {
    let Some(server) = Server::start_sharded() else {
        return;
    };
    let info = server.info();
    let locate: Locator = Box::new(move |_, _| Ok(info.clone()));
    let mode: ModeOf = Box::new(|| Mode::Sharded);
    let dispatcher = Arc::new(Sharded::new(locate, mode, Dial::plain(PATIENCE)));
    let channel = "redisson_lock__channel:{dispatched}";
    let mut w = dispatcher.register_lock(channel);
    let deadline = Instant::now() + PATIENCE;
    assert!(w.wait_until(deadline), "subscription confirmed");
    w.attempted();
    publish_wakes(&server, "SPUBLISH", channel, &mut w, deadline);
}

/// Publishes an unlock on `channel` with `command` (`PUBLISH` or `SPUBLISH`), heard by one
/// subscriber, and checks that it wakes `w` before `deadline`.
fn publish_wakes(
    server: &Server,
    command: &str,
    channel: &str,
    w: &mut ShardedWaiter,
    deadline: Instant,
) {
    let receivers: i64 = redis::cmd(command)
        .arg(channel)
        .arg("0")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(receivers, 1);
    assert!(
        w.wait_until(deadline) && Instant::now() < deadline,
        "the unlock"
    );
    w.attempted();
    w.succeeded();
}

#[test]
fn plain_dispatcher_over_real_servers_wakes_on_publish_and_moves_when_its_node_dies() {
    // A cluster without sharded pub/sub (or set not to use it): node connections speak
    // SUBSCRIBE, and when a node dies its waiters ask the locator again.
    let first = Server::start();
    let second = Server::start();
    let at = Arc::new(Mutex::new(first.info()));
    let node = Arc::clone(&at);
    let locate: Locator = Box::new(move |_, _| Ok(node.lock().clone()));
    let mode: ModeOf = Box::new(|| Mode::Plain);
    let dispatcher = Arc::new(Sharded::new(locate, mode, Dial::plain(PATIENCE)));
    let channel = "redisson_lock__channel:{plain}";
    let numsub = |server: &Server| -> Value {
        redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut server.conn())
            .unwrap()
    };
    let subscribed = Value::Array(vec![
        Value::BulkString(channel.as_bytes().to_vec()),
        Value::Int(1),
    ]);
    let mut w = dispatcher.register_lock(channel);
    let deadline = Instant::now() + PATIENCE;
    assert!(w.wait_until(deadline), "subscription confirmed");
    w.attempted();
    assert_eq!(numsub(&first), subscribed, "SUBSCRIBEd, not SSUBSCRIBEd");
    *at.lock() = second.info();
    drop(first);
    // Woken by the loss (perhaps first by a wake-up left from the subscription), it
    // asks the locator again and subscribes on the node named now.
    while numsub(&second) != subscribed {
        assert!(w.wait_until(deadline), "woken by the dead node");
        w.attempted();
    }
    publish_wakes(&second, "PUBLISH", channel, &mut w, deadline);
}
