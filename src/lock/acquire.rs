//! The acquire of every lock kind: [`Lock::lock`] and its timed and `try_` forms, and the
//! one path they take (try, wait on the lock's channel, leave a fair queue on giving up),
//! which ends in a [`LockGuard`].

use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backoff::Pacer;
use crate::deadlock::Checks;
use crate::deadlock::Mode as WaitMode;
use crate::error::{Error, Result};
use crate::handover::Waiter;
use crate::hold::{HoldEvent, Ordered};
use crate::lock::guard::{thread_holds_any, LockGuard};
use crate::lock::handle::Lock;
use crate::lock::kind::{Queueing, Waiting};
use crate::lock::owner::Ownership;
use crate::lock::priority::PRIORITY_REFRESH;
use crate::lock::raw::Attempt;
use crate::pubsub::Active;
use crate::pubsub::{wait, Channel, Tried};
use crate::time::{check_deadline, check_duration, check_wait, millis};
use crate::trace;

impl<O: Ownership> Lock<O> {
    /// Acquires the lock, blocking the calling thread until it is held.
    ///
    /// The thread waits for the unlock message on the lock's channel (no polling); each wait
    /// is bounded by the lock's remaining lease. A message lost with the client's pub/sub
    /// connection costs at most the time to notice the loss: a connection that breaks, or
    /// that stays silent past its check
    /// ([`pubsub_ping_interval`](crate::ConfigBuilder::pubsub_ping_interval): within 4 s
    /// by default), is made anew and every waiter on it tries again.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (empty name, bad lease or max hold), [`Error::WrongType`] (the
    /// key is not a lock), [`Error::Connection`] or [`Error::Timeout`] (Redis unreachable);
    /// [`Error::AlreadyHeld`] at once if the lock is not reentrant and its owner holds it;
    /// [`Error::Deadlock`] when the wait is one of a cycle of waits and is chosen to end it
    /// (see the guide's [deadlocks chapter](crate::_guide::deadlocks)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock("reports").lock()?;
    /// assert_eq!(client.lock("reports").hold_count()?, 1);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn lock(&self) -> Result<LockGuard<O>> {
        match self.acquire(None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("a wait without deadline only ends in a guard"),
        }
    }

    /// Acquires the lock if it is free (or already held by its owner: this thread, or the
    /// lock's [`LockOwner`](crate::LockOwner), unless the lock is not [reentrant](Self::is_reentrant)); never
    /// waits.
    ///
    /// Returns `Ok(None)` when another owner holds it.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// match client.lock("nightly-job").try_lock()? {
    ///     Some(_guard) => { /* run the job */ }
    ///     None => println!("another worker runs it"),
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_lock(&self) -> Result<Option<LockGuard<O>>> {
        self.acquire(Some(Instant::now()))
    }

    /// Acquires the lock, waiting at most `wait`. Returns `Ok(None)` if the wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year (a zero wait is one try); otherwise
    /// as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(_guard) = client.lock("cache-refresh").try_lock_for(Duration::from_secs(3))? {
    ///     // refresh
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard<O>>> {
        check_wait(wait)?;
        self.try_lock_until(Instant::now() + wait)
    }

    /// Acquires the lock, waiting at most until `deadline` (a deadline in the past makes one
    /// attempt). Returns `Ok(None)` if the deadline passed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let guard = client.lock("a").try_lock_until(deadline)?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LockGuard<O>>> {
        check_deadline(deadline)?;
        self.acquire(Some(deadline))
    }

    /// The one acquire path: tries, then waits on the lock's channel until `deadline`
    /// (forever when `None`), through the one wait function. Every successful path ends in
    /// [`LockGuard::new`]. A fair lock's waiter that gives up (or fails, or is interrupted)
    /// leaves the queue before returning. A kind with a back-off (spin) waits on no channel:
    /// each retry comes after its next delay, or when the lease runs out if sooner.
    #[track_caller]
    pub(super) fn acquire(&self, deadline: Option<Instant>) -> Result<Option<LockGuard<O>>> {
        self.acquire_capped(deadline, None)
    }

    /// [`acquire`](Self::acquire) for a hold that must end by `cap` (a condition wait's hold
    /// taken again, whose watchdog entry is parked, so that [`lease_for`](Self::lease_for)
    /// cannot find its cap): each attempt sets a lease that ends by `cap`, and no release
    /// passes the lock to it (a pass sets the lease the waiter asked for when it joined).
    #[track_caller]
    pub(super) fn acquire_capped(
        &self,
        deadline: Option<Instant>,
        cap: Option<Instant>,
    ) -> Result<Option<LockGuard<O>>> {
        self.raw.check_name()?;
        if let Some(lease) = self.lease {
            check_duration("lease", lease)?;
        }
        if let Some(max_hold) = self.max_hold {
            check_duration("max_hold", max_hold)?;
        }
        let owner = self.owner();
        // An earlier acquire whose reply was lost may have taken a hold: given back first, so
        // that this one's count is the guards'.
        self.raw.settle_first(&owner)?;
        let waiting = self.raw.waiting(&owner);
        let pacer = match &waiting {
            Waiting::Channel(_) => None,
            Waiting::Backoff(backoff) => {
                backoff.check()?;
                Some(Pacer::new(*backoff))
            }
        };
        let channel = match &waiting {
            // A waiter with a priority hears every release: its turn may come with any.
            Waiting::Channel(name) if self.raw.key.priority.is_some() => Channel::lock_every(name),
            Waiting::Channel(name) => Channel::lock(name),
            Waiting::Backoff(_) => Channel::none(),
        };
        let span = trace::Span::acquire(self.raw.kind.label().as_str(), self.key(), self.lease);
        let _in_span = span.enter();
        let at = Location::caller();
        Acquiring::new(self, owner, deadline, cap, pacer, at).run(channel, &span)
    }
}

