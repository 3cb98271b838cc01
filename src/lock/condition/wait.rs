//! One wait on a condition ([`Wait`]): its four steps (see the module's docs) as methods, and
//! a drop that undoes what is still outstanding when a step fails, so that no exit forgets
//! one: the place in the condition's queue is left (a notification that picked it handed
//! on), a notification taken and not acted on is handed on, the place's renewal stops, and a
//! hold not held again is marked lost (with its parked watchdog entry).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::Condition;
use crate::error::{Error, Result};
use crate::hold::HoldEvent;
use crate::interrupt::Interruption;
use crate::keys;
use crate::lock::guard::LockGuard;
use crate::lock::owner::Ownership;
use crate::lock::raw::Unlocked;
use crate::pubsub::{wait, Active, Channel, Mode, Tried};
use crate::scripts;
use crate::time::millis;
use crate::watchdog::{BatchRenewal, LeaseState, LostReason, Parked, Renewal, Watch};

/// The renewal of a waiter's place: `condition_renew.lua`.
static RENEW_WAITER: BatchRenewal = BatchRenewal {
    script: &scripts::CONDITION_RENEW,
    add: |call, waiters, id| {
        call.key(waiters)
            .key(keys::condition_queue_of(waiters))
            .arg(id);
    },
    holds: false,
    leased: true,
};

/// Makes each wait's waiter id unique in the process (an owner may wait again, or wait on
/// two threads as a shared `LockOwner`).
static WAITS: AtomicU64 = AtomicU64::new(0);

/// How step 3 of a wait ended.
pub(super) enum Ended {
    Notified,
    /// The waiter's place was gone (its lease ran out).
    Dropped,
    GaveUp,
    /// The hold's maximum hold time came first.
    Capped,
}

/// One wait of `guard`'s owner on a condition, from parking its hold to holding the lock
/// again.
pub(super) struct Wait<'a, O: Ownership> {
    cond: &'a Condition<O>,
    guard: &'a mut LockGuard<O>,
    owner: Arc<str>,
    /// The owner's hash field (a write hold's differs from the owner id).
    field: String,
    /// The waiter's id in the condition: the owner and a number unique in the process.
    id: Arc<str>,
    deadline: Option<Instant>,
    /// The hold's maximum hold time, if it has one: not held again past it.
    cap: Option<Instant>,
    /// Whether the cap comes before the deadline (and is the wait's deadline).
    capped: bool,
    /// The owner's holds as the watchdog counts them: the count a failed queue call may have
    /// left.
    holds: u32,
    /// The hold count to restore (set by the queue step).
    count: u32,
    /// The guard's watchdog entry, set aside while the lock is not held.
    parked: Option<Parked>,
    /// Why the guard is lost if the wait ends before its hold is settled (held again, or
    /// known intact); `None` once settled.
    lose: Option<LostReason>,
    /// Whether the waiter may still have a place in the queue.
    queued: bool,
    /// The place's renewal, and its lease (whose loss wakes the thread to look).
    place: Option<(Watch, Arc<LeaseState>)>,
    /// A notification this waiter took and has not acted on.
    taken: bool,
    /// When the queue call was sent: the release of the kinds whose release is that call.
    queued_at: Option<Instant>,
    /// From the wait on: a close waits for it to end (up to a response timeout), so that
    /// what it does on the way out (hand a notification on) still has the connections.
    _active: Option<Active<'a>>,
}

