//! Client metrics: counters and histograms updated with relaxed atomic adds (no lock, no
//! allocation on the hot path), read as a [`Metrics`] snapshot.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

mod facade;
mod histogram;

use crate::hold::{HoldEvent, Subject};
use facade::Labels;
pub(crate) use histogram::AtomicHistogram;
pub use histogram::Histogram;

/// What a client counts; see [`Metrics`] for what each means.
pub(crate) struct Recorder {
    pub(crate) acquisitions: AtomicU64,
    pub(crate) contended: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) renewals: AtomicU64,
    pub(crate) failed_renewals: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) deadlocks: AtomicU64,
    pub(crate) order_inversions: AtomicU64,
    pub(crate) handovers: AtomicU64,
    /// A gauge: threads blocked in a wait of this client now.
    pub(crate) waiting: AtomicU64,
    pub(crate) wait: AtomicHistogram,
    pub(crate) hold: AtomicHistogram,
    /// Whether the `metrics` facade gets a `name` label.
    by_name: bool,
}

impl Recorder {
    pub(crate) fn new() -> Recorder {
        Recorder {
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            failed_renewals: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            deadlocks: AtomicU64::new(0),
            order_inversions: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            wait: AtomicHistogram::new(),
            hold: AtomicHistogram::new(),
            by_name: false,
        }
    }

    /// This recorder, labelling what it reports to the `metrics` facade by lock name if `on`
    /// (see [`ConfigBuilder::metrics_lock_names`](crate::ConfigBuilder::metrics_lock_names)).
    pub(crate) fn labelled_by_name(mut self, on: bool) -> Recorder {
        self.by_name = on;
        facade::describe();
        self
    }

    fn labels<'a>(&self, kind: &'static str, name: &'a str) -> Labels<'a> {
        Labels {
            kind,
            name: self.by_name.then_some(name),
        }
    }

    /// Counts what a hold event says: an acquire, a wait that ran out, a hold's end.
    pub(crate) fn on_hold(&self, s: &Subject<'_>, event: &HoldEvent) {
        let (kind, name) = (s.kind.as_str(), &**s.lock);
        match *event {
            HoldEvent::Acquired {
                waited, contended, ..
            } => self.acquired(kind, name, waited, contended),
            HoldEvent::Admitted { waited, contended } => {
                self.admitted(kind, name, waited, contended)
            }
            HoldEvent::GaveUp {
                timed_out: true, ..
            } => self.timed_out(kind, name),
            HoldEvent::HandedOver { held } => {
                self.handovers.fetch_add(1, Relaxed);
                facade::count("redlatch_handovers_total");
                self.released(kind, name, held);
            }
            HoldEvent::Released { held: Some(held) }
            | HoldEvent::Lost { held, .. }
            | HoldEvent::Forgotten { held } => self.released(kind, name, held),
            _ => {}
        }
    }

    /// The lock `name` of kind `kind` was acquired after `waited` (since the call began);
    /// `contended` if it was busy at first. It counts as held until [`released`](Self::released).
    fn acquired(&self, kind: &'static str, name: &str, waited: Duration, contended: bool) {
        self.counted(waited, contended);
        facade::acquired(self.labels(kind, name), waited, contended);
    }

    /// The rate limiter `name` (of kind `kind`) admitted a call after `waited`: an
    /// acquisition that holds nothing afterwards.
    fn admitted(&self, kind: &'static str, name: &str, waited: Duration, contended: bool) {
        self.counted(waited, contended);
        facade::admitted(self.labels(kind, name), waited, contended);
    }

    /// One more acquisition, after `waited`.
    fn counted(&self, waited: Duration, contended: bool) {
        self.acquisitions.fetch_add(1, Relaxed);
        if contended {
            self.contended.fetch_add(1, Relaxed);
        }
        self.wait.record(waited);
    }

    /// A wait for the lock `name` ran out.
    fn timed_out(&self, kind: &'static str, name: &str) {
        self.timeouts.fetch_add(1, Relaxed);
        facade::timed_out(self.labels(kind, name));
    }

    /// A hold of the lock `name`, taken `held` ago, was released.
    fn released(&self, kind: &'static str, name: &str, held: Duration) {
        self.hold.record(held);
        facade::released(self.labels(kind, name), held);
    }

    /// A thread began blocking in a wait (the `waiting` gauge).
    pub(crate) fn wait_began(&self) {
        self.waiting.fetch_add(1, Relaxed);
        facade::waiting(1.0);
    }

    /// A counted thread left its wait.
    pub(crate) fn wait_ended(&self) {
        self.waiting.fetch_sub(1, Relaxed);
        facade::waiting(-1.0);
    }

    pub(crate) fn renewed(&self) {
        self.renewals.fetch_add(1, Relaxed);
        facade::count("redlatch_renewals_total");
    }

    pub(crate) fn renewal_failed(&self) {
        self.failed_renewals.fetch_add(1, Relaxed);
        facade::count("redlatch_failed_renewals_total");
    }

    pub(crate) fn lost_one(&self) {
        self.lost.fetch_add(1, Relaxed);
        facade::count("redlatch_lost_locks_total");
    }