/// One acquire in progress: its attempts, the wait between them, and what it leaves behind
/// until it ends. A caller that will wait may hold a place in a fair lock's queue (from its
/// first attempt), and a place in the client's hand-over queue (from its first busy
/// attempt); [`run`](Self::run) settles the hand-over as the wait ends, and the drop leaves
/// the lock's queue unless the lock was taken (or refused: a holder has no place), on every
/// exit.
struct Acquiring<'a, O: Ownership> {
    lock: &'a Lock<O>,
    owner: Arc<str>,
    deadline: Option<Instant>,
    /// The end of the hold when it is capped (see [`Lock::acquire_capped`]).
    cap: Option<Instant>,
    /// The lease asked for (the lock's, or the watchdog timeout).
    lease: Duration,
    /// Whether the caller waits if an attempt fails: only then does it join a queue.
    will_wait: bool,
    /// The delays of a kind that waits on no channel (spin).
    pacer: Option<Pacer>,
    /// Whether a release inside this client may hand this thread the lock.
    passable: bool,
    /// The thread's place in the client's hand-over queue, once it was busy.
    joined: Option<Arc<Waiter>>,
    attempts: u32,
    /// The guard, once an attempt (or a pass) got the lock, and its hold count.
    got: Option<LockGuard<O>>,
    held: u32,
    /// Whether a place in the lock's queue may be outstanding: cleared when the lock was
    /// taken or the acquire refused.
    queued: bool,
    started: Instant,
    /// The deadlock checks of a caller that waits, from its first busy attempt; their drop
    /// removes the wait's record.
    checks: Option<Checks>,
    /// The caller's source line (a lock-order record names it).
    at: &'static Location<'static>,
    /// Until the queue is left: a close lets that finish. A call that will not wait joins no
    /// queue, and a close does not wait for it.
    _active: Option<Active<'a>>,
}

impl<'a, O: Ownership> Acquiring<'a, O> {
    fn new(
        lock: &'a Lock<O>,
        owner: Arc<str>,
        deadline: Option<Instant>,
        cap: Option<Instant>,
        pacer: Option<Pacer>,
        at: &'static Location<'static>,
    ) -> Self {
        let raw = &lock.raw;
        let will_wait = deadline.is_none_or(|d| Instant::now() < d);
        // A thread waiting for a kind that passes: a release by another thread of this
        // client may hand it the lock (see `handover.rs`).
        let passable = O::ONE_THREAD
            && cap.is_none()
            && will_wait
            && raw.kind.passes_inside_client()
            && raw.key.bound.is_none()
            // A waiter with a priority is served by its queue's order, not its client's.
            && raw.key.priority.is_none();
        let dispatcher = &raw.key.client.inner.pubsub;
        Acquiring {
            lock,
            owner,
            deadline,
            cap,
            lease: lock.lease_or_default(),
            will_wait,
            pacer,
            passable,
            joined: None,
            attempts: 0,
            got: None,
            held: 0,
            queued: will_wait,
            started: Instant::now(),
            checks: None,
            at,
            _active: will_wait.then(|| dispatcher.active()),
        }
    }

