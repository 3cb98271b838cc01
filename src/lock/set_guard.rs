//! [`LockSetGuard`]: the holds of a [`LockSet`](crate::LockSet), one [`LockGuard`] per lock
//! (each renewed by the watchdog and watched for loss), released together by one script
//! call per group they were taken in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::hold::LockKind;
use crate::keys;
use crate::lock::guard::{End, LockGuard};
use crate::scripts;
use crate::watchdog::LostReason;

/// The kind a lock set's members are reported as (in metrics and history): each is a plain
/// lock, taken as part of a set.
pub(crate) const LABEL: LockKind = LockKind::LockSet;

/// How long a set that freed a name a waiter listens on leaves it to that waiter (see
/// [`LockSet`](crate::LockSet)'s fairness).
pub(crate) const YIELD: Duration = Duration::from_millis(100);

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
        let lost = |i: usize, name: &str| {
            let error = Error::LockLost {
                name: name.to_owned(),
            };
            (format!("#{i} `{name}`"), error)
        };
        for group in std::mem::take(&mut self.groups) {
            let mut names = Vec::with_capacity(group.members.len());
            let mut kept = Vec::with_capacity(group.members.len());
            let (mut client, mut owner, mut lease) = (None, None, Duration::ZERO);
            for (i, _) in group.members {
                let Some(hold) = holds[i].take() else {
                    continue;
                };
                let name = Arc::clone(&hold.lock().raw.key.name);
                // Its unlock could release a newer hold of this thread: left alone.
                let Some(hold) = hold.dissolve_if_lost(LABEL) else {
                    failures.push(lost(i, &name));
                    continue;
                };
                let lock = hold.lock();
                lease = lock.lease_or_default();
                client.get_or_insert_with(|| lock.raw.key.client.clone());
                owner.get_or_insert_with(|| Arc::clone(&hold.owner));
                names.push((i, name));
                // No longer renewed before the release (a renewal racing it would find the
                // lock gone and call the hold lost); its end is reported after.
                kept.push(hold.let_go());
            }
            let (Some(client), Some(owner)) = (client, owner) else {
                continue;
            };
            let keys: Vec<Arc<str>> = names.iter().map(|(_, n)| Arc::clone(n)).collect();
            let sent = Instant::now();
            let unlocked = unlock_group(&client, &keys, &owner, lease);
            // Each hold ends as the call says: released, found lost (when last known held),
            // or unknown (its release failed: it ends with its lease).
            let mut ends = vec![(sent, End::Released); kept.len()];
            match unlocked {
                Ok(not_held) => {
                    for at in not_held {
                        let (i, name) = &names[at];
                        failures.push(lost(*i, name));
                        ends[at] = (kept[at].lost_by(sent), End::Lost { expired: false });
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
                    ends.fill((sent, End::Unknown));
                }
            }
            for (hold, (at, end)) in kept.into_iter().zip(ends) {
                hold.ended(LABEL, at, end);
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

/// Releases one hold of each of `names` (one slot) held by `owner`: one call of
/// `lua/lock_set_unlock.lua`. Returns the positions in `names` of those this owner did not
/// hold.
pub(super) fn unlock_group(
    client: &Client,
    names: &[Arc<str>],
    owner: &str,
    lease: Duration,
) -> Result<Vec<usize>> {
    let Some(first) = names.first() else {
        return Ok(Vec::new());
    };
    let mut call = scripts::LOCK_SET_UNLOCK.prepare_invoke();
    for name in names {
        call.key(&**name)
            .key(keys::lock_channel(name))
            .key(keys::lock_set_yield(name));
    }
    call.arg(lease.as_millis() as u64)
        .arg(owner)
        .arg(client.publish())
        .arg(YIELD.as_millis() as u64);
    let replies: Vec<i64> = client.inner.backend.run(first, |c| call.invoke(c))?;
    Ok(replies
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == 0)
        .map(|(at, _)| at)
        .collect())
}
