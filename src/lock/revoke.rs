//! Taking a lock back: a request to its holder ([`Lock::request_release`]), a preemption with
//! grace ([`Lock::preempt`] with [`Preempt::with_grace`]) or without ([`Preempt::steal`]), and
//! the holder's side: told by its renewal ([`LockGuard::revocation`],
//! [`LockGuard::on_revoke`]), and sections that cannot be preempted
//! ([`LockGuard::unpreemptible`]). Plain, non-reentrant and fenced locks; the record and the
//! log are `lua/revoke_common.lua`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::error::{Error, Result};
use crate::keys;
use crate::lock::guard::LockGuard;
use crate::lock::handle::Lock;
use crate::lock::owner::Ownership;
use crate::lock::raw::{Attempt, RawLock};
use crate::scripts;
use crate::time::{check_duration, check_wait, millis};
use crate::watchdog::Revocation;

/// How [`Lock::preempt`] takes a lock from its holder.
///
/// The holder is told at its next renewal (within a third of its lease); its grace runs from
/// then, or from the moment a live holder of this library must have been told (the lock's
/// time to live when asked), whichever is first. If the same hold is still there at the
/// deadline (server clock), it is released by force and the lock given to the preemptor in
/// the same script. See the guide's [revocation chapter](crate::_guide::revocation).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use redlatch::Preempt;
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let how = Preempt::with_grace(Duration::from_secs(5)).reason("schema migration");
/// let guard = client.fenced_lock("orders").preempt(&how)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preempt {
    grace: Duration,
    max_deferral: Duration,
    reason: String,
}

impl Preempt {
    /// Preempt with `grace`: the holder has that long after it is told to release.
    pub fn with_grace(grace: Duration) -> Preempt {
        Preempt {
            grace,
            max_deferral: Duration::ZERO,
            reason: String::new(),
        }
    }

    /// Steal: release the holder's hold by force at once, without waiting for it to be told.
    /// Unsafe without fencing: the old holder may still write until its next renewal tells
    /// it of the loss; a [fenced lock](crate::Client::fenced_lock)'s resource refuses its
    /// token.
    pub fn steal() -> Preempt {
        Preempt::with_grace(Duration::ZERO)
    }

    /// Why, as the holder and the log are told.
    pub fn reason(mut self, reason: impl Into<String>) -> Preempt {
        self.reason = reason.into();
        self
    }

    /// How long an [unpreemptible](LockGuard::unpreemptible) section of the holder may move
    /// the deadline on (default: zero, the section is not waited for).
    pub fn max_deferral(mut self, max: Duration) -> Preempt {
        self.max_deferral = max;
        self
    }

    /// Zero is allowed for both (a steal; no deferral); over a year is not.
    fn check(&self) -> Result<()> {
        for (what, d) in [("grace", self.grace), ("max_deferral", self.max_deferral)] {
            if !d.is_zero() {
                check_duration(what, d)?;
            }
        }
        Ok(())
    }
}

/// One entry of a lock's log of revocations ([`Lock::revocations`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RevokeEvent {
    /// The stream id (`<ms>-<seq>`, the server's clock).
    pub id: String,
    /// When, in ms since the Unix epoch on the server's clock (the id's first part).
    pub at_ms: u64,
    /// `request`, `preempt`, `steal` (asked), `notice` (the holder was told) or `forced`
    /// (its hold released by force).
    pub event: String,
    /// Who asked.
    pub by: String,
    /// The hold it was for (its owner id).
    pub whom: String,
    /// That hold's fencing token (a fenced lock).
    pub token: Option<u64>,
    /// Why, as given.
    pub reason: String,
}