impl<'a, O: Ownership> Wait<'a, O> {
    /// Parks the guard's watchdog entry (nothing renews a lock that is not held) and names
    /// the waiter.
    pub(super) fn start(
        cond: &'a Condition<O>,
        guard: &'a mut LockGuard<O>,
        deadline: Option<Instant>,
    ) -> Self {
        let raw = &cond.lock.raw;
        let inner = &raw.key.client.inner;
        let owner = Arc::clone(&guard.owner);
        let field = raw.field(&owner);
        let n = WAITS.fetch_add(1, Ordering::Relaxed);
        // How a notification reaches it: as its client listens (see `condition_common.lua`).
        let mode = match inner.backend.pubsub_mode() {
            Mode::Sharded => 's',
            Mode::Plain => 'c',
        };
        let id: Arc<str> = Arc::from(format!("{owner}:{mode}{n}"));
        let parked = guard.watch.get().map(|w| inner.watchdog.park(w));
        let holds = parked.as_ref().map_or(1, |p| p.holds().max(1));
        // A hold with a maximum hold time is not held again past it: the wait ends there at
        // the latest, and the hold with it.
        let cap = parked.as_ref().and_then(Parked::cap);
        let capped = cap.filter(|&cap| deadline.is_none_or(|d| cap < d));
        Wait {
            cond,
            guard,
            owner,
            field,
            id,
            deadline: capped.or(deadline),
            cap,
            capped: capped.is_some(),
            holds,
            count: 0,
            parked,
            lose: Some(LostReason::NotHeld),
            queued: false,
            place: None,
            taken: false,
            queued_at: None,
            _active: None,
        }
    }

    /// 1. Queue, holding the lock, and (for the kinds whose release is only that) release it
    ///    in the same call. A writer's own read holds refuse it (the field that is not the
    ///    owner id is a write hold's). Then the place is renewed, and a place found gone
    ///    wakes the thread to look.
    pub(super) fn queue(&mut self) -> Result<()> {
        let cond = self.cond;
        let raw = &cond.lock.raw;
        let lease = raw.key.client.inner.config.watchdog_timeout;
        let release_here = raw.kind.released_by_wait();
        let queued_at = Instant::now();
        self.queued_at = Some(queued_at);
        let (field, owner, id) = (&self.field, &self.owner, &self.id);
        // A call whose reply's read was interrupted ran: a place found in the queue is its
        // (the hold count it found was the owner's, as the watchdog counts them); none, and
        // it is sent again.
        let mut lost = false;
        let holds = self.holds;
        let queued: Result<Option<i64>> = raw.again_if_interrupted(|| {
            if lost {
                let place: Option<f64> =
                    raw.run(|c| redis::cmd("ZSCORE").arg(&*cond.waiters).arg(&**id).query(c))?;
                if place.is_some() {
                    return Ok(Some(i64::from(holds)));
                }
            }
            let sent = raw.run(|c| {
                scripts::CONDITION_WAIT
                    .key(&raw.key.name)
                    .key(&cond.waiters)
                    .key(&cond.queue)
                    .key(release_here.unwrap_or(&cond.queue))
                    .arg(field)
                    .arg(&**id)
                    .arg(millis(lease))
                    .arg(if *field == **owner { "" } else { &**owner })
                    .arg(release_here.map_or("", |_| raw.key.client.publish()))
                    .invoke(c)
            });
            lost |= sent.as_ref().is_err_and(Error::is_interrupted_read);
            sent
        });
        match queued {
            Ok(Some(count)) if count > 0 => {
                self.count = count as u32;
                self.queued = true;
                self.watch_place(queued_at);
                Ok(())
            }
            Ok(Some(_)) => {
                self.settle_intact()?;
                Err(Error::invalid(format!(
                    "the owner of write lock `{}` holds read locks of it too: a wait would \
                     leave it in read mode; release them first",
                    cond.lock.key()
                )))
            }
            Ok(None) => Err(Error::NotHeld {
                name: cond.lock.key().to_owned(),
            }),
            Err(e) => {
                // It may have run: leave, and look at what the owner holds. Nothing: it ran
                // and released (or the hold is gone); one hold: the owner gets its count
                // back; its count: it did not run.
                cond.leave(&self.id, true);
                let held: Result<Option<u32>> = raw.run(|c| {
                    redis::cmd("HGET")
                        .arg(&*raw.key.name)
                        .arg(&self.field)
                        .query(c)
                });
                let holds = self.holds;
                match held {
                    Ok(Some(n)) if n == holds || (n == 1 && cond.restore(&self.field, holds)) => {
                        self.settle_intact()?;
                    }
                    _ => {}
                }
                Err(e)
            }
        }
    }

