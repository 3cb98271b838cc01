//! One pub/sub connection ([`PubSub`]) and its reader thread: connecting (and reconnecting,
//! resubscribing and waking every waiter), reading, checking between reads that the
//! connection is alive while anything is registered on it (a `PING` per interval: see
//! [`liveness`](super::liveness); a silent connection is dropped as a broken one), and
//! routing each message to the waiters of its channel through the registry.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use redis::{ConnectionInfo, Value};

use crate::error::{Error, Result};
use crate::net::{Dial, Stream};

use super::dispatcher;
use super::liveness::Tended;
use super::node_waiter::NodeWaiter;
use super::registry::{mark_moved, wake_all, wake_one, wake_permits, Command, Registry};
use super::vocabulary::{Address, Interest, Mode, Wake};

/// Handle on one pub/sub connection and its reader thread; dropping it stops the thread and
/// closes the connection.
pub(crate) struct PubSub {
    pub(super) shared: Arc<Shared>,
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
}

/// What the handle, its reader thread and its waiters share.
pub(super) struct Shared {
    /// Where to connect: looked up again on every reconnect (Sentinel follows failovers).
    pub(super) target: Arc<dyn Address>,
    pub(super) mode: Mode,
    /// A node connection of the cluster dispatcher: when it fails (or cannot connect), its
    /// waiters are told their channel moved, to ask the locator where to go, since the node
    /// may be gone for good. Otherwise the connection reconnects to its `target`.
    pub(super) placed: bool,
    pub(super) dial: Dial,
    pub(super) registry: Arc<Mutex<Registry>>,
    /// Wakes the thread out of its reconnect back-off when the handle is dropped.
    pub(super) stop_tx: Sender<()>,
    pub(super) stop_rx: Receiver<()>,
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

