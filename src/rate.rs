//! The rate limiter (Redisson's `RRateLimiter`): at most a rate of permits per interval,
//! across every client that shares its name.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Value;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::{retry_interrupted, Error, Result};
use crate::events::Admission;
use crate::hold::LockKind;
use crate::keys;
use crate::lock::{Ownership, ThreadOwned};
use crate::names::Named;
use crate::pubsub::{wait, Channel, Tried};
use crate::scripts;
use crate::time::{check_deadline, check_duration, check_wait};

/// Whom a [`RateLimiter`]'s rate binds (Redisson's `RateType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum RateType {
    /// One rate for every client together (Redisson's `OVERALL`, stored as `0`).
    Overall,
    /// The rate for each client apart: each [`Client`] (each Redisson instance) has its
    /// own count (Redisson's `PER_CLIENT`, stored as `1`).
    PerClient,
}

impl RateType {
    /// The type as Redisson stores it in the config's `type` field.
    fn wire(self) -> &'static str {
        match self {
            RateType::Overall => "0",
            RateType::PerClient => "1",
        }
    }
}

/// A [`RateLimiter`]'s settings, as [`RateLimiter::config`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RateConfig {
    /// Whom the rate binds.
    pub rate_type: RateType,
    /// The permits each interval admits.
    pub rate: u64,
    /// The interval (whole milliseconds).
    pub interval: Duration,
    /// How long the limiter lives unused, where a Redisson 3.38 or later client set it
    /// (`keepAliveTime`): every acquire keeps it that long again.
    pub keep_alive: Option<Duration>,
}

/// Permits a [`RateLimiter`] admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admitted {
    /// How many.
    pub permits: u32,
    /// When, by the Redis server's clock: they count against the rate until `at + interval`.
    pub at: SystemTime,
}

/// A limiter's state now, as [`RateLimiter::status`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateStatus {
    /// The permits an acquire could take now.
    pub available: u64,
    /// When the oldest permit taken in the last interval comes back; `None` when none is
    /// taken.
    pub next_back_in: Option<Duration>,
}

/// A distributed rate limiter, wire-compatible with Redisson's `RRateLimiter` (3.17.0 and
/// later): at most [`rate`](RateConfig::rate) permits are admitted in any interval, across
/// every client, Rust or Java, that uses the name.
///
/// Its keys are Redisson's: the config HASH `name` (`rate`, `interval` in ms, `type`), the
/// permits left `{name}:value`, and the permits taken `{name}:permits`, a ZSET of who took
/// how many and when (for [`RateType::PerClient`], `:<client id>` after each of the last
/// two). Its scripts keep Redisson's invariant (the permits left and the permits taken in the
/// last interval add up to the rate) where Redisson's do not: they recount the permits taken
/// instead of counting entries (Redisson before 3.35 over-admits after an acquire of several
/// permits), a [`release`](Self::release) gives permits back once (Redisson 4's gives them
/// back twice), and the time is the Redis server's, not each client's.
///
/// A blocked acquire sleeps until the moment enough permits come back (one script says when)
/// or a [`release`](Self::release) gives some back; it sends nothing meanwhile. Made by
/// [`Client::rate_limiter`]; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// # use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// use redlatch::RateType;
///
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let api = client.rate_limiter("partner-api");
/// api.try_set_rate(RateType::Overall, 100, Duration::from_secs(1))?; // once, by anybody
/// api.acquire(1)?; // blocks until the partner API may be called again
/// // call the partner API
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    client: Client,
    /// The mapped name: the config's key.
    name: Arc<str>,
    /// The name as the caller gave it.
    given: Arc<str>,
    /// See [`keys::rate_keys`].
    keys: Arc<[String; 5]>,
    channel: Arc<str>,
    receipts: keys::UnlockLatches,
}

impl RateLimiter {
    pub(crate) fn new(client: Client, name: Named) -> RateLimiter {
        RateLimiter {
            keys: Arc::new(keys::rate_keys(&name.key, client.id())),
            channel: keys::rate_channel(&name.key).into(),
            receipts: keys::UnlockLatches::new(&name.key, client.id()),
            name: name.key,
            given: name.given,
            client,
        }
    }

    /// The limiter's name: the Redis key of its config.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.rate_limiter("partner-api").name(), "partner-api");
    /// ```
    // `name` is the mapped name (the key); this returns the name as given.
    #[allow(clippy::misnamed_getters)]
    pub fn name(&self) -> &str {
        &self.given
    }

