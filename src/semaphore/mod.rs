//! Semaphores: the plain one (Redisson's `RSemaphore`, here) and the permit-expirable one.

mod expirable;

pub use expirable::{PermitExpirableSemaphore, PermitGuard, PermitId};

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::names::Named;
use crate::pubsub::{wait, Channel, Tried};
use crate::scripts;
use crate::time::{check_duration, millis, MAX_DURATION};

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`.
///
/// The permits are a number in Redis. Nobody owns a permit: any thread or process may
/// release permits, including ones it never acquired (as `java.util.concurrent.Semaphore`).
/// Permits have no lease either: permits taken by a process that dies are gone until somebody
/// adds them back (use a [`PermitExpirableSemaphore`] when that matters).
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
///     let _permit = slots.acquire_guard(1)?; // blocks until a permit is free
///     // at most 4 of these run at once, across all processes
/// } // released here
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    /// The mapped name: the key of the count.
    name: Arc<str>,
    /// The name as the caller gave it.
    given: Arc<str>,
    channel: Arc<str>,
}

impl Semaphore {
    pub(crate) fn new(client: Client, name: Named) -> Semaphore {
        Semaphore {
            channel: keys::semaphore_channel(&name.key).into(),
            name: name.key,
            given: name.given,
            client,
        }
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
        &self.given
    }

    /// Sets the number of permits if the semaphore does not exist yet; returns whether it was
    /// set. Waiters re-check when it is.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key holds something else; [`Error::InvalidArgument`] for
    /// an empty name; connection errors.
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
        self.try_set(permits, None)
    }

    /// As [`try_set_permits`](Self::try_set_permits), and the semaphore expires `expiry`
    /// after it is set: the key is deleted then, as Redisson's `trySetPermits(permits,
    /// timeToLive)` does (`SET ... PX`). Acquires, releases, [`add_permits`](Self::add_permits),
    /// [`set_permits`](Self::set_permits) and [`drain_permits`](Self::drain_permits) keep the
    /// expiry; once it has passed, the semaphore has 0 permits and may be set again.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero expiry or one over a year (nothing is written);
    /// otherwise as [`try_set_permits`](Self::try_set_permits).
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
        self.try_set(permits, Some(expiry))
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
    /// [`Error::WrongType`] if the key holds something other than a number (nothing
    /// changes); [`Error::InvalidArgument`] for an empty name; connection errors.
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
        self.check_name()?;
        self.run(|c| {
            scripts::SEMAPHORE_SET
                .key(&self.name)
                .key(&self.channel)
                .arg(permits)
                .arg(self.client.publish())
                .invoke(c)
        })
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
        self.check_name()?;
        self.run(|c| scripts::SEMAPHORE_DRAIN.key(&self.name).invoke(c))
    }

    fn try_set(&self, permits: u32, expiry: Option<Duration>) -> Result<bool> {
        self.check_name()?;
        self.run(|c| {
            let mut call = scripts::SEMAPHORE_TRY_SET_PERMITS.key(&self.name);
            call.key(&self.channel)
                .arg(permits)
                .arg(self.client.publish());
            if let Some(expiry) = expiry {
                call.arg(millis(expiry));
            }
            call.invoke(c)
        })
    }

    /// Adds `delta` permits (a negative `delta` takes permits away, possibly below zero) and
    /// returns the new count. Creates the semaphore if needed. Waiters whose needs fit in the
    /// new count are woken.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits); a count that would overflow is a
    /// [`Error::Redis`] error and changes nothing.
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
        self.check_name()?;
        self.run(|c| {
            scripts::SEMAPHORE_ADD_PERMITS
                .key(&self.name)
                .key(&self.channel)
                .arg(delta)
                .arg(self.client.publish())
                .invoke(c)
        })
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
        self.check_name()?;
        let value: Option<String> = self.run(|c| redis::cmd("GET").arg(&*self.name).query(c))?;
        match value {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| Error::WrongType {
                key: self.name.to_string(),
            }),
        }
    }

    /// Takes `permits` permits, blocking until they are available.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for zero permits or an empty name, [`Error::WrongType`],
    /// connection errors. After an [`Error::Connection`] or [`Error::Timeout`] the outcome is
    /// unknown: the permits may have been taken, and nothing gives them back (permits have no
    /// lease; a [`PermitExpirableSemaphore`] bounds such a loss).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// sem.acquire(2)?;
    /// // ... use two slots ...
    /// sem.release(2)?;
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, permits: u32) -> Result<()> {
        match self.acquire_until(permits, None)? {
            true => Ok(()),
            false => unreachable!("a wait without deadline only ends in success"),
        }
    }

    /// Takes `permits` permits if they are available now; never waits.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// if sem.try_acquire(1)? {
    ///     // ...
    ///     sem.release(1)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, permits: u32) -> Result<bool> {
        self.acquire_until(permits, Some(Instant::now()))
    }

    /// Takes `permits` permits, waiting at most `wait`; returns false if the wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero wait (use [`try_acquire`](Self::try_acquire)) or
    /// one over a year; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// if sem.try_acquire_for(1, Duration::from_secs(2))? {
    ///     sem.release(1)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<bool> {
        check_duration("wait", wait)?;
        self.try_acquire_until(permits, Instant::now() + wait)
    }

    /// Takes `permits` permits, waiting at most until `deadline` (a deadline in the past makes
    /// one attempt); returns false if the deadline passed.
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
    /// let deadline = Instant::now() + Duration::from_millis(500);
    /// let got = client.semaphore("slots").try_acquire_until(1, deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_until(&self, permits: u32, deadline: Instant) -> Result<bool> {
        if deadline.saturating_duration_since(Instant::now()) > MAX_DURATION {
            return Err(Error::invalid("deadline is more than one year away"));
        }
        self.acquire_until(permits, Some(deadline))
    }

    /// Gives back `permits` permits (any thread may, whoever took them) and returns the new
    /// count. Waiters whose needs fit in it are woken.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for zero permits; otherwise as
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
        check_permits(permits)?;
        self.add_permits(i64::from(permits))
    }

    /// As [`acquire`](Self::acquire), returning a guard that releases the permits on drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// let permit = sem.acquire_guard(1)?;
    /// std::thread::spawn(move || {
    ///     // ... work; the permit is released when this thread drops it
    ///     drop(permit);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn acquire_guard(&self, permits: u32) -> Result<SemaphoreGuard> {
        self.acquire(permits)?;
        Ok(SemaphoreGuard::new(self.clone(), permits))
    }

    /// As [`try_acquire`](Self::try_acquire), returning a guard that releases on drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(_permit) = client.semaphore("slots").try_acquire_guard(1)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard(&self, permits: u32) -> Result<Option<SemaphoreGuard>> {
        Ok(self
            .try_acquire(permits)?
            .then(|| SemaphoreGuard::new(self.clone(), permits)))
    }

    /// As [`try_acquire_for`](Self::try_acquire_for), returning a guard that releases on drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("slots");
    /// if let Some(_permit) = sem.try_acquire_guard_for(1, Duration::from_secs(1))? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_for(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<Option<SemaphoreGuard>> {
        Ok(self
            .try_acquire_for(permits, wait)?
            .then(|| SemaphoreGuard::new(self.clone(), permits)))
    }

    /// As [`try_acquire_until`](Self::try_acquire_until), returning a guard that releases on
    /// drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// let sem = client.semaphore("slots");
    /// if let Some(_permits) = sem.try_acquire_guard_until(2, deadline)? {
    ///     // ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_guard_until(
        &self,
        permits: u32,
        deadline: Instant,
    ) -> Result<Option<SemaphoreGuard>> {
        Ok(self
            .try_acquire_until(permits, deadline)?
            .then(|| SemaphoreGuard::new(self.clone(), permits)))
    }

    fn check_name(&self) -> Result<()> {
        crate::names::check_name("semaphore", &self.name)
    }

    fn run<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.client.inner.backend.run(&self.name, f)
    }

    /// One attempt: done if the permits were taken; either way, the count it saw (after
    /// taking them) goes to the other waiters.
    fn attempt(&self, permits: u32) -> Result<Tried> {
        let (taken, count): (i64, i64) = self.run(|c| {
            scripts::SEMAPHORE_ACQUIRE
                .key(&self.name)
                .arg(permits)
                .invoke(c)
        })?;
        let tried = if taken == 1 {
            Tried::done()
        } else {
            Tried::again(None)
        };
        Ok(tried.seeing(count))
    }

    /// The one acquire path: tries, then waits on the channel until `deadline` (forever when
    /// `None`), through the one wait function. Each attempt reports the count it saw, which
    /// wakes the other waiters those permits may serve.
    fn acquire_until(&self, permits: u32, deadline: Option<Instant>) -> Result<bool> {
        self.check_name()?;
        check_permits(permits)?;
        wait(
            &self.client.inner.pubsub,
            Channel::permits(&self.channel, permits),
            deadline,
            &mut || self.attempt(permits),
        )
    }
}

