//! What an inspection reports: the kind of object a name holds, its holders and their modes,
//! its fair queue and its expirable permits, gathered in an [`Inspection`].

use std::fmt;
use std::time::Duration;

use super::rate::RateInspection;
#[cfg(doc)]
use crate::client::Client;
use crate::hold::{LockKind, Owner};
use crate::keys;

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
    /// waiters listen on, or by a count of zero or less, which no latch has (see
    /// [`SemaphoreOrLatch`](Kind::SemaphoreOrLatch)).
    Semaphore,
    /// A permit-expirable semaphore ([`Client::permit_expirable_semaphore`]): the permit
    /// count STRING with its `{name}:timeout` ZSET.
    PermitExpirableSemaphore,
    /// A count-down latch ([`Client::count_down_latch`]): told from a semaphore by the
    /// channel its waiters listen on.
    CountDownLatch,
    /// A positive integer STRING and nothing else: a semaphore's available permits and a
    /// count-down latch's count are laid out alike. When threads wait on it, the channel they
    /// listen on tells which it is; otherwise it is reported as this. (Zero or less is a
    /// [`Semaphore`](Kind::Semaphore): a latch's key is deleted when its count reaches zero.
    /// A [permit-expirable semaphore](Kind::PermitExpirableSemaphore) with no permit out has
    /// no other key either, and is reported as this.)
    SemaphoreOrLatch,
    /// A [`FencedResource`](crate::FencedResource): a value with a `redlatch_fence:{name}` HASH.
    FencedResource,
    /// A group lock's group ([`Client::group_lock`]): a HASH naming each locked value's owner
    /// (see [`Inspection::values`]).
    Group,
    /// A rate limiter ([`Client::rate_limiter`], Redisson's `RRateLimiter`): a config HASH
    /// of `rate`, `interval` and `type` (no owner among its fields, unlike a lock's), with
    /// its permits left `{name}:value` and taken `{name}:permits` (per client, each ending
    /// in `:<client id>`). See [`Inspection::rate`].
    RateLimiter,
    /// A key whose type or layout none of the above has (another application's key, or a
    /// damaged one): reported, never guessed.
    Unknown,
}

impl Kind {
    /// The kind's name as the `redlatch` tool prints it: `reentrant`, `fair`, `fenced`,
    /// `read-write`, `semaphore`, `expirable-semaphore`, `latch`, `semaphore-or-latch`,
    /// `fenced-resource`, `group`, `rate-limiter` or `unknown`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::inspect::Kind::ReadWrite.as_str(), "read-write");
    /// assert_eq!(redlatch::inspect::Kind::RateLimiter.as_str(), "rate-limiter");
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
            Kind::Group => "group",
            Kind::RateLimiter => "rate-limiter",
            Kind::Unknown => "unknown",
        }
    }

    /// Whether this is a lock kind whose holders [`Lock::force_unlock`](crate::Lock::force_unlock)
    /// can break: reentrant, fair, fenced or read-write.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(redlatch::inspect::Kind::Fair.is_lock());
    /// assert!(!redlatch::inspect::Kind::Semaphore.is_lock());
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

#[cfg(feature = "serde")]
impl serde::Serialize for Kind {
    /// As [`as_str`](Self::as_str).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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

/// A waiter with a priority ([`Lock::with_priority`](crate::Lock::with_priority),
/// [`Semaphore::with_priority`](crate::Semaphore::with_priority)), as
/// [`Inspection::priorities`] lists it.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// for w in client.inspect("printer")?.map(|i| i.priorities).unwrap_or_default() {
///     println!("{}: effective priority {:.1}", w.id, w.effective);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PriorityWaiter {
    /// Who waits: a lock owner (`<client id>:<thread>`), a semaphore acquire's id
    /// (`<client id>:<request>`), or a permit-expirable semaphore acquire's first permit id.
    pub id: String,
    /// Its effective priority now: its priority plus one for each
    /// [`PRIORITY_AGING`](crate::PRIORITY_AGING) waited (a fair lock's waiter without a
    /// priority counts from when a waiter with one first saw it).
    pub effective: f64,
    /// Time left (server clock) until its place is dropped unless it attempts again: zero
    /// once passed. `None` on a fair lock, whose waiters Redisson's deadlines keep (see
    /// [`Inspection::queue`]). Serialized as `place_ends_in_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "place_ends_in_ms",
            serialize_with = "crate::ser::opt_duration"
        )
    )]
    pub place_ends_in: Option<Duration>,
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
#[derive(Debug, Clone, PartialEq)]
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
    /// read-hold leases, permit expiries, fence, a rate limiter's permits left and taken).
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
    /// lock in write mode, with their hold counts. For a group, each owner of a value once,
    /// its `holds` the number of values it holds.
    pub holders: Vec<Holder>,
    /// A read-write lock's mode; `None` for other kinds or when free.
    pub mode: Option<LockKind>,
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
    /// A group's locked values: each one's field (Redisson's hash of the value's encoded
    /// bytes: the value itself is not stored), owner, holds and time left.
    pub values: Vec<GroupValue>,
    /// A rate limiter's config, permits left and when the next come back (for a per-client
    /// rate, each client's found).
    pub rate: Option<RateInspection>,
    /// The waiters with a priority (of a plain or fenced lock, or a semaphore), highest
    /// effective priority first: the order they are served in. On a fair lock, every waiter
    /// of [`queue`](Self::queue) that a waiter with a priority has seen, by rank: the queue
    /// is the order served (its head is never overtaken).
    pub priorities: Vec<PriorityWaiter>,
    /// How many connections are subscribed to the object's wake-up channel: clients with at
    /// least one thread waiting (one connection per client, whatever its number of waiting
    /// threads). `None` for a fair lock (see [`queue`](Self::queue)) and unknown keys.
    /// Connections that only [`watch`](crate::Client::watch) it are not counted; a connection
    /// of another client that both waits on it and watches it is not counted either.
    pub subscribers: Option<u64>,
}

