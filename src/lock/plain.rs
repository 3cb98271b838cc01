//! Redisson's `RLock`: a HASH `name` of owner → hold count, released on the lock channel. The
//! same kind, with one difference each, is Redisson's `RedissonNonReentrantLock` (an owner's
//! second acquire is refused, the acquire script's flag) and `RFencedLock` (every acquire
//! also increments a token counter, `redisson_lock_token:{name}`, that never expires, and hands
//! the holder the token: `lua/fenced_acquire.lua`).

use std::borrow::Cow;
use std::sync::Arc;

use redis::{ConnectionLike, RedisResult, Value};

use crate::hold::LockKind;
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting, RENEW_REVOCABLE};
use crate::lock::priority;
use crate::scripts;
use crate::watchdog::Renewal;

/// The plain lock: `lua/lock_*.lua`; a release publishes `0` (wake one) on the lock channel,
/// where every waiter listens.
pub(crate) struct Plain {
    channel: String,
    /// False: an owner that holds the lock is refused another hold.
    reentrant: bool,
    /// A fenced lock's token counter.
    token: Option<String>,
}

impl Plain {
    /// Redisson's `RLock`.
    pub(crate) fn new(name: &str) -> Plain {
        Plain {
            channel: keys::lock_channel(name),
            reentrant: true,
            token: None,
        }
    }

    /// Redisson's `RedissonNonReentrantLock`: the plain lock refusing its holder.
    pub(crate) fn non_reentrant(name: &str) -> Plain {
        Plain {
            reentrant: false,
            ..Plain::new(name)
        }
    }

    /// Redisson's `RFencedLock`: the plain lock, acquired with a token.
    pub(crate) fn fenced(name: &str) -> Plain {
        Plain {
            token: Some(keys::fence_token(name)),
            ..Plain::new(name)
        }
    }
}

impl Kind for Plain {
    fn label(&self) -> LockKind {
        match (&self.token, self.reentrant) {
            (Some(_), _) => LockKind::Fenced,
            (None, false) => LockKind::NonReentrant,
            (None, true) => LockKind::Plain,
        }
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        queueing: Queueing,
    ) -> RedisResult<Value> {
        if lock.priority.is_some() {
            let token = self.token.as_deref();
            return priority::acquire(lock, c, owner, lease_ms, queueing, self.reentrant, token);
        }
        match &self.token {
            Some(token) => scripts::FENCED_ACQUIRE
                .key(&lock.name)
                .key(token)
                .arg(lease_ms)
                .arg(owner)
                .invoke(c),
            // Not reentrant: an owner that holds the lock already is refused (`{0}`), as
            // `RedissonNonReentrantLock` does.
            // A reentrant one sends no flag: an argument costs the server as much as a read.
            None => scripts::LOCK_ACQUIRE
                .key(&lock.name)
                .arg(lease_ms)
                .arg(owner)
                .arg((!self.reentrant).then_some("0"))
                .invoke(c),
        }
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

    /// Renewed with a look at the lock's revocation record: a holder is told of a request.
    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        Renewal {
            field: Arc::clone(owner),
            batch: &RENEW_REVOCABLE,
        }
    }

    fn is_revocable(&self) -> bool {
        true
    }

    fn has_priorities(&self) -> bool {
        true
    }

    /// A waiter with a priority leaves its queue; others have none.
    fn leave(&self, lock: &LockKey, owner: &str) -> crate::error::Result<bool> {
        if lock.priority.is_none() {
            return Ok(false);
        }
        priority::leave(lock, owner)
    }

    /// Not a fenced lock: its new holder needs a new token.
    fn passes_inside_client(&self) -> bool {
        self.token.is_none()
    }

    fn is_reentrant(&self) -> bool {
        self.reentrant
    }

    fn token_key(&self) -> Option<&str> {
        self.token.as_deref()
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
