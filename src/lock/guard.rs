//! The guard of a held reentrant lock.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::deadlock::Mode as WaitMode;
use crate::error::{Error, Result};
use crate::hold::{HoldEvent, LockKind};
use crate::lock::handle::Lock;
use crate::lock::owner::{NotSendFor, Ownership, ThreadOwned};
use crate::lock::raw::Unlocked;
use crate::order;
use crate::watchdog::{call_lost, LeaseState, LostReason, Watch};

/// One hold of a [`Lock`]; dropping it releases the hold.
///
/// Not `Send` by default: the hold belongs to the thread that took it, as in Java and
/// Redisson. The guard of a lock held by a [`LockOwner`](crate::LockOwner)
/// ([`Lock::with_owner`](crate::Lock::with_owner)) is `Send`: it may be released on another
/// thread.
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<redlatch::LockGuard>(); // a thread's hold stays on its thread
/// ```
///
/// ```
/// fn send<T: Send>() {}
/// send::<redlatch::LockGuard<redlatch::LockOwner>>();
/// ```
///
/// So a guard taken on one thread cannot be returned from it, nor moved to another: the
/// compiler says
///
/// ```text
/// error[E0277]: `*const ()` cannot be sent between threads safely
///    = help: within `Result<LockGuard, redlatch::Error>`, the trait `Send` is not implemented for `*const ()`
/// note: required because it appears within the type `LockGuard`
/// ```
///
/// Release the lock on the thread that took it (take it there, or use
/// [`Lock::with`](crate::Lock::with)), or take it as a [`LockOwner`](crate::LockOwner) when
/// the hold must travel:
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let owner = client.lock_owner();
/// let lock = client.lock("job").with_owner(&owner);
/// let guard = std::thread::scope(|s| s.spawn(|| lock.lock()).join().unwrap())?;
/// guard.unlock()?; // on this thread: the hold is the owner's, not a thread's
/// # Ok(()) }
/// ```
/// Dropping logs a release error; [`unlock`](Self::unlock) returns it.
///
/// A hold can be lost while its guard lives (the lease ran out, or the lock was
/// force-unlocked): poll [`is_lost`](Self::is_lost), or register a callback with
/// [`on_lost`](Self::on_lost) to hear of it as soon as the watchdog does.
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
pub struct LockGuard<O: Ownership = ThreadOwned> {
    pub(super) lock: Lock<O>,
    pub(super) owner: Arc<str>,
    /// The lease of this hold: without an explicit lease, shared with the watchdog (and the
    /// thread's other holds of the lock); with one, this guard's own.
    pub(super) lease: Arc<LeaseState>,
    /// This hold's watchdog entry: the renewal, or for an explicit lease a timer made by the
    /// first [`on_lost`](Self::on_lost). Taken on release.
    pub(super) watch: Cell<Option<Watch>>,
    /// A fenced lock's fencing token for this hold.
    pub(super) token: Option<u64>,
    /// When the acquire that made this hold was sent (for the hold-time metric).
    pub(super) acquired_at: Instant,
    released: bool,
    /// With the client's history on, set once this hold's loss was reported as found (see
    /// [`report_breaks`](Self::report_breaks)); read once its watch is gone.
    told: Option<Arc<AtomicBool>>,
    /// `!Send` for a thread's hold; nothing for a [`LockOwner`](crate::LockOwner)'s.
    _not_send: NotSendFor<O>,
}

thread_local! {
    /// How many guards of thread-owned holds this thread keeps (a leaked guard's hold stays
    /// counted).
    static THREAD_GUARDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether this thread keeps a guard of a hold of its own: a thread that holds no lock is in
/// nobody's way, so its waits cannot be part of a deadlock (see `deadlock/`).
pub(crate) fn thread_holds_any() -> bool {
    THREAD_GUARDS.try_with(|n| n.get() > 0).unwrap_or(false)
}

/// Counts a guard of this thread's in or out.
fn count_thread_guard(more: bool) {
    let _ = THREAD_GUARDS.try_with(|n| {
        n.set(if more {
            n.get() + 1
        } else {
            n.get().saturating_sub(1)
        })
    });
}

/// How a hold ended, as its guard reports it (see `events.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Released by its owner.
    Released,
    /// Released by its owner, and passed to a waiting thread of its client in the same call.
    Passed,
    /// Found lost: its lease ran out (`expired`), or it was taken or broken.
    Lost { expired: bool },
    /// Not known: the hold goes on under another guard, or its release failed and it ends
    /// with its lease.
    Unknown,
}

