//! The words the pub/sub modules share: where a connection goes ([`Address`]), which
//! commands it speaks ([`Mode`]), how a channel's messages wake its waiters ([`Wake`]), what a
//! registration asks for ([`Interest`], [`Heard`]), and what a blocked waiter listens to
//! besides its channel ([`Alarms`]) and how its block ended ([`Wakeup`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use redis::ConnectionInfo;

use crate::error::{Error, Result};
use crate::interrupt::Interruption;

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

/// What a blocked waiter listens to besides its channel: the waiting thread's interrupt and
/// its client's close. Both wake the waiter through its own slot, so that a block is one
/// plain receive; the wait function decides what they mean. And, for a wait that overhears
/// another channel (see `wait.rs`), that channel's slot of its own, kept apart from the
/// waiter's so that neither's wake-up hides the other's.
pub(crate) struct Alarms {
    pub(crate) interruption: Arc<Interruption>,
    /// Set when the client is closed (which then wakes every registered waiter).
    pub(crate) closed: Arc<AtomicBool>,
    /// The overheard channel's slot ([`Ear::Slot`]): a token there is [`Wakeup::Overheard`].
    pub(crate) ear: Option<Receiver<()>>,
}

impl Alarms {
    /// The calling thread's interrupt, and the close flag `closed`.
    pub(crate) fn of_this_thread(closed: &Arc<AtomicBool>) -> Alarms {
        Alarms {
            interruption: Interruption::current(),
            closed: Arc::clone(closed),
            ear: None,
        }
    }

    /// Alarms that never go off.
    #[cfg(test)]
    pub(crate) fn none() -> Alarms {
        Alarms {
            interruption: Arc::default(),
            closed: Arc::default(),
            ear: None,
        }
    }

    /// The alarm that is up, if any (close first).
    pub(super) fn raised(&self) -> Option<Wakeup> {
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
    /// and a close sets its flag before it wakes every registered slot. A nudge (a lock
    /// passed to this thread inside the client) is an ordinary wake-up, taken the same way.
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
        // A lock passed to this thread before it blocked (see `Interruption::nudge`).
        if self.interruption.take_nudge() {
            return (Wakeup::Nudged, false);
        }
        let (took, overheard) = match &self.ear {
            None => (rx.recv_deadline(deadline).is_ok(), false),
            // The waiter's own slot first: its wake-up is worth more than the ear's.
            Some(ear) => crossbeam_channel::select_biased! {
                recv(rx) -> got => (got.is_ok(), false),
                recv(ear) -> got => (false, got.is_ok()),
                default(deadline.saturating_duration_since(Instant::now())) => (false, false),
            },
        };
        drop(armed);
        let nudged = self.interruption.take_nudge();
        match self.raised() {
            Some(alarm) => (alarm, took),
            None if nudged => (Wakeup::Nudged, took),
            None if took => (Wakeup::Woken, true),
            None if overheard => (Wakeup::Overheard, false),
            None => (Wakeup::Deadline, false),
        }
    }

    /// Receives from `rx` until `deadline` (`None` when nothing came), unless an alarm goes
    /// off first: the interrupt wakes `poke` (armed for it while blocked), the close
    /// disconnects `closed`. For a block on a channel of messages rather than on a waiter's
    /// slot (a [`Watch`](crate::watch::Watch)'s); an alarm is reported as [`Wakeup::outcome`] does.
    pub(crate) fn recv<T>(
        &self,
        rx: &Receiver<T>,
        poke: &(Sender<()>, Receiver<()>),
        closed: &Receiver<()>,
        deadline: Instant,
    ) -> Result<Option<T>> {
        let got = {
            let _armed = self.interruption.arm(&poke.0);
            if self.interruption.take() {
                return Err(Error::Interrupted);
            }
            crossbeam_channel::select_biased! {
                recv(closed) -> _ => return Err(Error::Closed),
                recv(poke.1) -> _ => None,
                recv(rx) -> got => got.ok(),
                default(deadline.saturating_duration_since(Instant::now())) => None,
            }
        };
        if self.interruption.take() {
            return Err(Error::Interrupted);
        }
        Ok(got)
    }
}

/// How a waiter's block ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wakeup {
    /// A wake-up came on the channel (a message, the subscription's confirmation, a
    /// reconnect, a move): re-check.
    Woken,
    /// A thread of this client passed the waiting thread what it waits for (see
    /// [`Interruption::nudge`](crate::interrupt::Interruption::nudge)): re-check now, whatever
    /// the registration's state.
    Nudged,
    /// The deadline passed.
    Deadline,
    /// A message came on the channel the wait overhears ([`Alarms::ear`]).
    Overheard,
    /// The interrupt alarm went off (perhaps a stale one: the wait function checks).
    Interrupt,
    /// The client was closed.
    Closed,
}

impl Wakeup {
    /// A block's end as a wait reports it to its caller: woken (`Ok(true)`) or out of time
    /// (`Ok(false)`); a close is [`Error::Closed`], an interrupt (taken here)
    /// [`Error::Interrupted`].
    pub(crate) fn outcome(self, alarms: &Alarms) -> Result<bool> {
        match self {
            Wakeup::Woken | Wakeup::Nudged | Wakeup::Overheard => Ok(true),
            Wakeup::Deadline => Ok(false),
            Wakeup::Closed => Err(Error::Closed),
            Wakeup::Interrupt => {
                alarms.interruption.take();
                Err(Error::Interrupted)
            }
        }
    }
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
/// listens (an observer: a [`Watch`](crate::watch::Watch)).
#[derive(Clone)]
pub(crate) struct Interest {
    pub(crate) wake: Wake,
    /// Permits the waiter needs (1 unless `wake` is [`Wake::Permits`]).
    pub(crate) need: u32,
    /// An observer's ear: it hears every message of the channel, and takes no part in
    /// handing wake-ups out (a waiter of the same client never loses one to it). Its slot
    /// still tells it of confirmations, reconnects and moves.
    pub(crate) heard: Option<Ear>,
    /// A waiter woken by every message of its lock channel, whatever the message, that takes
    /// no part in handing `0`'s one wake-up out (a priority waiter, which must see every
    /// release to know whether its turn came).
    pub(crate) every: bool,
}

/// Where an observer hears the messages of its channel.
#[derive(Clone)]
pub(crate) enum Ear {
    /// Each message is sent here, named by its channel (a [`Watch`](crate::watch::Watch)'s feed).
    Feed(Sender<Heard>),
    /// Each message puts a token in this slot (one at most), which the wait that overhears
    /// the channel blocks on beside its own ([`Alarms::ear`]).
    Slot(Sender<()>),
}

impl Ear {
    /// Tells of a message on `channel`. Never blocks: a full feed has messages to read, and
    /// its reader re-reads the state then.
    pub(crate) fn hear(&self, channel: &str) {
        match self {
            Ear::Feed(feed) => {
                let _ = feed.try_send(Heard {
                    channel: channel.to_owned(),
                });
            }
            Ear::Slot(slot) => {
                let _ = slot.try_send(());
            }
        }
    }
}

impl Interest {
    /// A waiter's interest.
    pub(crate) fn waiter(wake: Wake, need: u32) -> Interest {
        Interest {
            wake,
            need,
            heard: None,
            every: false,
        }
    }
}

/// A message an observer heard: the channel it came on.
pub(crate) struct Heard {
    pub(crate) channel: String,
}
