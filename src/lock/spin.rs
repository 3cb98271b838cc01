//! Redisson's `RSpinLock`: the reentrant lock's hash, waited for without pub/sub. A waiter
//! retries its acquire after delays that grow exponentially, with jitter ([`Backoff`]); a
//! release publishes nothing.

use redis::{ConnectionLike, RedisResult, Value};

use crate::backoff::Backoff;
use crate::hold::LockKind;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::scripts;

/// The spin lock: acquired by `lua/lock_acquire.lua` (the reentrant lock's, so the two kinds
/// exclude each other), released by `lua/spin_*.lua`, which publish nothing.
pub(crate) struct Spin {
    backoff: Backoff,
}

impl Spin {
    pub(crate) fn new(backoff: Backoff) -> Spin {
        Spin { backoff }
    }
}

impl Kind for Spin {
    fn label(&self) -> LockKind {
        LockKind::Spin
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        scripts::LOCK_ACQUIRE
            .key(&lock.name)
            .arg(lease_ms)
            .arg(owner)
            .invoke(c)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        scripts::SPIN_UNLOCK
            .key(&lock.name)
            .arg(release.lease_ms)
            .arg(release.owner)
            .arg(release.expect)
            .invoke(c)
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        scripts::SPIN_FORCE_UNLOCK.key(&lock.name).invoke(c)
    }

    fn waiting(&self, _lock: &LockKey, _owner: &str) -> Waiting<'_> {
        Waiting::Backoff(self.backoff)
    }
}