impl End {
    /// The end at `at` of a hold taken at `acquired_at`, as an event; `told`: its loss was
    /// reported when found (`HoldEvent::Broken`).
    fn event(self, acquired_at: Instant, at: Instant, told: bool) -> HoldEvent {
        let held = at.saturating_duration_since(acquired_at);
        match self {
            End::Released => HoldEvent::Released { held: Some(held) },
            End::Passed => HoldEvent::HandedOver { held },
            End::Lost { expired } => HoldEvent::Lost {
                held,
                expired,
                told,
            },
            End::Unknown => HoldEvent::Forgotten { held },
        }
    }
}

/// A hold whose guard let go of it ([`LockGuard::let_go`]): no longer renewed nor counted as
/// a guard's, its end still to report.
pub(crate) struct LetGo<O: Ownership> {
    lock: Lock<O>,
    owner: Arc<str>,
    acquired_at: Instant,
    /// When it was last known held.
    confirmed: Instant,
    /// Whether its loss was reported when found.
    told: bool,
}

impl<O: Ownership> LetGo<O> {
    /// Reports its end at `at`, as `end` says, labelled `label`.
    pub(super) fn ended(self, label: LockKind, at: Instant, end: End) {
        let event = end.event(self.acquired_at, at, self.told);
        self.lock.raw.emit_as(label, &self.owner, at, event);
    }

    /// When a release sent at `sent` that found it gone says it was lost: the last time it
    /// was known held (as a guard's release stamps it).
    pub(super) fn lost_by(&self, sent: Instant) -> Instant {
        self.confirmed.min(sent)
    }
}

impl<O: Ownership> LockGuard<O> {
    /// The guard of a hold of `lock` taken by `owner` (count `count` with it, fencing token
    /// `token`): [`new_as`](Self::new_as), its events labelled with the lock's kind.
    pub(crate) fn new(
        lock: Lock<O>,
        owner: Arc<str>,
        sent_at: Instant,
        count: u32,
        token: Option<u64>,
    ) -> LockGuard<O> {
        let label = lock.raw.kind.label();
        LockGuard::new_as(lock, owner, sent_at, count, token, label)
    }

    /// The one guard constructor: every acquire path ends here. `sent_at` is when the
    /// successful acquire was sent, so the lease started no earlier; `label` is the kind its
    /// events report (a lock set's member reports the set's).
    pub(crate) fn new_as(
        lock: Lock<O>,
        owner: Arc<str>,
        sent_at: Instant,
        count: u32,
        token: Option<u64>,
        label: LockKind,
    ) -> LockGuard<O> {
        let (watch, lease) = match lock.lease {
            Some(lease) => {
                let inner = &lock.raw.key.client.inner;
                let field = lock.raw.field(&owner).into();
                inner
                    .watchdog
                    .count_explicit(&lock.raw.key.name, field, true);
                let state = LeaseState::new(sent_at, lease).counted_by(&inner.metrics);
                (None, Arc::new(state))
            }
            None => {
                let (watch, lease) = lock.raw.key.client.inner.watchdog.watch(
                    &lock.raw.key.name,
                    lock.raw.renewal(&owner),
                    sent_at,
                    count,
                    lock.max_hold_or_default(),
                );
                (Some(watch), lease)
            }
        };
        log::debug!(
            "acquired `{}` (owner {owner}, hold count {count}, token {token:?})",
            lock.raw.key.name
        );
        if O::ONE_THREAD {
            count_thread_guard(true);
        }
        let mut guard = LockGuard {
            lock,
            owner,
            lease,
            watch: Cell::new(watch),
            token,
            acquired_at: sent_at,
            released: false,
            told: None,
            _not_send: std::marker::PhantomData,
        };
        guard.report_breaks(label);
        guard
    }

    /// With the client's history on, a renewed hold's loss is reported when the watchdog
    /// finds it (`HoldEvent::Broken`), through a callback of the guard's own, not only when
    /// the guard lets go: a force-unlocked hold shows in the history while its guard lives.
    fn report_breaks(&mut self, label: LockKind) {
        let Some(watch) = self.watch.get() else {
            return;
        };
        if self.lock.raw.key.client.inner.history.is_none() {
            return;
        }
        let told = Arc::new(AtomicBool::new(false));
        let (lock, owner) = (self.lock.clone(), Arc::clone(&self.owner));
        let (lease, acquired_at) = (Arc::clone(&self.lease), self.acquired_at);
        let flag = Arc::clone(&told);
        let callback = Box::new(move |reason: LostReason| {
            let (at, expired) = lease.loss(reason);
            let held = at.saturating_duration_since(acquired_at);
            let event = HoldEvent::Broken { held, expired };
            lock.raw.emit_as(label, &owner, at, event);
            flag.store(true, Ordering::Release);
        });
        let watchdog = &self.lock.raw.key.client.inner.watchdog;
        // Lost already (taken as the client closed): the guard's own end reports it.
        if watchdog.on_lost(watch, &self.lease, callback).is_none() {
            self.told = Some(told);
        }
    }

