//! [`Semaphore`], the plain semaphore, and its calls other than acquiring (`acquire.rs`):
//! setting up and changing the count, reading it, releasing permits.

use std::time::Duration;

use super::raw::{RawSemaphore, Released};
use crate::client::Client;
use crate::error::Result;
use crate::names::Named;
use crate::semaphore::shared::{check_name, check_permits};
use crate::time::check_duration;

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`.
///
/// The permits are a number in Redis. Nobody owns a permit: any thread or process may
/// release permits, including ones it never acquired (as `java.util.concurrent.Semaphore`).
/// Permits have no lease either: permits taken by a process that dies are gone until somebody
/// adds them back (use a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) when
/// that matters).
///
/// A release publishes the new count; blocked threads whose needs fit in it are woken (in
/// each client, in the order they started waiting) and nothing is sent while they wait.
///
/// Made by [`Client::semaphore`]; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let slots = client.semaphore("encoder-slots");
/// slots.try_set_permits(4)?; // only the first caller sets it up
/// {
///     let _permit = slots.acquire(1)?; // blocks until a permit is free
///     // at most 4 of these run at once, across all processes
/// } // released here
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    pub(super) raw: RawSemaphore,
}

impl Semaphore {
    pub(crate) fn new(client: Client, name: Named) -> Semaphore {
        Semaphore {
            raw: RawSemaphore::new(client, name),
        }
    }

    /// This semaphore, whose acquires wait with `priority` among the waiters that have one:
    /// the highest effective priority is served first, where a waiter's effective priority is
    /// its priority plus one for each [`PRIORITY_AGING`](crate::PRIORITY_AGING) it has waited,
    /// so that no waiter starves (the bound, as for [`Lock::with_priority`](crate::Lock::with_priority)).
    /// The first in line is served strictly: the permits it waits for go to nobody else
    /// with a priority, however few a later waiter wants. Waiters without a priority (and
    /// Redisson's) do not queue: they take what is available as they always did, so give every
    /// waiter of a semaphore a priority (0 is the lowest) for the order to hold. See the
    /// guide's [revocation chapter](crate::_guide::revocation).
    ///
    /// An acquire with a priority above [`MAX_PRIORITY`](crate::MAX_PRIORITY) fails with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let urgent = client.semaphore("slots").with_priority(10);
    /// let _permits = urgent.acquire(2)?; // served before the waiters of priority 0 queued
    /// # Ok(()) }
    /// ```
    pub fn with_priority(&self, priority: u32) -> Semaphore {
        let mut semaphore = self.clone();
        semaphore.raw.priority = Some(priority);
        semaphore
    }

    /// The priority this semaphore's acquires wait with, if any.
    pub fn priority(&self) -> Option<u32> {
        self.raw.priority
    }

    /// The semaphore's name: the Redis key holding the count.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.semaphore("slots").name(), "slots");
    /// ```
    // `name` is the mapped name (the key); this returns the name as given.
    #[allow(clippy::misnamed_getters)]
    pub fn name(&self) -> &str {
        &self.raw.given
    }

    /// Sets the number of permits if the semaphore does not exist yet; returns whether it was
    /// set. Waiters re-check when it is.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something else;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; connection
    /// errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// if sem.try_set_permits(10)? {
    ///     println!("created with 10 permits");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        check_name(&self.raw.name)?;
        self.raw.try_set(permits, None)
    }

    /// As [`try_set_permits`](Self::try_set_permits), and the semaphore expires `expiry`
    /// after it is set: the key is deleted then, as Redisson's `trySetPermits(permits,
    /// timeToLive)` does (`SET ... PX`). Acquires, releases, [`add_permits`](Self::add_permits),
    /// [`set_permits`](Self::set_permits) and [`drain_permits`](Self::drain_permits) keep the
    /// expiry; once it has passed, the semaphore has 0 permits and may be set again.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero expiry or one over
    /// a year (nothing is written); otherwise as [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("batch-2024-06-01");
    /// // 8 permits for today's batch; the semaphore is gone tomorrow
    /// if sem.try_set_permits_with_expiry(8, Duration::from_secs(24 * 3600))? {
    ///     println!("set up today's batch");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_set_permits_with_expiry(&self, permits: u32, expiry: Duration) -> Result<bool> {
        check_duration("expiry", expiry)?;
        check_name(&self.raw.name)?;
        self.raw.try_set(permits, Some(expiry))
    }

    /// Sets the number of available permits, whether the semaphore exists or not, and
    /// publishes it: waiters whose needs fit in it are woken. Permits taken before are not
    /// counted (nobody owns them): releasing them later adds to the new count. An expiry the
    /// semaphore had is kept. Zero is allowed: nobody acquires until permits are added.
    ///
    /// Redisson's plain `RSemaphore` has no such call (its permit-expirable semaphore's
    /// `setPermits` sets the total, acquired permits included); a Java waiter is woken by
    /// it as by a release.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`](crate::Error::WrongType) if the key holds something other than a
    /// number (nothing changes); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// an empty name; connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// sem.set_permits(16)?; // scale to 16 free slots, whatever there were
    /// assert_eq!(sem.available_permits()?, 16);
    /// # Ok(()) }
    /// ```
    pub fn set_permits(&self, permits: u32) -> Result<()> {
        check_name(&self.raw.name)?;
        self.raw.set(permits)
    }

    /// Deletes the semaphore: its count and its generation (`redlatch_semaphore:{name}`), in
    /// one `DEL`; returns whether it existed. Guards still out are then lost: their releases
    /// give nothing back into a semaphore set up again. Redisson's `RSemaphore.delete` deletes
    /// the count only (its peers know no generation): delete a shared semaphore from here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; connection
    /// errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("nightly:slots");
    /// sem.try_set_permits(4)?;
    /// // ... the night's work ...
    /// assert!(sem.delete()?);
    /// assert_eq!(sem.available_permits()?, 0);
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> Result<bool> {
        check_name(&self.raw.name)?;
        self.raw.delete()
    }

    /// Takes every available permit and returns how many it took, leaving 0; as
    /// `java.util.concurrent.Semaphore::drainPermits`, a negative count (after
    /// [`add_permits`](Self::add_permits) took more than were free) is raised to 0 and
    /// returned. A semaphore that does not exist is left absent and gives 0. Nothing is
    /// published (no waiter fits in 0 permits). Redisson's `drainPermits`, except that an
    /// expiry the semaphore had is kept.
    ///
    /// # Errors
    ///
    /// As [`set_permits`](Self::set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// let taken = sem.drain_permits()?; // stop new work
    /// // ... maintenance ...
    /// sem.add_permits(taken)?; // and give the permits back
    /// # Ok(()) }
    /// ```
    pub fn drain_permits(&self) -> Result<i64> {
        check_name(&self.raw.name)?;
        self.raw.drain()
    }

    /// Adds `delta` permits (a negative `delta` takes permits away, possibly below zero) and
    /// returns the new count. Creates the semaphore if needed. Waiters whose needs fit in the
    /// new count are woken.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits); a count that would overflow is a
    /// [`Error::Redis`](crate::Error::Redis) error and changes nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// let now = sem.add_permits(-2)?; // scale down by two
    /// # Ok(()) }
    /// ```
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        check_name(&self.raw.name)?;
        self.raw.add(delta)
    }

    /// The number of permits available now (0 if the semaphore does not exist; negative after
    /// [`add_permits`](Self::add_permits) took more than were free).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let free = client.semaphore("slots").available_permits()?;
    /// # Ok(()) }
    /// ```
    pub fn available_permits(&self) -> Result<i64> {
        check_name(&self.raw.name)?;
        self.raw.available()
    }

    /// Gives back `permits` permits (any thread may, whoever took them) and returns the new
    /// count. Waiters whose needs fit in it are woken.
    ///
    /// A release whose reply is lost is tried again, and once more when the server answers
    /// if it still has none; a latch (as Redisson's unlock has) makes it count once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for zero permits; otherwise as
    /// [`add_permits`](Self::add_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// sem.acquire(1)?;
    /// sem.release(1)?;
    /// # Ok(()) }
    /// ```
    pub fn release(&self, permits: u32) -> Result<i64> {
        check_permits(permits as usize)?;
        match self.raw.release(permits, None)? {
            Released::Given(count) | Released::Dropped(count) => Ok(count),
        }
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.raw.name)
            .finish()
    }
}
