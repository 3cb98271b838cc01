//! Redisson's `RLock`: a HASH `name` of owner → hold count, released on the lock channel.

use std::borrow::Cow;

use redis::{ConnectionLike, RedisResult, Value};

use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::scripts;

/// The reentrant lock: `lua/lock_*.lua`; a release publishes `0` (wake one) on the lock
/// channel, where every waiter listens.
pub(crate) struct Plain {
    channel: String,
}

impl Plain {
    pub(crate) fn new(name: &str) -> Plain {
        Plain {
            channel: keys::lock_channel(name),
        }
    }

    /// One acquire attempt of `owner`; with `reentrant` false, an owner that holds the lock
    /// already is refused (`{0}`), as `RedissonNonReentrantLock` does.
    pub(crate) fn try_acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        reentrant: bool,
    ) -> RedisResult<Value> {
        scripts::LOCK_ACQUIRE
            .key(&lock.name)
            .arg(lease_ms)
            .arg(owner)
            .arg(if reentrant { "1" } else { "0" })
            .invoke(c)
    }
}

impl Kind for Plain {
    fn label(&self) -> &'static str {
        "plain"
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        self.try_acquire(lock, c, owner, lease_ms, true)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        let mut call = scripts::LOCK_UNLOCK.key(&lock.name);
        call.key(&self.channel)
            .arg(release.lease_ms)
            .arg(release.owner)
            .arg(lock.client.publish());
        if let Some(expect) = release.expect {
            call.arg(expect);
            if let Some(pass) = &release.pass_to {
                pass.args(&mut call);
            }
        }
        call.invoke(c)
    }

    /// A lost reply is settled by the hold count left (see `lua/lock_unlock.lua`).
    fn latched_unlock(&self) -> bool {
        false
    }

    fn passes_inside_client(&self) -> bool {
        true
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        scripts::LOCK_FORCE_UNLOCK
            .key(&lock.name)
            .key(&self.channel)
            .arg(0)
            .arg(lock.client.publish())
            .invoke(c)
    }

    fn waiting(&self, _lock: &LockKey, _owner: &str) -> Waiting<'_> {
        Waiting::Channel(Cow::Borrowed(&self.channel))
    }

    /// The last release of `lua/lock_unlock.lua`: the hash deleted, `0` on the channel.
    fn released_by_wait(&self) -> Option<&str> {
        Some(&self.channel)
    }
}
