//! The watchdog: one thread renews the leases of every lock held without an explicit lease
//! (and of every renewed semaphore permit: to this module, a hold like any other, with its
//! own batch script), and signals the loss of any hold it watches.
//!
//! Every held lock is an entry renewed every `lease / 3`. The thread keeps one min-heap of
//! due times (a timer queue; all entries share one period, so one heap is all the wheel we
//! need), wakes at the earliest, takes every entry due within the next `period / 8`, fills
//! the call up with entries due within half a period (renewed a little early, so that
//! renewals coalesce into full batches however the acquires were spread), and renews them
//! `batch` at a time in one script call each. A lock whose renewal reports "not held" is lost; a lock whose renewals keep failing
//! is retried every `period / 4`, and at its lease end at the latest, and is lost once its
//! lease has run out. Guards with an explicit lease are not renewed; one that asks for a loss
//! signal gets a timer entry, due at its lease end, that only signals.
//!
//! A hold with a maximum hold time carries its cap (first acquire's send time plus that time)
//! in its entry's boxed extra part. A renewal is sent only if the lease it sets ends by the
//! cap (send time plus lease at most the cap); the first renewal that would not is not sent,
//! the lease is marked final, and the entry becomes like a timer: due at its lease end, which
//! is then a [`LostReason::MaxHoldReached`] loss. So a capped hold ends at its cap at the
//! latest, and at most one renewal period before it (or at the acquire's lease end, for a cap
//! shorter than the lease). A re-entry keeps the entry's cap; it, and the release of an inner
//! hold, set the lease in Redis no further than the cap (the lock asks [`Watchdog::cap_of`]),
//! and the client's record of a capped lease never runs past the cap either.
//!
//! Loss latches: a lease that ran out on the monotonic clock is never confirmed again (not by
//! a late renewal reply, not by a re-entry), so a guard that reported lost stays lost. The
//! `on_lost` callbacks of a lost entry are queued and run by this thread outside the state
//! lock; a guard's release removes its own callbacks and waits for any of them running.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use redis::ScriptInvocation;

use crate::backend::Backend;
use crate::config::{wait_replicas, ReplicaSync};
use crate::error::{Error, Result};
use crate::metrics::Recorder;
use crate::scripts;
use crate::time::millis;

/// Why a [`LockGuard`](crate::LockGuard)'s hold (or a renewed
/// [`PermitGuard`](crate::PermitGuard)'s permit) was lost, as passed to
/// [`LockGuard::on_lost`](crate::LockGuard::on_lost) (and
/// [`PermitGuard::on_lost`](crate::PermitGuard::on_lost)) callbacks.
///
/// # Examples
///
/// ```no_run
/// use redlatch::LostReason;
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let guard = client.lock("ledger").lock()?;
/// guard.on_lost(|reason| match reason {
///     LostReason::NotHeld => log::warn!("ledger lock force-unlocked or taken"),
///     LostReason::LeaseExpired => log::warn!("ledger lock lease ran out"),
///     _ => log::warn!("ledger lock lost"),
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal found the lock gone: it was force-unlocked, deleted, or is held by another
    /// owner.
    NotHeld,
    /// The lease ran out before it was renewed: renewals failed (Redis unreachable, paused or
    /// slow) until the lease must have run out on the monotonic clock, or an explicit lease
    /// ([`Lock::with_lease`](crate::Lock::with_lease)) ran out.
    LeaseExpired,
    /// The client was closed ([`Client::close`](crate::Client::close)): nothing renews the
    /// lease any more, and the guard cannot release the lock, which stays held in Redis until
    /// its lease runs out.
    ClientClosed,
    /// The hold reached its maximum hold time
    /// ([`ConfigBuilder::max_hold`](crate::ConfigBuilder::max_hold),
    /// [`Lock::with_max_hold`](crate::Lock::with_max_hold)): the watchdog stopped renewing it
    /// and its lease ran out, so the lock is free in Redis for others.
    MaxHoldReached,
}

/// A guard's `on_lost` callback.
pub(crate) type Callback = Box<dyn FnOnce(LostReason) + Send>;

/// Handle kept by the client; dropping it stops the thread.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    backend: Arc<Backend>,
    /// Replica confirmation of every renewal, when the client asks for it.
    sync: Option<ReplicaSync>,
    lease: Duration,
    period: Duration,
    batch: usize,
    metrics: Arc<Recorder>,
    state: Mutex<State>,
    changed: Condvar,
    /// Notified when the thread has finished running a round of `on_lost` callbacks.
    fired: Condvar,
}

/// The watchdog's bookkeeping. Per held lock it keeps one entry, one index slot and one or
/// two due times, and each is kept small: at 100,000 held locks this is the watchdog's memory.
#[derive(Default)]
struct State {
    entries: HashMap<u64, Entry>,
    /// The renewed entries by lock name: the first of each name...
    by_name: HashMap<Arc<str>, u64>,
    /// ...and any other of the same name (another hash field: read holds of one read-write
    /// lock by several threads, or a thread's write and read holds), by name and field.
    more_fields: HashMap<(Arc<str>, Arc<str>), u64>,
    /// The batch scripts of the renewals handed in, each once: an entry names its own by
    /// index here ([`Entry::renewal`]), which is smaller than a reference.
    renewals: Vec<&'static BatchRenewal>,
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    /// About how many items of `due` belong to removed entries: they wait in the heap until
    /// their time comes (up to a year for a released explicit-lease timer), so the heap is
    /// compacted when they pile up.
    stale: usize,
    /// Entry and hold ids.
    next_id: u64,
    /// Callbacks of lost entries, waiting for the thread to run them.
    to_fire: Vec<Fire>,
    /// The holds whose callbacks the thread is running right now.
    firing: Vec<u64>,
    shutdown: bool,
}

struct Entry {
    name: Arc<str>,
    /// The hash field renewed: the owner id (sharing the guard's string), or `<owner>:write`
    /// for a write hold. `None` for a timer: an explicit lease, watched only to signal its end.
    field: Option<Arc<str>>,
    holds: u32,
    /// The batch script that renews it, as an index into [`State::renewals`] (unused by a
    /// timer). It fits in what would be padding after `holds`.
    renewal: u8,
    lease: Arc<LeaseState>,
    /// What few entries have, boxed so that the common entry stays small.
    extra: Option<Box<Extra>>,
}

