//! The cluster dispatcher ([`Sharded`]): one connection per node that got waiters, each waiter
//! on the node that owns its channel's hash slot. How a waiter follows its channel when its
//! slot moves or its node fails is [`ShardedWaiter`](super::sharded_waiter::ShardedWaiter)'s.
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

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use redis::ConnectionInfo;

use super::connection::{PubSub, Shared};
use super::node_waiter::NodeWaiter;
use super::vocabulary::{Interest, Mode};
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

/// How long a node connection stays open without channels before a registration closes it.
pub(super) const IDLE_CLOSE: Duration = Duration::from_secs(60);

/// Registrations look for idle node connections at most this often.
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How often a registration looks a node up again when the connection it found was closed
/// in between (it was idle). One retry suffices, since the next lookup opens a new one.
const REGISTER_TRIES: usize = 3;

/// The cluster dispatcher: node connections by address, opened on demand.
pub(crate) struct Sharded {
    pub(super) locate: Locator,
    mode: ModeOf,
    /// Set by `close`: no connection is opened any more.
    closed: std::sync::atomic::AtomicBool,
    /// Node connections shut by `close`, kept until the dispatcher drops (after every waiter).
    shut: Mutex<Vec<PubSub>>,
    /// The stand-in slots of waiters without a registration, by id, for `close` to wake.
    pub(super) orphans: Mutex<(u64, HashMap<u64, Sender<()>>)>,
    pub(super) dial: Dial,
    pub(super) nodes: Mutex<Nodes>,
    /// When the last slot-map refresh was asked for; held while it runs. See
    /// [`locate_after`](Self::locate_after).
    refreshed: Mutex<Option<Instant>>,
    /// Tests: makes the node connections (driven by hand) instead of [`PubSub::start`].
    #[cfg(test)]
    start_for_test: Option<NodeFactory>,
}

/// Tests: a node connection for an address, made by the test.
#[cfg(test)]
pub(super) type NodeFactory = Box<dyn Fn(&ConnectionInfo) -> PubSub + Send + Sync>;

/// The node connections, and when they were last looked at for idleness.
pub(super) struct Nodes {
    pub(super) by_addr: HashMap<String, Node>,
    pub(super) last_sweep: Instant,
}

/// One node's connection.
pub(super) struct Node {
    pubsub: PubSub,
    /// When a sweep first found it without channels; `None` while in use.
    pub(super) idle_since: Option<Instant>,
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

    /// Locates `channel` on a slot map newer than `since`, when the caller learned that its
    /// registration went bad: refreshes the map, unless a refresh began after `since`. So the
    /// waiters of a failed node, all woken by one report, refresh the map once between them
    /// (the others wait for that refresh, then read the map it got).
    pub(super) fn locate_after(&self, channel: &str, since: Instant) -> Result<ConnectionInfo> {
        let mut refreshed = self.refreshed.lock();
        if refreshed.is_some_and(|at| at >= since) {
            drop(refreshed);
            return (self.locate)(channel, false);
        }
        *refreshed = Some(Instant::now());
        (self.locate)(channel, true)
    }

    /// Registers a waiter on the node at `info`, opening its connection if needed.
    pub(super) fn subscribe_on(
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

    /// Whether the dispatcher is closed: it opens no connection any more.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Refuses registrations from now on, wakes the waiters that have no registration, and
    /// shuts every node connection (see [`Subscriptions::close`](super::Subscriptions::close)).
    pub(super) fn close(&self) {
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

    /// Whether a waiter (not an observer) is registered on `channel`, on any node.
    pub(super) fn has_waiters(&self, channel: &str) -> bool {
        let nodes = self.nodes.lock();
        nodes
            .by_addr
            .values()
            .any(|node| node.pubsub.shared.has_waiters(channel))
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

#[cfg(test)]
impl Sharded {
    /// A dispatcher whose node connections `start` makes.
    pub(super) fn with_nodes(locate: Locator, start: NodeFactory) -> Sharded {
        let timeout = crate::testing::PATIENCE;
        let mut sharded = Sharded::new(locate, Box::new(|| Mode::Sharded), Dial::plain(timeout));
        sharded.start_for_test = Some(start);
        sharded
    }

    /// The connection to `addr`, to route replies on by hand.
    pub(super) fn node_for_test(&self, addr: &str) -> Arc<Shared> {
        Arc::clone(&self.nodes.lock().by_addr[addr].pubsub.shared)
    }
}
