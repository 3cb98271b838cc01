//! Reading the state of a lock or synchronizer from its keys, for operators and dashboards:
//! [`Client::inspect`]. One read-only script (`lua/inspect.lua`) takes an atomic snapshot of
//! the name and its helper keys; [`snapshot`] decodes and classifies it.

mod clients;
mod snapshot;

use std::fmt;
use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::error::Result;
use crate::keys::{self, Layout};
use crate::scripts;

pub use clients::ClientConnection;
use snapshot::Snapshot;

/// The most items read from one key (hash fields, queue entries, permits, read holds of one
/// owner). A hash with more fields is no lock: it is reported as [`Kind::Unknown`].
const MAX_ITEMS: usize = 10_000;

/// What a name holds, as told by the types and layout of its keys.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// if let Some(found) = client.inspect("orders")? {
///     println!("orders is a {} lock", found.kind);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A reentrant lock ([`Client::lock`]): a HASH of owners and hold counts, and no helper key.
    ///
    /// A held [fair lock](Client::fair_lock) that nobody waits for looks the same (its queue
    /// keys exist only while threads wait) and is reported as this.
    Reentrant,
    /// A fair lock ([`Client::fair_lock`]): the lock HASH (while held) with a queue LIST
    /// and/or a timeout ZSET.
    Fair,
    /// A fenced lock ([`Client::fenced_lock`]): the lock HASH (while held) and its token
    /// counter, which stays after the lock is released.
    Fenced,
    /// A read-write lock ([`Client::read_write_lock`]): a HASH with a `mode` field.
    ReadWrite,
    /// A semaphore ([`Client::semaphore`]): told from a count-down latch by the channel its
    /// waiters listen on (see [`SemaphoreOrLatch`](Kind::SemaphoreOrLatch)).
    Semaphore,
    /// A permit-expirable semaphore ([`Client::permit_expirable_semaphore`]): the permit
    /// count STRING with its `{name}:timeout` ZSET.
    PermitExpirableSemaphore,
    /// A count-down latch ([`Client::count_down_latch`]): told from a semaphore by the
    /// channel its waiters listen on.
    CountDownLatch,
    /// An integer STRING and nothing else: a semaphore's available permits and a count-down
    /// latch's count are laid out alike. When threads wait on it, the channel they listen
    /// on tells which it is; otherwise it is reported as this.
    SemaphoreOrLatch,
    /// A [`FencedResource`](crate::FencedResource): a value with a `redlatch_fence:{name}` HASH.
    FencedResource,
    /// A key whose type or layout none of the above has (another application's key, or a
    /// damaged one): reported, never guessed.
    Unknown,
}

impl Kind {
    /// The kind's name as the `redlatch` tool prints it: `reentrant`, `fair`, `fenced`,
    /// `read-write`, `semaphore`, `expirable-semaphore`, `latch`, `semaphore-or-latch`,
    /// `fenced-resource` or `unknown`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::Kind::ReadWrite.as_str(), "read-write");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::Fenced => "fenced",
            Kind::ReadWrite => "read-write",
            Kind::Semaphore => "semaphore",
            Kind::PermitExpirableSemaphore => "expirable-semaphore",
            Kind::CountDownLatch => "latch",
            Kind::SemaphoreOrLatch => "semaphore-or-latch",
            Kind::FencedResource => "fenced-resource",
            Kind::Unknown => "unknown",
        }
    }

    /// Whether this is a lock kind whose holders [`Lock::force_unlock`](crate::Lock::force_unlock)
    /// can break: reentrant, fair, fenced or read-write.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(redlatch::Kind::Fair.is_lock());
    /// assert!(!redlatch::Kind::Semaphore.is_lock());
    /// ```
    pub fn is_lock(self) -> bool {
        matches!(
            self,
            Kind::Reentrant | Kind::Fair | Kind::Fenced | Kind::ReadWrite
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mode of a read-write lock, or the side of a hold on it.
///
/// # Examples
///
/// ```
/// assert_eq!(redlatch::Mode::Write.as_str(), "write");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Shared: readers hold it.
    Read,
    /// Exclusive: a writer holds it (and may also read).
    Write,
}

impl Mode {
    /// `read` or `write`, as stored in the lock's `mode` field.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::Mode::Read.as_str(), "read");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => keys::MODE_READ,
            Mode::Write => keys::MODE_WRITE,
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Mode {
    /// As [`as_str`](Self::as_str).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Kind {
    /// As [`as_str`](Self::as_str).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who holds or waits: an owner id `"<client id>:<thread number>"` split in its parts.
///
/// The client id is [`Client::id`] of a redlatch client (or a Redisson client's id), the
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

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.client_id, self.thread)
    }
}

