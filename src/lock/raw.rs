//! The raw lock protocol: what every lock kind shares. Runs the kind's scripts (see
//! [`Kind`]) with the replica confirmation and undo of an acquire, an unlock made safe to
//! lose (the kind's latch and one retry, or an expected count and a settle), and decodes
//! replies. Knows nothing of guards or waiting; hands the watchdog what it must settle.

#[cfg(test)]
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::config::wait_replicas;
use crate::error::{retry_interrupted, Error, Result};
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::names::Named;
use crate::time::millis;
use crate::trace;
use crate::watchdog::Renewal;

/// What the unlock script did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// The owner had no hold: nothing changed.
    NotHeld,
    /// One hold released; the owner still holds the lock.
    StillHeld,
    /// The last hold released: the lock is free and waiters were woken.
    Released,
    /// The last hold passed to a waiting thread of this client, in the same call (see
    /// `handover.rs`); nothing was published.
    Passed,
}

pub(crate) struct RawLock {
    /// The client and the mapped name.
    pub(crate) key: LockKey,
    /// The name as the caller gave it (`Lock::name`).
    pub(crate) given: Arc<str>,
    /// The protocol this lock speaks: its scripts, keys and wait channel.
    pub(crate) kind: Arc<dyn Kind>,
    /// The keys of this client's unlock latches for this lock.
    latches: keys::UnlockLatches,
}

/// What one run of an unlock script did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ran {
    Did(Unlocked),
    /// The owner's count was this, not the one the call expected: nothing changed.
    Differs(u32),
}

impl Ran {
    /// What a call that expected no count did.
    fn unlocked(self) -> Result<Unlocked> {
        match self {
            Ran::Did(unlocked) => Ok(unlocked),
            Ran::Differs(_) => Err(Error::Protocol("unlock compared counts".into())),
        }
    }
}

/// What one acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Acquired (or re-entered): the owner's hold count is now `count` (1: a new hold, even
    /// if the client believed it held the lock already). A fenced lock's attempt carries its
    /// fencing token.
    Acquired { count: u32, token: Option<u64> },
    /// Held elsewhere: the lock's PTTL in ms, after which to try again even without a
    /// message (-1 for a key without expiry).
    Busy(i64),
    /// Second in a fair queue: try again after `within` ms even without a message, and wake
    /// on a message to the owner at the `head` too (a Redisson release wakes only the head,
    /// which may be dead: the second's check-in then starts the head's turn).
    Second { within: i64, head: String },
    /// Refused by a non-reentrant kind: the owner holds the lock already. Nothing changed
    /// (no count bumped, no place in a queue).
    AlreadyHeld,
}

impl RawLock {
    /// The lock `name` of kind `kind`.
    pub(crate) fn new(client: Client, name: &Named, kind: impl Kind) -> RawLock {
        RawLock::of(client, name, Arc::new(kind))
    }

    /// The lock `name` of a kind already shared.
    pub(super) fn of(client: Client, name: &Named, kind: Arc<dyn Kind>) -> RawLock {
        RawLock {
            latches: keys::UnlockLatches::new(&name.key, client.id()),
            key: LockKey {
                client,
                name: Arc::clone(&name.key),
                bound: None,
                priority: None,
            },
            given: Arc::clone(&name.given),
            kind,
        }
    }

    /// This lock, with each of its calls bounded by `bound` (see [`LockKey::bound`]).
    pub(crate) fn bounded(&self, bound: Duration) -> RawLock {
        RawLock {
            key: LockKey {
                client: self.key.client.clone(),
                name: Arc::clone(&self.key.name),
                bound: Some(bound),
                priority: self.key.priority,
            },
            given: Arc::clone(&self.given),
            kind: Arc::clone(&self.kind),
            latches: keys::UnlockLatches::new(&self.key.name, self.key.client.id()),
        }
    }

    /// This lock, its waiters waiting with `priority` (see [`LockKey::priority`]), or with
    /// none.
    pub(crate) fn prioritized(&self, priority: Option<u32>) -> RawLock {
        RawLock {
            key: LockKey {
                client: self.key.client.clone(),
                name: Arc::clone(&self.key.name),
                bound: self.key.bound,
                priority,
            },
            given: Arc::clone(&self.given),
            kind: Arc::clone(&self.kind),
            latches: keys::UnlockLatches::new(&self.key.name, self.key.client.id()),
        }
    }