    /// Whether this hold's loss was reported when found: once its watch is gone (a callback
    /// running then has returned, one queued was dropped).
    fn told(&self) -> bool {
        self.told
            .as_ref()
            .is_some_and(|t| t.load(Ordering::Acquire))
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
    pub fn lock(&self) -> &Lock<O> {
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

    /// The owner id of this hold: `"<client uuid>:<number>"`, the number of the thread that
    /// took it or of its [`LockOwner`](crate::LockOwner).
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
    /// a whole lease (Redis unreachable, paused or slow: checked on the monotonic clock,
    /// without waiting for the watchdog), an explicit lease has run out, or the lease ran out
    /// after the hold reached its [maximum hold time](Lock::with_max_hold). A lost guard must
    /// not be trusted to exclude anybody.
    ///
    /// Once true it stays true, even if a late renewal reply or a re-entry of the same thread
    /// finds the lock held again. To be told instead of polling, see
    /// [`on_lost`](Self::on_lost).
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
        self.lost().is_some()
    }

    /// Calls `f` once, when this hold becomes known lost, with the reason: [`NotHeld`] when
    /// a renewal finds the lock gone (force-unlocked, deleted or taken), [`LeaseExpired`]
    /// when renewals failed until the lease must have run out, or an explicit lease ran out,
    /// [`MaxHoldReached`] when the watchdog stopped renewing at the hold's
    /// [maximum hold time](Lock::with_max_hold) and the lease ran out.
    /// If the hold is already known lost ([`is_lost`](Self::is_lost)), `f` is called at once,
    /// on the calling thread.
    ///
    /// `f` is never called once this guard is released ([`unlock`](Self::unlock) or drop):
    /// a release drops its callbacks, and waits for one that is running to return. After
    /// [`leak`](Self::leak) the callbacks are dropped too. A guard may register several
    /// callbacks; each belongs to its own guard, also when one thread holds the lock several
    /// times.
    ///
    /// **`f` runs on the watchdog thread**, which renews every lock of the client (a slow `f`
    /// delays them all, and a release of this guard waits for it): keep it quick (set a
    /// flag, send on an unbounded channel), never block in it, and call no lock methods from
    /// it. A panic in `f` is caught and logged as a warning.
    ///
    /// **When.** A force-unlock or deletion is noticed at the next renewal, within a third of
    /// the [watchdog timeout](crate::ConfigBuilder::watchdog_timeout). A lease that runs out
    /// while renewals fail is signalled within about one response timeout after it ran out
    /// (plus a connect timeout while Redis is unreachable), as the watchdog may be blocked in
    /// a renewal call then. A guard with an explicit lease ([`Lock::with_lease`]) is not
    /// renewed, so only its lease end is signalled: at that time, or later by as much as a
    /// renewal call of other locks keeps the watchdog thread busy; it is watched only once
    /// it has a callback. A hold that reached its [maximum hold time](Lock::with_max_hold)
    /// is signalled in the same way when its last lease ends, by the cap.
    ///
    /// [`NotHeld`]: crate::LostReason::NotHeld
    /// [`LeaseExpired`]: crate::LostReason::LeaseExpired
    /// [`MaxHoldReached`]: crate::LostReason::MaxHoldReached
    ///
    /// # Examples
    ///
    /// Forward the signal into a channel, for a worker that polls or `select`s it:
    ///
    /// ```no_run
    /// use std::sync::mpsc;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// # let batches = vec![vec![1, 2], vec![3]];
    /// let (lost_tx, lost_rx) = mpsc::channel();
    /// let guard = client.lock("ledger").lock()?;
    /// guard.on_lost(move |reason| {
    ///     let _ = lost_tx.send(reason); // never blocks
    /// });
    /// for batch in batches {
    ///     if let Ok(reason) = lost_rx.try_recv() {
    ///         eprintln!("ledger lock lost ({reason:?}): stopping");
    ///         break;
    ///     }
    ///     // ... process `batch` ...
    /// #   let _ = batch;
    /// }
    /// drop(guard);
    /// # Ok(()) }
    /// ```
    ///
    /// Or raise a flag that the critical section checks:
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lost = Arc::new(AtomicBool::new(false));
    /// let guard = client.lock("ledger").lock()?;
    /// let flag = Arc::clone(&lost);
    /// guard.on_lost(move |_| flag.store(true, Ordering::Release));
    /// // ... work ...
    /// if !lost.load(Ordering::Acquire) {
    ///     // commit
    /// }
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn on_lost(&self, f: impl FnOnce(LostReason) + Send + 'static) {
        let callback = Box::new(f);
        if let Some(reason) = self.lost() {
            return call_lost(callback, reason, self.lock.key());
        }
        let watchdog = &self.lock.raw.key.client.inner.watchdog;
        let watch = match self.watch.get() {
            Some(w) => w,
            None => {
                // An explicit lease: watched only from its first callback.
                let w = watchdog.watch_until(&self.lock.raw.key.name, &self.lease);
                self.watch.set(Some(w));
                w
            }
        };
        if let Some((callback, reason)) = watchdog.on_lost(watch, &self.lease, callback) {
            call_lost(callback, reason, self.lock.key());
        }
    }

    /// Releases this hold and reports what happened.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] if the hold was already known lost ([`is_lost`](Self::is_lost):
    /// then nothing is sent, as the thread may hold the lock again by now) or the lock was no
    /// longer held by this owner (nothing was deleted); connection errors (a lost reply is
    /// made good safely first: retried with the unlock latch, or, for a plain, fenced or
    /// non-reentrant lock, settled by the hold count read back).
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
    /// The guard's [`on_lost`](Self::on_lost) callbacks are dropped uncalled: a later
    /// [`Lock::unlock`] releases one of the thread's holds without saying which, so they
    /// could otherwise fire for a hold already released.
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
        if O::ONE_THREAD {
            // The thread still holds the lock: it stays counted as holding one (for good;
            // over-counting only costs its waits a deadlock check).
            count_thread_guard(true);
            let raw = &self.lock.raw;
            let read = raw.kind.wait_mode() == WaitMode::Read;
            order::kept(&raw.key.client, &raw.key.name, read);
        }
        let watchdog = &self.lock.raw.key.client.inner.watchdog;
        if let Some(w) = self.watch.take() {
            watchdog.disarm(w);
        }
        if self.lock.lease.is_some() {
            // No longer counted as a guard's: a leaked hold with an explicit lease is left to
            // its lease (or to `Lock::unlock`), and the count must not outlive it.
            let field = self.lock.raw.field(&self.owner).into();
            watchdog.count_explicit(&self.lock.raw.key.name, field, false);
        }
    }

