//! Hand-overs inside one client: the threads of this client blocked waiting for a lock, so
//! that a thread of the same client releasing its last hold can pass the hold to one of them
//! in the release's own script call (the hash field changes hands, the lease is set anew),
//! and wake it here, with no message and no second acquire. No I/O: the lock layer runs the
//! scripts; this is the bookkeeping both sides agree on under one mutex per waiter.
//!
//! A waiter joins a lock's queue after its first attempt failed, and takes part only while
//! it is blocked ([`State::Blocked`]): a releaser claims it ([`State::Claimed`]) for the
//! length of its call, and a waiter that wakes meanwhile (a message, its deadline, an
//! interrupt) waits for that call's outcome before it attempts or leaves, so that it never
//! acquires by itself a lock that is being handed to it, and never leaves one that was.
//!
//! Other clients (other processes, Java peers) are not starved: after [`MAX_PASSES`] passes
//! in a row the next release of that lock goes to everyone, as a release without local
//! waiters does.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::interrupt::Interruption;

/// The most passes of one lock inside this client in a row; the release after them
/// publishes, so waiters elsewhere compete. A waiter elsewhere waits at most this many local
/// holds longer than it would without passing. Eight: a pass saves a round trip and a
/// wake-up (about half of a hand-over's time), so one release in nine paying the full
/// hand-over costs a client whose threads take turns about 5% of that saving, while the
/// starvation bound stays a handful of holds.
pub(crate) const MAX_PASSES: u32 = 8;

/// How long a waiter waits for a releaser's call on it to end at most, before it goes on as
/// if the call failed (the releaser's call is itself bounded by the response timeout and
/// retries; this only keeps a waiter from hanging on a releaser that vanished).
const CLAIM_PATIENCE: Duration = Duration::from_secs(120);

/// How long a claimed waiter polls for the releaser's call to end before it sleeps on it:
/// about a round trip to a server nearby. A call that ends within this saves the waiter a
/// second wake-up; one that takes longer (a server far away) costs it this much CPU, and the
/// hand-over takes as long as it would have.
const CLAIM_SPIN: Duration = Duration::from_micros(100);

/// Where one waiter stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    /// Between its attempts, blocked or about to block: a releaser may claim it.
    Blocked,
    /// Running an attempt of its own.
    Attempting,
    /// A releaser's hand-over call naming it is in flight.
    Claimed,
    /// The hold was passed to it by a call sent at this instant (its lease starts then).
    Given(Instant),
    /// A hand-over call naming it lost its reply: it may or may not have run. The waiter
    /// settles it by sending the same call again (it is idempotent: see `lua/lock_unlock.lua`)
    /// for the releaser `from`, who expected to leave no hold; the call was first sent `at`,
    /// with the unlock latch `latch` (empty for a kind without one).
    Doubt {
        from: Arc<str>,
        at: Instant,
        latch: String,
    },
    /// Left the queue.
    Left,
}

/// One waiting thread of this client.
pub(crate) struct Waiter {
    /// The waiter's owner id, the field a hand-over writes.
    pub(crate) owner: Arc<str>,
    /// The lease, in ms, a hand-over sets for it.
    pub(crate) lease_ms: u64,
    state: Mutex<State>,
    changed: Condvar,
    /// The waiting thread's wake slot (see [`Interruption::nudge`]).
    thread: Arc<Interruption>,
}

impl Waiter {
    /// Before an attempt of its own: waits out a claim, then takes a hold passed to it or a
    /// call to settle (both leave it [`State::Attempting`] too, out of reach of releasers).
    pub(crate) fn begin_attempt(&self) -> State {
        let mut state = self.settled();
        let was = std::mem::replace(&mut *state, State::Attempting);
        debug_assert!(was != State::Left, "a waiter attempts after it left");
        was
    }

    /// After an attempt that did not acquire: a releaser may claim it again.
    pub(crate) fn blocked(&self) {
        let mut state = self.state.lock();
        if *state == State::Attempting {
            *state = State::Blocked;
        }
    }

