//! The raw reentrant-lock protocol: runs the scripts of `lua/lock_*.lua` and decodes replies.
//! Knows nothing of guards, waiting or the watchdog.

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
    pub(crate) channel: String,
}

impl RawLock {
    pub(crate) fn new(client: Client, name: &str) -> RawLock {
        RawLock {
            channel: tagged("redisson_lock__channel", name),
            name: name.into(),
            client,
        }
    }

    pub(crate) fn check_name(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::invalid("lock name must not be empty"));
        }
        Ok(())
    }

    /// One acquire attempt: `Ok(None)` when acquired, `Ok(Some(pttl_ms))` when held elsewhere.
    pub(crate) fn acquire(&self, owner: &str, lease: Duration) -> Result<Option<i64>> {
        self.client.inner.pool.run(&self.name, |c| {
            scripts::LOCK_ACQUIRE
                .key(&*self.name)
                .arg(millis(lease))
                .arg(owner)
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
            self.client.inner.pool.run(&self.name, |c| {
                scripts::LOCK_UNLOCK
                    .key(&*self.name)
                    .key(&self.channel)
                    .key(&latch)
                    .arg(0)
                    .arg(millis(lease))
                    .arg(owner)
                    .arg("PUBLISH")
                    .arg(latch_ttl)
                    .invoke(c)
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
        self.client.inner.pool.run(&self.name, |c| {
            scripts::LOCK_FORCE_UNLOCK
                .key(&*self.name)
                .key(&self.channel)
                .arg(0)
                .arg("PUBLISH")
                .invoke(c)
        })
    }

    pub(crate) fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.check_name()?;
        self.client.inner.pool.run(&self.name, |c| cmd.query(c))
    }
}
