//! Locks: the raw protocol layer and the typed API over it.

mod guard;
mod multi;
mod raw;
mod reentrant;
mod rw;

pub use guard::LockGuard;
pub use multi::{MultiLock, MultiLockGuard, RedLock};
pub(crate) use raw::{wait_replicas, Renewal};
pub use reentrant::Lock;
pub use rw::ReadWriteLock;

/// `prefix:{name}`, or `prefix:name` when the name carries its own hash tag, so that every
/// helper key and channel of a lock lands in the lock's cluster slot (as Redisson's
/// `prefixName`).
pub(crate) fn tagged(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when the name carries its own hash tag (Redisson's
/// `suffixName`): helper keys named after the object, in its slot.
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::{suffixed, tagged};

    #[test]
    fn helper_keys_share_the_lock_slot() {
        assert_eq!(
            tagged("redisson_lock__channel", "orders"),
            "redisson_lock__channel:{orders}"
        );
        assert_eq!(
            tagged("redisson_lock__channel", "{user:1}:cart"),
            "redisson_lock__channel:{user:1}:cart"
        );
        assert_eq!(suffixed("sem", "timeout"), "{sem}:timeout");
        assert_eq!(suffixed("{a}b", "timeout"), "{a}b:timeout");
    }
}
