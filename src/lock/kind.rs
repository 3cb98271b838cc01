//! What a lock kind supplies: the [`Kind`] trait that [`RawLock`](crate::lock::raw::RawLock)
//! runs, and the [`Renewal`] it hands the watchdog. One kind per file: `plain.rs` (Redisson's
//! `RLock`, and as its variants `RedissonNonReentrantLock` and `RFencedLock`), `fair.rs`
//! (`RFairLock`, and `RedissonNonReentrantFairLock`), `read.rs` and `write.rs` (the two sides
//! of `RReadWriteLock`), `spin.rs` (`RSpinLock`). A kind states what it can do by the trait's
//! methods, each with a default; no kind forwards to another.

use std::borrow::Cow;
use std::sync::Arc;

use redis::{ConnectionLike, RedisResult, Value};

use crate::backoff::Backoff;
use crate::deadlock::Mode;
use crate::error::Result;
use crate::hold::LockKind;
use crate::lock::key::LockKey;
use crate::scripts;
use crate::watchdog::{BatchRenewal, Renewal};

/// How a waiter waits for a lock kind: listening on a channel its releases publish on, or,
/// for a kind whose releases publish nothing (the spin lock), retrying after each delay of a
/// back-off.
pub(crate) enum Waiting<'a> {
    Channel(Cow<'a, str>),
    Backoff(Backoff),
}

/// What an acquire attempt asks of a kind with a queue (fair) when the lock is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queueing {
    /// Only try: the caller will not wait, and takes no place.
    No,
    /// The caller's first attempt: it will wait, so it joins the queue at its tail.
    Join,
    /// A later attempt of a caller that joined: it keeps its place, and if a script removed
    /// it meanwhile (a live head popped as presumed dead), it takes back the head.
    Keep,
}

impl Queueing {
    /// Whether the caller waits if the attempt fails.
    pub(crate) fn will_wait(self) -> bool {
        self != Queueing::No
    }
}

