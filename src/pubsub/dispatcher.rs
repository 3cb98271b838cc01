//! The one dispatcher type the client holds, over either way of hearing of releases (a single
//! plain connection, or the cluster's sharded connections), and the registration the wait
//! function blocks on; also the slots of waits that listen on no channel (a spin lock's).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::{Condvar, Mutex};

use super::node_waiter::NodeWaiter;
use super::vocabulary::{Alarms, Ear, Heard, Interest, Wake, Wakeup};
use crate::metrics::Recorder;

/// How a client hears of releases: [`PubSub`](super::PubSub), one plain connection (a single
/// node or Sentinel, messages PUBLISHed), or [`Sharded`](super::Sharded), a connection per
/// cluster node (messages SPUBLISHed). The topology picks one when the client is made; the
/// wait function sees only this.
pub(crate) trait Subscriptions: Send + Sync {
    /// Registers on `channel` (see [`Dispatcher::register`]); `None` once closed. The
    /// registration keeps what it needs alive.
    fn register(
        self: Arc<Self>,
        channel: &str,
        interest: Interest,
    ) -> Option<Box<dyn Registration>>;

    /// Refuses registrations from now on, wakes every registered waiter (their `closed`
    /// alarm is up: see [`Alarms::block`]), closes the connections and stops their threads.
    /// The waiters may still unregister.
    fn close(&self);

    /// Whether a waiter (not an observer) of this client is registered on `channel`.
    fn has_waiters(&self, channel: &str) -> bool;
}

/// A registration on a channel, as the wait function uses it; unregisters on drop.
pub(crate) trait Registration: Send + Sync {
    /// Blocks until woken, until `deadline`, or until an alarm goes off.
    fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup;

    /// The connection's registration, if any (a sharded waiter has none while no node could
    /// be located: its wait is then bounded by the deadline alone, and it has no peers).
    fn node(&self) -> Option<&NodeWaiter>;

    /// As [`node`](Self::node), mutably.
    fn node_mut(&mut self) -> Option<&mut NodeWaiter>;
}

/// The client's dispatcher: registrations, the waiting gauge, and the close alarm.
pub(crate) struct Dispatcher {
    subscriptions: Arc<dyn Subscriptions>,
    metrics: Arc<Recorder>,
    /// Set by [`close`](Self::close): every waiter's `closed` alarm.
    closed: Arc<AtomicBool>,
    /// Dropped by [`close`](Self::close): for those that block on channels of their own (a
    /// watch).
    close_tx: Mutex<Option<Sender<()>>>,
    closed_rx: Receiver<()>,
    /// Waits in progress, with what they clean up after (a fair lock leaving its queue): a
    /// close lets them finish that before the connections go.
    active: Mutex<usize>,
    drained: Condvar,
    /// The slots of waits on no channel, for [`close`](Self::close) to wake.
    sleepers: Arc<Sleepers>,
}

/// The slots of waits on no channel, by id (the last id given out first).
type Sleepers = Mutex<(u64, HashMap<u64, Sender<()>>)>;

impl Dispatcher {
    pub(crate) fn new(subscriptions: Arc<dyn Subscriptions>, metrics: Arc<Recorder>) -> Dispatcher {
        let (tx, rx) = bounded(0);
        Dispatcher {
            subscriptions,
            metrics,
            closed: Arc::default(),
            close_tx: Mutex::new(Some(tx)),
            closed_rx: rx,
            active: Mutex::new(0),
            drained: Condvar::new(),
            sleepers: Arc::default(),
        }
    }

