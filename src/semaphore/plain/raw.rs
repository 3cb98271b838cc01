//! The plain semaphore's protocol: the `lua/semaphore_*.lua` calls on the count, the count
//! read and decoded, and the acquire attempt. Knows nothing of waiting or guards.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::names::Named;
use crate::pubsub::Tried;
use crate::scripts;
use crate::time::millis;

/// One plain semaphore's keys, and the client its calls run on.
#[derive(Clone)]
pub(super) struct RawSemaphore {
    pub(super) client: Client,
    /// The mapped name: the key of the count.
    pub(super) name: Arc<str>,
    /// The name as the caller gave it.
    pub(super) given: Arc<str>,
    /// `redisson_sc:{name}`, on which the new count is published.
    pub(super) channel: Arc<str>,
}

impl RawSemaphore {
    pub(super) fn new(client: Client, name: Named) -> RawSemaphore {
        RawSemaphore {
            channel: keys::semaphore_channel(&name.key).into(),
            name: name.key,
            given: name.given,
            client,
        }
    }

    /// Sets the count to `permits` if the semaphore does not exist, with `expiry` if given;
    /// returns whether it did.
    pub(super) fn try_set(&self, permits: u32, expiry: Option<Duration>) -> Result<bool> {
        self.run(|c| {
            let mut call = scripts::SEMAPHORE_TRY_SET_PERMITS.key(&self.name);
            call.key(&self.channel)
                .arg(permits)
                .arg(self.client.publish());
            if let Some(expiry) = expiry {
                call.arg(millis(expiry));
            }
            call.invoke(c)
        })
    }

    /// Sets the count to `permits` and publishes it.
    pub(super) fn set(&self, permits: u32) -> Result<()> {
        self.run(|c| {
            scripts::SEMAPHORE_SET
                .key(&self.name)
                .key(&self.channel)
                .arg(permits)
                .arg(self.client.publish())
                .invoke(c)
        })
    }

    /// Takes every available permit; returns how many.
    pub(super) fn drain(&self) -> Result<i64> {
        self.run(|c| scripts::SEMAPHORE_DRAIN.key(&self.name).invoke(c))
    }

    /// Adds `delta` to the count and publishes it; returns the new count.
    pub(super) fn add(&self, delta: i64) -> Result<i64> {
        self.run(|c| {
            scripts::SEMAPHORE_ADD_PERMITS
                .key(&self.name)
                .key(&self.channel)
                .arg(delta)
                .arg(self.client.publish())
                .invoke(c)
        })
    }

    /// The count: 0 for no key, [`Error::WrongType`] for a value that is no number.
    pub(super) fn available(&self) -> Result<i64> {
        let value: Option<String> = self.run(|c| redis::cmd("GET").arg(&*self.name).query(c))?;
        match value {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| Error::WrongType {
                key: self.name.to_string(),
            }),
        }
    }

    /// One attempt: done if the permits were taken; either way, the count it saw (after
    /// taking them) goes to the other waiters.
    pub(super) fn attempt(&self, permits: u32) -> Result<Tried> {
        let (taken, count): (i64, i64) = self.run(|c| {
            scripts::SEMAPHORE_ACQUIRE
                .key(&self.name)
                .arg(permits)
                .invoke(c)
        })?;
        let tried = if taken == 1 {
            Tried::done()
        } else {
            Tried::again(None)
        };
        Ok(tried.seeing(count))
    }

    fn run<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.client.inner.backend.run(&self.name, f)
    }
}
