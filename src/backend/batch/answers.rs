//! Who takes the replies of a write: the entries of a batch, the callers parked for their
//! outcomes, and how a lane's thread hands each its outcome and wakes it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::Thread;

use parking_lot::Mutex;
use redis::{RedisError, Value};

use super::Trip;
use crate::backend::merge::Merger;
use crate::error::Error;

/// The replies of one command (or pipeline) in a write, and who takes them.
pub(super) struct Entry {
    pub(super) replies: usize,
    pub(super) target: Target,
    /// Its bytes in the queue (0 for an entry not queued).
    pub(super) bytes: usize,
    /// The operation it calls, for a queued call that may merge with others (see
    /// `merge.rs`).
    pub(super) op: Option<usize>,
}

impl Entry {
    /// Who takes the replies; the entry is left answering nobody.
    pub(super) fn take_target(&mut self) -> Target {
        std::mem::replace(&mut self.target, Target::Later)
    }
}

impl Drop for Entry {
    /// An entry is dropped unanswered only when the thread holding it unwinds (a bug, or a
    /// panic in a dependency): its caller gets an error, as for a broken connection, rather
    /// than sleeping for good.
    fn drop(&mut self) {
        let jobs = match self.take_target() {
            Target::Job(job) => vec![job],
            Target::Merged(merged) => merged.jobs,
            Target::Mine | Target::Later | Target::Load => return,
        };
        for job in jobs {
            let e = std::io::Error::other("the thread reading this command's reply panicked");
            *job.slot.lock() =
                Slot::Done(Outcome::Broken(e.into()), Arc::new(Wakes::closed(vec![])));
            job.thread.unpark();
        }
    }
}

pub(super) enum Target {
    /// The thread that wrote them reads them (a lane's first write).
    Mine,
    /// A queued caller.
    Job(Arc<Job>),
    /// Queued callers whose calls were merged into one (see `merge.rs`).
    Merged(Box<Merged>),
    /// Nobody: read and dropped.
    Later,
    /// Nobody: the batch script's `SCRIPT LOAD`, whose error is noted.
    Load,
}

impl Target {
    /// The first caller this target answers, if any.
    pub(super) fn first_job(&self) -> Option<&Arc<Job>> {
        match self {
            Target::Job(job) => Some(job),
            Target::Merged(merged) => merged.jobs.first(),
            Target::Mine | Target::Later | Target::Load => None,
        }
    }
}

/// Calls sent as one: their callers, and their own calls, to send as they were if the
/// server has not loaded the batch script.
pub(super) struct Merged {
    pub(super) jobs: Vec<Arc<Job>>,
    /// Their packed calls, back to back, in the order of `jobs`.
    pub(super) calls: Vec<u8>,
}

/// A queued caller: its thread parks until its slot is filled.
pub(super) struct Job {
    pub(super) slot: Mutex<Slot>,
    pub(super) thread: Thread,
}

pub(super) enum Slot {
    Waiting,
    /// Take over the lane with this batch (the caller's own command among them): write it
    /// unless it comes written, read the replies, then carry on with the lane.
    Lead(Box<Trip>),
    /// The outcome, and the callers answered with it still to wake: each woken caller
    /// wakes [`WAKES_EACH`] more before going on.
    Done(Outcome, Arc<Wakes>),
}

/// How many callers of its batch each woken caller wakes before going on with its own work.
/// The thread that read the batch wakes them too, but waking a thread may hand it the CPU
/// at once (the scheduler prefers a thread that slept): helped this way, every caller is
/// woken soon even when the reader is not running.
pub(super) const WAKES_EACH: usize = 2;

/// Callers whose outcomes are in their slots, to wake, each once, by whoever gets there.
pub(super) struct Wakes {
    jobs: Vec<Arc<Job>>,
    /// The next of `jobs` to wake; none while it is `jobs.len()` or more.
    next: AtomicUsize,
}

impl Wakes {
    /// Wakes made only once [`open`](Self::open): a caller that finds its outcome early
    /// must not wake one whose slot is not filled yet (that one would park again, with
    /// nobody left to wake it).
    pub(super) fn closed(jobs: Vec<Arc<Job>>) -> Wakes {
        let next = AtomicUsize::new(jobs.len());
        Wakes { jobs, next }
    }

