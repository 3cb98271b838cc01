//! [`Lock`]: the public, blocking API of every lock kind (plain, fair, fenced, spin, and the
//! sides of a read-write lock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::hold::HoldEvent;
use crate::lock::kind::Kind;
use crate::lock::owner::{LockOwner, Ownership, ThreadOwned};
use crate::lock::raw::{RawLock, Unlocked};
use crate::names::Named;
use crate::order;

/// A distributed reentrant lock, wire-compatible with Redisson's `RLock`.
///
/// Ownership belongs to the calling OS thread: the same thread may lock again (the hold count
/// goes up) and every hold is released by its own guard. Other threads and other clients,
/// Rust or Java, wait until the last hold is released or its lease runs out.
///
/// Made by [`Client::lock`]; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let lock = client.lock("inventory:1000");
/// {
///     let _guard = lock.lock()?; // blocks; the watchdog renews the lease while held
///     // critical section
/// } // released here, one waiter woken
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(3))? {
///     guard.unlock()?; // explicit release that reports errors
/// }
/// # Ok(()) }
/// ```
///
/// # Owners
///
/// By default the calling thread owns each hold ([`ThreadOwned`]). [`with_owner`](Self::with_owner)
/// gives a lock whose holds belong to a [`LockOwner`] instead, whose guards are `Send`.
#[derive(Clone)]
pub struct Lock<O = ThreadOwned> {
    pub(crate) raw: Arc<RawLock>,
    pub(crate) lease: Option<Duration>,
    pub(crate) owner: O,
    /// This lock's maximum hold time, over the client's ([`Lock::with_max_hold`]).
    pub(crate) max_hold: Option<Duration>,
    /// Set only on the copy a [`Lock::preempt`] acquires with: its attempts preempt.
    pub(crate) preempt: Option<Arc<crate::lock::revoke::Preempt>>,
}

impl Lock {
    /// The lock `name` of kind `kind` (see `Client::lock` and its siblings).
    pub(crate) fn new(client: Client, name: &Named, kind: impl Kind) -> Lock {
        Lock {
            raw: Arc::new(RawLock::new(client, name, kind)),
            lease: None,
            owner: ThreadOwned,
            max_hold: None,
            preempt: None,
        }
    }
}

impl<O: Ownership> Lock<O> {
    /// This lock, held by `owner` instead of the calling thread: acquire and release from any
    /// thread, with guards that are `Send`. Reentrancy is per owner. The lease setting is kept.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let job = client.lock_owner();
    /// let lock = client.lock("job:42").with_owner(&job);
    /// let guard = lock.lock()?;
    /// let worker = std::thread::spawn(move || {
    ///     // ... the job goes on on another thread, and releases there
    ///     guard.unlock()
    /// });
    /// worker.join().unwrap()?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner(&self, owner: &LockOwner) -> Lock<LockOwner> {
        Lock {
            raw: Arc::clone(&self.raw),
            lease: self.lease,
            max_hold: self.max_hold,
            owner: owner.clone(),
            preempt: None,
        }
    }

    /// This lock, with every call it makes to Redis bounded by `bound` (connecting, waiting
    /// for a connection, each reply), on a connection of its own and without retries: a
    /// [`RedLock`](crate::RedLock) member, whose node timeout keeps one slow node from eating
    /// the wait.
    pub(crate) fn bounded(&self, bound: Duration) -> Lock<O> {
        Lock {
            raw: Arc::new(self.raw.bounded(bound)),
            lease: self.lease,
            max_hold: self.max_hold,
            owner: self.owner.clone(),
            preempt: None,
        }
    }

    /// Whether this is a fair lock (made by [`Client::fair_lock`] or
    /// [`Client::non_reentrant_fair_lock`]): granted in arrival order.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert!(client.fair_lock("payments").is_fair());
    /// assert!(client.non_reentrant_fair_lock("payments").is_fair());
    /// assert!(!client.lock("payments").is_fair());
    /// ```
    pub fn is_fair(&self) -> bool {
        self.raw.kind.is_fair()
    }

    /// Whether the owner may acquire the lock again while it holds it (the hold count goes
    /// up). False for the locks of [`Client::non_reentrant_lock`] and
    /// [`Client::non_reentrant_fair_lock`], which refuse such an acquire with
    /// [`Error::AlreadyHeld`].
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert!(client.lock("payments").is_reentrant());
    /// assert!(!client.non_reentrant_lock("payments").is_reentrant());
    /// assert!(!client.non_reentrant_fair_lock("payments").is_reentrant());
    /// ```
    pub fn is_reentrant(&self) -> bool {
        self.raw.kind.is_reentrant()
    }

    /// Whether this is a fenced lock (made by [`Client::fenced_lock`]): each acquire takes a
    /// fencing token, [`LockGuard::token`](crate::LockGuard::token).
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert!(client.fenced_lock("ledger").is_fenced());
    /// assert!(!client.lock("ledger").is_fenced());
    /// ```
    pub fn is_fenced(&self) -> bool {
        self.raw.kind.token_key().is_some()
    }

    /// The newest fencing token handed out by a fenced lock (by any client, Rust or Java);
    /// `None` before the first acquire, and always `None` for the other lock kinds (no round
    /// trip then). Redisson's `RFencedLock.getToken`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the token counter is not an integer; connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.fenced_lock("ledger");
    /// let guard = lock.lock()?;
    /// assert_eq!(lock.latest_token()?, guard.token());
    /// # Ok(()) }
    /// ```
    pub fn latest_token(&self) -> Result<Option<u64>> {
        let Some(key) = self.raw.kind.token_key() else {
            return Ok(None);
        };
        let value: Option<String> = self.raw.key.query(redis::cmd("GET").arg(key))?;
        super::parse_token(value, key)
    }

    /// The lock's name: the Redis key of its hash.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.lock("orders").name(), "orders");
    /// ```
    // `name` is the mapped name (the key); this returns the name as given.
    #[allow(clippy::misnamed_getters)]
    pub fn name(&self) -> &str {
        &self.raw.given
    }

    /// The lock's key: its name as mapped by the client's
    /// [`NameMapper`](crate::NameMapper), which errors and log messages show.
    pub(crate) fn key(&self) -> &str {
        &self.raw.key.name
    }

    /// This lock with an explicit lease: each acquire sets the key to expire after `lease`
    /// and the watchdog does not renew it. Without it, the lease is the client's watchdog
    /// timeout (30 s by default), renewed while the guard lives.
    ///
    /// A zero or absurd (over a year) lease is reported by the acquire calls as
    /// [`Error::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("x").with_lease(Duration::from_secs(10)).lock()?;
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Duration) -> Lock<O> {
        self.lease = Some(lease);
        self
    }

    /// This lock with a maximum hold time, instead of the client's
    /// ([`ConfigBuilder::max_hold`](crate::ConfigBuilder::max_hold), none by default): the
    /// watchdog renews a hold no further than `max_hold` after its acquire, then lets the
    /// lease run out, and the guard turns lost
    /// ([`LostReason::MaxHoldReached`](crate::LostReason::MaxHoldReached)). The hold ends
    /// within the last third of the watchdog timeout before the cap; a cap shorter than the
    /// watchdog timeout ends it when the acquire's lease runs out.
    ///
    /// Only holds renewed by the watchdog are capped: with [`with_lease`](Self::with_lease)
    /// the lease already ends by itself. A re-entry by the thread keeps the cap of its first
    /// hold, counted from that hold's acquire, and sets the lease no further than it. To lift
    /// a client-wide cap for one lock, give it a long one (up to a year).
    ///
    /// A zero or absurd (over a year) cap is reported by the acquire calls as
    /// [`Error::InvalidArgument`], before anything is sent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("nightly-report").with_max_hold(Duration::from_secs(3600));
    /// let guard = lock.lock()?;
    /// guard.on_lost(|reason| log::warn!("report lock lost: {reason:?}"));
    /// // ... a run that must not keep the lock for more than an hour ...
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(mut self, max_hold: Duration) -> Lock<O> {
        self.max_hold = Some(max_hold);
        self
    }

    /// Releases one hold of the owner (the calling thread, or the lock's [`LockOwner`]) without
    /// a guard: for holds kept past their
    /// guard with [`LockGuard::leak`](crate::LockGuard::leak). Release a leaked hold through a `Lock` with the same
    /// lease setting it was taken with: only watchdog holds are un-registered from the watchdog.
    ///
    /// The server cannot tell holds apart: called while the thread has no leaked hold left
    /// (for example one that was lost meanwhile), it releases a hold of one of the thread's
    /// live guards instead, and that guard is no longer renewed nor told of a loss.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] if the owner holds no hold of the lock (the lock is untouched,
    /// whoever holds it).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("a");
    /// lock.lock()?.leak();
    /// // ... later, on the same thread:
    /// lock.unlock()?;
    /// assert!(lock.unlock().unwrap_err().is_not_held());
    /// # Ok(()) }
    /// ```
    pub fn unlock(&self) -> Result<()> {
        self.raw.check_name()?;
        let owner = self.owner();
        self.raw.settle_first(&owner)?;
        if self.lease.is_none() {
            // Only holds taken without an explicit lease are renewed by the watchdog (and a
            // leaked guard's explicit hold was uncounted when it was leaked).
            let field: Arc<str> = self.raw.field(&owner).into();
            self.raw
                .key
                .client
                .inner
                .watchdog
                .unwatch_key(&self.raw.key.name, &field);
        }
        let sent = Instant::now();
        match self
            .raw
            .unlock(&owner, self.lease_for(&owner, self.lease_or_default()))?
        {
            Unlocked::NotHeld => Err(Error::NotHeld {
                name: self.key().to_owned(),
            }),
            Unlocked::StillHeld | Unlocked::Released | Unlocked::Passed => {
                // The end of a leaked guard's hold, as its guard's release would record it.
                let (client, name) = (&self.raw.key.client, &self.raw.key.name);
                if O::ONE_THREAD {
                    order::released(client, name);
                }
                self.raw
                    .emit(&owner, sent, HoldEvent::Released { held: None });
                Ok(())
            }
        }
    }

    /// Deletes the lock whoever holds it and wakes a waiter. Returns whether it was held.
    /// For a side of a [`ReadWriteLock`](crate::ReadWriteLock), only when the lock is held in
    /// that side's mode (else nothing changes and it returns false), and every waiter is woken.
    ///
    /// For operators breaking a stuck lock: the evicted holder's guard reports it as lost at
    /// its next renewal.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key is not a lock (it is left alone), connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let was_held = client.lock("stuck").force_unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.raw.check_name()?;
        self.raw.force_unlock()
    }

    /// Whether anybody holds the lock. For a side of a [`ReadWriteLock`](crate::ReadWriteLock):
    /// whether the lock is held in that side's mode (Redisson's semantics; a writer that also
    /// reads counts as write mode).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("a");
    /// let guard = lock.lock()?;
    /// assert!(lock.is_locked()?);
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.raw.is_locked()
    }

    /// Whether the owner (the calling thread, or the lock's [`LockOwner`]) holds the lock (this
    /// side of it, for a read-write lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("a");
    /// let guard = lock.lock()?;
    /// assert!(lock.is_held_by_current_thread()?);
    /// # Ok(()) }
    /// ```
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.raw.key.query(
            redis::cmd("HEXISTS")
                .arg(self.key())
                .arg(self.raw.kind.count_field(&self.owner())),
        )
    }

    /// How many holds the owner (the calling thread, or the lock's [`LockOwner`]) has on the
    /// lock (0 if none).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("a");
    /// let (g1, g2) = (lock.lock()?, lock.lock()?);
    /// assert_eq!(lock.hold_count()?, 2);
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> Result<u32> {
        self.raw
            .key
            .query(
                redis::cmd("HGET")
                    .arg(self.key())
                    .arg(self.raw.kind.count_field(&self.owner())),
            )
            .map(|n: Option<u32>| n.unwrap_or(0))
    }

    /// Time until the lock's lease runs out; `None` if nobody holds it.
    /// A key without expiry (never written by redlatch or Redisson) reports `Duration::MAX`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("a");
    /// let guard = lock.lock()?;
    /// assert!(lock.remaining_lease()?.unwrap().as_secs() <= 30);
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        let ms: i64 = self.raw.key.query(redis::cmd("PTTL").arg(self.key()))?;
        Ok(match ms {
            -2 => None,
            ms if ms < 0 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms as u64)),
        })
    }

    /// The owner id of a call made now: the calling thread's, or the lock owner's.
    pub(crate) fn owner(&self) -> Arc<str> {
        self.owner.owner_id(&self.raw.key.client)
    }

    /// The lease to set now for `owner`: `lease`, or less when `owner` already holds this lock
    /// in a capped hold. A re-entry or a partial release sets the lease in Redis, and must not
    /// set it past the hold's cap (the watchdog renews it no further than that either).
    pub(crate) fn lease_for(&self, owner: &str, lease: Duration) -> Duration {
        if self.lease.is_some() || self.max_hold_or_default().is_none() {
            return lease;
        }
        let field: Arc<str> = self.raw.field(owner).into();
        match self
            .raw
            .key
            .client
            .inner
            .watchdog
            .cap_of(&self.raw.key.name, &field)
        {
            Some(cap) => {
                let left = cap.saturating_duration_since(Instant::now());
                lease.min(left).max(Duration::from_millis(1))
            }
            None => lease,
        }
    }

    /// The maximum hold time of this lock's watchdog holds: its own, or the client's.
    pub(crate) fn max_hold_or_default(&self) -> Option<Duration> {
        self.max_hold.or(self.raw.key.client.inner.config.max_hold)
    }

    pub(crate) fn lease_or_default(&self) -> Duration {
        self.lease
            .unwrap_or(self.raw.key.client.inner.config.watchdog_timeout)
    }
}

impl<O: Ownership + std::fmt::Debug> std::fmt::Debug for Lock<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.raw.key.name)
            .field("kind", &self.raw.kind.label().as_str())
            .field("lease", &self.lease)
            .field("max_hold", &self.max_hold)
            .field("owner", &self.owner)
            .finish()
    }
}