    /// How `owner` waits for this lock.
    pub(crate) fn waiting(&self, owner: &str) -> Waiting<'_> {
        self.kind.waiting(&self.key, owner)
    }

    /// The channel on which `owner` waits for this lock (empty for a kind that retries).
    #[cfg(test)]
    pub(crate) fn wait_channel(&self, owner: &str) -> Cow<'_, str> {
        match self.waiting(owner) {
            Waiting::Channel(channel) => channel,
            Waiting::Backoff(_) => Cow::Borrowed(""),
        }
    }

    /// The hash field holding `owner`'s hold count.
    pub(crate) fn field(&self, owner: &str) -> String {
        self.kind.field(owner)
    }

    /// What the watchdog renews for `owner`'s holds.
    pub(crate) fn renewal(&self, owner: &Arc<str>) -> Renewal {
        self.kind.renewal(owner)
    }

    /// Whether anybody holds the lock (in this kind's mode).
    pub(crate) fn is_locked(&self) -> Result<bool> {
        self.kind.is_locked(&self.key)
    }

    /// Called once before `owner` starts waiting.
    pub(crate) fn before_wait(&self, owner: &str) {
        self.kind.before_wait(&self.key, owner)
    }

    pub(crate) fn check_name(&self) -> Result<()> {
        self.key.check_name()?;
        self.kind.check()?;
        match self.key.priority {
            Some(p) if !self.kind.has_priorities() => Err(Error::invalid(format!(
                "priority {p}: a {} lock's waiters have none (plain, non-reentrant, fenced and \
                 fair locks' have)",
                self.kind.label().as_str()
            ))),
            priority => crate::lock::priority::check(priority),
        }
    }

    /// One acquire attempt. `queueing`: whether the caller waits if it fails (a fair lock
    /// queues `owner` then), and whether it was queued by an earlier attempt.
    ///
    /// With [`sync_replicas`](crate::ConfigBuilder::sync_replicas), a successful attempt is
    /// followed by `WAIT` on the same connection; one that too few replicas confirmed (or
    /// whose confirmation failed) is undone before the error is returned.
    ///
    /// An attempt whose reply's read was interrupted (a process stopped and resumed) is read
    /// back from the lock where the kind allows it; otherwise it is settled (what it took is
    /// given back) and made again, up to the configured retry attempts. A bounded lock (a
    /// RedLock member) makes one attempt: one whose reply is lost or late is settled all the
    /// same, on the watchdog thread or before the owner's next call on that member.
    pub(crate) fn acquire(
        &self,
        owner: &str,
        lease: Duration,
        queueing: Queueing,
    ) -> Result<Attempt> {
        if self.key.bound.is_some() {
            return self.acquire_once(owner, lease, queueing);
        }
        let mut again = false;
        self.again_if_interrupted(|| {
            if std::mem::replace(&mut again, true) {
                // The lost attempt was doubted: what it took is given back first.
                self.settle_first(owner)?;
            }
            self.acquire_once(owner, lease, queueing)
        })
    }

    /// One acquire attempt, as [`acquire`](Self::acquire) but for a lost reply: read back,
    /// or doubted and returned as an error.
    fn acquire_once(&self, owner: &str, lease: Duration, queueing: Queueing) -> Result<Attempt> {
        let mut wrote = false;
        let outcome = self.run(|c| {
            let reply = self
                .kind
                .acquire(&self.key, c, owner, millis(lease), queueing)?;
            let attempt = decode_attempt(&reply);
            wrote = matches!(attempt, Ok(Attempt::Acquired { .. }));
            Ok((attempt, self.confirm(c, wrote)?))
        });
        let (attempt, acked) = match outcome {
            Ok(reply) => reply,
            Err(e) => {
                if wrote {
                    // Acquired, but the replica confirmation failed: not a hold we can vouch for.
                    self.undo_acquire(owner, lease);
                    return Err(e);
                }
                if e.is_interrupted_read() {
                    if let Some(attempt) = self.read_back(owner) {
                        return Ok(attempt);
                    }
                }
                if e.breaks_connection() {
                    // The acquire may have run, or may run when the server answers again:
                    // what it took is given back then.
                    self.doubt_acquire(owner, lease, queueing.will_wait());
                }
                return Err(e);
            }
        };
        let attempt = attempt?;
        if let (Some(acked), Some(sync)) = (acked, self.key.client.inner.config.replica_sync) {
            if acked < sync.replicas {
                log::warn!(
                    "acquire of `{}` (owner {owner}) confirmed by {acked} of {} replicas: undone",
                    self.key.name,
                    sync.replicas
                );
                self.undo_acquire(owner, lease);
                return Err(Error::NotReplicated {
                    name: self.key.name.to_string(),
                    acked,
                    wanted: sync.replicas,
                });
            }
        }
        Ok(attempt)
    }

    /// Records an acquire of `owner` whose reply never came: the watchdog gives back what it
    /// may have taken once the server answers (see its `doubt.rs`); `queued` if it may have
    /// left a place in a queue too.
    pub(super) fn doubt_acquire(&self, owner: &str, lease: Duration, queued: bool) {
        let field: Arc<str> = self.field(owner).into();
        let settle = self.settler(owner, lease, queued);
        let watchdog = &self.key.client.inner.watchdog;
        watchdog.doubt(&self.key.name, &field, settle);
    }

    /// What an attempt whose reply was lost to an interrupted read did, read back from the
    /// lock: the attempt ran, so a field of `owner` means it acquired (a reentrant kind takes
    /// the lock, or re-enters it, whenever `owner` holds it), with the count the server has.
    /// `None` where the state cannot tell (a kind that refuses re-entry, or hands out tokens;
    /// replicas to confirm) or the read fails: the caller returns the read's error.
    fn read_back(&self, owner: &str) -> Option<Attempt> {
        let kind = &self.kind;
        if !kind.is_reentrant()
            || kind.token_key().is_some()
            || self.key.client.inner.config.replica_sync.is_some()
        {
            return None;
        }
        let field = kind.count_field(owner);
        // A read only: sent again if a stop interrupts it too.
        let read = self.key.run_repeatable(|c| {
            redis::pipe()
                .hget(&*self.key.name, &field)
                .pttl(&*self.key.name)
                .query::<(Option<i64>, i64)>(c)
        });
        let attempt = match read {
            Ok((Some(count), _)) if count > 0 && count <= i64::from(u32::MAX) => {
                Attempt::Acquired {
                    count: count as u32,
                    token: None,
                }
            }
            // No lock at all (-2): try again at once.
            Ok((_, -2)) => Attempt::Busy(1),
            Ok((_, pttl)) => Attempt::Busy(pttl),
            Err(e) => {
                log::debug!(
                    "reading back `{}` after an interrupted reply failed: {e}",
                    self.key.name
                );
                return None;
            }
        };
        log::debug!(
            "acquire of `{}` (owner {owner}) lost its reply to an interrupted read; the lock \
             says: {attempt:?}",
            self.key.name
        );
        Some(attempt)
    }

    /// Settles `owner`'s earlier acquires of this lock whose reply was lost, if any, before a
    /// call of `owner` on it (see the watchdog's `doubt.rs`).
    pub(crate) fn settle_first(&self, owner: &str) -> Result<()> {
        let watchdog = &self.key.client.inner.watchdog;
        if !watchdog.any_unsettled() {
            return Ok(());
        }
        match self.kind.overlapping(owner) {
            Some(prefix) => watchdog.settle_first_like(&self.key.name, &prefix),
            None => watchdog.settle_first(&self.key.name, &self.field(owner).into()),
        }
    }

    /// After a lock write on `c`: `WAIT replicas timeout` when the client syncs replicas and
    /// the script wrote; the number of replicas that confirmed, `None` when not asked.
    fn confirm(
        &self,
        c: &mut dyn redis::ConnectionLike,
        wrote: bool,
    ) -> redis::RedisResult<Option<u32>> {
        wait_replicas(self.key.client.inner.config.replica_sync, c, wrote)
    }

    /// Releases the hold an acquire just took (best effort: on failure the hold stays until
    /// its lease runs out, and is not renewed).
    fn undo_acquire(&self, owner: &str, lease: Duration) {
        if let Err(e) = self.unlock(owner, lease) {
            log::warn!(
                "undoing the unconfirmed acquire of `{}` (owner {owner}) failed: {e}; it expires \
                 after its lease of {lease:?}",
                self.key.name
            );
        }
    }

    /// Takes `owner` out of a fair lock's queue (a wait given up); true if it was queued.
    /// A no-op for other locks.
    pub(crate) fn leave(&self, owner: &str) -> Result<bool> {
        self.kind.leave(&self.key, owner)
    }

    /// Releases one hold of `owner`. A reply lost to a broken connection is made good
    /// safely: with the unlock latch, by the same request sent again (it returns the first
    /// call's outcome); for a kind without one ([`Kind::latched_unlock`]), by a settle (see
    /// [`settler`](Self::settler)) that compares the owner's count with the holds the client
    /// knows of and releases the one hold if it is still there, run at once on this thread
    /// (for a bounded lock, on the watchdog thread, and the error returned).
    pub(crate) fn unlock(&self, owner: &str, lease: Duration) -> Result<Unlocked> {
        self.unlock_knowing(owner, lease, None)
    }

    /// [`unlock`](Self::unlock), told the holds of `owner` the client's guards still have
    /// (`None`: asks the watchdog).
    pub(crate) fn unlock_knowing(
        &self,
        owner: &str,
        lease: Duration,
        known: Option<u32>,
    ) -> Result<Unlocked> {
        let span = trace::Span::release(self.kind.label().as_str(), &self.key.name);
        let _in_span = span.enter();
        let outcome = if self.kind.latched_unlock() {
            self.unlock_latched(owner, lease, known)
        } else {
            self.unlock_settled(owner, lease, known)
        };
        span.outcome(match &outcome {
            Ok(Unlocked::Released) => "released",
            Ok(Unlocked::Passed) => "passed",
            Ok(Unlocked::StillHeld) => "still_held",
            Ok(Unlocked::NotHeld) => "not_held",
            Err(_) => "error",
        });
        outcome
    }

    /// [`unlock`](Self::unlock) for a kind without a latch. The call says the count it
    /// expects: the holds the client's guards still have (this one's is no longer counted),
    /// plus this one. A count that differs (another thread of a shared [`LockOwner`]
    /// acquiring meanwhile, a leaked guard's hold) makes it send the release again without
    /// one, as Redisson's unlock is.
    ///
    /// [`LockOwner`]: crate::LockOwner
    fn unlock_settled(&self, owner: &str, lease: Duration, known: Option<u32>) -> Result<Unlocked> {
        let watchdog = &self.key.client.inner.watchdog;
        let mut release = self.release(owner, "", lease);
        // The field only where it is needed (the guards' release passes `known`): no
        // allocation on the common path.
        let known = known.unwrap_or_else(|| {
            let field: Arc<str> = self.field(owner).into();
            watchdog.known_holds(&self.key.name, &field)
        });
        release.expect = Some(known + 1);
        let claim = self.claim(owner, known);
        let to = claim.as_ref().map(|claim| Arc::clone(&claim.waiter));
        release.pass_to = to.as_deref().map(RawLock::first_pass);
        let sent_at = Instant::now();
        let e = match self.pass_script(&release, claim.as_ref()) {
            Ok(Ran::Did(Unlocked::Passed)) => {
                if let Some(claim) = claim {
                    self.pass_given(claim, owner, sent_at);
                }
                return Ok(Unlocked::Passed);
            }
            Ok(Ran::Did(unlocked)) => return Ok(unlocked),
            Ok(Ran::Differs(count)) => {
                drop(claim);
                release.pass_to = None;
                log::debug!(
                    "unlock of `{}` (owner {owner}): the lock counts {count} holds, the client \
                     {}; released as Redisson does",
                    self.key.name,
                    release.expect.unwrap_or(0)
                );
                release.expect = None;
                return match self.unlock_script(&release)? {
                    Ran::Did(unlocked) => Ok(unlocked),
                    Ran::Differs(_) => Err(Error::Protocol("unlock compared counts".into())),
                };
            }
            Err(e) if e.breaks_connection() => e,
            Err(e) => return Err(e),
        };
        if let Some(claim) = claim {
            return Ok(self.pass_again(release, claim, sent_at, e));
        }
        log::debug!(
            "unlock of `{}` (owner {owner}) lost its reply ({e}); settled by the count it left",
            self.key.name
        );
        let field: Arc<str> = self.field(owner).into();
        if !watchdog.doubt(&self.key.name, &field, self.settler(owner, lease, false)) {
            // The client is closing: nobody settles it.
            return Err(e);
        }
        if self.key.bound.is_some() {
            return Err(e);
        }
        watchdog.settle_first(&self.key.name, &field)?;
        // Whether it ran or the settle released the hold, it is gone.
        Ok(Unlocked::Released)
    }

    /// [`unlock`](Self::unlock) with the kind's latch.
    fn unlock_latched(&self, owner: &str, lease: Duration, known: Option<u32>) -> Result<Unlocked> {
        let latch = self.new_latch();
        let mut release = self.release(owner, &latch, lease);
        let known = known.unwrap_or_else(|| {
            let field: Arc<str> = self.field(owner).into();
            self.key
                .client
                .inner
                .watchdog
                .known_holds(&self.key.name, &field)
        });
        // A claim where the script finds more holds is let go: it releases one, passes none.
        let claim = self.claim(owner, known);
        let to = claim.as_ref().map(|claim| Arc::clone(&claim.waiter));
        release.pass_to = to.as_deref().map(RawLock::first_pass);
        let sent_at = Instant::now();
        let mut lost = false;
        let outcome = match self
            .pass_script(&release, claim.as_ref())
            .and_then(Ran::unlocked)
        {
            Err(e) if e.breaks_connection() => {
                log::debug!(
                    "unlock of `{}` (owner {owner}) lost its reply ({e}); retrying",
                    self.key.name
                );
                lost = true;
                if let Some(pass) = &mut release.pass_to {
                    pass.again = true;
                }
                // The latch makes every retry return the first call's outcome.
                self.again_if_interrupted(|| self.unlock_script(&release).and_then(Ran::unlocked))
            }
            other => other,
        };
        let outcome = match (outcome, claim) {
            (Ok(Unlocked::Passed), Some(claim)) => {
                self.pass_given(claim, owner, sent_at);
                Ok(Unlocked::Passed)
            }
            // The first call may have passed it, whatever stopped the retry: the waiter
            // sends it again with the latch.
            (Err(e), Some(claim)) if lost => {
                return Ok(self.pass_in_doubt(claim, owner, sent_at, latch, e));
            }
            (outcome, _) => outcome,
        };
        if outcome.is_ok() {
            // The reply came: no retry needs the latch now. Deleted with a later call
            // written (as Redisson deletes it after the reply), so that unlocks under load
            // do not fill the server with latches until their TTL.
            self.key.client.inner.backend.delete_later(latch);
        }
        outcome
    }

    /// A new unlock latch key (empty for a kind that takes none): unique without a random
    /// number per call, from this client's uuid and a counter.
    pub(super) fn new_latch(&self) -> String {
        if !self.kind.latched_unlock() {
            return String::new();
        }
        self.new_receipt()
    }

    /// A new receipt key for a call of this lock's (an unlock latch, a condition's notify):
    /// unique without a random number per call, from this client's uuid and a counter.
    pub(crate) fn new_receipt(&self) -> String {
        let requests = &self.key.client.inner.requests;
        self.latches.key(requests.fetch_add(1, Ordering::Relaxed))
    }

    /// The release of one hold of `owner` with `latch` (see [`new_latch`](Self::new_latch)).
    pub(super) fn release<'a>(
        &self,
        owner: &'a str,
        latch: &'a str,
        lease: Duration,
    ) -> Release<'a> {
        let response_timeout = self.key.client.inner.config.response_timeout;
        Release {
            owner,
            latch,
            lease_ms: millis(lease),
            latch_ttl_ms: millis(response_timeout * 4).max(1000),
            expect: None,
            pass_to: None,
        }
    }

    /// Runs the kind's unlock script once (retried as the pool retries a call that did not
    /// run), and decodes its reply.
    pub(super) fn unlock_script(&self, release: &Release<'_>) -> Result<Ran> {
        self.unlock_script_with(release, None)
    }

    /// As [`unlock_script`](Self::unlock_script), running `written` once the call is written
    /// (see `LockKey::run_written`).
    pub(super) fn unlock_script_with(
        &self,
        release: &Release<'_>,
        written: Option<&dyn Fn()>,
    ) -> Result<Ran> {
        let call = |c: &mut dyn redis::ConnectionLike| {
            let reply = self.kind.unlock(&self.key, c, release)?;
            Ok((reply, self.confirm(c, reply.is_some())?))
        };
        let (reply, acked) = match written {
            Some(written) => self.key.run_written(written, call),
            None => self.run(call),
        }?;
        if let (Some(acked), Some(sync)) = (acked, self.key.client.inner.config.replica_sync) {
            if acked < sync.replicas {
                log::warn!(
                    "unlock of `{}` (owner {}) confirmed by {acked} of {} replicas: a \
                     failover now could bring the lock back until its lease runs out",
                    self.key.name,
                    release.owner,
                    sync.replicas
                );
            }
        }
        let unlocked = match reply {
            None => Unlocked::NotHeld,
            Some(0) => Unlocked::StillHeld,
            Some(1) => Unlocked::Released,
            Some(3) if release.pass_to.is_some() => Unlocked::Passed,
            // A read hold whose own lease had run out: cleaned up, but it was lost.
            Some(2) => Unlocked::NotHeld,
            Some(n) if n < 0 && release.expect.is_some() => {
                return Ok(Ran::Differs(u32::try_from(-1 - n).unwrap_or(u32::MAX)))
            }
            Some(n) => return Err(Error::Protocol(format!("unlock script replied {n}"))),
        };
        Ok(Ran::Did(unlocked))
    }

    /// Deletes the lock whoever holds it; true if there was one. Watchers are told first (on
    /// the lock channel's [`keys::watch_channel`]), so that the release they see next is
    /// reported as forced; a watcher that heard it and sees no release forgets it soon.
    pub(crate) fn force_unlock(&self) -> Result<bool> {
        self.key.check_name()?;
        let announce = keys::watch_channel(&keys::lock_channel(&self.key.name));
        let mut publish = redis::cmd(self.key.client.publish());
        publish.arg(announce).arg(keys::FORCED_MESSAGE);
        self.key.query::<i64>(&publish)?;
        self.run(|c| self.kind.force_unlock(&self.key, c))
    }

    /// Makes `call` again while its reply's read is interrupted by a stop and resume, up to
    /// the configured retry attempts: for a call that may run more than once.
    pub(super) fn again_if_interrupted<T>(&self, call: impl FnMut() -> Result<T>) -> Result<T> {
        retry_interrupted(self.key.client.inner.backend.retries(), None, call)
    }

    /// Runs `f` on a connection to the lock's node (retried as the pool retries).
    pub(crate) fn run<T>(
        &self,
        f: impl FnMut(&mut dyn redis::ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.key.run(f)
    }
}

