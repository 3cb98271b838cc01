//! The cluster dispatcher: one connection per node that got waiters, each waiter on the node
//! that owns its channel's hash slot, and waiters that follow their channel when its slot
//! moves or its node fails.
//!
//! On a cluster with sharded pub/sub, unlock messages are SPUBLISHed, and reach only the
//! SSUBSCRIBErs of the node that owns the channel's hash slot. So a waiter's channel is
//! subscribed on that node: the [`Locator`] (over the cluster router's slot map) names it, and
//! the node's [`PubSub`], in [`Mode::Sharded`], is opened on the first registration there.
//! Where the cluster has no sharded pub/sub (Redis before 7.0), or the client is set not to
//! use it, messages are PUBLISHed, which every node hears; the node connections are then in
//! [`Mode::Plain`], placed the same way (as Redisson places them), and a waiter still moves
//! when its node's connection fails. The backend says which mode (a [`ModeOf`]).
//!
//! Threads: one reader thread per node connection, where the rest of the design has one
//! pub/sub thread per client. A blocking reader cannot watch several sockets at once without
//! a poll crate (which this crate does without), and a thread per node keeps each node's
//! replies in order on its own socket. Connections exist only for nodes that got waiters;
//! one that has had none for [`IDLE_CLOSE`] is closed at a later registration, so that a
//! node which failed over or left the cluster is not redialled forever.
//!
//! Moves: a node that does not (or no longer) serve a channel says so (sharded mode: an
//! unsolicited `sunsubscribe` when the slot migrates away or the node is demoted, `-MOVED` in
//! reply to SSUBSCRIBE), and a connection may fail (either mode). Each marks the channel's
//! waiters moved and wakes
//! them (see `Registry::unsubscribed_by_server`, `Registry::refused`,
//! `Shared::disconnected`, `Shared::connect_failed`). A moved waiter, inside
//! [`ShardedWaiter::wait_until`], asks the locator again (refreshing the slot map), registers
//! on the node it names, leaves the old one, and returns once the new subscription is
//! confirmed: as everywhere, it re-checks only when subscribed, so a release published on
//! the new node after its re-check wakes it. The waiters woken by one report share one
//! slot-map refresh ([`Sharded::locate_after`]). If the new registration goes bad too (the
//! map is still stale, the node is down and not yet failed over), the waiter tries again
//! after a back-off ([`FIRST_RETRY`] doubling to [`MAX_RETRY`]): it never spins, and never
//! stays for good on a node that is gone.

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use redis::ConnectionInfo;

use super::connection::{PubSub, Shared};
use super::node_waiter::NodeWaiter;
#[cfg(test)]
use super::vocabulary::Wake;
use super::vocabulary::{Alarms, Interest, Mode, Wakeup};
use crate::error::{Error, Result};
use crate::net::Dial;

/// Names the node that owns a channel's hash slot: `(channel, refresh)`, where `refresh`
/// says the caller knows the slot map is stale (a node said the channel moved, or its
/// connection failed) and asks for it to be refreshed first. Called without any lock of the
/// dispatcher held, except that refreshing calls are serialized (see
/// [`Sharded::locate_after`]).
pub(crate) type Locator = Box<dyn Fn(&str, bool) -> Result<ConnectionInfo> + Send + Sync>;

/// Says which [`Mode`] a node connection opened now speaks: the one scripts publish with.
pub(crate) type ModeOf = Box<dyn Fn() -> Mode + Send + Sync>;

/// How soon a waiter whose new registration went bad too (the locator named a node that
/// refuses the channel, or is down, or no node at all) tries again: doubling from this...
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// ... up to this, as the reader's reconnect back-off does. A waiter never relocates faster,
/// so nodes that disagree on a slot's owner cannot bounce it around at network speed; and it
/// always tries again, so a waiter with no deadline (a latch, a semaphore) is not left
/// waiting on a node that failed over for good.
const MAX_RETRY: Duration = Duration::from_secs(1);

/// How long a node connection stays open without channels before a registration closes it.
const IDLE_CLOSE: Duration = Duration::from_secs(60);