    /// Wakes the waiting thread while a releaser's call on it is in flight (the releaser's
    /// command was just written: see `Backend::run_written`), so that its wake-up
    /// overlaps the round trip instead of following it. Nothing once the claim is over (a
    /// waiter that stopped waiting for it may be in another wait by now).
    pub(crate) fn wake_early(&self) {
        let state = self.state.lock();
        if *state == State::Claimed {
            self.thread.nudge();
        }
    }

    /// The state once no claim is in flight. A claimed waiter is woken while the releaser's
    /// call runs (see [`wake_early`](Self::wake_early)): it polls for up to [`CLAIM_SPIN`]
    /// before it sleeps, so that a call that ends meanwhile costs no second wake-up.
    fn settled(&self) -> parking_lot::MutexGuard<'_, State> {
        let mut state = self.state.lock();
        if *state == State::Claimed {
            let spin_until = Instant::now() + CLAIM_SPIN;
            loop {
                let more = parking_lot::MutexGuard::unlocked(&mut state, || {
                    std::thread::yield_now();
                    Instant::now() < spin_until
                });
                if !more || *state != State::Claimed {
                    break;
                }
            }
        }
        let until = Instant::now() + CLAIM_PATIENCE;
        while *state == State::Claimed {
            if self.changed.wait_until(&mut state, until).timed_out() {
                log::warn!(
                    "waiter {} gave up waiting for a hand-over call to end",
                    self.owner
                );
                *state = State::Attempting;
            }
        }
        state
    }

    /// Ends a claim: the state, then the nudge, under the state's lock, so that a waiter that
    /// sees the outcome (and leaves, clearing its nudge) was nudged already: no nudge is left
    /// over to wake the thread's next wait for nothing.
    fn resolve(&self, to: State) -> bool {
        let mut state = self.state.lock();
        if *state != State::Claimed {
            return false;
        }
        *state = to;
        self.thread.nudge();
        drop(state);
        self.changed.notify_all();
        true
    }
}

/// A releaser's claim on a waiter: resolved as given, not given or in doubt; not given if
/// dropped unresolved.
pub(crate) struct Claim {
    pub(crate) waiter: Arc<Waiter>,
    queues: Arc<Queues>,
    name: Arc<str>,
    done: bool,
}

impl Claim {
    /// The hand-over call sent at `sent_at` ran: the waiter holds the lock. False if the
    /// waiter had stopped waiting for the call (see [`Waiter::begin_attempt`]): the caller
    /// gives the hold back.
    #[must_use]
    pub(crate) fn given(mut self, sent_at: Instant) -> bool {
        self.done = true;
        self.queues.count_pass(&self.name);
        self.waiter.resolve(State::Given(sent_at))
    }

    /// The call lost its reply (and its retry): the waiter settles it (see [`State::Doubt`]).
    /// False if the waiter had stopped waiting for the call: the caller settles it.
    #[must_use]
    pub(crate) fn doubt(mut self, from: Arc<str>, at: Instant, latch: String) -> bool {
        self.done = true;
        self.waiter.resolve(State::Doubt { from, at, latch })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            // Not passed: the waiter goes on waiting (the release that follows wakes it),
            // or, woken by the call already, attempts once by itself.
            let mut state = self.waiter.state.lock();
            if *state == State::Claimed {
                *state = State::Blocked;
            }
            self.waiter.changed.notify_all();
        }
    }
}

/// One lock's waiters, and its run of passes. Kept while either is there: the waiter passed
/// to leaves at once, and the run must outlast it (two threads taking turns leave the queue
/// empty between passes).
#[derive(Default)]
struct Queue {
    waiters: VecDeque<Arc<Waiter>>,
    /// Passes of this lock in a row: reset by a release of it that passes nothing.
    passes: u32,
}

impl Queue {
    fn is_unused(&self) -> bool {
        self.waiters.is_empty() && self.passes == 0
    }
}

#[derive(Default)]
struct Queues {
    by_name: Mutex<HashMap<Arc<str>, Queue>>,
    /// How many names have a queue: a release finds none without the lock.
    names: AtomicUsize,
}