/// The rarer parts of an [`Entry`].
#[derive(Default)]
struct Extra {
    /// `on_lost` callbacks, each with the hold (guard) it belongs to.
    callbacks: Vec<(u64, Callback)>,
    /// The hold's cap: no renewal is sent whose lease would end after it (the first
    /// acquire's send time plus the maximum hold time).
    cap: Option<Instant>,
}

impl Entry {
    /// A single hold of `name`: renewed (`field` set) by the batch script `renewal`, or a
    /// timer.
    fn new(name: &Arc<str>, field: Option<Arc<str>>, renewal: u8, lease: Arc<LeaseState>) -> Entry {
        Entry {
            name: Arc::clone(name),
            field,
            holds: 1,
            renewal,
            lease,
            extra: None,
        }
    }

    fn add_callback(&mut self, hold: u64, callback: Callback) {
        let extra = self.extra.get_or_insert_with(Default::default);
        extra.callbacks.push((hold, callback));
    }

    /// Whether the entry only signals its lease end: a timer, or a hold past its cap.
    fn signals_only(&self) -> bool {
        self.field.is_none() || self.lease.is_final()
    }

    /// Whether a renewal sent at `now` would set a lease (`lease` long) ending after the
    /// hold's cap.
    fn past_cap(&self, now: Instant, lease: Duration) -> bool {
        let cap = self.extra.as_ref().and_then(|x| x.cap);
        cap.is_some_and(|cap| now + lease > cap)
    }

    /// Removes and returns the callbacks matching `f`.
    fn take_callbacks(&mut self, f: impl FnMut(&(u64, Callback)) -> bool) -> Vec<(u64, Callback)> {
        match &mut self.extra {
            Some(extra) => take_where(&mut extra.callbacks, f),
            None => Vec::new(),
        }
    }
}

/// An acquire that found the lock held by its owner: sent `at`, with the server's hold
/// `count` after it, and the maximum hold time of a new hold.
#[derive(Clone, Copy)]
struct Held {
    at: Instant,
    count: u32,
    max_hold: Option<Duration>,
}

/// One lost entry's callback, queued to run on the watchdog thread.
struct Fire {
    hold: u64,
    name: Arc<str>,
    reason: LostReason,
    callback: Callback,
}

/// What a guard keeps of its watchdog entry: the entry, and its own hold in it (which its
/// callbacks are registered under).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    id: u64,
    hold: u64,
}

const LIVE: u8 = 0;
const NOT_HELD: u8 = 1;
const EXPIRED: u8 = 2;
const CLOSED: u8 = 3;
const MAX_HOLD: u8 = 4;
/// Live, but never renewed again: the cap was reached. Its lease end is a `MAX_HOLD` loss.
const FINAL: u8 = 5;

/// The lease of one held lock as the client knows it, shared by the watchdog and the guards.
pub(crate) struct LeaseState {
    /// `LIVE`, `FINAL` (live, no longer renewed), or why it was lost (latched: never goes
    /// back to `LIVE` or `FINAL`).
    lost: AtomicU8,
    /// When the first acquire was sent; `renewed_us` counts from here.
    base: Instant,
    lease: Duration,
    /// When the lease was last known to be set in Redis (send time of the acquire or renewal
    /// that confirmed it), in µs after `base`.
    renewed_us: AtomicU64,
    /// A capped hold's cap, in µs after `base` (0: none): the lease is never known to last
    /// past it, whatever a re-entry confirms.
    cap_us: u64,
    /// Where a loss is counted (once, when it latches).
    metrics: Option<Arc<Recorder>>,
}

impl LeaseState {
    /// A lease of `lease` set by an acquire sent at `base`.
    pub(crate) fn new(base: Instant, lease: Duration) -> LeaseState {
        LeaseState {
            lost: AtomicU8::new(LIVE),
            base,
            lease,
            renewed_us: AtomicU64::new(0),
            cap_us: 0,
            metrics: None,
        }
    }

    /// This lease never lasts past `cap` (a hold's maximum hold time).
    fn capped_at(mut self, cap: Instant) -> LeaseState {
        let us = cap.saturating_duration_since(self.base).as_micros();
        self.cap_us = u64::try_from(us).unwrap_or(u64::MAX).max(1);
        self
    }

    /// Counts this hold's loss in `metrics`.
    pub(crate) fn counted_by(mut self, metrics: &Arc<Recorder>) -> LeaseState {
        self.metrics = Some(Arc::clone(metrics));
        self
    }

    /// Why the hold is lost, if it is: a renewal found the lock gone, or the lease has run out
    /// since the last confirmed renewal (the server may have expired it: renewals are failing
    /// or late). Latches: once lost, always lost.
    pub(crate) fn lost(&self) -> Option<LostReason> {
        match self.lost.load(Ordering::Acquire) {
            LIVE | FINAL if Instant::now() < self.expires() => None,
            LIVE => Some(self.mark_lost(LostReason::LeaseExpired)),
            FINAL => Some(self.mark_lost(LostReason::MaxHoldReached)),
            code => Some(reason(code)),
        }
    }

    /// Whether the hold is no longer renewed because it reached its cap (lost or not yet).
    fn is_final(&self) -> bool {
        matches!(self.lost.load(Ordering::Acquire), FINAL | MAX_HOLD)
    }

