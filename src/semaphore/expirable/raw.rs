//! The permit-expirable semaphore's protocol: the `lua/pes_*.lua` calls with the semaphore's
//! keys, their replies decoded, and the acquire attempt. Knows nothing of waiting or guards.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::id::PermitId;
use crate::backend::Policy;
use crate::client::Client;
use crate::error::{retry_interrupted, Error, Result};
use crate::keys;
use crate::lock::priority;
use crate::names::Named;
use crate::pubsub::Tried;
use crate::scripts;
use crate::semaphore::shared::check_permits;
use crate::time::millis;
use crate::watchdog::{BatchRenewal, Settle, Settled};

/// What the scripts say when the permit timeout set (not the count) has the wrong type.
const TIMEOUTS_WRONG_TYPE: &str = "permit timeout key is not a sorted set";

/// The most a settle's call waits for its reply: on the watchdog thread, it holds up renewals
/// while the server does not answer.
const SETTLE_BOUND: Duration = Duration::from_secs(1);

/// The most permits one call takes or releases at once: each is an id in the script call.
const MAX_PERMITS_AT_ONCE: usize = 10_000;

/// One permit-expirable semaphore's keys, and the client its calls run on.
#[derive(Clone)]
pub(super) struct RawExpirable {
    pub(super) client: Client,
    /// The mapped name: the key of the permit count.
    pub(super) name: Arc<str>,
    /// The name as the caller gave it.
    pub(super) given: Arc<str>,
    /// `{name}:timeout`: permit id → expiry in ms.
    timeouts: Arc<str>,
    /// `redisson_sc:{name}`.
    pub(super) channel: Arc<str>,
    /// The keys of this client's receipts for this semaphore's changes.
    receipts: keys::UnlockLatches,
    /// A bound on each call's times (a settle's, on the watchdog thread); the pool's own
    /// settings when `None`.
    bound: Option<Duration>,
    /// The priority its acquires wait with
    /// ([`PermitExpirableSemaphore::with_priority`](super::PermitExpirableSemaphore::with_priority)).
    pub(super) priority: Option<u32>,
}

impl RawExpirable {
    pub(super) fn new(client: Client, name: Named) -> RawExpirable {
        RawExpirable {
            timeouts: keys::permit_timeouts(&name.key).into(),
            channel: keys::semaphore_channel(&name.key).into(),
            receipts: keys::UnlockLatches::new(&name.key, client.id()),
            name: name.key,
            given: name.given,
            client,
            bound: None,
            priority: None,
        }
    }

    /// Takes the waiter `id` (its first permit's) out of the queue of waiters with a
    /// priority (a wait given up), waking the next one if it was first and permits are
    /// available.
    pub(super) fn leave(&self, id: &PermitId) -> Result<bool> {
        let member = id.member();
        self.client
            .inner
            .backend
            .run_repeatable(&self.name, self.policy(), |c| {
                scripts::PRIORITY_LEAVE
                    .key(&keys::priority_queue(&self.name))
                    .key(&keys::priority_alive(&self.name))
                    .key(&self.name)
                    .key(&self.channel)
                    .arg(&member)
                    .arg(self.client.publish())
                    // Expired permits come back at the next waiter's attempt.
                    .arg("1")
                    .invoke(c)
            })
    }

    /// What settles an acquire of `ids` whose reply never came (see the watchdog's
    /// `doubt.rs`): once the server answers, the permits it took, if it ran, are released.
    /// The ids are that acquire's own, so nothing else is given back. Holds the client
    /// weakly: a client dropped meanwhile settles nothing (the permits' leases run out).
    pub(super) fn settler(&self, ids: Vec<PermitId>) -> Settle {
        let client = Arc::downgrade(&self.client.inner);
        let name = Named {
            given: Arc::clone(&self.given),
            key: Arc::clone(&self.name),
        };
        Box::new(move |_| {
            let Some(inner) = client.upgrade() else {
                return Ok(Settled::Done);
            };
            let mut raw = RawExpirable::new(Client { inner }, name.clone());
            raw.bound = Some(raw.client.inner.config.response_timeout.min(SETTLE_BOUND));
            let released = raw.release_many(&ids)?;
            if released == 0 {
                // It took nothing, or has not arrived yet (delayed on the way).
                return Ok(Settled::LookAgain);
            }
            log::warn!(
                "`{}`: released {released} permit(s) taken by an acquire whose reply was lost",
                raw.name
            );
            Ok(Settled::Done)
        })
    }

