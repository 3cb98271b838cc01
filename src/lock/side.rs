//! What the two sides of a read-write lock (`read.rs`, `write.rs`) share: the keys, the mode
//! the lock hash has while a side holds it, and the force unlock of one side.

use redis::{ConnectionLike, RedisResult};

use crate::error::Result;
use crate::keys;
use crate::lock::key::LockKey;
use crate::scripts;

/// What the two sides ([`Read`](super::read::Read), [`Write`](super::write::Write)) share: the keys, and the `mode` the lock hash
/// has while the side holds it.
pub(super) struct Side {
    /// `redisson_rwlock:{name}`: every waiter of either side listens here.
    pub(super) channel: String,
    /// `{name}`: what every owner's read-hold lease keys start with.
    pub(super) prefix: String,
    /// `read` or `write`.
    mode: &'static str,
}

impl Side {
    pub(super) fn new(name: &str, mode: &'static str) -> Side {
        Side {
            channel: keys::rw_channel(name),
            prefix: keys::hashed(name),
            mode,
        }
    }

    /// Whether the lock is held in this side's mode (Redisson's semantics; a writer that
    /// also reads counts as write mode).
    pub(super) fn is_locked(&self, lock: &LockKey) -> Result<bool> {
        let mode: Option<String> =
            lock.query(redis::cmd("HGET").arg(&*lock.name).arg(keys::MODE_FIELD))?;
        Ok(mode.as_deref() == Some(self.mode))
    }

    /// Deletes the lock if it is held in this side's mode, and wakes every waiter.
    pub(super) fn force_unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
    ) -> RedisResult<bool> {
        scripts::RW_FORCE_UNLOCK
            .key(&lock.name)
            .key(&self.channel)
            .arg(self.mode)
            .arg(lock.client.publish())
            .invoke(c)
    }
}
