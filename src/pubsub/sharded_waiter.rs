//! A waiter of the cluster dispatcher ([`ShardedWaiter`]): registered on the node that owns its
//! channel's hash slot, and moved to the new owner when the channel moves.
//!
//! Moves: a node that does not (or no longer) serve a channel says so (sharded mode: an
//! unsolicited `sunsubscribe` when the slot migrates away or the node is demoted, `-MOVED` in
//! reply to SSUBSCRIBE), and a connection may fail (either mode). Each marks the channel's
//! waiters moved and wakes
//! them (see `Registry::unsubscribed_by_server`, `Registry::refused`,
//! `Shared::disconnected`, `Shared::connect_failed`). A moved waiter, inside
//! [`ShardedWaiter::block_until`], asks the locator again (refreshing the slot map), registers
//! on the node it names, leaves the old one, and returns once the new subscription is
//! confirmed: as everywhere, it re-checks only when subscribed, so a release published on
//! the new node after its re-check wakes it. The waiters woken by one report share one
//! slot-map refresh ([`Sharded::locate_after`]). If the new registration goes bad too (the
//! map is still stale, the node is down and not yet failed over), the waiter tries again
//! after a back-off ([`FIRST_RETRY`] doubling to [`MAX_RETRY`]): it never spins, and never
//! stays for good on a node that is gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::dispatcher::{Registration, Subscriptions};
use super::node_waiter::NodeWaiter;
use super::sharded::Sharded;
use super::vocabulary::Interest;
use super::vocabulary::{Alarms, Wakeup};
impl Subscriptions for Sharded {
    fn register(
        self: Arc<Self>,
        channel: &str,
        interest: Interest,
    ) -> Option<Box<dyn Registration>> {
        if self.is_closed() {
            return None;
        }
        Some(Box::new(self.register_with(channel, interest)))
    }

    fn close(&self) {
        Sharded::close(self);
    }

    fn has_waiters(&self, channel: &str) -> bool {
        Sharded::has_waiters(self, channel)
    }
}

impl Registration for ShardedWaiter {
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

#[cfg(test)]
use super::vocabulary::Wake;

/// How soon a waiter whose new registration went bad too (the locator named a node that
/// refuses the channel, or is down, or no node at all) tries again: doubling from this...
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// ... up to this, as the reader's reconnect back-off does. A waiter never relocates faster,
/// so nodes that disagree on a slot's owner cannot bounce it around at network speed; and it
/// always tries again, so a waiter with no deadline (a latch, a semaphore) is not left
/// waiting on a node that failed over for good.
const MAX_RETRY: Duration = Duration::from_secs(1);

impl Sharded {
    /// Registers a waiter on the node that owns `channel`'s slot (see
    /// [`Dispatcher::register`](super::Dispatcher::register)). If no node can be
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
                    // Nowhere to listen: only an alarm or a nudge wakes it (through a slot
                    // of its own, which a close reaches too) before it may try again.
                    let (tx, rx) = self.standin();
                    match alarms.block(&tx, &rx, bound) {
                        (Wakeup::Woken, _) => Wakeup::Deadline,
                        (Wakeup::Nudged, _) if self.observes() => Wakeup::Deadline,
                        (other, _) => other,
                    }
                }
            };
            match got {
                // A lock passed to this thread in-process: it needs no subscription to
                // see it, so the caller looks now, not once the registration is good again.
                Wakeup::Nudged if !self.observes() => return got,
                // The wait's other channel: its caller decides.
                Wakeup::Overheard => return got,
                // An observer waits for no lock: to it, a nudge is a plain wake-up.
                Wakeup::Woken | Wakeup::Nudged => {
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

    /// Whether this is an observer's registration (see [`Interest::heard`]), not a waiter's.
    fn observes(&self) -> bool {
        self.interest.heard.is_some()
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

impl Drop for ShardedWaiter {
    fn drop(&mut self) {
        if let Some((id, _, _)) = &self.standin {
            self.sharded.orphans.lock().1.remove(id);
        }
    }
}

#[cfg(test)]
impl ShardedWaiter {
    /// Blocks without alarms; true if woken.
    pub(super) fn wait_until(&mut self, deadline: Instant) -> bool {
        self.block_until(deadline, &Alarms::none()) == Wakeup::Woken
    }

    pub(super) fn attempted(&mut self) {
        if let Some(w) = self.node_mut() {
            w.attempted();
        }
    }

    pub(super) fn succeeded(&mut self) {
        if let Some(w) = self.node_mut() {
            w.succeeded();
        }
    }

    pub(super) fn nudge(&self) {
        if let Some(w) = self.node() {
            w.nudge();
        }
    }

    pub(super) fn observed(&self, available: i64) {
        if let Some(w) = self.node() {
            w.observed(available);
        }
    }
}

#[cfg(test)]
impl Sharded {
    /// Registers a lock waiter.
    pub(super) fn register_lock(self: &Arc<Self>, channel: &str) -> ShardedWaiter {
        self.register_with(channel, Interest::waiter(Wake::Lock, 1))
    }
}