fn check_permits(permits: u32) -> Result<()> {
    if permits == 0 {
        return Err(Error::invalid("permits must be at least 1"));
    }
    Ok(())
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish()
    }
}

/// Permits taken from a [`Semaphore`]; dropping the guard gives them back.
///
/// Permits have no owner, so the guard is `Send`: it may be released by another thread.
/// Dropping logs a release error; [`release`](Self::release) returns it.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let permit = client.semaphore("slots").acquire_guard(2)?;
/// assert_eq!(permit.permits(), 2);
/// permit.release()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the permits are released immediately"]
#[clippy::has_significant_drop]
pub struct SemaphoreGuard {
    semaphore: Semaphore,
    permits: u32,
    released: bool,
}

impl SemaphoreGuard {
    fn new(semaphore: Semaphore, permits: u32) -> SemaphoreGuard {
        SemaphoreGuard {
            semaphore,
            permits,
            released: false,
        }
    }

    /// How many permits this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// assert_eq!(client.semaphore("slots").acquire_guard(3)?.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore the permits came from.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client.semaphore("slots").acquire_guard(1)?;
    /// assert_eq!(permit.semaphore().name(), "slots");
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    /// Gives the permits back and reports errors.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// client.semaphore("slots").acquire_guard(1)?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.semaphore.release(self.permits).map(drop)
    }

    /// Keeps the permits taken: the guard is dropped without giving them back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("one-shot");
    /// sem.acquire_guard(1)?.forget(); // consumed for good
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) {
        self.released = true;
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.semaphore.release(self.permits) {
                log::warn!(
                    "releasing {} permits of semaphore `{}` failed: {e}",
                    self.permits,
                    self.semaphore.name
                );
            }
        }
    }
}

impl std::fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreGuard")
            .field("semaphore", &self.semaphore.name)
            .field("permits", &self.permits)
            .finish()
    }
}