    /// Sets the rate, interval and type unless a complete config is there; returns whether
    /// this call set them. A config that Redisson left half made (its `trySetRate` sets each
    /// field apart) is replaced whole.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, a rate of 0 or over 2^50, or an interval
    /// under a millisecond or over a year; [`Error::WrongType`] if the key is not a limiter's;
    /// connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// use redlatch::RateType;
    /// let api = client.rate_limiter("partner-api");
    /// if api.try_set_rate(RateType::Overall, 100, Duration::from_secs(1))? {
    ///     log::info!("this process set the partner API's rate");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_set_rate(&self, rate_type: RateType, rate: u64, interval: Duration) -> Result<bool> {
        let interval = self.check_rate(rate, interval)?;
        let set: i64 = self.receipted(|c, receipt, ttl| {
            scripts::RATE_TRY_SET
                .key(&self.name)
                .key(receipt)
                .arg(rate)
                .arg(interval)
                .arg(rate_type.wire())
                .arg(ttl)
                .invoke(c)
        })?;
        Ok(set == 1)
    }

    /// Sets the rate, interval and type, whatever they were. What was taken in the last
    /// interval still counts against the new rate: a limiter set again admits no burst
    /// (Redisson's `setRate` forgets what was taken; its 4.4 `updateRate` with `keepState`
    /// is this). A change of type starts afresh, as Redisson's does. Waiters re-check at once.
    ///
    /// # Errors
    ///
    /// As [`try_set_rate`](Self::try_set_rate).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// use redlatch::RateType;
    /// // The partner raised our quota.
    /// client.rate_limiter("partner-api").set_rate(RateType::Overall, 200, Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn set_rate(&self, rate_type: RateType, rate: u64, interval: Duration) -> Result<()> {
        let interval = self.check_rate(rate, interval)?;
        // Sent again after a lost reply: setting the same config twice is setting it once.
        let _left: i64 = self.run_repeatable(|c| {
            self.keyed(&scripts::RATE_SET)
                .key(&self.channel)
                .arg(rate)
                .arg(interval)
                .arg(rate_type.wire())
                .arg(self.client.publish())
                .invoke(c)
        })?;
        Ok(())
    }

    /// The limiter's config; `None` when it has none (never set, deleted, or expired) or
    /// only part of one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::WrongType`] if the key is not a
    /// limiter's, connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(config) = client.rate_limiter("partner-api").config()? {
    ///     println!("{} per {:?}", config.rate, config.interval);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> Result<Option<RateConfig>> {
        self.check_name()?;
        let fields: Vec<Option<String>> = self.run_repeatable(|c| {
            redis::cmd("HMGET")
                .arg(&*self.name)
                .arg(&["rate", "interval", "type", "keepAliveTime"][..])
                .query(c)
        })?;
        Ok(parse_config(&fields))
    }

    /// Takes `permits` permits, blocking the calling thread until the rate admits them.
    /// The thread sleeps until enough permits come back (the script that refuses says when)
    /// or a release or a new rate wakes it; it sends nothing meanwhile.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, no permits, or more permits than the
    /// rate (nothing was taken); [`Error::RateNotSet`] when the limiter has no rate;
    /// [`Error::WrongType`] if a key is not a limiter's; [`Error::Interrupted`],
    /// [`Error::Closed`]; connection errors (an acquire whose reply is lost is sent again, as
    /// often as the client retries, and takes nothing twice; one whose every reply was lost
    /// may have taken the permits: they count against the rate, as used).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let api = client.rate_limiter("partner-api");
    /// let admitted = api.acquire(3)?; // a batch call costs three
    /// log::debug!("admitted at {:?}", admitted.at);
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, permits: u32) -> Result<Admitted> {
        match self.acquire_until(permits, None)? {
            Some(admitted) => Ok(admitted),
            None => unreachable!("a wait without deadline only ends admitted"),
        }
    }

    /// Takes `permits` permits if the rate admits them now; `None` if it does not (nothing
    /// taken).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), without the interrupt.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if client.rate_limiter("partner-api").try_acquire(1)?.is_none() {
    ///     println!("429: try again later");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire(&self, permits: u32) -> Result<Option<Admitted>> {
        self.acquire_until(permits, Some(Instant::now()))
    }

    /// Takes `permits` permits, waiting at most `wait` for the rate to admit them; `None`
    /// if it did not in time.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait over a year; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let api = client.rate_limiter("partner-api");
    /// match api.try_acquire_for(1, Duration::from_millis(200))? {
    ///     Some(_) => { /* call the partner API */ }
    ///     None => println!("busy: answer from the cache"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_for(&self, permits: u32, wait: Duration) -> Result<Option<Admitted>> {
        check_wait(wait)?;
        self.acquire_until(permits, Some(Instant::now() + wait))
    }

    /// Takes `permits` permits, waiting at most until `deadline`; `None` if the rate did
    /// not admit them in time.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_secs(2);
    /// let admitted = client.rate_limiter("partner-api").try_acquire_until(1, deadline)?;
    /// # Ok(()) }
    /// ```
    pub fn try_acquire_until(&self, permits: u32, deadline: Instant) -> Result<Option<Admitted>> {
        check_deadline(deadline)?;
        self.acquire_until(permits, Some(deadline))
    }

    /// The permits an acquire could take now.
    ///
    /// # Errors
    ///
    /// As [`status`](Self::status).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// println!("{} calls left", client.rate_limiter("partner-api").available_permits()?);
    /// # Ok(()) }
    /// ```
    pub fn available_permits(&self) -> Result<u64> {
        Ok(self.status()?.available)
    }

    /// The permits an acquire could take now, and when the next ones come back. Reads only.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, [`Error::RateNotSet`] when the limiter
    /// has no rate, [`Error::WrongType`] if a key is not a limiter's, connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let status = client.rate_limiter("partner-api").status()?;
    /// if status.available == 0 {
    ///     println!("next call in {:?}", status.next_back_in);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> Result<RateStatus> {
        self.check_name()?;
        let (left, back_in): (i64, i64) =
            self.scripted(|c| self.keyed(&scripts::RATE_AVAILABLE).invoke(c))?;
        Ok(RateStatus {
            available: u64::try_from(left).unwrap_or(0),
            next_back_in: u64::try_from(back_in).ok().map(Duration::from_millis),
        })
    }

    /// Gives back up to `permits` permits taken in the last interval (the newest first):
    /// they can be taken again at once, and do not come back a second time when their
    /// interval ends (Redisson 4's `release` does). Returns how many were given back: fewer
    /// than asked where fewer were taken in the last interval. Waiters are woken.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name or no permits, [`Error::RateNotSet`] when
    /// the limiter has no rate, [`Error::WrongType`] if a key is not a limiter's, connection
    /// errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let api = client.rate_limiter("partner-api");
    /// api.acquire(5)?;
    /// // the batch needed only 2 calls
    /// api.release(3)?;
    /// # Ok(()) }
    /// ```
    pub fn release(&self, permits: u32) -> Result<u64> {
        self.check_name()?;
        check_permits(permits)?;
        let given: i64 = self.receipted(|c, receipt, ttl| {
            self.keyed(&scripts::RATE_RELEASE)
                .key(&self.channel)
                .key(receipt)
                .arg(permits)
                .arg(self.client.publish())
                .arg(ttl)
                .invoke(c)
        })?;
        Ok(u64::try_from(given).unwrap_or(0))
    }

    /// Deletes the limiter: its config, the overall permits, and this client's per-client
    /// ones (as Redisson's `delete`: other clients' per-client keys stay until they expire).
    /// Its waiters wake and fail with [`Error::RateNotSet`]. Returns whether it had a config.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// client.rate_limiter("partner-api").delete()?;
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> Result<bool> {
        self.check_name()?;
        // Sent again after a lost reply: what the first call deleted stays deleted.
        let mut lost = false;
        let existed: i64 = retry_interrupted(self.client.inner.backend.retries(), None, || {
            let sent = self.client.inner.backend.run(&self.name, |c| {
                self.keyed(&scripts::RATE_DELETE)
                    .key(&self.channel)
                    .arg(self.client.publish())
                    .invoke(c)
            });
            lost |= sent.as_ref().is_err_and(Error::is_interrupted_read);
            sent
        })?;
        Ok(existed == 1 || lost)
    }

    /// The one acquire path: attempts through the one wait function, sleeping between them
    /// until the permits the last refusal named come back, or a message of the channel.
    fn acquire_until(&self, permits: u32, deadline: Option<Instant>) -> Result<Option<Admitted>> {
        self.check_name()?;
        check_permits(permits)?;
        // One id for the whole call: an attempt sent again after its reply was lost finds
        // its own entry and takes nothing twice. Only a call sent before looks for it.
        let id = *uuid::Uuid::new_v4().as_bytes();
        let mut sent = false;
        let mut admitted = None;
        // Its wait and admission, for the metrics and the history (`top` shows the waits).
        let owner = ThreadOwned.owner_id(&self.client);
        let mut report = Admission::new(&self.client, &self.name, LockKind::RateLimiter, owner);
        let got = wait(
            &self.client.inner.pubsub,
            Channel::permits(&self.channel, permits),
            deadline,
            &mut || {
                let reply: Value = self.resent(|| {
                    self.scripted(|c| {
                        let again = std::mem::replace(&mut sent, true);
                        self.keyed(&scripts::RATE_ACQUIRE)
                            .arg(permits)
                            .arg(&id[..])
                            .arg(if again { "1" } else { "0" })
                            .invoke(c)
                    })
                })?;
                match decode_attempt(&reply)? {
                    Attempt::Taken(at) => {
                        admitted = Some(Admitted { permits, at });
                        Ok(Tried::done())
                    }
                    // Even where they come back after the deadline, a release may give
                    // some back before it: the wait goes on to the deadline.
                    // What is left may serve another waiter that a release woke this
                    // one for (a smaller one).
                    Attempt::BackIn { back_in, left } => {
                        report.refused(deadline);
                        Ok(Tried::again(Some(back_in)).seeing(left))
                    }
                }
            },
        );
        report.ended(&got);
        if !got? {
            log::debug!(
                "rate limiter `{}` did not admit {permits} in time",
                self.name
            );
            return Ok(None);
        }
        Ok(admitted)
    }

    /// Makes an acquire `call` again while its reply is lost with its connection (or does
    /// not come in time), up to the configured retry attempts: sent again with the same id,
    /// an acquire that ran returns its first reply and takes nothing twice, so a lost reply
    /// costs a round trip, not an error (nor permits taken for nobody).
    fn resent<T>(&self, mut call: impl FnMut() -> Result<T>) -> Result<T> {
        let mut left = self.client.inner.backend.retries();
        loop {
            match call() {
                Err(e) if e.breaks_connection() && left > 0 => {
                    left -= 1;
                    log::debug!(
                        "rate limiter `{}`: an acquire's reply was lost ({e}): sent again",
                        self.name
                    );
                }
                outcome => return outcome,
            }
        }
    }

    /// A call of `lua` with the limiter's five keys.
    fn keyed<'a>(&self, lua: &'a scripts::Lua) -> scripts::Call<'a> {
        let mut call = lua.key(&self.keys[0]);
        for key in &self.keys[1..] {
            call.key(key);
        }
        call
    }

    /// Runs a call that may run twice, turning the scripts' own refusals into errors.
    fn scripted<T>(
        &self,
        mut f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.run_repeatable(&mut f).map_err(|e| self.refusal(e))
    }

    /// Runs a call that must not run twice, made repeatable by a receipt (see
    /// [`Client::receipted`]), turning the scripts' own refusals into errors.
    fn receipted<T>(
        &self,
        mut f: impl FnMut(&mut dyn redis::ConnectionLike, &str, u64) -> redis::RedisResult<T>,
    ) -> Result<T> {
        (self.client)
            .receipted(&self.name, Policy::Retried, &self.receipts, &mut f)
            .map_err(|e| self.refusal(e))
    }

    fn run_repeatable<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        (self.client.inner.backend).run_repeatable(&self.name, Policy::Retried, f)
    }

    /// A script's `NORATE` and `OVERRATE` errors as [`Error::RateNotSet`] and
    /// [`Error::InvalidArgument`]; any other error as it is.
    fn refusal(&self, e: Error) -> Error {
        match &e {
            Error::Redis(r) if r.code() == Some("NORATE") => Error::RateNotSet {
                name: self.name.to_string(),
            },
            Error::Redis(r) if r.code() == Some("OVERRATE") => Error::invalid(format!(
                "{} (rate limiter `{}`)",
                r.detail().unwrap_or("more permits than the rate"),
                self.name
            )),
            _ => e,
        }
    }

    fn check_name(&self) -> Result<()> {
        crate::names::check_name("rate limiter", &self.name)
    }

    /// Checks a rate and interval; the interval in whole ms.
    fn check_rate(&self, rate: u64, interval: Duration) -> Result<u64> {
        self.check_name()?;
        if rate == 0 {
            return Err(Error::invalid("a rate must admit at least 1 permit"));
        }
        if rate > MAX_RATE {
            return Err(Error::invalid(format!(
                "a rate of {rate} is over {MAX_RATE} (2^50), which the scripts' numbers \
                 count exactly"
            )));
        }
        check_duration("a rate's interval", interval)?;
        if interval < Duration::from_millis(1) {
            return Err(Error::invalid(format!(
                "a rate's interval of {interval:?} is under a millisecond"
            )));
        }
        Ok(interval.as_millis() as u64)
    }
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.name)
            .finish()
    }
}

