//! The permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`): the raw script
//! calls of `lua/pes_*.lua` and the public, blocking API over them.

mod guard;
mod renewed;

pub use guard::PermitGuard;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::names::Named;
use crate::pubsub::{wait, Channel, Tried};
use crate::scripts;
use crate::time::{check_duration, millis, MAX_DURATION};

/// What the scripts say when the permit timeout set (not the count) has the wrong type.
const TIMEOUTS_WRONG_TYPE: &str = "permit timeout key is not a sorted set";

/// The most permits one call takes or releases at once: each is an id in the script call.
const MAX_PERMITS_AT_ONCE: usize = 10_000;

/// The id of one permit of a [`PermitExpirableSemaphore`]: 32 lowercase hex characters when
/// made by [`acquire`](PermitExpirableSemaphore::acquire) (Redisson's ids have the same form).
///
/// A permit belongs to nobody in particular: any thread or process that has its id may
/// [`release`](PermitExpirableSemaphore::release) it or
/// [`update its lease`](PermitExpirableSemaphore::update_lease). Send it as text with
/// [`as_str`](Self::as_str) and make it again with [`PermitId::new`] or `parse`.
///
/// # Examples
///
/// ```
/// use redlatch::PermitId;
/// let id: PermitId = "0123456789abcdef0123456789abcdef".parse().unwrap();
/// assert_eq!(id, PermitId::new("0123456789abcdef0123456789abcdef"));
/// assert_eq!(id, PermitId::new("0123456789ABCDEF0123456789ABCDEF")); // the same permit
/// assert_eq!(id.to_string(), id.as_str());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId(String);

impl PermitId {
    /// A permit id from its text, as [`as_str`](Self::as_str) gave it (hex is taken in
    /// either case, and kept in lowercase). Not checked: an id that is no permit of the
    /// semaphore is reported by the calls that use it.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = redlatch::PermitId::new("0123456789abcdef0123456789abcdef");
    /// assert_eq!(id.as_str().len(), 32);
    /// ```
    pub fn new(id: impl Into<String>) -> PermitId {
        let mut id = id.into();
        // Hex in either case is the same permit (the same bytes in Redis): one spelling, so
        // that equal permits are equal ids.
        if id.bytes().all(|b| b.is_ascii_hexdigit()) {
            id.make_ascii_lowercase();
        }
        PermitId(id)
    }

    /// The id as text, as Redisson shows its ids too: Redis holds the bytes that the hex
    /// stands for (the member of the `{name}:timeout` sorted set).
    ///
    /// # Examples
    ///
    /// ```
    /// let id = redlatch::PermitId::new("abc");
    /// assert_eq!(id.as_str(), "abc");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's member in the semaphore's `{name}:timeout` set: the 16 bytes its hex stands
    /// for, as Redisson stores them.
    fn member(&self) -> Vec<u8> {
        keys::permit_member(&self.0)
    }