impl Inspection {
    /// Whether the name holds nothing but what is kept for good once nobody uses it (a
    /// fenced lock's token counter, an election's record and log, a semaphore's generation:
    /// they never expire, so that a token or a term never goes back) and nobody holds, reads,
    /// queues or waits: what `redlatch list` leaves out unless `--all`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let in_use = client.list("*")?.into_iter().filter(|i| !i.is_idle());
    /// println!("{} names in use", in_use.count());
    /// # Ok(()) }
    /// ```
    pub fn is_idle(&self) -> bool {
        let kept = [
            keys::FENCE_TOKEN,
            keys::ELECTION,
            keys::ELECTION_LOG,
            keys::SEMAPHORE_GENERATION,
        ];
        let kept_for_good = |key: &str| {
            kept.iter().any(|p| {
                key.strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with(':'))
            })
        };
        !self.keys.is_empty()
            && self.keys.iter().all(|k| kept_for_good(k))
            && self.holders.is_empty()
            && self.readers.is_empty()
            && self.queue.is_empty()
            && self.subscribers.unwrap_or(0) == 0
    }

    /// This inspection, showing `name` (the name as the caller gave it) instead of the key.
    pub(crate) fn named(mut self, name: &str) -> Inspection {
        name.clone_into(&mut self.name);
        self
    }
}

/// One locked value of a group ([`Kind::Group`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GroupValue {
    /// The value's field: Redisson's hash of its encoded bytes.
    pub field: String,
    /// Who holds it (serialized as the fields `owner`, `client_id` and `thread`).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub owner: Owner,
    /// How many holds (re-entries count).
    pub holds: u32,
    /// Time left on the hold (serialized as `lease_ms`).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_ms", serialize_with = "crate::ser::duration")
    )]
    pub lease: Duration,
}

/// One connection to Redis, as `CLIENT LIST` shows it: where it comes from and what it is
/// named. Found by [`Client::connections`], attached to holders and waiters by
/// [`Inspection::trace`].
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// for conn in client.connections()? {
///     println!("{} {} ({})", conn.addr, conn.name, conn.server);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ClientConnection {
    /// The client's end, `host:port` as the server sees it (`addr`).
    pub addr: String,
    /// Its name (`CLIENT SETNAME`): `<prefix>:<client id>` for a redlatch client.
    pub name: String,
    /// The server's id of the connection (`id`).
    pub id: u64,
    /// The library that opened it and its version (`CLIENT SETINFO`, Redis 7.2 and later;
    /// `None` before).
    pub lib_name: Option<String>,
    /// See [`lib_name`](Self::lib_name).
    pub lib_ver: Option<String>,
    /// How long it has been open (serialized as `age_ms`).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "age_ms", serialize_with = "crate::ser::duration")
    )]
    pub age: Duration,
    /// How long since its last command (serialized as `idle_ms`).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "idle_ms", serialize_with = "crate::ser::duration")
    )]
    pub idle: Duration,
    /// Its flags (`flags`): `N` for none, `S` a replica's link, `M` the master's link on a
    /// replica, `P` a pub/sub connection, and others (`CLIENT LIST`'s documentation).
    pub flags: String,
    /// The server it is connected to, as this client reaches it (a cluster has several).
    pub server: String,
}