/// Registrations look for idle node connections at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How often a registration looks a node up again when the connection it found was closed
/// in between (it was idle). One retry suffices, since the next lookup opens a new one.
const REGISTER_TRIES: usize = 3;

/// The cluster dispatcher: node connections by address, opened on demand.
pub(crate) struct Sharded {
    locate: Locator,
    mode: ModeOf,
    /// Set by `close`: no connection is opened any more.
    closed: std::sync::atomic::AtomicBool,
    /// Node connections shut by `close`, kept until the dispatcher drops (after every waiter).
    shut: Mutex<Vec<PubSub>>,
    /// The stand-in slots of waiters without a registration, by id, for `close` to wake.
    orphans: Mutex<(u64, HashMap<u64, Sender<()>>)>,
    pub(super) dial: Dial,
    nodes: Mutex<Nodes>,
    /// When the last slot-map refresh was asked for; held while it runs. See
    /// [`locate_after`](Self::locate_after).
    refreshed: Mutex<Option<Instant>>,
    /// Tests: makes the node connections (driven by hand) instead of [`PubSub::start`].
    #[cfg(test)]
    start_for_test: Option<NodeFactory>,
}

/// Tests: a node connection for an address, made by the test.
#[cfg(test)]
type NodeFactory = Box<dyn Fn(&ConnectionInfo) -> PubSub + Send + Sync>;

/// The node connections, and when they were last looked at for idleness.
struct Nodes {
    by_addr: HashMap<String, Node>,
    last_sweep: Instant,
}

/// One node's connection.
struct Node {
    pubsub: PubSub,
    /// When a sweep first found it without channels; `None` while in use.
    idle_since: Option<Instant>,
}

impl Sharded {
    /// A dispatcher that opens no connection until a waiter registers. `locate` names the node
    /// owning a channel's slot, `mode` the mode of a connection opened now; the timeouts are
    /// those of the node connections.
    pub(crate) fn new(locate: Locator, mode: ModeOf, dial: Dial) -> Sharded {
        Sharded {
            locate,
            mode,
            closed: Default::default(),
            shut: Mutex::default(),
            orphans: Mutex::default(),
            dial,
            nodes: Mutex::new(Nodes {
                by_addr: HashMap::new(),
                last_sweep: Instant::now(),
            }),
            refreshed: Mutex::new(None),
            #[cfg(test)]
            start_for_test: None,
        }
    }

    /// Registers a waiter on the node that owns `channel`'s slot (see
    /// [`Dispatcher::register_with`](super::Dispatcher::register_with)). If no node can be
    /// located now, the waiter starts unregistered and its first wait locates it again.
    pub(crate) fn register_with(
        self: &Arc<Self>,
        channel: &str,
        interest: Interest,
    ) -> ShardedWaiter {
        let at = (self.locate)(channel, false)
            .and_then(|info| self.subscribe_on(&info, channel, &interest))
            .map_err(|e| {
                log::debug!("sharded pub/sub: cannot subscribe `{channel}` yet ({e}); its wait locates it again");
            })
            .ok();
        ShardedWaiter {
            sharded: Arc::clone(self),
            channel: channel.to_owned(),
            interest,
            standin: None,
            noticed: at.is_none().then(Instant::now),
            at,
            relocated_at: None,
            retry: Duration::ZERO,
        }
    }

    /// Locates `channel` on a slot map newer than `since`, when the caller learned that its
    /// registration went bad: refreshes the map, unless a refresh began after `since`. So the
    /// waiters of a failed node, all woken by one report, refresh the map once between them
    /// (the others wait for that refresh, then read the map it got).
    fn locate_after(&self, channel: &str, since: Instant) -> Result<ConnectionInfo> {
        let mut refreshed = self.refreshed.lock();
        if refreshed.is_some_and(|at| at >= since) {
            drop(refreshed);
            return (self.locate)(channel, false);
        }
        *refreshed = Some(Instant::now());
        (self.locate)(channel, true)
    }

