//! The plain semaphore's protocol: the `lua/semaphore_*.lua` calls on the count, the count
//! read and decoded, and the acquire attempt. Knows nothing of waiting or guards.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::lock::priority;
use crate::names::Named;
use crate::pubsub::Tried;
use crate::scripts;
use crate::time::millis;
use crate::watchdog::{BatchRenewal, Settle, Settled};

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
    /// `redlatch_semaphore:{name}`: which generation of the semaphore this is.
    pub(super) generation: Arc<str>,
    /// The keys of this client's acquire receipts for this semaphore.
    receipts: keys::UnlockLatches,
    /// A bound on each call's times (a settle's, on the watchdog thread); the pool's own
    /// settings when `None`.
    bound: Option<Duration>,
    /// The priority its acquires wait with ([`Semaphore::with_priority`](super::Semaphore::with_priority)).
    pub(super) priority: Option<u32>,
}

/// A waiter with a priority, as one acquire call's attempts name it.
pub(super) struct Queued<'a> {
    /// The call's id, the same at each attempt: `<client id>:<request number>`.
    pub(super) id: &'a str,
    /// Whether the call waits if refused (it joins the queue, or keeps its place).
    pub(super) waits: bool,
}

/// The most a settle's call waits for its reply: on the watchdog thread, it holds up renewals
/// while the server does not answer.
const SETTLE_BOUND: Duration = Duration::from_secs(1);

/// One acquire attempt: what it tells the waiters, and for one that took the permits, the
/// semaphore's generation and the request's number (which names the guard to the watchdog).
pub(super) struct Attempt {
    pub(super) tried: Tried,
    pub(super) generation: Option<Arc<str>>,
    pub(super) request: u64,
    /// Nothing was taken because nobody set the semaphore up: it has no count at all.
    pub(super) unset: bool,
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Released {
    /// Given back: the count after.
    Given(i64),
    /// Dropped, the semaphore being no longer the generation the permits came from: the
    /// count as it is.
    Dropped(i64),
}

impl RawSemaphore {
    pub(super) fn new(client: Client, name: Named) -> RawSemaphore {
        RawSemaphore {
            channel: keys::semaphore_channel(&name.key).into(),
            generation: keys::semaphore_generation(&name.key).into(),
            receipts: keys::UnlockLatches::new(&name.key, client.id()),
            name: name.key,
            given: name.given,
            client,
            bound: None,
            priority: None,
        }
    }

    /// Sets the count to `permits` if the semaphore does not exist, with `expiry` if given;
    /// returns whether it did. Sent again after an interrupted read: the generation it wrote
    /// (unique to this call) tells that the first call set it.
    pub(super) fn try_set(&self, permits: u32, expiry: Option<Duration>) -> Result<bool> {
        let generation = self.new_generation();
        self.run_repeatable(|c| {
            let mut call = scripts::SEMAPHORE_TRY_SET_PERMITS.key(&self.name);
            call.key(&self.channel)
                .key(&self.generation)
                .arg(permits)
                .arg(self.client.publish())
                .arg(&generation);
            if let Some(expiry) = expiry {
                call.arg(millis(expiry));
            }
            call.invoke(c)
        })
    }

    /// Sets the count to `permits` and publishes it. Sent again after an interrupted read, as
    /// the same set made a moment later.
    pub(super) fn set(&self, permits: u32) -> Result<()> {
        let generation = self.new_generation();
        self.run_repeatable(|c| {
            scripts::SEMAPHORE_SET
                .key(&self.name)
                .key(&self.channel)
                .key(&self.generation)
                .arg(permits)
                .arg(self.client.publish())
                .arg(&generation)
                .invoke(c)
        })
    }

    /// Takes every available permit; returns how many.
    pub(super) fn drain(&self) -> Result<i64> {
        self.receipted(|c, receipt, ttl| {
            scripts::SEMAPHORE_DRAIN
                .key(&self.name)
                .key(receipt)
                .arg(ttl)
                .invoke(c)
        })
    }

    /// Adds `delta` to the count and publishes it; returns the new count.
    pub(super) fn add(&self, delta: i64) -> Result<i64> {
        self.receipted(|c, receipt, ttl| {
            scripts::SEMAPHORE_ADD_PERMITS
                .key(&self.name)
                .key(&self.channel)
                .key(receipt)
                .arg(delta)
                .arg(self.client.publish())
                .arg(ttl)
                .invoke(c)
        })
    }

