//! The pub/sub dispatcher: one dedicated connection and one thread per client.
//!
//! The thread owns the read side of the socket and blocks on it; SUBSCRIBE and UNSUBSCRIBE are
//! written by the registering thread on a cloned write side, under the registry mutex, so that
//! the order of commands on the wire is the order of registry changes. The reader routes
//! confirmations and messages to waiters through `crossbeam_channel` slots of capacity one:
//! a token in the slot means "re-check the lock now".
//!
//! A waiter re-checks only after the server confirmed its channel (`Chan::subscribed`), so an
//! unlock published between its failed attempt and its subscription cannot be missed. Every
//! SUBSCRIBE/UNSUBSCRIBE written is counted in `Chan::pending` until its confirmation arrives;
//! the channel is confirmed when no command is pending and the last one written was SUBSCRIBE.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use redis::Value;

use crate::error::{Error, Result};
use crate::target::Target;

/// Handle kept by the client; dropping it stops the thread and closes the connection.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    /// Where to connect: looked up again on every reconnect (Sentinel follows failovers).
    target: Arc<Target>,
    connect_timeout: Duration,
    response_timeout: Duration,
    registry: Mutex<Registry>,
    /// Wakes the thread out of its reconnect back-off when the client is dropped.
    stop_tx: Sender<()>,
    stop_rx: Receiver<()>,
}

