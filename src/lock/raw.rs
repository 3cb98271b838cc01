//! The raw lock protocol: runs the scripts of `lua/lock_*.lua` (reentrant), `lua/fair_*.lua`
//! (fair) or `lua/rw_*.lua` (the sides of a read-write lock) and decodes replies. Knows nothing
//! of guards, waiting or the watchdog.

use std::time::Duration;

use crate::client::Client;
use crate::config::{millis, ReplicaSync};
use crate::error::{Error, Result};
use crate::lock::{suffixed, tagged};
use crate::scripts;

/// What the unlock script did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// The owner had no hold: nothing changed.
    NotHeld,
    /// One hold released; the owner still holds the lock.
    StillHeld,
    /// The last hold released: the lock is free and waiters were woken.
    Released,
}

pub(crate) struct RawLock {
    pub(crate) client: Client,
    pub(crate) name: std::sync::Arc<str>,
    /// The unlock channel; a fair lock's waiter listens on `<channel>:<owner>` instead.
    pub(crate) channel: String,
    pub(crate) kind: Kind,
}

/// Which protocol a lock speaks.
pub(crate) enum Kind {
    /// Redisson's `RLock`.
    Plain,
    /// Redisson's `RFairLock`.
    Fair(Fair),
    /// One side of Redisson's `RReadWriteLock`.
    Rw(Side),
    /// Redisson's `RFencedLock`: a plain lock whose acquire also increments the token
    /// counter (the key named here).
    Fenced(String),
}

/// What one acquire attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Acquired (or re-entered): the owner's hold count is now `count` (1: a new hold, even
    /// if the client believed it held the lock already). A fenced lock's attempt carries its
    /// fencing token.
    Acquired { count: u32, token: Option<u64> },
    /// Held elsewhere: the lock's PTTL in ms, after which to try again even without a
    /// message (-1 for a key without expiry).
    Busy(i64),
}

/// A side of a read-write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Read,
    Write,
}

/// What the watchdog renews for a held lock: the hold's hash field (what tells the holds of
/// one lock apart), and the batch script that renews it.
pub(crate) struct Renewal {
    /// The hash field of the hold: the owner id, or `<owner>:write` for a write hold.
    pub(crate) field: std::sync::Arc<str>,
    pub(crate) batch: &'static BatchRenewal,
}

/// A script that renews many holds in one call: ARGV[1] is the lease in ms, and each hold
/// adds its own keys and arguments in turn. The watchdog groups holds by it.
pub(crate) struct BatchRenewal {
    pub(crate) script: &'static std::sync::LazyLock<redis::Script>,
    /// Adds one hold of lock `name`, hash field `field`, to the call.
    pub(crate) add: fn(call: &mut redis::ScriptInvocation<'_>, name: &str, field: &str),
}

/// `lock_renew.lua`: a hold is its field of the lock hash, which expires as a whole.
pub(crate) static RENEW_FIELD: BatchRenewal = BatchRenewal {
    script: &scripts::LOCK_RENEW,
    add: |call, name, field| {
        call.key(name).arg(field);
    },
};

/// `rw_read_renew.lua`: a read hold is renewed through its lease keys, so each hold adds
/// the prefix of its owner's as a second key.
static RENEW_READ: BatchRenewal = BatchRenewal {
    script: &scripts::RW_READ_RENEW,
    add: |call, name, owner| {
        call.key(name)
            .key(crate::keys::read_holds(name, owner))
            .arg(owner);
    },
};

/// The extra keys and setting of a fair lock.
pub(crate) struct Fair {
    queue: String,
    timeouts: String,
    /// Thread wait in ms: how long a head of the queue may stay silent before it is skipped.
    wait_ms: u64,
}

impl RawLock {
    pub(crate) fn new(client: Client, name: &str, fair: bool) -> RawLock {
        let kind = match fair {
            false => Kind::Plain,
            true => Kind::Fair(Fair {
                queue: tagged("redisson_lock_queue", name),
                timeouts: tagged("redisson_lock_timeout", name),
                wait_ms: millis(client.inner.config.fair_thread_wait),
            }),
        };
        RawLock {
            channel: tagged("redisson_lock__channel", name),
            name: name.into(),
            client,
            kind,
        }
    }

    /// The fenced lock `name`.
    pub(crate) fn fenced(client: Client, name: &str) -> RawLock {
        RawLock {
            channel: tagged("redisson_lock__channel", name),
            name: name.into(),
            client,
            kind: Kind::Fenced(tagged("redisson_lock_token", name)),
        }
    }

    /// The fencing token counter of a fenced lock.
    pub(crate) fn token_key(&self) -> Option<&str> {
        match &self.kind {
            Kind::Fenced(key) => Some(key),
            _ => None,
        }
    }

