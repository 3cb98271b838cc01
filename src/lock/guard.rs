//! The guard of a held reentrant lock.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::lock::raw::Unlocked;
use crate::lock::Lock;
use crate::watchdog::Watch;

/// One hold of a [`Lock`]; dropping it releases the hold.
///
/// Not `Send`: the hold belongs to the thread that took it, as in Java and Redisson.
/// Dropping logs a release error; [`unlock`](Self::unlock) returns it.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let guard = client.lock("ledger").lock()?;
/// // ... critical section ...
/// if guard.is_lost() {
///     // the lease ran out or the lock was force-unlocked: do not commit
/// }
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    lock: Lock,
    owner: Arc<str>,
    /// Watchdog entry, for locks without an explicit lease.
    watch: Option<Watch>,
    /// For an explicit lease: when it runs out at the latest.
    expires: Option<Instant>,
    /// A fenced lock's fencing token for this hold.
    token: Option<u64>,
    released: bool,
    _not_send: PhantomData<*const ()>,
}

impl LockGuard {
    /// The one guard constructor: every acquire path ends here. `sent_at` is when the
    /// successful acquire was sent, so the lease started no earlier.
    pub(crate) fn new(
        lock: Lock,
        owner: Arc<str>,
        sent_at: Instant,
        token: Option<u64>,
    ) -> LockGuard {
        let (watch, expires) = match lock.lease {
            Some(lease) => (None, Some(sent_at + lease)),
            None => (
                Some(lock.raw.client.inner.watchdog.watch(
                    &lock.raw.name,
                    lock.raw.renewal(&owner),
                    sent_at,
                )),
                None,
            ),
        };
        LockGuard {
            lock,
            owner,
            watch,
            expires,
            token,
            released: false,
            _not_send: PhantomData,
        }
    }

    /// The lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("a").lock()?;
    /// assert_eq!(guard.lock().name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// The fencing token of this hold: `Some` for a [fenced lock](crate::Client::fenced_lock),
    /// `None` for the other kinds.
    ///
    /// Tokens of a lock strictly increase with every acquire by any client (re-entries
    /// included), so whatever the lock protects can refuse a write carrying a token older than
    /// one it has seen: a holder that was paused past its lease and still believes it holds the
    /// lock is turned away. See [`FencedResource`](crate::FencedResource) for such a store in
    /// Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.fenced_lock("ledger");
    /// let first = lock.lock()?.token().unwrap();
    /// let second = lock.lock()?.token().unwrap();
    /// assert!(second > first);
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The owner id of this hold: `"<client uuid>:<thread number>"`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("a").lock()?;
    /// assert_eq!(guard.owner(), client.owner_id());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// True once the lock is known to be lost: a watchdog renewal found it no longer held by
    /// this owner (expired, force-unlocked or taken), no renewal has confirmed the lease for
    /// a whole lease (Redis unreachable or paused: checked on the monotonic clock, without
    /// waiting for the watchdog), or an explicit lease has run out. A lost guard must not be trusted to exclude anybody.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("a").lock()?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        match (&self.watch, self.expires) {
            (Some(w), _) => w.lease.is_lost(),
            (None, Some(at)) => Instant::now() >= at,
            (None, None) => false,
        }
    }

    /// Releases this hold and reports what happened.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] if the lock was no longer held by this owner (nothing was deleted);
    /// connection errors (a lost reply is retried once, safely: see the unlock latch).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("a").lock()?;
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    /// Keeps the hold but forgets the guard: the watchdog goes on renewing it, and the same
    /// thread releases it later with [`Lock::unlock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("a");
    /// lock.lock()?.leak();
    /// assert_eq!(lock.hold_count()?, 1);
    /// lock.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn leak(mut self) {
        self.released = true;
    }

    fn release(&mut self) -> Result<()> {
        self.released = true;
        let inner = &self.lock.raw.client.inner;
        if let Some(w) = &self.watch {
            inner.watchdog.unwatch(w.id);
        }
        let lease = self.lock.lease.unwrap_or(inner.config.watchdog_timeout);
        match self.lock.raw.unlock(&self.owner, lease)? {
            Unlocked::NotHeld => {
                log::warn!(
                    "lock `{}` (owner {}) was lost before its guard released it",
                    self.lock.name(),
                    self.owner
                );
                Err(Error::LockLost {
                    name: self.lock.name().to_owned(),
                })
            }
            Unlocked::StillHeld | Unlocked::Released => Ok(()),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.release() {
                log::warn!("releasing lock `{}` failed: {e}", self.lock.name());
            }
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.name())
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("lost", &self.is_lost())
            .finish()
    }
}