/// Decodes an acquire script's reply: nil (a new hold, as Redisson replies: an array costs
/// the server more), `{count}` or `{count, token}` when acquired, the lock's PTTL when not (a
/// fair queue's second: `{ms, head}`), `{0}` when a non-reentrant kind refused the owner's
/// second acquire.
fn decode_attempt(reply: &redis::Value) -> Result<Attempt> {
    use redis::Value;
    let positive = |n: i64| (n > 0 && n <= i64::from(u32::MAX)).then_some(n);
    match reply {
        Value::Nil => {
            return Ok(Attempt::Acquired {
                count: 1,
                token: None,
            })
        }
        Value::Int(ttl) => return Ok(Attempt::Busy(*ttl)),
        Value::Array(items) => match items.as_slice() {
            [Value::Int(0)] => return Ok(Attempt::AlreadyHeld),
            [Value::Int(count)] if positive(*count).is_some() => {
                return Ok(Attempt::Acquired {
                    count: *count as u32,
                    token: None,
                })
            }
            [Value::Int(within), Value::BulkString(head)] if *within > 0 => {
                if let Ok(head) = std::str::from_utf8(head) {
                    return Ok(Attempt::Second {
                        within: *within,
                        head: head.to_owned(),
                    });
                }
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
    use redis::Value;

    use super::*;

    #[test]
    fn acquire_replies_decode_by_shape() {
        assert_eq!(
            decode_attempt(&Value::Array(vec![Value::Int(2)])).unwrap(),
            Attempt::Acquired {
                count: 2,
                token: None
            }
        );
        assert_eq!(
            decode_attempt(&Value::Array(vec![Value::Int(1), Value::Int(9)])).unwrap(),
            Attempt::Acquired {
                count: 1,
                token: Some(9)
            }
        );
        assert_eq!(
            decode_attempt(&Value::Nil).unwrap(),
            Attempt::Acquired {
                count: 1,
                token: None
            }
        );
        assert_eq!(
            decode_attempt(&Value::Int(1500)).unwrap(),
            Attempt::Busy(1500)
        );
        assert_eq!(
            decode_attempt(&Value::Array(vec![Value::Int(0)])).unwrap(),
            Attempt::AlreadyHeld
        );
        assert_eq!(
            decode_attempt(&Value::Array(vec![
                Value::Int(700),
                Value::BulkString(b"c:1".to_vec())
            ]))
            .unwrap(),
            Attempt::Second {
                within: 700,
                head: "c:1".to_owned()
            }
        );
        for bad in [
            Value::Array(vec![Value::Int(0), Value::BulkString(b"c:1".to_vec())]),
            Value::Okay,
            Value::Array(vec![]),
            Value::Array(vec![Value::Int(-1)]),
            Value::Array(vec![Value::Int(0), Value::Int(3)]),
        ] {
            assert!(matches!(decode_attempt(&bad), Err(Error::Protocol(_))));
        }
    }
}
