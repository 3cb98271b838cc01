//! The raw lock protocol: runs the scripts of `lua/lock_*.lua` (reentrant) or `lua/fair_*.lua`
//! (fair) and decodes replies. Knows nothing of guards, waiting or the watchdog.

use std::time::Duration;

use crate::client::Client;
use crate::config::millis;
use crate::error::{Error, Result};
use crate::lock::tagged;
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
    pub(crate) fair: Option<Fair>,
}

/// The extra keys and setting of a fair lock.
pub(crate) struct Fair {
    queue: String,
    timeouts: String,
    /// Thread wait in ms: how long a head of the queue may stay silent before it is skipped.
    wait_ms: u64,
}

impl RawLock {
    pub(crate) fn new(client: Client, name: &str, fair: bool) -> RawLock {
        let fair = fair.then(|| Fair {
            queue: tagged("redisson_lock_queue", name),
            timeouts: tagged("redisson_lock_timeout", name),
            wait_ms: millis(client.inner.config.fair_thread_wait),
        });
        RawLock {
            channel: tagged("redisson_lock__channel", name),
            name: name.into(),
            client,
            fair,
        }
    }

    /// The channel on which `owner` waits for this lock.
    pub(crate) fn wait_channel(&self, owner: &str) -> std::borrow::Cow<'_, str> {
        match self.fair {
            None => self.channel.as_str().into(),
            Some(_) => format!("{}:{owner}", self.channel).into(),
        }
    }

    pub(crate) fn check_name(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::invalid("lock name must not be empty"));
        }
        Ok(())
    }

    /// One acquire attempt: `Ok(None)` when acquired, `Ok(Some(ms))` when held elsewhere:
    /// the time after which to try again even without a message (the lock's PTTL, -1 for a
    /// key without expiry). A fair lock puts `owner` in its queue when `enqueue` is set.
    pub(crate) fn acquire(
        &self,
        owner: &str,
        lease: Duration,
        enqueue: bool,
    ) -> Result<Option<i64>> {
        self.client
            .inner
            .pool
            .run(&self.name, |c| match &self.fair {
                None => scripts::LOCK_ACQUIRE
                    .key(&*self.name)
                    .arg(millis(lease))
                    .arg(owner)
                    .invoke(c),
                Some(f) => scripts::FAIR_ACQUIRE
                    .key(&*self.name)
                    .key(&f.queue)
                    .key(&f.timeouts)
                    .key(&self.channel)
                    .arg(millis(lease))
                    .arg(owner)
                    .arg(f.wait_ms)
                    .arg(if enqueue { "1" } else { "0" })
                    .arg("PUBLISH")
                    .invoke(c),
            })
    }

    /// Takes `owner` out of a fair lock's queue (a wait given up); true if it was queued.
    /// A no-op for other locks.
    pub(crate) fn leave(&self, owner: &str) -> Result<bool> {
        let Some(f) = &self.fair else {
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
                .arg("PUBLISH")
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
        let attempt = || -> Result<Option<i64>> {
            self.client
                .inner
                .pool
                .run(&self.name, |c| match &self.fair {
                    None => scripts::LOCK_UNLOCK
                        .key(&*self.name)
                        .key(&self.channel)
                        .key(&latch)
                        .arg(0)
                        .arg(millis(lease))
                        .arg(owner)
                        .arg("PUBLISH")
                        .arg(latch_ttl)
                        .invoke(c),
                    Some(f) => scripts::FAIR_UNLOCK
                        .key(&*self.name)
                        .key(&f.queue)
                        .key(&f.timeouts)
                        .key(&self.channel)
                        .key(&latch)
                        .arg(millis(lease))
                        .arg(owner)
                        .arg("PUBLISH")
                        .arg(latch_ttl)
                        .arg(f.wait_ms)
                        .invoke(c),
                })
        };
        let reply = match attempt() {
            Err(e) if e.breaks_connection() => {
                log::debug!("unlock of `{}` lost its reply ({e}); retrying", self.name);
                attempt()?
            }
            other => other?,
        };
        match reply {
            None => Ok(Unlocked::NotHeld),
            Some(0) => Ok(Unlocked::StillHeld),
            Some(1) => Ok(Unlocked::Released),
            Some(n) => Err(Error::Protocol(format!("unlock script replied {n}"))),
        }
    }

    /// Deletes the lock whoever holds it; true if there was one.
    pub(crate) fn force_unlock(&self) -> Result<bool> {
        self.client
            .inner
            .pool
            .run(&self.name, |c| match &self.fair {
                None => scripts::LOCK_FORCE_UNLOCK
                    .key(&*self.name)
                    .key(&self.channel)
                    .arg(0)
                    .arg("PUBLISH")
                    .invoke(c),
                Some(f) => scripts::FAIR_FORCE_UNLOCK
                    .key(&*self.name)
                    .key(&f.queue)
                    .key(&f.timeouts)
                    .key(&self.channel)
                    .arg("PUBLISH")
                    .arg(f.wait_ms)
                    .invoke(c),
            })
    }

    pub(crate) fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.check_name()?;
        self.client.inner.pool.run(&self.name, |c| cmd.query(c))
    }
}