    /// One side of the read-write lock `name`.
    pub(crate) fn read_write(client: Client, name: &str, side: Side) -> RawLock {
        RawLock {
            channel: tagged("redisson_rwlock", name),
            name: name.into(),
            client,
            kind: Kind::Rw(side),
        }
    }

    pub(crate) fn fair(&self) -> Option<&Fair> {
        match &self.kind {
            Kind::Fair(f) => Some(f),
            _ => None,
        }
    }

    pub(crate) fn side(&self) -> Option<Side> {
        match self.kind {
            Kind::Rw(side) => Some(side),
            _ => None,
        }
    }

    /// The channel on which `owner` waits for this lock.
    pub(crate) fn wait_channel(&self, owner: &str) -> std::borrow::Cow<'_, str> {
        match self.kind {
            Kind::Fair(_) => format!("{}:{owner}", self.channel).into(),
            _ => self.channel.as_str().into(),
        }
    }

    /// The hash field holding `owner`'s hold count.
    pub(crate) fn field(&self, owner: &str) -> String {
        match self.kind {
            Kind::Rw(Side::Write) => format!("{owner}:write"),
            _ => owner.to_owned(),
        }
    }

    /// What the watchdog renews for `owner`'s holds. Where the field is the owner id itself
    /// (every kind but the write side) it shares `owner`'s allocation: the watchdog keeps an
    /// entry per held lock, and this way its entry has no string of its own.
    pub(crate) fn renewal(&self, owner: &std::sync::Arc<str>) -> Renewal {
        Renewal {
            field: match self.kind {
                Kind::Rw(Side::Write) => self.field(owner).into(),
                _ => std::sync::Arc::clone(owner),
            },
            batch: match self.kind {
                Kind::Rw(Side::Read) => &RENEW_READ,
                _ => &RENEW_FIELD,
            },
        }
    }

    /// `{name}:<owner>:rwlock_timeout`: the read holds of `owner` are `<this>:<n>`.
    fn read_prefix(&self, owner: &str) -> String {
        format!("{}:rwlock_timeout", suffixed(&self.name, owner))
    }

    /// `{name}` (or the name itself when it has a hash tag): what every owner's read-hold
    /// timeout key starts with.
    fn key_prefix(&self) -> String {
        let with_colon = suffixed(&self.name, "");
        with_colon[..with_colon.len() - 1].to_owned()
    }

    pub(crate) fn check_name(&self) -> Result<()> {
        crate::config::check_name("lock", &self.name)
    }

    /// One acquire attempt. A fair lock puts `owner` in its queue when `enqueue` is set.
    ///
    /// With [`sync_replicas`](crate::ConfigBuilder::sync_replicas), a successful attempt is
    /// followed by `WAIT` on the same connection; one that too few replicas confirmed (or
    /// whose confirmation failed) is undone before the error is returned.
    pub(crate) fn acquire(&self, owner: &str, lease: Duration, enqueue: bool) -> Result<Attempt> {
        let mut wrote = false;
        let outcome = self.client.inner.pool.run(&self.name, |c| {
            let attempt = self.acquire_script(c, owner, lease, enqueue)?;
            wrote = matches!(attempt, Ok(Attempt::Acquired { .. }));
            Ok((attempt, self.confirm(c, wrote)?))
        });
        let (attempt, acked) = match outcome {
            Ok(reply) => reply,
            Err(e) => {
                if wrote {
                    // Acquired, but the replica confirmation failed: not a hold we can vouch for.
                    self.undo_acquire(owner, lease);
                }
                return Err(e);
            }
        };
        let attempt = attempt?;
        if let (Some(acked), Some(sync)) = (acked, self.client.inner.config.replica_sync) {
            if acked < sync.replicas {
                log::warn!(
                    "acquire of `{}` (owner {owner}) confirmed by {acked} of {} replicas: undone",
                    self.name,
                    sync.replicas
                );
                self.undo_acquire(owner, lease);
                return Err(Error::NotReplicated {
                    name: self.name.to_string(),
                    acked,
                    wanted: sync.replicas,
                });
            }
        }
        Ok(attempt)
    }

