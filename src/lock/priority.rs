//! Waiters with a priority ([`Lock::with_priority`], and the semaphores' `with_priority`): the
//! queue they wait in (`lua/priority_common.lua`, used by `lua/lock_priority_acquire.lua` and
//! the semaphores' gates; a fair lock's waiters take their place in Redisson's queue by rank,
//! `lua/fair_priority_gate.lua`), its aging, the arguments of each, and what a waiter that
//! gives up leaves.

use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

use crate::error::Result;
use crate::keys;
use crate::lock::handle::Lock;
use crate::lock::key::LockKey;
use crate::lock::kind::Queueing;
use crate::lock::owner::Ownership;
use crate::scripts;
use crate::time::millis;

/// The highest priority a waiter may ask for ([`Lock::with_priority`]).
pub const MAX_PRIORITY: u32 = 1_000_000;

/// The aging step: a waiter's effective priority rises by one for each step it waits. A
/// waiter of priority `p` can be overtaken only by a waiter of priority `q > p` that joins less
/// than `(q - p)` steps after it.
pub const PRIORITY_AGING: Duration = Duration::from_secs(1);

/// How often a waiter with a priority attempts at the latest (renewing its place), whatever
/// its wait's bound.
pub(crate) const PRIORITY_REFRESH: Duration = Duration::from_secs(5);

/// How long a waiter's place outlives its last attempt: three refreshes. A waiter that
/// crashed holds the queue up for at most this.
pub(crate) const PLACE_KEPT: Duration = Duration::from_secs(15);

/// How long the ranks of a fair lock's waiters outlive the last acquire with a priority
/// (`lua/fair_priority_gate.lua`): the waiters' ages while waiters with a priority come and
/// go. Once gone, a waiter still queued is ranked again as if it joined when next seen.
const RANKS_KEPT: Duration = Duration::from_secs(600);

impl<O: Ownership> Lock<O> {
    /// This lock, whose waits (of [`lock`](Self::lock) and its timed forms) queue with
    /// `priority` among the waiters that have one: the highest effective priority is served
    /// first, where a waiter's effective priority is its priority plus one for each
    /// [`PRIORITY_AGING`] it has waited, so that no waiter starves: one of priority `p` is
    /// overtaken only by a waiter of priority `q > p` that joined less than `q - p` aging steps
    /// after it. On a plain lock, waiters without a priority (and Redisson's) do not queue:
    /// they take a free lock as they always did, so give every waiter of a lock a priority (0
    /// is the lowest) for the order to hold. See the guide's
    /// [revocation chapter](crate::_guide::revocation).
    ///
    /// Plain, non-reentrant, fenced and fair locks (a fair lock's waiter with a priority takes
    /// its place in Redisson's queue by rank, never before its head, and the waiters there
    /// without one count as priority 0 from when first seen); an acquire of another kind with
    /// a priority fails with [`Error::InvalidArgument`](crate::Error::InvalidArgument), as does
    /// a priority above [`MAX_PRIORITY`]. A priority never preempts a holder: only
    /// [`preempt`](Self::preempt) does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let urgent = client.lock("printer").with_priority(10);
    /// let _guard = urgent.lock()?; // served before the waiters of priority 0 queued
    /// # Ok(()) }
    /// ```
    pub fn with_priority(&self, priority: u32) -> Lock<O> {
        let mut lock = self.clone();
        lock.raw = std::sync::Arc::new(self.raw.prioritized(Some(priority)));
        lock
    }

    /// The priority this lock's waits queue with, if any.
    pub fn priority(&self) -> Option<u32> {
        self.raw.key.priority
    }
}

/// One attempt of `owner` with a priority on a plain lock (`token`: a fenced lock's counter).
pub(crate) fn acquire(
    lock: &LockKey,
    c: &mut dyn ConnectionLike,
    owner: &str,
    lease_ms: u64,
    queueing: Queueing,
    reentrant: bool,
    token: Option<&str>,
) -> RedisResult<Value> {
    let priority = lock.priority.unwrap_or(0);
    let mut call = scripts::LOCK_PRIORITY_ACQUIRE.prepare_invoke();
    call.key(&*lock.name)
        .key(keys::priority_queue(&lock.name))
        .key(keys::priority_alive(&lock.name));
    if let Some(token) = token {
        call.key(token);
    }
    call.arg(lease_ms)
        .arg(owner)
        .arg(priority)
        .arg(millis(PRIORITY_AGING))
        .arg(if queueing.will_wait() { "1" } else { "0" })
        .arg(if reentrant { "1" } else { "0" })
        .arg(millis(PLACE_KEPT))
        .invoke(c)
}

/// The arguments of `lua/fair_priority_gate.lua` for a waiter with `priority`.
pub(crate) fn ranked(call: &mut scripts::Call<'_>, priority: u32) {
    call.arg(priority)
        .arg(millis(PRIORITY_AGING))
        .arg(millis(RANKS_KEPT));
}

/// The arguments of a semaphore's gate (`lua/semaphore_priority_gate.lua`, after the waiter's
/// id; `lua/pes_priority_gate.lua`, whose id is the first permit's) for a waiter with
/// `priority`, that `waits` if refused.
pub(crate) fn gate_args(priority: u32, waits: bool) -> [String; 4] {
    [
        priority.to_string(),
        millis(PRIORITY_AGING).to_string(),
        if waits { "1" } else { "0" }.to_owned(),
        millis(PLACE_KEPT).to_string(),
    ]
}

/// Checks a priority asked for: at most [`MAX_PRIORITY`].
pub(crate) fn check(priority: Option<u32>) -> Result<()> {
    match priority {
        Some(p) if p > MAX_PRIORITY => Err(crate::error::Error::invalid(format!(
            "priority {p} is above the highest, {MAX_PRIORITY}"
        ))),
        _ => Ok(()),
    }
}

/// Takes `owner` out of the queue (a wait given up); true if it was queued.
pub(crate) fn leave(lock: &LockKey, owner: &str) -> Result<bool> {
    let (queue, alive) = (
        keys::priority_queue(&lock.name),
        keys::priority_alive(&lock.name),
    );
    lock.run(|c| {
        redis::pipe()
            .zrem(&queue, owner)
            .zrem(&alive, owner)
            .query::<(i64, i64)>(c)
    })
    .map(|(queued, _)| queued == 1)
}