    /// Records that the hold reached its cap: it is not renewed again, and the end of its
    /// lease is a [`LostReason::MaxHoldReached`] loss. False if it is lost already.
    fn finish(&self) -> bool {
        self.lost
            .compare_exchange(LIVE, FINAL, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// When the lease runs out, as far as the client knows (send time of the last
    /// confirmed acquire or renewal, plus the lease).
    pub(crate) fn expires(&self) -> Instant {
        let end =
            self.base + Duration::from_micros(self.renewed_us.load(Ordering::Acquire)) + self.lease;
        match self.cap_us {
            0 => end,
            cap => end.min(self.base + Duration::from_micros(cap)),
        }
    }

    /// Records a renewal (or re-entry) sent at `sent_at` that found the lock held; false if
    /// the lease had already run out (or was lost), which no confirmation can undo.
    fn confirm(&self, sent_at: Instant) -> bool {
        if self.lost().is_some() {
            return false;
        }
        let us = sent_at.saturating_duration_since(self.base).as_micros() as u64;
        self.renewed_us.fetch_max(us, Ordering::AcqRel);
        // A reader may have seen the old lease run out meanwhile: it latched that.
        self.lost().is_none()
    }

    /// Marks the hold lost for `why` unless it already is; returns the reason that stuck.
    pub(crate) fn mark_lost(&self, why: LostReason) -> LostReason {
        let code = match why {
            LostReason::NotHeld => NOT_HELD,
            LostReason::LeaseExpired => EXPIRED,
            LostReason::ClientClosed => CLOSED,
            LostReason::MaxHoldReached => MAX_HOLD,
        };
        let mut now = self.lost.load(Ordering::Acquire);
        while matches!(now, LIVE | FINAL) {
            match self
                .lost
                .compare_exchange(now, code, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if let Some(m) = &self.metrics {
                        m.lost_one();
                    }
                    return why;
                }
                Err(changed) => now = changed,
            }
        }
        reason(now)
    }
}

fn reason(code: u8) -> LostReason {
    match code {
        NOT_HELD => LostReason::NotHeld,
        CLOSED => LostReason::ClientClosed,
        MAX_HOLD => LostReason::MaxHoldReached,
        _ => LostReason::LeaseExpired,
    }
}

/// Runs one `on_lost` callback, catching (and logging) a panic so that it cannot take the
/// watchdog thread down.
pub(crate) fn call_lost(callback: Callback, reason: LostReason, name: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || callback(reason))) {
        let what = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string payload");
        log::warn!("an on_lost callback of lock `{name}` panicked ({reason:?}): {what}");
    }
}