    /// Every slot is filled: wakes may be made.
    pub(super) fn open(&self) {
        self.next.store(0, Ordering::Release);
    }

    /// Wakes the next caller not yet woken; false when all are, or none may be yet.
    pub(super) fn wake_one(&self) -> bool {
        match self.jobs.get(self.next.fetch_add(1, Ordering::AcqRel)) {
            Some(job) => {
                job.thread.unpark();
                true
            }
            None => false,
        }
    }
}

/// The outcomes a lane's thread has for callers: kept until the lane's next write is out,
/// so that waking them (which may take the CPU from this thread) does not hold up the lane.
#[derive(Default)]
pub(super) struct Answers {
    /// The outcome of the thread's own command (a [`Target::Mine`] entry).
    mine: Option<Outcome>,
    jobs: Vec<(Arc<Job>, Outcome)>,
}

impl Answers {
    pub(super) fn answer(&mut self, mut entry: Entry, outcome: Outcome) {
        match entry.take_target() {
            Target::Mine => self.mine = Some(outcome),
            Target::Job(job) => self.jobs.push((job, outcome)),
            Target::Merged(merged) => self.answer_merged(merged.jobs, outcome),
            Target::Later | Target::Load => {}
        }
    }

    /// Gives each of `jobs` its reply of a merged call's `outcome`: its item of the array
    /// the batch script replied; the same error for all when the call failed as a whole.
    fn answer_merged(&mut self, jobs: Vec<Arc<Job>>, outcome: Outcome) {
        let whole = match outcome {
            Outcome::Replies(mut replies) if replies.len() == 1 => {
                let reply = replies.pop().unwrap_or(Value::Nil);
                match Merger::split(reply, jobs.len()) {
                    Ok(items) => {
                        for (job, item) in jobs.into_iter().zip(items) {
                            self.jobs.push((job, Outcome::Replies(vec![item])));
                        }
                        return;
                    }
                    Err(whole) => Outcome::Replies(vec![whole]),
                }
            }
            other => other,
        };
        for job in jobs {
            self.jobs.push((job, whole.clone()));
        }
    }

    /// Gives every one of `entries` the outcome `f` makes.
    pub(super) fn answer_all(&mut self, entries: &mut Vec<Entry>, f: impl Fn() -> Outcome) {
        for entry in entries.drain(..) {
            self.answer(entry, f());
        }
    }

    /// Puts each outcome in its caller's slot, wakes `lead` (the caller taking over the lane,
    /// its slot already filled) and then the callers but `me` (this thread's own queued
    /// call, if it is one of them), and returns this thread's own outcome.
    pub(super) fn deliver(
        mut self,
        lead: Option<Arc<Job>>,
        me: Option<&Arc<Job>>,
    ) -> Option<Outcome> {
        if let Some(job) = lead {
            job.thread.unpark();
        }
        self.wake_jobs(me);
        self.mine.take()
    }

    /// Puts each outcome of `jobs` in its caller's slot and wakes them all but `me`.
    fn wake_jobs(&mut self, me: Option<&Arc<Job>>) {
        let jobs = std::mem::take(&mut self.jobs);
        if !jobs.is_empty() {
            let others = jobs
                .iter()
                .filter(|(job, _)| !me.is_some_and(|me| Arc::ptr_eq(job, me)))
                .map(|(job, _)| Arc::clone(job))
                .collect();
            let wakes = Arc::new(Wakes::closed(others));
            for (job, outcome) in jobs {
                *job.slot.lock() = Slot::Done(outcome, Arc::clone(&wakes));
            }
            wakes.open();
            while wakes.wake_one() {}
        }
    }
}

impl Drop for Answers {
    /// Outcomes not delivered (the thread holding them unwinds) still reach their callers.
    fn drop(&mut self) {
        self.wake_jobs(None);
    }
}

/// What a command got.
#[derive(Clone)]
pub(crate) enum Outcome {
    /// Its replies (server errors among them, as [`Value::ServerError`]).
    Replies(Vec<Value>),
    /// The connection broke, or the reply did not come in time: it may have run.
    Broken(RedisError),
    /// It was not sent (no connection could be had, or the client is closed): whether it may
    /// have run is the second field (false: it did not).
    NotSent(Error, bool),
}