#[derive(Default)]
struct Registry {
    /// Write side of the live connection; `None` while disconnected.
    writer: Option<TcpStream>,
    channels: HashMap<String, Chan>,
    next_id: u64,
    shutdown: bool,
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

struct Entry {
    id: u64,
    tx: Sender<()>,
    /// Permits this waiter needs (1 for locks and latches).
    need: u32,
}

#[derive(Default)]
struct Chan {
    wake: Wake,
    waiters: VecDeque<Entry>,
    /// SUBSCRIBE/UNSUBSCRIBE commands written on this connection and not yet confirmed.
    pending: u32,
    /// The last command written on this connection for the channel was SUBSCRIBE.
    sub_sent: bool,
    /// The server confirmed the subscription and nothing is pending: messages will arrive.
    subscribed: bool,
}

impl PubSub {
    pub(crate) fn start(
        target: Arc<Target>,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<PubSub> {
        let (stop_tx, stop_rx) = bounded(1);
        let shared = Arc::new(Shared {
            target,
            connect_timeout,
            response_timeout,
            registry: Mutex::new(Registry::default()),
            stop_tx,
            stop_rx,
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("redlatch-pubsub".into())
            .spawn(move || thread_shared.run())
            .map_err(|e| Error::invalid(format!("cannot spawn the pub/sub thread: {e}")))?;
        Ok(PubSub {
            shared,
            thread: Some(thread),
        })
    }

    /// Registers the calling thread as a waiter on a lock's `channel`, subscribing if needed.
    ///
    /// The returned waiter is woken once the subscription is confirmed, on each message for the
    /// channel (one waiter for `0`, all for anything else), and after every reconnect.
    pub(crate) fn register(&self, channel: &str) -> Waiter<'_> {
        self.register_with(channel, Wake::Lock, 1)
    }

    /// Registers a waiter on a channel whose messages wake as `wake` says; `need` is the
    /// number of permits the waiter waits for (1 unless `wake` is [`Wake::Permits`]).
    /// Every waiter of one channel must use the same `wake`.
    pub(crate) fn register_with(&self, channel: &str, wake: Wake, need: u32) -> Waiter<'_> {
        let (tx, rx) = bounded(1);
        let mut reg = self.shared.registry.lock();
        let id = reg.next_id;
        reg.next_id += 1;
        let Registry {
            writer, channels, ..
        } = &mut *reg;
        let chan = channels.entry(channel.to_owned()).or_insert_with(|| Chan {
            wake,
            ..Chan::default()
        });
        debug_assert_eq!(chan.wake, wake, "one wake mode per channel");
        if chan.subscribed {
            // Confirmed already: the caller may re-check at once.
            let _ = tx.try_send(());
        } else if !chan.sub_sent {
            send(writer, "SUBSCRIBE", channel, chan);
        }
        chan.waiters.push_back(Entry { id, tx, need });
        Waiter {
            pubsub: self,
            channel: channel.to_owned(),
            id,
            rx,
            unused_wake: false,
            succeeded: false,
        }
    }

    /// Removes waiter `id`. Unless it `succeeded`, a wake-up it got and did not use (still in
    /// its slot, or taken but not followed by a completed attempt) goes to another waiter: it
    /// may be the one an unlock meant for somebody. The slot is checked under the registry
    /// lock, so a message the reader routes concurrently is seen here or not given to us.
    fn unregister(&self, waiter: &Waiter<'_>) {
        let mut reg = self.shared.registry.lock();
        let token = waiter.rx.try_recv().is_ok();
        let (channel, id) = (waiter.channel.as_str(), waiter.id);
        let Registry {
            writer, channels, ..
        } = &mut *reg;
        let Some(chan) = channels.get_mut(channel) else {
            debug_assert!(false, "waiter of unknown channel {channel}");
            return;
        };
        // A semaphore waiter that got its permits still hands on a wake-up that arrived after
        // its last attempt began: it may announce permits that attempt did not see.
        let owed = match chan.wake {
            Wake::Permits => token || (!waiter.succeeded && waiter.unused_wake),
            _ => !waiter.succeeded && (token || waiter.unused_wake),
        };
        chan.waiters.retain(|w| w.id != id);
        if owed {
            wake_one(chan);
        }
        if chan.waiters.is_empty() {
            if chan.sub_sent {
                send(writer, "UNSUBSCRIBE", channel, chan);
            }
            if chan.pending == 0 {
                channels.remove(channel);
            }
        }
    }
}

impl PubSub {
    /// Drops the live connection: the reader reconnects (to wherever the target points
    /// now), resubscribes and wakes every waiter to re-check. For a master switch.
    pub(crate) fn reconnect(&self) {
        if let Some(w) = self.shared.registry.lock().writer.take() {
            let _ = w.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for PubSub {
    fn drop(&mut self) {
        {
            let mut reg = self.shared.registry.lock();
            debug_assert!(
                reg.channels.values().all(|c| c.waiters.is_empty()),
                "pub/sub waiters leaked"
            );
            reg.shutdown = true;
            if let Some(w) = reg.writer.take() {
                let _ = w.shutdown(Shutdown::Both);
            }
        }
        let _ = self.shared.stop_tx.try_send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes `SUBSCRIBE`/`UNSUBSCRIBE` for one channel and updates its bookkeeping. Without a
/// live connection nothing is written: the reader subscribes every channel with waiters
/// when it reconnects.
fn send(writer: &mut Option<TcpStream>, command: &str, channel: &str, chan: &mut Chan) {
    let subscribe = command == "SUBSCRIBE";
    chan.sub_sent = subscribe;
    chan.subscribed = false;
    let Some(w) = writer else { return };
    let bytes = redis::cmd(command).arg(channel).get_packed_command();
    match w.write_all(&bytes) {
        Ok(()) => chan.pending += 1,
        Err(e) => {
            log::debug!("pub/sub write failed ({e}); the reader will reconnect");
            let _ = w.shutdown(Shutdown::Both);
            *writer = None;
            if !subscribe {
                chan.sub_sent = false;
            }
        }
    }
}

fn wake_one(chan: &Chan) {
    wake_one_but(chan, None);
}

/// As [`wake_one`], passing over waiter `skip`.
fn wake_one_but(chan: &Chan, skip: Option<u64>) {
    // A full slot already means "re-check": give the token to the first waiter without one.
    for w in chan.waiters.iter().filter(|w| Some(w.id) != skip) {
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
/// reports the count it saw through [`Waiter::observed`], which wakes the next ones.
fn wake_permits(chan: &Chan, available: i64, skip: Option<u64>) {
    let mut left = available;
    for w in &chan.waiters {
        if left <= 0 {
            return;
        }
        if Some(w.id) == skip {
            continue;
        }
        let need = i64::from(w.need);
        if w.tx.is_full() || (need <= left && w.tx.try_send(()).is_ok()) {
            left -= need;
        }
    }
}

impl Shared {
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
                    log::warn!(
                        "pub/sub connection to {} lost; reconnecting and waking waiters",
                        self.target.describe()
                    );
                }
                Err(e) => {
                    log::debug!("pub/sub connect to {} failed: {e}", self.target.describe());
                    if self.registry.lock().shutdown {
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

    fn connect(&self) -> Result<TcpStream> {
        let io = |e: std::io::Error| Error::Connection(e.into());
        let info = self
            .target
            .resolve(self.connect_timeout, self.response_timeout)?;
        let (host, port) = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.as_str(), *port),
            other => return Err(Error::invalid(format!("not a plain TCP address: {other}"))),
        };
        let settings = info.redis_settings();
        let mut last = None;
        let mut connected = None;
        for addr in (host, port).to_socket_addrs().map_err(io)? {
            match TcpStream::connect_timeout(&addr, self.connect_timeout) {
                Ok(s) => {
                    connected = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = connected.ok_or_else(|| match last {
            Some(e) => io(e),
            None => Error::invalid(format!("cannot resolve {host}")),
        })?;
        stream.set_nodelay(true).map_err(io)?;
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            auth.arg(password);
            stream
                .set_read_timeout(Some(self.response_timeout))
                .map_err(io)?;
            (&stream)
                .write_all(&auth.get_packed_command())
                .map_err(io)?;
            match redis::Parser::new().parse_value(&stream) {
                Ok(Value::Okay) | Ok(Value::SimpleString(_)) => {}
                Ok(other) => return Err(Error::Protocol(format!("AUTH replied {other:?}"))),
                Err(e) => return Err(Error::from_redis(e, "")),
            }
            stream.set_read_timeout(None).map_err(io)?;
        }
        Ok(stream)
    }

    /// Makes `stream` the live connection and subscribes every channel that has waiters.
    /// Returns the read side, or `None` when the client is shutting down.
    fn install(&self, stream: &TcpStream) -> Option<TcpStream> {
        let reader = stream.try_clone().ok()?;
        let mut reg = self.registry.lock();
        if reg.shutdown {
            return None;
        }
        // A server that stops reading must not block registrations (and the registry mutex)
        // for longer than a reply may take: a write that times out counts as a disconnect.
        reg.writer = stream
            .try_clone()
            .ok()
            .filter(|w| w.set_write_timeout(Some(self.response_timeout)).is_ok());
        let Registry {
            writer, channels, ..
        } = &mut *reg;
        for (name, chan) in channels.iter_mut() {
            if !chan.waiters.is_empty() {
                send(writer, "SUBSCRIBE", name, chan);
            }
        }
        Some(reader)
    }

    fn read_loop(&self, reader: TcpStream) {
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

    /// Forgets the dead connection and wakes every waiter to re-check. True on shutdown.
    fn disconnected(&self) -> bool {
        let mut reg = self.registry.lock();
        if let Some(w) = reg.writer.take() {
            let _ = w.shutdown(Shutdown::Both);
        }
        reg.channels.retain(|_, chan| {
            chan.pending = 0;
            chan.sub_sent = false;
            chan.subscribed = false;
            wake_all(chan);
            !chan.waiters.is_empty()
        });
        reg.shutdown
    }

    fn route(&self, value: Value) {
        let parts = match value {
            Value::Array(parts) => parts,
            Value::Push { data, .. } => data,
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
        let Some(chan) = reg.channels.get_mut(&channel) else {
            return;
        };
        match kind.as_str() {
            "message" | "smessage" => {
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
                chan.pending = chan.pending.saturating_sub(1);
                if chan.pending == 0 {
                    if chan.sub_sent && !chan.subscribed {
                        chan.subscribed = true;
                        wake_all(chan);
                    } else if chan.waiters.is_empty() {
                        reg.channels.remove(&channel);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A thread registered on a channel; unregisters (and unsubscribes if last) on drop.
pub(crate) struct Waiter<'a> {
    pubsub: &'a PubSub,
    channel: String,
    id: u64,
    rx: Receiver<()>,
    /// Took a wake-up from its slot and has not completed an attempt since.
    unused_wake: bool,
    succeeded: bool,
}

impl Waiter<'_> {
    /// Blocks until woken or until `deadline`; true if woken. The caller reports the
    /// attempt that follows with [`attempted`](Self::attempted).
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> bool {
        let woken = self.rx.recv_deadline(deadline).is_ok();
        self.unused_wake |= woken;
        woken
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
        let reg = self.pubsub.shared.registry.lock();
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
        let reg = self.pubsub.shared.registry.lock();
        if let Some(chan) = reg.channels.get(&self.channel) {
            wake_permits(chan, available, Some(self.id));
        }
    }
}

#[cfg(test)]
impl Waiter<'_> {
    /// The sending side of this waiter's slot, as the reader would use it.
    fn tx_for_test(&self) -> Sender<()> {
        let reg = self.pubsub.shared.registry.lock();
        let chan = &reg.channels[&self.channel];
        let entry = chan.waiters.iter().find(|w| w.id == self.id).unwrap();
        entry.tx.clone()
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.pubsub.unregister(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chan_with(n: usize) -> (Chan, Vec<Receiver<()>>) {
        let mut chan = Chan::default();
        let mut rxs = Vec::new();
        for id in 0..n {
            let (tx, rx) = bounded(1);
            chan.waiters.push_back(Entry {
                id: id as u64,
                tx,
                need: 1,
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
        let target = Arc::new(Target::Fixed(info));
        PubSub::start(target, Duration::from_millis(50), Duration::from_millis(50)).unwrap()
    }

    fn message(channel: &str, payload: &str) -> Value {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        Value::Array(vec![bulk("message"), bulk(channel), bulk(payload)])
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
        assert!(a.wait_until(Instant::now()));
        drop(a); // taken, but no attempt completed (the attempt failed with an error)
        assert!(b.rx.try_recv().is_ok(), "handed on after a failed attempt");
        drop(b);
    }

    #[test]
    fn waiter_that_used_its_wake_up_hands_nothing_on() {
        let ps = offline();
        let mut a = ps.register("c");
        let b = ps.register("c");
        ps.shared.route(message("c", "0"));
        assert!(a.wait_until(Instant::now()));
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
        let mut big = ps.register_with("s", Wake::Permits, 3);
        let small = ps.register_with("s", Wake::Permits, 1);
        big.tx_for_test().try_send(()).unwrap(); // e.g. the subscription confirmation
        ps.shared.route(message("s", "1"));
        assert!(small.rx.try_recv().is_err(), "the pending wake-up counted");
        assert!(big.wait_until(Instant::now()));
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
        let mut a = ps.register_with("s", Wake::Permits, 1);
        let b = ps.register_with("s", Wake::Permits, 1);
        ps.shared.route(message("s", "1"));
        assert!(a.wait_until(Instant::now()));
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
}
