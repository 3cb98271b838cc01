//! The key layout: every Redis key, hash field and pub/sub channel of every object, written
//! once. This is the wire contract with Redisson (`RedissonObject.prefixName` and
//! `suffixName`, and each object's channel name); primitives, `inspect`, `list` and `watch`
//! all take their names from here, and the crate docs' key-layout table is checked against
//! it by a test.
//!
//! `name` is the object's name as given (the key of its main value). Helper keys and channels
//! carry the name as a cluster hash tag (`prefix:{name}`), so that everything of one object
//! lands in the name's slot; a name that already contains `{` is used as it is
//! (`prefix:name`), as Redisson does.

// Until every call site takes its names from here.
#![allow(dead_code)]

/// Prefix of a lock's channel: `redisson_lock__channel:{name}`.
pub(crate) const LOCK_CHANNEL: &str = "redisson_lock__channel";
/// Prefix of a fair lock's queue of waiting owners.
pub(crate) const FAIR_QUEUE: &str = "redisson_lock_queue";
/// Prefix of a fair lock's waiter deadlines.
pub(crate) const FAIR_TIMEOUTS: &str = "redisson_lock_timeout";
/// Prefix of a fenced lock's token counter.
pub(crate) const FENCE_TOKEN: &str = "redisson_lock_token";
/// Prefix of an unlock's short-lived idempotency key.
pub(crate) const UNLOCK_LATCH: &str = "redisson_unlock_latch";
/// Prefix of a read-write lock's channel.
pub(crate) const RW_CHANNEL: &str = "redisson_rwlock";
/// Prefix of a semaphore's channel (both kinds).
pub(crate) const SEMAPHORE_CHANNEL: &str = "redisson_sc";
/// Prefix of a [`FencedResource`](crate::FencedResource)'s fence (ours, not Redisson's).
pub(crate) const RESOURCE_FENCE: &str = "redlatch_fence";
/// Suffix of a permit-expirable semaphore's permit expiries: `{name}:timeout`.
pub(crate) const PERMIT_TIMEOUTS: &str = "timeout";
/// What names one read hold's lease key, after the owner: `{name}:<owner>:rwlock_timeout:<n>`.
pub(crate) const READ_HOLD: &str = "rwlock_timeout";
/// Suffix of a writer's hash field in a read-write lock: `<owner>:write`.
pub(crate) const WRITE_FIELD: &str = "write";
/// The hash field of a read-write lock that says which side holds it: `read` or `write`.
pub(crate) const RW_MODE: &str = "mode";

/// The prefixes of helper keys `prefix:{name}` that stand for an object `name` (for `list`,
/// which groups keys under their object). Unlock latches come with a request id after the
/// name and are listed apart ([`UNLOCK_LATCH`]).
pub(crate) const TAGGED_HELPERS: [&str; 4] =
    [FAIR_QUEUE, FAIR_TIMEOUTS, FENCE_TOKEN, RESOURCE_FENCE];

/// `prefix:{name}`, or `prefix:name` when the name carries its own hash tag (Redisson's
/// `prefixName`).
pub(crate) fn tagged(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when the name carries its own hash tag (Redisson's
/// `suffixName`).
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    format!("{}:{suffix}", hashed(name))
}

/// `{name}`, or the name itself when it carries its own hash tag: what every read-hold lease
/// key of a read-write lock starts with.
pub(crate) fn hashed(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// The channel on which a lock's (plain, fenced) release is published: `0` wakes one waiter.
pub(crate) fn lock_channel(name: &str) -> String {
    tagged(LOCK_CHANNEL, name)
}

/// A fair lock's waiter `owner`'s own channel: `0` when its turn comes.
pub(crate) fn fair_waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

/// A fair lock's LIST of waiting owners, in arrival order.
pub(crate) fn fair_queue(name: &str) -> String {
    tagged(FAIR_QUEUE, name)
}

/// A fair lock's ZSET owner → deadline (ms on the server's clock).
pub(crate) fn fair_timeouts(name: &str) -> String {
    tagged(FAIR_TIMEOUTS, name)
}

/// A fenced lock's token counter (INCR on every acquire, never expires).
pub(crate) fn fence_token(name: &str) -> String {
    tagged(FENCE_TOKEN, name)
}

/// The short-lived key that makes a retried unlock (request id `request`) idempotent.
pub(crate) fn unlock_latch(name: &str, request: &str) -> String {
    format!("{}:{request}", tagged(UNLOCK_LATCH, name))
}

/// A read-write lock's channel: `1` after a write release (wake all), `0` after a read
/// release frees it.
pub(crate) fn rw_channel(name: &str) -> String {
    tagged(RW_CHANNEL, name)
}

/// The hash field of `owner`'s write holds in a read-write lock.
pub(crate) fn write_field(owner: &str) -> String {
    format!("{owner}:{WRITE_FIELD}")
}

/// `{name}:<owner>:rwlock_timeout`: `owner`'s read holds are `<this>:<n>`, n = 1, 2, ...
pub(crate) fn read_holds(name: &str, owner: &str) -> String {
    format!("{}:{READ_HOLD}", suffixed(name, owner))
}

/// A semaphore's channel (both kinds): the message is the new permit count.
pub(crate) fn semaphore_channel(name: &str) -> String {
    tagged(SEMAPHORE_CHANNEL, name)
}

/// A permit-expirable semaphore's ZSET permit id → expiry (ms, server clock).
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffixed(name, PERMIT_TIMEOUTS)
}

/// A count-down latch's channel. Redisson always adds braces here, even to a name with its
/// own hash tag.
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A [`FencedResource`](crate::FencedResource)'s fence: HASH `token`, `holder` of the
/// newest writer.
pub(crate) fn resource_fence(name: &str) -> String {
    tagged(RESOURCE_FENCE, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_keys_share_the_object_slot() {
        assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
        assert_eq!(
            lock_channel("{user:1}:cart"),
            "redisson_lock__channel:{user:1}:cart"
        );
        assert_eq!(permit_timeouts("sem"), "{sem}:timeout");
        assert_eq!(permit_timeouts("{a}b"), "{a}b:timeout");
        assert_eq!(read_holds("rw", "u:7"), "{rw}:u:7:rwlock_timeout");
        assert_eq!(hashed("{a}b"), "{a}b");
        assert_eq!(
            latch_channel("{a}b"),
            "redisson_countdownlatch__channel__{{a}b}"
        );
    }
}