    /// Registers a waiter on the node at `info`, opening its connection if needed.
    fn subscribe_on(
        &self,
        info: &ConnectionInfo,
        channel: &str,
        interest: &Interest,
    ) -> Result<(String, NodeWaiter)> {
        let addr = info.addr().to_string();
        for _ in 0..REGISTER_TRIES {
            let node = self.node(&addr, info)?;
            if let Some(waiter) = node.register(channel, interest) {
                return Ok((addr, waiter));
            }
            // Closed as idle between the lookup and the registration: look it up again.
        }
        Err(Error::Connection(
            std::io::Error::other(format!("pub/sub connection to {addr} keeps closing")).into(),
        ))
    }

    /// The connection to the node at `addr`, opened if there is none; closes connections that
    /// have been idle long enough on the way (without waiting for their threads).
    fn node(&self, addr: &str, info: &ConnectionInfo) -> Result<Arc<Shared>> {
        let mut retired = Vec::new();
        let found = {
            let mut nodes = self.nodes.lock();
            // Checked under the lock that `close` sets it under: no node opens after.
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            nodes.sweep(addr, &mut retired);
            match nodes.by_addr.entry(addr.to_owned()) {
                Slot::Occupied(e) => {
                    let node = e.into_mut();
                    node.idle_since = None;
                    Ok(Arc::clone(&node.pubsub.shared))
                }
                Slot::Vacant(e) => self.start_node(info).map(|pubsub| {
                    log::debug!("sharded pub/sub: opening a connection to {addr}");
                    let node = e.insert(Node {
                        pubsub,
                        idle_since: None,
                    });
                    Arc::clone(&node.pubsub.shared)
                }),
            }
        };
        for pubsub in retired {
            pubsub.detach();
        }
        found
    }

    /// Starts a connection to one node, in the mode scripts publish with now.
    fn start_node(&self, info: &ConnectionInfo) -> Result<PubSub> {
        #[cfg(test)]
        if let Some(start) = &self.start_for_test {
            return Ok(start(info));
        }
        PubSub::start_node(info, self.dial.clone(), (self.mode)())
    }
}

impl super::dispatcher::Subscriptions for Sharded {
    fn register(
        self: Arc<Self>,
        channel: &str,
        interest: Interest,
    ) -> Option<Box<dyn super::dispatcher::Registration>> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        Some(Box::new(self.register_with(channel, interest)))
    }

    fn close(&self) {
        let nodes: Vec<Node> = {
            let mut nodes = self.nodes.lock();
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            nodes.by_addr.drain().map(|(_, node)| node).collect()
        };
        for slot in self.orphans.lock().1.values() {
            let _ = slot.try_send(());
        }
        for node in &nodes {
            node.pubsub.shut();
        }
        // Their waiters may not have left yet: the handles go when the dispatcher does.
        self.shut
            .lock()
            .extend(nodes.into_iter().map(|node| node.pubsub));
    }

    fn has_waiters(&self, channel: &str) -> bool {
        let nodes = self.nodes.lock();
        nodes
            .by_addr
            .values()
            .any(|node| node.pubsub.shared.has_waiters(channel))
    }
}

impl Drop for ShardedWaiter {
    fn drop(&mut self) {
        if let Some((id, _, _)) = &self.standin {
            self.sharded.orphans.lock().1.remove(id);
        }
    }
}

impl super::dispatcher::Registration for ShardedWaiter {
    fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        ShardedWaiter::block_until(self, deadline, alarms)
    }

    fn node(&self) -> Option<&NodeWaiter> {
        ShardedWaiter::node(self)
    }

    fn node_mut(&mut self) -> Option<&mut NodeWaiter> {
        ShardedWaiter::node_mut(self)
    }
}

