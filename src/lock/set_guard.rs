//! [`LockSetGuard`]: the holds of a [`LockSet`](crate::LockSet), one [`LockGuard`] per lock
//! (each renewed by the watchdog and watched for loss), released together by one script
//! call per group they were taken in.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::lock::guard::LockGuard;
use crate::lock::set::unlock_group;
use crate::watchdog::LostReason;

/// One script call's locks: each lock's index in the set, and the hold count it took.
pub(crate) struct SetGroup {
    pub(crate) members: Vec<(usize, u32)>,
}

/// The holds of a [`LockSet`](crate::LockSet): every lock of the set. Dropping it releases
/// them all, by one script call per slot group (each freed lock's waiters are woken on its
/// channel, as by a plain unlock).
///
/// Not `Send`, as [`LockGuard`]: the holds belong to the thread that took them. Dropping logs
/// release failures; [`unlock`](Self::unlock) reports them.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let guard = client.lock_set(["a", "b"]).lock()?;
/// assert_eq!(guard.held(), 2);
/// if !guard.is_lost() { /* commit */ }
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the locks are released immediately"]
#[clippy::has_significant_drop]
pub struct LockSetGuard {
    /// The set's locks in the order given; emptied on release.
    holds: Vec<LockGuard>,
    groups: Vec<SetGroup>,
    released: bool,
}

impl LockSetGuard {
    /// The guard of `holds` (the set's order), taken in `groups`.
    pub(super) fn new(holds: Vec<LockGuard>, groups: Vec<SetGroup>) -> LockSetGuard {
        LockSetGuard {
            holds,
            groups,
            released: false,
        }
    }

    /// How many locks this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// assert_eq!(client.lock_set(["a", "b"]).lock()?.held(), 2);
    /// # Ok(()) }
    /// ```
    pub fn held(&self) -> usize {
        self.holds.len()
    }

    /// The holds, one per lock of the set, in the order given.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b"]).lock()?;
    /// assert_eq!(guard.holds()[1].lock().name(), "b");
    /// # Ok(()) }
    /// ```
    pub fn holds(&self) -> &[LockGuard] {
        &self.holds
    }

    /// True once any lock of the set is known to be lost (see [`LockGuard::is_lost`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b"]).lock()?;
    /// if guard.is_lost() { /* do not commit */ }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.holds.iter().any(LockGuard::is_lost)
    }

    /// Calls `f` once, on the watchdog's thread, when the first lock of the set is lost
    /// (at once, on this thread, if one is lost already). See [`LockGuard::on_lost`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b"]).lock()?;
    /// guard.on_lost(|why| eprintln!("a lock of the set was lost: {why:?}"));
    /// # Ok(()) }
    /// ```
    pub fn on_lost(&self, f: impl FnOnce(LostReason) + Send + 'static) {
        type Once = Box<dyn FnOnce(LostReason) + Send>;
        let once: Arc<Mutex<Option<Once>>> = Arc::new(Mutex::new(Some(Box::new(f))));
        for hold in &self.holds {
            let once = Arc::clone(&once);
            hold.on_lost(move |why| {
                let f = once.lock().take();
                if let Some(f) = f {
                    f(why);
                }
            });
        }
    }

    /// How much longer every lock is known to be held: the least of the holds' validity
    /// (their lease end less the clock drift allowance, `lease / 100 + 2 ms`); zero once one
    /// is lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b"]).lock()?;
    /// println!("valid for {:?}", guard.validity());
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        if self.is_lost() {
            return Duration::ZERO;
        }
        let now = std::time::Instant::now();
        self.holds
            .iter()
            .map(|g| {
                let lease = g.lock().lease_or_default();
                let end = g.lease_expires() - (lease / 100 + Duration::from_millis(2)).min(lease);
                end.saturating_duration_since(now)
            })
            .min()
            .unwrap_or_default()
    }

    /// Releases every lock, by one script call per group, and reports every failure.
    ///
    /// # Errors
    ///
    /// [`Error::PartialUnlock`] naming each lock that was lost before the release, or whose
    /// group's call failed (those stay until their lease ends, no longer renewed); the
    /// others are released all the same.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["a", "b"]).lock()?;
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
        let total = self.holds.len();
        let mut holds: Vec<Option<LockGuard>> = std::mem::take(&mut self.holds)
            .into_iter()
            .map(Some)
            .collect();
        let mut failures = Vec::new();
        for group in std::mem::take(&mut self.groups) {
            let mut names = Vec::with_capacity(group.members.len());
            let (mut client, mut owner, mut lease) = (None, None, Duration::ZERO);
            for (i, _) in group.members {
                let Some(hold) = holds[i].take() else {
                    continue;
                };
                let name = Arc::clone(&hold.lock().raw.key.name);
                if hold.is_lost() {
                    // Its unlock could release a newer hold of this thread: left alone.
                    failures.push((
                        format!("#{i} `{name}`"),
                        Error::LockLost {
                            name: name.to_string(),
                        },
                    ));
                    hold.dissolve();
                    continue;
                }
                let lock = hold.lock();
                lease = lock.lease_or_default();
                client.get_or_insert_with(|| lock.raw.key.client.clone());
                owner.get_or_insert_with(|| Arc::clone(&hold.owner));
                names.push((i, name));
                hold.dissolve();
            }
            let (Some(client), Some(owner)) = (client, owner) else {
                continue;
            };
            let keys: Vec<Arc<str>> = names.iter().map(|(_, n)| Arc::clone(n)).collect();
            match unlock_group(&client, &keys, &owner, lease) {
                Ok(not_held) => {
                    for at in not_held {
                        let (i, name) = &names[at];
                        failures.push((
                            format!("#{i} `{name}`"),
                            Error::LockLost {
                                name: name.to_string(),
                            },
                        ));
                    }
                }
                Err(e) => {
                    log::warn!(
                        "releasing {} lock(s) of a set (owner {owner}) failed: {e}",
                        keys.len()
                    );
                    for (i, name) in names {
                        failures.push((format!("#{i} `{name}`"), e.clone()));
                    }
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

impl Drop for LockSetGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.release() {
                log::warn!("releasing a lock set: {e}");
            }
        }
    }
}

impl std::fmt::Debug for LockSetGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockSetGuard")
            .field("held", &self.holds.len())
            .field("groups", &self.groups.len())
            .field("lost", &self.is_lost())
            .finish()
    }
}