    /// `lua/pes_try_set_permits.lua`: sets the count if none is set; whether it did.
    pub(super) fn try_set(&self, permits: u32) -> Result<bool> {
        self.run_receipted(&scripts::PES_TRY_SET_PERMITS, &permits.to_string())
            .map(|set: i64| set == 1)
    }

    /// `lua/pes_add_permits.lua`: adds `delta` to the count; the new count.
    pub(super) fn add(&self, delta: i64) -> Result<i64> {
        self.run_receipted(&scripts::PES_ADD_PERMITS, &delta.to_string())
    }

    /// A change with one argument `arg` and a new receipt (the script's `KEYS[4]`, its time
    /// to live the last argument), which makes the call sent again after an interrupted read
    /// return the first call's reply and change nothing more; the receipt is deleted later
    /// once the reply came.
    fn run_receipted<T: redis::FromRedisValue>(
        &self,
        script: &scripts::Lua,
        arg: &str,
    ) -> Result<T> {
        let inner = &self.client.inner;
        let receipt = self
            .receipts
            .key(inner.requests.fetch_add(1, Ordering::Relaxed));
        let ttl = millis(keys::RECEIPT_TTL).to_string();
        let args: [&[u8]; 2] = [arg.as_bytes(), ttl.as_bytes()];
        let reply = self.again_if_interrupted(|| self.run_with_keys(script, &[&receipt], &args))?;
        inner.backend.delete_later(receipt);
        Ok(reply)
    }

    /// `lua/pes_available.lua`: the count, expired permits counted back in.
    pub(super) fn available(&self) -> Result<i64> {
        self.run_repeatable(&scripts::PES_AVAILABLE, &[])
    }

    /// The counts as `lua/pes_counts.lua` reads them, without writing.
    pub(super) fn counts(&self) -> Result<Counts> {
        let reply: Vec<i64> = self.run_repeatable(&scripts::PES_COUNTS, &[])?;
        match reply[..] {
            [available, acquired, exists @ (0 | 1)] if acquired >= 0 => Ok(Counts {
                available,
                acquired: acquired.unsigned_abs(),
                exists: exists == 1,
            }),
            _ => Err(Error::Protocol(format!("counts script replied {reply:?}"))),
        }
    }

    /// `lua/pes_lease.lua`: how long permit `id` has left; `None` if it is no permit,
    /// `Duration::MAX` if it never expires.
    pub(super) fn lease(&self, id: &PermitId) -> Result<Option<Duration>> {
        let ms: i64 = self.run_repeatable(&scripts::PES_LEASE, &[&id.member()])?;
        match ms {
            -2 => Ok(None),
            -1 => Ok(Some(Duration::MAX)),
            1.. => Ok(Some(Duration::from_millis(ms.unsigned_abs()))),
            _ => Err(Error::Protocol(format!("lease script replied {ms}"))),
        }
    }

    /// `lua/pes_release.lua` for one permit: whether it was taken (and is now released).
    pub(super) fn release(&self, id: &PermitId) -> Result<bool> {
        self.release_many(std::slice::from_ref(id))
            .map(|released| released == 1)
    }

    /// `lua/pes_release.lua` for every permit of `ids`: how many were taken (and are now
    /// released). A call whose reply's read was interrupted ran: it is sent again, and the
    /// ids it finds gone count as released by the first (a lease that ran out just before
    /// is not told apart).
    pub(super) fn release_many(&self, ids: &[PermitId]) -> Result<u32> {
        let members: Vec<Vec<u8>> = ids.iter().map(PermitId::member).collect();
        let args: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
        let mut lost = false;
        let released: i64 = self.again_if_interrupted(|| {
            let sent = self.run(&scripts::PES_RELEASE, &args);
            lost |= sent.as_ref().is_err_and(Error::is_interrupted_read);
            sent
        })?;
        let released = if lost { ids.len() as i64 } else { released };
        u32::try_from(released)
            .map_err(|_| Error::Protocol(format!("release script replied {released}")))
    }

