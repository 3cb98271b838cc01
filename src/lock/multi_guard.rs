//! [`MultiLockGuard`]: the holds of a [`MultiLock`](crate::MultiLock) or
//! [`RedLock`](crate::RedLock), their validity, and their release, which tries every member
//! and reports every failure.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::lock::guard::LockGuard;

/// The holds of a [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock); dropping it
/// releases every one.
///
/// Not `Send`, as [`LockGuard`]. Dropping logs release failures; [`unlock`](Self::unlock)
/// reports them.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let (a, b) = (redlatch::Client::open("redis://10.0.0.1/")?, redlatch::Client::open("redis://10.0.0.2/")?);
/// let guard = redlatch::MultiLock::new([a.lock("order:7"), b.lock("sku:42")])?.lock()?;
/// assert_eq!(guard.held(), 2);
/// guard.unlock()?; // reports every member that failed to release
/// # Ok(()) }
/// ```
#[must_use = "if unused the locks are released immediately"]
#[clippy::has_significant_drop]
pub struct MultiLockGuard {
    /// Member index → its hold (a RedLock holds only some).
    holds: Vec<Option<LockGuard>>,
    quorum: usize,
    released: bool,
}

impl MultiLockGuard {
    /// The guard of `holds` (member index → hold), of which `quorum` must stay live.
    pub(super) fn new(holds: Vec<Option<LockGuard>>, quorum: usize) -> MultiLockGuard {
        MultiLockGuard {
            holds,
            quorum,
            released: false,
        }
    }

    /// How many member locks this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// assert_eq!(guard.held(), 2);
    /// # Ok(()) }
    /// ```
    pub fn held(&self) -> usize {
        self.holds.iter().flatten().count()
    }

    /// The hold of member `index` (in the order the locks were given), if this guard has it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.fenced_lock("a"), client.lock("b")])?.lock()?;
    /// let token = guard.member(0).and_then(|g| g.token());
    /// # Ok(()) }
    /// ```
    pub fn member(&self, index: usize) -> Option<&LockGuard> {
        self.holds.get(index).and_then(Option::as_ref)
    }

    /// Whether the guard no longer holds what it needs: fewer live holds than all its locks
    /// (a [`MultiLock`](crate::MultiLock)) or than a majority (a [`RedLock`](crate::RedLock)).
    /// See [`LockGuard::is_lost`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// if guard.is_lost() { /* do not commit */ }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.holds.iter().flatten().filter(|g| !g.is_lost()).count() < self.quorum
    }

    /// How much longer the guard is known to hold what it needs, by the lease of each live
    /// hold minus the clock drift allowance (`lease / 100 + 2 ms`); zero once lost. Watchdog
    /// renewals extend it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?
    ///     .with_lease(Duration::from_secs(5))
    ///     .lock()?;
    /// assert!(guard.validity() < Duration::from_secs(5));
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        let mut ends: Vec<Instant> = self
            .holds
            .iter()
            .flatten()
            .filter(|g| !g.is_lost())
            .map(|g| {
                let lease = g.lock().lease_or_default();
                g.lease_expires() - (lease / 100 + Duration::from_millis(2)).min(lease)
            })
            .collect();
        if ends.len() < self.quorum {
            return Duration::ZERO;
        }
        // Held while at least `quorum` holds are: until the quorum-th latest end.
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends[self.quorum - 1].saturating_duration_since(Instant::now())
    }

    /// Releases every hold, and reports every failure.
    ///
    /// # Errors
    ///
    /// [`Error::PartialUnlock`] naming each lock whose release failed (the others are
    /// released all the same).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = redlatch::MultiLock::new([client.lock("a"), client.lock("b")])?.lock()?;
    /// if let Err(e) = guard.unlock() {
    ///     eprintln!("some locks stay until their lease ends: {e}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        self.released = true;
        let total = self.held();
        let mut failures = Vec::new();
        for (i, hold) in self.holds.iter_mut().enumerate() {
            if let Some(guard) = hold.take() {
                let name = guard.lock().key().to_owned();
                // A RedLock member's guard is of a bounded lock: its release is bounded too.
                let released = guard.unlock();
                if let Err(e) = released {
                    failures.push((format!("#{i} `{name}`"), e));
                }
            }
        }
        if failures.is_empty() {
            return Ok(());
        }
        Err(Error::PartialUnlock {
            released: total - failures.len(),
            total,
            failures,
        })
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.release() {
                log::warn!("releasing a multi-lock: {e}");
            }
        }
    }
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("holds", &self.holds)
            .field("quorum", &self.quorum)
            .finish()
    }
}