/// One owner's holds on a lock.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// for holder in client.inspect("orders")?.map(|i| i.holders).unwrap_or_default() {
///     println!("{} holds it {} time(s)", holder.owner, holder.holds);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Holder {
    /// Who holds it (serialized as the fields `owner`, `client_id` and `thread`).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub owner: Owner,
    /// How many holds (re-entries count).
    pub holds: u32,
    /// For a reader of a read-write lock: the remaining lease of each hold, oldest first;
    /// `None` for a hold whose lease key has expired (its reader died: the hold no longer
    /// counts, and goes at the next release). Empty for other holders. Serialized as
    /// `lease_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_ms", serialize_with = "crate::ser::opt_durations")
    )]
    pub read_leases: Vec<Option<Duration>>,
    /// The connections of the holder's client, once [traced](Inspection::trace): empty when
    /// no connection carries its client id and every connection of the server is a redlatch
    /// client's (its client is gone); `None` before, or when no connection carries its id
    /// but some are not redlatch's (Redisson does not name its connections with its id: the
    /// holder may be alive there).
    pub connections: Option<Vec<ClientConnection>>,
}

/// One waiter in a fair lock's queue.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let queue = client.inspect("payments")?.map(|i| i.queue).unwrap_or_default();
/// for (place, waiter) in queue.iter().enumerate() {
///     println!("#{} {} presumed dead in {:?}", place + 1, waiter.owner, waiter.deadline);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct QueueEntry {
    /// Who waits (serialized as the fields `owner`, `client_id` and `thread`).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub owner: Owner,
    /// Time left (on the server's clock) until the waiter is presumed dead and skipped unless
    /// it checks in; zero once passed; `None` if it has no deadline (it is then skipped when
    /// it reaches the head). Serialized as `deadline_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "deadline_ms", serialize_with = "crate::ser::opt_duration")
    )]
    pub deadline: Option<Duration>,
    /// The connections of the waiter's client, once [traced](Inspection::trace) (see
    /// [`Holder::connections`]).
    pub connections: Option<Vec<ClientConnection>>,
}

/// One permit held from a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// for permit in client.inspect("render-slots")?.map(|i| i.permit_leases).unwrap_or_default() {
///     println!("{} expires in {:?}", permit.id, permit.expires_in);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ExpirablePermit {
    /// The permit's id, as [`PermitId::as_str`](crate::PermitId::as_str).
    pub id: String,
    /// Time left on its lease (server clock): zero once expired (it goes back to the count
    /// at the semaphore's next operation); `None` if it never expires. Serialized as
    /// `expires_in_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "expires_in_ms", serialize_with = "crate::ser::opt_duration")
    )]
    pub expires_in: Option<Duration>,
}

