//! Commands from many threads sharing round trips on one pool's connections.
//!
//! A call runs on a [`Shared`] connection: each command it sends is handed to the pool's
//! [`Batcher`]. Up to `lanes` round trips are under way at once, each on a connection of its
//! own. A thread that finds a lane free takes it and sends its command at once, itself: alone,
//! it pays no hand-over to another thread. A thread that finds every lane busy queues its
//! command (its bytes appended to one buffer) and sleeps. When a lane's round trip is over,
//! the thread holding it writes everything queued meanwhile in one write, and hands the
//! connection to the first of those callers, which reads every reply of that write, gives
//! each to its caller, and in turn writes what was queued meanwhile, or gives the lane up.
//! So under load each round trip carries as many commands as arrived during the previous
//! one, and the server reads and writes its socket once for all of them.
//!
//! Replies come back in the order the commands were written (Redis answers each connection
//! in order), so a caller's replies are the next `n` read after those queued before it.
//! Every command keeps its meaning: each gets its own reply or error (NOSCRIPT is answered to
//! the one call, which loads the script and sends again); a reply that does not come within
//! the connection's response timeout, or a connection that breaks, fails every command of
//! that write that has no reply yet (with the I/O error: the command may have run) and the
//! connection is dropped; a connection that cannot be had fails the commands not sent (they
//! did not run, and are retried as the pool retries).
//!
//! A lane's thread that unwinds (a panic: a bug here or in a dependency) leaves nobody asleep:
//! the outcomes it holds still reach their callers, the commands whose replies it had not
//! read fail as on a broken connection, and its lane is given back: the calls queued behind
//! it go with the next lane taken, or fail as not sent (and are retried) if no other lane is
//! taken. The connection it held is closed, and its place in the pool freed (see `checkout.rs`).
//!
//! Keys to delete that nobody waits for ([`Batcher::delete_later`]: unlock latches) ride
//! with a later write once 16 of them wait, in one `DEL` (one per key on a cluster node, whose
//! keys may be in different slots), whose reply is read and dropped. So at most 15 such keys
//! of a pool outlive their deletion (until they expire), and the server deletes 16 keys for
//! the cost of little more than one command.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::Thread;

use parking_lot::Mutex;
use redis::{ConnectionLike, RedisError, RedisResult, Value};

use super::checkout::{Held, Lender};
use super::merge::{Merger, MERGER};
use crate::error::Error;
use crate::handover::Waiter;

/// Most keys kept for [`Batcher::delete_later`]; more are left to expire by themselves.
const MAX_DOOMED: usize = 4096;
/// Keys to delete go out once this many wait (one `DEL` for many costs the server little
/// more than one command); fewer are left for a later write, or to expire.
const MIN_DOOMED: usize = 16;

