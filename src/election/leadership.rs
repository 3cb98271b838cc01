//! [`Leadership`]: what a won campaign holds.

use crate::election::{Election, LOG_KEEPS};
use crate::error::{Error, Result};
use crate::lock::{LockGuard, Ownership, ThreadOwned};
use crate::scripts;
use crate::watchdog::LostReason;

/// This thread (or owner) leads an [`Election`]; dropping it resigns.
///
/// The leadership is the hold of the election's fenced lock, renewed by the watchdog: its
/// [term](Self::term) is that hold's fencing token. It can be lost (the lease ran out: a
/// process paused or cut off past it; the lock force-unlocked): [`is_lost`](Self::is_lost)
/// and [`on_lost`](Self::on_lost) say so as for any guard, and [`check`](Self::check) asks the
/// server before a side effect. A paused leader acts until it looks: fence what it writes
/// with the term ([`guard`](Self::guard) for a [`FencedResource`](crate::FencedResource)).
#[must_use = "if unused the leadership is resigned at once"]
pub struct Leadership<O: Ownership = ThreadOwned> {
    election: Election<O>,
    guard: Option<LockGuard<O>>,
    term: u64,
    value: Vec<u8>,
}

impl<O: Ownership> Leadership<O> {
    /// Proclaims `value` as the leader of a new term, holding `guard`; the lock is released
    /// again if that fails.
    pub(super) fn proclaimed(
        election: Election<O>,
        guard: LockGuard<O>,
        value: &[u8],
    ) -> Result<Leadership<O>> {
        let term = guard
            .token()
            .ok_or_else(|| Error::Protocol("an election's lock gave no token".into()))?;
        let mut leadership = Leadership {
            election,
            guard: Some(guard),
            term,
            value: Vec::new(),
        };
        let said = leadership.say(value, "new");
        let said = match said {
            // Its reply lost: won if the record says so (it ran), else not.
            Err(e) if e.is_connection() => match leadership.election.leader() {
                Ok(Some(l)) if l.term == term && l.owner == leadership.guard().owner() => {
                    leadership.value = value.to_vec();
                    Ok(())
                }
                _ => Err(e),
            },
            said => said,
        };
        match said {
            Ok(()) => Ok(leadership),
            Err(e) => {
                // Not leading: released (its record, if the call ran, goes with the hold).
                if let Some(guard) = leadership.guard.take() {
                    if let Err(release) = guard.unlock() {
                        log::debug!(
                            "election `{}`: releasing a failed campaign: {release}",
                            leadership.election.name()
                        );
                    }
                }
                Err(e)
            }
        }
    }

    /// The term: the fencing token of the acquire that made this owner leader, above every
    /// earlier leader's.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// What this leader proclaimed last.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The election.
    pub fn election(&self) -> &Election<O> {
        &self.election
    }

    /// The hold of the election's lock: for a [`FencedResource`](crate::FencedResource),
    /// whose writes and [reads for update](crate::FencedResource::read_for_update) it fences
    /// with the term.
    pub fn guard(&self) -> &LockGuard<O> {
        self.guard.as_ref().expect("held until resigned")
    }

    /// True once the leadership is known lost, as [`LockGuard::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.guard().is_lost()
    }

    /// Calls `f` once when the leadership is known lost, as [`LockGuard::on_lost`] (on the
    /// watchdog thread: keep it quick).
    pub fn on_lost(&self, f: impl FnOnce(LostReason) + Send + 'static) {
        self.guard().on_lost(f)
    }

    /// Asks the server whether this owner still leads in this term: `Ok` if so. Call it
    /// before a side effect; a leader paused past its lease learns here that it lost. A loss
    /// found here is latched: [`is_lost`](Self::is_lost) says so from then on, and the
    /// [`on_lost`](Self::on_lost) callbacks run once the watchdog has seen the lock gone (it
    /// looks at once).
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when the leadership is lost (known already, or found now);
    /// connection errors.
    pub fn check(&self) -> Result<()> {
        let lost = || Error::LockLost {
            name: self.election.name().to_owned(),
        };
        if self.is_lost() {
            return Err(lost());
        }
        match self.election.leader()? {
            Some(leader) if leader.term == self.term && leader.owner == self.guard().owner() => {
                Ok(())
            }
            _ => {
                self.guard().found_lost();
                Err(lost())
            }
        }
    }

    /// Tells the others a new value (observers see it as a leader of the same term).
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when this owner no longer leads in this term; connection errors.
    pub fn proclaim(&mut self, value: impl AsRef<[u8]>) -> Result<()> {
        self.say(value.as_ref(), "value")
    }

    fn say(&mut self, value: &[u8], how: &str) -> Result<()> {
        let raw = &self.election.lock.raw;
        let keys = &self.election.keys;
        let owner = self.guard().owner().to_owned();
        let done: i64 = raw.run(|c| {
            scripts::ELECTION_PROCLAIM
                .key(&raw.key.name)
                .key(&keys.record)
                .key(&keys.log)
                .key(&keys.channel)
                .arg(&owner)
                .arg(self.term)
                .arg(value)
                .arg(raw.key.client.publish())
                .arg(how)
                .arg(LOG_KEEPS)
                .invoke(c)
        })?;
        match done {
            1 => {}
            // A second campaign of an owner that leads already (a `LockOwner` shared by
            // threads): its acquire re-entered the lock.
            -1 => {
                return Err(Error::AlreadyHeld {
                    name: self.election.name().to_owned(),
                })
            }
            _ => {
                return Err(Error::LockLost {
                    name: self.election.name().to_owned(),
                })
            }
        }
        self.value = value.to_vec();
        Ok(())
    }

    /// Steps down at once: the leader record goes, observers hear of it, and the lock is
    /// released, so that a campaigner takes over within a round trip.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::unlock`] ([`Error::LockLost`] when the leadership was lost already).
    pub fn resign(mut self) -> Result<()> {
        self.step_down()
    }

    fn step_down(&mut self) -> Result<()> {
        let Some(guard) = self.guard.take() else {
            return Ok(());
        };
        let raw = &self.election.lock.raw;
        let keys = &self.election.keys;
        if !guard.is_lost() {
            // Clears the record of this term only: sent again if its reply is lost.
            let cleared: Result<i64> = raw.key.run_repeatable(|c| {
                scripts::ELECTION_RESIGN
                    .key(&keys.record)
                    .key(&keys.channel)
                    .arg(self.term)
                    .arg(raw.key.client.publish())
                    .invoke(c)
            });
            if let Err(e) = cleared {
                log::debug!(
                    "election `{}`: clearing the leader record failed: {e}",
                    self.election.name()
                );
            }
        }
        guard.unlock()
    }
}

impl<O: Ownership> Drop for Leadership<O> {
    fn drop(&mut self) {
        if let Err(e) = self.step_down() {
            log::warn!(
                "resigning election `{}` (term {}) failed: {e}",
                self.election.name(),
                self.term
            );
        }
    }
}

impl<O: Ownership> std::fmt::Debug for Leadership<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.election.name())
            .field("term", &self.term)
            .field("lost", &self.guard.as_ref().is_none_or(LockGuard::is_lost))
            .finish()
    }
}
