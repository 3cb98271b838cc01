//! The pub/sub dispatcher: how waiting threads learn that a lock, semaphore or latch changed.
//!
//! A [`PubSub`] is one dedicated connection and one reader thread. The thread owns the read
//! side of the socket and blocks on it; SUBSCRIBE and UNSUBSCRIBE are written by the
//! registering thread on a cloned write side, under the registry mutex, so that the order of
//! commands on the wire is the order of registry changes. The reader routes confirmations and
//! messages to waiters through `crossbeam_channel` slots of capacity one: a token in the slot
//! means "re-check now".
//!
//! A waiter re-checks only after the server confirmed its channel (`Chan::subscribed`), so an
//! unlock published between its failed attempt and its subscription cannot be missed. Every
//! command written is counted in `Chan::pending` until its reply arrives; the channel is
//! confirmed when no command is pending and the last one written was a subscribe.
//!
//! A connection speaks one of two [`Mode`]s. On a single node or behind Sentinel it is
//! [`Mode::Plain`] (SUBSCRIBE, for PUBLISH). On a Redis Cluster with sharded pub/sub, unlock
//! messages are SPUBLISHed and reach only SSUBSCRIBErs on the node that owns the channel's
//! hash slot, so the connection is [`Mode::Sharded`] and goes to that node, and the slot may
//! leave it: see [`sharded`] for the cluster dispatcher, which keeps one connection per node
//! that got waiters (sharded, or plain on a cluster without sharded pub/sub), and moves
//! waiters when their channel moves or their node fails. [`Dispatcher`] is the one type the
//! client holds, over either.

mod dispatcher;
mod sharded;
#[cfg(test)]
pub(crate) mod testing;
mod wait;

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use redis::{ConnectionInfo, Value};

use crate::error::{Error, Result};
use crate::interrupt::Interruption;
use crate::net::{Dial, Stream};

pub(crate) use dispatcher::{Dispatcher, Observer, Subscriptions};
pub(crate) use sharded::{Locator, Sharded};
pub(crate) use wait::{wait, Channel, Tried};

/// Where a pub/sub connection goes, looked up again on every reconnect (the master that
/// Sentinel names may have changed). A `ConnectionInfo` is a fixed address.
pub(crate) trait Address: Send + Sync {
    /// The address and credentials to connect to now.
    fn resolve(&self, connect: Duration, response: Duration) -> Result<ConnectionInfo>;

    /// For log messages: the server, or what names it.
    fn describe(&self) -> String;
}

impl Address for ConnectionInfo {
    fn resolve(&self, _: Duration, _: Duration) -> Result<ConnectionInfo> {
        Ok(self.clone())
    }

    fn describe(&self) -> String {
        self.addr().to_string()
    }
}

/// Which family of pub/sub commands a connection speaks, chosen at [`PubSub::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// SUBSCRIBE/UNSUBSCRIBE: for messages sent with PUBLISH (single node, Sentinel, or a
    /// cluster without sharded pub/sub, or set not to use it, where PUBLISH reaches every
    /// node).
    Plain,
    /// SSUBSCRIBE/SUNSUBSCRIBE on the node that owns the channel's slot, for SPUBLISH. The
    /// node may refuse a channel (`-MOVED`) or drop it (an unsolicited `sunsubscribe` when the
    /// slot migrates or the node is demoted); either marks the channel moved, so that its
    /// waiters ask where it went (see [`NodeWaiter::moved`]).
    Sharded,
}

impl Mode {
    /// The command that publishes to this mode's subscribers (an argument of every script
    /// that wakes waiters).
    pub(crate) fn publish(self) -> &'static str {
        match self {
            Mode::Plain => "PUBLISH",
            Mode::Sharded => "SPUBLISH",
        }
    }

    /// The `PUBSUB` subcommand that counts a channel's subscribers in this mode.
    pub(crate) fn numsub(self) -> &'static str {
        match self {
            Mode::Plain => "NUMSUB",
            Mode::Sharded => "SHARDNUMSUB",
        }
    }
}

/// One pub/sub command, as remembered until its reply arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Subscribe,
    Unsubscribe,
}