/// The highest rate: Lua's numbers (doubles) count every integer up to 2^53 exactly, and
/// the scripts add up to three counts of up to the rate.
const MAX_RATE: u64 = 1 << 50;

fn check_permits(permits: u32) -> Result<()> {
    if permits == 0 {
        return Err(Error::invalid("permits must be at least 1"));
    }
    Ok(())
}

/// What one acquire script said.
enum Attempt {
    /// Taken at this server time.
    Taken(SystemTime),
    /// Refused: enough permits are back in `back_in`; `left` are left now.
    BackIn { back_in: Duration, left: i64 },
}

/// `<ms>` taken at that time (server clock), `{-<ms>, left}` refused: back in that long,
/// with the permits left now (see `lua/rate_acquire.lua`).
fn decode_attempt(reply: &Value) -> Result<Attempt> {
    let bad = || Error::Protocol(format!("rate acquire replied {reply:?}"));
    match reply {
        Value::Int(ms) if *ms > 0 => Ok(Attempt::Taken(
            UNIX_EPOCH + Duration::from_millis(*ms as u64),
        )),
        Value::Array(parts) => match parts.as_slice() {
            [Value::Int(ms), Value::Int(left)] if *ms < 0 && *left >= 0 => Ok(Attempt::BackIn {
                back_in: Duration::from_millis(ms.unsigned_abs()),
                left: *left,
            }),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// The config from HMGET's `rate`, `interval`, `type`, `keepAliveTime`; `None` unless the
/// first three make one.
pub(crate) fn parse_config(fields: &[Option<String>]) -> Option<RateConfig> {
    let field = |i: usize| fields.get(i).and_then(Option::as_deref);
    let rate = field(0)?.parse::<u64>().ok()?;
    let interval = field(1)?.parse::<u64>().ok()?;
    let rate_type = match field(2)? {
        "0" => RateType::Overall,
        "1" => RateType::PerClient,
        _ => return None,
    };
    let keep_alive = field(3)
        .and_then(|k| k.parse::<u64>().ok())
        .filter(|&k| k > 0)
        .map(Duration::from_millis);
    Some(RateConfig {
        rate_type,
        rate,
        interval: Duration::from_millis(interval),
        keep_alive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_as_redisson_writes_them() {
        let f = |v: &[Option<&str>]| v.iter().map(|s| s.map(str::to_owned)).collect::<Vec<_>>();
        let c = parse_config(&f(&[Some("10"), Some("1000"), Some("1"), None])).unwrap();
        assert_eq!(c.rate, 10);
        assert_eq!(c.interval, Duration::from_secs(1));
        assert_eq!(c.rate_type, RateType::PerClient);
        assert_eq!(c.keep_alive, None);
        let c = parse_config(&f(&[Some("5"), Some("60000"), Some("0"), Some("120000")])).unwrap();
        assert_eq!(c.rate_type, RateType::Overall);
        assert_eq!(c.keep_alive, Some(Duration::from_secs(120)));
        for half in [
            [None, Some("1000"), Some("0"), None],
            [Some("5"), None, Some("0"), None],
            [Some("5"), Some("1000"), None, None],
            [Some("5"), Some("1000"), Some("2"), None],
            [Some("x"), Some("1000"), Some("0"), None],
        ] {
            assert_eq!(parse_config(&f(&half)), None, "{half:?}");
        }
    }

    #[test]
    fn replies_decode_as_taken_or_refused() {
        match decode_attempt(&Value::Int(1_733_000_000_123)).unwrap() {
            Attempt::Taken(at) => {
                assert_eq!(at, UNIX_EPOCH + Duration::from_millis(1_733_000_000_123))
            }
            Attempt::BackIn { .. } => panic!("taken"),
        }
        match decode_attempt(&Value::Array(vec![Value::Int(-250), Value::Int(2)])).unwrap() {
            Attempt::BackIn { back_in, left } => {
                assert_eq!((back_in, left), (Duration::from_millis(250), 2))
            }
            Attempt::Taken(_) => panic!("refused"),
        }
        assert!(decode_attempt(&Value::Int(-250)).is_err());
        assert!(decode_attempt(&Value::Nil).is_err());
        assert!(decode_attempt(&Value::Int(0)).is_err());
        assert!(decode_attempt(&Value::BulkString(b"1733000000123".to_vec())).is_err());
    }
}
