//! The watchdog: one thread renews the leases of every lock held without an explicit lease.
//!
//! Every held lock is an entry renewed every `lease / 3`. The thread keeps one min-heap of
//! due times (a timer queue; all entries share one period, so one heap is all the wheel we
//! need), wakes at the earliest, takes every entry due within the next `period / 8` (so
//! renewals coalesce into full batches), and renews them `batch` at a time in one script call
//! each. A lock whose renewal reports "not held" is marked lost and dropped; a lock whose
//! renewals keep failing is marked lost once its lease must have run out.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::config::millis;
use crate::error::{Error, Result};
use crate::lock::Renewal;
use crate::pool::Pool;
use crate::scripts;

/// Handle kept by the client; dropping it stops the thread.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    pool: Arc<Pool>,
    lease: Duration,
    period: Duration,
    batch: usize,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    entries: HashMap<u64, Entry>,
    by_key: HashMap<(Arc<str>, Arc<str>), u64>,
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    next_id: u64,
    shutdown: bool,
}

struct Entry {
    name: Arc<str>,
    /// The hash field renewed: the owner id, or `<owner>:write` for a write hold.
    owner: Arc<str>,
    /// For a read hold: the owner's hold-timeout prefix (renewed with `rw_read_renew.lua`).
    read_prefix: Option<Arc<str>>,
    holds: u32,
    lease: Arc<LeaseState>,
}

/// What a guard keeps of its watchdog entry.
pub(crate) struct Watch {
    pub(crate) id: u64,
    pub(crate) lease: Arc<LeaseState>,
}

/// The lease of one held lock as the client knows it, shared by the watchdog and the guards.
pub(crate) struct LeaseState {
    lost: AtomicBool,
    /// When the first acquire was sent; `renewed_us` counts from here.
    base: Instant,
    lease: Duration,
    /// When the lease was last known to be set in Redis (send time of the acquire or renewal
    /// that confirmed it), in µs after `base`.
    renewed_us: AtomicU64,
}

impl LeaseState {
    fn new(base: Instant, lease: Duration) -> LeaseState {
        LeaseState {
            lost: AtomicBool::new(false),
            base,
            lease,
            renewed_us: AtomicU64::new(0),
        }
    }

    /// Lost when a renewal found the lock gone, or when the lease has run out since the last
    /// confirmed renewal (the server may have expired it: renewals are failing or late).
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= self.expires()
    }

    fn expires(&self) -> Instant {
        self.base + Duration::from_micros(self.renewed_us.load(Ordering::Acquire)) + self.lease
    }

    fn renewed(&self, sent_at: Instant) {
        let us = sent_at.saturating_duration_since(self.base).as_micros() as u64;
        self.renewed_us.fetch_max(us, Ordering::AcqRel);
    }

    fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
    }
}