/// A snapshot of a lock or synchronizer: what [`Client::inspect`] read.
///
/// The keys are read atomically (one script), so the fields agree with each other. Fields
/// that do not apply to the [`kind`](Self::kind) are empty or `None`.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// match client.inspect("orders")? {
///     None => println!("nothing named orders"),
///     Some(found) => println!("{}: {} holder(s)", found.kind, found.holders.len()),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Inspection {
    /// The name inspected.
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Redis's `TYPE` of the key `name` (`hash`, `string`, `none`, ...).
    pub key_type: String,
    /// The keys of it that exist: `name` and its helper keys (queue, timeouts, token counter,
    /// read-hold leases, permit expiries, fence).
    pub keys: Vec<String>,
    /// Time left on the key `name`: a lock's lease. `None` if the key does not exist,
    /// `Duration::MAX` if it never expires (semaphores, latches). Serialized as `lease_ms`
    /// (-1 for no expiry).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_ms", serialize_with = "crate::ser::opt_duration")
    )]
    pub lease: Option<Duration>,
    /// The owners holding a lock (reentrant, fair, fenced), or the writer of a read-write
    /// lock in write mode, with their hold counts.
    pub holders: Vec<Holder>,
    /// A read-write lock's mode; `None` for other kinds or when free.
    pub mode: Option<Mode>,
    /// The read holders of a read-write lock (a writer that also reads appears here too).
    pub readers: Vec<Holder>,
    /// A fair lock's waiters, head first.
    pub queue: Vec<QueueEntry>,
    /// Available permits of a semaphore (also set for [`Kind::SemaphoreOrLatch`]).
    pub permits: Option<i64>,
    /// A count-down latch's count (also set for [`Kind::SemaphoreOrLatch`]).
    pub count: Option<i64>,
    /// The permits held from a permit-expirable semaphore.
    pub permit_leases: Vec<ExpirablePermit>,
    /// A fenced lock's latest fencing token (taken by the current or the last holder), or
    /// the newest token that wrote a fenced resource.
    pub token: Option<u64>,
    /// How many connections are subscribed to the object's wake-up channel: clients with at
    /// least one thread waiting (one connection per client, whatever its number of waiting
    /// threads). `None` for a fair lock (see [`queue`](Self::queue)) and unknown keys.
    pub subscribers: Option<u64>,
}

impl Inspection {
    /// This inspection, showing `name` (the name as the caller gave it) instead of the key.
    pub(crate) fn named(mut self, name: &str) -> Inspection {
        name.clone_into(&mut self.name);
        self
    }
}

impl Client {
    /// Reads what the name `name` holds: its [`Kind`], holders with hold counts, remaining
    /// lease, fair queue, read holders, permits, latch count, latest fencing token, as one
    /// atomic snapshot (a read-only script), plus the number of clients waiting on its
    /// channel (one more call). `Ok(None)` when nothing of that name exists.
    ///
    /// The kind is told from the keys' types and layout (see the crate docs' key layout); a
    /// key that fits none is [`Kind::Unknown`]. A semaphore and a count-down latch look alike
    /// in Redis: see [`Kind::SemaphoreOrLatch`]. Reading changes nothing (in particular, no
    /// dead fair-queue waiter is pruned and no expired permit reclaimed).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; connection errors.
    ///
    /// With a [`NameMapper`](crate::NameMapper), `name` is mapped as an object's name is, and
    /// the inspection's [`name`](Inspection::name) is `name` as given; its
    /// [`keys`](Inspection::keys) are the keys in Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let _guard = client.lock("orders").lock()?;
    /// let found = client.inspect("orders")?.expect("held, so it exists");
    /// assert_eq!(found.kind, redlatch::Kind::Reentrant);
    /// assert_eq!(found.holders[0].owner.client_id, client.id());
    /// # Ok(()) }
    /// ```
    pub fn inspect(&self, name: &str) -> Result<Option<Inspection>> {
        let named = self.named(name);
        let found = self.inspect_excluding(&named.key, false)?;
        Ok(found.map(|i| i.named(&named.given)))
    }