    /// The watchdog renews the place queued at `queued_at`; its loss nudges this thread.
    fn watch_place(&mut self, queued_at: Instant) {
        let watchdog = &self.cond.lock.raw.key.client.inner.watchdog;
        let renewal = Renewal {
            field: Arc::clone(&self.id),
            batch: &RENEW_WAITER,
        };
        let (watch, place) = watchdog.watch(&self.cond.waiters, renewal, queued_at, 1, None);
        let me = Interruption::current();
        let waker = Arc::clone(&me);
        if let Some((f, _)) = watchdog.on_lost(watch, &place, Box::new(move |_| waker.nudge())) {
            drop(f);
            me.nudge();
        }
        self.place = Some((watch, place));
    }

    /// 2. Release, whatever the count was: it is 1 now (unless released already). Otherwise
    ///    the hold is not held any more (NotHeld), released or not (its reply lost and not
    ///    settled), or, from a `LockOwner` shared by threads, still held: the guard no longer
    ///    knows its hold. One that stayed ends with its lease, which nothing renews now.
    pub(super) fn release(&mut self) -> Result<()> {
        let raw = &self.cond.lock.raw;
        let sent = Instant::now();
        let (released, at) = match raw.kind.released_by_wait() {
            Some(_) => (Ok(Unlocked::Released), self.queued_at.unwrap_or(sent)),
            None => (
                raw.unlock_knowing(&self.owner, self.guard.lock.lease_or_default(), Some(0)),
                sent,
            ),
        };
        match released {
            Ok(Unlocked::Released | Unlocked::Passed) => {
                // The hold ends here in the history; taking the lock back begins another.
                let held = at.saturating_duration_since(self.guard.acquired_at);
                raw.emit(&self.owner, at, HoldEvent::Yielded { held });
                Ok(())
            }
            Err(Error::Closed) => {
                self.lose = Some(LostReason::ClientClosed);
                Err(Error::Closed)
            }
            Err(e) => Err(e),
            Ok(_) => Err(Error::LockLost {
                name: self.cond.lock.key().to_owned(),
            }),
        }
    }

    /// 3. Wait on the waiter's own channel, looking at its entry after each wake-up, until
    ///    notified, dropped, or the deadline. Every way out leaves the place (a failed look,
    ///    and a failed leave after it, may have taken a notification: it goes on).
    pub(super) fn block(&mut self) -> Result<Ended> {
        let cond = self.cond;
        let raw = &cond.lock.raw;
        let inner = &raw.key.client.inner;
        self._active = Some(inner.pubsub.active());
        let channel = keys::condition_waiter_channel(&raw.key.name, &cond.name, &self.id);
        let Some((watch, place)) = self.place.take() else {
            return Err(Error::Protocol(
                "a condition wait blocked before it queued".into(),
            ));
        };
        let id = &self.id;
        let mut first = true;
        let mut ended = Ended::Notified;
        // A failed look, and a failed leave after it: either may have taken a notification.
        let mut in_doubt = false;
        let mut attempt = || -> Result<Tried> {
            if std::mem::take(&mut first) {
                return Ok(Tried::again(None));
            }
            if place.lost().is_some() {
                // Not renewed for a lease: the server may have dropped it, or will. Leave,
                // taking a notification that picked it still.
                ended = match cond.leave(id, false) {
                    Some(1) => Ended::Notified,
                    _ => Ended::Dropped,
                };
                return Ok(Tried::done());
            }
            let seen = match look(cond, id) {
                Ok(seen) => seen,
                // The look failed, perhaps after it ran and took a notification (its reply
                // lost): leaving tells. Gone means taken by that look (or its place ran
                // out: a wake-up either way); picked means taken now.
                Err(e) => {
                    return match cond.leave(id, false) {
                        Some(1 | -1) => Ok(Tried::done()),
                        Some(_) => Err(e),
                        None => {
                            in_doubt = true;
                            Err(e)
                        }
                    };
                }
            };
            Ok(match seen {
                0 => Tried::again(None),
                1 => Tried::done(),
                _ => {
                    ended = Ended::Dropped;
                    Tried::done()
                }
            })
        };
        let waited = wait(
            &inner.pubsub,
            Channel::all(&channel),
            self.deadline,
            &mut attempt,
        );
        let waited = match waited {
            Ok(true) => Ok(ended),
            // The cap came: a notification that picked it goes to the next waiter.
            Ok(false) if self.capped => {
                cond.leave(id, true);
                Ok(Ended::Capped)
            }
            Ok(false) => Ok(match cond.leave(id, false) {
                Some(1) => Ended::Notified,
                _ => Ended::GaveUp,
            }),
            Err(e) => {
                // Gone after a look and a leave that both failed: a notification they may
                // have taken goes on (at worst one wake-up too many, never one lost).
                if cond.leave(id, true) == Some(-1) && in_doubt {
                    cond.hand_on(id);
                }
                Err(e)
            }
        };
        self.queued = false;
        inner.watchdog.unwatch(watch);
        // The place's loss callback nudges this thread for this wait only: one that came as
        // the wait ended would wake the thread's next block for nothing.
        Interruption::current().take_nudge();
        waited
    }