    /// `lua/pes_update_lease.lua`: sets permit `id`'s lease to `lease` from now; false if
    /// it is no permit.
    pub(super) fn update_lease(&self, id: &PermitId, lease: Duration) -> Result<bool> {
        let lease_ms = millis(lease).to_string();
        match self.run_repeatable(
            &scripts::PES_UPDATE_LEASE,
            &[&id.member(), lease_ms.as_bytes()],
        )? {
            1 => Ok(true),
            0 => Ok(false),
            n => Err(Error::Protocol(format!("update lease script replied {n}"))),
        }
    }

    /// One acquire attempt of every permit of `ids` at once: done once taken. The count it
    /// saw goes to the other waiters; and when it took the last permit, or learned when the
    /// earliest permit expires, one other waiter is told as this one leaves (the others'
    /// wait bounds predate that expiry: else a holder that dies could strand them).
    ///
    /// `waits`: for a waiter with a priority, whether it waits if refused (it joins the
    /// queue, or keeps its place there); its id there is its first permit's.
    pub(super) fn attempt(&self, ids: &[PermitId], lease: Duration, waits: bool) -> Result<Tried> {
        let lease_ms = millis(lease).to_string();
        let n = ids.len().to_string();
        let members: Vec<Vec<u8>> = ids.iter().map(PermitId::member).collect();
        let gate = self.priority.map(|p| priority::gate_args(p, waits));
        let mut args = Vec::with_capacity(ids.len() + 6);
        args.push(lease_ms.as_bytes());
        args.push(n.as_bytes());
        args.extend(members.iter().map(Vec::as_slice));
        if let Some(gate) = &gate {
            args.extend(gate.iter().map(String::as_bytes));
        }
        let reply: Vec<i64> = self.acquire_learning(ids, &args)?;
        match reply[..] {
            [1, left] => {
                let tried = Tried::done().seeing(left);
                Ok(if left <= 0 {
                    tried.telling_one()
                } else {
                    tried
                })
            }
            [0, available, wait] => {
                let retry_in = u64::try_from(wait).ok().map(Duration::from_millis);
                let tried = Tried::again(retry_in).seeing(available);
                Ok(if retry_in.is_some() {
                    tried.telling_one()
                } else {
                    tried
                })
            }
            _ => Err(Error::Protocol(format!("acquire script replied {reply:?}"))),
        }
    }

    /// `lua/pes_acquire.lua` with `args`, for `ids`. A call whose reply's read was
    /// interrupted ran: the ids are this acquire's own, so whether it took them is read back
    /// (all or none are taken); taken, the reply is made up (`{1, 0}`: no count seen, and one
    /// other waiter told as this one leaves), else the call is made again, up to the
    /// configured retry attempts. A read that fails returns the acquire's error.
    fn acquire_learning(&self, ids: &[PermitId], args: &[&[u8]]) -> Result<Vec<i64>> {
        let mut again = self.client.inner.backend.retries();
        loop {
            let sent = match self.priority {
                None => self.run(&scripts::PES_ACQUIRE, args),
                Some(_) => {
                    let (queue, alive) = (
                        keys::priority_queue(&self.name),
                        keys::priority_alive(&self.name),
                    );
                    self.run_with_keys(&scripts::PES_PRIORITY_ACQUIRE, &[&queue, &alive], args)
                }
            };
            match sent {
                Err(e) if e.is_interrupted_read() && again > 0 => {
                    again -= 1;
                    let first = ids[0].member();
                    let score =
                        self.client
                            .inner
                            .backend
                            .run_repeatable(&self.name, self.policy(), |c| {
                                redis::cmd("ZSCORE")
                                    .arg(&*self.timeouts)
                                    .arg(&first)
                                    .query::<Option<f64>>(c)
                            });
                    match score {
                        Ok(Some(_)) => return Ok(vec![1, 0]),
                        Ok(None) => {}
                        Err(_) => return Err(e),
                    }
                }
                other => return other,
            }
        }
    }

