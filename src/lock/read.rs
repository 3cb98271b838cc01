//! The read side of Redisson's `RReadWriteLock`: shared by many owners, each holding a field
//! `owner` → count in the lock hash and one lease key per hold,
//! `{name}:<owner>:rwlock_timeout:<n>`.

use std::borrow::Cow;
use std::sync::Arc;

use redis::{ConnectionLike, RedisResult, Value};

use crate::deadlock::Mode;
use crate::error::Result;
use crate::hold::LockKind;
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::lock::side::Side;
use crate::scripts;
use crate::watchdog::{BatchRenewal, Renewal};

/// The read side: `lua/rw_read_*.lua`.
pub(crate) struct Read {
    side: Side,
}

impl Read {
    pub(crate) fn new(name: &str) -> Read {
        Read {
            side: Side::new(name, keys::MODE_READ),
        }
    }
}

/// `rw_read_renew.lua`: a read hold is renewed through its lease keys, so each hold adds
/// the prefix of its owner's as a second key.
static RENEW_READ: BatchRenewal = BatchRenewal {
    script: &scripts::RW_READ_RENEW,
    add: |call, name, owner| {
        call.key(name).key(keys::read_holds(name, owner)).arg(owner);
    },
    holds: true,
    leased: true,
};

impl Kind for Read {
    fn label(&self) -> LockKind {
        LockKind::Read
    }

    fn wait_mode(&self) -> Mode {
        Mode::Read
    }

    /// Readers share the lock: a wait could not release it for a notifier.
    fn has_conditions(&self) -> bool {
        false
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        scripts::RW_READ_ACQUIRE
            .key(&lock.name)
            .key(&keys::read_holds(&lock.name, owner))
            .arg(lease_ms)
            .arg(owner)
            .arg(keys::write_field(owner))
            .invoke(c)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        scripts::RW_READ_UNLOCK
            .key(&lock.name)
            .key(&self.side.channel)
            .key(&keys::read_holds(&lock.name, release.owner))
            .key(&self.side.prefix)
            .arg(release.owner)
            .arg(lock.client.publish())
            .arg(release.expect)
            .invoke(c)
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        self.side.force_unlock(lock, c)
    }

    fn waiting(&self, _lock: &LockKey, _owner: &str) -> Waiting<'_> {
        Waiting::Channel(Cow::Borrowed(&self.side.channel))
    }

    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        Renewal {
            field: Arc::clone(owner),
            batch: &RENEW_READ,
        }
    }

    fn is_locked(&self, lock: &LockKey) -> Result<bool> {
        self.side.is_locked(lock)
    }
}
