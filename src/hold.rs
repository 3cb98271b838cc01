//! The vocabulary of holds: who holds ([`Owner`]), what kind of hold ([`LockKind`]), and
//! the events of a hold as every primitive reports them: what happened ([`HoldEvent`]), to
//! which hold ([`Subject`]). Data only: `events.rs` sends each event to the features that
//! are on, and each feature (metrics, history, lock order) reads it in its own module; the
//! report types of every view name owners and kinds with these two types.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::keys;

/// Who holds or waits: an owner id `"<client id>:<thread number>"` split in its parts.
///
/// The client id is [`Client::id`](crate::Client::id) of a redlatch client (or a Redisson client's id), the
/// thread number the per-process number of the OS thread (the Java thread id for Redisson).
///
/// # Examples
///
/// ```
/// let owner = redlatch::Owner::parse("0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:12").unwrap();
/// assert_eq!(owner.client_id, "0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c");
/// assert_eq!(owner.thread, 12);
/// assert_eq!(owner.to_string(), "0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:12");
/// assert!(redlatch::Owner::parse("no thread").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    /// The client's id (a UUID for redlatch and Redisson).
    pub client_id: String,
    /// The thread's number within that client's process.
    pub thread: u64,
}

impl Owner {
    /// Splits an owner id at its last `:`; `None` unless it ends in `:<decimal number>`
    /// after a non-empty client id.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::Owner::parse("a:b:7").unwrap().client_id, "a:b");
    /// ```
    pub fn parse(id: &str) -> Option<Owner> {
        let (client, thread) = keys::owner_parts(id)?;
        Some(Owner {
            client_id: client.to_owned(),
            thread,
        })
    }
}

impl Owner {
    /// The owner an id names; one that does not parse (a foreign field) keeps the whole id
    /// as its client id, thread 0.
    pub(crate) fn from_id(id: &str) -> Owner {
        Owner::parse(id).unwrap_or_else(|| Owner {
            client_id: id.to_owned(),
            thread: 0,
        })
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.client_id, self.thread)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Owner {
    /// As three fields, `owner` (`"<client id>:<thread>"`), `client_id` and `thread`, which
    /// a holder's or a waiter's serialization shows beside its own.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Owner", 3)?;
        st.serialize_field("owner", &self.to_string())?;
        st.serialize_field("client_id", &self.client_id)?;
        st.serialize_field("thread", &self.thread)?;
        st.end()
    }
}

/// Who an owner is, as far as known: its client's name, host and process, and the owner's
/// thread. What a client records (with history on, or for a wait that may deadlock) tells
/// all four; the server's client list tells a client's name and host only. A field not known
/// is `None`.
///
/// # Examples
///
/// ```
/// let who = redlatch::top::Who::default();
/// assert_eq!(who.to_string(), "?, pid ? on ?, thread ?");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Who {
    /// The client's name.
    pub client_name: Option<String>,
    /// Its host.
    pub host: Option<String>,
    /// Its process id.
    pub pid: Option<u32>,
    /// The owner's thread.
    pub thread: Option<String>,
}

impl Who {
    /// Whether nothing about it is known.
    pub fn is_unknown(&self) -> bool {
        *self == Who::default()
    }
}

impl fmt::Display for Who {
    /// `client, pid P on HOST, thread T`, each part `?` where not known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".to_owned());
        let pid = self.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
        write!(
            f,
            "{}, pid {pid} on {}, thread {}",
            known(&self.client_name),
            known(&self.host),
            known(&self.thread)
        )
    }
}

/// What kind of hold (or wait) an event, a span, a wait record or a lock-order record is
/// about: the lock's kind, or for a read-write lock its side. Its [`as_str`](Self::as_str)
/// is the `kind` label of the metrics and the word the history stream keeps.
///
/// # Examples
///
/// ```
/// use redlatch::LockKind;
/// assert_eq!(LockKind::parse("non-reentrant fair"), LockKind::NonReentrantFair);
/// assert_eq!(LockKind::Semaphore.as_str(), "semaphore");
/// assert_eq!(LockKind::parse("rate limiter"), LockKind::RateLimiter);
/// assert!(LockKind::Read.is_read());
/// assert_eq!(LockKind::parse("from a newer version"), LockKind::Unknown);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum LockKind {
    /// A reentrant lock ([`Client::lock`](crate::Client::lock)).
    Plain,
    /// A non-reentrant lock.
    NonReentrant,
    /// A fair lock.
    Fair,
    /// A non-reentrant fair lock.
    NonReentrantFair,
    /// A fenced lock.
    Fenced,
    /// A spin lock.
    Spin,
    /// A read-write lock's read side.
    Read,
    /// A read-write lock's write side.
    Write,
    /// A group lock's values.
    Group,
    /// A lock of a [`LockSet`](crate::LockSet), taken with the rest of its set.
    LockSet,
    /// A semaphore's permits.
    Semaphore,
    /// A permit-expirable semaphore's permits.
    ExpirableSemaphore,
    /// A [`RateLimiter`](crate::RateLimiter)'s permits: an acquire is admitted or not, and
    /// holds nothing afterwards (the history records an admission as a hold that ends where
    /// it begins).
    RateLimiter,
    /// Any lock held alone, when no finer kind is recorded (a deadlock wait record, a
    /// lock-order record: every kind but a read).
    Exclusive,
    /// A word this version does not know (recorded by a newer one).
    Unknown,
}