/// A lock kind's protocol: its scripts, keys and how its waiters wait, and the few answers
/// the [`Lock`](crate::Lock) API needs from it.
/// [`RawLock`](crate::lock::raw::RawLock) runs what every kind shares around these calls (replica confirmation, the unlock latch and the retry or settle of a lost unlock); each call is given
/// the lock it runs for (its name, its client). The defaults are what most kinds share.
pub(crate) trait Kind: Send + Sync + 'static {
    /// What `Debug` calls this kind: `plain`, `fair`, `read`, `write`, `fenced`, `spin`,
    /// `non-reentrant` or `non-reentrant fair`.
    fn label(&self) -> LockKind;

    /// Runs one acquire attempt of `owner` with a lease of `lease_ms` on `c`, and returns the
    /// script's reply for [`RawLock`](crate::lock::raw::RawLock) to decode: `{count}` (or `{count, token}`) when acquired,
    /// the lock's PTTL when not, `{0}` when a non-reentrant kind refuses an owner that holds
    /// it already. `queueing`: whether the caller waits if this attempt fails, and whether
    /// it has a place in a queue already.
    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        queueing: Queueing,
    ) -> RedisResult<Value>;

    /// Runs the unlock script releasing one hold of `release.owner` on `c`, with its unlock
    /// latch, and its lease applied again to holds that remain (see [`Release`]). The
    /// raw reply: nil (not held), 0 (still held), 1 (released), 2 (a hold that had expired),
    /// 3 (passed to [`Release::pass_to`]), `-1 - count` (another count than
    /// [`Release::expect`]: nothing changed).
    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>>;

    /// Runs the script that deletes the lock whoever holds it; true if it was held.
    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool>;

    /// How `owner` waits while the lock is taken: on a channel, or retrying.
    fn waiting(&self, lock: &LockKey, owner: &str) -> Waiting<'_>;

    /// What tells `owner`'s holds apart from others' (the watchdog's and the client's key of
    /// a hold, with the lock name). Defaults to the owner id, the hash field holding its hold
    /// count.
    fn field(&self, owner: &str) -> String {
        owner.to_owned()
    }

    /// The hash field holding `owner`'s hold count. Defaults to [`field`](Self::field).
    fn count_field(&self, owner: &str) -> String {
        self.field(owner)
    }

    /// Whether the lock is well made (checked with its name before each call). Defaults to
    /// yes.
    fn check(&self) -> Result<()> {
        Ok(())
    }

    /// What the watchdog renews for `owner`'s holds. Defaults to the owner's field of the
    /// lock hash ([`RENEW_FIELD`]), sharing `owner`'s allocation: the watchdog keeps this for
    /// as long as the lock is held, and this way it has no string of its own.
    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        Renewal {
            field: Arc::clone(owner),
            batch: &RENEW_FIELD,
        }
    }

    /// Whether a holder can be asked to release, preempted or robbed
    /// ([`Lock::preempt`](crate::Lock::preempt)): an exclusive lock whose hash is one owner's
    /// count (plain, non-reentrant, fenced). Defaults to no.
    fn is_revocable(&self) -> bool {
        false
    }

    /// Whether its waiters may wait with a priority
    /// ([`Lock::with_priority`](crate::Lock::with_priority)). Defaults to no.
    fn has_priorities(&self) -> bool {
        false
    }

    /// Whether anybody holds the lock. Defaults to the lock hash existing.
    fn is_locked(&self, lock: &LockKey) -> Result<bool> {
        lock.query(redis::cmd("EXISTS").arg(&*lock.name))
            .map(|n: i64| n == 1)
    }

    /// Called once before `owner` starts waiting, after an attempt found the lock taken.
    /// Defaults to nothing.
    fn before_wait(&self, lock: &LockKey, owner: &str) {
        let _ = (lock, owner);
    }

    /// Whether waiters get the lock in arrival order. Such a kind queues a waiter in Redis,
    /// and a waiter that gives up must [`leave`](Self::leave). Defaults to false.
    fn is_fair(&self) -> bool {
        false
    }

    /// Takes `owner` out of the lock's queue of waiters (a wait given up); true if it was
    /// queued. Defaults to false: no queue.
    fn leave(&self, lock: &LockKey, owner: &str) -> Result<bool> {
        let _ = (lock, owner);
        Ok(false)
    }

    /// Whether an owner that holds the lock may acquire it again (its hold count goes up).
    /// Defaults to true; a kind that says false refuses such an acquire with `{0}`.
    fn is_reentrant(&self) -> bool {
        true
    }

    /// Whether this kind's unlock script takes an unlock latch ([`Release::latch`]), which
    /// makes a retried call idempotent. Defaults to false: the script takes the hold count
    /// the caller expects ([`Release::expect`]; see `lua/lock_unlock.lua`), and a lost reply
    /// of its unlock is settled by the count it left (see
    /// [`RawLock::unlock`](crate::lock::raw::RawLock::unlock)). The group lock says true:
    /// its holds of one owner share counts.
    fn latched_unlock(&self) -> bool {
        false
    }

    /// Whether the unlock script can pass the last hold to a waiter of the same client
    /// ([`Release::pass_to`]; see `handover.rs`). Defaults to false: the plain kinds say
    /// true (a fenced lock's new holder needs a new token, a fair one's the head of its
    /// queue).
    fn passes_inside_client(&self) -> bool {
        false
    }

    /// The channel on which a condition wait's own script releases the lock (deleting its
    /// hash, publishing `0`), for a kind whose last release is just that; `None`: the wait
    /// leaves one hold for the kind's own unlock, sent next. Defaults to `None`.
    fn released_by_wait(&self) -> Option<&str> {
        None
    }

    /// Whether the lock has [conditions](crate::Condition): an exclusive kind. Defaults to
    /// true; the read side of a read-write lock says false (as `ReentrantReadWriteLock`'s).
    fn has_conditions(&self) -> bool {
        true
    }

    /// What blocks a waiter of this kind, as its wait record tells a deadlock check (see
    /// `deadlock/`). Defaults to [`Mode::Exclusive`]: every holder.
    fn wait_mode(&self) -> Mode {
        Mode::Exclusive
    }

    /// The fencing token counter, for a kind whose acquire takes a token. Defaults to none.
    fn token_key(&self) -> Option<&str> {
        None
    }

    /// For a kind whose holds of one owner share counts on the server (a group lock's value
    /// sets, which count each value once for every set that names it): the start of the
    /// watchdog field of each of `owner`'s holds of this lock. A settle then counts all of
    /// them, and a call on one of them settles the others' doubts first. `None` (the
    /// default): a hold's count is its field's alone.
    fn overlapping(&self, owner: &str) -> Option<String> {
        let _ = owner;
        None
    }

    /// For a kind with [`overlapping`](Self::overlapping) holds: gives back one hold of
    /// `owner` that an acquire in doubt took, if the server shows one beyond what the
    /// client's guards hold (`known`: each hold's watchdog field and count, this kind's
    /// only); true if it gave one back. Defaults to giving back nothing.
    fn settle_overlapping(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        known: &[(Arc<str>, u32)],
    ) -> RedisResult<bool> {
        let _ = (lock, c, owner, lease_ms, known);
        Ok(false)
    }
}

