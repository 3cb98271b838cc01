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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use redis::Value;

use crate::error::{Error, Result};

/// Handle kept by the client; dropping it stops the thread and closes the connection.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    host: String,
    port: u16,
    username: Option<String>,
    password: Option<String>,
    connect_timeout: Duration,
    response_timeout: Duration,
    registry: Mutex<Registry>,
    /// Wakes the thread out of its reconnect back-off when the client is dropped.
    stop_tx: Sender<()>,
    stop_rx: Receiver<()>,
    reconnects: AtomicU64,
}

#[derive(Default)]
struct Registry {
    /// Write side of the live connection; `None` while disconnected.
    writer: Option<TcpStream>,
    channels: HashMap<String, Chan>,
    next_id: u64,
    shutdown: bool,
}

#[derive(Default)]
struct Chan {
    waiters: VecDeque<(u64, Sender<()>)>,
    /// SUBSCRIBE/UNSUBSCRIBE commands written on this connection and not yet confirmed.
    pending: u32,
    /// The last command written on this connection for the channel was SUBSCRIBE.
    sub_sent: bool,
    /// The server confirmed the subscription and nothing is pending: messages will arrive.
    subscribed: bool,
}

impl PubSub {
    pub(crate) fn start(
        info: &redis::ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<PubSub> {
        let (host, port) = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            other => {
                return Err(Error::invalid(format!(
                    "only plain TCP addresses are supported yet, not {other:?}"
                )))
            }
        };
        let settings = info.redis_settings();
        let (stop_tx, stop_rx) = bounded(1);
        let shared = Arc::new(Shared {
            host,
            port,
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
            connect_timeout,
            response_timeout,
            registry: Mutex::new(Registry::default()),
            stop_tx,
            stop_rx,
            reconnects: AtomicU64::new(0),
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

    /// Registers the calling thread as a waiter on `channel`, subscribing if needed.
    ///
    /// The returned waiter is woken once the subscription is confirmed, on each message for the
    /// channel (one waiter for `0`, all for anything else), and after every reconnect.
    pub(crate) fn register(&self, channel: &str) -> Waiter<'_> {
        let (tx, rx) = bounded(1);
        let mut reg = self.shared.registry.lock();
        let id = reg.next_id;
        reg.next_id += 1;
        let Registry {
            writer, channels, ..
        } = &mut *reg;
        let chan = channels.entry(channel.to_owned()).or_default();
        chan.waiters.push_back((id, tx.clone()));
        if chan.subscribed {
            // Confirmed already: the caller may re-check at once.
            let _ = tx.try_send(());
        } else if !chan.sub_sent {
            send(writer, "SUBSCRIBE", channel, chan);
        }
        Waiter {
            pubsub: self,
            channel: channel.to_owned(),
            id,
            rx,
            pass_on: true,
        }
    }

    /// How many times the pub/sub connection was re-established.
    #[allow(dead_code)]
    pub(crate) fn reconnects(&self) -> u64 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }

    fn unregister(&self, channel: &str, id: u64, had_token: bool) {
        let mut reg = self.shared.registry.lock();
        let Registry {
            writer, channels, ..
        } = &mut *reg;
        let Some(chan) = channels.get_mut(channel) else {
            debug_assert!(false, "waiter of unknown channel {channel}");
            return;
        };
        chan.waiters.retain(|(w, _)| *w != id);
        if had_token {
            // The wake-up this waiter did not use may be the one an unlock meant for somebody.
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
    // A full slot already means "re-check": give the token to the first waiter without one.
    for (_, tx) in &chan.waiters {
        if tx.try_send(()).is_ok() {
            return;
        }
    }
}

fn wake_all(chan: &Chan) {
    for (_, tx) in &chan.waiters {
        let _ = tx.try_send(());
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
                    self.reconnects.fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "pub/sub connection to {}:{} lost; reconnecting and waking waiters",
                        self.host,
                        self.port
                    );
                }
                Err(e) => {
                    log::debug!("pub/sub connect to {}:{} failed: {e}", self.host, self.port);
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
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| Error::invalid(format!("cannot resolve {}", self.host)))?;
        let stream = TcpStream::connect_timeout(&addr, self.connect_timeout).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        if let Some(password) = &self.password {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = &self.username {
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
        reg.writer = stream.try_clone().ok();
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
                if parts.get(2).and_then(text).as_deref() == Some("0") {
                    wake_one(chan);
                } else {
                    wake_all(chan);
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
    pass_on: bool,
}

impl Waiter<'_> {
    /// Blocks until woken or until `deadline`; true if woken.
    pub(crate) fn wait_until(&self, deadline: Instant) -> bool {
        self.rx.recv_deadline(deadline).is_ok()
    }

    /// Marks the wait as successful: a pending token is not handed to another waiter.
    pub(crate) fn succeeded(&mut self) {
        self.pass_on = false;
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let had_token = self.rx.try_recv().is_ok() && self.pass_on;
        self.pubsub.unregister(&self.channel, self.id, had_token);
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
            chan.waiters.push_back((id as u64, tx));
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