    /// Runs the acquire script of this lock's kind; the inner result carries a reply that
    /// could not be decoded.
    fn acquire_script(
        &self,
        c: &mut redis::Connection,
        owner: &str,
        lease: Duration,
        enqueue: bool,
    ) -> redis::RedisResult<Result<Attempt>> {
        let reply: redis::Value = match &self.kind {
            Kind::Fenced(token_key) => scripts::FENCED_ACQUIRE
                .key(&*self.name)
                .key(token_key)
                .arg(millis(lease))
                .arg(owner)
                .invoke(c)?,
            Kind::Plain => scripts::LOCK_ACQUIRE
                .key(&*self.name)
                .arg(millis(lease))
                .arg(owner)
                .invoke(c)?,
            Kind::Rw(Side::Read) => scripts::RW_READ_ACQUIRE
                .key(&*self.name)
                .key(self.read_prefix(owner))
                .arg(millis(lease))
                .arg(owner)
                .arg(format!("{owner}:write"))
                .invoke(c)?,
            Kind::Rw(Side::Write) => scripts::RW_WRITE_ACQUIRE
                .key(&*self.name)
                .arg(millis(lease))
                .arg(self.field(owner))
                .invoke(c)?,
            Kind::Fair(f) => scripts::FAIR_ACQUIRE
                .key(&*self.name)
                .key(&f.queue)
                .key(&f.timeouts)
                .key(&self.channel)
                .arg(millis(lease))
                .arg(owner)
                .arg(f.wait_ms)
                .arg(if enqueue { "1" } else { "0" })
                .arg(self.client.publish())
                .invoke(c)?,
        };
        Ok(decode_attempt(&reply))
    }

    /// After a lock write on `c`: `WAIT replicas timeout` when the client syncs replicas and
    /// the script wrote; the number of replicas that confirmed, `None` when not asked.
    fn confirm(&self, c: &mut redis::Connection, wrote: bool) -> redis::RedisResult<Option<u32>> {
        wait_replicas(self.client.inner.config.replica_sync, c, wrote)
    }

    /// Releases the hold an acquire just took (best effort: on failure the hold stays until
    /// its lease runs out, and is not renewed).
    fn undo_acquire(&self, owner: &str, lease: Duration) {
        if let Err(e) = self.unlock(owner, lease) {
            log::warn!(
                "undoing the unconfirmed acquire of `{}` (owner {owner}) failed: {e}; it expires \
                 after its lease of {lease:?}",
                self.name
            );
        }
    }

    /// Takes `owner` out of a fair lock's queue (a wait given up); true if it was queued.
    /// A no-op for other locks.
    pub(crate) fn leave(&self, owner: &str) -> Result<bool> {
        let Some(f) = self.fair() else {
            return Ok(false);
        };
        self.client.inner.pool.run(&self.name, |c| {
            scripts::FAIR_LEAVE
                .key(&*self.name)
                .key(&f.queue)
                .key(&f.timeouts)
                .key(&self.channel)
                .arg(owner)
                .arg(f.wait_ms)
                .arg(self.client.publish())
                .invoke(c)
        })
    }

    /// Releases one hold of `owner`. A lost reply is retried once with the same request id;
    /// the unlock latch makes the retry return the first call's outcome.
    pub(crate) fn unlock(&self, owner: &str, lease: Duration) -> Result<Unlocked> {
        let request = uuid::Uuid::new_v4().simple().to_string();
        let latch = format!("{}:{request}", tagged("redisson_unlock_latch", &self.name));
        let cfg = &self.client.inner.config;
        let latch_ttl = millis(cfg.response_timeout * 4).max(1000);
        let attempt = || -> Result<(Option<i64>, Option<u32>)> {
            self.client.inner.pool.run(&self.name, |c| {
                let reply: Option<i64> = match &self.kind {
                    Kind::Plain | Kind::Fenced(_) => scripts::LOCK_UNLOCK
                        .key(&*self.name)
                        .key(&self.channel)
                        .key(&latch)
                        .arg(0)
                        .arg(millis(lease))
                        .arg(owner)
                        .arg(self.client.publish())
                        .arg(latch_ttl)
                        .invoke(c)?,
                    Kind::Rw(Side::Read) => scripts::RW_READ_UNLOCK
                        .key(&*self.name)
                        .key(&self.channel)
                        .key(self.read_prefix(owner))
                        .key(self.key_prefix())
                        .key(&latch)
                        .arg(owner)
                        .arg(self.client.publish())
                        .arg(latch_ttl)
                        .invoke(c)?,
                    Kind::Rw(Side::Write) => scripts::RW_WRITE_UNLOCK
                        .key(&*self.name)
                        .key(&self.channel)
                        .key(self.key_prefix())
                        .key(&latch)
                        .arg(millis(lease))
                        .arg(self.field(owner))
                        .arg(self.client.publish())
                        .arg(latch_ttl)
                        .invoke(c)?,
                    Kind::Fair(f) => scripts::FAIR_UNLOCK
                        .key(&*self.name)
                        .key(&f.queue)
                        .key(&f.timeouts)
                        .key(&self.channel)
                        .key(&latch)
                        .arg(millis(lease))
                        .arg(owner)
                        .arg(self.client.publish())
                        .arg(latch_ttl)
                        .arg(f.wait_ms)
                        .invoke(c)?,
                };
                Ok((reply, self.confirm(c, reply.is_some())?))
            })
        };
        let (reply, acked) = match attempt() {
            Err(e) if e.breaks_connection() => {
                log::debug!(
                    "unlock of `{}` (owner {owner}) lost its reply ({e}); retrying",
                    self.name
                );
                attempt()?
            }
            other => other?,
        };
        if let (Some(acked), Some(sync)) = (acked, self.client.inner.config.replica_sync) {
            if acked < sync.replicas {
                log::warn!(
                    "unlock of `{}` (owner {owner}) confirmed by {acked} of {} replicas: a \
                     failover now could bring the lock back until its lease runs out",
                    self.name,
                    sync.replicas
                );
            }
        }
        match reply {
            None => Ok(Unlocked::NotHeld),
            Some(0) => Ok(Unlocked::StillHeld),
            Some(1) => Ok(Unlocked::Released),
            // A read hold whose own lease had run out: cleaned up, but it was lost.
            Some(2) => Ok(Unlocked::NotHeld),
            Some(n) => Err(Error::Protocol(format!("unlock script replied {n}"))),
        }
    }