    /// A fresh random id: 32 lowercase hex characters.
    fn random() -> PermitId {
        PermitId(uuid::Uuid::new_v4().simple().to_string())
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for PermitId {
    fn from(id: String) -> PermitId {
        PermitId::new(id)
    }
}

impl std::str::FromStr for PermitId {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> std::result::Result<PermitId, Self::Err> {
        Ok(PermitId::new(s))
    }
}

impl AsRef<str> for PermitId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A distributed semaphore whose permits carry ids and leases, wire-compatible with
/// Redisson's `RPermitExpirableSemaphore`.
///
/// Each permit is taken with a lease and returned by id, by any thread or process; a permit
/// whose lease runs out goes back to the semaphore by itself (at the next call on it from
/// any client), so a crashed holder cannot keep a permit forever. Waiting threads are woken
/// by pub/sub when permits are released or added, and re-try on their own when the earliest
/// permit's lease runs out; they send nothing to Redis in between.
///
/// Keys (Redisson's): STRING `name` = available permits; ZSET `{name}:timeout` = permit id →
/// expiry in ms (scores of 922337203685477 and above never expire); channel
/// `redisson_sc:{name}`, on which the new count is published. Expiry times are read on the
/// server's clock (`TIME`), not the client's as in Redisson, so client clock skew does not
/// matter.
///
/// Made by [`Client::permit_expirable_semaphore`]; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let slots = client.permit_expirable_semaphore("render-slots");
/// slots.try_set_permits(4)?; // only the first caller sets it
/// let id = slots.acquire(Duration::from_secs(60))?; // blocks until a permit is free
/// // ... render; a crash here frees the permit after 60 s
/// slots.release(&id)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(crate) client: Client,
    /// The mapped name: the key of the permit count.
    pub(crate) name: Arc<str>,
    /// The name as the caller gave it.
    given: Arc<str>,
    /// `{name}:timeout`: permit id → expiry in ms.
    timeouts: Arc<str>,
    /// `redisson_sc:{name}`.
    channel: Arc<str>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: Client, name: Named) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            client,
            timeouts: keys::permit_timeouts(&name.key).into(),
            channel: keys::semaphore_channel(&name.key).into(),
            name: name.key,
            given: name.given,
        }
    }

    /// The semaphore's name: the Redis key of its permit count.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.permit_expirable_semaphore("slots").name(), "slots");
    /// ```
    // `name` is the mapped name (the key); this returns the name as given.
    #[allow(clippy::misnamed_getters)]
    pub fn name(&self) -> &str {
        &self.given
    }

    /// Sets the number of available permits if the semaphore has none set yet; returns
    /// whether it did. Waiters are woken.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name), [`Error::WrongType`] (a key is not a
    /// semaphore's), [`Error::Connection`] or [`Error::Timeout`] (Redis unreachable).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if slots.try_set_permits(3)? {
    ///     println!("initialized with 3 permits");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.check_name()?;
        self.run(
            &scripts::PES_TRY_SET_PERMITS,
            &[permits.to_string().as_bytes()],
        )
        .map(|set: i64| set == 1)
    }

    /// Adds `delta` permits (removes them when negative: the count may go below zero, and
    /// acquires wait until it is back above it); returns the new count. Waiters are woken.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name, a delta of ±2⁵³ or more), [`Error::Redis`] if
    /// the count would reach ±2⁵³ (it is left as it was); otherwise as
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let now = slots.add_permits(2)?;
    /// assert_eq!(slots.add_permits(-2)?, now - 2);
    /// # Ok(()) }
    /// ```
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        self.check_name()?;
        const LIMIT: i64 = 1 << 53;
        if !(-LIMIT < delta && delta < LIMIT) {
            return Err(Error::invalid("permit delta must be within ±2^53"));
        }
        self.run(&scripts::PES_ADD_PERMITS, &[delta.to_string().as_bytes()])
    }

    /// The number of permits available now (expired permits counted back in); 0 if the
    /// semaphore was never set, negative after [`add_permits`](Self::add_permits) removed
    /// more than were free.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let free = client.permit_expirable_semaphore("slots").available_permits()?;
    /// # Ok(()) }
    /// ```
    pub fn available_permits(&self) -> Result<i64> {
        self.check_name()?;
        self.run(&scripts::PES_AVAILABLE, &[])
    }

    /// Takes a permit that expires after `lease` (rounded up to whole milliseconds) unless
    /// [released](Self::release) or [renewed](Self::update_lease) first, blocking until one
    /// is free.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name, a zero lease or one over a year),
    /// [`Error::WrongType`] (a key is not a semaphore's), [`Error::Connection`] or
    /// [`Error::Timeout`] (Redis unreachable; if the reply to a successful attempt was lost,
    /// the permit stays taken until its lease runs out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(30))?;
    /// slots.release(&id)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, lease: Duration) -> Result<PermitId> {
        self.acquire_many(1, lease).map(one)
    }

    /// Takes a permit with the given `lease` if one is free; never waits. Returns `Ok(None)`
    /// when none is.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// match slots.try_acquire(Duration::from_secs(30))? {
    ///     Some(id) => slots.release(&id)?,
    ///     None => println!("all slots busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, lease: Duration) -> Result<Option<PermitId>> {
        Ok(self.try_acquire_many(1, lease)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most `wait`. Returns `Ok(None)` if
    /// the wait ran out. What is acquired (the lease) comes first, as in every acquire call.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait (use [`try_acquire`](Self::try_acquire))
    /// or one over a year; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let (lease, wait) = (Duration::from_secs(30), Duration::from_secs(3));
    /// if let Some(id) = slots.try_acquire_id_for(lease, wait)? {
    ///     slots.release(&id)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_id_for(&self, lease: Duration, wait: Duration) -> Result<Option<PermitId>> {
        Ok(self.try_acquire_many_for(1, lease, wait)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most until `deadline` (a deadline in
    /// the past makes one attempt). Returns `Ok(None)` if the deadline passed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let id = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_id_until(Duration::from_secs(30), deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_id_until(
        &self,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<PermitId>> {
        Ok(self.try_acquire_many_until(1, lease, deadline)?.map(one))
    }

    /// Takes a permit with the given `lease`, waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_for`](Self::try_acquire_id_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// # #[allow(deprecated)]
    /// let id = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_for(Duration::from_secs(3), Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    #[deprecated(
        note = "use `try_acquire_id_for(lease, wait)`: the same call with the lease first, as \
                what is acquired comes first in every acquire call"
    )]
    pub fn try_acquire_for(&self, wait: Duration, lease: Duration) -> Result<Option<PermitId>> {
        self.try_acquire_id_for(lease, wait)
    }

    /// Takes a permit with the given `lease`, waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_until`](Self::try_acquire_id_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// # #[allow(deprecated)]
    /// let id = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_until(deadline, Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    #[deprecated(
        note = "use `try_acquire_id_until(lease, deadline)`: the same call with the lease \
                first, as what is acquired comes first in every acquire call"
    )]
    pub fn try_acquire_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        self.try_acquire_id_until(lease, deadline)
    }

    /// Takes `permits` permits at once, all with the same `lease`, blocking until that many
    /// are free; returns their ids (Redisson's `acquire(permits, leaseTime, unit)`). All or
    /// nothing: one script call takes every permit or none, so two callers waiting for 3 of
    /// 4 permits never deadlock holding 2 each. Each permit is then its own: release or renew
    /// them one by one, or together with [`try_release_many`](Self::try_release_many).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for 0 permits or more than 10,000; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let ids = slots.acquire_many(3, Duration::from_secs(30))?;
    /// assert_eq!(ids.len(), 3);
    /// assert_eq!(slots.try_release_many(&ids)?, 3);
    /// # Ok(()) }
    /// ```
    pub fn acquire_many(&self, permits: u32, lease: Duration) -> Result<Vec<PermitId>> {
        match self.acquire_until(permits, lease, None)? {
            Some(ids) => Ok(ids),
            None => unreachable!("a wait without deadline only ends in permits"),
        }
    }

    /// Takes `permits` permits with the given `lease` if that many are free; never waits.
    /// Returns `Ok(None)` when fewer are (nothing is taken).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if let Some(ids) = slots.try_acquire_many(2, Duration::from_secs(30))? {
    ///     slots.try_release_many(&ids)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many(&self, permits: u32, lease: Duration) -> Result<Option<Vec<PermitId>>> {
        self.acquire_until(permits, lease, Some(Instant::now()))
    }

    /// Takes `permits` permits with the given `lease`, waiting at most `wait` for that many
    /// to be free at once. Returns `Ok(None)` if the wait ran out (nothing is taken).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait or one over a year; otherwise as
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let (lease, wait) = (Duration::from_secs(30), Duration::from_secs(3));
    /// if let Some(ids) = slots.try_acquire_many_for(2, lease, wait)? {
    ///     slots.try_release_many(&ids)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_for(
        &self,
        permits: u32,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<Vec<PermitId>>> {
        check_duration("wait", wait)?;
        self.try_acquire_many_until(permits, lease, Instant::now() + wait)
    }

    /// Takes `permits` permits with the given `lease`, waiting at most until `deadline` (a
    /// deadline in the past makes one attempt). Returns `Ok(None)` if the deadline passed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let ids = client
    ///     .permit_expirable_semaphore("slots")
    ///     .try_acquire_many_until(2, Duration::from_secs(30), deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_many_until(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<Vec<PermitId>>> {
        if deadline.saturating_duration_since(Instant::now()) > MAX_DURATION {
            return Err(Error::invalid("deadline is more than one year away"));
        }
        self.acquire_until(permits, lease, Some(deadline))
    }

    /// As [`acquire`](Self::acquire), returning a guard that releases the permit on drop.
    /// The guard is `Send`: a permit belongs to no thread.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let permit = slots.acquire_guard(Duration::from_secs(30))?;
    /// std::thread::spawn(move || {
    ///     // ... render; the permit is released when this thread drops it
    ///     drop(permit);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn acquire_guard(&self, lease: Duration) -> Result<PermitGuard> {
        self.acquire(lease)
            .map(|id| PermitGuard::new(self.clone(), id))
    }

    /// As [`try_acquire`](Self::try_acquire), returning a guard that releases on drop.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if let Some(_permit) = slots.try_acquire_guard(Duration::from_secs(30))? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard(&self, lease: Duration) -> Result<Option<PermitGuard>> {
        Ok(self
            .try_acquire(lease)?
            .map(|id| PermitGuard::new(self.clone(), id)))
    }

    /// As [`try_acquire_id_for`](Self::try_acquire_id_for), returning a guard that releases
    /// on drop.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_for`](Self::try_acquire_id_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let (lease, wait) = (Duration::from_secs(30), Duration::from_secs(3));
    /// if let Some(_permit) = slots.try_acquire_guard_for(lease, wait)? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_for(
        &self,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<PermitGuard>> {
        Ok(self
            .try_acquire_id_for(lease, wait)?
            .map(|id| PermitGuard::new(self.clone(), id)))
    }

    /// As [`try_acquire_id_until`](Self::try_acquire_id_until), returning a guard that
    /// releases on drop.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_id_until`](Self::try_acquire_id_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let slots = client.permit_expirable_semaphore("slots");
    /// if let Some(_permit) = slots.try_acquire_guard_until(Duration::from_secs(30), deadline)? {
    ///     // ... render
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_until(
        &self,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Option<PermitGuard>> {
        Ok(self
            .try_acquire_id_until(lease, deadline)?
            .map(|id| PermitGuard::new(self.clone(), id)))
    }

    /// How many permits are taken now: those whose lease has not run out (Redisson's
    /// `acquiredPermits`). Reads only: writes and publishes nothing.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let _permit = slots.acquire_guard(Duration::from_secs(30))?;
    /// assert!(slots.acquired_permits()? >= 1);
    /// # Ok(()) }
    /// ```
    pub fn acquired_permits(&self) -> Result<u64> {
        self.counts().map(|c| c.acquired)
    }

    /// How many permits the semaphore has in all: available plus taken (Redisson's
    /// `getPermits`); 0 if it was never set. Reads only: writes and publishes nothing.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// slots.try_set_permits(4)?;
    /// let _permit = slots.acquire_guard(Duration::from_secs(30))?;
    /// assert_eq!(slots.permits()?, 4); // 3 available, 1 taken
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> Result<i64> {
        let counts = self.counts()?;
        Ok(if counts.exists {
            counts.available.saturating_add_unsigned(counts.acquired)
        } else {
            0
        })
    }

    /// How long permit `id` has left before it expires (rounded up to whole milliseconds):
    /// `None` if it is no permit of this semaphore (never acquired here, released, or
    /// expired), and `Some(Duration::MAX)` for a permit that never expires (one Redisson
    /// took without a lease). Reads only: writes and publishes nothing.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(30))?;
    /// assert!(slots.remaining_lease(&id)?.unwrap() <= Duration::from_secs(30));
    /// slots.release(&id)?;
    /// assert_eq!(slots.remaining_lease(&id)?, None);
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self, id: &PermitId) -> Result<Option<Duration>> {
        self.check_name()?;
        let ms: i64 = self.run(&scripts::PES_LEASE, &[&id.member()])?;
        match ms {
            -2 => Ok(None),
            -1 => Ok(Some(Duration::MAX)),
            1.. => Ok(Some(Duration::from_millis(ms.unsigned_abs()))),
            _ => Err(Error::Protocol(format!("lease script replied {ms}"))),
        }
    }

    /// Returns the permit `id` to the semaphore and wakes waiters.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownPermit`] if `id` is no permit of this semaphore: never acquired here,
    /// released already, or expired (nothing changes); otherwise as
    /// [`try_set_permits`](Self::try_set_permits). After [`Error::Connection`] or
    /// [`Error::Timeout`] the permit may or may not have been released.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(30))?;
    /// slots.release(&id)?;
    /// assert!(slots.release(&id).unwrap_err().is_unknown_permit());
    /// # Ok(()) }
    /// ```
    pub fn release(&self, id: &PermitId) -> Result<()> {
        if self.try_release(id)? {
            Ok(())
        } else {
            Err(self.unknown(id))
        }
    }

    /// As [`release`](Self::release), but an unknown or expired permit gives `Ok(false)`
    /// instead of an error.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(30))?;
    /// assert!(slots.try_release(&id)?);
    /// assert!(!slots.try_release(&id)?);
    /// # Ok(()) }
    /// ```
    pub fn try_release(&self, id: &PermitId) -> Result<bool> {
        self.check_name()?;
        self.run(&scripts::PES_RELEASE, &[&id.member()])
            .map(|released: i64| released == 1)
    }

    /// Returns every permit of `ids` that is still taken to the semaphore in one script call,
    /// and wakes waiters once; returns how many it released (Redisson's `tryRelease(List)`).
    /// Ids that are no permits (never acquired, released already, expired) are skipped.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no ids or more than 10,000; otherwise as
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let ids = slots.acquire_many(2, Duration::from_secs(30))?;
    /// assert_eq!(slots.try_release_many(&ids)?, 2);
    /// assert_eq!(slots.try_release_many(&ids)?, 0);
    /// # Ok(()) }
    /// ```
    pub fn try_release_many(&self, ids: &[PermitId]) -> Result<u32> {
        self.check_name()?;
        check_count(ids.len())?;
        let members: Vec<Vec<u8>> = ids.iter().map(PermitId::member).collect();
        let args: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
        let released: i64 = self.run(&scripts::PES_RELEASE, &args)?;
        u32::try_from(released)
            .map_err(|_| Error::Protocol(format!("release script replied {released}")))
    }

    /// Sets the lease of permit `id` to `lease` from now (longer or shorter than before).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownPermit`] if `id` is no permit of this semaphore (never acquired,
    /// released, or already expired: an expired permit cannot be revived);
    /// [`Error::InvalidArgument`] for a zero lease or one over a year; otherwise as
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire(Duration::from_secs(10))?;
    /// // the work takes longer than planned:
    /// slots.update_lease(&id, Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn update_lease(&self, id: &PermitId, lease: Duration) -> Result<()> {
        self.check_name()?;
        check_duration("lease", lease)?;
        let lease_ms = millis(lease).to_string();
        match self.run(
            &scripts::PES_UPDATE_LEASE,
            &[&id.member(), lease_ms.as_bytes()],
        )? {
            1 => Ok(()),
            0 => Err(self.unknown(id)),
            n => Err(Error::Protocol(format!("update lease script replied {n}"))),
        }
    }

    fn check_name(&self) -> Result<()> {
        crate::names::check_name("semaphore", &self.name)
    }

    fn unknown(&self, id: &PermitId) -> Error {
        Error::UnknownPermit {
            name: self.name.to_string(),
            id: id.as_str().to_owned(),
        }
    }

    /// Runs one `lua/pes_*.lua` script with the semaphore's keys, the publish command and
    /// `args`. A wrong-type reply names the key the script found wrong.
    fn run<T: redis::FromRedisValue>(&self, script: &scripts::Lua, args: &[&[u8]]) -> Result<T> {
        let mut call = script.key(&self.name);
        call.key(&self.timeouts)
            .key(&self.channel)
            .arg(self.client.publish());
        for arg in args {
            call.arg(*arg);
        }
        let reply = self
            .client
            .inner
            .backend
            .run(&self.name, |c| match call.invoke(c) {
                Ok(reply) => Ok(Some(reply)),
                Err(e) if e.to_string().contains(TIMEOUTS_WRONG_TYPE) => Ok(None),
                Err(e) => Err(e),
            })?;
        reply.ok_or_else(|| Error::WrongType {
            key: self.timeouts.to_string(),
        })
    }

    /// The counts as `lua/pes_counts.lua` reads them, without writing.
    fn counts(&self) -> Result<Counts> {
        self.check_name()?;
        let reply: Vec<i64> = self.run(&scripts::PES_COUNTS, &[])?;
        match reply[..] {
            [available, acquired, exists @ (0 | 1)] if acquired >= 0 => Ok(Counts {
                available,
                acquired: acquired.unsigned_abs(),
                exists: exists == 1,
            }),
            _ => Err(Error::Protocol(format!("counts script replied {reply:?}"))),
        }
    }

    /// One acquire attempt of every permit of `ids` at once: done once taken. The count it
    /// saw goes to the other waiters; and when it took the last permit, or learned when the
    /// earliest permit expires, one other waiter is told as this one leaves (the others'
    /// wait bounds predate that expiry: else a holder that dies could strand them).
    fn attempt(&self, ids: &[PermitId], lease: Duration) -> Result<Tried> {
        let lease_ms = millis(lease).to_string();
        let members: Vec<Vec<u8>> = ids.iter().map(PermitId::member).collect();
        let mut args = Vec::with_capacity(ids.len() + 1);
        args.push(lease_ms.as_bytes());
        args.extend(members.iter().map(Vec::as_slice));
        let reply: Vec<i64> = self.run(&scripts::PES_ACQUIRE, &args)?;
        match reply[..] {
            [1, left] => {
                let tried = Tried::done().seeing(left);
                Ok(if left <= 0 {
                    tried.telling_one()
                } else {
                    tried
                })
            }
            [0, available, wait] => {
                let retry_in = u64::try_from(wait).ok().map(Duration::from_millis);
                let tried = Tried::again(retry_in).seeing(available);
                Ok(if retry_in.is_some() {
                    tried.telling_one()
                } else {
                    tried
                })
            }
            _ => Err(Error::Protocol(format!("acquire script replied {reply:?}"))),
        }
    }

    /// The one acquire path: tries to take `permits` permits at once, then waits until
    /// `deadline` (forever when `None`) through the one wait function, woken when that many
    /// may be free. Each block ends when woken (a release, added permits, the subscription
    /// confirmed, a pub/sub reconnect), at the deadline, or when the earliest permit expires:
    /// expired permits are reclaimed by the next script call, which nobody else may make.
    fn acquire_until(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<PermitId>>> {
        Ok(self
            .acquire_sent(permits, lease, deadline)?
            .map(|(ids, _)| ids))
    }

    /// As [`acquire_until`](Self::acquire_until), also returning when the attempt that took
    /// the permits was sent: their lease runs from no earlier than that.
    fn acquire_sent(
        &self,
        permits: u32,
        lease: Duration,
        deadline: Option<Instant>,
    ) -> Result<Option<(Vec<PermitId>, Instant)>> {
        self.check_name()?;
        check_count(permits as usize)?;
        check_duration("lease", lease)?;
        // The same ids for every attempt: a failed attempt stores nothing under them.
        let ids: Vec<PermitId> = (0..permits).map(|_| PermitId::random()).collect();
        let mut sent_at = Instant::now();
        let taken = wait(
            &self.client.inner.pubsub,
            Channel::permits(&self.channel, permits),
            deadline,
            &mut || {
                sent_at = Instant::now();
                self.attempt(&ids, lease)
            },
        )?;
        Ok(taken.then_some((ids, sent_at)))
    }
}

/// What `lua/pes_counts.lua` reads.
struct Counts {
    /// The count, with the expired permits not yet reclaimed counted back in.
    available: i64,
    /// The permits whose lease has not run out.
    acquired: u64,
    /// Whether the count key exists.
    exists: bool,
}

/// The id of a call that took one permit.
fn one(mut ids: Vec<PermitId>) -> PermitId {
    debug_assert_eq!(ids.len(), 1);
    ids.swap_remove(0)
}

/// Checks how many permits one call takes or releases.
fn check_count(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::invalid("permits must be at least 1"));
    }
    if n > MAX_PERMITS_AT_ONCE {
        return Err(Error::invalid(format!(
            "at most {MAX_PERMITS_AT_ONCE} permits at once, not {n}"
        )));
    }
    Ok(())
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::TIMEOUTS_WRONG_TYPE;

    #[test]
    fn the_reclaim_prelude_reports_the_timeout_key_as_rust_expects() {
        let prelude = include_str!("../../lua/pes_check.lua");
        assert!(prelude.contains(TIMEOUTS_WRONG_TYPE));
    }
}
