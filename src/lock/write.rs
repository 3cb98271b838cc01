//! The write side of Redisson's `RReadWriteLock`: one owner, holding a field
//! `<owner>:write` → count in the lock hash.

use std::borrow::Cow;
use std::sync::Arc;

use redis::{ConnectionLike, RedisResult, Value};

use crate::deadlock::Mode;
use crate::error::Result;
use crate::hold::LockKind;
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting, RENEW_FIELD};
use crate::lock::side::Side;
use crate::scripts;
use crate::watchdog::Renewal;

/// The write side: `lua/rw_write_*.lua`.
pub(crate) struct Write {
    side: Side,
}

impl Write {
    pub(crate) fn new(name: &str) -> Write {
        Write {
            side: Side::new(name, keys::MODE_WRITE),
        }
    }
}

impl Kind for Write {
    fn label(&self) -> LockKind {
        LockKind::Write
    }

    fn wait_mode(&self) -> Mode {
        Mode::Write
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        scripts::RW_WRITE_ACQUIRE
            .key(&lock.name)
            .arg(lease_ms)
            .arg(keys::write_field(owner))
            .invoke(c)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        scripts::RW_WRITE_UNLOCK
            .key(&lock.name)
            .key(&self.side.channel)
            .key(&self.side.prefix)
            .arg(release.lease_ms)
            .arg(keys::write_field(release.owner))
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

    fn field(&self, owner: &str) -> String {
        keys::write_field(owner)
    }

    /// The write field is a string of its own (the watchdog keeps it while the lock is held).
    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        Renewal {
            field: keys::write_field(owner).into(),
            batch: &RENEW_FIELD,
        }
    }

    fn is_locked(&self, lock: &LockKey) -> Result<bool> {
        self.side.is_locked(lock)
    }

    /// A thread that holds a read lock and now waits for the write lock waits for its own
    /// read hold too (there is no upgrade): say so, once per such wait, since it may never end.
    fn before_wait(&self, lock: &LockKey, owner: &str) {
        let reads: Result<bool> = lock.query(redis::cmd("HEXISTS").arg(&*lock.name).arg(owner));
        if let Ok(true) = reads {
            log::warn!(
                "thread {owner} holds a read lock on `{}` and waits for its write lock: read \
                 locks are not upgraded, so it waits until every read hold, its own included, \
                 is released or expires",
                lock.name
            );
        }
    }
}