    /// Forgets this guard without releasing its hold or keeping it renewed: for a hold that
    /// joins another guard's (the acquire that ends a condition wait).
    pub(super) fn dissolve(self) {
        let label = self.lock.raw.kind.label();
        self.let_go().ended(label, Instant::now(), End::Unknown);
    }

    /// Forgets this guard without releasing its hold or keeping it renewed, for a caller that
    /// releases it with others in one call (a lock set's) and reports its end then.
    pub(super) fn let_go(mut self) -> LetGo<O> {
        self.released = true;
        let watchdog = &self.lock.raw.key.client.inner.watchdog;
        if let Some(w) = self.watch.take() {
            watchdog.unwatch(w);
        }
        if self.lock.lease.is_some() {
            let field = self.lock.raw.field(&self.owner).into();
            watchdog.count_explicit(&self.lock.raw.key.name, field, false);
        }
        LetGo {
            lock: self.lock.clone(),
            owner: Arc::clone(&self.owner),
            acquired_at: self.acquired_at,
            confirmed: self.lease.confirmed(),
            told: self.told(),
        }
    }

    /// Forgets this guard whose hold was found lost before its caller released it with
    /// others (a lock set's, reported as `label`); the guard back if it was not lost.
    pub(super) fn dissolve_if_lost(self, label: LockKind) -> Option<LockGuard<O>> {
        let Some(reason) = self.lost() else {
            return Some(self);
        };
        let (at, expired) = self.lease.loss(reason);
        self.let_go().ended(label, at, End::Lost { expired });
        None
    }

    /// Why the hold is lost, if it is: its lease says so, or the client was closed (which
    /// nothing renews, nor releases, any more; latched in the lease).
    fn lost(&self) -> Option<LostReason> {
        self.lease.lost().or_else(|| {
            self.lock
                .raw
                .key
                .client
                .is_closed()
                .then(|| self.lease.mark_lost(LostReason::ClientClosed))
        })
    }