impl Command {
    /// The command's name in `mode`.
    fn name(self, mode: Mode) -> &'static str {
        match (self, mode) {
            (Command::Subscribe, Mode::Plain) => "SUBSCRIBE",
            (Command::Unsubscribe, Mode::Plain) => "UNSUBSCRIBE",
            (Command::Subscribe, Mode::Sharded) => "SSUBSCRIBE",
            (Command::Unsubscribe, Mode::Sharded) => "SUNSUBSCRIBE",
        }
    }
}

/// Handle on one pub/sub connection and its reader thread; dropping it stops the thread and
/// closes the connection.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What the handle, its reader thread and its waiters share.
struct Shared {
    /// Where to connect: looked up again on every reconnect (Sentinel follows failovers).
    target: Arc<dyn Address>,
    mode: Mode,
    /// A node connection of the cluster dispatcher: when it fails (or cannot connect), its
    /// waiters are told their channel moved, to ask the locator where to go, since the node
    /// may be gone for good. Otherwise the connection reconnects to its `target`.
    placed: bool,
    dial: Dial,
    registry: Mutex<Registry>,
    /// Wakes the thread out of its reconnect back-off when the handle is dropped.
    stop_tx: Sender<()>,
    stop_rx: Receiver<()>,
}

/// The waiters of every channel and the connection's write side, under one mutex so that
/// what is written matches the registry.
struct Registry {
    wire: Wire,
    channels: HashMap<String, Chan>,
    next_id: u64,
    /// Set when the handle is dropped or retired: no registration is taken any more and the
    /// reader thread stops.
    shutdown: bool,
}

/// The write side of the live connection and, in sharded mode, what it still owes replies to.
struct Wire {
    mode: Mode,
    /// `None` while disconnected.
    writer: Option<Stream>,
    /// Sharded mode only: the commands written on the live connection whose reply has not
    /// arrived, oldest first. Replies come in order, so the front names the channel of the next
    /// reply; that is how an error reply (`-MOVED`, which names no channel) is attributed, and
    /// how a solicited `sunsubscribe` is told from an unsolicited one. Each channel's
    /// `Chan::pending` counts its entries here.
    inflight: VecDeque<(Command, String)>,
}

/// What a blocked waiter listens to besides its channel: the waiting thread's interrupt and
/// its client's close. Both wake the waiter through its own slot, so that a block is one
/// plain receive; the wait function decides what they mean.
pub(crate) struct Alarms {
    pub(crate) interruption: Arc<Interruption>,
    /// Set when the client is closed (which then wakes every registered waiter).
    pub(crate) closed: Arc<AtomicBool>,
}

impl Alarms {
    /// The calling thread's interrupt, and the close flag `closed`.
    pub(crate) fn of_this_thread(closed: &Arc<AtomicBool>) -> Alarms {
        Alarms {
            interruption: Interruption::current(),
            closed: Arc::clone(closed),
        }
    }

    /// Alarms that never go off.
    #[cfg(test)]
    pub(crate) fn none() -> Alarms {
        Alarms {
            interruption: Arc::default(),
            closed: Arc::default(),
        }
    }

    /// The alarm that is up, if any (close first).
    fn raised(&self) -> Option<Wakeup> {
        if self.closed.load(Ordering::SeqCst) {
            Some(Wakeup::Closed)
        } else if self.interruption.is_requested() {
            Some(Wakeup::Interrupt)
        } else {
            None
        }
    }

    /// Blocks on the slot `rx` (whose sender is `tx`) until a token comes, until `deadline`,
    /// or until an alarm goes off; also says whether a token was taken (an alarm may have
    /// come with one, or as one: the caller treats it as a wake-up it did not use).
    ///
    /// No alarm is missed: the slot is armed for interrupts before the flags are checked,
    /// and a close sets its flag before it wakes every registered slot.
    pub(crate) fn block(
        &self,
        tx: &Sender<()>,
        rx: &Receiver<()>,
        deadline: Instant,
    ) -> (Wakeup, bool) {
        let armed = self.interruption.arm(tx);
        if let Some(alarm) = self.raised() {
            return (alarm, false);
        }
        let took = rx.recv_deadline(deadline).is_ok();
        drop(armed);
        match self.raised() {
            Some(alarm) => (alarm, took),
            None if took => (Wakeup::Woken, true),
            None => (Wakeup::Deadline, false),
        }
    }
}

/// How a waiter's block ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wakeup {
    /// A wake-up came on the channel (a message, the subscription's confirmation, a
    /// reconnect, a move): re-check.
    Woken,
    /// The deadline passed.
    Deadline,
    /// The interrupt alarm went off (perhaps a stale one: the wait function checks).
    Interrupt,
    /// The client was closed.
    Closed,
}

