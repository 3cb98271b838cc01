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
//! It knows no lock kind and no semaphore: a hold is a name, a field and a [`BatchRenewal`]
//! that its owner hands in ([`Renewal`]). Beside renewals it runs the client's one periodic
//! [`Chore`] (writing its history out), and runs it once more as it stops.
//!
//! - `mod.rs`: [`Watchdog`], the thread's start and stop.
//! - `lease.rs`: a hold's [`LeaseState`] (loss latching), [`LostReason`], `on_lost`
//!   callbacks, and the [`Watch`] handle guards keep.
//! - `notice.rs`: a [`Revocation`] a renewal found for a hold, and the `on_revoke` callbacks.
//! - `renewal.rs`: what an owner hands in: a hold's [`Renewal`], and the [`BatchRenewal`]
//!   script that renews it.
//! - `entry.rs`: one watched hold, kept small.
//! - `state/`: the bookkeeping under the one lock, its fields private (every other file goes
//!   through its methods): entries, their index (`index.rs`), the due heap (`due.rs`), the
//!   callbacks to run (`fire.rs`), acquires in doubt and explicit-lease counts (`doubts.rs`).
//! - `schedule.rs`: the thread's loop over the due heap, timers, and the cap on holding.
//! - `batch.rs`: the renewal calls, by batch script and slot, and their replies.
//! - `holds.rs`: the calls guards make (watch, `on_lost`, release).
//! - `doubt.rs`: acquires whose reply never came, settled once the server answers.
//! - `settle.rs`: what such an acquire hands in ([`Settle`]), and the record kept of it.
//! - `park.rs`: a hold taken out of renewal while its owner waits on a condition.

mod batch;
mod doubt;
mod entry;
mod holds;
mod lease;
mod notice;
mod park;
mod renewal;
mod schedule;
mod settle;
mod state;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::backend::Backend;
use crate::config::ReplicaSync;
use crate::error::{Error, Result};
use crate::metrics::Recorder;

pub use lease::LostReason;
pub(crate) use lease::{call_lost, LeaseState, Watch};
pub use notice::Revocation;
pub(crate) use park::Parked;
pub(crate) use renewal::{BatchRenewal, Renewal};
pub(crate) use settle::{Settle, Settled, Unsettled};
use state::State;

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
    /// How many holds have acquires in doubt: the owner's calls look no further at zero.
    unsettled: AtomicUsize,
    /// Notified when a settle has run.
    settled: Condvar,
    /// Whether a renewal has found a lock's expiry cut below what this client set (warned
    /// once; later ones are logged at debug).
    cut_seen: AtomicBool,
    chore: Option<Chore>,
}

/// Work the thread does every `every`, with its state unlocked, and once more as it stops.
pub(crate) struct Chore {
    pub(crate) every: Duration,
    pub(crate) run: Box<dyn Fn() + Send + Sync>,
}

/// A weak handle on the watchdog for the pub/sub connection's reconnects (see
/// [`Watchdog::recheck`]).
pub(crate) struct Recheck(Weak<Shared>);

impl Recheck {
    /// Whether any hold is renewed: a recheck would have something to look at.
    pub(crate) fn watches_any(&self) -> bool {
        self.0
            .upgrade()
            .is_some_and(|shared| shared.state.lock().renews_any())
    }

    /// Every renewed hold due now.
    pub(crate) fn now(&self) {
        if let Some(shared) = self.0.upgrade() {
            log::debug!("the server may have lost what it held: renewing every hold now");
            shared.renew_all_now();
        }
    }
}

impl Shared {
    /// Every hold due now (see [`Watchdog::recheck`]).
    fn renew_all_now(&self) {
        let wake = self.state.lock().renew_all_now(std::time::Instant::now());
        if wake {
            self.changed.notify_one();
        }
    }
}

impl Watchdog {
    pub(crate) fn start(
        backend: Arc<Backend>,
        lease: Duration,
        batch: usize,
        sync: Option<ReplicaSync>,
        metrics: Arc<Recorder>,
        chore: Option<Chore>,
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
            unsettled: AtomicUsize::new(0),
            cut_seen: AtomicBool::new(false),
            settled: Condvar::new(),
            chore,
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

    /// What makes the thread renew every hold now, not at its time: for a server that may
    /// have lost them (seen again after a lost connection). Holds the thread's state weakly:
    /// it does nothing once the watchdog is gone.
    pub(crate) fn recheck(&self) -> Recheck {
        Recheck(Arc::downgrade(&self.shared))
    }

    /// Has the thread renew every hold now, not at its time: one was found gone by a look
    /// outside the watchdog (see `LockGuard::found_lost`).
    pub(crate) fn renew_all_now(&self) {
        self.shared.renew_all_now();
    }

    /// Stops renewing, for good: every watched hold is lost ([`LostReason::ClientClosed`]),
    /// its `on_lost` callbacks run on the calling thread, and the thread is joined.
    /// Idempotent.
    pub(crate) fn close(&self) {
        {
            let mut st = self.shared.state.lock();
            st.shut_down();
            for e in st.lose_all(LostReason::ClientClosed) {
                if e.field.is_some() && !st.batch_of(&e).holds {
                    continue; // a waiter's bookkeeping, which ends with its wait
                }
                if let Some(field) = &e.field {
                    log::warn!(
                        "lock `{}` (owner {field}) is no longer renewed: the client is \
                         closed; it stays held until its lease runs out",
                        e.name
                    );
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
        let fires = self.shared.state.lock().take_to_fire();
        for f in fires {
            call_lost(f.callback, f.reason, &f.name);
        }
        self.shared.state.lock().done_firing();
        self.shared.fired.notify_all();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state.lock().shut_down();
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.get_mut().take() {
            // The thread itself drops the last client handle when a settle it ran held it.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