impl Nodes {
    /// Closes the connections (other than `keep`'s, about to be used) that two sweeps at
    /// least [`IDLE_CLOSE`] apart found without channels, and none found busy in between.
    /// Their handles go to `retired`, to be detached once the map is unlocked.
    fn sweep(&mut self, keep: &str, retired: &mut Vec<PubSub>) {
        let now = Instant::now();
        if now.duration_since(self.last_sweep) < SWEEP_EVERY {
            return;
        }
        self.last_sweep = now;
        let mut closed = Vec::new();
        for (addr, node) in &mut self.by_addr {
            if addr == keep || !node.pubsub.shared.is_idle() {
                node.idle_since = None;
                continue;
            }
            let since = *node.idle_since.get_or_insert(now);
            if now.duration_since(since) >= IDLE_CLOSE && node.pubsub.shared.retire_if_idle() {
                closed.push(addr.clone());
            }
        }
        for addr in closed {
            if let Some(node) = self.by_addr.remove(&addr) {
                log::debug!("sharded pub/sub: closing the idle connection to {addr}");
                retired.push(node.pubsub);
            }
        }
    }
}

/// A waiter of the cluster dispatcher: registered on the node that owns its channel, and
/// moved to the new owner when the channel moves.
pub(crate) struct ShardedWaiter {
    sharded: Arc<Sharded>,
    channel: String,
    interest: Interest,
    /// A slot of its own for alarms while it has no registration, known to
    /// [`Sharded::close`] by this id; made when first needed.
    standin: Option<(u64, Sender<()>, Receiver<()>)>,
    /// The node's address and the registration there; `None` while no node could be located.
    at: Option<(String, NodeWaiter)>,
    /// When the waiter learned it has no registration (`at` is `None`): the last failed
    /// attempt to locate the channel.
    noticed: Option<Instant>,
    /// When it last relocated, and how long after that it may relocate again: zero until a
    /// registration goes bad again before it is confirmed, then doubling from
    /// [`FIRST_RETRY`] to [`MAX_RETRY`].
    relocated_at: Option<Instant>,
    retry: Duration,
}

impl ShardedWaiter {
    /// Blocks until woken (a move counts: the caller should re-check after one), until
    /// `deadline`, or until an alarm goes off.
    ///
    /// A waiter told its channel moved asks the locator (on a refreshed slot map), registers
    /// on the node it names, leaves the old node, and waits for the new confirmation: the
    /// caller re-checks only once subscribed where releases are now published. It never
    /// spins: if the locator names the node that reported the move, it subscribes there again
    /// and waits for the confirmation or the deadline as usual; only if that registration
    /// goes bad too does it ask again, and then no sooner than its back-off allows.
    pub(crate) fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        let mut woken = false;
        loop {
            if let Some(since) = self.went_bad() {
                let now = Instant::now();
                if self.relocated_at.is_none_or(|at| now >= at + self.retry) {
                    woken |= self.at.is_some();
                    self.relocate(since);
                }
            }
            // A bad registration waits only until it may try again.
            let bound = match (self.went_bad(), self.relocated_at) {
                (Some(_), Some(at)) => deadline.min(at + self.retry),
                _ => deadline,
            };
            let got = match &mut self.at {
                Some((_, node)) => node.wait_until(bound, alarms),
                None => {
                    // Nowhere to listen: only an alarm wakes it (through a slot of its own,
                    // which a close reaches too) before it may try again.
                    let (tx, rx) = self.standin();
                    match alarms.block(&tx, &rx, bound) {
                        (Wakeup::Woken, _) => Wakeup::Deadline,
                        (other, _) => other,
                    }
                }
            };
            match got {
                Wakeup::Woken => {
                    woken = true;
                    if self.went_bad().is_none() {
                        // Confirmed (or a message): the next move is followed at once.
                        self.retry = Duration::ZERO;
                        return Wakeup::Woken;
                    }
                }
                Wakeup::Interrupt | Wakeup::Closed => return got,
                Wakeup::Deadline if Instant::now() >= deadline => {
                    return if woken {
                        Wakeup::Woken
                    } else {
                        Wakeup::Deadline
                    };
                }
                Wakeup::Deadline => {}
            }
        }
    }

    /// When the waiter learned that its registration went bad (its node reported the channel
    /// moved, or its connection failed), or that it has none; `None` while it is good.
    fn went_bad(&self) -> Option<Instant> {
        match &self.at {
            Some((_, node)) => node.moved_at(),
            None => Some(self.noticed.unwrap_or_else(Instant::now)),
        }
    }

    /// Follows the channel: locates it on a slot map newer than `since`, registers there,
    /// then leaves the old registration (handing nothing on: this waiter re-checks, and the
    /// other waiters of the old node were told of the move too). On failure it keeps what it
    /// has, and tries again after its back-off.
    fn relocate(&mut self, since: Instant) {
        self.relocated_at = Some(Instant::now());
        self.retry = (self.retry * 2).clamp(FIRST_RETRY, MAX_RETRY);
        let placed = self
            .sharded
            .locate_after(&self.channel, since)
            .and_then(|info| {
                self.sharded
                    .subscribe_on(&info, &self.channel, &self.interest)
            });
        match placed {
            Ok((addr, mut fresh)) => {
                if let Some((from, old)) = self.at.take() {
                    fresh.inherit(&old);
                    log::debug!(
                        "sharded pub/sub: waiter on `{}` moves from {from} to {addr}",
                        self.channel
                    );
                    old.leave_moved();
                }
                self.at = Some((addr, fresh));
                self.noticed = None;
            }
            Err(e) => {
                log::debug!(
                    "sharded pub/sub: cannot subscribe `{}` ({e}); trying again in {:?}",
                    self.channel,
                    self.retry
                );
                if self.at.is_none() {
                    self.noticed = Some(Instant::now());
                }
            }
        }
    }

    /// The stand-in slot (made and made known to `close` on first use).
    fn standin(&mut self) -> (Sender<()>, Receiver<()>) {
        let (_, tx, rx) = self.standin.get_or_insert_with(|| {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let mut orphans = self.sharded.orphans.lock();
            orphans.0 += 1;
            let id = orphans.0;
            orphans.1.insert(id, tx.clone());
            (id, tx, rx)
        });
        (tx.clone(), rx.clone())
    }

    /// The current registration, if any.
    pub(super) fn node(&self) -> Option<&NodeWaiter> {
        self.at.as_ref().map(|(_, w)| w)
    }

    /// As [`node`](Self::node), mutably.
    pub(super) fn node_mut(&mut self) -> Option<&mut NodeWaiter> {
        self.at.as_mut().map(|(_, w)| w)
    }
}