    /// [`inspect`](Self::inspect) of the key `name` (a mapped name); when `watching`, this
    /// client's connection is subscribed for a watch, and is not counted on a channel where
    /// no thread of this client waits.
    pub(crate) fn inspect_excluding(
        &self,
        name: &str,
        watching: bool,
    ) -> Result<Option<Inspection>> {
        crate::names::check_name("object", name)?;
        let layout = Layout::new(name);
        // On a cluster, helper keys of a name such as `a}b`, `{}x` or `x{` hash to another
        // slot than the name (CROSSSLOT): they cannot exist next to it, so they count as
        // absent, and the name stands in for them.
        let pool = &self.inner.backend;
        let clustered = pool.clustered();
        let slot = pool.slot(name);
        let helpers = [
            &layout.queue,
            &layout.timeouts,
            &layout.token,
            &layout.permits,
            &layout.fence,
        ]
        .map(|key| (pool.slot(key) == slot).then_some(key.as_str()));
        let flags: String = helpers
            .iter()
            .map(|k| if k.is_some() { '1' } else { '0' })
            .collect();
        // Read-hold keys share a slot only through the prefix's hash tag.
        let reads =
            !clustered || (has_tag(&layout.read_prefix) && pool.slot(&layout.read_prefix) == slot);
        let read_prefix = if reads {
            layout.read_prefix.as_str()
        } else {
            ""
        };
        let reply: Value = pool.run(name, |c| {
            let mut call = scripts::INSPECT.key(name);
            for key in helpers {
                call.key(key.unwrap_or(name));
            }
            call.arg(read_prefix).arg(MAX_ITEMS).arg(&flags).invoke(c)
        })?;
        let snapshot = Snapshot::decode(&reply)?;
        let Some(mut found) = snapshot.classify(&layout) else {
            return Ok(None);
        };
        let channels = wait_channels(&layout, found.kind);
        if channels.is_empty() {
            return Ok(Some(found));
        }
        let mut counts = Vec::with_capacity(channels.len());
        for channel in channels {
            let own = watching && !self.inner.pubsub.has_waiters(channel);
            counts.push(self.subscribers(channel)?.saturating_sub(u64::from(own)));
        }
        if let [semaphore, latch] = counts[..] {
            // Waiters tell a semaphore from a latch by the channel they listen on.
            match (semaphore > 0, latch > 0) {
                (true, false) => {
                    found.kind = Kind::Semaphore;
                    found.count = None;
                }
                (false, true) => {
                    found.kind = Kind::CountDownLatch;
                    found.permits = None;
                }
                _ => {}
            }
        }
        found.subscribers = Some(counts.iter().sum());
        Ok(Some(found))
    }

    /// How many connections subscribe `channel` (on a cluster: sharded subscriptions on
    /// the node that owns its slot).
    fn subscribers(&self, channel: &str) -> Result<u64> {
        let pool = &self.inner.backend;
        let which = pool.pubsub_mode().numsub();
        let reply: (String, u64) = pool.run(channel, |c| {
            redis::cmd("PUBSUB").arg(which).arg(channel).query(c)
        })?;
        Ok(reply.1)
    }
}

/// Whether `key` has a hash tag (a non-empty `{...}` after its first `{`), which alone
/// decides its cluster slot.
fn has_tag(key: &str) -> bool {
    key.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .is_some_and(|(tag, _)| !tag.is_empty())
}

/// The channels whose subscribers wait on an object of `kind`.
fn wait_channels(layout: &Layout, kind: Kind) -> Vec<&str> {
    match kind {
        Kind::Reentrant | Kind::Fenced => vec![&layout.lock_channel],
        Kind::ReadWrite => vec![&layout.rw_channel],
        Kind::Semaphore | Kind::PermitExpirableSemaphore => vec![&layout.semaphore_channel],
        Kind::CountDownLatch => vec![&layout.latch_channel],
        Kind::SemaphoreOrLatch => vec![&layout.semaphore_channel, &layout.latch_channel],
        _ => vec![],
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn hash_tags_are_non_empty_braces_after_the_first_open_brace() {
        assert!(has_tag("{orders}"));
        assert!(has_tag("{a}b}"));
        assert!(!has_tag("{}x"));
        assert!(!has_tag("x{"));
        assert!(!has_tag("{}{x}"));
    }

    /// An inspection of `kind` with holders `(thread, holds)` and queued threads, of
    /// client `c`.
    pub(crate) fn inspection(kind: Kind, holders: &[(u64, u32)], queue: &[u64]) -> Inspection {
        let owner = |thread| Owner {
            client_id: "c".to_owned(),
            thread,
        };
        Inspection {
            name: "x".to_owned(),
            kind,
            key_type: "hash".to_owned(),
            keys: vec!["x".to_owned()],
            lease: Some(Duration::from_secs(30)),
            holders: holders
                .iter()
                .map(|&(t, holds)| Holder {
                    owner: owner(t),
                    holds,
                    read_leases: Vec::new(),
                    connections: None,
                })
                .collect(),
            mode: None,
            readers: Vec::new(),
            queue: queue
                .iter()
                .map(|&t| QueueEntry {
                    owner: owner(t),
                    deadline: None,
                    connections: None,
                })
                .collect(),
            permits: None,
            count: None,
            permit_leases: Vec::new(),
            token: None,
            subscribers: None,
        }
    }
}
