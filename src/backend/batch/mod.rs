//! Commands from many threads sharing round trips on one pool's connections.
//!
//! A call runs on a `Shared` connection (`shared.rs`): each command it sends is handed to the pool's
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
//!
//! A caller may name something to run once its command is written, while the reply is still
//! to come ([`Batcher::send`]'s `written`): the backend runs it and knows nothing of what it
//! does (the lock layer wakes a thread it hands a lock to, so that the wake-up overlaps the
//! round trip).
//!
//! - `answers.rs`: who takes the replies of a write, and how the callers are woken.

mod answers;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use redis::Value;

use super::checkout::{Held, Lender};
use super::merge::{Merger, MERGER};
use crate::error::Error;
pub(crate) use answers::Outcome;
use answers::{Answers, Entry, Job, Merged, Slot, Target, WAKES_EACH};

/// Most keys kept for [`Batcher::delete_later`]; more are left to expire by themselves.
const MAX_DOOMED: usize = 4096;
/// Keys to delete go out once this many wait (one `DEL` for many costs the server little
/// more than one command); fewer are left for a later write, or to expire.
const MIN_DOOMED: usize = 16;

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

/// Whose call a lane's thread reads besides those of others.
enum Own<'a> {
    /// Its own, which it writes (a [`Target::Mine`] entry): the hook runs once it is out.
    Mine(Option<&'a dyn Fn()>),
    /// Its queued call, written by another thread, whose slot it reads next.
    Queued(&'a Arc<Job>),
}

/// A batch going to the caller who takes over the lane: written on `held`, or (after the
/// lane's connection broke) still to write, as `bytes`, on a connection the caller gets.
pub(super) struct Trip {
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
    /// `written` runs once the command is written by this thread (not when another thread
    /// writes it with its own).
    pub(crate) fn send(
        &self,
        pool: &dyn Lender,
        cmd: &[u8],
        replies: usize,
        written: Option<&dyn Fn()>,
    ) -> Outcome {
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
                self.drive(pool, lane, None, cmd, vec![mine], Own::Mine(written))
            } else {
                let (mut bytes, mut entries) = self.deletions(doomed);
                bytes.extend_from_slice(&stranded_bytes);
                entries.extend(stranded);
                bytes.extend_from_slice(cmd);
                entries.push(mine);
                self.drive(pool, lane, None, &bytes, entries, Own::Mine(written))
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
                    self.drive(
                        pool,
                        Lane::held(self),
                        held,
                        &bytes,
                        entries,
                        Own::Queued(&job),
                    );
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
    /// the callers it has outcomes for (but this thread's own queued call: see [`Own`]).
    /// Returns the outcome of a [`Target::Mine`] entry.
    fn drive(
        &self,
        pool: &dyn Lender,
        lane: Lane<'_>,
        mut held: Option<Held>,
        bytes: &[u8],
        mut entries: Vec<Entry>,
        own: Own<'_>,
    ) -> Option<Outcome> {
        let (me, written) = match own {
            Own::Mine(written) => (None, written),
            Own::Queued(job) => (Some(job), None),
        };
        let mut answers = Answers::default();
        if held.is_none() {
            held = self.write(pool, bytes, &mut entries, &mut answers);
            if let (Some(_), Some(written)) = (&held, written) {
                written();
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
