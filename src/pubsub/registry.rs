//! One connection's registry: the waiters of every channel, each channel's subscription
//! state, and the connection's write side, under one mutex so that what is written matches
//! the registry; the reader's handling of confirmations, refusals and unsolicited
//! unsubscribes; and the wake policies (one, all but one, all, by permits) it applies to a
//! channel's waiters.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::net::Stream;

use super::liveness::{Due, Liveness};
use super::vocabulary::{Ear, Mode, Wake};

/// One pub/sub command, as remembered until its reply arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Command {
    Subscribe,
    Unsubscribe,
    /// The connection's check (see [`Liveness`]); remembered with no channel.
    Ping,
}

impl Command {
    /// The command's name in `mode`.
    pub(super) fn name(self, mode: Mode) -> &'static str {
        match (self, mode) {
            (Command::Subscribe, Mode::Plain) => "SUBSCRIBE",
            (Command::Unsubscribe, Mode::Plain) => "UNSUBSCRIBE",
            (Command::Subscribe, Mode::Sharded) => "SSUBSCRIBE",
            (Command::Unsubscribe, Mode::Sharded) => "SUNSUBSCRIBE",
            (Command::Ping, _) => "PING",
        }
    }
}

/// The waiters of every channel and the connection's write side, under one mutex so that
/// what is written matches the registry.
pub(super) struct Registry {
    pub(super) wire: Wire,
    pub(super) channels: HashMap<String, Chan>,
    pub(super) next_id: u64,
    /// Set when the handle is dropped or retired: no registration is taken any more and the
    /// reader thread stops.
    pub(super) shutdown: bool,
}

/// The write side of the live connection and, in sharded mode, what it still owes replies to.
pub(super) struct Wire {
    pub(super) mode: Mode,
    /// `None` while disconnected.
    pub(super) writer: Option<Stream>,
    /// Sharded mode only: the commands written on the live connection whose reply has not
    /// arrived, oldest first. Replies come in order, so the front names the channel of the next
    /// reply; that is how an error reply (`-MOVED`, which names no channel) is attributed, and
    /// how a solicited `sunsubscribe` is told from an unsolicited one. Each channel's
    /// `Chan::pending` counts its entries here.
    pub(super) inflight: VecDeque<(Command, String)>,
    /// The live connection's check: its `PING`s while anything is registered.
    pub(super) liveness: Liveness,
}

/// One registered waiter, as the reader sees it.
pub(super) struct Entry {
    pub(super) id: u64,
    pub(super) tx: Sender<()>,
    /// Permits this waiter needs (1 for locks and latches).
    pub(super) need: u32,
    /// An observer's ear (see
    /// [`Interest::heard`](super::vocabulary::Interest::heard)); `None` for a waiter.
    pub(super) heard: Option<Ear>,
    /// Woken by every message (see [`Interest::every`](super::vocabulary::Interest::every)).
    pub(super) every: bool,
    /// Sharded mode: reported (before the wake-up) when the node says the channel is not
    /// served here or the connection fails; cleared when a subscription of the channel is
    /// confirmed.
    pub(super) moved: Moved,
}

/// Sharded mode: when a node reported that a waiter's channel is not served there (or that
/// the connection failed), if it did. Shared by the registry entry, which reports it under
/// the registry lock, and the waiter, which reads it without the lock after each wake-up.
/// The instant lets waiters woken together by one report share one slot-map refresh.
#[derive(Clone, Default)]
pub(super) struct Moved(Arc<AtomicU64>);

impl Moved {
    /// Reports a move at `at`.
    pub(super) fn report(&self, at: Instant) {
        self.0.store(Moved::encode(at), Ordering::SeqCst);
    }

    /// Reports a move at `at` unless one is reported already; true if this one was.
    pub(super) fn report_first(&self, at: Instant) -> bool {
        let encoded = Moved::encode(at);
        self.0
            .compare_exchange(0, encoded, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    pub(super) fn clear(&self) {
        self.0.store(0, Ordering::SeqCst);
    }

    /// When the move was reported, if one is.
    pub(super) fn get(&self) -> Option<Instant> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Moved::epoch() + Duration::from_nanos(n - 1)),
        }
    }

    /// Nanoseconds since [`epoch`](Self::epoch), plus one (zero means "no move").
    pub(super) fn encode(at: Instant) -> u64 {
        let since = at.saturating_duration_since(Moved::epoch()).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
    }

    /// The process-wide origin of the encoded instants.
    pub(super) fn epoch() -> Instant {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }
}

/// One channel's waiters and subscription state.
#[derive(Default)]
pub(super) struct Chan {
    pub(super) wake: Wake,
    pub(super) waiters: VecDeque<Entry>,
    /// Subscribe/unsubscribe commands written on this connection and not yet answered.
    pub(super) pending: u32,
    /// The last command written on this connection for the channel was a subscribe.
    pub(super) sub_sent: bool,
    /// The server confirmed the subscription and nothing is pending: messages will arrive.
    pub(super) subscribed: bool,
}

