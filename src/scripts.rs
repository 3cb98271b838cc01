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
}

script!(LOCK_ACQUIRE, "lock_acquire.lua");
script!(LOCK_UNLOCK, "lock_unlock.lua");
script!(LOCK_RENEW, "lock_renew.lua");
script!(LOCK_FORCE_UNLOCK, "lock_force_unlock.lua");

/// A fair lock script: `lua/fair_common.lua` (shared helpers) followed by the operation's file.
macro_rules! fair_script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/fair_common.lua"),
                include_str!(concat!("../lua/", $file))
            ))
        });
    };
}

fair_script!(FAIR_ACQUIRE, "fair_acquire.lua");
fair_script!(FAIR_UNLOCK, "fair_unlock.lua");
fair_script!(FAIR_LEAVE, "fair_leave.lua");
fair_script!(FAIR_FORCE_UNLOCK, "fair_force_unlock.lua");

script!(RW_READ_ACQUIRE, "rw_read_acquire.lua");
script!(RW_WRITE_ACQUIRE, "rw_write_acquire.lua");
script!(RW_READ_RENEW, "rw_read_renew.lua");
script!(RW_FORCE_UNLOCK, "rw_force_unlock.lua");

/// A read-write unlock script: `lua/rw_common.lua` (shared helpers) followed by the operation's file.
macro_rules! rw_script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/rw_common.lua"),
                include_str!(concat!("../lua/", $file))
            ))
        });
    };
}

rw_script!(RW_READ_UNLOCK, "rw_read_unlock.lua");
rw_script!(RW_WRITE_UNLOCK, "rw_write_unlock.lua");

script!(SEMAPHORE_TRY_SET_PERMITS, "semaphore_try_set_permits.lua");
script!(SEMAPHORE_ADD_PERMITS, "semaphore_add_permits.lua");
script!(SEMAPHORE_ACQUIRE, "semaphore_acquire.lua");

// Count-down latch scripts (lua/latch_*.lua).
// -- latch scripts begin --
// -- latch scripts end --

// Permit-expirable semaphore scripts (lua/pes_*.lua).
// -- permit-expirable semaphore scripts begin --
// -- permit-expirable semaphore scripts end --