    /// 4. Acquire again (after an interrupt too, as Java does), and restore the hold count;
    ///    true if notified. A notification taken and not acted on (the lock not held again)
    ///    goes on.
    pub(super) fn finish(mut self, waited: Result<Ended>) -> Result<bool> {
        if matches!(waited, Err(Error::Closed)) {
            self.lose = Some(LostReason::ClientClosed);
            return Err(Error::Closed);
        }
        self.taken = matches!(waited, Ok(Ended::Notified));
        let past_cap = self.cap.is_some_and(|cap| Instant::now() >= cap);
        if matches!(waited, Ok(Ended::Capped)) || past_cap {
            if matches!(waited, Err(Error::Interrupted)) {
                // Kept for the thread's next wait, as one that comes while acquiring again.
                Interruption::current().request();
            }
            return Err(self.capped());
        }
        let (cond, id) = (self.cond, &self.id);
        if matches!(waited, Ok(Ended::Dropped)) {
            log::warn!(
                "waiter {id} of condition `{}` of `{}` lost its place (not renewed for a \
                 lease): its wait ends, perhaps without a notification",
                cond.name,
                cond.lock.raw.key.name
            );
        }
        let again = match self.acquire_again() {
            Ok(Some(again)) => again,
            Ok(None) => return Err(self.capped()),
            Err(e) => {
                // Also when closing: the client's connections outlive its waits for a while.
                if matches!(e, Error::Closed) {
                    self.lose = Some(LostReason::ClientClosed);
                }
                return Err(e);
            }
        };
        let at = again.acquired_at;
        self.guard.token = again.token;
        again.dissolve();
        self.held_again(at)?;
        log::debug!(
            "waited on `{}` of `{}` (owner {}, hold count {})",
            cond.name,
            cond.lock.raw.key.name,
            self.owner,
            self.count
        );
        match waited? {
            Ended::Notified | Ended::Dropped => Ok(true),
            Ended::GaveUp | Ended::Capped => Ok(false),
        }
    }

    /// Acquires the lock for the guard's owner after its wait. An interrupt does not stop it
    /// (the wait's own interrupt was taken; one that comes now is kept for the thread's next
    /// wait), as Java's `await` acquires again before it returns either way.
    ///
    /// A hold with a cap (its maximum hold time) is taken again with a lease that ends by it,
    /// and not at all once it has passed: `None`.
    fn acquire_again(&self) -> Result<Option<LockGuard<O>>> {
        // A close that came as the wait ended: not held again (its connections are still
        // open while it waits for this wait to end).
        if self.cond.lock.raw.key.client.is_closed() {
            return Err(Error::Closed);
        }
        let cap = self.cap;
        let mut interrupted = false;
        let outcome = loop {
            match self.guard.lock.acquire_capped(cap, cap) {
                Err(Error::Interrupted) => interrupted = true,
                Ok(Some(again)) => break Ok(Some(again)),
                Ok(None) if cap.is_some() => break Ok(None),
                Ok(None) => {
                    break Err(Error::Protocol(
                        "an acquire without a deadline gave up".into(),
                    ))
                }
                Err(e) => break Err(e),
            }
        };
        if interrupted {
            Interruption::current().request();
        }
        outcome
    }