    pub(super) fn spawn(shared: Arc<Shared>) -> Result<PubSub> {
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
    pub(super) fn register(&self, channel: &str) -> NodeWaiter {
        self.register_with(channel, Wake::Lock, 1).expect("open")
    }

    /// Registers a waiter on a channel whose messages wake as `wake` says; `need` is the
    /// number of permits the waiter waits for (1 unless `wake` is [`Wake::Permits`]).
    /// Every waiter of one channel must use the same `wake`. `None` once closed.
    #[cfg(test)]
    pub(super) fn register_with(&self, channel: &str, wake: Wake, need: u32) -> Option<NodeWaiter> {
        self.shared.register(channel, &Interest::waiter(wake, need))
    }

    /// Shuts the connection down without waiting for the thread, which ends on its own once
    /// it notices (within a connect timeout). For connections dropped while the client lives,
    /// so that the registering thread that retires them never blocks on a dead node.
    pub(super) fn detach(self) {
        drop(self.thread.lock().take());
    }

    /// Refuses registrations, closes the connection and joins the reader thread.
    pub(super) fn shut(&self) {
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

impl Shared {
    pub(super) fn new(
        target: Arc<dyn Address>,
        dial: Dial,
        mode: Mode,
        placed: bool,
    ) -> Arc<Shared> {
        let (stop_tx, stop_rx) = bounded(1);
        let registry = Registry::new(mode, dial.ping_interval);
        Arc::new(Shared {
            target,
            mode,
            placed,
            dial,
            registry: Arc::new(Mutex::new(registry)),
            stop_tx,
            stop_rx,
        })
    }

    /// Registers a waiter (see [`PubSub::register_with`]); `None` once the connection is shut
    /// down, so that the sharded dispatcher opens a new one instead.
    pub(super) fn register(
        self: &Arc<Self>,
        channel: &str,
        interest: &Interest,
    ) -> Option<NodeWaiter> {
        NodeWaiter::register(&self.registry, channel, interest)
    }

    /// Whether a waiter (not an observer) is registered on `channel`.
    pub(super) fn has_waiters(&self, channel: &str) -> bool {
        let reg = self.registry.lock();
        reg.channels
            .get(channel)
            .is_some_and(|c| c.waiters.iter().any(|w| w.heard.is_none()))
    }

    /// True when no channel is registered: nothing waits here and no reply is owed.
    pub(super) fn is_idle(&self) -> bool {
        self.registry.lock().channels.is_empty()
    }

    /// Shuts the connection down if it is idle, atomically with respect to registrations
    /// (which then get `None` and go elsewhere). True if it was shut down.
    pub(super) fn retire_if_idle(&self) -> bool {
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
    pub(super) fn close(&self) {
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

    pub(super) fn run(&self) {
        let mut backoff = Duration::from_millis(50);
        // Whether the server was out of sight (a connection ended, or one could not be made):
        // the next connection is a reconnect. A thread that started late may find the server
        // down at its first try: that counts too.
        let mut lost = false;
        let mut first = true;
        loop {
            match self.connect() {
                Ok(stream) => {
                    backoff = Duration::from_millis(50);
                    let Some(reader) = self.install(&stream) else {
                        return;
                    };
                    if let Some(reconnected) = &self.dial.reconnected {
                        // Back after a loss: whatever else the server lost, it is checked
                        // now. A cluster node's connection comes and goes with its waiters:
                        // its first says nothing about the client's locks.
                        if lost {
                            reconnected(false);
                        } else if first && !self.placed {
                            reconnected(true);
                        }
                    }
                    first = false;
                    self.read_loop(reader);
                    if self.disconnected() {
                        return;
                    }
                    lost = true;
                    self.dial.metrics.reconnected();
                    log::warn!(
                        "pub/sub connection to {} lost; reconnecting and waking waiters",
                        self.target.describe()
                    );
                }
                Err(e) => {
                    lost = true;
                    log::debug!("pub/sub connect to {} failed: {e}", self.target.describe());
                    if self.connect_failed() {
                        return;
                    }
                    if self.stop_rx.recv_timeout(backoff).is_ok() {
                        return;
                    }
                    // At most half a second apart: a restarted server is seen again (and the
                    // client's holds checked) within that.
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    /// After a failed connect. A cluster node may be gone for good (its replica was
    /// promoted): every waiter not yet told is told its channel moved, and woken, so that it
    /// asks the locator again instead of waiting for a node that may never come back.
    /// True on shutdown.
    pub(super) fn connect_failed(&self) -> bool {
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

    pub(super) fn connect(&self) -> Result<Stream> {
        let info = self
            .target
            .resolve(self.dial.connect_timeout, self.dial.response_timeout)?;
        self.dial.open(&info)
    }

    /// Makes `stream` the live connection and subscribes every channel that has waiters.
    /// Returns the read side, or `None` when the handle is shutting down.
    pub(super) fn install(&self, stream: &Stream) -> Option<Stream> {
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
        reg.wire.liveness.restart(Instant::now());
        let Registry { wire, channels, .. } = &mut *reg;
        for (name, chan) in channels.iter_mut() {
            if !chan.waiters.is_empty() {
                wire.send(Command::Subscribe, name, chan);
            }
        }
        Some(reader)
    }

    /// Reads and routes until the connection breaks or falls silent (see [`tend`](Self::tend)).
    pub(super) fn read_loop(&self, reader: Stream) {
        let mut parser = redis::Parser::new();
        let mut tended = Tended {
            stream: &reader,
            tend: || self.tend(),
        };
        loop {
            match parser.parse_value(&mut tended) {
                Ok(value) => self.route(value),
                Err(e) => {
                    log::debug!("pub/sub read ended: {e}");
                    return;
                }
            }
        }
    }

    /// Between reads: sends a `PING` when one is due (only while anything is registered), and
    /// says how long the next read may block. A connection whose `PING` went unanswered for
    /// an interval is silent: the read fails, and the reader drops the connection, makes it
    /// anew and wakes every waiter, as after any break.
    pub(super) fn tend(&self) -> std::io::Result<Duration> {
        let mut reg = self.registry.lock();
        let active = !reg.channels.is_empty();
        reg.wire.tend(Instant::now(), active).map_err(|silent| {
            log::warn!(
                "pub/sub connection to {} silent: PING unanswered after {silent:?}; \
                 dropping it",
                self.target.describe()
            );
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("PING unanswered after {silent:?}"),
            )
        })
    }

    /// Forgets the dead connection and wakes every waiter to re-check. On a cluster node
    /// every channel also counts as moved: the node may have failed over, and its waiters
    /// ask the locator where the slot is now. True on shutdown.
    pub(super) fn disconnected(&self) -> bool {
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
    pub(super) fn route(&self, value: Value) {
        let parts = match value {
            Value::Array(parts) => parts,
            Value::Push { data, .. } => data,
            Value::ServerError(error) if self.mode == Mode::Sharded => {
                return self.registry.lock().refused(&error);
            }
            // A PING's answer on a connection with no subscription (or in RESP3).
            Value::SimpleString(s) if s.eq_ignore_ascii_case("PONG") => {
                return self.registry.lock().ponged();
            }
            // Plain mode remembers no command: an error (a PING refused by an ACL) at least
            // shows that the server reads and answers.
            Value::ServerError(error) => {
                let mut reg = self.registry.lock();
                if reg.wire.liveness.is_owed() {
                    log::debug!("pub/sub: error reply `{error}` taken as the PING's answer");
                    reg.wire.liveness.answered();
                }
                return;
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
                    if let Some(ear) = &w.heard {
                        ear.hear(&channel);
                    }
                }
                let payload = parts.get(2).and_then(text);
                match (chan.wake, payload.as_deref()) {
                    (Wake::Lock, Some("0")) => {
                        wake_one(chan);
                        for w in chan.waiters.iter().filter(|w| w.every) {
                            let _ = w.tx.try_send(());
                        }
                    }
                    (Wake::Permits, Some(n)) => {
                        match n.parse::<i64>() {
                            Ok(n) if n > 0 => wake_permits(chan, n, None),
                            // No permit free, but something changed (a lease shortened,
                            // permits taken away): one waiter re-checks and re-reads its
                            // wait bound.
                            Ok(_) => wake_one(chan),
                            Err(_) => wake_all(chan),
                        }
                        for w in chan.waiters.iter().filter(|w| w.every) {
                            let _ = w.tx.try_send(());
                        }
                    }
                    _ => wake_all(chan),
                }
            }
            "subscribe" | "unsubscribe" | "ssubscribe" | "sunsubscribe" => {
                reg.reply(&kind, &channel);
            }
            // A PING's answer on a subscribed RESP2 connection: `["pong", ""]`.
            "pong" => reg.ponged(),
            _ => {}
        }
    }
}
