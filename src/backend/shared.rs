//! A call's connection whose commands go through a pool's batcher (`batch/`): what the
//! `redis` crate's commands and scripts are given, as `ConnectionLike`.

use redis::{ConnectionLike, RedisError, RedisResult, Value};

use super::batch::{Batcher, Outcome};
use super::checkout::Lender;
use crate::error::Error;

/// A connection for one call whose commands go through the pool's [`Batcher`]. A command
/// that was not sent (or whose connection broke) fails with a stand-in error; the failure
/// itself is kept for [`Shared::failure`], and every later command fails the same way.
pub(crate) struct Shared<'a> {
    pool: &'a dyn Lender,
    batcher: &'a Batcher,
    failure: Option<(Error, bool)>,
    /// Runs once a command of the call is written by this thread (see `batch/mod.rs`).
    written: Option<&'a dyn Fn()>,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(
        pool: &'a dyn Lender,
        batcher: &'a Batcher,
        written: Option<&'a dyn Fn()>,
    ) -> Shared<'a> {
        Shared {
            pool,
            batcher,
            failure: None,
            written,
        }
    }

    /// Why a command of this call was not sent, and whether it may have run.
    pub(crate) fn failure(&mut self) -> Option<(Error, bool)> {
        self.failure.take()
    }

    fn send(&mut self, cmd: &[u8], replies: usize) -> RedisResult<Vec<Value>> {
        if self.failure.is_some() {
            return Err(not_sent());
        }
        match self.batcher.send(self.pool, cmd, replies, self.written) {
            Outcome::Replies(values) => Ok(values),
            Outcome::Broken(e) => Err(e),
            Outcome::NotSent(err, ran) => {
                self.failure = Some((err, ran));
                Err(not_sent())
            }
        }
    }
}

/// The error a closure sees for a command that was not sent; the caller reports the real one.
fn not_sent() -> RedisError {
    RedisError::from((redis::ErrorKind::Client, "command not sent"))
}

impl ConnectionLike for Shared<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let mut values = self.send(cmd, 1)?;
        values
            .pop()
            .ok_or_else(|| RedisError::from((redis::ErrorKind::Client, "no reply")))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut values = self.send(cmd, offset + count)?;
        Ok(values.split_off(offset.min(values.len())))
    }

    fn get_db(&self) -> i64 {
        // Not asked by anything the crate sends; the database is set when connecting.
        0
    }

    fn check_connection(&mut self) -> bool {
        matches!(
            self.req_packed_command(&redis::cmd("PING").get_packed_command()),
            Ok(Value::SimpleString(_))
        )
    }

    fn is_open(&self) -> bool {
        self.failure.is_none()
    }
}
