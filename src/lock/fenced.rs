//! Redisson's `RFencedLock`: a reentrant lock whose every acquire also increments a token
//! counter, `redisson_lock_token:{name}` (never expires), and hands the holder the token.

use redis::{ConnectionLike, RedisResult, Value};

use crate::error::{Error, Result};
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::lock::plain::Plain;
use crate::scripts;

/// The fenced lock: acquired by `lua/fenced_acquire.lua`, otherwise a [`Plain`] lock (same
/// hash, channel, release and renewal).
pub(crate) struct Fenced {
    plain: Plain,
    token: String,
}

impl Fenced {
    pub(crate) fn new(name: &str) -> Fenced {
        Fenced {
            plain: Plain::new(name),
            token: keys::fence_token(name),
        }
    }
}

impl Kind for Fenced {
    fn label(&self) -> &'static str {
        "fenced"
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        scripts::FENCED_ACQUIRE
            .key(&lock.name)
            .key(&self.token)
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
        self.plain.unlock(lock, c, release)
    }

    fn latched_unlock(&self) -> bool {
        self.plain.latched_unlock()
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

    fn token_key(&self) -> Option<&str> {
        Some(&self.token)
    }
}

/// A stored token (`None` when absent); a value that is not one is the key's wrong type.
pub(crate) fn parse_token(value: Option<String>, key: &str) -> Result<Option<u64>> {
    value
        .map(|v| {
            v.parse().map_err(|_| Error::WrongType {
                key: key.to_owned(),
            })
        })
        .transpose()
}
