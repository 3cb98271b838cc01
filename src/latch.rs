//! The count-down latch (Redisson's `RCountDownLatch`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Policy;
use crate::client::Client;
use crate::error::{retry_interrupted, Error, Result};
use crate::keys;
use crate::names::Named;
use crate::pubsub::{wait, Channel, Tried};
use crate::scripts;
use crate::time::{check_deadline, check_wait};

/// Published on the channel when a count is set (Redisson's `newCountMessage`).
const NEW_COUNT_MESSAGE: &str = "1";
/// Published on the channel when the latch opens (Redisson's `zeroCountMessage`).
const ZERO_COUNT_MESSAGE: &str = "0";

/// A distributed count-down latch, wire-compatible with Redisson's `RCountDownLatch`.
///
/// The latch is a STRING key `name` holding the count; it is open when the key is absent.
/// [`try_set_count`](Self::try_set_count) closes an open latch, each
/// [`count_down`](Self::count_down) takes one off, and the one that reaches zero deletes the
/// key and wakes every waiter, in every process, Rust or Java. Waiting threads block on
/// the channel `redisson_countdownlatch__channel__{name}` and send nothing while they wait.
///
/// Made by [`Client::count_down_latch`]; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let ready = client.count_down_latch("workers-ready");
/// ready.try_set_count(3)?;
/// for _ in 0..3 {
///     let ready = ready.clone();
///     std::thread::spawn(move || ready.count_down());
/// }
/// ready.await_zero()?; // returns once all three counted down
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    pub(crate) client: Client,
    /// The mapped name: the key of the count.
    pub(crate) name: Arc<str>,
    /// The name as the caller gave it.
    given: Arc<str>,
    channel: Arc<str>,
    /// The keys of this client's receipts for this latch's changes (see
    /// `lua/latch_receipt.lua`).
    receipts: keys::UnlockLatches,
}

impl CountDownLatch {
    pub(crate) fn new(client: Client, name: Named) -> CountDownLatch {
        CountDownLatch {
            channel: keys::latch_channel(&name.key).into(),
            receipts: keys::UnlockLatches::new(&name.key, client.id()),
            name: name.key,
            given: name.given,
            client,
        }
    }

    /// The latch's name: the Redis key of its count.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.count_down_latch("batch-42").name(), "batch-42");
    /// ```
    // `name` is the mapped name (the key); this returns the name as given.
    #[allow(clippy::misnamed_getters)]
    pub fn name(&self) -> &str {
        &self.given
    }