    /// Attempts, waiting on `channel` between attempts, until the lock is taken or the
    /// deadline passes; then settles the hand-over queue and records the outcome in `span`.
    fn run(mut self, channel: Channel<'_>, span: &trace::Span) -> Result<Option<LockGuard<O>>> {
        let lock = self.lock;
        let dispatcher = &lock.raw.key.client.inner.pubsub;
        let deadline = self.deadline;
        let waited = wait(dispatcher, channel, deadline, &mut || self.attempt());
        let mut outcome = waited.map(|done| if done { self.got.take() } else { None });
        if let Some(waiter) = self.joined.take() {
            lock.leave_passing(&self.owner, &waiter, &mut outcome);
        }
        self.record(span, &outcome);
        let waited = self.started.elapsed();
        let event = match &outcome {
            Ok(Some(_)) => Some(HoldEvent::Acquired {
                waited,
                contended: self.attempts > 1,
                order: O::ONE_THREAD.then(|| Ordered {
                    read: lock.raw.kind.wait_mode() == WaitMode::Read,
                    waits: self.will_wait,
                    at: self.at,
                }),
            }),
            Ok(None) if self.will_wait => Some(HoldEvent::GaveUp {
                waited,
                timed_out: true,
            }),
            Err(Error::Deadlock { .. }) => Some(HoldEvent::Deadlock { waited }),
            // Interrupted or failed after its wait began: the wait ends here.
            Err(_) if self.attempts > 1 => Some(HoldEvent::GaveUp {
                waited,
                timed_out: false,
            }),
            _ => None,
        };
        if let Some(event) = event {
            lock.raw.emit(&self.owner, Instant::now(), event);
        }
        // Taken: no place is left. Refused (a non-reentrant kind that the owner holds): it
        // has none (taking the lock took it out, and the refusing script checks first).
        if matches!(outcome, Ok(Some(_)) | Err(Error::AlreadyHeld { .. })) {
            self.queued = false;
        }
        outcome
    }