impl Queues {
    fn count_pass(&self, name: &str) {
        if let Some(queue) = self.by_name.lock().get_mut(name) {
            queue.passes += 1;
        }
    }
}

/// This client's waiting threads, per lock name.
#[derive(Default)]
pub(crate) struct HandOvers {
    queues: Arc<Queues>,
}

impl HandOvers {
    /// The calling thread, owner `owner`, waits for the lock `name` (its first attempt
    /// failed): it joins the lock's queue, attempting (it blocks after [`Waiter::blocked`]).
    pub(crate) fn join(&self, name: &Arc<str>, owner: Arc<str>, lease_ms: u64) -> Arc<Waiter> {
        let waiter = Arc::new(Waiter {
            owner,
            lease_ms,
            state: Mutex::new(State::Attempting),
            changed: Condvar::new(),
            thread: Interruption::current(),
        });
        let mut queues = self.queues.by_name.lock();
        let queue = queues.entry(Arc::clone(name)).or_default();
        queue.waiters.push_back(Arc::clone(&waiter));
        self.queues.names.store(queues.len(), Ordering::SeqCst);
        waiter
    }

    /// Leaves the queue (a wait that ended, however): waits out a claim, and returns what the
    /// waiter was left with, [`State::Given`] or [`State::Doubt`] being the caller's to take
    /// or give back.
    pub(crate) fn leave(&self, name: &str, waiter: &Arc<Waiter>) -> State {
        let was = {
            let mut state = waiter.settled();
            std::mem::replace(&mut *state, State::Left)
        };
        let mut queues = self.queues.by_name.lock();
        if let Some(queue) = queues.get_mut(name) {
            if let Some(at) = queue.waiters.iter().position(|w| Arc::ptr_eq(w, waiter)) {
                queue.waiters.remove(at);
            }
            if queue.is_unused() {
                queues.remove(name);
                self.queues.names.store(queues.len(), Ordering::SeqCst);
            }
        }
        // A nudge for this wait that it did not block for would wake the thread's next one.
        waiter.thread.take_nudge();
        was
    }

    /// A release of the last hold of `name` by this client: claims the longest-waiting
    /// blocked waiter other than `releaser`, unless the lock was passed [`MAX_PASSES`] times
    /// in a row (then, as when nobody waits here, the release goes to everyone, and the count
    /// starts again).
    pub(crate) fn claim(&self, name: &Arc<str>, releaser: &str) -> Option<Claim> {
        // A waiter that joins after this read was not blocked when the release began: it
        // attempts after it, or is woken by its message.
        if self.queues.names.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut queues = self.queues.by_name.lock();
        let queue = queues.get_mut(name)?;
        if queue.passes >= MAX_PASSES {
            queue.passes = 0;
            return None;
        }
        for waiter in &queue.waiters {
            if &*waiter.owner == releaser {
                continue;
            }
            let mut state = waiter.state.lock();
            if *state == State::Blocked {
                *state = State::Claimed;
                drop(state);
                return Some(Claim {
                    waiter: Arc::clone(waiter),
                    queues: Arc::clone(&self.queues),
                    name: Arc::clone(name),
                    done: false,
                });
            }
        }
        queue.passes = 0;
        if queue.is_unused() {
            queues.remove(name);
            self.queues.names.store(queues.len(), Ordering::SeqCst);
        }
        None
    }