    /// A call with a new receipt (a key of this call's, which makes a call sent again after
    /// an interrupted read return the first call's reply and change nothing more), and the
    /// receipt's time to live in ms; the receipt is deleted later once the reply came.
    fn receipted<T>(
        &self,
        mut f: impl FnMut(&mut dyn redis::ConnectionLike, &str, u64) -> redis::RedisResult<T>,
    ) -> Result<T> {
        (self.client).receipted(&self.name, self.policy(), &self.receipts, &mut f)
    }

    /// Deletes the count and the generation; whether the count existed. Sent again after an
    /// interrupted read (a `DEL` again changes nothing; the answer is then "did not exist").
    pub(super) fn delete(&self) -> Result<bool> {
        let deleted: Vec<i64> = self.run_repeatable(|c| {
            redis::pipe()
                .del(&*self.name)
                .del(&*self.generation)
                .query(c)
        })?;
        Ok(deleted.first().is_some_and(|&n| n > 0))
    }

    /// Takes the waiter `id` out of the queue of waiters with a priority (a wait given up),
    /// waking the next one if it was first and permits are available.
    pub(super) fn leave(&self, id: &str) -> Result<bool> {
        self.run_repeatable(|c| {
            scripts::PRIORITY_LEAVE
                .key(&keys::priority_queue(&self.name))
                .key(&keys::priority_alive(&self.name))
                .key(&self.name)
                .key(&self.channel)
                .arg(id)
                .arg(self.client.publish())
                .invoke(c)
        })
    }

    /// The count: 0 for no key, [`Error::WrongType`] for a value that is no number.
    pub(super) fn available(&self) -> Result<i64> {
        let value: Option<String> =
            self.run_repeatable(|c| redis::cmd("GET").arg(&*self.name).query(c))?;
        match value {
            None => Ok(0),
            Some(v) => v.parse().map_err(|_| Error::WrongType {
                key: self.name.to_string(),
            }),
        }
    }

