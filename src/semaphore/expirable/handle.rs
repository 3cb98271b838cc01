//! [`PermitExpirableSemaphore`], and its calls other than acquiring (`acquire.rs`,
//! `renewed.rs`): setting up and changing the count, reading the counts and leases, releasing
//! permits and updating their leases.

use std::fmt;
use std::time::Duration;

use super::id::PermitId;
use super::raw::{check_count, RawExpirable};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::names::Named;
use crate::semaphore::shared::check_name;
use crate::time::check_duration;

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
/// let id = slots.acquire(Duration::from_secs(60))?.forget(); // blocks until a permit is free; kept by id
/// // ... render; a crash here frees the permit after 60 s
/// slots.release(&id)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(super) raw: RawExpirable,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: Client, name: Named) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            raw: RawExpirable::new(client, name),
        }
    }

    /// This semaphore, whose acquires wait with `priority` among the waiters that have one,
    /// served as [`Semaphore::with_priority`](crate::Semaphore::with_priority) says: the
    /// highest effective priority first (it rises by one per
    /// [`PRIORITY_AGING`](crate::PRIORITY_AGING) waited), and the first in line strictly.
    /// Waiters without a priority (and Redisson's) do not queue.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let urgent = client.permit_expirable_semaphore("slots").with_priority(10);
    /// let _permit = urgent.acquire(Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn with_priority(&self, priority: u32) -> PermitExpirableSemaphore {
        let mut semaphore = self.clone();
        semaphore.raw.priority = Some(priority);
        semaphore
    }

    /// The priority this semaphore's acquires wait with, if any.
    pub fn priority(&self) -> Option<u32> {
        self.raw.priority
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
        &self.raw.given
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
        check_name(&self.raw.name)?;
        self.raw.try_set(permits)
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
        check_name(&self.raw.name)?;
        const LIMIT: i64 = 1 << 53;
        if !(-LIMIT < delta && delta < LIMIT) {
            return Err(Error::invalid("permit delta must be within ±2^53"));
        }
        self.raw.add(delta)
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
        check_name(&self.raw.name)?;
        self.raw.available()
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
    /// let _permit = slots.acquire(Duration::from_secs(30))?;
    /// assert!(slots.acquired_permits()? >= 1);
    /// # Ok(()) }
    /// ```
    pub fn acquired_permits(&self) -> Result<u64> {
        check_name(&self.raw.name)?;
        self.raw.counts().map(|c| c.acquired)
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
    /// let _permit = slots.acquire(Duration::from_secs(30))?;
    /// assert_eq!(slots.permits()?, 4); // 3 available, 1 taken
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> Result<i64> {
        check_name(&self.raw.name)?;
        let counts = self.raw.counts()?;
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
    /// let id = slots.acquire(Duration::from_secs(30))?.forget();
    /// assert!(slots.remaining_lease(&id)?.unwrap() <= Duration::from_secs(30));
    /// slots.release(&id)?;
    /// assert_eq!(slots.remaining_lease(&id)?, None);
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self, id: &PermitId) -> Result<Option<Duration>> {
        check_name(&self.raw.name)?;
        self.raw.lease(id)
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
    /// let id = slots.acquire(Duration::from_secs(30))?.forget();
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
    /// let id = slots.acquire(Duration::from_secs(30))?.forget();
    /// assert!(slots.try_release(&id)?);
    /// assert!(!slots.try_release(&id)?);
    /// # Ok(()) }
    /// ```
    pub fn try_release(&self, id: &PermitId) -> Result<bool> {
        check_name(&self.raw.name)?;
        self.raw.release(id)
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
    /// let ids: Vec<_> = slots
    ///     .acquire_many(2, Duration::from_secs(30))?
    ///     .into_iter()
    ///     .map(|permit| permit.forget())
    ///     .collect();
    /// assert_eq!(slots.try_release_many(&ids)?, 2);
    /// assert_eq!(slots.try_release_many(&ids)?, 0);
    /// # Ok(()) }
    /// ```
    pub fn try_release_many(&self, ids: &[PermitId]) -> Result<u32> {
        check_name(&self.raw.name)?;
        check_count(ids.len())?;
        self.raw.release_many(ids)
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
    /// let id = slots.acquire(Duration::from_secs(10))?.forget();
    /// // the work takes longer than planned:
    /// slots.update_lease(&id, Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn update_lease(&self, id: &PermitId, lease: Duration) -> Result<()> {
        check_name(&self.raw.name)?;
        check_duration("lease", lease)?;
        if self.raw.update_lease(id, lease)? {
            Ok(())
        } else {
            Err(self.unknown(id))
        }
    }

    /// The error for `id`, no permit of this semaphore.
    pub(super) fn unknown(&self, id: &PermitId) -> Error {
        Error::UnknownPermit {
            name: self.raw.name.to_string(),
            id: id.as_str().to_owned(),
        }
    }
}

impl fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.raw.name)
            .finish()
    }
}