    /// Deletes the lock whoever holds it; true if there was one.
    pub(crate) fn force_unlock(&self) -> Result<bool> {
        self.client
            .inner
            .pool
            .run(&self.name, |c| match &self.kind {
                Kind::Plain | Kind::Fenced(_) => scripts::LOCK_FORCE_UNLOCK
                    .key(&*self.name)
                    .key(&self.channel)
                    .arg(0)
                    .arg(self.client.publish())
                    .invoke(c),
                Kind::Rw(side) => scripts::RW_FORCE_UNLOCK
                    .key(&*self.name)
                    .key(&self.channel)
                    .arg(match side {
                        Side::Read => "read",
                        Side::Write => "write",
                    })
                    .arg(self.client.publish())
                    .invoke(c),
                Kind::Fair(f) => scripts::FAIR_FORCE_UNLOCK
                    .key(&*self.name)
                    .key(&f.queue)
                    .key(&f.timeouts)
                    .key(&self.channel)
                    .arg(self.client.publish())
                    .arg(f.wait_ms)
                    .invoke(c),
            })
    }

    pub(crate) fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.check_name()?;
        self.client.inner.pool.run(&self.name, |c| cmd.query(c))
    }
}

/// `WAIT replicas timeout` on `c` after a write, when the client syncs replicas: how many
/// replicas confirmed, `None` when not asked (or nothing was written).
pub(crate) fn wait_replicas(
    sync: Option<ReplicaSync>,
    c: &mut redis::Connection,
    wrote: bool,
) -> redis::RedisResult<Option<u32>> {
    match sync {
        Some(sync) if wrote => redis::cmd("WAIT")
            .arg(sync.replicas)
            .arg(millis(sync.timeout))
            .query(c)
            .map(Some),
        _ => Ok(None),
    }
}

/// Decodes an acquire script's reply: `{count}` or `{count, token}` when acquired, the
/// lock's PTTL when not.
fn decode_attempt(reply: &redis::Value) -> Result<Attempt> {
    use redis::Value;
    let positive = |n: i64| (n > 0 && n <= i64::from(u32::MAX)).then_some(n);
    match reply {
        Value::Int(ttl) => return Ok(Attempt::Busy(*ttl)),
        Value::Array(items) => match items.as_slice() {
            [Value::Int(count)] if positive(*count).is_some() => {
                return Ok(Attempt::Acquired {
                    count: *count as u32,
                    token: None,
                })
            }
            [Value::Int(count), Value::Int(token)] if positive(*count).is_some() && *token > 0 => {
                return Ok(Attempt::Acquired {
                    count: *count as u32,
                    token: Some(*token as u64),
                })
            }
            _ => {}
        },
        _ => {}
    }
    Err(Error::Protocol(format!("acquire script replied {reply:?}")))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn renewal_shares_the_owner_string_except_for_a_write_hold() {
        // The watchdog keeps the renewal's field for as long as the lock is held: where it is
        // the owner id, it must not be a copy of its own.
        let client = Client::open("redis://127.0.0.1/").unwrap();
        let owner: Arc<str> = Arc::from("uuid:7");
        let plain = RawLock::new(client.clone(), "l", false);
        assert!(Arc::ptr_eq(&plain.renewal(&owner).field, &owner));
        let read = RawLock::read_write(client.clone(), "rw", Side::Read);
        let renewal = read.renewal(&owner);
        assert!(Arc::ptr_eq(&renewal.field, &owner));
        assert!(std::ptr::eq(renewal.batch, &RENEW_READ));
        let write = RawLock::read_write(client, "rw", Side::Write);
        let renewal = write.renewal(&owner);
        assert_eq!(&*renewal.field, "uuid:7:write");
        assert!(std::ptr::eq(renewal.batch, &RENEW_FIELD));
    }
}
