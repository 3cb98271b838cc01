//! Settling a lock's calls whose reply never came: what the watchdog is handed for an owner's
//! acquire (or a pass, or an unlock made good so) that may or may not have run. Once the
//! server answers, the owner's holds beyond those the client's guards know of, up to the
//! acquires in doubt, are given back, one at a time, and a waiter's place in a fair queue is
//! left.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::client::{Client, Inner};
use crate::error::Result;
use crate::lock::kind::Kind;
use crate::lock::raw::{Ran, RawLock};
use crate::names::Named;
use crate::watchdog::{Settle, Settled, Unsettled};

/// The most a settle's call waits for its reply: on the watchdog thread, it holds up
/// renewals while the server does not answer.
const SETTLE_BOUND: Duration = Duration::from_secs(1);

impl RawLock {
    /// What settles `owner`'s calls on this lock whose reply never came (`queued`: an
    /// acquire that joined a fair queue), given back with `lease` where the kind sets one.
    pub(super) fn settler(&self, owner: &str, lease: Duration, queued: bool) -> Settle {
        InDoubt::new(self, owner, lease, queued).into_settle()
    }
}

/// One owner's calls in doubt on one lock. Holds the client weakly: a client dropped
/// meanwhile settles nothing (its holds' leases run out unrenewed).
pub(super) struct InDoubt {
    client: Weak<Inner>,
    name: Named,
    kind: Arc<dyn Kind>,
    owner: Arc<str>,
    /// The lease of a hold given back (for a kind whose unlock sets one on what stays).
    lease: Duration,
    /// The acquire joined a fair queue: its place is left too.
    queued: bool,
    /// The bound of the lock's own calls (a RedLock member's node timeout): a settle's
    /// calls are bounded by it too.
    bound: Option<Duration>,
}

impl InDoubt {
    /// `owner`'s calls in doubt on `raw`'s lock.
    fn new(raw: &RawLock, owner: &str, lease: Duration, queued: bool) -> InDoubt {
        InDoubt {
            client: Arc::downgrade(&raw.key.client.inner),
            name: Named {
                given: Arc::clone(&raw.given),
                key: Arc::clone(&raw.key.name),
            },
            kind: Arc::clone(&raw.kind),
            owner: owner.into(),
            lease,
            queued,
            bound: raw.key.bound,
        }
    }

    /// What the watchdog runs, when the owner's next call comes or on its own thread.
    fn into_settle(self) -> Settle {
        Box::new(move |told| self.settle(told))
    }

    fn settle(&self, told: Unsettled) -> Result<Settled> {
        let Some(raw) = self.lock(told.by_owner) else {
            return Ok(Settled::Done);
        };
        if let Some(prefix) = self.kind.overlapping(&self.owner) {
            return self.settle_overlapping(&raw, &prefix, told.acquires);
        }
        let count = self.count(&raw)?;
        let extra = count.saturating_sub(told.known_holds).min(told.acquires);
        self.give_back(&raw, count, extra)?;
        if self.queued {
            raw.leave(&self.owner)?;
        }
        if extra > 0 {
            log::warn!(
                "`{}` (owner {}): released {extra} hold(s) taken by acquires whose reply was lost",
                self.name.key,
                self.owner
            );
        }
        // Not looked at again even if nothing was found: a later look could count a hold
        // an acquire of the owner's is taking as it runs.
        Ok(Settled::Done)
    }

    /// Settles a kind whose holds of one owner share counts (a group lock's sets): each of
    /// up to `acquires` holds is given back only where the server counts it beyond the
    /// holds of every one of the owner's guards of the lock, so that a hold of an
    /// overlapping set is never taken for one of this set's.
    fn settle_overlapping(&self, raw: &RawLock, prefix: &str, acquires: u32) -> Result<Settled> {
        let watchdog = &raw.key.client.inner.watchdog;
        let mut released = 0;
        while released < acquires {
            let known = watchdog.known_holds_like(&self.name.key, prefix);
            let lease_ms = crate::time::millis(self.lease);
            let gave = raw.run(|c| {
                raw.kind
                    .settle_overlapping(&raw.key, c, &self.owner, lease_ms, &known)
            })?;
            if !gave {
                break;
            }
            released += 1;
        }
        if released > 0 {
            log::warn!(
                "`{}` (owner {}): released {released} hold(s) taken by acquires whose reply was lost",
                self.name.key,
                self.owner
            );
        }
        Ok(Settled::Done)
    }

    /// The lock, if its client is still there: on the owner's thread, as patient as its own
    /// calls (retried through a failover, or bounded as a RedLock member's); on the watchdog
    /// thread, short.
    fn lock(&self, by_owner: bool) -> Option<RawLock> {
        let client = Client {
            inner: self.client.upgrade()?,
        };
        let short = client.inner.config.response_timeout.min(SETTLE_BOUND);
        let bound = match self.bound {
            Some(own) if by_owner => Some(own),
            Some(own) => Some(own.min(short)),
            None => (!by_owner).then_some(short),
        };
        let mut raw = RawLock::of(client, &self.name, Arc::clone(&self.kind));
        raw.key.bound = bound;
        Some(raw)
    }

    /// The owner's hold count on the server.
    fn count(&self, raw: &RawLock) -> Result<u32> {
        let field = raw.kind.count_field(&self.owner);
        let count: Option<i64> =
            raw.run(|c| redis::cmd("HGET").arg(&*self.name.key).arg(&field).query(c))?;
        Ok(u32::try_from(count.unwrap_or(0)).unwrap_or(0))
    }

    /// Releases `extra` of the owner's `count` holds, each expecting the count it leaves.
    fn give_back(&self, raw: &RawLock, count: u32, extra: u32) -> Result<()> {
        for released in 0..extra {
            // Once, with no retry and no doubt of its own: a lost reply fails this settle,
            // and the next try counts again. Without a latch, only from the count just read:
            // a lost call of the owner's that runs meanwhile leaves another, and then this
            // changes nothing.
            let latch = raw.new_latch();
            let mut release = raw.release(&self.owner, &latch, self.lease);
            release.expect = Some(count - released);
            let ran = raw.unlock_script(&release)?;
            if !latch.is_empty() {
                raw.key.client.inner.backend.delete_later(latch);
            }
            if let Ran::Differs(now) = ran {
                log::debug!(
                    "`{}` (owner {}): the count changed to {now} while settling",
                    self.name.key,
                    self.owner
                );
                break;
            }
        }
        Ok(())
    }
}
