//! The permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`): the raw script
//! calls of `lua/pes_*.lua` and the public, blocking API over them.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::config::{check_duration, millis, MAX_DURATION};
use crate::error::{Error, Result};
use crate::keys;
use crate::names::Named;
use crate::pubsub::{wait, Channel, Tried};
use crate::scripts;

/// What the scripts say when the permit timeout set (not the count) has the wrong type.
const TIMEOUTS_WRONG_TYPE: &str = "permit timeout key is not a sorted set";

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
/// assert_eq!(id.to_string(), id.as_str());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId(String);

impl PermitId {
    /// A permit id from its text, as [`as_str`](Self::as_str) gave it. Not checked: an id
    /// that is no permit of the semaphore is reported by the calls that use it.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = redlatch::PermitId::new("0123456789abcdef0123456789abcdef");
    /// assert_eq!(id.as_str().len(), 32);
    /// ```
    pub fn new(id: impl Into<String>) -> PermitId {
        PermitId(id.into())
    }

    /// The id as stored in Redis (the member of the `{name}:timeout` sorted set).
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
        PermitId(id)
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
        self.run(&scripts::PES_TRY_SET_PERMITS, &[&permits.to_string()])
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
        self.run(&scripts::PES_ADD_PERMITS, &[&delta.to_string()])
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
        match self.acquire_until(None, lease)? {
            Some(id) => Ok(id),
            None => unreachable!("a wait without deadline only ends in a permit"),
        }
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
        self.acquire_until(Some(Instant::now()), lease)
    }

    /// Takes a permit with the given `lease`, waiting at most `wait`. Returns `Ok(None)` if
    /// the wait ran out.
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
    /// if let Some(id) = slots.try_acquire_for(Duration::from_secs(3), Duration::from_secs(30))? {
    ///     slots.release(&id)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, wait: Duration, lease: Duration) -> Result<Option<PermitId>> {
        check_duration("wait", wait)?;
        self.try_acquire_until(Instant::now() + wait, lease)
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
    ///     .try_acquire_until(deadline, Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_until(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        if deadline.saturating_duration_since(Instant::now()) > MAX_DURATION {
            return Err(Error::invalid("deadline is more than one year away"));
        }
        self.acquire_until(Some(deadline), lease)
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
        self.run(&scripts::PES_RELEASE, &[id.as_str()])
            .map(|released: i64| released == 1)
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
        match self.run(&scripts::PES_UPDATE_LEASE, &[id.as_str(), &lease_ms])? {
            1 => Ok(()),
            0 => Err(self.unknown(id)),
            n => Err(Error::Protocol(format!("update lease script replied {n}"))),
        }
    }

    fn check_name(&self) -> Result<()> {
        crate::config::check_name("semaphore", &self.name)
    }

    fn unknown(&self, id: &PermitId) -> Error {
        Error::UnknownPermit {
            name: self.name.to_string(),
            id: id.as_str().to_owned(),
        }
    }

    /// Runs one `lua/pes_*.lua` script with the semaphore's keys, the publish command and
    /// `args`. A wrong-type reply names the key the script found wrong.
    fn run<T: redis::FromRedisValue>(&self, script: &redis::Script, args: &[&str]) -> Result<T> {
        let mut call = script.key(&*self.name);
        call.key(&*self.timeouts)
            .key(&*self.channel)
            .arg(self.client.publish());
        for arg in args {
            call.arg(*arg);
        }
        let reply = self
            .client
            .inner
            .pool
            .run(&self.name, |c| match call.invoke(c) {
                Ok(reply) => Ok(Some(reply)),
                Err(e) if e.to_string().contains(TIMEOUTS_WRONG_TYPE) => Ok(None),
                Err(e) => Err(e),
            })?;
        reply.ok_or_else(|| Error::WrongType {
            key: self.timeouts.to_string(),
        })
    }

    /// One acquire attempt with permit id `id`: the permit id once taken. The count it saw
    /// goes to the other waiters; and when it took the last permit, or learned when the
    /// earliest permit expires, one other waiter is told as this one leaves (the others'
    /// wait bounds predate that expiry: else a holder that dies could strand them).
    fn attempt(&self, id: &PermitId, lease: Duration) -> Result<Tried> {
        let lease_ms = millis(lease).to_string();
        let reply: Vec<i64> = self.run(&scripts::PES_ACQUIRE, &[&lease_ms, id.as_str()])?;
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

    /// The one acquire path: tries, then waits until `deadline` (forever when `None`),
    /// through the one wait function. Each block ends when woken (a release, added permits,
    /// the subscription confirmed, a pub/sub reconnect), at the deadline, or when the earliest
    /// permit expires: expired permits are reclaimed by the next script call, which nobody
    /// else may make.
    fn acquire_until(
        &self,
        deadline: Option<Instant>,
        lease: Duration,
    ) -> Result<Option<PermitId>> {
        self.check_name()?;
        check_duration("lease", lease)?;
        // One id for every attempt: a failed attempt stores nothing under it.
        let id = PermitId::random();
        let taken = wait(
            &self.client.inner.pubsub,
            Channel::permits(&self.channel, 1),
            deadline,
            &mut || self.attempt(&id, lease),
        )?;
        Ok(taken.then_some(id))
    }
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
        let prelude = include_str!("../../lua/pes_common.lua");
        assert!(prelude.contains(TIMEOUTS_WRONG_TYPE));
    }
}
