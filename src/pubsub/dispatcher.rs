//! The one dispatcher type the client holds, and the waiter its call sites use: a single
//! plain connection, or the cluster's sharded connections.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::metrics::Recorder;

use super::sharded::{Sharded, ShardedWaiter};
use super::{NodeWaiter, PubSub, Wake};

/// How this client's waiters hear of releases: [`PubSub`] in plain mode (a single node or
/// Sentinel, messages PUBLISHed), or [`Sharded`] for a Redis Cluster whose locks SPUBLISH.
/// The call sites see the same API either way.
pub(crate) enum Dispatcher {
    Plain(PubSub),
    Sharded(Sharded),
}

impl Dispatcher {
    /// After a Sentinel master switch: the plain connection moves to the new master. (A
    /// cluster's node connections follow slot moves on their own.)
    pub(crate) fn reconnect(&self) {
        if let Dispatcher::Plain(pubsub) = self {
            pubsub.reconnect();
        }
    }

    /// Registers the calling thread as a waiter on a lock's `channel`, subscribing if needed.
    ///
    /// The returned waiter is woken once the subscription is confirmed, on each message for the
    /// channel (one waiter for `0`, all for anything else), after every reconnect, and (sharded)
    /// once it has followed its channel to a new node.
    pub(crate) fn register(&self, channel: &str) -> Waiter<'_> {
        self.register_with(channel, Wake::Lock, 1)
    }

    /// Registers a waiter on a channel whose messages wake as `wake` says; `need` is the
    /// number of permits the waiter waits for (1 unless `wake` is [`Wake::Permits`]).
    /// Every waiter of one channel must use the same `wake`.
    pub(crate) fn register_with(&self, channel: &str, wake: Wake, need: u32) -> Waiter<'_> {
        let (node, metrics) = match self {
            Dispatcher::Plain(pubsub) => (
                Node::Plain(pubsub.register_with(channel, wake, need)),
                &pubsub.shared.dial.metrics,
            ),
            Dispatcher::Sharded(sharded) => (
                Node::Sharded(sharded.register_with(channel, wake, need)),
                &sharded.dial.metrics,
            ),
        };
        metrics.waiting.fetch_add(1, Ordering::Relaxed);
        Waiter {
            node,
            metrics: Arc::clone(metrics),
        }
    }
}

/// A thread registered on a channel; unregisters (and unsubscribes if last) on drop.
///
/// The protocol, the same in both modes: register, then block in
/// [`wait_until`](Self::wait_until) (the first wake-up is the subscription's confirmation),
/// re-check, report the re-check with [`attempted`](Self::attempted) (and
/// [`succeeded`](Self::succeeded) when it got what it waited for), block again.
pub(crate) struct Waiter<'a> {
    node: Node<'a>,
    /// Counts this waiter in the `waiting` gauge while it lives.
    metrics: Arc<Recorder>,
}

enum Node<'a> {
    Plain(NodeWaiter),
    Sharded(ShardedWaiter<'a>),
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.metrics.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Waiter<'_> {
    /// Blocks until woken or until `deadline`; true if woken. The caller reports the
    /// attempt that follows with [`attempted`](Self::attempted).
    ///
    /// A sharded waiter whose channel moved follows it to its new node first, and returns
    /// once subscribed there (or at the deadline), so that its re-check sees every release
    /// published on the new node.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> bool {
        match &mut self.node {
            Node::Plain(w) => w.wait_until(deadline),
            Node::Sharded(w) => w.wait_until(deadline),
        }
    }

    /// An acquire attempt completed (acquired or not): the wake-up, if any, was used.
    pub(crate) fn attempted(&mut self) {
        if let Some(w) = self.node_mut() {
            w.attempted();
        }
    }

    /// The lock was acquired: nothing is handed to another waiter on drop.
    pub(crate) fn succeeded(&mut self) {
        if let Some(w) = self.node_mut() {
            w.succeeded();
        }
    }

    /// Wakes one other waiter of the channel (one without a pending wake-up): for a waiter
    /// that leaves, or took the last permit, while the others may not know what it knew (the
    /// earliest permit expiry of a permit-expirable semaphore).
    pub(crate) fn nudge(&self) {
        if let Some(w) = self.node() {
            w.nudge();
        }
    }

    /// A semaphore waiter's attempt saw `available` permits left (after taking its own, if it
    /// got them): wakes the other waiters those permits may serve.
    pub(crate) fn observed(&self, available: i64) {
        if let Some(w) = self.node() {
            w.observed(available);
        }
    }

    /// The registration, if any: a sharded waiter has none while no node could be located
    /// (its wait is then bounded by the deadline alone, and it has no peers to wake).
    fn node(&self) -> Option<&NodeWaiter> {
        match &self.node {
            Node::Plain(w) => Some(w),
            Node::Sharded(w) => w.node(),
        }
    }

    /// As [`node`](Self::node), mutably.
    fn node_mut(&mut self) -> Option<&mut NodeWaiter> {
        match &mut self.node {
            Node::Plain(w) => Some(w),
            Node::Sharded(w) => w.node_mut(),
        }
    }
}