    /// One attempt: done if the permits were taken; either way, the count it saw (after
    /// taking them) goes to the other waiters.
    ///
    /// An attempt whose reply never came may have taken the permits (or take them when the
    /// server answers again): its receipt tells, and it is settled then (see the watchdog's
    /// `doubt.rs`).
    ///
    /// `queued`: for a waiter with a priority, who it is in the queue.
    pub(super) fn attempt(&self, permits: u32, queued: Option<Queued<'_>>) -> Result<Attempt> {
        let inner = &self.client.inner;
        let request = inner.requests.fetch_add(1, Ordering::Relaxed);
        let receipt = self.receipts.key(request);
        let outcome = self.run(|c| match (&queued, self.priority) {
            (Some(queued), Some(priority)) => {
                let mut call = scripts::SEMAPHORE_PRIORITY_ACQUIRE.key(&self.name);
                call.key(&receipt)
                    .key(&self.generation)
                    .key(&keys::priority_queue(&self.name))
                    .key(&keys::priority_alive(&self.name))
                    .key(&self.channel)
                    .arg(permits)
                    .arg(millis(keys::RECEIPT_TTL));
                call.arg(queued.id);
                for arg in priority::gate_args(priority, queued.waits) {
                    call.arg(arg);
                }
                call.arg(self.client.publish()).invoke(c)
            }
            _ => scripts::SEMAPHORE_ACQUIRE
                .key(&self.name)
                .key(&receipt)
                .key(&self.generation)
                .arg(permits)
                .arg(millis(keys::RECEIPT_TTL))
                .invoke(c),
        });
        let reply: Value = match outcome {
            Ok(reply) => reply,
            Err(e) => {
                if e.breaks_connection() {
                    let receipt: Arc<str> = receipt.into();
                    let settle = self.settler(Arc::clone(&receipt));
                    inner.watchdog.doubt(&self.name, &receipt, settle);
                }
                if e.is_interrupted_read() {
                    // A stop and resume cut the reply's read: what the attempt took is
                    // given back by that settle; the caller's wait tries again.
                    log::debug!("acquire of `{}` lost its reply to a stop ({e})", self.name);
                    return Ok(Attempt {
                        tried: Tried::again(None),
                        generation: None,
                        request,
                        unset: false,
                    });
                }
                return Err(e);
            }
        };
        let bad = || Error::Protocol(format!("semaphore acquire script replied {reply:?}"));
        let (tried, count, generation, unset) = match &reply {
            // Taken: the receipt's value, "<taken>:<left>:<generation>".
            Value::BulkString(value) => {
                let value = std::str::from_utf8(value).map_err(|_| bad())?;
                let mut parts = value.splitn(3, ':');
                let (_taken, left, generation) = (parts.next(), parts.next(), parts.next());
                let left: i64 = left.and_then(|l| l.parse().ok()).ok_or_else(bad)?;
                let generation = generation.ok_or_else(bad)?.into();
                inner.backend.delete_later(receipt);
                (Tried::done(), left, Some(generation), false)
            }
            Value::Array(items) => match items.as_slice() {
                [Value::Int(0), Value::Int(available), Value::Int(exists)] => {
                    (Tried::again(None), *available, None, *exists == 0)
                }
                // Available, but a waiter ranked first is queued: those permits are its.
                [Value::Int(0), Value::Int(_), Value::Int(_), Value::Int(ms)] => {
                    let within = Duration::from_millis((*ms).max(1) as u64);
                    return Ok(Attempt {
                        tried: Tried::again(Some(within)),
                        generation: None,
                        request,
                        unset: false,
                    });
                }
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        Ok(Attempt {
            tried: tried.seeing(count),
            generation,
            request,
            unset,
        })
    }

    /// Gives `permits` back once, and returns the count after: a call whose reply is lost
    /// is tried again with the same latch (as many more times as the configured retry
    /// attempts, at least twice), which makes a retry of a release that ran change nothing. One still without a reply is tried again when the server
    /// answers (see the watchdog's `doubt.rs`), so a permit is neither lost nor given twice
    /// (as long as the server answers within [`RECEIPT_TTL`](keys::RECEIPT_TTL)).
    pub(super) fn release(&self, permits: u32, generation: Option<&str>) -> Result<Released> {
        let inner = &self.client.inner;
        let latch = self
            .receipts
            .key(inner.requests.fetch_add(1, Ordering::Relaxed));
        let retries = inner.backend.retries().max(2);
        let mut tries = 0;
        loop {
            tries += 1;
            match self.release_once(&latch, permits, generation) {
                Err(e) if e.breaks_connection() && tries <= retries => {
                    log::debug!("release of `{}` lost its reply ({e}); retrying", self.name);
                }
                Err(e) if e.breaks_connection() => {
                    let latch: Arc<str> = latch.into();
                    let generation = generation.map(Arc::from);
                    let settle = self.release_later(Arc::clone(&latch), permits, generation);
                    inner.watchdog.doubt(&self.name, &latch, settle);
                    return Err(e);
                }
                Err(e) => return Err(e),
                Ok(Released::Dropped(count)) => return Ok(Released::Dropped(count)),
                Ok(released) => {
                    inner.backend.delete_later(latch);
                    return Ok(released);
                }
            }
        }
    }

    /// One try of `lua/semaphore_release.lua` with `latch`.
    fn release_once(
        &self,
        latch: &str,
        permits: u32,
        generation: Option<&str>,
    ) -> Result<Released> {
        let reply: Value = self.run(|c| {
            let mut call = scripts::SEMAPHORE_RELEASE.key(&self.name);
            call.key(&self.channel)
                .key(latch)
                .key(&self.generation)
                .arg(permits)
                .arg(self.client.publish())
                .arg(millis(keys::RECEIPT_TTL));
            if let Some(generation) = generation {
                call.arg(generation);
            }
            call.invoke(c)
        })?;
        match reply {
            Value::Int(count) => Ok(Released::Given(count)),
            Value::Array(items) => match items.as_slice() {
                [Value::Int(0), Value::Int(available)] => Ok(Released::Dropped(*available)),
                _ => Err(Error::Protocol(format!(
                    "semaphore release script replied {items:?}"
                ))),
            },
            other => Err(Error::Protocol(format!(
                "semaphore release script replied {other:?}"
            ))),
        }
    }

    /// A new id for a waiter with a priority: `<client id>:<request number>`, unique across
    /// clients.
    pub(super) fn waiter_id(&self) -> String {
        let request = self.client.inner.requests.fetch_add(1, Ordering::Relaxed);
        format!("{}:{request}", self.client.id())
    }

    /// A generation for a semaphore this client makes (or finds without one): its id and a
    /// request number, unique across clients.
    fn new_generation(&self) -> String {
        let request = self.client.inner.requests.fetch_add(1, Ordering::Relaxed);
        self.generation_of(request)
    }

    /// The generation of request number `request`: the request id that ends its receipt's
    /// key, which is also what `lua/semaphore_acquire.lua` writes where there is none.
    fn generation_of(&self, request: u64) -> String {
        format!("{}-{request}", self.client.id())
    }

    /// Logs that a thread is about to wait on a semaphore that has no count: nobody set it
    /// up, and it has no permits until somebody does (Redisson's semantics, and a trap when
    /// the setter runs after the waiters). A warning the first time in this client, then at
    /// debug.
    pub(super) fn warn_unset(&self) {
        let first = !self.client.inner.unset_warned.swap(true, Ordering::Relaxed);
        let level = if first {
            log::Level::Warn
        } else {
            log::Level::Debug
        };
        log::log!(
            level,
            "waiting on semaphore `{}`, which nobody has set up: it has no permits until \
             somebody calls try_set_permits, set_permits or add_permits (or releases some)",
            self.given
        );
    }

    /// The release of `permits` with `latch`, tried again once the server answers.
    fn release_later(&self, latch: Arc<str>, permits: u32, generation: Option<Arc<str>>) -> Settle {
        let client = Arc::downgrade(&self.client.inner);
        let name = self.named();
        Box::new(move |_| {
            let Some(inner) = client.upgrade() else {
                return Ok(Settled::Done);
            };
            let raw = RawSemaphore::new(Client { inner }, name.clone()).bounded();
            if let Released::Dropped(_) =
                raw.release_once(&latch, permits, generation.as_deref())?
            {
                log::warn!(
                    "`{}`: {permits} permit(s) not given back: the semaphore was made anew \
                     since they were taken",
                    raw.name
                );
            }
            Ok(Settled::Done)
        })
    }

    /// The name as [`Named`], to make this semaphore again in a settle.
    fn named(&self) -> Named {
        Named {
            given: Arc::clone(&self.given),
            key: Arc::clone(&self.name),
        }
    }

    /// This semaphore with each call bounded as a settle's (on the watchdog thread).
    fn bounded(mut self) -> RawSemaphore {
        self.bound = Some(self.client.inner.config.response_timeout.min(SETTLE_BOUND));
        self
    }

    /// What settles the acquire of `receipt` whose reply never came: once the server answers,
    /// `lua/semaphore_settle.lua` gives back what the receipt says it took. Holds the client
    /// weakly: a client dropped meanwhile settles nothing.
    fn settler(&self, receipt: Arc<str>) -> Settle {
        let client = Arc::downgrade(&self.client.inner);
        let name = self.named();
        Box::new(move |_| {
            let Some(inner) = client.upgrade() else {
                return Ok(Settled::Done);
            };
            let raw = RawSemaphore::new(Client { inner }, name.clone()).bounded();
            let given_back: i64 = raw.run(|c| {
                scripts::SEMAPHORE_SETTLE
                    .key(&raw.name)
                    .key(&receipt)
                    .key(&raw.channel)
                    .key(&raw.generation)
                    .arg(raw.client.publish())
                    .invoke(c)
            })?;
            if given_back == 0 {
                // No receipt: it took nothing, or has not arrived yet (delayed on the way).
                return Ok(Settled::LookAgain);
            }
            if given_back < 0 {
                log::warn!(
                    "`{}`: {} permit(s) taken by an acquire whose reply was lost not given \
                     back: the semaphore was made anew since",
                    raw.name,
                    -given_back
                );
                return Ok(Settled::Done);
            }
            log::warn!(
                "`{}`: released {given_back} permit(s) taken by an acquire whose reply was lost",
                raw.name
            );
            Ok(Settled::Done)
        })
    }

    fn run<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.client
            .inner
            .backend
            .run_with(&self.name, self.policy(), f)
    }

    /// As [`run`](Self::run), for a call that may run twice: sent again after an
    /// interrupted read.
    fn run_repeatable<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let policy = self.policy();
        self.client
            .inner
            .backend
            .run_repeatable(&self.name, policy, f)
    }

    fn policy(&self) -> Policy {
        self.bound.map_or(Policy::Retried, Policy::Bounded)
    }
}

/// The watchdog's batch for plain semaphore guards: each is checked, not renewed (permits
/// have no lease), to be still of the generation its permits came from. A guard's hold field
/// is [`guard_field`].
pub(super) static CHECK_GENERATION: BatchRenewal = BatchRenewal {
    script: &scripts::SEMAPHORE_CHECK,
    add: |call, name, field| {
        let generation = field.split_once('/').map_or(field, |(g, _)| g);
        call.key(keys::semaphore_generation(name)).arg(generation);
    },
    holds: true,
    leased: false,
};

/// A guard's hold field for the watchdog: `<generation>/<request>` (the request number keeps
/// the guards of one generation apart: each is its own hold).
pub(super) fn guard_field(generation: &str, request: u64) -> Arc<str> {
    format!("{generation}/{request}").into()
}
