//! Hand-overs inside one client, on the lock's side (the bookkeeping is `handover.rs`): the
//! releaser claims a waiting thread of the client for its unlock script and settles the
//! outcome (passed, not, or in doubt after lost replies), and the waiter takes a pass before
//! its own attempt, or, as its wait ends, takes it or gives it back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::handover::{Claim, State, Waiter};
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::kind::{Pass, Release};
use crate::lock::owner::Ownership;
use crate::lock::raw::{Ran, RawLock, Unlocked};

impl RawLock {
    /// The last hold this client knows of `owner` to have (`known` other holds: none): a
    /// thread of the client waiting for the lock may take it over in the release's call.
    pub(super) fn claim(&self, owner: &str, known: u32) -> Option<Claim> {
        if known == 0 && self.kind.passes_inside_client() && self.key.bound.is_none() {
            self.key.client.inner.handovers.claim(&self.key.name, owner)
        } else {
            None
        }
    }

    /// The release's first call: one that passes to a waiter wakes it as soon as the call
    /// is written, so that the waiter's wake-up overlaps the round trip.
    pub(super) fn pass_script(&self, release: &Release<'_>, claim: Option<&Claim>) -> Result<Ran> {
        match claim {
            Some(claim) => {
                let waiter = &claim.waiter;
                self.unlock_script_with(release, Some(&|| waiter.wake_early()))
            }
            None => self.unlock_script(release),
        }
    }

    /// A pass whose reply was lost (`lost`), sent again: it is idempotent (a call sent
    /// "again" finding the hold passed already replies so). If that reply is lost too, the
    /// waiter settles the pass itself, by the same call (see `handover.rs`'s
    /// `State::Doubt`): either way the releaser's hold is gone, passed or given back.
    pub(super) fn pass_again(
        &self,
        mut release: Release<'_>,
        claim: Claim,
        sent_at: Instant,
        lost: Error,
    ) -> Unlocked {
        log::debug!(
            "passing `{}` from {} to {} lost its reply ({lost}); sending it again",
            self.key.name,
            release.owner,
            claim.waiter.owner
        );
        if let Some(pass) = &mut release.pass_to {
            pass.again = true;
        }
        match self.again_if_interrupted(|| self.unlock_script(&release)) {
            Ok(Ran::Did(Unlocked::Passed)) => {
                self.pass_given(claim, release.owner, sent_at);
                Unlocked::Passed
            }
            Ok(Ran::Did(unlocked)) => unlocked,
            // The owner holds nothing and the waiter was not passed it: the first call
            // released the lock (a fair lock passes only to the head of its queue, and the
            // waiter may not head it), or the hold was gone already. Either way it is free
            // of this owner, as a lost reply settled by the count reports it.
            Ok(Ran::Differs(0)) => Unlocked::Released,
            // Holds of the owner's that the call did not expect: the hold was lost meanwhile.
            Ok(Ran::Differs(_)) => Unlocked::NotHeld,
            Err(e) => self.pass_in_doubt(claim, release.owner, sent_at, String::new(), e),
        }
    }

    /// A pass that ran: the waiter takes it, or, if it stopped waiting for the call (see
    /// `handover.rs`), it is given back.
    pub(super) fn pass_given(&self, claim: Claim, from: &str, sent_at: Instant) {
        let to = Arc::clone(&claim.waiter);
        if !claim.given(sent_at) {
            self.doubt_pass(from, &to.owner, Duration::from_millis(to.lease_ms));
        }
    }

    /// A pass whose reply was lost twice (last with `e`): the waiter settles it by sending it
    /// again (with `latch`), and `from`'s next call on the lock first settles its own hold (a
    /// pass that never ran leaves it there); the releaser's hold is gone either way.
    pub(super) fn pass_in_doubt(
        &self,
        claim: Claim,
        from: &str,
        sent_at: Instant,
        latch: String,
        e: Error,
    ) -> Unlocked {
        let to = Arc::clone(&claim.waiter);
        log::debug!(
            "passing `{}` to {} lost its reply again ({e}); the waiter settles it",
            self.key.name,
            to.owner
        );
        let lease = Duration::from_millis(to.lease_ms);
        let field: Arc<str> = self.field(from).into();
        let watchdog = &self.key.client.inner.watchdog;
        watchdog.doubt(&self.key.name, &field, self.settler(from, lease, false));
        if !claim.doubt(Arc::from(from), sent_at, latch) {
            self.doubt_pass(from, &to.owner, lease);
        }
        Unlocked::Passed
    }

