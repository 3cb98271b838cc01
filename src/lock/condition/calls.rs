//! The one-script calls a condition wait makes beside its four steps: leaving the queue,
//! handing a notification on, restoring a hold count. Each logs its own failure, and each is
//! sent again after an interrupted read (a receipt, or the script itself, makes that safe).

use super::Condition;
use crate::error::Result;
use crate::keys;
use crate::lock::owner::Ownership;
use crate::scripts;
use crate::time::millis;

impl<O: Ownership> Condition<O> {
    /// Takes waiter `id` out of the condition (`pass`: handing a notification that picked
    /// it on); the script's reply, `None` if the call failed (the place then runs out by
    /// its lease, unrenewed).
    pub(super) fn leave(&self, id: &str, pass: bool) -> Option<i64> {
        let raw = &self.lock.raw;
        let left = self.receipted(|c, receipt, ttl| {
            scripts::CONDITION_LEAVE
                .key(&self.waiters)
                .key(&self.queue)
                .key(receipt)
                .arg(id)
                .arg(if pass { "pass" } else { "take" })
                .arg(ttl)
                .invoke(c)
        });
        match left {
            Ok(reply) => Some(reply),
            Err(e) => {
                log::debug!(
                    "waiter {id} could not leave condition `{}` of `{}` ({e}): its place \
                     runs out within a lease",
                    self.name,
                    raw.key.name
                );
                None
            }
        }
    }

    /// Hands on a notification that waiter `id` took and cannot act on (the lock is not
    /// held again): the next live waiter is picked, as a notify would pick it. If the call
    /// fails, the notification goes no further (logged).
    pub(super) fn hand_on(&self, id: &str) {
        let raw = &self.lock.raw;
        let passed: Result<i64> = self.receipted(|c, receipt, ttl| {
            scripts::CONDITION_PASS
                .key(&self.waiters)
                .key(&self.queue)
                .key(receipt)
                .arg(ttl)
                .invoke(c)
        });
        match passed {
            Ok(picked) => log::debug!(
                "waiter {id} of condition `{}` of `{}` handed on the notification it could \
                 not act on ({})",
                self.name,
                raw.key.name,
                if picked == 1 {
                    "another waiter picked"
                } else {
                    "no waiter left"
                }
            ),
            Err(e) => log::warn!(
                "waiter {id} of condition `{}` of `{}` could not hand on the notification it \
                 could not act on ({e}): it goes no further",
                self.name,
                raw.key.name
            ),
        }
    }

    /// Gives the owner's single hold its count `count` back; false (logged) if it could not.
    pub(super) fn restore(&self, field: &str, count: u32) -> bool {
        if count <= 1 {
            return true;
        }
        let raw = &self.lock.raw;
        let restored: Result<i64> = raw.again_if_interrupted(|| {
            raw.run(|c| {
                scripts::CONDITION_RESTORE
                    .key(&raw.key.name)
                    .arg(field)
                    .arg(count)
                    .invoke(c)
            })
        });
        if !matches!(restored, Ok(1)) {
            log::warn!(
                "the hold count {count} of `{}` (field {field}) was not restored after a \
                 condition wait: {restored:?}",
                raw.key.name
            );
            return false;
        }
        true
    }

    /// A call with a new receipt (`RawLock::new_receipt`), given with its time to live in ms:
    /// sent again while its reply's read is interrupted, it returns the first call's reply;
    /// the receipt is deleted later once a reply came.
    pub(super) fn receipted<T>(
        &self,
        mut f: impl FnMut(&mut dyn redis::ConnectionLike, &str, u64) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let raw = &self.lock.raw;
        let receipt = raw.new_receipt();
        let ttl = millis(keys::RECEIPT_TTL);
        let reply = raw.again_if_interrupted(|| raw.run(|c| f(c, &receipt, ttl)))?;
        raw.key.client.inner.backend.delete_later(receipt);
        Ok(reply)
    }
}