    /// Held again at `at`: gives the owner its hold count back and the guard its watchdog
    /// entry (or lease); an error (the guard lost, the lock released) if either fails.
    fn held_again(&mut self, at: Instant) -> Result<()> {
        if self.count > 1 && !self.cond.restore(&self.field, self.count) {
            return Err(self.give_up());
        }
        match self.parked.take() {
            Some(p) => self.unpark(p, Some(at))?,
            None if !self.guard.lease.restart(at) => return Err(self.give_up()),
            None => {}
        }
        self.lose = None;
        self.taken = false;
        Ok(())
    }

    /// The hold is intact (never released): the guard gets its watchdog entry back.
    fn settle_intact(&mut self) -> Result<()> {
        if let Some(p) = self.parked.take() {
            self.unpark(p, None)?;
        }
        self.lose = None;
        Ok(())
    }

    /// Puts the parked watchdog entry back, as the guard's watch now; an error if the hold
    /// is lost instead (then released, best effort).
    fn unpark(&mut self, parked: Parked, at: Option<Instant>) -> Result<()> {
        let watchdog = &self.cond.lock.raw.key.client.inner.watchdog;
        match watchdog.unpark(parked, at) {
            Some(watch) => {
                self.guard.watch.set(Some(watch));
                Ok(())
            }
            None => Err(self.give_up()),
        }
    }

    /// The hold reached its maximum hold time during the wait (or while acquiring again): it
    /// is not held again, and the guard is lost.
    fn capped(&mut self) -> Error {
        log::warn!(
            "`{}` (owner {}) reached its maximum hold time during a wait on condition `{}`: \
             not held again",
            self.cond.lock.key(),
            self.owner,
            self.cond.name
        );
        self.lose = Some(LostReason::MaxHoldReached);
        Error::LockLost {
            name: self.cond.lock.key().to_owned(),
        }
    }

    /// The hold, held again, cannot be trusted (its count not restored, its lease lost
    /// meanwhile): released (best effort); the guard is lost.
    fn give_up(&mut self) -> Error {
        let raw = &self.cond.lock.raw;
        let lease = self.guard.lock.lease_or_default();
        if let Err(e) = raw.unlock_knowing(&self.owner, lease, Some(0)) {
            log::warn!(
                "releasing `{}` after a condition wait it could not complete failed: {e}",
                raw.key.name
            );
        }
        self.lose = Some(LostReason::NotHeld);
        Error::LockLost {
            name: self.cond.lock.key().to_owned(),
        }
    }
}

/// Looks at the waiter `id`'s entry (`lua/condition_check.lua`): 0 while it waits, 1 once
/// notified, -1 gone. A look whose reply's read was interrupted ran: looked at again, a place
/// found gone was taken by it (or ran out: a wake-up either way).
fn look<O: Ownership>(cond: &Condition<O>, id: &str) -> Result<i64> {
    let raw = &cond.lock.raw;
    let mut lost = false;
    raw.again_if_interrupted(|| {
        let sent = raw.run(|c| {
            scripts::CONDITION_CHECK
                .key(&cond.waiters)
                .arg(id)
                .invoke(c)
        });
        lost |= sent.as_ref().is_err_and(Error::is_interrupted_read);
        sent
    })
    .map(|seen| if lost && seen == -1 { 1 } else { seen })
}

impl<O: Ownership> Drop for Wait<'_, O> {
    /// Undoes what a wait that did not complete left: its place (a notification that picked
    /// it is handed on), a notification it took, the place's renewal, and the hold (lost).
    fn drop(&mut self) {
        if self.queued {
            self.cond.leave(&self.id, true);
        }
        if self.taken {
            self.cond.hand_on(&self.id);
        }
        let watchdog = &self.cond.lock.raw.key.client.inner.watchdog;
        if let Some((watch, _)) = self.place.take() {
            watchdog.unwatch(watch);
        }
        if let Some(why) = self.lose {
            self.guard.lease.mark_lost(why);
            if let Some(p) = self.parked.take() {
                watchdog.lose_parked(p, why);
            }
        }
    }
}