impl Watchdog {
    pub(crate) fn start(pool: Arc<Pool>, lease: Duration, batch: usize) -> Result<Watchdog> {
        let shared = Arc::new(Shared {
            pool,
            lease,
            period: lease / 3,
            batch,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("redlatch-watchdog".into())
            .spawn(move || thread_shared.run())
            .map_err(|e| Error::invalid(format!("cannot spawn the watchdog thread: {e}")))?;
        Ok(Watchdog {
            shared,
            thread: Some(thread),
        })
    }

    /// Starts (or, for a reentrant hold, joins) the renewal of `name` held as `renewal` says.
    /// `acquired_at` is when the acquire was sent: the lease runs from no earlier than that.
    pub(crate) fn watch(&self, name: &Arc<str>, renewal: Renewal, acquired_at: Instant) -> Watch {
        let mut st = self.shared.state.lock();
        let owner = &renewal.field;
        let key = (Arc::clone(name), Arc::clone(owner));
        if let Some(&id) = st.by_key.get(&key) {
            let entry = st.entries.get_mut(&id).expect("by_key and entries agree");
            entry.holds += 1;
            entry.lease.renewed(acquired_at); // the re-entry set the lease again
            return Watch {
                id,
                lease: Arc::clone(&entry.lease),
            };
        }
        let id = st.next_id;
        st.next_id += 1;
        let lease = Arc::new(LeaseState::new(acquired_at, self.shared.lease));
        st.entries.insert(
            id,
            Entry {
                name: Arc::clone(name),
                owner: Arc::clone(owner),
                read_prefix: renewal.read_prefix,
                holds: 1,
                lease: Arc::clone(&lease),
            },
        );
        st.by_key.insert(key, id);
        let due = acquired_at + self.shared.period;
        let earliest = st.due.peek().is_none_or(|Reverse((at, _))| due < *at);
        st.due.push(Reverse((due, id)));
        drop(st);
        if earliest {
            self.shared.changed.notify_one();
        }
        Watch { id, lease }
    }

    /// Releases one hold of the entry `id`; at zero the lock is no longer renewed.
    pub(crate) fn unwatch(&self, id: u64) {
        let mut st = self.shared.state.lock();
        st.release(id);
    }

    /// As [`unwatch`](Self::unwatch), for a hold known only by lock name and hash field.
    pub(crate) fn unwatch_key(&self, name: &Arc<str>, owner: &Arc<str>) {
        let mut st = self.shared.state.lock();
        if let Some(&id) = st.by_key.get(&(Arc::clone(name), Arc::clone(owner))) {
            st.release(id);
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state.lock().shutdown = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl State {
    fn release(&mut self, id: u64) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return; // lost already, or released by another path
        };
        entry.holds -= 1;
        if entry.holds == 0 {
            self.remove(id);
        }
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        self.by_key
            .remove(&(Arc::clone(&entry.name), Arc::clone(&entry.owner)));
        Some(entry)
    }

    /// Pops the ids of live entries due by `horizon`, at most `max`.
    fn take_due(&mut self, horizon: Instant, max: usize) -> Vec<u64> {
        let mut ids = Vec::new();
        while ids.len() < max {
            match self.due.peek() {
                Some(Reverse((at, _))) if *at <= horizon => {}
                _ => break,
            }
            let Reverse((_, id)) = self.due.pop().expect("peeked");
            if self.entries.contains_key(&id) {
                ids.push(id);
            }
        }
        ids
    }
}

/// One lock to renew.
struct Target {
    name: Arc<str>,
    field: Arc<str>,
    read_prefix: Option<Arc<str>>,
}

impl Shared {
    fn run(&self) {
        let slack = self.period / 8;
        let mut st = self.state.lock();
        loop {
            if st.shutdown {
                return;
            }
            let now = Instant::now();
            let ids = st.take_due(now + slack, self.batch);
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
            let batch: Vec<Target> = ids
                .iter()
                .map(|id| {
                    let e = &st.entries[id];
                    Target {
                        name: Arc::clone(&e.name),
                        field: Arc::clone(&e.owner),
                        read_prefix: e.read_prefix.clone(),
                    }
                })
                .collect();
            drop(st);
            let sent_at = Instant::now();
            let outcomes = self.renew(&batch);
            st = self.state.lock();
            self.apply(&mut st, &ids, sent_at, outcomes);
        }
    }

    /// Renews a batch: lock and write holds in one script call, read holds in another. One
    /// outcome per target, in order: renewed, not held, or why its call failed (a failing
    /// call does not affect the targets of the other).
    fn renew(&self, batch: &[Target]) -> Vec<Renewed> {
        let (reads, hashes): (Vec<usize>, Vec<usize>) =
            (0..batch.len()).partition(|&i| batch[i].read_prefix.is_some());
        let mut out: Vec<Renewed> = vec![Renewed::Failed(Arc::from("not sent")); batch.len()];
        let mut call = |script: &redis::Script, at: &[usize]| {
            let Some(&first) = at.first() else { return };
            let mut inv = script.prepare_invoke();
            inv.arg(millis(self.lease));
            for t in at.iter().map(|&i| &batch[i]) {
                inv.key(&*t.name);
                if let Some(prefix) = &t.read_prefix {
                    inv.key(&**prefix);
                }
                inv.arg(&*t.field);
            }
            let reply = self.pool.run(&batch[first].name, |c| inv.invoke(c));
            scatter(&mut out, at, reply);
        };
        call(&scripts::LOCK_RENEW, &hashes);
        call(&scripts::RW_READ_RENEW, &reads);
        out
    }

    fn apply(&self, st: &mut State, ids: &[u64], sent_at: Instant, outcomes: Vec<Renewed>) {
        let now = Instant::now();
        // Retry soon; give up on a lock once its lease must have run out.
        let retry = now + (self.period / 4).max(Duration::from_millis(1));
        for (&id, outcome) in ids.iter().zip(outcomes) {
            match outcome {
                Renewed::Held => {
                    if let Some(e) = st.entries.get(&id) {
                        e.lease.renewed(sent_at);
                        st.due.push(Reverse((sent_at + self.period, id)));
                    }
                }
                Renewed::NotHeld => {
                    if let Some(e) = st.remove(id) {
                        e.lease.mark_lost();
                        log::warn!(
                            "lock `{}` (owner {}) is no longer held: renewal stopped, guard marked lost",
                            e.name,
                            e.owner
                        );
                    }
                }
                Renewed::Failed(why) => {
                    let Some(e) = st.entries.get(&id) else {
                        continue;
                    };
                    if now >= e.lease.expires() {
                        let e = st.remove(id).expect("present");
                        e.lease.mark_lost();
                        log::warn!(
                            "lock `{}` (owner {}) lost: renewals failed for its whole lease ({why})",
                            e.name,
                            e.owner
                        );
                    } else {
                        log::warn!("renewal of lock `{}` failed, retrying: {why}", e.name);
                        st.due.push(Reverse((retry, id)));
                    }
                }
            }
        }
    }
}

/// What one renewal found.
#[derive(Clone)]
enum Renewed {
    Held,
    NotHeld,
    /// The script call failed (or replied nonsense): the lease is unknown.
    Failed(Arc<str>),
}

/// Puts a script call's per-lock replies back at the batch positions `at`.
fn scatter(out: &mut [Renewed], at: &[usize], reply: Result<Vec<i64>>) {
    let outcomes: Vec<Renewed> = match reply {
        Ok(v) if v.len() == at.len() => v
            .into_iter()
            .map(|r| match r {
                1 => Renewed::Held,
                _ => Renewed::NotHeld,
            })
            .collect(),
        Ok(v) => {
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
            st.entries.insert(
                id,
                Entry {
                    name: Arc::clone(&name),
                    owner: Arc::clone(&owner),
                    read_prefix: None,
                    holds: 1,
                    lease: Arc::new(LeaseState::new(t0, Duration::from_secs(30))),
                },
            );
            st.by_key.insert((name, owner), id);
            st.due.push(Reverse((t0 + Duration::from_millis(ms), id)));
        }
        (st, t0)
    }

    #[test]
    fn take_due_returns_due_entries_in_order_up_to_batch() {
        let (mut st, t0) = state_with(&[(1, 30), (2, 10), (3, 20), (4, 500)]);
        let horizon = t0 + Duration::from_millis(100);
        assert_eq!(st.take_due(horizon, 2), vec![2, 3]);
        assert_eq!(st.take_due(horizon, 2), vec![1]);
        assert!(st.take_due(horizon, 2).is_empty());
        assert_eq!(st.due.len(), 1);
    }

    #[test]
    fn released_entries_are_skipped_and_reentrant_holds_counted() {
        let (mut st, t0) = state_with(&[(1, 10), (2, 20)]);
        st.entries.get_mut(&1).unwrap().holds = 2;
        st.release(1);
        st.release(2);
        assert!(st.entries.contains_key(&1));
        assert!(!st.entries.contains_key(&2));
        assert!(st.by_key.len() == 1);
        assert_eq!(st.take_due(t0 + Duration::from_secs(1), 10), vec![1]);
        st.release(1);
        assert!(st.entries.is_empty() && st.by_key.is_empty());
    }
}
