//! The algorithm [`MultiLock`](crate::MultiLock) and [`RedLock`](crate::RedLock) share: the
//! members, how many must be held, and the rounds that take them. Each round tries every
//! member without waiting; a round that falls short releases what it took and then waits on
//! one busy member only, so two multi-locks over the same locks in different orders cannot
//! deadlock: a MultiLock until its deadline, a RedLock a slice of it before the next round.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::multi_guard::MultiLockGuard;
use crate::time::{check_deadline, check_wait};

/// The members, how many must be held, and how long one member's call may take.
#[derive(Clone)]
pub(super) struct Members {
    pub(super) locks: Vec<Lock>,
    pub(super) quorum: usize,
    pub(super) node_timeout: Option<Duration>,
}

/// One round's holds and failures, by member index.
struct Round {
    holds: Vec<Option<LockGuard>>,
    failures: Vec<(usize, Error)>,
    busy: Option<usize>,
    busy_count: usize,
}

/// How many rounds in a row may reach the quorum too late (validity gone) before a wait
/// without deadline gives up: the lease is then too short for the nodes' latency.
const STALE_ROUNDS: u32 = 3;

/// How long a RedLock's round waits on a busy member when its caller has no deadline
/// (Redisson's `lockInterruptibly`: 1.5 s per lock, over as many locks).
const NO_DEADLINE_SLICE: Duration = Duration::from_millis(1500);

impl Members {
    pub(super) fn new(locks: Vec<Lock>, quorum: impl Fn(usize) -> usize) -> Result<Members> {
        if locks.is_empty() {
            return Err(Error::invalid("a multi-lock needs at least one lock"));
        }
        let quorum = quorum(locks.len());
        Ok(Members {
            locks,
            quorum,
            node_timeout: None,
        })
    }

    /// Bounds every call of every member (connecting, and each reply) by `timeout`: each
    /// member becomes its lock bounded so (see `Lock::bounded`), guards and releases included.
    pub(super) fn bound(&mut self, timeout: Duration) {
        self.node_timeout = Some(timeout);
        for lock in &mut self.locks {
            *lock = lock.bounded(timeout);
        }
    }

    fn label(&self, i: usize) -> String {
        format!("#{i} `{}`", self.locks[i].key())
    }

    fn check(&self, deadline: Option<Instant>) -> Result<()> {
        deadline.map_or(Ok(()), check_deadline)
    }

    /// Blocks until the quorum is held.
    pub(super) fn lock(&self) -> Result<MultiLockGuard> {
        match self.acquire(None)? {
            Some(guard) => Ok(guard),
            None => unreachable!("a wait without deadline only ends in a guard"),
        }
    }

