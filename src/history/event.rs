//! A history event as a reader gets it, and the fields a client's stream keeps.

use std::fmt;
use std::time::Duration;

use crate::hold::{LockKind, Owner};

/// The fields of a stream entry (one event).
pub(crate) mod fields {
    /// The event's number in its client's history (copies of a write sent again share it).
    pub(crate) const SEQ: &str = "s";
    /// What happened: [`HistoryKind::word`](super::HistoryKind::word).
    pub(crate) const KIND: &str = "k";
    /// The lock's key.
    pub(crate) const LOCK: &str = "l";
    /// The owner id.
    pub(crate) const OWNER: &str = "o";
    /// The lock's kind, as metrics label it (`plain`, `fair`, `read`, ...).
    pub(crate) const MODE: &str = "m";
    /// When, in µs since the Unix epoch on the server's clock.
    pub(crate) const AT: &str = "t";
    /// How long the owner waited before it (acquire, deadlock, timeout), µs.
    pub(crate) const WAITED: &str = "w";
    /// How long the hold it ends lasted (release, loss), µs.
    pub(crate) const HELD: &str = "h";
    /// `1` on an acquire that found the lock busy first (absent otherwise).
    pub(crate) const CONTENDED: &str = "c";
}

/// What a [`HistoryEvent`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum HistoryKind {
    /// The owner found the lock busy and began to wait.
    Wait,
    /// The owner took the lock (at once, or after `waited`).
    Acquire,
    /// The owner released a hold that lasted `held`.
    Release,
    /// The owner learnt that its hold (of `held`) was lost: taken over or force-unlocked
    /// (found not held), or the client was closed.
    Lost,
    /// The owner's hold (of `held`) ended with its lease: renewals failed for a whole lease,
    /// an explicit lease ran out, or its maximum hold time was reached.
    Expired,
    /// The owner's wait ended without the lock: its bound passed, it was interrupted, or it
    /// failed (`waited`).
    GaveUp,
    /// The owner's wait ended with [`Error::Deadlock`](crate::Error::Deadlock).
    Deadlock,
}

impl HistoryKind {
    /// The word a stream keeps.
    pub(crate) fn word(self) -> &'static str {
        match self {
            HistoryKind::Wait => "wait",
            HistoryKind::Acquire => "acquire",
            HistoryKind::Release => "release",
            HistoryKind::Lost => "lost",
            HistoryKind::Expired => "expired",
            HistoryKind::GaveUp => "gave_up",
            HistoryKind::Deadlock => "deadlock",
        }
    }

    /// The kind a stream's word names.
    pub(crate) fn from_word(word: &str) -> Option<HistoryKind> {
        [
            HistoryKind::Wait,
            HistoryKind::Acquire,
            HistoryKind::Release,
            HistoryKind::Lost,
            HistoryKind::Expired,
            HistoryKind::GaveUp,
            HistoryKind::Deadlock,
        ]
        .into_iter()
        .find(|k| k.word() == word)
    }
}

impl fmt::Display for HistoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// One event of a lock's history ([`Client::history`](crate::Client::history)), recorded by
/// a client with [`history`](crate::ConfigBuilder::history) on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HistoryEvent {
    /// When it happened, in µs since the Unix epoch on the clock of the server that keeps the
    /// recording client's stream. An acquire is stamped no earlier than it happened, a
    /// release or loss no later, so a hold's span lies within the real hold.
    pub at_us: u64,
    /// What happened.
    pub kind: HistoryKind,
    /// The lock, as its name is given.
    pub lock: String,
    /// The lock's kind (and a read-write lock's side), as the metrics label it.
    pub mode: LockKind,
    /// Who held or waited.
    #[cfg_attr(
        feature = "serde",
        serde(
            serialize_with = "crate::ser::owner_id",
            deserialize_with = "crate::ser::parse_owner"
        )
    )]
    pub owner: Owner,
    /// The recording client's name ([`ConfigBuilder::client_name`](crate::ConfigBuilder::client_name)).
    pub client_name: String,
    /// The recording process's host.
    pub host: String,
    /// The recording process's id.
    pub pid: u32,
    /// The owner's thread, by name (or its id when unnamed).
    pub thread: String,
    /// How long the owner waited before this event (acquire, timed out, deadlock).
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "waited_us",
            serialize_with = "crate::ser::opt_micros",
            deserialize_with = "crate::ser::parse_opt_micros"
        )
    )]
    pub waited: Option<Duration>,
    /// How long the hold this event ends lasted (release, lost).
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "held_us",
            serialize_with = "crate::ser::opt_micros",
            deserialize_with = "crate::ser::parse_opt_micros"
        )
    )]
    pub held: Option<Duration>,
    /// Whether the acquire found the lock busy first and waited (an acquire only).
    pub contended: bool,
}