impl Watchdog {
    pub(crate) fn start(
        backend: Arc<Backend>,
        lease: Duration,
        batch: usize,
        sync: Option<ReplicaSync>,
        metrics: Arc<Recorder>,
    ) -> Result<Watchdog> {
        let shared = Arc::new(Shared {
            backend,
            sync,
            lease,
            period: lease / 3,
            batch,
            metrics,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            fired: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("redlatch-watchdog".into())
            .spawn(move || thread_shared.run())
            .map_err(|e| Error::invalid(format!("cannot spawn the watchdog thread: {e}")))?;
        Ok(Watchdog {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Starts (or, for a reentrant hold, joins) the renewal of `name` held as `renewal` says.
    /// `acquired_at` is when the acquire was sent: the lease runs from no earlier than that.
    /// A new hold is renewed no further than `max_hold` after it, if given; a re-entry keeps
    /// the cap of the hold it joins.
    pub(crate) fn watch(
        &self,
        name: &Arc<str>,
        renewal: Renewal,
        acquired_at: Instant,
        count: u32,
        max_hold: Option<Duration>,
    ) -> (Watch, Arc<LeaseState>) {
        let mut st = self.shared.state.lock();
        let (watch, lease, new) = st.join(
            name,
            renewal,
            Held {
                at: acquired_at,
                count,
                max_hold,
            },
            self.shared.lease,
            Some(&self.shared.metrics),
        );
        if st.shutdown {
            // Acquired as the client closed: nothing will renew it.
            lease.mark_lost(LostReason::ClientClosed);
        }
        let mut wake = !st.to_fire.is_empty();
        if new {
            wake |= st.schedule(acquired_at + self.shared.period, watch.id);
        }
        drop(st);
        if wake {
            self.shared.changed.notify_one();
        }
        (watch, lease)
    }

    /// Watches an explicit lease, without renewing it, to signal its end: a timer entry due
    /// when `lease` runs out.
    pub(crate) fn watch_until(&self, name: &Arc<str>, lease: &Arc<LeaseState>) -> Watch {
        let mut st = self.shared.state.lock();
        let id = st.new_id();
        st.entries
            .insert(id, Entry::new(name, None, 0, Arc::clone(lease)));
        let hold = st.new_id();
        let wake = st.schedule(lease.expires(), id);
        drop(st);
        if wake {
            self.shared.changed.notify_one();
        }
        Watch { id, hold }
    }

    /// Registers `callback` for the loss of `watch`'s hold, or hands it back with the reason
    /// when that hold is already lost (to be called at once by the caller).
    pub(crate) fn on_lost(
        &self,
        watch: Watch,
        lease: &LeaseState,
        callback: Callback,
    ) -> Option<(Callback, LostReason)> {
        let mut st = self.shared.state.lock();
        if let Some(reason) = lease.lost() {
            return Some((callback, reason));
        }
        match st.entries.get_mut(&watch.id) {
            Some(e) => e.add_callback(watch.hold, callback),
            None => {
                // Live but not watched: the hold was released through `Lock::unlock`; its
                // callback could only fire for a hold that is gone.
                drop(st);
                drop(callback);
            }
        }
        None
    }

    /// Releases `watch`'s hold: its callbacks are dropped uncalled (once any of them that is
    /// running has returned), and at zero holds the lock is no longer renewed.
    pub(crate) fn unwatch(&self, watch: Watch) {
        let mut st = self.shared.state.lock();
        let dropped = self.disarm_locked(&mut st, watch);
        let entry = st.release(watch.id);
        drop(st);
        drop((dropped, entry));
    }

    /// Drops `watch`'s callbacks uncalled but keeps the hold renewed (a leaked guard). A
    /// timer entry, which only exists for its callbacks, is removed.
    pub(crate) fn disarm(&self, watch: Watch) {
        let mut st = self.shared.state.lock();
        let dropped = self.disarm_locked(&mut st, watch);
        let timer = match st.entries.get(&watch.id) {
            Some(e) if e.field.is_none() => st.remove(watch.id),
            _ => None,
        };
        drop(st);
        drop((dropped, timer));
    }

    /// Takes `watch`'s callbacks out of its entry and the fire queue, then waits until the
    /// thread is not running any of them. Returns them, to be dropped outside the lock.
    fn disarm_locked(&self, st: &mut MutexGuard<'_, State>, watch: Watch) -> Vec<Callback> {
        let mut dropped = Vec::new();
        if let Some(e) = st.entries.get_mut(&watch.id) {
            e.take_callbacks(|(hold, _)| *hold == watch.hold)
                .into_iter()
                .for_each(|(_, f)| dropped.push(f));
        }
        take_where(&mut st.to_fire, |f| f.hold == watch.hold)
            .into_iter()
            .for_each(|f| dropped.push(f.callback));
        while st.firing.contains(&watch.hold) {
            self.shared.fired.wait(st);
        }
        dropped
    }

    /// The cap of the renewed hold of `name` under `field`, if it has one: a re-entry or a
    /// partial release sets the lease in Redis no further than it.
    pub(crate) fn cap_of(&self, name: &Arc<str>, field: &Arc<str>) -> Option<Instant> {
        let st = self.shared.state.lock();
        let id = st.find(name, field)?;
        st.entries.get(&id)?.extra.as_ref()?.cap
    }

    /// As [`unwatch`](Self::unwatch), for a hold known only by lock name and hash field.
    pub(crate) fn unwatch_key(&self, name: &Arc<str>, owner: &Arc<str>) {
        let mut st = self.shared.state.lock();
        let entry = match st.find(name, owner) {
            Some(id) => st.release(id),
            None => None,
        };
        drop(st);
        drop(entry);
    }
}

/// Removes and returns the items of `v` matching `f`, keeping the others in order.
fn take_where<T>(v: &mut Vec<T>, mut f: impl FnMut(&T) -> bool) -> Vec<T> {
    let (taken, kept) = std::mem::take(v).into_iter().partition(|x| f(x));
    *v = kept;
    taken
}

impl Watchdog {
    /// Stops renewing, for good: every watched hold is lost ([`LostReason::ClientClosed`]),
    /// its `on_lost` callbacks run on the calling thread, and the thread is joined.
    /// Idempotent.
    pub(crate) fn close(&self) {
        {
            let mut st = self.shared.state.lock();
            st.shutdown = true;
            let ids: Vec<u64> = st.entries.keys().copied().collect();
            for id in ids {
                if let Some((e, _)) = st.lose(id, LostReason::ClientClosed) {
                    if let Some(field) = &e.field {
                        log::warn!(
                            "lock `{}` (owner {field}) is no longer renewed: the client is \
                             closed; it stays held until its lease runs out",
                            e.name
                        );
                    }
                }
            }
        }
        // The thread finishes a round of callbacks it may be running, and stops.
        self.shared.changed.notify_all();
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        // Then this thread fires what is queued, as the thread would: a guard released
        // meanwhile drops its own callbacks from the queue, or waits for one running.
        let fires = {
            let mut st = self.shared.state.lock();
            let fires = std::mem::take(&mut st.to_fire);
            st.firing = fires.iter().map(|f| f.hold).collect();
            fires
        };
        for f in fires {
            call_lost(f.callback, f.reason, &f.name);
        }
        self.shared.state.lock().firing.clear();
        self.shared.fired.notify_all();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state.lock().shutdown = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.get_mut().take() {
            let _ = t.join();
        }
    }
}

impl State {
    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Joins the live entry of `name`'s `renewal` as one more hold, or makes a new entry
    /// (true when new, to be scheduled). An entry whose lease has run out is not resurrected
    /// by the re-entry: it is lost (its callbacks queued) and a new entry replaces it. A
    /// re-entry keeps the entry's cap (counted from the first hold), whatever it asks for.
    fn join(
        &mut self,
        name: &Arc<str>,
        renewal: Renewal,
        held: Held,
        lease: Duration,
        metrics: Option<&Arc<Recorder>>,
    ) -> (Watch, Arc<LeaseState>, bool) {
        let Renewal { field, batch } = renewal;
        let Held {
            at: acquired_at,
            count,
            max_hold,
        } = held;
        if let Some(id) = self.find(name, &field) {
            let entry = self
                .entries
                .get_mut(&id)
                .expect("the index and entries agree");
            // A re-entry (the server counted the earlier holds) set the lease again, if it had
            // not run out meanwhile. A count of 1 means the server had lost the earlier holds
            // (deleted, expired, force-unlocked) before the watchdog noticed.
            if count > 1 && entry.lease.confirm(acquired_at) {
                entry.holds += 1;
                let lease = Arc::clone(&entry.lease);
                let hold = self.new_id();
                return (Watch { id, hold }, lease, false);
            }
            // A lease that ran out is why (the server expired the key); otherwise the server
            // lost the holds some other way.
            let why = entry.lease.lost().unwrap_or(LostReason::NotHeld);
            if let Some((e, reason)) = self.lose(id, why) {
                log::warn!(
                    "lock `{}` (owner {}) lost ({reason:?}) before the watchdog noticed; \
                     re-acquired as a new hold",
                    e.name,
                    field
                );
            }
        }
        let id = self.new_id();
        let mut state = LeaseState::new(acquired_at, lease);
        if let Some(m) = metrics {
            state = state.counted_by(m);
        }
        if let Some(max_hold) = max_hold {
            state = state.capped_at(acquired_at + max_hold);
        }
        let lease = Arc::new(state);
        let renewal = self.renewal_index(batch);
        let mut entry = Entry::new(name, Some(Arc::clone(&field)), renewal, Arc::clone(&lease));
        if let Some(max_hold) = max_hold {
            let extra = entry.extra.get_or_insert_with(Default::default);
            extra.cap = Some(acquired_at + max_hold);
        }
        self.entries.insert(id, entry);
        self.index(name, field, id);
        let hold = self.new_id();
        (Watch { id, hold }, lease, true)
    }

    /// The index of `batch` in `renewals`, added if new.
    fn renewal_index(&mut self, batch: &'static BatchRenewal) -> u8 {
        let i = match self.renewals.iter().position(|&b| std::ptr::eq(b, batch)) {
            Some(i) => i,
            None => {
                self.renewals.push(batch);
                self.renewals.len() - 1
            }
        };
        u8::try_from(i).expect("a few lock kinds, so a few batch scripts")
    }

    /// Queues entry `id` for `at`; true if it is now the earliest (the thread must wake).
    fn schedule(&mut self, at: Instant, id: u64) -> bool {
        let earliest = self
            .due
            .peek()
            .is_none_or(|Reverse((first, _))| at < *first);
        self.due.push(Reverse((at, id)));
        earliest
    }

    /// Releases one hold of the entry `id`; at zero the entry is removed and returned.
    fn release(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.get_mut(&id)?; // lost already, or released by another path
        entry.holds -= 1;
        if entry.holds == 0 {
            self.remove(id)
        } else {
            None
        }
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        self.stale += 1;
        if self.stale > 1024 && self.stale * 2 > self.due.len() {
            let entries = &self.entries;
            self.due.retain(|Reverse((_, id))| entries.contains_key(id));
            self.stale = 0;
        }
        if let Some(field) = &entry.field {
            self.unindex(&entry.name, field, id);
        }
        Some(entry)
    }

    /// The renewed entry of `name` and hash field `field`, if any.
    fn find(&self, name: &Arc<str>, field: &Arc<str>) -> Option<u64> {
        let first = self.by_name.get(name).copied().filter(|id| {
            self.entries
                .get(id)
                .is_some_and(|e| e.field.as_ref() == Some(field))
        });
        first.or_else(|| {
            self.more_fields
                .get(&(Arc::clone(name), Arc::clone(field)))
                .copied()
        })
    }

    /// Indexes the new entry `id` of `name` and `field` (none of that name and field is
    /// indexed).
    fn index(&mut self, name: &Arc<str>, field: Arc<str>, id: u64) {
        if self.by_name.contains_key(name) {
            self.more_fields.insert((Arc::clone(name), field), id);
        } else {
            self.by_name.insert(Arc::clone(name), id);
        }
    }

    fn unindex(&mut self, name: &Arc<str>, field: &Arc<str>, id: u64) {
        if self.by_name.get(name) == Some(&id) {
            self.by_name.remove(name);
        } else {
            let key = (Arc::clone(name), Arc::clone(field));
            if self.more_fields.get(&key) == Some(&id) {
                self.more_fields.remove(&key);
            }
        }
    }

    /// Entry `id` is lost: removes it, latches its lease lost and queues its callbacks with
    /// the reason that stuck (a lease may have been seen running out first). Returns the
    /// entry (its callbacks taken) and that reason, for the caller to log.
    fn lose(&mut self, id: u64, why: LostReason) -> Option<(Entry, LostReason)> {
        let mut entry = self.remove(id)?;
        let reason = entry.lease.mark_lost(why);
        for (hold, callback) in entry.take_callbacks(|_| true) {
            self.to_fire.push(Fire {
                hold,
                name: Arc::clone(&entry.name),
                reason,
                callback,
            });
        }
        Some((entry, reason))
    }

    /// Pops the ids of live entries due by `horizon`, at most `max`. A timer (or a hold past
    /// its cap) is taken only once due (`now`): it signals a lease end, which must not be
    /// early.
    fn take_due(&mut self, now: Instant, horizon: Instant, max: usize) -> Vec<u64> {
        let mut ids = Vec::new();
        while ids.len() < max {
            let Some(&Reverse((at, id))) = self.due.peek() else {
                break;
            };
            if at > horizon {
                break;
            }
            match self.entries.get(&id) {
                Some(e) if e.signals_only() && at > now => break,
                Some(_) => ids.push(id),
                None => self.stale = self.stale.saturating_sub(1), // lost or released
            }
            self.due.pop();
        }
        ids
    }
}

/// What the watchdog renews for a held lock: the hold's hash field (what tells the holds of
/// one lock apart), and the batch script that renews it.
pub(crate) struct Renewal {
    /// The hash field of the hold: the owner id, or `<owner>:write` for a write hold.
    pub(crate) field: Arc<str>,
    pub(crate) batch: &'static BatchRenewal,
}

/// A script that renews many holds in one call: ARGV[1] is the lease in ms, and each hold
/// adds its own keys and arguments in turn. The watchdog groups holds by it.
pub(crate) struct BatchRenewal {
    pub(crate) script: &'static LazyLock<scripts::Lua>,
    /// Adds one hold of lock `name`, hash field `field`, to the call.
    pub(crate) add: fn(call: &mut ScriptInvocation<'_>, name: &str, field: &str),
}

/// One lock to renew.
struct Target {
    name: Arc<str>,
    field: Arc<str>,
    renewal: &'static BatchRenewal,
}

impl Shared {
    fn run(&self) {
        let slack = self.period / 8;
        let mut st = self.state.lock();
        loop {
            if st.shutdown {
                return;
            }
            if !st.to_fire.is_empty() {
                let fires = std::mem::take(&mut st.to_fire);
                st.firing = fires.iter().map(|f| f.hold).collect();
                MutexGuard::unlocked(&mut st, || {
                    for f in fires {
                        call_lost(f.callback, f.reason, &f.name);
                    }
                });
                st.firing.clear();
                self.fired.notify_all();
                continue;
            }
            let now = Instant::now();
            let mut ids = st.take_due(now, now + slack, self.batch);
            if !ids.is_empty() && ids.len() < self.batch {
                // Fill the call with entries due within half a period: renewing them a little
                // early costs nothing, and it merges batches that acquires spread apart.
                let room = self.batch - ids.len();
                ids.extend(st.take_due(now, now + self.period / 2, room));
            }
            if ids.is_empty() {
                // Sleep until the earliest entry is due; it and all due within `slack`
                // after it are then renewed together.
                match st.due.peek() {
                    Some(&Reverse((at, _))) => {
                        self.changed.wait_until(&mut st, at);
                    }
                    None => self.changed.wait(&mut st),
                }
                continue;
            }
            // Timers at their end, and leases that ran out while renewals failed or were
            // late (or while this thread was busy), or after the hold's cap, are lost, not
            // renewed. A hold whose renewal would outlast its cap is renewed no more.
            let mut live = Vec::with_capacity(ids.len());
            let now = Instant::now();
            for id in ids {
                let e = &st.entries[&id];
                match e.lease.lost() {
                    None if e.signals_only() => {
                        let at = e.lease.expires();
                        st.due.push(Reverse((at, id)));
                    }
                    None if e.past_cap(now, self.lease) && e.lease.finish() => {
                        let at = e.lease.expires();
                        log::debug!(
                            "lock `{}` (owner {}) reached its maximum hold time: no longer \
                             renewed, its lease ends in {:?}",
                            e.name,
                            owner(e),
                            at.saturating_duration_since(now)
                        );
                        st.due.push(Reverse((at, id)));
                    }
                    None => live.push(id),
                    Some(reason) => {
                        let (e, reason) = st.lose(id, reason).expect("present");
                        match (&e.field, reason) {
                            (None, _) => log::debug!("explicit lease of lock `{}` ran out", e.name),
                            (Some(field), LostReason::MaxHoldReached) => log::warn!(
                                "lock `{}` (owner {field}) lost ({reason:?}): held for its \
                                 maximum hold time, it was no longer renewed and its lease ran out",
                                e.name
                            ),
                            (Some(field), _) => log::warn!(
                                "lock `{}` (owner {field}) lost ({reason:?}): its lease ran out \
                                 before a renewal confirmed it",
                                e.name
                            ),
                        }
                    }
                }
            }
            if live.is_empty() {
                continue;
            }
            let batch: Vec<Target> = live
                .iter()
                .map(|id| {
                    let e = &st.entries[id];
                    let field = e.field.as_ref();
                    Target {
                        name: Arc::clone(&e.name),
                        field: Arc::clone(field.expect("only renewed entries are live here")),
                        renewal: st.renewals[usize::from(e.renewal)],
                    }
                })
                .collect();
            drop(st);
            let sent_at = Instant::now();
            let outcomes = self.renew(&batch);
            st = self.state.lock();
            self.apply(&mut st, &live, sent_at, outcomes);
        }
    }
    /// Renews a batch: one script call per batch script (each renewal names its own) and,
    /// on a cluster, per hash slot. One outcome per target, in order: renewed, not held, or
    /// why its call failed (a failing call does not affect the targets of the others). With
    /// replica sync, a call is followed by `WAIT`, and renewals fewer replicas confirmed
    /// count as failed.
    fn renew(&self, batch: &[Target]) -> Vec<Renewed> {
        let mut out: Vec<Renewed> = vec![Renewed::Failed(Arc::from("not sent")); batch.len()];
        let mut call = |renewal: &BatchRenewal, at: &[usize]| {
            let Some(&first) = at.first() else { return };
            let mut inv = renewal.script.prepare_invoke();
            inv.arg(millis(self.lease));
            for t in at.iter().map(|&i| &batch[i]) {
                (renewal.add)(&mut inv, &t.name, &t.field);
            }
            let reply = self.backend.run_once(&batch[first].name, |c| {
                let renewed: Vec<i64> = inv.invoke(c)?;
                let acked = wait_replicas(self.sync, c, renewed.contains(&1))?;
                Ok((renewed, acked))
            });
            let reply = reply.map(|(renewed, acked)| match (acked, self.sync) {
                (Some(acked), Some(sync)) if acked < sync.replicas => {
                    let why = format!("confirmed by {acked} of {} replicas", sync.replicas);
                    (renewed, Some(Arc::from(why)))
                }
                _ => (renewed, None),
            });
            scatter(&mut out, at, reply);
        };
        // On a cluster the keys of one call must share a slot.
        for (renewal, group) in by_script_and_slot(&self.backend, batch) {
            call(renewal, &group);
        }
        out
    }

    fn apply(&self, st: &mut State, ids: &[u64], sent_at: Instant, outcomes: Vec<Renewed>) {
        let now = Instant::now();
        // Retry soon, and at the lease end at the latest (a lease that ran out is lost then).
        let retry = now + (self.period / 4).max(Duration::from_millis(1));
        for (&id, outcome) in ids.iter().zip(outcomes) {
            let Some(e) = st.entries.get(&id) else {
                continue; // released meanwhile
            };
            match outcome {
                Renewed::Held if e.lease.confirm(sent_at) => {
                    self.metrics.renewed();
                    st.due.push(Reverse((sent_at + self.period, id)));
                }
                Renewed::Held => {
                    // Confirmed too late: the guard may already have reported it lost.
                    let (e, reason) = st.lose(id, LostReason::LeaseExpired).expect("present");
                    log::warn!(
                        "lock `{}` (owner {}) lost ({reason:?}): its lease ran out before the \
                         renewal reply came",
                        e.name,
                        owner(&e)
                    );
                }
                Renewed::NotHeld => {
                    let (e, _) = st.lose(id, LostReason::NotHeld).expect("present");
                    log::warn!(
                        "lock `{}` (owner {}) is no longer held: renewal stopped, guard marked lost",
                        e.name,
                        owner(&e)
                    );
                }
                Renewed::Failed(why) => match e.lease.lost() {
                    Some(reason) => {
                        let (e, reason) = st.lose(id, reason).expect("present");
                        log::warn!(
                            "lock `{}` (owner {}) lost ({reason:?}): renewals failed for its \
                             whole lease ({why})",
                            e.name,
                            owner(&e)
                        );
                    }
                    None => {
                        self.metrics.renewal_failed();
                        log::warn!(
                            "renewal of lock `{}` (owner {}) failed, retrying: {why}",
                            e.name,
                            owner(e)
                        );
                        let at = retry.min(e.lease.expires());
                        st.due.push(Reverse((at, id)));
                    }
                },
            }
        }
    }
}

/// Splits the positions of `batch` into groups of one batch script and one hash slot each
/// (one slot on a single server), keeping their order within a group.
fn by_script_and_slot(
    commands: &Backend,
    batch: &[Target],
) -> Vec<(&'static BatchRenewal, Vec<usize>)> {
    type BySlot = std::collections::BTreeMap<u16, Vec<usize>>;
    let mut groups: Vec<(&'static BatchRenewal, BySlot)> = Vec::new();
    for (i, t) in batch.iter().enumerate() {
        let at = match groups.iter().position(|(r, _)| std::ptr::eq(*r, t.renewal)) {
            Some(at) => at,
            None => {
                groups.push((t.renewal, BySlot::new()));
                groups.len() - 1
            }
        };
        let slot = commands.slot(&t.name);
        groups[at].1.entry(slot).or_default().push(i);
    }
    groups
        .into_iter()
        .flat_map(|(r, slots)| slots.into_values().map(move |group| (r, group)))
        .collect()
}

fn owner(e: &Entry) -> &str {
    e.field.as_deref().unwrap_or("")
}

/// What one renewal found.
#[derive(Clone)]
enum Renewed {
    Held,
    NotHeld,
    /// The script call failed (or replied nonsense): the lease is unknown.
    Failed(Arc<str>),
}

/// Puts a script call's per-lock replies back at the batch positions `at`. A reply comes
/// with why its renewals are unconfirmed (too few replicas), if they are: those count as
/// failed.
fn scatter(out: &mut [Renewed], at: &[usize], reply: Result<(Vec<i64>, Option<Arc<str>>)>) {
    let outcomes: Vec<Renewed> = match reply {
        Ok((v, unconfirmed)) if v.len() == at.len() => v
            .into_iter()
            .map(|r| match (r, &unconfirmed) {
                (1, None) => Renewed::Held,
                (1, Some(why)) => Renewed::Failed(Arc::clone(why)),
                _ => Renewed::NotHeld,
            })
            .collect(),
        Ok((v, _)) => {
            let why: Arc<str> =
                Arc::from(format!("reply of {} items for {} locks", v.len(), at.len()));
            vec![Renewed::Failed(why); at.len()]
        }
        Err(e) => vec![Renewed::Failed(Arc::from(e.to_string())); at.len()],
    };
    for (&i, o) in at.iter().zip(outcomes) {
        out[i] = o;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with(due: &[(u64, u64)]) -> (State, Instant) {
        let t0 = Instant::now();
        let mut st = State::default();
        for &(id, ms) in due {
            let name: Arc<str> = Arc::from(format!("l{id}"));
            let owner: Arc<str> = Arc::from("o");
            let lease = Arc::new(LeaseState::new(t0, Duration::from_secs(30)));
            let entry = Entry::new(&name, Some(Arc::clone(&owner)), 0, lease);
            st.entries.insert(id, entry);
            st.index(&name, owner, id);
            st.due.push(Reverse((t0 + Duration::from_millis(ms), id)));
        }
        st.next_id = 1000;
        (st, t0)
    }

    static RENEW: BatchRenewal = BatchRenewal {
        script: &crate::scripts::LOCK_RENEW,
        add: |call, name, field| {
            call.key(name).arg(field);
        },
    };

    fn held(at: Instant, count: u32) -> Held {
        Held {
            at,
            count,
            max_hold: None,
        }
    }

    fn renewal(field: &str) -> Renewal {
        Renewal {
            field: Arc::from(field),
            batch: &RENEW,
        }
    }

    #[test]
    fn take_due_returns_due_entries_in_order_up_to_batch() {
        let (mut st, t0) = state_with(&[(1, 30), (2, 10), (3, 20), (4, 500)]);
        let horizon = t0 + Duration::from_millis(100);
        assert_eq!(st.take_due(t0, horizon, 2), vec![2, 3]);
        assert_eq!(st.take_due(t0, horizon, 2), vec![1]);
        assert!(st.take_due(t0, horizon, 2).is_empty());
        assert_eq!(st.due.len(), 1);
    }

    #[test]
    fn released_entries_are_skipped_and_reentrant_holds_counted() {
        let (mut st, t0) = state_with(&[(1, 10), (2, 20)]);
        st.entries.get_mut(&1).unwrap().holds = 2;
        assert!(st.release(1).is_none());
        assert!(st.release(2).is_some());
        assert!(st.entries.contains_key(&1));
        assert!(!st.entries.contains_key(&2));
        assert!(st.by_name.len() == 1 && st.more_fields.is_empty());
        let later = t0 + Duration::from_secs(1);
        assert_eq!(st.take_due(later, later, 10), vec![1]);
        st.release(1);
        assert!(st.entries.is_empty() && st.by_name.is_empty());
    }

    #[test]
    fn timer_is_not_taken_early_with_the_renewals_it_precedes() {
        let (mut st, t0) = state_with(&[(1, 20)]);
        let lease = Arc::new(LeaseState::new(t0, Duration::from_millis(10)));
        st.entries
            .insert(2, Entry::new(&Arc::from("timer"), None, 0, lease));
        st.due.push(Reverse((t0 + Duration::from_millis(10), 2)));
        let horizon = t0 + Duration::from_millis(50);
        assert!(
            st.take_due(t0, horizon, 10).is_empty(),
            "timer before its end"
        );
        let at_end = t0 + Duration::from_millis(10);
        assert_eq!(
            st.take_due(at_end, at_end + Duration::from_millis(40), 10),
            vec![2, 1]
        );
    }

    #[test]
    fn lease_loss_latches_against_late_confirmations() {
        let t0 = Instant::now() - Duration::from_secs(2);
        let lease = LeaseState::new(t0, Duration::from_secs(1));
        assert_eq!(lease.lost(), Some(LostReason::LeaseExpired));
        assert!(
            !lease.confirm(Instant::now()),
            "a late renewal resurrected the lease"
        );
        assert_eq!(lease.lost(), Some(LostReason::LeaseExpired));
        let live = LeaseState::new(Instant::now(), Duration::from_secs(30));
        assert!(live.confirm(Instant::now()));
        assert_eq!(live.mark_lost(LostReason::NotHeld), LostReason::NotHeld);
        assert_eq!(
            live.mark_lost(LostReason::LeaseExpired),
            LostReason::NotHeld
        );
        assert!(!live.confirm(Instant::now()));
    }

    #[test]
    fn reentry_after_the_lease_ran_out_does_not_resurrect_the_lost_hold() {
        // Regression: a re-entry confirmed the old entry's lease even when it had already run
        // out by the clock, so a guard that had been lost looked held again.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let lease = Duration::from_secs(1);
        let long_ago = Instant::now() - Duration::from_secs(5);
        let (old, old_lease, new) = st.join(&name, renewal("o"), held(long_ago, 1), lease, None);
        assert!(new);
        st.entries
            .get_mut(&old.id)
            .unwrap()
            .add_callback(old.hold, Box::new(|_| {}));
        let (fresh, fresh_lease, new) =
            st.join(&name, renewal("o"), held(Instant::now(), 2), lease, None);
        assert!(new, "the re-entry joined a lost entry");
        assert_ne!(fresh.id, old.id);
        assert_eq!(old_lease.lost(), Some(LostReason::LeaseExpired));
        assert_eq!(fresh_lease.lost(), None);
        assert!(!st.entries.contains_key(&old.id));
        assert_eq!(st.find(&name, &Arc::from("o")), Some(fresh.id));
        let queued: Vec<_> = st.to_fire.iter().map(|f| (f.hold, f.reason)).collect();
        assert_eq!(queued, vec![(old.hold, LostReason::LeaseExpired)]);
        // A live entry is joined, as a second hold.
        let (again, _, new) = st.join(&name, renewal("o"), held(Instant::now(), 2), lease, None);
        assert!(!new);
        assert_eq!(again.id, fresh.id);
        assert_eq!(st.entries[&fresh.id].holds, 2);
    }

    #[test]
    fn an_acquire_that_made_a_new_hold_retires_the_entry_it_would_have_joined() {
        // Regression: a lock deleted on the server and taken again by the same thread before
        // the next renewal joined the old entry; the old guard's release then released the
        // new hold, and the old guard never learnt it was lost.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let lease = Duration::from_secs(30);
        let (old, old_lease, _) =
            st.join(&name, renewal("o"), held(Instant::now(), 1), lease, None);
        let (new_hold, new_lease, new) =
            st.join(&name, renewal("o"), held(Instant::now(), 1), lease, None);
        assert!(new, "a server count of 1 is a new hold");
        assert_ne!(new_hold.id, old.id);
        assert_eq!(old_lease.lost(), Some(LostReason::NotHeld));
        assert_eq!(new_lease.lost(), None);
        assert_eq!(st.entries[&new_hold.id].holds, 1);
    }

    #[test]
    fn released_timers_do_not_pile_up_in_the_due_heap() {
        // Regression: a released explicit-lease timer left its due time (up to a year away)
        // in the heap, so a loop of guards with long leases and callbacks grew it unbounded.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let far = Instant::now() + Duration::from_secs(3600);
        for _ in 0..100_000 {
            let id = st.new_id();
            let lease = Arc::new(LeaseState::new(Instant::now(), Duration::from_secs(3600)));
            st.entries.insert(id, Entry::new(&name, None, 0, lease));
            st.schedule(far, id);
            st.release(id);
        }
        assert!(st.entries.is_empty());
        assert!(st.due.len() <= 2100, "{} stale due times", st.due.len());
    }

    #[test]
    fn holds_of_one_name_under_different_fields_are_found_and_released_apart() {
        // The index keeps the first field of a name apart from the others (read holds of
        // several threads, a thread's write and read holds): each must be found, and releasing
        // any of them, the first included, must leave the others found.
        let mut st = State::default();
        let name: Arc<str> = Arc::from("rw");
        let lease = Duration::from_secs(30);
        let now = Instant::now();
        let fields = ["a", "b", "a:write"];
        let ids: Vec<u64> = fields
            .iter()
            .map(|f| st.join(&name, renewal(f), held(now, 1), lease, None).0.id)
            .collect();
        for (f, id) in fields.iter().zip(&ids) {
            assert_eq!(st.find(&name, &Arc::from(*f)), Some(*id), "{f}");
        }
        assert!(st.find(&name, &Arc::from("c")).is_none());
        assert!(st.release(ids[0]).is_some());
        assert!(st.find(&name, &Arc::from("a")).is_none());
        assert_eq!(st.find(&name, &Arc::from("b")), Some(ids[1]));
        assert_eq!(st.find(&name, &Arc::from("a:write")), Some(ids[2]));
        // A new hold of the released field is found, and re-entries join the right entry.
        let (again, _, new) = st.join(&name, renewal("a"), held(now, 1), lease, None);
        assert!(new);
        assert_eq!(st.find(&name, &Arc::from("a")), Some(again.id));
        let (b2, _, new) = st.join(&name, renewal("b"), held(now, 2), lease, None);
        assert!(!new);
        assert_eq!(b2.id, ids[1]);
        for id in [again.id, ids[1], ids[1], ids[2]] {
            st.release(id);
        }
        assert!(st.entries.is_empty() && st.by_name.is_empty() && st.more_fields.is_empty());
    }

    #[test]
    fn a_capped_hold_stops_renewing_before_its_cap_and_ends_as_max_hold_reached() {
        let mut st = State::default();
        let name: Arc<str> = Arc::from("l");
        let lease = Duration::from_secs(3);
        let t0 = Instant::now() - Duration::from_secs(1);
        let capped = Held {
            max_hold: Some(Duration::from_secs(9)),
            ..held(t0, 1)
        };
        let (w, state, _) = st.join(&name, renewal("o"), capped, lease, None);
        assert_eq!(state.lost(), None);
        let e = &st.entries[&w.id];
        let s = Duration::from_secs;
        assert!(!e.past_cap(t0 + s(6), lease), "a lease ending at the cap");
        assert!(e.past_cap(t0 + s(6) + Duration::from_millis(1), lease));
        // A re-entry keeps the first hold's cap, whatever it asks for.
        let longer = Held {
            max_hold: Some(s(3600)),
            ..held(t0 + s(1), 2)
        };
        let (again, _, new) = st.join(&name, renewal("o"), longer, lease, None);
        assert!(!new && again.id == w.id);
        assert!(st.entries[&w.id].past_cap(t0 + s(7), lease));
        // Not renewed any more: the entry only signals its lease end, which is then a
        // max-hold loss.
        assert!(state.finish() && st.entries[&w.id].signals_only());
        let fresh = LeaseState::new(Instant::now(), Duration::from_millis(20));
        assert!(fresh.finish() && fresh.is_final());
        assert_eq!(fresh.lost(), None, "live until its lease ends");
        let ended = LeaseState::new(Instant::now() - s(1), Duration::from_millis(20));
        assert!(ended.finish());
        assert_eq!(ended.lost(), Some(LostReason::MaxHoldReached));
        assert_eq!(
            ended.mark_lost(LostReason::NotHeld),
            LostReason::MaxHoldReached
        );
        // A client closed before the lease ended wins.
        assert_eq!(
            fresh.mark_lost(LostReason::ClientClosed),
            LostReason::ClientClosed
        );
        // Uncapped holds are never past a cap.
        let (plain, _, _) = st.join(&name, renewal("p"), held(t0, 1), lease, None);
        assert!(!st.entries[&plain.id].past_cap(t0 + s(3600), lease));
    }

    #[test]
    fn a_hold_past_its_cap_is_not_taken_early_with_the_renewals_it_precedes() {
        // Like a timer: taken early, it would be put back at its lease end, and taken early
        // again, in a busy loop until then.
        let (mut st, t0) = state_with(&[(1, 10), (2, 20)]);
        assert!(st.entries[&1].lease.finish());
        let horizon = t0 + Duration::from_millis(50);
        assert!(st.take_due(t0, horizon, 10).is_empty());
        let at = t0 + Duration::from_millis(10);
        assert_eq!(st.take_due(at, horizon, 10), vec![1, 2]);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_entry_stays_small() {
        // The watchdog keeps an entry per held lock; at 100,000 locks every 8 bytes here cost
        // about 1 MB (see benches/locks.rs, `watchdog`). Rare parts go in `Extra`.
        assert!(
            std::mem::size_of::<Entry>() <= 56,
            "{}",
            std::mem::size_of::<Entry>()
        );
    }

    #[test]
    fn panicking_callback_is_caught() {
        call_lost(Box::new(|_| panic!("boom")), LostReason::NotHeld, "l");
    }
}