impl<O: Ownership> Lock<O> {
    /// Asks the lock's holder to release it, naming the calling thread's owner as the asker;
    /// nothing is enforced. Returns the holder's owner id, or `None` when nobody (or this
    /// owner) holds it. A holder of this library is told at its next renewal
    /// ([`LockGuard::on_revoke`]); a Redisson holder is not told.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a lock kind that cannot be revoked (only plain,
    /// non-reentrant and fenced locks can); connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(holder) = client.lock("report").request_release("nightly run is late")? {
    ///     println!("asked {holder}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn request_release(&self, reason: &str) -> Result<Option<String>> {
        self.request_release_as(&self.owner(), reason)
    }

    /// [`request_release`](Self::request_release) naming `by` as the asker (an operator).
    pub fn request_release_as(&self, by: &str, reason: &str) -> Result<Option<String>> {
        self.raw.check_revocable()?;
        let call = self.raw.revoke_call("ask", by, reason);
        self.raw.key.run(|c| call.invoke::<Option<String>>(c))
    }

    /// Takes the lock from its holder as `how` says (see [`Preempt`]), blocking until this
    /// thread (or owner) holds it, with a new fencing token for a fenced lock. A free lock is
    /// simply acquired. A hold taken by someone else meanwhile is a new hold: it is asked,
    /// and given its own grace, in turn. The old holder's guard reports the loss
    /// ([`LostReason::Preempted`](crate::LostReason::Preempted)) at its next renewal.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::InvalidArgument`] for a kind that cannot be revoked,
    /// or a grace or deferral over a year.
    pub fn preempt(&self, how: &Preempt) -> Result<LockGuard<O>> {
        self.try_preempt_until(how, None)
            .map(|got| got.expect("a wait without deadline only ends in a guard"))
    }

    /// [`preempt`](Self::preempt), waiting at most `wait`: `Ok(None)` if it ran out first.
    ///
    /// # Errors
    ///
    /// As [`preempt`](Self::preempt).
    pub fn try_preempt_for(&self, how: &Preempt, wait: Duration) -> Result<Option<LockGuard<O>>> {
        check_wait(wait)?;
        self.try_preempt_until(how, Some(Instant::now() + wait))
    }

    fn try_preempt_until(
        &self,
        how: &Preempt,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard<O>>> {
        self.raw.check_revocable()?;
        how.check()?;
        let mut preempting = self.clone();
        preempting.preempt = Some(Arc::new(how.clone()));
        if self.raw.key.priority.is_some() {
            // A preemptor goes before every waiter: it takes no place among them.
            preempting.raw = Arc::new(self.raw.prioritized(None));
        }
        let got = preempting.acquire(deadline);
        match got {
            Ok(Some(mut guard)) => {
                // The guard's lock is the caller's: its later acquires (a condition wait's
                // re-acquire, a clone) do not preempt.
                guard.lock = self.clone();
                Ok(Some(guard))
            }
            other => {
                // Given up (or failed): its request goes, so that it holds back no other
                // preemptor (a failure to withdraw it leaves it to lapse after its deadline).
                self.raw.withdraw_revocation(&self.owner());
                other
            }
        }
    }

    /// The last `count` entries of the lock's log of revocations, oldest first.
    ///
    /// # Errors
    ///
    /// Connection errors; [`Error::WrongType`] if the log's key is not a stream.
    pub fn revocations(&self, count: usize) -> Result<Vec<RevokeEvent>> {
        let log = keys::revoke_log(&self.raw.key.name);
        let reply: Value = self.raw.key.query(
            redis::cmd("XREVRANGE")
                .arg(&log)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(count.max(1)),
        )?;
        let mut events = decode_log(&reply)?;
        events.reverse();
        Ok(events)
    }
}

/// The entries of an `XREVRANGE` reply.
fn decode_log(reply: &Value) -> Result<Vec<RevokeEvent>> {
    let bad = || Error::Protocol(format!("revocation log replied {reply:?}"));
    let Value::Array(entries) = reply else {
        return Err(bad());
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    entries
        .iter()
        .map(|entry| {
            let Value::Array(parts) = entry else {
                return Err(bad());
            };
            let [id, Value::Array(fields)] = parts.as_slice() else {
                return Err(bad());
            };
            let id = text(id).ok_or_else(bad)?;
            let at_ms = id.split('-').next().and_then(|ms| ms.parse().ok());
            let mut event = RevokeEvent {
                at_ms: at_ms.ok_or_else(bad)?,
                id,
                event: String::new(),
                by: String::new(),
                whom: String::new(),
                token: None,
                reason: String::new(),
            };
            for pair in fields.chunks(2) {
                let (Some(k), Some(v)) = (pair.first().and_then(text), pair.get(1).and_then(text))
                else {
                    continue;
                };
                match k.as_str() {
                    "event" => event.event = v,
                    "by" => event.by = v,
                    "whom" => event.whom = v,
                    "token" => event.token = v.parse().ok(),
                    "reason" => event.reason = v,
                    _ => {}
                }
            }
            Ok(event)
        })
        .collect()
}

impl RawLock {
    /// A revocable kind, or [`Error::InvalidArgument`].
    fn check_revocable(&self) -> Result<()> {
        self.check_name()?;
        if self.kind.is_revocable() {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "a {} lock cannot be revoked: only plain, non-reentrant and fenced locks can",
            self.kind.label().as_str()
        )))
    }

    /// The revoke script's call with its keys and first three arguments.
    fn revoke_call(&self, mode: &str, by: &str, reason: &str) -> redis::ScriptInvocation<'static> {
        let name = &self.key.name;
        let mut call = scripts::LOCK_REVOKE.prepare_invoke();
        call.key(&**name).key(keys::revoke(name));
        if let Some(token) = self.kind.token_key() {
            call.key(token);
        }
        call.arg(mode).arg(by).arg(reason);
        call
    }

    /// One preempting attempt of `owner` after an acquire found the lock busy: asks its
    /// holder, or releases its hold by force once the deadline passed and takes the lock.
    /// A reply that never comes is doubted as an acquire's is (what it may have taken is
    /// given back once the server answers).
    pub(super) fn preempt_once(
        &self,
        owner: &str,
        lease: Duration,
        how: &Preempt,
    ) -> Result<Attempt> {
        let mut call = self.revoke_call("take", owner, &how.reason);
        call.arg(millis(how.grace))
            .arg(millis(how.max_deferral))
            .arg(millis(lease));
        let reply = self.key.run(|c| call.invoke::<Value>(c));
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                if e.breaks_connection() {
                    self.doubt_acquire(owner, lease, false);
                }
                return Err(e);
            }
        };
        match &reply {
            // Free, or ours: acquired next, at once.
            Value::Int(0) => Ok(Attempt::Busy(0)),
            Value::Int(ms) if *ms > 0 => Ok(Attempt::Busy(*ms)),
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), Value::Int(token), Value::BulkString(victim)] => {
                    log::warn!(
                        "lock `{}`: the hold of {} released by force, taken by {owner}",
                        self.key.name,
                        String::from_utf8_lossy(victim)
                    );
                    Ok(Attempt::Acquired {
                        count: 1,
                        token: u64::try_from(*token).ok().filter(|t| *t > 0),
                    })
                }
                _ => Err(Error::Protocol(format!("revoke script replied {reply:?}"))),
            },
            _ => Err(Error::Protocol(format!("revoke script replied {reply:?}"))),
        }
    }

    /// Begins (`ms` > 0) or ends (`"0"`) an unpreemptible section of `owner`, or forgets a
    /// request for its released hold (`"done"`); false when the script did nothing.
    fn calm(&self, owner: &str, what: &str) -> Result<bool> {
        let name = &self.key.name;
        let mut call = scripts::LOCK_CALM.prepare_invoke();
        call.key(&**name)
            .key(keys::revoke(name))
            .arg(owner)
            .arg(what);
        self.key.run(|c| call.invoke::<i64>(c)).map(|n| n == 1)
    }

    /// Withdraws the request of preemptor `owner`, which gave up, unless its force was done.
    fn withdraw_revocation(&self, owner: &str) {
        if let Err(e) = self.calm(owner, "withdraw") {
            log::debug!(
                "withdrawing the preemption of `{}` by {owner} failed: {e}",
                self.key.name
            );
        }
    }

    /// Forgets the request a told holder `owner` answered by releasing: its next hold is a
    /// new one to any preemptor. A failure is only logged (the request's record expires).
    pub(super) fn forget_revocation(&self, owner: &str) {
        if let Err(e) = self.calm(owner, "done") {
            log::debug!(
                "forgetting the revocation of `{}` (owner {owner}) failed: {e}",
                self.key.name
            );
        }
    }
}