    /// One attempt: a lock passed to this thread meanwhile, or the kind's acquire.
    fn attempt(&mut self) -> Result<Tried> {
        self.attempts += 1;
        let lock = self.lock;
        if self.attempts == 2 {
            log::debug!("waiting for `{}` (owner {})", lock.key(), self.owner);
            lock.raw.before_wait(&self.owner);
            lock.raw
                .emit(&self.owner, Instant::now(), HoldEvent::Waiting);
            // Only the waits of a thread that holds a lock are recorded: one that holds none is
            // in nobody's way. Not a `LockOwner`'s (its other threads may release what it
            // holds, so its wait is no edge of a cycle), nor a RedLock member's (its calls are
            // bounded by its node timeout, which a walk would not keep).
            let raw = &lock.raw;
            if O::ONE_THREAD && raw.key.bound.is_none() && thread_holds_any() {
                let mode = raw.kind.wait_mode();
                let client = &raw.key.client;
                let checks = Checks::new(client, &raw.key.name, &self.owner, mode, self.started);
                self.checks = Some(checks);
            }
        }
        let lease = match self.cap {
            Some(cap) => self
                .lease
                .min(cap.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => lock.lease_for(&self.owner, self.lease),
        };
        if let Some(waiter) = &self.joined {
            if let Some(sent_at) = lock.passed(waiter, &self.owner)? {
                self.held = 1;
                self.got = Some(LockGuard::new(
                    lock.clone(),
                    Arc::clone(&self.owner),
                    sent_at,
                    1,
                    None,
                ));
                return Ok(Tried::done());
            }
        }
        let sent_at = Instant::now();
        let attempt = match (
            lock.raw.acquire(&self.owner, lease, self.queueing())?,
            &lock.preempt,
        ) {
            (Attempt::Busy(_), Some(how)) => lock.raw.preempt_once(&self.owner, lease, how)?,
            (attempt, _) => attempt,
        };
        let tried = match attempt {
            Attempt::Acquired { count, token } => {
                self.held = count;
                self.got = Some(LockGuard::new(
                    lock.clone(),
                    Arc::clone(&self.owner),
                    sent_at,
                    count,
                    token,
                ));
                Tried::done()
            }
            // No expiry (a foreign key without TTL): re-check at the watchdog period.
            Attempt::Busy(ms) if ms < 0 => Tried::again(Some(
                self.paced(lock.raw.key.client.inner.config.watchdog_timeout),
            )),
            Attempt::Busy(ms) => Tried::again(Some(self.paced(Duration::from_millis(ms as u64)))),
            Attempt::Second { within, head } => {
                let tried = Tried::again(Some(self.paced(Duration::from_millis(within as u64))));
                // A head of this client is alive: its wake-up needs no second ear.
                let key = &lock.raw.key;
                let ours = head
                    .strip_prefix(key.client.id())
                    .is_some_and(|thread| thread.starts_with(':'));
                match lock.raw.kind.waiting(key, &head) {
                    Waiting::Channel(channel) if !ours => tried.overhearing(channel.into_owned()),
                    _ => tried,
                }
            }
            Attempt::AlreadyHeld => {
                return Err(Error::AlreadyHeld {
                    name: lock.key().to_owned(),
                })
            }
        };
        // A waiter with a priority renews its place at least this often.
        let tried = match lock.raw.key.priority {
            Some(_) if self.got.is_none() => tried.within_at_most(PRIORITY_REFRESH),
            _ => tried,
        };
        let tried = match &mut self.checks {
            Some(checks) if self.got.is_none() => {
                checks.check()?;
                match checks.until_next() {
                    Some(next) => tried.within_at_most(next),
                    None => tried,
                }
            }
            _ => tried,
        };
        // Busy: it waits, and a release here may pass it the lock until it attempts again
        // (an attempt that acquired leaves it attempting: out of reach).
        if self.passable && self.got.is_none() {
            let (name, owner) = (&lock.raw.key.name, &self.owner);
            self.joined
                .get_or_insert_with(|| {
                    let handovers = &lock.raw.key.client.inner.handovers;
                    handovers.join(name, Arc::clone(owner), millis(lease))
                })
                .blocked();
        }
        Ok(tried)
    }

    /// What this attempt asks of a fair lock's queue. The first attempt of a caller that will
    /// wait joins it; the later ones keep its place, taking back the head if a script removed
    /// it: only for an owner that is one thread (an owner waiting on two threads has one
    /// place, which the other call may have left), and not on the last attempt, at the
    /// deadline (it leaves next; a place taken back would only cut the deadlines behind it).
    fn queueing(&self) -> Queueing {
        if !self.will_wait {
            Queueing::No
        } else if self.attempts == 1 {
            Queueing::Join
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Queueing::No
        } else if O::ONE_THREAD {
            Queueing::Keep
        } else {
            Queueing::Join
        }
    }

    /// The wait before the next attempt: `ttl`, or sooner for a kind with a back-off.
    fn paced(&mut self, ttl: Duration) -> Duration {
        match &mut self.pacer {
            Some(pacer) => pacer.next_delay().min(ttl),
            None => ttl,
        }
    }

    /// The outcome in the acquire's span.
    fn record(&self, span: &trace::Span, outcome: &Result<Option<LockGuard<O>>>) {
        let elapsed = self.started.elapsed();
        match outcome {
            Ok(Some(_)) => span.acquired(self.held, elapsed),
            Ok(None) if self.will_wait => span.gave_up("timed_out", elapsed),
            Ok(None) => span.gave_up("busy", elapsed),
            Err(_) => span.gave_up("error", elapsed),
        }
    }
}

impl<O: Ownership> Drop for Acquiring<'_, O> {
    /// Leaves the lock's queue (a fair kind; other kinds have none) unless the lock was
    /// taken: a failed call may have queued the owner before its reply was lost, so on every
    /// other exit.
    fn drop(&mut self) {
        if !self.queued {
            return;
        }
        let lock = self.lock;
        if let Err(e) = lock.raw.leave(&self.owner) {
            log::debug!(
                "leaving the queue of `{}` (owner {}) failed: {e}; it is skipped once its \
                 deadline passes",
                lock.key(),
                self.owner
            );
        }
    }
}
