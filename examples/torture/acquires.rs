//! The acquire scripts of the library, as `EVALSHA` names them on the wire: the
//! `drop-acquire` fault loses a request that names one, or its reply. Each script is made of
//! its `lua/` files in order, as `src/scripts.rs` makes it (the helpers first, the
//! operation's own last); a script made otherwise there has another hash, and the fault would
//! find no acquire to lose (the runner then says that it had nothing to act on).
//!
//! Not found: acquires the batcher merged into one call of `lua/batch.lua` (a plain or fenced
//! lock's, when several callers queue at once), which names the batch script instead.

/// A script made of these `lua/` files, in order: its hash.
macro_rules! hash {
    ($($file:literal),+) => {
        redis::Script::new(concat!($(include_str!(concat!("../../lua/", $file))),+))
            .get_hash()
            .to_owned()
    };
}

/// The hashes of every acquire script: plain, fenced, spin and RedLock members (one script),
/// waiters with a priority, preemptions, lock sets, group locks, fair locks, read and write
/// holds, both semaphores, rate limiters.
pub(crate) fn acquire_hashes() -> Vec<String> {
    vec![
        hash!("lock_acquire.lua"),
        hash!("lock_set_acquire.lua"),
        hash!("clock.lua", "token_common.lua", "fenced_acquire.lua"),
        hash!(
            "clock.lua",
            "token_common.lua",
            "priority_common.lua",
            "lock_priority_acquire.lua"
        ),
        hash!(
            "clock.lua",
            "token_common.lua",
            "revoke_common.lua",
            "lock_revoke.lua"
        ),
        hash!("clock.lua", "group_acquire.lua"),
        hash!("clock.lua", "fair_common.lua", "fair_acquire.lua"),
        hash!(
            "clock.lua",
            "fair_common.lua",
            "fair_priority_gate.lua",
            "fair_acquire.lua"
        ),
        hash!("rw_read_acquire.lua"),
        hash!("rw_write_acquire.lua"),
        hash!("semaphore_acquire.lua"),
        hash!(
            "clock.lua",
            "priority_common.lua",
            "semaphore_priority_gate.lua",
            "semaphore_acquire.lua"
        ),
        hash!(
            "clock.lua",
            "pes_check.lua",
            "pes_common.lua",
            "pes_acquire.lua"
        ),
        hash!(
            "clock.lua",
            "pes_check.lua",
            "pes_common.lua",
            "priority_common.lua",
            "pes_priority_gate.lua",
            "pes_acquire.lua"
        ),
        hash!("clock.lua", "rate_common.lua", "rate_acquire.lua"),
    ]
}
