//! The wait: how every blocking call of every primitive (each lock kind, and through them
//! MultiLock and RedLock; both semaphores; the latch) waits. A primitive supplies one thing,
//! its attempt ("try once": done, or try again within a bound); this function owns the rest
//! of the protocol, so that no primitive can get it wrong:
//!
//! 1. attempt once; done, or out of time, without touching pub/sub;
//! 2. register on the channel (subscribing if this client is not yet);
//! 3. block until woken: the first wake-up is the subscription's confirmation, so the
//!    re-check that follows sees every release published before it, and a release published
//!    after it wakes the waiter (no lost wake-up); the block is bounded by what the attempt
//!    said (a lock's remaining lease, a permit's expiry). A message lost with its connection
//!    is made up for by the connection's check: a connection that breaks or falls silent
//!    (see `liveness.rs`) is made anew and wakes every waiter on it; the bound alone does not
//!    make up for it, since the re-check at its end finds the lock free only if nobody took
//!    it meanwhile;
//! 4. re-check, and report it: the wake-up was used (`attempted`), permits seen are passed to
//!    the waiters they may serve (`observed`), and on success nothing is handed on; a waiter
//!    that blocks again after its first re-check counts in the `waiting` gauge (a release
//!    from then on wakes it: a test may release the moment it sees the count);
//! 5. leave, on every path (success, deadline, error, interrupt, close): unregistering hands a
//!    wake-up that was received and not used to the next waiter, unsubscribes the last waiter
//!    of a channel, and, where the attempt asked for it, wakes one other waiter to learn what
//!    this one knew.
//!
//! An attempt may also name a second channel to overhear (a fair queue's second, the head's
//! channel, on which a Redisson release wakes the head alone): a message there makes this
//! waiter re-check within [`OVERHEARD_GRACE`], taking nothing from that channel's own
//! waiters. The ear follows what the last attempt named, and goes with the wait. A message
//! published before its subscription is confirmed is not overheard: the attempt's bound
//! covers it, as it does without an ear.
//!
//! Interruption and close are handled here once: the block also listens to the thread's
//! interrupt ([`Interrupter`](crate::Interrupter)) and the client's close alarm.
//!
//! A wait on [`Channel::none`] (a spin lock's, whose releases publish nothing) runs the same
//! steps without pub/sub: step 2 registers a slot of the thread's own (no SUBSCRIBE), and each
//! block of step 3 is a sleep for the attempt's bound (its next back-off delay), which the
//! interrupt and the close still cut short. It counts in the `waiting` gauge from its first
//! re-check on, as any waiter; a release is then seen at its next attempt, not at once.

use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::dispatcher::{Dispatcher, Observer};
use super::vocabulary::{Wake, Wakeup};
use crate::error::{Error, Result};
use crate::time::MAX_DURATION;
use crate::trace;

/// The channel a wait listens on, and how its messages wake.
pub(crate) struct Channel<'a> {
    pub(crate) name: &'a str,
    pub(crate) wake: Wake,
    /// Permits the waiter needs (1 unless `wake` is [`Wake::Permits`]).
    pub(crate) need: u32,
    /// Whether the wait subscribes to `name` (false: [`Channel::none`]).
    listen: bool,
    /// Woken by every message of a lock channel, taking no part in `0`'s one wake-up; or of
    /// a semaphore's channel, taking no part in sharing its permits out.
    every: bool,
}

