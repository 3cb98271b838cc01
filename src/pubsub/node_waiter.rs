//! A thread registered on a channel of one connection ([`NodeWaiter`]): its slot, the wake-up
//! it took and did not use, and its leaving (unregistering, handing an unused wake-up on, and
//! unsubscribing the channel's last waiter).

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;

use super::registry::{
    wake_one, wake_one_but, wake_permits, Chan, Command, Entry, Moved, Registry,
};
use super::vocabulary::{Alarms, Interest, Wake, Wakeup};

/// A thread registered on a channel of one connection; unregisters (and unsubscribes if
/// last) on drop. The client's call sites use it through [`Waiter`](dispatcher::Waiter), which may move it to
/// another node.
pub(crate) struct NodeWaiter {
    pub(super) registry: Arc<Mutex<Registry>>,
    pub(super) channel: String,
    pub(super) id: u64,
    /// The slot's sending side, armed for interrupts while the waiter blocks.
    pub(super) tx: Sender<()>,
    pub(super) rx: Receiver<()>,
    /// See `Entry::moved`.
    pub(super) moved: Moved,
    /// Took a wake-up from its slot and has not completed an attempt since.
    pub(super) unused_wake: bool,
    pub(super) succeeded: bool,
    /// Whether an unused wake-up goes to another waiter on drop (see [`NodeWaiter::unregister`]).
    pub(super) hand_on: bool,
}

impl NodeWaiter {
    /// Registers a waiter (see [`PubSub::register_with`]); `None` once the connection is shut
    /// down, so that the sharded dispatcher opens a new one instead.
    pub(super) fn register(
        registry: &Arc<Mutex<Registry>>,
        channel: &str,
        interest: &Interest,
    ) -> Option<NodeWaiter> {
        let wake = interest.wake;
        let (tx, rx) = bounded(1);
        let moved = Moved::default();
        let mut reg = registry.lock();
        if reg.shutdown {
            return None;
        }
        let id = reg.next_id;
        reg.next_id += 1;
        let Registry { wire, channels, .. } = &mut *reg;
        if channels.is_empty() {
            // The connection's check starts with the first registration.
            wire.liveness.busy(Instant::now());
        }
        let chan = channels.entry(channel.to_owned()).or_insert_with(|| Chan {
            wake,
            ..Chan::default()
        });
        debug_assert_eq!(chan.wake, wake, "one wake mode per channel");
        if chan.subscribed {
            // Confirmed already: the caller may re-check at once.
            let _ = tx.try_send(());
        } else if !chan.sub_sent {
            wire.send(Command::Subscribe, channel, chan);
        }
        chan.waiters.push_back(Entry {
            id,
            tx: tx.clone(),
            need: interest.need,
            heard: interest.heard.clone(),
            every: interest.every,
            moved: moved.clone(),
        });
        Some(NodeWaiter {
            registry: Arc::clone(registry),
            channel: channel.to_owned(),
            id,
            tx,
            rx,
            moved,
            unused_wake: false,
            succeeded: false,
            // An observer takes no wake-up that was meant for a waiter, so owes none.
            hand_on: interest.heard.is_none(),
        })
    }

