//! Redisson's `RFairLock`: the lock hash, plus a LIST of waiting owners and a ZSET of their
//! deadlines. Waiters get the lock in arrival order; each listens on a channel of its own. With
//! an owner's second acquire refused (the acquire script's flag), Redisson's
//! `RedissonNonReentrantFairLock`.

use std::borrow::Cow;
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

use crate::deadlock::Mode;
use crate::error::Result;
use crate::hold::LockKind;
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::lock::priority;
use crate::scripts;
use crate::time::millis;

/// The fair lock: `lua/fair_*.lua`. A release wakes the head of the queue only, on
/// `redisson_lock__channel:{name}:<owner>`.
pub(crate) struct Fair {
    queue: String,
    timeouts: String,
    /// The head's running turn (ours): see `keys::fair_turn`.
    turn: String,
    /// The prefix of the waiters' channels, as the scripts take it.
    channel: String,
    /// Thread wait in ms: how long a head of the queue may stay silent before it is skipped.
    wait_ms: u64,
    /// False: an owner that holds the lock is refused another hold (and not queued).
    reentrant: bool,
}

impl Fair {
    /// The fair lock `name`, whose waiters are skipped after `thread_wait` of silence.
    pub(crate) fn new(name: &str, thread_wait: Duration) -> Fair {
        Fair {
            queue: keys::fair_queue(name),
            timeouts: keys::fair_timeouts(name),
            turn: keys::fair_turn(name),
            channel: keys::lock_channel(name),
            wait_ms: millis(thread_wait),
            reentrant: true,
        }
    }

    /// Redisson's `RedissonNonReentrantFairLock`: the fair lock refusing its holder.
    pub(crate) fn non_reentrant(name: &str, thread_wait: Duration) -> Fair {
        Fair {
            reentrant: false,
            ..Fair::new(name, thread_wait)
        }
    }

    /// One acquire attempt of `owner`, queued as `queueing` says if the lock cannot be taken;
    /// when not reentrant, an owner that holds the lock already is refused (`{0}`) and not
    /// queued, as `RedissonNonReentrantFairLock` does.
    fn try_acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        queueing: Queueing,
    ) -> RedisResult<Value> {
        // A waiter with a priority takes its place by rank (`lua/fair_priority_gate.lua`).
        let script = match lock.priority {
            None => &scripts::FAIR_ACQUIRE,
            Some(_) => &scripts::FAIR_PRIORITY_ACQUIRE,
        };
        let mut call = script.key(&lock.name);
        call.key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel)
            .key(&self.turn);
        if lock.priority.is_some() {
            call.key(&keys::priority_queue(&lock.name));
        }
        call.arg(lease_ms)
            .arg(owner)
            .arg(self.wait_ms)
            .arg(match queueing {
                Queueing::No => "0",
                Queueing::Join => "1",
                Queueing::Keep => "2",
            })
            .arg(lock.client.publish())
            .arg(if self.reentrant { "1" } else { "0" });
        if let Some(priority) = lock.priority {
            priority::ranked(&mut call, priority);
        }
        call.invoke(c)
    }
}

impl Kind for Fair {
    fn label(&self) -> LockKind {
        if self.reentrant {
            LockKind::Fair
        } else {
            LockKind::NonReentrantFair
        }
    }

    fn wait_mode(&self) -> Mode {
        Mode::Fair
    }

    fn is_reentrant(&self) -> bool {
        self.reentrant
    }

    /// Only a caller that will wait joins the queue.
    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        queueing: Queueing,
    ) -> RedisResult<Value> {
        self.try_acquire(lock, c, owner, lease_ms, queueing)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        let mut call = scripts::FAIR_UNLOCK.key(&lock.name);
        call.key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel)
            .key(&self.turn)
            .arg(release.lease_ms)
            .arg(release.owner)
            .arg(lock.client.publish())
            .arg(self.wait_ms)
            .arg(release.expect.unwrap_or(0));
        if let Some(pass) = &release.pass_to {
            pass.args(&mut call);
        }
        call.invoke(c)
    }

    /// Only to the head of the queue, which keeps the order exact.
    fn passes_inside_client(&self) -> bool {
        true
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        scripts::FAIR_FORCE_UNLOCK
            .key(&lock.name)
            .key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel)
            .key(&self.turn)
            .arg(lock.client.publish())
            .arg(self.wait_ms)
            .invoke(c)
    }

    fn waiting(&self, lock: &LockKey, owner: &str) -> Waiting<'_> {
        Waiting::Channel(Cow::Owned(keys::fair_waiter_channel(&lock.name, owner)))
    }

    fn is_fair(&self) -> bool {
        true
    }

    fn has_priorities(&self) -> bool {
        true
    }

    fn leave(&self, lock: &LockKey, owner: &str) -> Result<bool> {
        // Sent again after an interrupted read: a second leave finds nothing to take out.
        lock.run_repeatable(|c| {
            scripts::FAIR_LEAVE
                .key(&lock.name)
                .key(&self.queue)
                .key(&self.timeouts)
                .key(&self.channel)
                .key(&self.turn)
                .arg(owner)
                .arg(self.wait_ms)
                .arg(lock.client.publish())
                .invoke(c)
        })
    }
}