    /// Registers the calling thread as a waiter on `channel`, whose messages wake as `wake`
    /// says (every waiter of one channel uses the same); `need` is the number of permits the
    /// waiter waits for (1 unless `wake` is [`Wake::Permits`]). `None` once closed.
    ///
    /// The waiter is woken once the subscription is confirmed, on each message that wakes it,
    /// after every reconnect, and (sharded) once it has followed its channel to a new node.
    /// `every`: woken by every message, taking no part in handing one wake-up out.
    pub(crate) fn register(
        &self,
        channel: &str,
        wake: Wake,
        need: u32,
        every: bool,
    ) -> Option<Waiter<'_>> {
        if self.is_closed() {
            return None;
        }
        let interest = Interest {
            every,
            ..Interest::waiter(wake, need)
        };
        let registration = Arc::clone(&self.subscriptions).register(channel, interest)?;
        Some(Waiter {
            registration,
            metrics: &self.metrics,
            counted: false,
        })
    }

    /// A registration on no channel, for a wait whose releases are not published (a spin
    /// lock's): each block is a timed sleep on a slot of the thread's own, which only the
    /// thread's interrupt and this client's close cut short. Nothing is sent to Redis. Counted
    /// in the `waiting` gauge as a waiter is. `None` once closed.
    pub(crate) fn sleeper(&self) -> Option<Waiter<'_>> {
        if self.is_closed() {
            return None;
        }
        let (tx, rx) = bounded(1);
        let id = {
            let mut sleepers = self.sleepers.lock();
            sleepers.0 += 1;
            let id = sleepers.0;
            sleepers.1.insert(id, tx.clone());
            id
        };
        // A close that set its flag before the insert is seen by the block's own check.
        Some(Waiter {
            registration: Box::new(Sleeper {
                id,
                tx,
                rx,
                sleepers: Arc::clone(&self.sleepers),
            }),
            metrics: &self.metrics,
            counted: false,
        })
    }

    /// Registers an observer on `channel` (whose waiters wake as `wake` says): every message
    /// of the channel is sent to `heard`, and it takes no wake-up from the waiters. Its
    /// registration's slot tells of the subscription's confirmation, of reconnects and (on a
    /// cluster) of moves, which it follows when blocked or polled with
    /// [`Observer::block_until`]. Not counted as waiting. `None` once closed.
    pub(crate) fn observe(
        &self,
        channel: &str,
        wake: Wake,
        heard: Sender<Heard>,
    ) -> Option<Observer> {
        self.observer(channel, wake, Ear::Feed(heard))
    }

    /// Registers an observer on `channel` (whose waiters wake as `wake` says) for a wait on
    /// another channel: each message of `channel` puts a token in `slot` (which the wait
    /// blocks on too, as [`Alarms::ear`]: its block returns [`Wakeup::Overheard`]), taking no
    /// wake-up from the channel's waiters. A sharded observer follows a move at
    /// [`Observer::follow`]. `None` once closed.
    pub(crate) fn overhear(&self, channel: &str, wake: Wake, slot: Sender<()>) -> Option<Observer> {
        self.observer(channel, wake, Ear::Slot(slot))
    }

    fn observer(&self, channel: &str, wake: Wake, ear: Ear) -> Option<Observer> {
        if self.is_closed() {
            return None;
        }
        let interest = Interest {
            wake,
            need: 1,
            heard: Some(ear),
            every: false,
        };
        let registration = Arc::clone(&self.subscriptions).register(channel, interest)?;
        Some(Observer { registration })
    }

    /// The alarms of a wait by the calling thread: its interrupt, and this client's close.
    pub(crate) fn alarms(&self) -> Alarms {
        Alarms::of_this_thread(&self.closed)
    }

    /// Whether a thread of this client waits on `channel` (observers do not count).
    pub(crate) fn has_waiters(&self, channel: &str) -> bool {
        self.subscriptions.has_waiters(channel)
    }

    /// The flag [`close`](Self::close) sets, for alarms made later on another thread.
    pub(crate) fn closed_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.closed)
    }

    /// Disconnected once the client is closed: for a receiver that blocks on channels of its
    /// own.
    pub(crate) fn closed_channel(&self) -> Receiver<()> {
        self.closed_rx.clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Marks a wait in progress until the guard drops; see [`close`](Self::close).
    pub(crate) fn active(&self) -> Active<'_> {
        *self.active.lock() += 1;
        Active(self)
    }

    /// Wakes every blocked waiter with the close alarm, refuses registrations, and closes the
    /// connections (joining their threads). Then waits, up to `grace`, for the waits in
    /// progress to end (and clean up after themselves). Idempotent.
    pub(crate) fn close(&self, grace: Duration) {
        // Held until the connections are closed; and every closer waits for the drain, so
        // that a second one cannot close the command connections under waiters still leaving
        // a fair queue.
        let mut close_tx = self.close_tx.lock();
        if close_tx.take().is_some() {
            self.closed.store(true, Ordering::SeqCst);
            // Wakes every registered waiter, whose `closed` alarm is now up.
            self.subscriptions.close();
            for slot in self.sleepers.lock().1.values() {
                let _ = slot.try_send(());
            }
        }
        drop(close_tx);
        let deadline = Instant::now() + grace;
        let mut active = self.active.lock();
        while *active > 0 {
            if self.drained.wait_until(&mut active, deadline).timed_out() {
                log::debug!("{} waits still ending as the client closes", *active);
                return;
            }
        }
    }
}

/// A wait in progress (see [`Dispatcher::active`]).
pub(crate) struct Active<'a>(&'a Dispatcher);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let mut active = self.0.active.lock();
        *active -= 1;
        if *active == 0 {
            self.0.drained.notify_all();
        }
    }
}