impl Wire {
    /// Writes a subscribe or unsubscribe for one channel and updates its bookkeeping. Without
    /// a live connection nothing is written: the reader subscribes every channel with waiters
    /// when it reconnects.
    pub(super) fn send(&mut self, command: Command, channel: &str, chan: &mut Chan) {
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

    /// Sends what the connection's check says is due at `now` (a `PING`, while `active`: while
    /// anything is registered), and says how long the reader may block before it looks
    /// again; `Err` with how long the last `PING` has gone unanswered once the connection
    /// counts as silent.
    pub(super) fn tend(&mut self, now: Instant, active: bool) -> Result<Duration, Duration> {
        match self.liveness.check(now, active) {
            Due::Wait(wait) => Ok(wait),
            Due::Silent(silent) => Err(silent),
            Due::Ping => {
                self.ping();
                Ok(self.liveness.interval())
            }
        }
    }

    /// Writes a `PING` (in sharded mode, remembered for its reply). A write that fails
    /// closes the connection, as in [`send`](Self::send).
    pub(super) fn ping(&mut self) {
        let Some(w) = &mut self.writer else { return };
        let bytes = redis::cmd(Command::Ping.name(self.mode)).get_packed_command();
        match (&*w).write_all(&bytes) {
            Ok(()) => {
                if self.mode == Mode::Sharded {
                    self.inflight.push_back((Command::Ping, String::new()));
                }
            }
            Err(e) => {
                log::debug!("pub/sub PING failed ({e}); the reader will reconnect");
                w.shutdown();
                self.writer = None;
            }
        }
    }

    /// Closes the live connection: the reader sees its read fail, then reconnects, subscribes
    /// every channel with waiters and wakes them all. For when the replies no longer match
    /// what was written: starting over is the only state both sides agree on.
    pub(super) fn resync(&mut self) {
        if let Some(w) = self.writer.take() {
            w.shutdown();
        }
    }
}

pub(super) fn wake_one(chan: &Chan) {
    wake_one_but(chan, None);
}

/// As [`wake_one`], passing over waiter `skip`.
pub(super) fn wake_one_but(chan: &Chan, skip: Option<u64>) {
    // A full slot already means "re-check": give the token to the first waiter without one.
    let waiters = chan
        .waiters
        .iter()
        .filter(|w| w.heard.is_none() && !w.every);
    for w in waiters.filter(|w| Some(w.id) != skip) {
        if w.tx.try_send(()).is_ok() {
            return;
        }
    }
}

pub(super) fn wake_all(chan: &Chan) {
    for w in &chan.waiters {
        let _ = w.tx.try_send(());
    }
}

/// Wakes waiters, in registration order, whose needs fit in `available` permits. A waiter
/// that already has a wake-up pending counts against the permits too; one that needs more
/// than what is left is passed over so that smaller needs behind it are served. `skip` is the
/// waiter reporting the count (it has just re-checked). A waiter that hears every message
/// (one with a priority) is passed over: a message wakes it anyway.
///
/// No wake-up is lost: every release publishes the new count, and every waiter that re-checks
/// reports the count it saw through [`NodeWaiter::observed`], which wakes the next ones.
pub(super) fn wake_permits(chan: &Chan, available: i64, skip: Option<u64>) {
    let mut left = available;
    for w in &chan.waiters {
        if left <= 0 {
            return;
        }
        if Some(w.id) == skip || w.heard.is_some() || w.every {
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
pub(super) fn mark_moved(chan: &mut Chan) {
    chan.sub_sent = false;
    chan.subscribed = false;
    let now = Instant::now();
    for w in &chan.waiters {
        w.moved.report(now);
        let _ = w.tx.try_send(());
    }
}

impl Registry {
    pub(super) fn new(mode: Mode, ping_interval: Duration) -> Registry {
        Registry {
            wire: Wire {
                mode,
                writer: None,
                inflight: VecDeque::new(),
                liveness: Liveness::new(ping_interval, Instant::now()),
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
    pub(super) fn reply(&mut self, kind: &str, channel: &str) {
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

    /// The answer to a `PING` (`pong`, or `PONG` on a connection with no subscription). In
    /// sharded mode it must answer the oldest command written, or the connection starts over.
    pub(super) fn ponged(&mut self) {
        if self.wire.mode == Mode::Sharded {
            match self.wire.inflight.front() {
                Some((Command::Ping, _)) => {
                    self.wire.inflight.pop_front();
                }
                other => {
                    log::warn!(
                        "sharded pub/sub: a PING's answer does not answer the oldest command \
                         written ({other:?}); resyncing"
                    );
                    return self.wire.resync();
                }
            }
        }
        self.wire.liveness.answered();
    }

    /// Sharded mode: an unsolicited `sunsubscribe`, sent by Redis 7 for every shard channel of
    /// a slot that migrates away or whose node is demoted to replica.
    pub(super) fn unsubscribed_by_server(&mut self, channel: &str) {
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
    pub(super) fn refused(&mut self, error: &redis::ServerError) {
        let Some((command, channel)) = self.wire.inflight.pop_front() else {
            log::warn!("sharded pub/sub: error reply `{error}` answers no command; resyncing");
            return self.wire.resync();
        };
        if command == Command::Ping {
            // The server answered: the connection is alive, whatever it thinks of PING.
            log::warn!("pub/sub: PING refused ({error}); the connection counts as alive");
            return self.wire.liveness.answered();
        }
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