/// How a channel's messages wake its waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Wake {
    /// A lock channel: message `0` wakes one waiter (one unlock, one winner), anything else
    /// (`1`: a write or read-write release) wakes all.
    #[default]
    Lock,
    /// A semaphore channel: the message is the new permit count; waiters are woken in order
    /// while their needs fit in it (see [`wake_permits`]).
    Permits,
    /// A latch channel: every message wakes every waiter.
    All,
}

/// What a registration asks for: how the channel's messages wake it, and whether it only
/// listens (an observer: a [`Watch`](crate::Watch)).
#[derive(Clone)]
pub(crate) struct Interest {
    pub(crate) wake: Wake,
    /// Permits the waiter needs (1 unless `wake` is [`Wake::Permits`]).
    pub(crate) need: u32,
    /// An observer's ear: it hears every message of the channel here, and takes no part in
    /// handing wake-ups out (a waiter of the same client never loses one to it). Its slot
    /// still tells it of confirmations, reconnects and moves.
    pub(crate) heard: Option<Sender<Heard>>,
}

impl Interest {
    /// A waiter's interest.
    pub(crate) fn waiter(wake: Wake, need: u32) -> Interest {
        Interest {
            wake,
            need,
            heard: None,
        }
    }
}

/// A message an observer heard: the channel it came on.
pub(crate) struct Heard {
    pub(crate) channel: String,
}

/// One registered waiter, as the reader sees it.
struct Entry {
    id: u64,
    tx: Sender<()>,
    /// Permits this waiter needs (1 for locks and latches).
    need: u32,
    /// An observer's ear (see [`Interest::heard`]); `None` for a waiter.
    heard: Option<Sender<Heard>>,
    /// Sharded mode: reported (before the wake-up) when the node says the channel is not
    /// served here or the connection fails; cleared when a subscription of the channel is
    /// confirmed.
    moved: Moved,
}

/// Sharded mode: when a node reported that a waiter's channel is not served there (or that
/// the connection failed), if it did. Shared by the registry entry, which reports it under
/// the registry lock, and the waiter, which reads it without the lock after each wake-up.
/// The instant lets waiters woken together by one report share one slot-map refresh.
#[derive(Clone, Default)]
struct Moved(Arc<AtomicU64>);

impl Moved {
    /// Reports a move at `at`.
    fn report(&self, at: Instant) {
        self.0.store(Moved::encode(at), Ordering::SeqCst);
    }

    /// Reports a move at `at` unless one is reported already; true if this one was.
    fn report_first(&self, at: Instant) -> bool {
        let encoded = Moved::encode(at);
        self.0
            .compare_exchange(0, encoded, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn clear(&self) {
        self.0.store(0, Ordering::SeqCst);
    }

    /// When the move was reported, if one is.
    fn get(&self) -> Option<Instant> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Moved::epoch() + Duration::from_nanos(n - 1)),
        }
    }

    /// Nanoseconds since [`epoch`](Self::epoch), plus one (zero means "no move").
    fn encode(at: Instant) -> u64 {
        let since = at.saturating_duration_since(Moved::epoch()).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
    }

    /// The process-wide origin of the encoded instants.
    fn epoch() -> Instant {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }
}

/// One channel's waiters and subscription state.
#[derive(Default)]
struct Chan {
    wake: Wake,
    waiters: VecDeque<Entry>,
    /// Subscribe/unsubscribe commands written on this connection and not yet answered.
    pending: u32,
    /// The last command written on this connection for the channel was a subscribe.
    sub_sent: bool,
    /// The server confirmed the subscription and nothing is pending: messages will arrive.
    subscribed: bool,
}

impl PubSub {
    /// Starts the reader thread, which connects in the background (and keeps retrying), in
    /// `mode`.
    pub(crate) fn start(target: Arc<dyn Address>, dial: Dial, mode: Mode) -> Result<PubSub> {
        PubSub::spawn(Shared::new(target, dial, mode, false))
    }

    /// Starts a connection to one cluster node, in `mode`, for the cluster dispatcher: when
    /// it fails, its waiters are told to move (see [`sharded`]).
    pub(crate) fn start_node(info: &ConnectionInfo, dial: Dial, mode: Mode) -> Result<PubSub> {
        PubSub::spawn(Shared::new(Arc::new(info.clone()), dial, mode, true))
    }