impl<'a> Channel<'a> {
    /// A lock's channel: `0` wakes one waiter, anything else all.
    pub(crate) fn lock(name: &'a str) -> Channel<'a> {
        Channel {
            name,
            wake: Wake::Lock,
            need: 1,
            listen: true,
            every: false,
        }
    }

    /// A lock's channel for a waiter that must see every release (a priority waiter): every
    /// message wakes it, and `0` still wakes one other waiter.
    pub(crate) fn lock_every(name: &'a str) -> Channel<'a> {
        Channel {
            every: true,
            ..Channel::lock(name)
        }
    }

    /// A semaphore's channel, for a waiter that needs `need` permits.
    pub(crate) fn permits(name: &'a str, need: u32) -> Channel<'a> {
        Channel {
            name,
            wake: Wake::Permits,
            need,
            listen: true,
            every: false,
        }
    }

    /// No channel: the wait sleeps between attempts for the bound each attempt gives (which
    /// must be `Some`), and sends no pub/sub command. For a spin lock.
    pub(crate) fn none() -> Channel<'static> {
        Channel {
            name: "",
            wake: Wake::All,
            need: 1,
            listen: false,
            every: false,
        }
    }

    /// A semaphore's channel for a waiter with a priority, served by its queue's order, not
    /// its client's: every message wakes it, and the permits a message names still go to
    /// the other waiters.
    pub(crate) fn permits_every(name: &'a str, need: u32) -> Channel<'a> {
        Channel {
            every: true,
            ..Channel::permits(name, need)
        }
    }

    /// A channel whose every message wakes every waiter (a latch's).
    pub(crate) fn all(name: &'a str) -> Channel<'a> {
        Channel {
            name,
            wake: Wake::All,
            need: 1,
            listen: true,
            every: false,
        }
    }
}

/// What one attempt found: done (the attempt keeps what it got, such as a guard, where its
/// caller finds it), or not yet.
#[must_use]
pub(crate) struct Tried {
    done: bool,
    /// Not done: try again after this even without a wake-up; `None`: only when woken.
    within: Option<Duration>,
    /// Permits the attempt saw left (after taking its own, if it did).
    seen: Option<i64>,
    /// The attempt learned something the other waiters' bounds may lack: when this waiter
    /// leaves after it, one other waiter is woken to re-check.
    tell_one: bool,
    /// A channel whose messages wake this waiter too, until an attempt names another or none.
    overhear: Option<String>,
}

impl Tried {
    /// Done: the wait ends.
    pub(crate) fn done() -> Tried {
        Tried {
            done: true,
            within: None,
            seen: None,
            tell_one: false,
            overhear: None,
        }
    }

    /// Whether the wait ends with this attempt.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Not yet: try again when woken, or after `within` at the latest (`None`: only when
    /// woken).
    pub(crate) fn again(within: Option<Duration>) -> Tried {
        Tried {
            done: false,
            within,
            seen: None,
            tell_one: false,
            overhear: None,
        }
    }

    /// Not yet, and try again after `most` at the latest (if not sooner as it says).
    pub(crate) fn within_at_most(mut self, most: Duration) -> Tried {
        self.within = Some(self.within.map_or(most, |w| w.min(most)));
        self
    }

    /// The attempt saw `permits` left: they may serve other waiters of the channel.
    pub(crate) fn seeing(mut self, permits: i64) -> Tried {
        self.seen = Some(permits);
        self
    }

    /// Until the next attempt, wake on messages of `channel` too (see the module's doc).
    pub(crate) fn overhearing(mut self, channel: String) -> Tried {
        self.overhear = Some(channel);
        self
    }

    /// When the waiter leaves after this attempt, wake one other waiter: it knew something
    /// (a permit's expiry) that the others' wait bounds may predate.
    pub(crate) fn telling_one(mut self) -> Tried {
        self.tell_one = true;
        self
    }
}

/// Attempts until done (`Ok(true)`) or until `deadline` passes (`Ok(false)`; never without a
/// deadline), waiting on `channel` between attempts. A deadline already past makes exactly
/// one attempt. Not generic: what an attempt got stays with the caller (this keeps the
/// waiting thread's stack shallow, and one copy of this function in the binary).
///
/// # Errors
///
/// An attempt's error, at once; [`Error::Interrupted`] when the thread's interrupt is taken
/// (pending when the wait would block, or requested while it blocks); [`Error::Closed`] when
/// the client is (or gets) closed.
pub(crate) fn wait(
    dispatcher: &Dispatcher,
    channel: Channel<'_>,
    deadline: Option<Instant>,
    attempt: &mut dyn FnMut() -> Result<Tried>,
) -> Result<bool> {
    let last = attempt()?;
    if last.done {
        return Ok(true);
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(false);
    }
    let span = trace::Span::wait(channel.name);
    let _in_span = span.enter();
    let outcome = block(dispatcher, channel, deadline, attempt, last);
    span.outcome(match &outcome {
        Ok(true) => "done",
        Ok(false) => "deadline",
        Err(Error::Interrupted) => "interrupted",
        Err(Error::Closed) => "closed",
        Err(_) => "error",
    });
    outcome
}

/// The blocking part of [`wait`], after a first attempt (`last`) that did not succeed.
fn block(
    dispatcher: &Dispatcher,
    channel: Channel<'_>,
    deadline: Option<Instant>,
    attempt: &mut dyn FnMut() -> Result<Tried>,
    mut last: Tried,
) -> Result<bool> {
    let mut alarms = dispatcher.alarms();
    if alarms.interruption.take() {
        return Err(Error::Interrupted);
    }
    let registered = if channel.listen {
        dispatcher.register(channel.name, channel.wake, channel.need, channel.every)
    } else {
        debug_assert!(last.within.is_some(), "a wait on no channel sleeps a bound");
        dispatcher.sleeper()
    };
    let Some(mut waiter) = registered else {
        return Err(Error::Closed);
    };
    let mut ear = Ear::default();
    loop {
        ear.follow(dispatcher, channel.wake, last.overhear.take());
        alarms.ear = ear.slot();
        let now = Instant::now();
        let bound = now + last.within.unwrap_or(MAX_DURATION);
        let mut until = deadline.map_or(bound, |d| d.min(bound));
        let mut graced = false;
        let woke = loop {
            match waiter.block_until(until, &alarms) {
                // Overheard: re-check after the grace (sooner if woken on the own channel).
                Wakeup::Overheard => {
                    if !graced {
                        graced = true;
                        until = until.min(Instant::now() + OVERHEARD_GRACE);
                    }
                }
                woke => break woke,
            }
        };
        match woke {
            Wakeup::Woken | Wakeup::Nudged | Wakeup::Deadline | Wakeup::Overheard => {}
            Wakeup::Closed => return Err(Error::Closed),
            Wakeup::Interrupt => {
                alarms.interruption.take();
                if last.tell_one {
                    waiter.nudge();
                }
                return Err(Error::Interrupted);
            }
        }
        // On error the waiter leaves (on drop) and passes an unused wake-up on.
        let tried = attempt()?;
        waiter.attempted();
        if let Some(permits) = tried.seen {
            waiter.observed(permits);
        }
        if tried.done {
            if tried.tell_one {
                waiter.nudge();
            }
            waiter.succeeded();
            return Ok(true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            if tried.tell_one {
                waiter.nudge();
            }
            return Ok(false);
        }
        waiter.blocking();
        last = tried;
    }
}

/// How long after a message it overheard a waiter re-checks (unless woken sooner): a live
/// receiver (a fair queue's head, woken by a release) acts within milliseconds, and then the
/// re-check is one the waiter would have made anyway. A waiter re-checks at once when woken
/// on its own channel in the meantime: behind a head that takes the lock and holds it for
/// less than this, overhearing costs no call.
const OVERHEARD_GRACE: Duration = Duration::from_millis(500);

/// The observer on the channel the last attempt asked to overhear, if any, and the slot its
/// messages go to, which the wait blocks on beside the waiter's own
/// ([`Alarms::ear`](super::vocabulary::Alarms::ear)).
struct Ear {
    on: Option<(String, Observer)>,
    slot: (Sender<()>, Receiver<()>),
}

impl Default for Ear {
    fn default() -> Ear {
        Ear {
            on: None,
            slot: bounded(1),
        }
    }
}

impl Ear {
    /// The slot to block on beside the waiter's own, while an observer listens.
    fn slot(&self) -> Option<Receiver<()>> {
        self.on.as_ref().map(|_| self.slot.1.clone())
    }

    /// Listens on `channel` (whose waiters wake as `wake` says), or on nothing: the observer
    /// on another channel goes first (with what it heard); the one on this channel stays
    /// (following a move).
    fn follow(&mut self, dispatcher: &Dispatcher, wake: Wake, channel: Option<String>) {
        match (&mut self.on, channel) {
            (Some((on, observer)), Some(channel)) if *on == channel => {
                observer.follow(&dispatcher.closed_flag());
            }
            (_, None) => self.forget(),
            (_, Some(channel)) => {
                self.forget();
                let slot = self.slot.0.clone();
                self.on = dispatcher
                    .overhear(&channel, wake, slot)
                    .map(|o| (channel, o));
            }
        }
    }

    /// Stops listening, and forgets a message heard and not yet taken.
    fn forget(&mut self) {
        self.on = None;
        let _ = self.slot.1.try_recv();
    }
}