    pub(crate) fn reconnected(&self) {
        self.reconnects.fetch_add(1, Relaxed);
        facade::count("redlatch_pubsub_reconnects_total");
    }

    pub(crate) fn deadlocked(&self) {
        self.deadlocks.fetch_add(1, Relaxed);
        facade::count("redlatch_deadlocks_total");
    }

    pub(crate) fn order_inverted(&self) {
        self.order_inversions.fetch_add(1, Relaxed);
        facade::count("redlatch_lock_order_inversions_total");
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        Metrics {
            acquisitions: self.acquisitions.load(Relaxed),
            contended_acquisitions: self.contended.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            renewals: self.renewals.load(Relaxed),
            failed_renewals: self.failed_renewals.load(Relaxed),
            lost_locks: self.lost.load(Relaxed),
            pubsub_reconnects: self.reconnects.load(Relaxed),
            deadlocks: self.deadlocks.load(Relaxed),
            lock_order_inversions: self.order_inversions.load(Relaxed),
            handovers: self.handovers.load(Relaxed),
            waiting: self.waiting.load(Relaxed),
            unsettled: 0,
            wait_time: self.wait.snapshot(),
            hold_time: self.hold.snapshot(),
        }
    }
}

/// A snapshot of a client's counters since it was created, from
/// [`Client::metrics`](crate::Client::metrics). Counters of all clones of the client are
/// shared. Fields are read one by one while other threads go on, so a snapshot taken under
/// load can be off by the few events that happened while it was taken.
///
/// Locks are every [`Lock`](crate::Lock): plain, fair, fenced, and the sides of a
/// [`ReadWriteLock`](crate::ReadWriteLock) (and so the members of a
/// [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock) that are taken through them),
/// each lock of a [`LockSet`](crate::LockSet); and a semaphore's permits count as a hold too
/// (one per [`SemaphoreGuard`](crate::SemaphoreGuard) or [`PermitGuard`](crate::PermitGuard)).
/// A [`RateLimiter`](crate::RateLimiter)'s admissions count as acquisitions (and their waits
/// and timeouts as a lock's), but hold nothing: no hold time.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// drop(client.lock("report").lock()?);
/// let m = client.metrics();
/// println!(
///     "{} acquisitions ({} contended), wait p50 {:?} p99 {:?}",
///     m.acquisitions,
///     m.contended_acquisitions,
///     m.wait_time.p50(),
///     m.wait_time.p99()
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Metrics {
    /// Locks acquired (a re-entry counts too), and rate limiter admissions.
    pub acquisitions: u64,
    /// Of those, acquisitions that found the lock busy and waited for it.
    pub contended_acquisitions: u64,
    /// Waits (`try_lock_for`, `try_lock_until`) that ended without the lock. A `try_lock`
    /// that finds the lock busy does not count: it did not wait.
    pub timeouts: u64,
    /// Leases renewed by the watchdog (one per held lock per renewal).
    pub renewals: u64,
    /// Renewals that failed (no reply, an error, too few replicas): retried until the lease
    /// ends. A lock found no longer held counts as lost, not here.
    pub failed_renewals: u64,
    /// Holds found lost (taken over, force-unlocked, or their lease ran out), when the
    /// watchdog, the guard or its release found out.
    pub lost_locks: u64,
    /// Pub/sub connections re-made after they broke (or moved: a Sentinel failover).
    pub pubsub_reconnects: u64,
    /// Waits of this client that ended with [`Error::Deadlock`](crate::Error::Deadlock): the
    /// victims of the cycles it found.
    pub deadlocks: u64,
    /// Pairs of locks this client's threads took in an order opposite to one on record
    /// ([`ConfigBuilder::lock_order_checks`](crate::ConfigBuilder::lock_order_checks)): each
    /// conflicting pair counts once per process (again when recorded anew after hours).
    pub lock_order_inversions: u64,
    /// Releases that passed the lock straight to a waiting thread of this client, in the
    /// release's own call (nothing published, no other client could take it in between):
    /// the cheapest hand-over there is. Each is counted among the releases too.
    pub handovers: u64,
    /// A gauge: threads of this client blocked in a wait right now (any lock, semaphore or
    /// latch). A thread counts from the moment it is subscribed, has re-checked, and blocks,
    /// until it leaves the wait: a release published once the count includes it wakes it.
    /// A test or a dashboard can await "N threads are waiting" with it exactly. A
    /// [spin lock](crate::Client::spin_lock)'s waiter, which subscribes to nothing, counts
    /// from its first retry on, and sees a release at its next retry.
    pub waiting: u64,
    /// A gauge: holds of this client with a call whose reply never came (an acquire that
    /// may have run, an unlock made good so) not settled yet. A settle reads what the
    /// server has and gives back what no guard holds, at the owner's next call on the hold
    /// or on the watchdog thread once the server answers; 0 when nothing is in doubt.
    pub unsettled: u64,
    /// From the start of an acquire call to holding the lock, for every acquisition
    /// (an uncontended one takes about a round trip).
    pub wait_time: Histogram,
    /// From acquiring a lock to releasing it (through its guard).
    pub hold_time: Histogram,
}