/// A thread registered on a channel, counted in the `waiting` gauge once it has re-checked
/// and blocks; unregisters (and unsubscribes if last) on drop.
///
/// Used only by the wait function (`pubsub::wait`), which runs the protocol: block (the first
/// wake-up is the subscription's confirmation), re-check, report the re-check with
/// [`attempted`](Self::attempted) (and [`succeeded`](Self::succeeded) when it got what it
/// waited for), block again.
pub(crate) struct Waiter<'a> {
    registration: Box<dyn Registration>,
    metrics: &'a Recorder,
    /// Counted in the `waiting` gauge (see [`blocking`](Waiter::blocking)).
    counted: bool,
}

/// A wait's slot on no channel (see [`Dispatcher::sleeper`]); leaves the close list on drop.
struct Sleeper {
    id: u64,
    tx: Sender<()>,
    rx: Receiver<()>,
    sleepers: Arc<Sleepers>,
}

impl Registration for Sleeper {
    fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        // Only an alarm puts a token in the slot: the wait re-checks at the deadline.
        alarms.block(&self.tx, &self.rx, deadline).0
    }

    fn node(&self) -> Option<&NodeWaiter> {
        None
    }

    fn node_mut(&mut self) -> Option<&mut NodeWaiter> {
        None
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.sleepers.lock().1.remove(&self.id);
    }
}

/// An observer's registration (see [`Dispatcher::observe`]); unregisters on drop.
pub(crate) struct Observer {
    registration: Box<dyn Registration>,
}

impl Observer {
    /// Blocks until the registration's slot has a wake-up (the subscription confirmed, a
    /// reconnect, a move followed), until `deadline`, or until an alarm goes off. A deadline
    /// in the past polls: it follows a move the observer was told of, without blocking.
    pub(crate) fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        self.registration.block_until(deadline, alarms)
    }

    /// Follows a move the observer was told of (sharded), without blocking and without
    /// taking the calling thread's interrupt or nudge (alarms of its own, but `closed`).
    pub(crate) fn follow(&mut self, closed: &Arc<AtomicBool>) {
        let alarms = Alarms {
            interruption: Arc::default(),
            closed: Arc::clone(closed),
            ear: None,
        };
        self.registration.block_until(Instant::now(), &alarms);
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.metrics.wait_ended();
        }
    }
}

impl Waiter<'_> {
    /// Blocks until woken, until `deadline`, or until an alarm goes off. After a wake-up the
    /// caller reports the attempt that follows with [`attempted`](Self::attempted).
    ///
    /// A sharded waiter whose channel moved follows it to its new node first, and returns
    /// once subscribed there (or at the deadline), so that its re-check sees every release
    /// published on the new node.
    pub(crate) fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        self.registration.block_until(deadline, alarms)
    }

    /// The waiter re-checked once subscribed and blocks again: from now on (until it leaves)
    /// it counts in the `waiting` gauge. A release published from now on wakes it.
    pub(crate) fn blocking(&mut self) {
        if !self.counted {
            self.counted = true;
            self.metrics.wait_began();
        }
    }

    /// An attempt completed (successful or not): the wake-up, if any, was used.
    pub(crate) fn attempted(&mut self) {
        if let Some(w) = self.registration.node_mut() {
            w.attempted();
        }
    }

    /// The waiter got what it waited for: nothing is handed to another waiter on drop.
    pub(crate) fn succeeded(&mut self) {
        if let Some(w) = self.registration.node_mut() {
            w.succeeded();
        }
    }

    /// Wakes one other waiter of the channel (one without a pending wake-up): for a waiter
    /// that leaves, or took the last permit, while the others may not know what it knew (the
    /// earliest permit expiry of a permit-expirable semaphore).
    pub(crate) fn nudge(&self) {
        if let Some(w) = self.registration.node() {
            w.nudge();
        }
    }

    /// A semaphore waiter's attempt saw `available` permits left (after taking its own, if it
    /// got them): wakes the other waiters those permits may serve.
    pub(crate) fn observed(&self, available: i64) {
        if let Some(w) = self.registration.node() {
            w.observed(available);
        }
    }
}

impl Registration for NodeWaiter {
    fn block_until(&mut self, deadline: Instant, alarms: &Alarms) -> Wakeup {
        self.wait_until(deadline, alarms)
    }

    fn node(&self) -> Option<&NodeWaiter> {
        Some(self)
    }

    fn node_mut(&mut self) -> Option<&mut NodeWaiter> {
        Some(self)
    }
}