impl LockKind {
    const ALL: [LockKind; 15] = [
        LockKind::Plain,
        LockKind::NonReentrant,
        LockKind::Fair,
        LockKind::NonReentrantFair,
        LockKind::Fenced,
        LockKind::Spin,
        LockKind::Read,
        LockKind::Write,
        LockKind::Group,
        LockKind::LockSet,
        LockKind::Semaphore,
        LockKind::ExpirableSemaphore,
        LockKind::RateLimiter,
        LockKind::Exclusive,
        LockKind::Unknown,
    ];

    /// Its word: `plain`, `non-reentrant`, `fair`, `non-reentrant fair`, `fenced`, `spin`,
    /// `read`, `write`, `group`, `lock set`, `semaphore`, `expirable semaphore`,
    /// `rate limiter`, `exclusive`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Plain => "plain",
            LockKind::NonReentrant => "non-reentrant",
            LockKind::Fair => "fair",
            LockKind::NonReentrantFair => "non-reentrant fair",
            LockKind::Fenced => "fenced",
            LockKind::Spin => "spin",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Group => "group",
            LockKind::LockSet => "lock set",
            LockKind::Semaphore => "semaphore",
            LockKind::ExpirableSemaphore => "expirable semaphore",
            LockKind::RateLimiter => "rate limiter",
            LockKind::Exclusive => "exclusive",
            LockKind::Unknown => "unknown",
        }
    }

    /// The kind a word names; [`Unknown`](Self::Unknown) for any other.
    pub fn parse(word: &str) -> LockKind {
        LockKind::ALL
            .into_iter()
            .find(|k| k.as_str() == word)
            .unwrap_or(LockKind::Unknown)
    }

    /// Whether it is a read hold, shared with other readers (every other kind excludes).
    pub fn is_read(self) -> bool {
        self == LockKind::Read
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for LockKind {
    /// As [`as_str`](Self::as_str).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for LockKind {
    /// As [`parse`](Self::parse).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let word = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(LockKind::parse(&word))
    }
}

/// The hold an event is of: the lock (or semaphore) by its key, its kind as labelled in the
/// metrics and the history (`plain`, `fair`, `read`, `lock set`, `semaphore`...), its
/// owner, and when the event happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) lock: &'a Arc<str>,
    pub(crate) kind: LockKind,
    pub(crate) owner: &'a Arc<str>,
    pub(crate) at: Instant,
}

/// What happened to a hold (of a lock, or of a semaphore's permits), or to a wait for one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HoldEvent {
    /// The owner began to wait (its first attempt found the lock busy).
    Waiting,
    /// Taken (or re-entered) `waited` after the call began; `contended` if the call found it
    /// busy at first. `order`: the call of a thread (not a [`LockOwner`](crate::LockOwner)),
    /// for the lock-order records.
    Acquired {
        waited: Duration,
        contended: bool,
        order: Option<Ordered>,
    },
    /// Admitted `waited` after the call began, holding nothing afterwards (a rate limiter's
    /// permits: they are used, not given back); `contended` if the call was refused at
    /// first. Counted as an acquisition; the history records it as an acquire and a release
    /// at once, so that no hold stays open.
    Admitted { waited: Duration, contended: bool },
    /// A wait ended without the lock, `waited` after the call began: its deadline passed
    /// (`timed_out`), or it failed (an error, an interrupt, a close).
    GaveUp { waited: Duration, timed_out: bool },
    /// A wait ended with a deadlock error, `waited` after the call began.
    Deadlock { waited: Duration },
    /// The owner released a hold it had for `held` (unknown for a leaked guard's).
    Released { held: Option<Duration> },
    /// The owner's release of a hold it had for `held` passed the lock to a waiting thread
    /// of its client in the same call (see `handover.rs`): a release whose waiter's acquire
    /// follows, with nothing published in between.
    HandedOver { held: Duration },
    /// A hold, taken `held` before, was found lost: its lease ran out (`expired`), or it was
    /// taken or broken behind its owner's back. `told`: this very hold's `Broken` went out
    /// already (the history has the loss).
    Lost {
        held: Duration,
        expired: bool,
        told: bool,
    },
    /// A hold, taken `held` before, was found lost while its guard lives on (by the
    /// watchdog's check, also one a pub/sub reconnect asked for): the history records the
    /// loss now. The guard's `Lost` follows when it lets go (`told`), and counts in the
    /// metrics then.
    Broken { held: Duration, expired: bool },
    /// A condition wait released the lock its guard holds, held for `held`: the hold ends in
    /// the history (taking the lock back begins another), while the guard, and its count in
    /// the metrics, lives on.
    Yielded { held: Duration },
    /// A guard let go of a hold it had for `held` with no known end: the hold goes on under
    /// another guard (a condition wait's re-acquire), or its release failed and it ends with
    /// its lease. It no longer counts as held in the metrics; the history records nothing.
    Forgotten { held: Duration },
}

/// A thread's acquire, as the lock-order records take it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ordered {
    /// A read hold (shared with other readers).
    pub(crate) read: bool,
    /// The call may have waited: a pair with each lock the thread held already is recorded.
    pub(crate) waits: bool,
    /// Where the call was made.
    pub(crate) at: &'static Location<'static>,
}