    fn spawn(shared: Arc<Shared>) -> Result<PubSub> {
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("redlatch-pubsub".into())
            .spawn(move || thread_shared.run())
            .map_err(|e| Error::invalid(format!("cannot spawn the pub/sub thread: {e}")))?;
        Ok(PubSub {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Registers the calling thread as a waiter on a lock's `channel`, subscribing if needed.
    #[cfg(test)]
    fn register(&self, channel: &str) -> NodeWaiter {
        self.register_with(channel, Wake::Lock, 1).expect("open")
    }

    /// Registers a waiter on a channel whose messages wake as `wake` says; `need` is the
    /// number of permits the waiter waits for (1 unless `wake` is [`Wake::Permits`]).
    /// Every waiter of one channel must use the same `wake`. `None` once closed.
    #[cfg(test)]
    fn register_with(&self, channel: &str, wake: Wake, need: u32) -> Option<NodeWaiter> {
        self.shared.register(channel, &Interest::waiter(wake, need))
    }

    /// Shuts the connection down without waiting for the thread, which ends on its own once
    /// it notices (within a connect timeout). For connections dropped while the client lives,
    /// so that the registering thread that retires them never blocks on a dead node.
    fn detach(self) {
        drop(self.thread.lock().take());
    }

    /// Refuses registrations, closes the connection and joins the reader thread.
    fn shut(&self) {
        self.shared.close();
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl dispatcher::Subscriptions for PubSub {
    fn register(
        self: Arc<Self>,
        channel: &str,
        interest: Interest,
    ) -> Option<Box<dyn dispatcher::Registration>> {
        let waiter = self.shared.register(channel, &interest)?;
        Some(Box::new(waiter))
    }

    fn close(&self) {
        self.shut();
    }

    fn has_waiters(&self, channel: &str) -> bool {
        self.shared.has_waiters(channel)
    }
}

impl dispatcher::Registration for NodeWaiter {
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

impl PubSub {
    /// Drops the live connection: the reader reconnects (to wherever the target points now),
    /// resubscribes and wakes every waiter to re-check. For a Sentinel master switch.
    pub(crate) fn reconnect(&self) {
        self.shared.registry.lock().wire.resync();
    }
}

impl Drop for PubSub {
    fn drop(&mut self) {
        debug_assert!(
            self.shared
                .registry
                .lock()
                .channels
                .values()
                .all(|c| c.waiters.is_empty()),
            "pub/sub waiters leaked"
        );
        self.shut();
    }
}

impl Wire {
    /// Writes a subscribe or unsubscribe for one channel and updates its bookkeeping. Without
    /// a live connection nothing is written: the reader subscribes every channel with waiters
    /// when it reconnects.
    fn send(&mut self, command: Command, channel: &str, chan: &mut Chan) {
        let subscribe = command == Command::Subscribe;
        chan.sub_sent = subscribe;
        chan.subscribed = false;
        let Some(w) = &mut self.writer else { return };
        let bytes = redis::cmd(command.name(self.mode))
            .arg(channel)
            .get_packed_command();
        match (&*w).write_all(&bytes) {
            Ok(()) => {
                chan.pending += 1;
                if self.mode == Mode::Sharded {
                    self.inflight.push_back((command, channel.to_owned()));
                }
            }
            Err(e) => {
                log::debug!("pub/sub write failed ({e}); the reader will reconnect");
                w.shutdown();
                self.writer = None;
                if !subscribe {
                    chan.sub_sent = false;
                }
            }
        }
    }

    /// Closes the live connection: the reader sees its read fail, then reconnects, subscribes
    /// every channel with waiters and wakes them all. For when the replies no longer match
    /// what was written: starting over is the only state both sides agree on.
    fn resync(&mut self) {
        if let Some(w) = self.writer.take() {
            w.shutdown();
        }
    }
}

fn wake_one(chan: &Chan) {
    wake_one_but(chan, None);
}

/// As [`wake_one`], passing over waiter `skip`.
fn wake_one_but(chan: &Chan, skip: Option<u64>) {
    // A full slot already means "re-check": give the token to the first waiter without one.
    let waiters = chan.waiters.iter().filter(|w| w.heard.is_none());
    for w in waiters.filter(|w| Some(w.id) != skip) {
        if w.tx.try_send(()).is_ok() {
            return;
        }
    }
}

fn wake_all(chan: &Chan) {
    for w in &chan.waiters {
        let _ = w.tx.try_send(());
    }
}

/// Wakes waiters, in registration order, whose needs fit in `available` permits. A waiter
/// that already has a wake-up pending counts against the permits too; one that needs more
/// than what is left is passed over so that smaller needs behind it are served. `skip` is the
/// waiter reporting the count (it has just re-checked).
///
/// No wake-up is lost: every release publishes the new count, and every waiter that re-checks
/// reports the count it saw through [`NodeWaiter::observed`], which wakes the next ones.
fn wake_permits(chan: &Chan, available: i64, skip: Option<u64>) {
    let mut left = available;
    for w in &chan.waiters {
        if left <= 0 {
            return;
        }
        if Some(w.id) == skip || w.heard.is_some() {
            continue;
        }
        let need = i64::from(w.need);
        if w.tx.is_full() || (need <= left && w.tx.try_send(()).is_ok()) {
            left -= need;
        }
    }
}

/// A cluster node no longer serves the channel (or never did, or failed). Nothing is subscribed
/// any more, and every waiter is told so and woken, to ask where the channel went and
/// re-check the lock: a message published meanwhile went to the new owner.
fn mark_moved(chan: &mut Chan) {
    chan.sub_sent = false;
    chan.subscribed = false;
    let now = Instant::now();
    for w in &chan.waiters {
        w.moved.report(now);
        let _ = w.tx.try_send(());
    }
}

impl Registry {
    fn new(mode: Mode) -> Registry {
        Registry {
            wire: Wire {
                mode,
                writer: None,
                inflight: VecDeque::new(),
            },
            channels: HashMap::new(),
            next_id: 0,
            shutdown: false,
        }
    }

    /// A `subscribe`-family reply for `channel` (`kind` is its first element). In sharded
    /// mode it is first matched against the oldest command awaiting a reply: a `sunsubscribe`
    /// that answers none is the node dropping the channel
    /// ([`unsubscribed_by_server`](Self::unsubscribed_by_server)); any other mismatch means
    /// the bookkeeping is off, and the connection starts over. (An unsolicited `sunsubscribe`
    /// that arrives while our own SUNSUBSCRIBE of the same channel awaits its reply cannot be
    /// told from that reply: it is taken as the reply, and the real one then looks
    /// unsolicited, which is harmless, or, if it is `-MOVED`, is attributed to the next
    /// command, whose own reply then mismatches and the connection starts over.)
    fn reply(&mut self, kind: &str, channel: &str) {
        if self.wire.mode == Mode::Sharded {
            let command = match kind {
                "ssubscribe" => Command::Subscribe,
                "sunsubscribe" => Command::Unsubscribe,
                _ => {
                    log::warn!("sharded pub/sub got a `{kind}` reply for `{channel}`; resyncing");
                    return self.wire.resync();
                }
            };
            let answers = self
                .wire
                .inflight
                .front()
                .is_some_and(|(c, name)| *c == command && name == channel);
            if !answers {
                if command == Command::Unsubscribe {
                    return self.unsubscribed_by_server(channel);
                }
                log::warn!(
                    "sharded pub/sub: `{kind} {channel}` does not answer the oldest command \
                     written ({:?}); resyncing",
                    self.wire.inflight.front()
                );
                return self.wire.resync();
            }
            self.wire.inflight.pop_front();
        }
        let Some(chan) = self.channels.get_mut(channel) else {
            return;
        };
        chan.pending = chan.pending.saturating_sub(1);
        if chan.pending == 0 {
            if chan.sub_sent && !chan.subscribed {
                chan.subscribed = true;
                for w in &chan.waiters {
                    w.moved.clear();
                }
                wake_all(chan);
            } else if chan.waiters.is_empty() {
                self.channels.remove(channel);
            }
        }
    }

    /// Sharded mode: an unsolicited `sunsubscribe`, sent by Redis 7 for every shard channel of
    /// a slot that migrates away or whose node is demoted to replica.
    fn unsubscribed_by_server(&mut self, channel: &str) {
        let Some(chan) = self.channels.get_mut(channel) else {
            return;
        };
        if chan.sub_sent && chan.pending > 0 {
            // A subscribe written since is still unanswered: the node processes it after it
            // dropped the channel, so its reply (a confirmation or `-MOVED`) tells the truth.
            log::debug!("sharded pub/sub: `{channel}` dropped by the node; a subscribe is pending");
            return;
        }
        log::debug!(
            "sharded pub/sub: `{channel}` dropped by the node (slot moved); waking its waiters"
        );
        mark_moved(chan);
        if chan.pending == 0 && chan.waiters.is_empty() {
            self.channels.remove(channel);
        }
    }

    /// Sharded mode: an error reply, which answers the oldest command written. A refused
    /// subscribe (`-MOVED`: another node owns the slot; or `-CLUSTERDOWN` and the like) marks
    /// the channel moved; a refused unsubscribe leaves nothing subscribed either way.
    fn refused(&mut self, error: &redis::ServerError) {
        let Some((command, channel)) = self.wire.inflight.pop_front() else {
            log::warn!("sharded pub/sub: error reply `{error}` answers no command; resyncing");
            return self.wire.resync();
        };
        let Some(chan) = self.channels.get_mut(&channel) else {
            return;
        };
        chan.pending = chan.pending.saturating_sub(1);
        if command == Command::Subscribe {
            if error.kind() == Some(redis::ServerErrorKind::Moved) {
                log::debug!(
                    "sharded pub/sub: SSUBSCRIBE {channel} refused ({error}); waking its waiters"
                );
            } else {
                log::warn!(
                    "sharded pub/sub: SSUBSCRIBE {channel} refused ({error}); waking its waiters"
                );
            }
            mark_moved(chan);
        }
        if chan.pending == 0 && chan.waiters.is_empty() {
            self.channels.remove(&channel);
        }
    }
}

impl Shared {
    fn new(target: Arc<dyn Address>, dial: Dial, mode: Mode, placed: bool) -> Arc<Shared> {
        let (stop_tx, stop_rx) = bounded(1);
        Arc::new(Shared {
            target,
            mode,
            placed,
            dial,
            registry: Mutex::new(Registry::new(mode)),
            stop_tx,
            stop_rx,
        })
    }

    /// Registers a waiter (see [`PubSub::register_with`]); `None` once the connection is shut
    /// down, so that the sharded dispatcher opens a new one instead.
    fn register(self: &Arc<Self>, channel: &str, interest: &Interest) -> Option<NodeWaiter> {
        let wake = interest.wake;
        let (tx, rx) = bounded(1);
        let moved = Moved::default();
        let mut reg = self.registry.lock();
        if reg.shutdown {
            return None;
        }
        let id = reg.next_id;
        reg.next_id += 1;
        let Registry { wire, channels, .. } = &mut *reg;
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
            moved: moved.clone(),
        });
        Some(NodeWaiter {
            shared: Arc::clone(self),
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

    /// Removes waiter `id`. Unless it `succeeded`, a wake-up it got and did not use (still in
    /// its slot, or taken but not followed by a completed attempt) goes to another waiter: it
    /// may be the one an unlock meant for somebody. The slot is checked under the registry
    /// lock, so a message the reader routes concurrently is seen here or not given to us.
    /// A waiter that leaves because its channel moved (`hand_on` false) hands nothing on: it
    /// re-checks itself, and every other waiter of the channel was told of the move too.
    fn unregister(&self, waiter: &NodeWaiter) {
        let mut reg = self.registry.lock();
        let token = waiter.rx.try_recv().is_ok();
        let (channel, id) = (waiter.channel.as_str(), waiter.id);
        let Registry { wire, channels, .. } = &mut *reg;
        let Some(chan) = channels.get_mut(channel) else {
            debug_assert!(false, "waiter of unknown channel {channel}");
            return;
        };
        // A semaphore waiter that got its permits still hands on a wake-up that arrived after
        // its last attempt began: it may announce permits that attempt did not see.
        let owed = waiter.hand_on
            && match chan.wake {
                Wake::Permits => token || (!waiter.succeeded && waiter.unused_wake),
                _ => !waiter.succeeded && (token || waiter.unused_wake),
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

    /// Whether a waiter (not an observer) is registered on `channel`.
    fn has_waiters(&self, channel: &str) -> bool {
        let reg = self.registry.lock();
        reg.channels
            .get(channel)
            .is_some_and(|c| c.waiters.iter().any(|w| w.heard.is_none()))
    }

    /// True when no channel is registered: nothing waits here and no reply is owed.
    fn is_idle(&self) -> bool {
        self.registry.lock().channels.is_empty()
    }

    /// Shuts the connection down if it is idle, atomically with respect to registrations
    /// (which then get `None` and go elsewhere). True if it was shut down.
    fn retire_if_idle(&self) -> bool {
        {
            let mut reg = self.registry.lock();
            if !reg.channels.is_empty() {
                return false;
            }
            reg.shutdown = true;
            reg.wire.resync();
        }
        let _ = self.stop_tx.try_send(());
        true
    }

    /// Refuses further registrations, closes the connection and wakes the thread out of its
    /// back-off, so that it ends.
    fn close(&self) {
        {
            let mut reg = self.registry.lock();
            // Waiters still registered (a client closing): their alarm is up, wake them.
            for chan in reg.channels.values() {
                wake_all(chan);
            }
            reg.shutdown = true;
            reg.wire.resync();
        }
        let _ = self.stop_tx.try_send(());
    }

    fn run(&self) {
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.connect() {
                Ok(stream) => {
                    backoff = Duration::from_millis(50);
                    let Some(reader) = self.install(&stream) else {
                        return;
                    };
                    self.read_loop(reader);
                    if self.disconnected() {
                        return;
                    }
                    self.dial.metrics.reconnected();
                    log::warn!(
                        "pub/sub connection to {} lost; reconnecting and waking waiters",
                        self.target.describe()
                    );
                }
                Err(e) => {
                    log::debug!("pub/sub connect to {} failed: {e}", self.target.describe());
                    if self.connect_failed() {
                        return;
                    }
                    if self.stop_rx.recv_timeout(backoff).is_ok() {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// After a failed connect. A cluster node may be gone for good (its replica was
    /// promoted): every waiter not yet told is told its channel moved, and woken, so that it
    /// asks the locator again instead of waiting for a node that may never come back.
    /// True on shutdown.
    fn connect_failed(&self) -> bool {
        let reg = self.registry.lock();
        if self.placed {
            let now = Instant::now();
            for chan in reg.channels.values() {
                for w in &chan.waiters {
                    if w.moved.report_first(now) {
                        let _ = w.tx.try_send(());
                    }
                }
            }
        }
        reg.shutdown
    }

    fn connect(&self) -> Result<Stream> {
        let info = self
            .target
            .resolve(self.dial.connect_timeout, self.dial.response_timeout)?;
        self.dial.open(&info)
    }

    /// Makes `stream` the live connection and subscribes every channel that has waiters.
    /// Returns the read side, or `None` when the handle is shutting down.
    fn install(&self, stream: &Stream) -> Option<Stream> {
        let reader = stream.try_clone().ok()?;
        let mut reg = self.registry.lock();
        if reg.shutdown {
            return None;
        }
        // A server that stops reading must not block registrations (and the registry mutex)
        // for longer than a reply may take: a write that times out counts as a disconnect.
        reg.wire.writer = stream.try_clone().ok().filter(|w| {
            w.set_write_timeout(Some(self.dial.response_timeout))
                .is_ok()
        });
        reg.wire.inflight.clear();
        let Registry { wire, channels, .. } = &mut *reg;
        for (name, chan) in channels.iter_mut() {
            if !chan.waiters.is_empty() {
                wire.send(Command::Subscribe, name, chan);
            }
        }
        Some(reader)
    }

    fn read_loop(&self, reader: Stream) {
        let mut parser = redis::Parser::new();
        loop {
            match parser.parse_value(&reader) {
                Ok(value) => self.route(value),
                Err(e) => {
                    log::debug!("pub/sub read ended: {e}");
                    return;
                }
            }
        }
    }

    /// Forgets the dead connection and wakes every waiter to re-check. On a cluster node
    /// every channel also counts as moved: the node may have failed over, and its waiters
    /// ask the locator where the slot is now. True on shutdown.
    fn disconnected(&self) -> bool {
        let mut reg = self.registry.lock();
        reg.wire.resync();
        reg.wire.inflight.clear();
        let placed = self.placed;
        reg.channels.retain(|_, chan| {
            chan.pending = 0;
            if placed {
                mark_moved(chan);
            } else {
                chan.sub_sent = false;
                chan.subscribed = false;
                wake_all(chan);
            }
            !chan.waiters.is_empty()
        });
        reg.shutdown
    }

    /// Routes one value read from the connection: a message to the waiters it wakes, a
    /// subscribe-family reply to the bookkeeping, and (sharded mode) an error reply to the
    /// command it answers.
    fn route(&self, value: Value) {
        let parts = match value {
            Value::Array(parts) => parts,
            Value::Push { data, .. } => data,
            Value::ServerError(error) if self.mode == Mode::Sharded => {
                return self.registry.lock().refused(&error);
            }
            other => {
                log::debug!("pub/sub: ignoring {other:?}");
                return;
            }
        };
        let text = |v: &Value| match v {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        };
        let (Some(kind), Some(channel)) =
            (parts.first().and_then(text), parts.get(1).and_then(text))
        else {
            return;
        };
        let mut reg = self.registry.lock();
        match kind.as_str() {
            "message" | "smessage" => {
                let Some(chan) = reg.channels.get_mut(&channel) else {
                    return;
                };
                for w in &chan.waiters {
                    if let Some(heard) = &w.heard {
                        // Full: the observer has messages to read, and re-reads state then.
                        let _ = heard.try_send(Heard {
                            channel: channel.clone(),
                        });
                    }
                }
                let payload = parts.get(2).and_then(text);
                match (chan.wake, payload.as_deref()) {
                    (Wake::Lock, Some("0")) => wake_one(chan),
                    (Wake::Permits, Some(n)) => match n.parse::<i64>() {
                        Ok(n) if n > 0 => wake_permits(chan, n, None),
                        // No permit free, but something changed (a lease shortened, permits
                        // taken away): one waiter re-checks and re-reads its wait bound.
                        Ok(_) => wake_one(chan),
                        Err(_) => wake_all(chan),
                    },
                    _ => wake_all(chan),
                }
            }
            "subscribe" | "unsubscribe" | "ssubscribe" | "sunsubscribe" => {
                reg.reply(&kind, &channel);
            }
            _ => {}
        }
    }
}

/// A thread registered on a channel of one connection; unregisters (and unsubscribes if
/// last) on drop. The client's call sites use it through [`Waiter`](dispatcher::Waiter), which may move it to
/// another node.
pub(crate) struct NodeWaiter {
    shared: Arc<Shared>,
    channel: String,
    id: u64,
    /// The slot's sending side, armed for interrupts while the waiter blocks.
    tx: Sender<()>,
    rx: Receiver<()>,
    /// See `Entry::moved`.
    moved: Moved,
    /// Took a wake-up from its slot and has not completed an attempt since.
    unused_wake: bool,
    succeeded: bool,
    /// Whether an unused wake-up goes to another waiter on drop (see [`Shared::unregister`]).
    hand_on: bool,
}

impl NodeWaiter {
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
        let reg = self.shared.registry.lock();
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
        let reg = self.shared.registry.lock();
        if let Some(chan) = reg.channels.get(&self.channel) {
            wake_permits(chan, available, Some(self.id));
        }
    }

    /// Sharded mode: the node said, since this waiter registered or since the channel's last
    /// confirmation, that it does not serve the channel (or the connection failed).
    #[cfg(test)]
    fn moved(&self) -> bool {
        self.moved.get().is_some()
    }

    /// When the move [`moved`](Self::moved) tells of was reported.
    fn moved_at(&self) -> Option<Instant> {
        self.moved.get()
    }

    /// Takes over what `old` knew before a move: a wake-up it took (or still had in its
    /// slot) and did not use, and whether its attempt succeeded.
    fn inherit(&mut self, old: &NodeWaiter) {
        self.unused_wake |= old.unused_wake || old.rx.try_recv().is_ok();
        self.succeeded |= old.succeeded;
    }

    /// Leaves a channel that moved away, handing nothing on (see [`Shared::unregister`]).
    fn leave_moved(mut self) {
        self.hand_on = false;
    }
}

#[cfg(test)]
impl NodeWaiter {
    /// The sending side of this waiter's slot, as the reader would use it.
    fn tx_for_test(&self) -> Sender<()> {
        let reg = self.shared.registry.lock();
        let chan = &reg.channels[&self.channel];
        let entry = chan.waiters.iter().find(|w| w.id == self.id).unwrap();
        entry.tx.clone()
    }
}

impl Drop for NodeWaiter {
    fn drop(&mut self) {
        self.shared.unregister(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interrupt::Interrupter;

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
}