    /// Makes `call` again while its reply's read is interrupted, up to the configured retry
    /// attempts: for a call that may run twice.
    fn again_if_interrupted<T>(&self, call: impl FnMut() -> Result<T>) -> Result<T> {
        retry_interrupted(self.client.inner.backend.retries(), None, call)
    }

    /// As [`run`](Self::run), for a script that may run twice (a read, a lease set from
    /// now): sent again when its reply's read is interrupted.
    fn run_repeatable<T: redis::FromRedisValue>(
        &self,
        script: &scripts::Lua,
        args: &[&[u8]],
    ) -> Result<T> {
        self.again_if_interrupted(|| self.run(script, args))
    }

    fn policy(&self) -> Policy {
        self.bound.map_or(Policy::Retried, Policy::Bounded)
    }

    /// Runs one `lua/pes_*.lua` script with the semaphore's keys, the publish command and
    /// `args`. A wrong-type reply names the key the script found wrong.
    fn run<T: redis::FromRedisValue>(&self, script: &scripts::Lua, args: &[&[u8]]) -> Result<T> {
        self.run_with_keys(script, &[], args)
    }

    /// As [`run`](Self::run), with more keys after the three, `extra`, where the script
    /// takes them.
    fn run_with_keys<T: redis::FromRedisValue>(
        &self,
        script: &scripts::Lua,
        extra: &[&str],
        args: &[&[u8]],
    ) -> Result<T> {
        let mut call = script.key(&self.name);
        call.key(&self.timeouts).key(&self.channel);
        for key in extra {
            call.key(key);
        }
        call.arg(self.client.publish());
        for arg in args {
            call.arg(*arg);
        }
        let policy = self.policy();
        let reply = self
            .client
            .inner
            .backend
            .run_with(&self.name, policy, |c| match call.invoke(c) {
                Ok(reply) => Ok(Some(reply)),
                Err(e) if e.to_string().contains(TIMEOUTS_WRONG_TYPE) => Ok(None),
                Err(e) => Err(e),
            })?;
        reply.ok_or_else(|| Error::WrongType {
            key: self.timeouts.to_string(),
        })
    }
}

/// What `lua/pes_counts.lua` reads.
pub(super) struct Counts {
    /// The count, with the expired permits not yet reclaimed counted back in.
    pub(super) available: i64,
    /// The permits whose lease has not run out.
    pub(super) acquired: u64,
    /// Whether the count key exists.
    pub(super) exists: bool,
}

/// Checks how many permits one call takes or releases.
pub(super) fn check_count(n: usize) -> Result<()> {
    check_permits(n)?;
    if n > MAX_PERMITS_AT_ONCE {
        return Err(Error::invalid(format!(
            "at most {MAX_PERMITS_AT_ONCE} permits at once, not {n}"
        )));
    }
    Ok(())
}

/// `pes_renew.lua`: a permit is its id in the semaphore's `{name}:timeout` sorted set, whose
/// score (its expiry) is set to the server's time plus the lease.
pub(super) static RENEW_PERMIT: BatchRenewal = BatchRenewal {
    script: &scripts::PES_RENEW,
    add: |call, name, id| {
        call.key(keys::permit_timeouts(name))
            .arg(keys::permit_member(id));
    },
    holds: true,
    leased: true,
};

#[cfg(test)]
mod tests {
    use super::TIMEOUTS_WRONG_TYPE;

    /// Every first call on the timeout set: the reclaim prelude of the scripts that write,
    /// and the read-only scripts' first reads.
    #[test]
    fn the_timeout_set_checks_report_the_timeout_key_as_rust_expects() {
        for script in [
            include_str!("../../../lua/pes_common.lua"),
            include_str!("../../../lua/pes_counts.lua"),
            include_str!("../../../lua/pes_lease.lua"),
        ] {
            assert!(script.contains(TIMEOUTS_WRONG_TYPE));
        }
    }
}
