//! A lock's place in Redis as its kind sees it: the client that reaches it and its mapped
//! name, which every key, channel and script call of the lock is made from.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::Result;

pub(crate) struct LockKey {
    pub(crate) client: Client,
    /// The mapped name: the key of the lock's hash, from which its helper keys and
    /// channels are made.
    pub(crate) name: Arc<str>,
    /// A bound on each call's connect and reply times (a RedLock member's node timeout);
    /// such a call runs on a connection of its own and is not retried.
    pub(crate) bound: Option<Duration>,
    /// The priority its waiters wait with ([`Lock::with_priority`](crate::Lock::with_priority)).
    pub(crate) priority: Option<u32>,
}

impl LockKey {
    pub(crate) fn check_name(&self) -> Result<()> {
        crate::names::check_name("lock", &self.name)
    }

    /// Runs `f` on a connection to the node of the lock's slot.
    pub(crate) fn run<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.client.inner.backend.run_with(
            &self.name,
            self.bound.map_or(Policy::Retried, Policy::Bounded),
            f,
        )
    }

    /// As [`run`](Self::run), for a call that may run twice: sent again when its reply's
    /// read is interrupted (see `Backend::run_repeatable`).
    pub(crate) fn run_repeatable<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.client.inner.backend.run_repeatable(
            &self.name,
            self.bound.map_or(Policy::Retried, Policy::Bounded),
            f,
        )
    }

    /// As [`run`](Self::run), with `written` run once the command is written, while its
    /// reply is still to come (or else as the call returns: see `Backend::run_written`).
    pub(crate) fn run_written<T>(
        &self,
        written: &dyn Fn(),
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let policy = self.bound.map_or(Policy::Retried, Policy::Bounded);
        self.client
            .inner
            .backend
            .run_written(&self.name, policy, written, f)
    }

    /// Sends `cmd` (about this lock, one that may run twice: a read) to the node of its slot.
    pub(crate) fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.check_name()?;
        self.run_repeatable(|c| cmd.query(c))
    }
}