    /// Sets the count if the latch is open (its key absent) and tells waiters; returns
    /// whether it was set. A latch that is counting down keeps its count: `Ok(false)`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, a zero count (an open latch is the absent
    /// key: there is no count of zero to set) or one over `i64::MAX`; [`Error::WrongType`] if
    /// the key is not a latch (left alone); connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("batch-42");
    /// if latch.try_set_count(10)? {
    ///     // this caller started the batch
    /// }
    /// assert!(!latch.try_set_count(5)?); // already set: the count stays 10
    /// # Ok(()) }
    /// ```
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.check_name()?;
        if count == 0 {
            return Err(Error::invalid(
                "latch count must be non-zero (an open latch has no key)",
            ));
        }
        if i64::try_from(count).is_err() {
            return Err(Error::invalid(format!(
                "latch count {count} does not fit in a signed 64-bit integer"
            )));
        }
        let set: i64 = self.receipted(|c, receipt, ttl| {
            scripts::LATCH_TRY_SET_COUNT
                .key(&self.name)
                .key(&self.channel)
                .key(receipt)
                .arg(NEW_COUNT_MESSAGE)
                .arg(count)
                .arg(self.client.publish())
                .arg(ttl)
                .invoke(c)
        })?;
        Ok(set == 1)
    }

    /// Takes one off the count and returns the count left; the call that reaches zero
    /// deletes the key and wakes every waiter. On an open latch it does nothing and returns 0.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] if the key is not a
    /// latch (left alone), connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("batch-42");
    /// latch.try_set_count(2)?;
    /// assert_eq!(latch.count_down()?, 1);
    /// assert_eq!(latch.count_down()?, 0); // open: waiters return
    /// assert_eq!(latch.count_down()?, 0); // no-op
    /// # Ok(()) }
    /// ```
    pub fn count_down(&self) -> Result<u64> {
        self.check_name()?;
        let left: String = self.receipted(|c, receipt, ttl| {
            scripts::LATCH_COUNT_DOWN
                .key(&self.name)
                .key(&self.channel)
                .key(receipt)
                .arg(ZERO_COUNT_MESSAGE)
                .arg(self.client.publish())
                .arg(ttl)
                .invoke(c)
        })?;
        let left = parse_count(&left)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| Error::Protocol(format!("count-down script replied {left:?}")))?;
        if left == 0 {
            log::debug!("latch `{}` is open", self.name);
        }
        Ok(left)
    }

    /// The current count; 0 when the latch is open.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] if the key is not a
    /// latch, connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("batch-42");
    /// latch.try_set_count(3)?;
    /// assert_eq!(latch.count()?, 3);
    /// # Ok(()) }
    /// ```
    pub fn count(&self) -> Result<u64> {
        self.check_name()?;
        let raw: Option<String> =
            self.client
                .inner
                .backend
                .run_repeatable(&self.name, Policy::Retried, |c| {
                    redis::cmd("GET").arg(&*self.name).query(c)
                })?;
        match raw {
            None => Ok(0),
            // A count <= 0 (never left by Redisson or redlatch) reads as open, as in Redisson's
            // `await`, which waits while `getCount() > 0`.
            Some(raw) => {
                parse_count(&raw)
                    .map(|n| n.max(0) as u64)
                    .ok_or_else(|| Error::WrongType {
                        key: self.name.to_string(),
                    })
            }
        }
    }

    /// Blocks the calling thread until the latch is open (count zero or key deleted).
    ///
    /// The thread waits for the latch's messages (no polling) and re-checks the count on each.
    /// Returns at once if the latch is open.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] if the key is not a
    /// latch, connection errors (the wait is abandoned).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// client.count_down_latch("workers-ready").await_zero()?;
    /// // every worker has counted down
    /// # Ok(()) }
    /// ```
    pub fn await_zero(&self) -> Result<()> {
        let open = self.wait(None)?;
        debug_assert!(open, "a wait without deadline only ends when open");
        Ok(())
    }

    /// Blocks until the latch is open, at most `wait`. Returns `Ok(false)` if the wait ran out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year (a zero wait is one look at the
    /// count); otherwise as [`await_zero`](Self::await_zero).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("workers-ready");
    /// if !latch.await_for(Duration::from_secs(5))? {
    ///     println!("{} workers still missing", latch.count()?);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn await_for(&self, wait: Duration) -> Result<bool> {
        check_wait(wait)?;
        self.await_until(Instant::now() + wait)
    }

    /// Blocks until the latch is open, at most until `deadline` (a deadline in the past checks
    /// once). Returns `Ok(false)` if the deadline passed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`await_zero`](Self::await_zero).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(250);
    /// let open = client.count_down_latch("workers-ready").await_until(deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn await_until(&self, deadline: Instant) -> Result<bool> {
        check_deadline(deadline)?;
        self.wait(Some(deadline))
    }

    /// Deletes the latch, opening it whatever its count, and wakes its waiters: they re-check,
    /// find the count at 0 and return as if it had been counted down. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] if the key is not a
    /// latch (it is left alone), connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("batch-42");
    /// latch.try_set_count(10)?;
    /// assert!(latch.delete()?); // the batch is abandoned: release everyone waiting for it
    /// assert_eq!(latch.count()?, 0);
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> Result<bool> {
        self.check_name()?;
        // Sent again if its reply is lost to an interrupted read: a latch found gone then
        // was deleted by the first call.
        let mut lost = false;
        let deleted: i64 = retry_interrupted(self.client.inner.backend.retries(), None, || {
            let sent = self.opening(&scripts::LATCH_DELETE);
            lost |= sent.as_ref().is_err_and(Error::is_interrupted_read);
            sent
        })?;
        Ok(deleted == 1 || lost)
    }

    /// Runs a script that may open the latch (KEYS: count, channel; ARGV: the zero message,
    /// the publish command).
    fn opening<T: redis::FromRedisValue>(&self, script: &scripts::Lua) -> Result<T> {
        self.client.inner.backend.run(&self.name, |c| {
            script
                .key(&self.name)
                .key(&self.channel)
                .arg(ZERO_COUNT_MESSAGE)
                .arg(self.client.publish())
                .invoke(c)
        })
    }

    /// Runs a script that changes the latch, `f` given its receipt key and the receipt's TTL
    /// in ms: sent again with the same receipt when its reply's read is interrupted (the
    /// script then returns the first call's reply). The receipt is deleted with a later
    /// write once the reply came.
    fn receipted<T>(
        &self,
        mut f: impl FnMut(&mut dyn redis::ConnectionLike, &str, u64) -> redis::RedisResult<T>,
    ) -> Result<T> {
        (self.client).receipted(&self.name, Policy::Retried, &self.receipts, &mut f)
    }

    fn check_name(&self) -> Result<()> {
        crate::names::check_name("latch", &self.name)
    }

    /// The one wait path, through the one wait function: true once the latch is open, false
    /// when `deadline` passes (never without one). Every message of the channel, and every
    /// pub/sub reconnect, wakes every waiter to re-check.
    fn wait(&self, deadline: Option<Instant>) -> Result<bool> {
        let open = wait(
            &self.client.inner.pubsub,
            Channel::all(&self.channel),
            deadline,
            &mut || {
                Ok(match self.count()? {
                    0 => Tried::done(),
                    _ => Tried::again(None),
                })
            },
        )?;
        if !open {
            log::debug!("wait on latch `{}` ran out", self.name);
        }
        Ok(open)
    }
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish()
    }
}

/// Parses a count as Redis's DECR reads it: an optional `-` and digits without leading zeros
/// (`0` alone), in `i64`. `None` for anything else (the key is not a latch).
fn parse_count(raw: &str) -> Option<i64> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    let canonical = raw == "0"
        || (digits.starts_with(|c: char| ('1'..='9').contains(&c))
            && digits.bytes().all(|b| b.is_ascii_digit()));
    canonical.then(|| raw.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::parse_count;

    #[test]
    fn counts_parse_as_redis_integers_only() {
        assert_eq!(parse_count("0"), Some(0));
        assert_eq!(parse_count("17"), Some(17));
        assert_eq!(parse_count("-1"), Some(-1));
        assert_eq!(parse_count("9223372036854775807"), Some(i64::MAX));
        for bad in [
            "",
            "-",
            "-0",
            "007",
            "+5",
            " 5",
            "1.5",
            "abc",
            "9223372036854775808",
        ] {
            assert_eq!(parse_count(bad), None, "{bad:?}");
        }
    }
}