thread_local! {
    /// The waiter to wake once this thread's command is written (see
    /// [`nudging_after_write`]).
    static AFTER_WRITE: std::cell::RefCell<Option<Arc<Waiter>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `call` (one command, on this thread), waking `waiter` once as soon as the command
/// is written, while its reply is still to come, or else as the call returns (another
/// thread wrote it, or it was not sent). A hand-over inside the client wakes the waiter so:
/// its wake-up then overlaps the round trip that passes it the lock (see `handover.rs`).
pub(crate) fn nudging_after_write<R>(waiter: &Arc<Waiter>, call: impl FnOnce() -> R) -> R {
    /// Wakes the waiter if nobody did, however the call ends.
    struct Pending;
    impl Drop for Pending {
        fn drop(&mut self) {
            wake_after_write();
        }
    }
    // `try_with`: a write from a thread-local's destructor (a guard kept in one) may come
    // after this one is gone; it then wakes nobody early.
    let _ = AFTER_WRITE.try_with(|slot| *slot.borrow_mut() = Some(Arc::clone(waiter)));
    let _pending = Pending;
    call()
}

/// Wakes the waiter [`nudging_after_write`] named, if any (once).
fn wake_after_write() {
    if let Some(waiter) = AFTER_WRITE
        .try_with(|slot| slot.borrow_mut().take())
        .ok()
        .flatten()
    {
        waiter.wake_early();
    }
}

pub(crate) struct Batcher {
    /// How many round trips may be under way at once, each on its own connection.
    lanes: usize,
    /// Set once the server refused to load the batch script (an ACL without `SCRIPT`, say):
    /// no more calls are merged (see `merge.rs`).
    unmergeable: AtomicBool,
    /// Keys to delete go one per `DEL` (a cluster node: they may be in different slots).
    one_per_del: bool,
    queue: Mutex<Queue>,
}

/// What waits for the next write.
#[derive(Default)]
struct Queue {
    /// Lanes taken: round trips under way. Jobs are queued only while all are taken.
    leading: usize,
    /// The queued commands, packed back to back, in the order of `entries`.
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    /// Keys to delete with a later write (see [`MIN_DOOMED`]).
    doomed: Vec<String>,
}

/// The replies of one command (or pipeline) in a write, and who takes them.
struct Entry {
    replies: usize,
    target: Target,
    /// Its bytes in the queue (0 for an entry not queued).
    bytes: usize,
    /// The operation it calls, for a queued call that may merge with others (see
    /// `merge.rs`).
    op: Option<usize>,
}

impl Entry {
    /// Who takes the replies; the entry is left answering nobody.
    fn take_target(&mut self) -> Target {
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

enum Target {
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
    fn first_job(&self) -> Option<&Arc<Job>> {
        match self {
            Target::Job(job) => Some(job),
            Target::Merged(merged) => merged.jobs.first(),
            Target::Mine | Target::Later | Target::Load => None,
        }
    }
}

/// Calls sent as one: their callers, and their own calls, to send as they were if the
/// server has not loaded the batch script.
struct Merged {
    jobs: Vec<Arc<Job>>,
    /// Their packed calls, back to back, in the order of `jobs`.
    calls: Vec<u8>,
}

/// A queued caller: its thread parks until its slot is filled.
struct Job {
    slot: Mutex<Slot>,
    thread: Thread,
}

enum Slot {
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
const WAKES_EACH: usize = 2;

/// Callers whose outcomes are in their slots, to wake, each once, by whoever gets there.
struct Wakes {
    jobs: Vec<Arc<Job>>,
    /// The next of `jobs` to wake; none while it is `jobs.len()` or more.
    next: AtomicUsize,
}

impl Wakes {
    /// Wakes made only once [`open`](Self::open): a caller that finds its outcome early
    /// must not wake one whose slot is not filled yet (that one would park again, with
    /// nobody left to wake it).
    fn closed(jobs: Vec<Arc<Job>>) -> Wakes {
        let next = AtomicUsize::new(jobs.len());
        Wakes { jobs, next }
    }

    /// Every slot is filled: wakes may be made.
    fn open(&self) {
        self.next.store(0, Ordering::Release);
    }

    /// Wakes the next caller not yet woken; false when all are, or none may be yet.
    fn wake_one(&self) -> bool {
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
struct Answers {
    /// The outcome of the thread's own command (a [`Target::Mine`] entry).
    mine: Option<Outcome>,
    jobs: Vec<(Arc<Job>, Outcome)>,
}

impl Answers {
    fn answer(&mut self, mut entry: Entry, outcome: Outcome) {
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
    fn answer_all(&mut self, entries: &mut Vec<Entry>, f: impl Fn() -> Outcome) {
        for entry in entries.drain(..) {
            self.answer(entry, f());
        }
    }

    /// Puts each outcome in its caller's slot, wakes `lead` (the caller taking over the lane,
    /// its slot already filled) and then the callers but `me` (this thread's own queued
    /// call, if it is one of them), and returns this thread's own outcome.
    fn deliver(mut self, lead: Option<Arc<Job>>, me: Option<&Arc<Job>>) -> Option<Outcome> {
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

/// A lane taken (see [`Queue::leading`]), given back when its holder unwinds: what is queued
/// is left to the next thread that takes a lane, or, if no other lane is taken (nobody would
/// come), failed as not sent rather than left waiting for good.
struct Lane<'a> {
    batcher: Option<&'a Batcher>,
}

impl<'a> Lane<'a> {
    /// The lane this thread took or was handed.
    fn held(batcher: &'a Batcher) -> Lane<'a> {
        Lane {
            batcher: Some(batcher),
        }
    }

    /// Given up or handed on by the normal path.
    fn pass(mut self) {
        self.batcher = None;
    }
}

impl Drop for Lane<'_> {
    fn drop(&mut self) {
        let Some(batcher) = self.batcher else { return };
        let mut queue = batcher.queue.lock();
        queue.leading -= 1;
        if queue.leading > 0 {
            // The next thread to take a lane sends them (see `Batcher::send`).
            return;
        }
        queue.bytes.clear();
        let mut stranded = std::mem::take(&mut queue.entries);
        drop(queue);
        // Not sent: they did not run, and are retried as the pool retries.
        let e = std::io::Error::other("the thread that was to send this command panicked");
        let err = Error::Connection(e.into());
        let mut answers = Answers::default();
        answers.answer_all(&mut stranded, || Outcome::NotSent(err.clone(), false));
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

/// A batch going to the caller who takes over the lane: written on `held`, or (after the
/// lane's connection broke) still to write, as `bytes`, on a connection the caller gets.
struct Trip {
    held: Option<Held>,
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl Batcher {
    /// `one_per_del`: the server is a cluster node, whose keys may be in different slots.
    pub(crate) fn new(lanes: usize, one_per_del: bool) -> Batcher {
        Batcher {
            lanes: lanes.max(1),
            unmergeable: AtomicBool::new(false),
            one_per_del,
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Sends the packed command(s) `cmd` on `pool` and returns their `replies` replies: in a
    /// round trip of this thread's own when a lane is free, else in a lane's next write.
    pub(crate) fn send(&self, pool: &dyn Lender, cmd: &[u8], replies: usize) -> Outcome {
        let mut queue = self.queue.lock();
        if queue.leading < self.lanes {
            queue.leading += 1;
            let lane = Lane::held(self);
            let doomed = take_doomed(&mut queue);
            // Callers queue only while no lane is free, but a lane whose thread unwound may
            // have left some (see `Lane`): they go first.
            let stranded = std::mem::take(&mut queue.entries);
            let stranded_bytes = std::mem::take(&mut queue.bytes);
            drop(queue);
            let mine = Entry {
                replies,
                target: Target::Mine,
                bytes: 0,
                op: None,
            };
            let mine = if doomed.is_empty() && stranded.is_empty() {
                // Alone, as most calls: the command goes out as it is, copied nowhere.
                self.drive(pool, lane, None, cmd, vec![mine], None)
            } else {
                let (mut bytes, mut entries) = self.deletions(doomed);
                bytes.extend_from_slice(&stranded_bytes);
                entries.extend(stranded);
                bytes.extend_from_slice(cmd);
                entries.push(mine);
                self.drive(pool, lane, None, &bytes, entries, None)
            };
            return mine.unwrap_or_else(|| {
                debug_assert!(false, "a lane's first write answers its writer");
                Outcome::NotSent(Error::Protocol("no reply".into()), true)
            });
        }
        let job = Arc::new(Job {
            slot: Mutex::new(Slot::Waiting),
            thread: std::thread::current(),
        });
        queue.bytes.extend_from_slice(cmd);
        let op = (replies == 1 && self.merges())
            .then(|| MERGER.op_of(cmd))
            .flatten();
        queue.entries.push(Entry {
            replies,
            target: Target::Job(Arc::clone(&job)),
            bytes: cmd.len(),
            op,
        });
        drop(queue);
        loop {
            let slot = std::mem::replace(&mut *job.slot.lock(), Slot::Waiting);
            match slot {
                Slot::Waiting => std::thread::park(),
                Slot::Done(outcome, wakes) => {
                    for _ in 0..WAKES_EACH {
                        if !wakes.wake_one() {
                            break;
                        }
                    }
                    return outcome;
                }
                // This thread reads its own reply into its slot among the others.
                Slot::Lead(trip) => {
                    let Trip {
                        held,
                        bytes,
                        entries,
                    } = *trip;
                    self.drive(pool, Lane::held(self), held, &bytes, entries, Some(&job));
                }
            }
        }
    }

    /// Deletes `key` with a later write (once [`MIN_DOOMED`] wait), reading nothing back: a
    /// clean-up that the server also does by itself (the key expires). Dropped when too many
    /// wait already.
    pub(crate) fn delete_later(&self, key: String) {
        let mut queue = self.queue.lock();
        if queue.doomed.len() < MAX_DOOMED {
            queue.doomed.push(key);
        }
    }

    /// The `DEL` command(s) of `doomed`, packed, and their entries.
    fn deletions(&self, doomed: Vec<String>) -> (Vec<u8>, Vec<Entry>) {
        let mut bytes = Vec::new();
        let mut entries = Vec::new();
        if doomed.is_empty() {
            return (bytes, entries);
        }
        let groups: Vec<&[String]> = if self.one_per_del {
            doomed.chunks(1).collect()
        } else {
            vec![&doomed[..]]
        };
        for keys in groups {
            redis::cmd("DEL").arg(keys).write_packed_command(&mut bytes);
            entries.push(Entry {
                replies: 1,
                target: Target::Later,
                bytes: 0,
                op: None,
            });
        }
        (bytes, entries)
    }

    /// Whether queued calls may be merged: not on a cluster node (a script call keeps to one
    /// slot), nor once the server has not kept the batch script.
    fn merges(&self) -> bool {
        !self.one_per_del && !self.unmergeable.load(Ordering::Relaxed)
    }

    /// `bytes` and `entries` (a queue taken whole) with the calls that may merge sent as
    /// one call of the batch script, after the others; as they were when fewer than two may.
    fn merge(&self, bytes: Vec<u8>, entries: Vec<Entry>) -> (Vec<u8>, Vec<Entry>) {
        if entries.iter().filter(|e| e.op.is_some()).count() < 2 {
            return (bytes, entries);
        }
        let mut calls = Vec::new();
        let mut offset = 0;
        for e in &entries {
            if let (Some(op), Target::Job(_)) = (e.op, &e.target) {
                calls.push((op, &bytes[offset..offset + e.bytes]));
            }
            offset += e.bytes;
        }
        let Some(packed) = MERGER.pack(&calls) else {
            return (bytes, entries);
        };
        let mut merged = Merged {
            jobs: Vec::with_capacity(calls.len()),
            calls: Vec::new(),
        };
        let (mut out, mut kept) = (Vec::with_capacity(bytes.len()), Vec::new());
        let mut offset = 0;
        for mut e in entries {
            let own = &bytes[offset..offset + e.bytes];
            offset += e.bytes;
            match (e.op, e.take_target()) {
                (Some(_), Target::Job(job)) => {
                    merged.jobs.push(job);
                    merged.calls.extend_from_slice(own);
                }
                (_, target) => {
                    e.target = target;
                    out.extend_from_slice(own);
                    kept.push(e);
                }
            }
        }
        out.extend_from_slice(&packed);
        kept.push(Entry {
            replies: 1,
            target: Target::Merged(Box::new(merged)),
            bytes: packed.len(),
            op: None,
        });
        (out, kept)
    }

    /// Holds a lane: writes `bytes` (unless `held` comes with them written), reads the replies
    /// of `entries`; then takes what was queued meanwhile and hands it to one of its callers
    /// (written, when the connection is still good), or gives the lane up; and only then wakes
    /// the callers it has outcomes for (but `me`: this thread's own queued call, whose slot
    /// it reads next). Returns the outcome of a [`Target::Mine`] entry.
    fn drive(
        &self,
        pool: &dyn Lender,
        lane: Lane<'_>,
        mut held: Option<Held>,
        bytes: &[u8],
        mut entries: Vec<Entry>,
        me: Option<&Arc<Job>>,
    ) -> Option<Outcome> {
        let mut answers = Answers::default();
        if held.is_none() {
            held = self.write(pool, bytes, &mut entries, &mut answers);
            if held.is_some() {
                wake_after_write();
            }
        }
        if let Some(h) = held.take() {
            held = self.read(pool, h, entries, &mut answers);
        }
        // What was queued during this round trip.
        loop {
            let mut queue = self.queue.lock();
            if queue.entries.is_empty() {
                // Nobody waits: give the lane up (deletions wait for the next write).
                queue.leading -= 1;
                drop(queue);
                lane.pass();
                if let Some(h) = held {
                    pool.checkin(h);
                }
                return answers.deliver(None, me);
            }
            let queued = std::mem::take(&mut queue.bytes);
            let waiting = std::mem::take(&mut queue.entries);
            let doomed = take_doomed(&mut queue);
            drop(queue);
            let (queued, mut waiting) = if self.merges() {
                self.merge(queued, waiting)
            } else {
                (queued, waiting)
            };
            if pool.is_closed() {
                // Nothing more goes out once the client is closed (see `Pool::close`).
                answers.answer_all(&mut waiting, || Outcome::NotSent(Error::Closed, true));
                continue;
            }
            let (mut bytes, mut entries) = self.deletions(doomed);
            bytes.extend_from_slice(&queued);
            entries.extend(waiting);
            let trip = match held.take() {
                // Written here, read by one of its callers: this thread returns to its own.
                Some(h) => match self.send_on(pool, h, &bytes, &mut entries, &mut answers) {
                    Some(h) => Trip {
                        held: Some(h),
                        bytes: Vec::new(),
                        entries,
                    },
                    // Failed and answered: look again.
                    None => continue,
                },
                // No connection (it broke): one of the callers gets one and writes, so that
                // this thread does not wait on connects for others.
                None => Trip {
                    held: None,
                    bytes,
                    entries,
                },
            };
            let job = trip
                .entries
                .iter()
                .find_map(|e| e.target.first_job().map(Arc::clone))
                .expect("a batch with a caller");
            *job.slot.lock() = Slot::Lead(Box::new(trip));
            lane.pass();
            return answers.deliver(Some(job), me);
        }
    }

    /// Writes `bytes` on a connection of the pool; on failure answers `entries` and returns
    /// `None`.
    fn write(
        &self,
        pool: &dyn Lender,
        bytes: &[u8],
        entries: &mut Vec<Entry>,
        answers: &mut Answers,
    ) -> Option<Held> {
        match pool.checkout_shared() {
            Ok(held) => self.send_on(pool, held, bytes, entries, answers),
            Err((err, ran)) => {
                answers.answer_all(entries, || Outcome::NotSent(err.clone(), ran));
                None
            }
        }
    }

    fn send_on(
        &self,
        pool: &dyn Lender,
        mut held: Held,
        bytes: &[u8],
        entries: &mut Vec<Entry>,
        answers: &mut Answers,
    ) -> Option<Held> {
        match held.conn.send_packed_command(bytes) {
            Ok(()) => Some(held),
            Err(e) => {
                log::debug!("dropping a command connection after a failed write: {e}");
                pool.discard(held);
                answers.answer_all(entries, || Outcome::Broken(e.clone()));
                None
            }
        }
    }

    /// Reads the replies of `entries` from `held` into `answers`. Returns the connection, or
    /// `None` when it broke (it is dropped, and the callers without a reply get the error).
    fn read(
        &self,
        pool: &dyn Lender,
        mut held: Held,
        entries: Vec<Entry>,
        answers: &mut Answers,
    ) -> Option<Held> {
        // Merged calls the server could not run for want of the batch script (as entries, so
        // that an unwinding thread still answers them).
        let mut unloaded: Vec<Entry> = Vec::new();
        let mut entries = entries.into_iter();
        while let Some(entry) = entries.next() {
            let mut replies = Vec::with_capacity(entry.replies);
            let mut broke = None;
            for _ in 0..entry.replies {
                match held.conn.recv_response() {
                    Ok(v) => replies.push(v),
                    Err(e) => {
                        broke = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = broke {
                log::debug!("dropping a command connection after a failed read: {e}");
                pool.discard(held);
                answers.answer(entry, Outcome::Broken(e.clone()));
                for rest in entries {
                    answers.answer(rest, Outcome::Broken(e.clone()));
                }
                return None;
            }
            match (&entry.target, replies.first()) {
                (Target::Merged(_), Some(reply)) if Merger::is_noscript(reply) => {
                    unloaded.push(entry);
                    continue;
                }
                (Target::Load, Some(Value::ServerError(e))) => {
                    log::warn!(
                        "the server refused the batch script ({e:?}): calls are no longer merged"
                    );
                    self.unmergeable.store(true, Ordering::Relaxed);
                }
                _ => {}
            }
            answers.answer(entry, Outcome::Replies(replies));
        }
        if unloaded.is_empty() {
            return Some(held);
        }
        // Loads the batch script (a refusal stops this pool's merging), and sends those calls
        // again as they were, unmerged (each loads its own script if it must).
        let mut bytes = MERGER.load_command();
        let mut entries = vec![Entry {
            replies: 1,
            target: Target::Load,
            bytes: 0,
            op: None,
        }];
        for mut entry in unloaded {
            let Target::Merged(merged) = entry.take_target() else {
                continue;
            };
            bytes.extend_from_slice(&merged.calls);
            entries.extend(merged.jobs.into_iter().map(|job| Entry {
                replies: 1,
                target: Target::Job(job),
                bytes: 0,
                op: None,
            }));
        }
        let held = self.send_on(pool, held, &bytes, &mut entries, answers)?;
        self.read(pool, held, entries, answers)
    }
}

/// The keys to delete with this write: all that wait, once there are enough of them.
fn take_doomed(queue: &mut Queue) -> Vec<String> {
    if queue.doomed.len() >= MIN_DOOMED {
        std::mem::take(&mut queue.doomed)
    } else {
        Vec::new()
    }
}

/// A connection for one call whose commands go through the pool's [`Batcher`]. A command
/// that was not sent (or whose connection broke) fails with a stand-in error; the failure
/// itself is kept for [`Shared::failure`], and every later command fails the same way.
pub(crate) struct Shared<'a> {
    pool: &'a dyn Lender,
    batcher: &'a Batcher,
    failure: Option<(Error, bool)>,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(pool: &'a dyn Lender, batcher: &'a Batcher) -> Shared<'a> {
        Shared {
            pool,
            batcher,
            failure: None,
        }
    }

    /// Why a command of this call was not sent, and whether it may have run.
    pub(crate) fn failure(&mut self) -> Option<(Error, bool)> {
        self.failure.take()
    }

    fn send(&mut self, cmd: &[u8], replies: usize) -> RedisResult<Vec<Value>> {
        if self.failure.is_some() {
            return Err(not_sent());
        }
        match self.batcher.send(self.pool, cmd, replies) {
            Outcome::Replies(values) => Ok(values),
            Outcome::Broken(e) => Err(e),
            Outcome::NotSent(err, ran) => {
                self.failure = Some((err, ran));
                Err(not_sent())
            }
        }
    }
}

/// The error a closure sees for a command that was not sent; the caller reports the real one.
fn not_sent() -> RedisError {
    RedisError::from((redis::ErrorKind::Client, "command not sent"))
}

impl ConnectionLike for Shared<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let mut values = self.send(cmd, 1)?;
        values
            .pop()
            .ok_or_else(|| RedisError::from((redis::ErrorKind::Client, "no reply")))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut values = self.send(cmd, offset + count)?;
        Ok(values.split_off(offset.min(values.len())))
    }

    fn get_db(&self) -> i64 {
        // Not asked by anything the crate sends; the database is set when connecting.
        0
    }

    fn check_connection(&mut self) -> bool {
        matches!(
            self.req_packed_command(&redis::cmd("PING").get_packed_command()),
            Ok(Value::SimpleString(_))
        )
    }

    fn is_open(&self) -> bool {
        self.failure.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Policy;

    fn job() -> Arc<Job> {
        Arc::new(Job {
            slot: Mutex::new(Slot::Waiting),
            thread: std::thread::current(),
        })
    }

    /// What `job`'s slot holds: "waiting", "replies", "broken", "not sent" or "lead".
    fn slot_of(job: &Job) -> &'static str {
        match &*job.slot.lock() {
            Slot::Waiting => "waiting",
            Slot::Lead(_) => "lead",
            Slot::Done(Outcome::Replies(_), _) => "replies",
            Slot::Done(Outcome::Broken(_), _) => "broken",
            Slot::Done(Outcome::NotSent(..), _) => "not sent",
        }
    }

    fn queued(job: &Arc<Job>) -> Entry {
        Entry {
            replies: 1,
            target: Target::Job(Arc::clone(job)),
            bytes: 0,
            op: None,
        }
    }

    #[test]
    fn a_lane_thread_that_unwinds_leaves_no_caller_asleep() {
        // One lane, taken; one call read into `answers`, one written and not read yet, one
        // queued for the next write. The lane's thread panics.
        let batcher = Batcher::new(1, false);
        let (answered, unread, waiting) = (job(), job(), job());
        batcher.queue.lock().leading = 1;
        batcher.queue.lock().entries.push(queued(&waiting));
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _lane = Lane::held(&batcher);
            let mut answers = Answers::default();
            answers.answer(queued(&answered), Outcome::Replies(vec![Value::Okay]));
            let _entries = [queued(&unread)];
            panic!("a bug in the lane's thread");
        }));
        assert!(unwound.is_err());
        assert_eq!(slot_of(&answered), "replies", "its reply still reaches it");
        assert_eq!(
            slot_of(&unread),
            "broken",
            "may have run: as a broken connection"
        );
        assert_eq!(
            slot_of(&waiting),
            "not sent",
            "no lane is left to send it: retried"
        );
        let queue = batcher.queue.lock();
        assert_eq!(queue.leading, 0, "the lane is free again");
        assert!(queue.entries.is_empty() && queue.bytes.is_empty());
    }

    #[test]
    fn a_lane_given_back_leaves_the_queue_to_the_lanes_still_taken() {
        let batcher = Batcher::new(2, false);
        let waiting = job();
        batcher.queue.lock().leading = 2;
        batcher.queue.lock().entries.push(queued(&waiting));
        drop(Lane::held(&batcher));
        assert_eq!(
            slot_of(&waiting),
            "waiting",
            "the other lane's thread sends it"
        );
        assert_eq!(batcher.queue.lock().leading, 1);
        // A lane passed on by the normal path changes nothing.
        Lane::held(&batcher).pass();
        assert_eq!(batcher.queue.lock().leading, 1);
        assert_eq!(batcher.queue.lock().entries.len(), 1);
    }

    #[test]
    fn calls_left_queued_by_an_unwound_lane_go_with_the_next_lane_taken() {
        use crate::testing::Server;
        let server = Server::start();
        let endpoint = super::super::endpoint::Fixed(server.info());
        let pool = super::super::pool::testing_pool(&server, endpoint, |b| b.batch_lanes(2));
        let batcher = pool.batcher.as_ref().expect("batching");
        // As a lane's thread leaves things when it unwinds while another lane is taken: one
        // lane counted, and a caller queued (this thread: its slot is read below).
        let stranded = job();
        {
            let mut queue = batcher.queue.lock();
            queue.leading = 1;
            redis::cmd("ECHO")
                .arg("stranded")
                .write_packed_command(&mut queue.bytes);
            queue.entries.push(queued(&stranded));
        }
        let mine: String = pool
            .run("k", Policy::Retried, |c| {
                redis::cmd("ECHO").arg("mine").query(c)
            })
            .expect("a call on the free lane");
        assert_eq!(mine, "mine");
        match &*stranded.slot.lock() {
            Slot::Done(Outcome::Replies(replies), _) => {
                assert_eq!(replies, &[Value::BulkString(b"stranded".to_vec())]);
            }
            _ => panic!("the queued call was not sent with the next write"),
        }
        let queue = batcher.queue.lock();
        assert_eq!(queue.leading, 1, "the lane taken is given back");
        assert!(queue.entries.is_empty() && queue.bytes.is_empty());
    }

    #[test]
    fn the_thread_named_is_woken_once_its_command_is_written_before_the_reply() {
        use crate::testing::Server;
        use std::time::{Duration, Instant};
        let server = Server::start();
        let endpoint = super::super::endpoint::Fixed(server.info());
        let pool = super::super::pool::testing_pool(&server, endpoint, |b| b);
        // This thread waits for a lock, and a release claims it.
        let handovers = crate::handover::HandOvers::default();
        let waiter = handovers.join(&Arc::from("l"), Arc::from("c:1"), 1000);
        waiter.blocked();
        let claim = handovers.claim(&Arc::from("l"), "c:2").expect("claimed");
        let woken = crate::interrupt::Interruption::current();
        let watcher = {
            let woken = Arc::clone(&woken);
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(10);
                while !woken.take_nudge() {
                    assert!(Instant::now() < until, "never woken");
                    std::thread::yield_now();
                }
                Instant::now()
            })
        };
        // A reply that takes a second to come.
        let reply: Option<(String, String)> = nudging_after_write(&claim.waiter, || {
            pool.run("k", Policy::Retried, |c| {
                redis::cmd("BLPOP").arg("nothing").arg(1.0).query(c)
            })
        })
        .expect("BLPOP");
        let returned = Instant::now();
        assert_eq!(reply, None);
        let woken_at = watcher.join().unwrap();
        assert!(
            returned - woken_at >= Duration::from_millis(500),
            "woken {:?} before the reply: as the command was written",
            returned - woken_at
        );
        assert!(!woken.take_nudge(), "woken once");
        drop(claim);
        // No claim, no wake-up: a waiter that stopped waiting may be in another wait.
        let _: () = nudging_after_write(&waiter, || {
            pool.run("k", Policy::Retried, |c| redis::cmd("PING").query(c))
        })
        .expect("PING");
        assert!(!woken.take_nudge(), "nobody woken without a claim");
    }

    #[test]
    fn wakes_wake_nobody_until_every_slot_is_filled() {
        // Guards against a caller that found its outcome early waking one whose slot was
        // not filled yet: that one parked again, and nobody was left to wake it.
        let wakes = Wakes::closed(vec![job(), job(), job()]);
        assert!(!wakes.wake_one());
        assert!(!wakes.wake_one());
        wakes.open();
        // The early attempts took no turn: each of the three is woken once.
        assert!(wakes.wake_one());
        assert!(wakes.wake_one());
        assert!(wakes.wake_one());
        assert!(!wakes.wake_one());
    }
}