/// One release request, as every kind's unlock script takes it.
pub(crate) struct Release<'a> {
    /// The owner id whose hold is released.
    pub(crate) owner: &'a str,
    /// The unlock latch key (`keys::unlock_latch`): makes a retried call idempotent. Empty
    /// for a kind that takes none ([`Kind::latched_unlock`]).
    pub(crate) latch: &'a str,
    /// The lease, in ms, set again when the owner still holds the lock.
    pub(crate) lease_ms: u64,
    /// How long the latch is kept, in ms.
    pub(crate) latch_ttl_ms: u64,
    /// For a kind without a latch: the owner's hold count the call expects before the
    /// release; a call that finds another changes nothing (`lua/lock_unlock.lua`). `None`:
    /// any count (Redisson's unlock).
    pub(crate) expect: Option<u32>,
    /// For a kind that [passes](Kind::passes_inside_client) (a plain one with `expect` 1):
    /// a waiter of this client to pass the last hold to.
    pub(crate) pass_to: Option<Pass<'a>>,
}

/// A pass of the last hold to a waiting thread of the same client (see `handover.rs`).
#[derive(Clone, Copy)]
pub(crate) struct Pass<'a> {
    /// The waiter's owner id.
    pub(crate) to: &'a str,
    /// The lease, in ms, set for it.
    pub(crate) lease_ms: u64,
    /// The call is sent again (its first reply was lost): finding the hold passed already is
    /// its success. A first call must not take that for one: the waiter may hold the lock by
    /// an acquire of its own.
    pub(crate) again: bool,
}

impl Pass<'_> {
    /// The script arguments: the waiter, its lease, and `"again"` on a call sent again.
    pub(crate) fn args(&self, call: &mut scripts::Call<'_>) {
        call.arg(self.to).arg(self.lease_ms);
        if self.again {
            call.arg("again");
        }
    }
}

/// `lock_renew.lua`: a hold is its field of the lock hash, which expires as a whole.
pub(crate) static RENEW_FIELD: BatchRenewal = BatchRenewal {
    script: &scripts::LOCK_RENEW,
    add: |call, name, field| {
        call.key(name).arg(field);
    },
    holds: true,
    leased: true,
};