    /// The hold was found gone by a look at the server outside the watchdog (an election's
    /// check): latched lost now, and every hold renewed at once, so that this one's
    /// [`on_lost`](Self::on_lost) callbacks run as soon as the watchdog's renewal sees it
    /// gone, not at its next renewal.
    pub(crate) fn found_lost(&self) {
        if self.lost().is_none() {
            self.lease.mark_lost(LostReason::NotHeld);
            self.lock.raw.key.client.inner.watchdog.renew_all_now();
        }
    }

    /// When this hold's lease runs out unless renewed: the send time of the last confirmed
    /// acquire or renewal plus the lease.
    pub(crate) fn lease_expires(&self) -> Instant {
        self.lease.expires()
    }

    /// Reports the end of this hold at `at`: released (`lost` is `None`), or lost (`true`
    /// if its lease ran out).
    fn ended(&self, at: Instant, end: End) {
        let event = end.event(self.acquired_at, at, self.told());
        self.lock.raw.emit(&self.owner, at, event);
    }

    fn release(&mut self) -> Result<()> {
        self.released = true;
        let inner = &self.lock.raw.key.client.inner;
        let raw = &self.lock.raw;
        // An acquire of this hold's owner whose reply was lost is settled while this hold is
        // still counted; if the server does not answer, the unlock below fails as well.
        if let Err(e) = raw.settle_first(&self.owner) {
            log::debug!(
                "settling before the release of `{}` failed: {e}",
                raw.key.name
            );
        }
        let lost = self.lost();
        // The holds of this owner the client's other guards have: the unlock expects one more.
        let mut known = None;
        if let Some(w) = self.watch.take() {
            known = inner.watchdog.unwatch(w);
        }
        if self.lock.lease.is_some() {
            let field = raw.field(&self.owner).into();
            known = Some(inner.watchdog.count_explicit(&raw.key.name, field, false));
        }
        if let Some(reason) = lost {
            let (at, expired) = self.lease.loss(reason);
            self.ended(at, End::Lost { expired });
            // The unlock script could release a newer hold of this thread, taken after the
            // loss: leave the lock alone.
            log::warn!(
                "lock `{}` (owner {}) was lost ({reason:?}) before its guard released it; \
                 not unlocking",
                self.lock.key(),
                self.owner
            );
            return Err(Error::LockLost {
                name: self.lock.key().to_owned(),
            });
        }
        let lease = self.lock.lease.unwrap_or(inner.config.watchdog_timeout);
        let lease = self.lock.lease_for(&self.owner, lease);
        let sent = Instant::now();
        let unlocked = self.lock.raw.unlock_knowing(&self.owner, lease, known);
        if unlocked.is_err() {
            self.ended(sent, End::Unknown);
        }
        match unlocked? {
            Unlocked::NotHeld => {
                self.ended(
                    self.lease.confirmed().min(sent),
                    End::Lost { expired: false },
                );
                // Latched (and counted once) for the thread's other holds of this lock too:
                // they share the lease, and need not try to unlock. A holder told of a
                // preemption lost it to the preemptor, most likely.
                let why = match self.lease.notice.revocation() {
                    Some(r) if r.grace.is_some() => LostReason::Preempted,
                    _ => LostReason::NotHeld,
                };
                self.lease.mark_lost(why);
                log::warn!(
                    "lock `{}` (owner {}) was lost before its guard released it",
                    self.lock.key(),
                    self.owner
                );
                Err(Error::LockLost {
                    name: self.lock.key().to_owned(),
                })
            }
            done @ (Unlocked::StillHeld | Unlocked::Released | Unlocked::Passed) => {
                if done != Unlocked::StillHeld && self.lease.notice.is_revoked() {
                    self.lease.notice.forget_callbacks();
                    self.lock.raw.forget_revocation(&self.owner);
                }
                let end = if done == Unlocked::Passed {
                    End::Passed
                } else {
                    End::Released
                };
                self.ended(sent, end);
                log::debug!("released `{}` (owner {})", self.lock.key(), self.owner);
                Ok(())
            }
        }
    }
}

impl<O: Ownership> Drop for LockGuard<O> {
    fn drop(&mut self) {
        if O::ONE_THREAD {
            count_thread_guard(false);
            order::released(&self.lock.raw.key.client, &self.lock.raw.key.name);
        }
        if !self.released {
            if let Err(e) = self.release() {
                log::warn!(
                    "releasing lock `{}` (owner {}) failed: {e}",
                    self.lock.key(),
                    self.owner
                );
            }
        }
    }
}

impl<O: Ownership> std::fmt::Debug for LockGuard<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.lock.key())
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("lost", &self.is_lost())
            .finish()
    }
}
