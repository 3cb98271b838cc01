//! Redisson's `RedissonNonReentrantLock` and `RedissonNonReentrantFairLock`: the plain and the
//! fair lock on their very keys and channels, except that an acquire by an owner that holds
//! the lock already is refused (the acquire scripts' non-reentrant flag) instead of counted.
//! Release, force unlock, renewal and waiting are the plain and fair kinds'.

use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

use crate::error::Result;
use crate::lock::fair::Fair;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::lock::plain::Plain;
use crate::watchdog::Renewal;

/// The non-reentrant lock: a [`Plain`] lock whose acquire refuses its holder.
pub(crate) struct NonReentrant {
    plain: Plain,
}

impl NonReentrant {
    pub(crate) fn new(name: &str) -> NonReentrant {
        NonReentrant {
            plain: Plain::new(name),
        }
    }
}

impl Kind for NonReentrant {
    fn label(&self) -> &'static str {
        "non-reentrant"
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        self.plain.try_acquire(lock, c, owner, lease_ms, false)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        self.plain.unlock(lock, c, release)
    }

    fn latched_unlock(&self) -> bool {
        self.plain.latched_unlock()
    }

    fn passes_inside_client(&self) -> bool {
        self.plain.passes_inside_client()
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        self.plain.force_unlock(lock, c)
    }

    fn waiting(&self, lock: &LockKey, owner: &str) -> Waiting<'_> {
        self.plain.waiting(lock, owner)
    }

    fn released_by_wait(&self) -> Option<&str> {
        self.plain.released_by_wait()
    }

    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        self.plain.renewal(owner)
    }

    fn is_reentrant(&self) -> bool {
        false
    }
}

/// The non-reentrant fair lock: a [`Fair`] lock whose acquire refuses its holder before it
/// could queue it.
pub(crate) struct NonReentrantFair {
    fair: Fair,
}

impl NonReentrantFair {
    /// The lock `name`, whose waiters are skipped after `thread_wait` of silence.
    pub(crate) fn new(name: &str, thread_wait: Duration) -> NonReentrantFair {
        NonReentrantFair {
            fair: Fair::new(name, thread_wait),
        }
    }
}

impl Kind for NonReentrantFair {
    fn label(&self) -> &'static str {
        "non-reentrant fair"
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        queueing: Queueing,
    ) -> RedisResult<Value> {
        self.fair
            .try_acquire(lock, c, owner, lease_ms, queueing, false)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        self.fair.unlock(lock, c, release)
    }

    fn passes_inside_client(&self) -> bool {
        self.fair.passes_inside_client()
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        self.fair.force_unlock(lock, c)
    }

    fn waiting(&self, lock: &LockKey, owner: &str) -> Waiting<'_> {
        self.fair.waiting(lock, owner)
    }

    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        self.fair.renewal(owner)
    }

    fn is_fair(&self) -> bool {
        self.fair.is_fair()
    }

    fn leave(&self, lock: &LockKey, owner: &str) -> Result<bool> {
        self.fair.leave(lock, owner)
    }

    fn is_reentrant(&self) -> bool {
        false
    }
}