#[cfg(test)]
impl ShardedWaiter {
    /// Blocks without alarms; true if woken.
    fn wait_until(&mut self, deadline: Instant) -> bool {
        self.block_until(deadline, &Alarms::none()) == Wakeup::Woken
    }

    fn attempted(&mut self) {
        if let Some(w) = self.node_mut() {
            w.attempted();
        }
    }

    fn succeeded(&mut self) {
        if let Some(w) = self.node_mut() {
            w.succeeded();
        }
    }

    fn nudge(&self) {
        if let Some(w) = self.node() {
            w.nudge();
        }
    }

    fn observed(&self, available: i64) {
        if let Some(w) = self.node() {
            w.observed(available);
        }
    }
}

#[cfg(test)]
impl Sharded {
    /// Registers a lock waiter.
    fn register_lock(self: &Arc<Self>, channel: &str) -> ShardedWaiter {
        self.register_with(channel, Interest::waiter(Wake::Lock, 1))
    }
}

#[cfg(test)]
impl Sharded {
    /// A dispatcher whose node connections `start` makes.
    fn with_nodes(locate: Locator, start: NodeFactory) -> Sharded {
        let timeout = super::testing::PATIENCE;
        let mut sharded = Sharded::new(locate, Box::new(|| Mode::Sharded), Dial::plain(timeout));
        sharded.start_for_test = Some(start);
        sharded
    }

    /// The connection to `addr`, to route replies on by hand.
    fn node_for_test(&self, addr: &str) -> Arc<Shared> {
        Arc::clone(&self.nodes.lock().by_addr[addr].pubsub.shared)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use parking_lot::Mutex;

    use crossbeam_channel::Receiver;
    use redis::{IntoConnectionInfo, Value};

    use super::super::testing::{moved_error, push, reply, wired, Peer, PATIENCE};
    use super::*;
    use crate::testing::Server;

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
}