/// The renewal of a plain or fenced lock's holds: as [`RENEW_FIELD`], and each hold is told of
/// a revocation pending for it (`lua/lock_renew_revocable.lua`).
pub(crate) static RENEW_REVOCABLE: BatchRenewal = BatchRenewal {
    script: &scripts::LOCK_RENEW_REVOCABLE,
    add: |call, name, field| {
        call.key(name).key(crate::keys::revoke(name)).arg(field);
    },
    holds: true,
    leased: true,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::Client;
    use crate::lock::fair::Fair;
    use crate::lock::plain::Plain;
    use crate::lock::raw::RawLock;
    use crate::lock::read::Read;
    use crate::lock::write::Write;

    #[test]
    fn renewal_shares_the_owner_string_except_for_a_write_hold() {
        // The watchdog keeps the renewal's field for as long as the lock is held: where it is
        // the owner id, it must not be a copy of its own.
        let owner: Arc<str> = Arc::from("uuid:7");
        let kinds: [Box<dyn Kind>; 6] = [
            Box::new(Plain::new("l")),
            Box::new(Fair::new("l", Duration::from_secs(300))),
            Box::new(Plain::fenced("l")),
            Box::new(Read::new("rw")),
            Box::new(Plain::non_reentrant("l")),
            Box::new(Fair::non_reentrant("l", Duration::from_secs(300))),
        ];
        for kind in kinds {
            let renewal = kind.renewal(&owner);
            assert!(Arc::ptr_eq(&renewal.field, &owner), "{}", kind.label());
        }
        let write = Write::new("rw").renewal(&owner);
        assert_eq!(&*write.field, "uuid:7:write");
        assert!(std::ptr::eq(write.batch, &RENEW_FIELD));
        let read = Read::new("rw").renewal(&owner);
        assert!(
            !std::ptr::eq(read.batch, &RENEW_FIELD),
            "read holds have lease keys"
        );
    }

    #[test]
    fn each_kind_names_its_wait_channel_and_field() {
        let client = Client::open("redis://127.0.0.1/").unwrap();
        let plain = RawLock::new(client.clone(), &client.named("l"), Plain::new("l"));
        assert_eq!(plain.wait_channel("u:1"), "redisson_lock__channel:{l}");
        assert_eq!(plain.field("u:1"), "u:1");
        let fenced = RawLock::new(client.clone(), &client.named("l"), Plain::fenced("l"));
        assert_eq!(fenced.wait_channel("u:1"), "redisson_lock__channel:{l}");
        assert_eq!(fenced.kind.token_key(), Some("redisson_lock_token:{l}"));
        let fair = RawLock::new(
            client.clone(),
            &client.named("l"),
            Fair::new("l", Duration::from_secs(1)),
        );
        assert_eq!(fair.wait_channel("u:1"), "redisson_lock__channel:{l}:u:1");
        assert!(fair.kind.is_fair() && !plain.kind.is_fair());
        let once = RawLock::new(
            client.clone(),
            &client.named("l"),
            Plain::non_reentrant("l"),
        );
        assert_eq!(once.wait_channel("u:1"), "redisson_lock__channel:{l}");
        assert_eq!(once.field("u:1"), "u:1");
        assert!(!once.kind.is_fair() && !once.kind.is_reentrant() && plain.kind.is_reentrant());
        let once_fair = RawLock::new(
            client.clone(),
            &client.named("l"),
            Fair::non_reentrant("l", Duration::from_secs(1)),
        );
        assert_eq!(
            once_fair.wait_channel("u:1"),
            "redisson_lock__channel:{l}:u:1"
        );
        assert!(once_fair.kind.is_fair() && !once_fair.kind.is_reentrant());
        let read = RawLock::new(client.clone(), &client.named("rw"), Read::new("rw"));
        assert_eq!(read.wait_channel("u:1"), "redisson_rwlock:{rw}");
        assert_eq!(read.field("u:1"), "u:1");
        let write = RawLock::new(client.clone(), &client.named("rw"), Write::new("rw"));
        assert_eq!(write.wait_channel("u:1"), "redisson_rwlock:{rw}");
        assert_eq!(write.field("u:1"), "u:1:write");
    }
}
