//! The Lua scripts, one per operation (see `lua/`), as `redis::Script` statics.
//!
//! `redis::Script::invoke` sends EVALSHA and reloads the script on NOSCRIPT, so a
//! `SCRIPT FLUSH` on the server costs one extra round trip and is never seen by callers.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../lua/", $file))));
    };
    // A script whose helpers live in a shared prelude file, prepended to it.
    ($name:ident, $prelude:literal + $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!(concat!("../lua/", $prelude)),
                include_str!(concat!("../lua/", $file))
            ))
        });
    };
    // A script after two preludes, in order.
    ($name:ident, $first:literal + $second:literal + $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!(concat!("../lua/", $first)),
                include_str!(concat!("../lua/", $second)),
                include_str!(concat!("../lua/", $file))
            ))
        });
    };
}

script!(LOCK_ACQUIRE, "lock_acquire.lua");
script!(LOCK_UNLOCK, "lock_unlock.lua");
script!(LOCK_RENEW, "lock_renew.lua");
script!(LOCK_FORCE_UNLOCK, "lock_force_unlock.lua");
script!(FENCED_ACQUIRE, "fenced_acquire.lua");
script!(SPIN_UNLOCK, "spin_unlock.lua");
script!(SPIN_FORCE_UNLOCK, "spin_force_unlock.lua");

script!(FAIR_ACQUIRE, "fair_common.lua" + "fair_acquire.lua");
script!(FAIR_UNLOCK, "fair_common.lua" + "fair_unlock.lua");
script!(FAIR_LEAVE, "fair_common.lua" + "fair_leave.lua");
script!(
    FAIR_FORCE_UNLOCK,
    "fair_common.lua" + "fair_force_unlock.lua"
);

script!(RW_READ_ACQUIRE, "rw_read_acquire.lua");
script!(RW_WRITE_ACQUIRE, "rw_write_acquire.lua");
script!(RW_READ_UNLOCK, "rw_common.lua" + "rw_read_unlock.lua");
script!(RW_WRITE_UNLOCK, "rw_common.lua" + "rw_write_unlock.lua");
script!(RW_READ_RENEW, "rw_read_renew.lua");
script!(RW_FORCE_UNLOCK, "rw_force_unlock.lua");

script!(SEMAPHORE_TRY_SET_PERMITS, "semaphore_try_set_permits.lua");
script!(SEMAPHORE_ADD_PERMITS, "semaphore_add_permits.lua");
script!(SEMAPHORE_ACQUIRE, "semaphore_acquire.lua");
script!(SEMAPHORE_DRAIN, "semaphore_drain.lua");
script!(SEMAPHORE_SET, "semaphore_set.lua");

script!(
    PES_TRY_SET_PERMITS,
    "pes_check.lua" + "pes_common.lua" + "pes_try_set_permits.lua"
);
script!(
    PES_ADD_PERMITS,
    "pes_check.lua" + "pes_common.lua" + "pes_add_permits.lua"
);
script!(
    PES_ACQUIRE,
    "pes_check.lua" + "pes_common.lua" + "pes_acquire.lua"
);
script!(
    PES_RELEASE,
    "pes_check.lua" + "pes_common.lua" + "pes_release.lua"
);
script!(
    PES_UPDATE_LEASE,
    "pes_check.lua" + "pes_common.lua" + "pes_update_lease.lua"
);
script!(
    PES_AVAILABLE,
    "pes_check.lua" + "pes_common.lua" + "pes_available.lua"
);
script!(PES_COUNTS, "pes_check.lua" + "pes_counts.lua");
script!(PES_LEASE, "pes_check.lua" + "pes_lease.lua");
script!(PES_RENEW, "pes_renew.lua");

script!(
    LATCH_TRY_SET_COUNT,
    "latch_common.lua" + "latch_try_set_count.lua"
);
script!(
    LATCH_COUNT_DOWN,
    "latch_common.lua" + "latch_count_down.lua"
);
script!(LATCH_DELETE, "latch_common.lua" + "latch_delete.lua");

script!(FENCED_WRITE, "fenced_write.lua");

script!(INSPECT, "inspect.lua");