    /// Waits at most `wait` in all.
    pub(super) fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        check_wait(wait)?;
        self.acquire(Some(Instant::now() + wait))
    }

    /// The one acquire path (see the module docs); `deadline` `None` waits forever.
    pub(super) fn acquire(&self, deadline: Option<Instant>) -> Result<Option<MultiLockGuard>> {
        self.check(deadline)?;
        let n = self.locks.len();
        let mut wait_on: Option<usize> = None;
        let mut stale_rounds = 0;
        loop {
            let mut round = Round {
                holds: (0..n).map(|_| None).collect(),
                failures: Vec::new(),
                busy: None,
                busy_count: 0,
            };
            if let Some(i) = wait_on.take() {
                let lock = &self.locks[i];
                let waited = match self.wait_until(deadline) {
                    None => lock.lock().map(Some),
                    Some(until) => lock.try_lock_until(until),
                };
                match waited {
                    Ok(Some(guard)) => round.holds[i] = Some(guard),
                    Ok(None) if deadline.is_none_or(|d| Instant::now() < d) => {
                        // The slice is over: another round, over every member.
                    }
                    Ok(None) => return Ok(None),
                    // Not a node's failure: the caller asked to stop, or the wait was chosen to
                    // end a deadlock (nothing of this multi-lock is held yet).
                    Err(e) if e.is_interrupted() || e.is_deadlock() => return Err(e),
                    Err(e) => round.failures.push((i, e)),
                }
            }
            for i in 0..n {
                if round.failures.len() + round.busy_count > n - self.quorum {
                    break; // the quorum is out of reach this round
                }
                if round.holds[i].is_some() || round.failures.iter().any(|(j, _)| *j == i) {
                    continue;
                }
                match self.locks[i].try_lock() {
                    Ok(Some(guard)) => round.holds[i] = Some(guard),
                    Ok(None) => {
                        round.busy.get_or_insert(i);
                        round.busy_count += 1;
                    }
                    Err(e) => round.failures.push((i, e)),
                }
            }
            let acquired = round.holds.iter().flatten().count();
            if acquired >= self.quorum {
                let guard = MultiLockGuard::new(round.holds, self.quorum);
                if guard.validity() > Duration::ZERO {
                    return Ok(Some(guard));
                }
                log::debug!(
                    "multi-lock {}: quorum reached after the leases' validity ran out; retrying",
                    self.label(0)
                );
                drop(guard); // releases every hold, logging failures
                stale_rounds += 1;
                let out_of_time =
                    deadline.map_or(stale_rounds >= STALE_ROUNDS, |d| Instant::now() >= d);
                if out_of_time {
                    return Err(Error::Timeout(format!(
                        "multi-lock {}: the quorum was reached only after the leases' validity \
                         ran out ({stale_rounds} times): the lease is too short for the \
                         nodes' latency",
                        self.label(0)
                    )));
                }
                continue;
            }
            stale_rounds = 0;
            self.release_round(&mut round);
            if round.failures.len() > n - self.quorum {
                return Err(self.too_many_failures(acquired, round.failures));
            }
            // Short of the quorum and within the failures it tolerates: some member was busy.
            let Some(busy) = round.busy else {
                return Err(self.too_many_failures(acquired, round.failures));
            };
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            wait_on = Some(busy);
        }
    }

    /// How long a round that fell short waits on one busy member. A MultiLock needs every
    /// member: the caller's deadline (`None`: for ever). A RedLock needs only a majority, and
    /// the busy member may stay busy while others are free: a slice of the time left, after
    /// which another round tries every member, as Redisson's `RedissonRedLock` waits
    /// (`calcLockWaitTime`: the time left over the number of locks, at least 1 ms; without a
    /// deadline, 1.5 s).
    fn wait_until(&self, deadline: Option<Instant>) -> Option<Instant> {
        if self.quorum == self.locks.len() {
            return deadline;
        }
        let now = Instant::now();
        let slice = deadline.map_or(NO_DEADLINE_SLICE, |d| {
            (d.saturating_duration_since(now) / self.locks.len() as u32)
                .max(Duration::from_millis(1))
        });
        let until = now + slice;
        Some(deadline.map_or(until, |d| until.min(d)))
    }

    /// Releases what a round that fell short took. A member whose attempt failed is not
    /// released here (an unlock without a guard could release another hold of this
    /// thread's): if its acquire ran before its reply was lost, the raw lock's settle gives
    /// that hold back (see `settle.rs`), before this thread's next call on the member or on
    /// the watchdog thread.
    fn release_round(&self, round: &mut Round) {
        for (i, hold) in round.holds.iter_mut().enumerate() {
            if let Some(guard) = hold.take() {
                if let Err(e) = guard.unlock() {
                    log::debug!(
                        "releasing {} after a short round failed: {e}",
                        self.label(i)
                    );
                }
            }
        }
    }

    fn too_many_failures(&self, acquired: usize, failures: Vec<(usize, Error)>) -> Error {
        if self.quorum == self.locks.len() {
            // A MultiLock: every member is needed, so the first failure is the answer.
            if let Some((_, e)) = failures.into_iter().next() {
                return e;
            }
            unreachable!("too many failures means at least one");
        }
        Error::NoQuorum {
            name: self.locks[0].key().to_owned(),
            acquired,
            wanted: self.quorum,
            nodes: self.locks.len(),
            failures: failures
                .into_iter()
                .map(|(i, e)| (self.label(i), e))
                .collect(),
        }
    }

    /// Gives every member the explicit `lease` ([`Lock::with_lease`]).
    pub(super) fn with_lease(&mut self, lease: Duration) {
        let locks = std::mem::take(&mut self.locks);
        self.locks = locks.into_iter().map(|l| l.with_lease(lease)).collect();
    }

    /// Gives every member the maximum hold time `max_hold` ([`Lock::with_max_hold`]).
    pub(super) fn with_max_hold(&mut self, max_hold: Duration) {
        let locks = std::mem::take(&mut self.locks);
        self.locks = locks
            .into_iter()
            .map(|l| l.with_max_hold(max_hold))
            .collect();
    }
}