impl<O: Ownership> LockGuard<O> {
    /// Whether the holder was asked to release this hold (a renewal found a request, a
    /// preemption or a steal for it): a flag to poll in a long critical section. Always
    /// false for a hold with an explicit lease (nothing renews it, so nothing tells it).
    pub fn is_revoked(&self) -> bool {
        self.lease.notice.is_revoked()
    }

    /// The latest request to release this hold, once its record was read: who asked, why, and
    /// the grace (`None`: a request only); after a release by force, `forced`, set a moment
    /// after [`is_lost`](Self::is_lost) turns true and before the `on_lost` callbacks run.
    pub fn revocation(&self) -> Option<Revocation> {
        self.lease.notice.revocation().map(|r| (*r).clone())
    }

    /// Calls `f` with each request to release this hold that the holder is told of (a
    /// preemption after a mere request, say, calls it again), and at once with the latest if
    /// it was told of one already. `f` runs on the watchdog thread: keep it quick, as
    /// [`on_lost`](Self::on_lost)'s. Callbacks are dropped when the guard releases its hold;
    /// one the watchdog had started may still finish meanwhile.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let asked = Arc::new(AtomicBool::new(false));
    /// let guard = client.lock("report").lock()?;
    /// let flag = Arc::clone(&asked);
    /// guard.on_revoke(move |r| {
    ///     log::info!("{} asks for the lock: {}", r.by, r.reason);
    ///     flag.store(true, Ordering::Release);
    /// });
    /// # Ok(()) }
    /// ```
    pub fn on_revoke(&self, f: impl FnMut(&Revocation) + Send + 'static) {
        self.lease.notice.on_revoke(self.lock.key(), Box::new(f));
    }

    /// Runs `f` as a section that a preemptor does not interrupt: a forced release due while
    /// it runs waits for its end, by at most the deferral the preemptor accepts
    /// ([`Preempt::max_deferral`]), and never past `longest` after the section began.
    ///
    /// # Errors
    ///
    /// [`Error::LockLost`] when this hold is lost or not held (`f` is not run);
    /// [`Error::InvalidArgument`] for a zero `longest` or one over a year; connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.fenced_lock("ledger").lock()?;
    /// guard.unpreemptible(Duration::from_secs(2), || {
    ///     // publish the batch: not cut in the middle
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn unpreemptible<R>(&self, longest: Duration, f: impl FnOnce() -> R) -> Result<R> {
        check_duration("longest", longest)?;
        self.lock.raw.check_revocable()?;
        let lost = || Error::LockLost {
            name: self.lock.key().to_owned(),
        };
        if self.is_lost()
            || !self
                .lock
                .raw
                .calm(&self.owner, &millis(longest).to_string())?
        {
            return Err(lost());
        }
        let out = f();
        if let Err(e) = self.lock.raw.calm(&self.owner, "0") {
            log::debug!(
                "ending an unpreemptible section of `{}` failed: {e}; it ends by itself",
                self.lock.key()
            );
        }
        Ok(out)
    }
}