    /// How many threads of this client wait for `name` (tests).
    #[cfg(test)]
    pub(crate) fn waiting(&self, name: &str) -> usize {
        self.queues
            .by_name
            .lock()
            .get(name)
            .map_or(0, |q| q.waiters.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> Arc<str> {
        Arc::from("l")
    }

    #[test]
    fn only_a_blocked_waiter_is_claimed_and_the_oldest_first() {
        let h = HandOvers::default();
        let a = h.join(&name(), "c:1".into(), 1000);
        let b = h.join(&name(), "c:2".into(), 1000);
        assert!(h.claim(&name(), "c:9").is_none(), "both attempting");
        b.blocked();
        a.blocked();
        let claim = h.claim(&name(), "c:9").unwrap();
        assert_eq!(&*claim.waiter.owner, "c:1");
        let second = h.claim(&name(), "c:9").unwrap();
        assert_eq!(&*second.waiter.owner, "c:2");
        drop(second);
        assert_eq!(
            b.begin_attempt(),
            State::Blocked,
            "an unresolved claim gives it back"
        );
        let at = Instant::now();
        assert!(claim.given(at));
        assert_eq!(a.begin_attempt(), State::Given(at));
        assert_eq!(h.leave("l", &a), State::Attempting);
        assert_eq!(h.leave("l", &b), State::Attempting);
        assert_eq!(h.waiting("l"), 0);
    }

    #[test]
    fn a_releaser_never_claims_its_own_owner() {
        let h = HandOvers::default();
        let a = h.join(&name(), "c:1".into(), 1000);
        a.blocked();
        assert!(h.claim(&name(), "c:1").is_none());
        assert!(h.claim(&name(), "c:2").is_some());
    }

    #[test]
    fn the_release_after_max_passes_goes_to_everyone() {
        // Two threads taking turns: each pass goes to a waiter that joined after the last
        // one left, so the run must outlast the queue's waiters.
        let h = HandOvers::default();
        for turn in 0..MAX_PASSES {
            let w = h.join(&name(), format!("c:{}", turn % 2 + 1).into(), 1000);
            w.blocked();
            let releaser = format!("c:{}", (turn + 1) % 2 + 1);
            assert!(h.claim(&name(), &releaser).unwrap().given(Instant::now()));
            assert!(matches!(h.leave("l", &w), State::Given(_)));
        }
        let w = h.join(&name(), "c:1".into(), 1000);
        w.blocked();
        assert!(
            h.claim(&name(), "c:2").is_none(),
            "the ninth goes to everyone"
        );
        assert!(
            h.claim(&name(), "c:2").is_some(),
            "and the count starts again"
        );
    }

    #[test]
    fn a_queue_goes_once_nobody_waits_and_no_run_is_counted() {
        let h = HandOvers::default();
        let w = h.join(&name(), "c:1".into(), 1000);
        w.blocked();
        assert!(h.claim(&name(), "c:2").unwrap().given(Instant::now()));
        assert!(matches!(h.leave("l", &w), State::Given(_)));
        assert_eq!(
            h.queues.by_name.lock().len(),
            1,
            "the run outlasts the waiter"
        );
        assert!(h.claim(&name(), "c:1").is_none(), "nobody waits: published");
        assert_eq!(h.queues.names.load(Ordering::SeqCst), 0);
        assert!(h.queues.by_name.lock().is_empty());
    }

    #[test]
    fn a_waiter_that_stopped_waiting_for_a_claim_is_not_given_the_lock() {
        let h = HandOvers::default();
        let w = h.join(&name(), "c:1".into(), 1000);
        w.blocked();
        let claim = h.claim(&name(), "c:2").unwrap();
        claim.waiter.wake_early();
        assert!(w.thread.take_nudge(), "woken while claimed");
        // As if its patience ran out: it attempts on its own.
        *w.state.lock() = State::Attempting;
        claim.waiter.wake_early();
        assert!(!claim.given(Instant::now()), "the releaser gives it back");
        assert!(!w.thread.take_nudge(), "and nudges nobody");
    }

    #[test]
    fn a_waiter_leaving_during_a_claim_waits_for_its_outcome() {
        let h = Arc::new(HandOvers::default());
        let a = h.join(&name(), "c:1".into(), 1000);
        a.blocked();
        let claim = h.claim(&name(), "c:2").unwrap();
        let leaving = {
            let (h, a) = (Arc::clone(&h), Arc::clone(&a));
            std::thread::spawn(move || h.leave("l", &a))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!leaving.is_finished(), "blocked by the claim");
        let at = Instant::now();
        assert!(claim.doubt("c:2".into(), at, String::new()));
        assert_eq!(
            leaving.join().unwrap(),
            State::Doubt {
                from: "c:2".into(),
                at,
                latch: String::new()
            }
        );
        assert_eq!(h.waiting("l"), 0);
        assert!(h.claim(&name(), "c:2").is_none());
    }
}