    /// Settles a pass to `to` (this client's waiting thread, lease `lease_ms`) from `from`
    /// whose reply was lost, by sending it again (with its `latch`, for a kind that has
    /// one): true if `to` holds the lock now. Once this has a reply, the first call can
    /// change nothing any more.
    pub(super) fn settle_pass(
        &self,
        from: &str,
        to: &str,
        lease_ms: u64,
        latch: &str,
    ) -> Result<bool> {
        let mut release = self.release(from, latch, Duration::from_millis(lease_ms));
        if !self.kind.latched_unlock() {
            release.expect = Some(1);
        }
        release.pass_to = Some(Pass {
            to,
            lease_ms,
            again: true,
        });
        Ok(matches!(
            self.unlock_script(&release)?,
            Ran::Did(Unlocked::Passed)
        ))
    }

    /// A pass from `from` to `to` that neither the releaser nor the waiter could settle:
    /// handed to the watchdog as a lost unlock of `from` and a lost acquire of `to`, so that
    /// once the server answers, whichever of the two holds it is given back.
    pub(super) fn doubt_pass(&self, from: &str, to: &str, lease: Duration) {
        let watchdog = &self.key.client.inner.watchdog;
        for owner in [from, to] {
            let field: Arc<str> = self.field(owner).into();
            watchdog.doubt(&self.key.name, &field, self.settler(owner, lease, false));
        }
    }

    /// A first pass to `waiter` (not sent again).
    pub(super) fn first_pass(waiter: &Waiter) -> Pass<'_> {
        Pass {
            to: &waiter.owner,
            lease_ms: waiter.lease_ms,
            again: false,
        }
    }
}

impl<O: Ownership> Lock<O> {
    /// Before an attempt of `waiter` (this thread, `owner`): when a lock was passed to it,
    /// the time the pass was sent, and no attempt is needed; a pass in doubt is settled here.
    pub(super) fn passed(&self, waiter: &Waiter, owner: &str) -> Result<Option<Instant>> {
        match waiter.begin_attempt() {
            State::Given(sent_at) => Ok(Some(sent_at)),
            State::Doubt { from, at, latch } => {
                match self.raw.settle_pass(&from, owner, waiter.lease_ms, &latch) {
                    Ok(passed) => Ok(passed.then_some(at)),
                    Err(e) => {
                        // The wait ends with this error: the watchdog settles the pass.
                        let lease = Duration::from_millis(waiter.lease_ms);
                        self.raw.doubt_pass(&from, owner, lease);
                        Err(e)
                    }
                }
            }
            _ => Ok(None),
        }
    }

    /// After the wait of `waiter` ended with `outcome`: leaves the client's queue. A lock
    /// passed to it as the wait ended makes a wait that ran out a success; a wait that failed
    /// (interrupted, closed, an error) gives it back, to the next waiter.
    pub(super) fn leave_passing(
        &self,
        owner: &Arc<str>,
        waiter: &Arc<Waiter>,
        outcome: &mut Result<Option<LockGuard<O>>>,
    ) {
        let raw = &self.raw;
        let lease = Duration::from_millis(waiter.lease_ms);
        let sent_at = match raw.key.client.inner.handovers.leave(&raw.key.name, waiter) {
            State::Given(sent_at) => sent_at,
            State::Doubt { from, at, latch } => {
                match raw.settle_pass(&from, owner, waiter.lease_ms, &latch) {
                    Ok(true) => at,
                    Ok(false) => return,
                    Err(e) => {
                        log::debug!(
                            "settling a pass of `{}` to {owner} failed: {e}; left to the watchdog",
                            raw.key.name
                        );
                        raw.doubt_pass(&from, owner, lease);
                        return;
                    }
                }
            }
            _ => return,
        };
        debug_assert!(
            !matches!(outcome, Ok(Some(_))),
            "passed to a waiter that acquired by itself"
        );
        if let Ok(None) = outcome {
            *outcome = Ok(Some(LockGuard::new(
                self.clone(),
                Arc::clone(owner),
                sent_at,
                1,
                None,
            )));
            return;
        }
        log::debug!(
            "`{}` was passed to {owner} as its wait failed; giving it back",
            raw.key.name
        );
        if let Err(e) = raw.unlock(owner, lease) {
            log::warn!(
                "giving back `{}` (owner {owner}), passed as its wait failed: {e}",
                raw.key.name
            );
        }
    }
}