    /// Removes this waiter from its channel. Unless it `succeeded`, a wake-up it got and did
    /// not use (still in its slot, or taken but not followed by a completed attempt) goes to
    /// another waiter: it may be the one an unlock meant for somebody. The slot is checked under the registry
    /// lock, so a message the reader routes concurrently is seen here or not given to us.
    /// A waiter that leaves because its channel moved (`hand_on` false) hands nothing on: it
    /// re-checks itself, and every other waiter of the channel was told of the move too.
    pub(super) fn unregister(&self) {
        let mut reg = self.registry.lock();
        let token = self.rx.try_recv().is_ok();
        let (channel, id) = (self.channel.as_str(), self.id);
        let Registry { wire, channels, .. } = &mut *reg;
        let Some(chan) = channels.get_mut(channel) else {
            debug_assert!(false, "waiter of unknown channel {channel}");
            return;
        };
        // A semaphore waiter that got its permits still hands on a wake-up that arrived after
        // its last attempt began: it may announce permits that attempt did not see.
        let owed = self.hand_on
            && match chan.wake {
                Wake::Permits => token || (!self.succeeded && self.unused_wake),
                _ => !self.succeeded && (token || self.unused_wake),
            };
        // Found from the front, where the waiter that just got the lock usually is: removing
        // it there moves nothing else, and elsewhere at most the shorter side. (`retain`
        // moved every waiter behind it: 3 µs a handoff at 1,000 waiters, on the handoff's
        // path.)
        if let Some(at) = chan.waiters.iter().position(|w| w.id == id) {
            chan.waiters.remove(at);
        }
        if owed {
            wake_one(chan);
        }
        if chan.waiters.is_empty() {
            if chan.sub_sent {
                wire.send(Command::Unsubscribe, channel, chan);
            }
            if chan.pending == 0 {
                channels.remove(channel);
            }
        }
    }

    /// Blocks until woken, until `deadline`, or until one of the `alarms` goes off. The
    /// caller reports the attempt that follows a wake-up with [`attempted`](Self::attempted).
    /// A wake-up taken along with an alarm counts as unused: it is handed on when the waiter
    /// leaves.
    pub(crate) fn wait_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        let (wakeup, took) = alarms.block(&self.tx, &self.rx, deadline);
        self.unused_wake |= took;
        wakeup
    }

    /// An acquire attempt completed (acquired or not): the wake-up, if any, was used.
    pub(crate) fn attempted(&mut self) {
        self.unused_wake = false;
    }

    /// The lock was acquired: nothing is handed to another waiter on drop.
    pub(crate) fn succeeded(&mut self) {
        self.succeeded = true;
    }

    /// Wakes one other waiter of the channel (one without a pending wake-up): for a waiter
    /// that leaves, or took the last permit, while the others may not know what it knew (the
    /// earliest permit expiry of a permit-expirable semaphore).
    pub(crate) fn nudge(&self) {
        let reg = self.registry.lock();
        if let Some(chan) = reg.channels.get(&self.channel) {
            wake_one_but(chan, Some(self.id));
        }
    }

    /// A semaphore waiter's attempt saw `available` permits left (after taking its own, if it
    /// got them): wakes the other waiters those permits may serve. See [`wake_permits`].
    pub(crate) fn observed(&self, available: i64) {
        if available <= 0 {
            return;
        }
        let reg = self.registry.lock();
        if let Some(chan) = reg.channels.get(&self.channel) {
            wake_permits(chan, available, Some(self.id));
        }
    }

    /// Sharded mode: the node said, since this waiter registered or since the channel's last
    /// confirmation, that it does not serve the channel (or the connection failed).
    #[cfg(test)]
    pub(super) fn moved(&self) -> bool {
        self.moved.get().is_some()
    }

    /// When the move [`moved`](Self::moved) tells of was reported.
    pub(super) fn moved_at(&self) -> Option<Instant> {
        self.moved.get()
    }

    /// Takes over what `old` knew before a move: a wake-up it took (or still had in its
    /// slot) and did not use, and whether its attempt succeeded.
    pub(super) fn inherit(&mut self, old: &NodeWaiter) {
        self.unused_wake |= old.unused_wake || old.rx.try_recv().is_ok();
        self.succeeded |= old.succeeded;
    }

    /// Leaves a channel that moved away, handing nothing on (see [`NodeWaiter::unregister`]).
    pub(super) fn leave_moved(mut self) {
        self.hand_on = false;
    }
}

#[cfg(test)]
impl NodeWaiter {
    /// The sending side of this waiter's slot, as the reader would use it.
    pub(super) fn tx_for_test(&self) -> Sender<()> {
        let reg = self.registry.lock();
        let chan = &reg.channels[&self.channel];
        let entry = chan.waiters.iter().find(|w| w.id == self.id).unwrap();
        entry.tx.clone()
    }
}

impl Drop for NodeWaiter {
    fn drop(&mut self) {
        self.unregister();
    }
}
