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
