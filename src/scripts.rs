//! The Lua scripts, one per operation (see `lua/`), as [`Lua`] statics.
//!
//! A call ([`Lua::key`], then [`Call::key`] and [`Call::arg`]) is one EVALSHA built in one
//! `redis::Cmd`, and sent again after loading the script on NOSCRIPT (as
//! `redis::ScriptInvocation::invoke` does), so a `SCRIPT FLUSH` on the server costs one extra
//! round trip and is never seen by callers. `redis::ScriptInvocation` keeps a buffer per
//! argument and copies them into the command when sent: on the lock path that was half the
//! allocations of a lock and unlock. It is still what the renewal scripts use, whose number
//! of keys depends on how many holds a call renews ([`Lua::prepare_invoke`]).
//!
//! A thread keeps the buffers of its last call for its next one: a lock and unlock allocate
//! nothing to build and pack their commands.

use std::cell::Cell;
use std::sync::LazyLock;
use std::thread::LocalKey;

use redis::{
    Cmd, ConnectionLike, ErrorKind, FromRedisValue, RedisError, RedisResult, Script,
    ScriptInvocation, ServerErrorKind, ToRedisArgs,
};

/// A script, and how many keys it takes: as many as its own file's header names (`-- KEYS[n]`
/// lines, n a number), and a gate's before it (a `*_gate.lua`, which runs first and may
/// refuse the call before the operation's own file runs, with keys of its own after the
/// operation's); the shared helpers are not counted. None for a script whose keys vary in
/// number.
pub(crate) struct Lua {
    script: Script,
    keys: usize,
    source: String,
}

impl Lua {
    /// The script made of `files` (name, text) in order: shared helpers first, then a gate if
    /// any, the operation's own last.
    fn new(files: &[(&str, &str)]) -> Lua {
        let last = files.len().saturating_sub(1);
        // `-- KEYS[3]  ...`, not `-- KEYS[1..k]` (keys that vary in number).
        let keys = files
            .iter()
            .enumerate()
            .filter(|(i, (name, _))| *i == last || name.ends_with("_gate.lua"))
            .flat_map(|(_, (_, text))| text.lines())
            .filter_map(|line| line.strip_prefix("-- KEYS[")?.split_once(']'))
            .filter(|(index, _)| index.parse::<usize>().is_ok())
            .count();
        let source: String = files.iter().map(|(_, text)| *text).collect();
        Lua {
            script: Script::new(&source),
            keys,
            source,
        }
    }

    /// The script's source: its files in order.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// How many keys a call takes (0 for a script whose keys vary in number).
    pub(crate) fn key_count(&self) -> usize {
        self.keys
    }

    /// The script's SHA1 hash, as `EVALSHA` takes it.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// A call of the script with `key` as its first key.
    pub(crate) fn key(&self, key: &str) -> Call<'_> {
        // EVALSHA, the hash, the key count, the keys, and room for 8 arguments and their
        // bytes: most calls are built without reallocating.
        let mut cmd =
            take_spare(&SPARE_CMD).unwrap_or_else(|| Cmd::with_capacity(3 + self.keys + 8, 320));
        cmd.arg("EVALSHA")
            .arg(self.script.get_hash())
            .arg(self.keys);
        let mut call = Call {
            lua: self,
            cmd,
            keys: 0,
            args: false,
            misordered: false,
        };
        call.key(key);
        call
    }

    /// A call with keys and arguments in any order (`redis`'s own): for the scripts whose
    /// number of keys varies.
    pub(crate) fn prepare_invoke(&self) -> ScriptInvocation<'_> {
        self.script.prepare_invoke()
    }
}

/// One call of a [`Lua`] script: its keys, then its arguments.
pub(crate) struct Call<'a> {
    lua: &'a Lua,
    cmd: Cmd,
    keys: usize,
    /// An argument was added.
    args: bool,
    /// A key was added after an argument.
    misordered: bool,
}

impl Call<'_> {
    /// Adds the next key (`KEYS[i]`); every key comes before the arguments.
    pub(crate) fn key(&mut self, key: &str) -> &mut Self {
        self.misordered |= self.args;
        self.cmd.arg(key);
        self.keys += 1;
        self
    }

    /// Adds the next argument (`ARGV[i]`).
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.cmd.arg(arg);
        self.args = true;
        self
    }

    /// Sends the call; on NOSCRIPT, loads the script and sends it again.
    pub(crate) fn invoke<T: FromRedisValue>(&self, c: &mut dyn ConnectionLike) -> RedisResult<T> {
        self.check()?;
        match self.query(c) {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.lua.script.load(c)?;
                self.query(c)
            }
            reply => reply,
        }
    }

    /// `Cmd::query`, packing the command into this thread's spare buffer rather than a new
    /// one.
    fn query<T: FromRedisValue>(&self, c: &mut dyn ConnectionLike) -> RedisResult<T> {
        let mut packed = take_spare(&SPARE_PACKED).unwrap_or_default();
        packed.clear();
        self.cmd.write_packed_command(&mut packed);
        let reply = c.req_packed_command(&packed);
        if packed.capacity() <= SPARE_MAX_BYTES {
            keep_spare(&SPARE_PACKED, packed);
        }
        Ok(redis::from_redis_value(reply?.extract_error()?)?)
    }

    /// The call, packed as sent.
    #[cfg(test)]
    pub(crate) fn packed(&self) -> Vec<u8> {
        self.cmd.get_packed_command()
    }

    /// An error, and nothing sent, unless the keys are the script's, and come first.
    fn check(&self) -> RedisResult<()> {
        if self.keys == self.lua.keys && !self.misordered {
            return Ok(());
        }
        Err(RedisError::from((
            ErrorKind::Client,
            "a script called with other keys than its header names",
            format!(
                "{} keys given, {} named{}",
                self.keys,
                self.lua.keys,
                if self.misordered {
                    ", a key after an argument"
                } else {
                    ""
                }
            ),
        )))
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        let args = self.cmd.args_iter();
        let count = args.len();
        let bytes: usize = args.map(|arg| arg_len(&arg)).sum();
        if bytes <= SPARE_MAX_BYTES && count <= SPARE_MAX_ARGS {
            let mut cmd = std::mem::take(&mut self.cmd);
            cmd.clear();
            keep_spare(&SPARE_CMD, cmd);
        }
    }
}

fn arg_len(arg: &redis::Arg<&[u8]>) -> usize {
    match arg {
        redis::Arg::Simple(bytes) => bytes.len(),
        // A cursor (`SCAN`'s), or what a later `redis` adds: no bytes of the call's own.
        _ => 0,
    }
}

// A thread's buffers kept from its last call for its next one: the `Cmd` a call is built
// in, and the bytes it is packed into. A call that finds none (the first on a thread, or one
// made while another is under way on it, or as the thread exits) makes its own.
thread_local! {
    static SPARE_CMD: Cell<Option<Cmd>> = const { Cell::new(None) };
    static SPARE_PACKED: Cell<Option<Vec<u8>>> = const { Cell::new(None) };
}

/// Buffers grown past this many bytes, or a command of more arguments, by a big call (many
/// keys) are dropped, not kept by the thread.
const SPARE_MAX_BYTES: usize = 4096;
const SPARE_MAX_ARGS: usize = 32;

fn take_spare<T>(spare: &'static LocalKey<Cell<Option<T>>>) -> Option<T> {
    spare.try_with(Cell::take).ok().flatten()
}

fn keep_spare<T>(spare: &'static LocalKey<Cell<Option<T>>>, value: T) {
    // Not kept by a thread whose locals are being destroyed.
    let _ = spare.try_with(|cell| cell.set(Some(value)));
}

/// The scripts whose calls the batcher may send several of as one (see
/// `backend/merge.rs`), in the order `lua/batch.lua` numbers them: the calls of a plain,
/// non-reentrant or fenced lock's cycle, the hottest paths. A script listed here must take a
/// fixed number of keys.
pub(crate) fn merged() -> [&'static Lua; 3] {
    [&LOCK_ACQUIRE, &LOCK_UNLOCK, &FENCED_ACQUIRE]
}

/// The statics, each made of its files in order (shared helpers first); and, for tests,
/// the list of them all.
macro_rules! scripts {
    ($($name:ident: [$($file:literal),+];)+) => {
        $(
            pub(crate) static $name: LazyLock<Lua> = LazyLock::new(|| {
                Lua::new(&[$(($file, include_str!(concat!("../lua/", $file)))),+])
            });
        )+

        #[cfg(test)]
        fn all() -> Vec<(&'static str, &'static Lua)> {
            vec![$((stringify!($name), &*$name)),+]
        }
    };
}

scripts! {
    LOCK_ACQUIRE: ["lock_acquire.lua"];
    LOCK_UNLOCK: ["lock_unlock.lua"];
    LOCK_RENEW: ["lock_renew.lua"];
    LOCK_FORCE_UNLOCK: ["lock_force_unlock.lua"];
    LOCK_REVOKE: ["clock.lua", "token_common.lua", "revoke_common.lua", "lock_revoke.lua"];
    LOCK_PRIORITY_ACQUIRE:
        ["clock.lua", "token_common.lua", "priority_common.lua", "lock_priority_acquire.lua"];
    LOCK_RENEW_REVOCABLE: ["clock.lua", "revoke_common.lua", "lock_renew_revocable.lua"];
    LOCK_CALM: ["clock.lua", "revoke_common.lua", "lock_calm.lua"];
    LOCK_SET_ACQUIRE: ["lock_set_acquire.lua"];
    LOCK_SET_UNLOCK: ["lock_set_unlock.lua"];
    FENCED_ACQUIRE: ["clock.lua", "token_common.lua", "fenced_acquire.lua"];
    SPIN_UNLOCK: ["spin_unlock.lua"];
    SPIN_FORCE_UNLOCK: ["spin_force_unlock.lua"];

    GROUP_ACQUIRE: ["clock.lua", "group_acquire.lua"];
    GROUP_UNLOCK: ["clock.lua", "group_unlock.lua"];
    GROUP_RENEW: ["clock.lua", "group_renew.lua"];
    GROUP_FORCE_UNLOCK: ["group_force_unlock.lua"];
    GROUP_SETTLE: ["clock.lua", "group_settle.lua"];
    GROUP_LOCKED: ["clock.lua", "group_locked.lua"];

    FAIR_ACQUIRE: ["clock.lua", "fair_common.lua", "fair_acquire.lua"];
    FAIR_PRIORITY_ACQUIRE:
        ["clock.lua", "fair_common.lua", "fair_priority_gate.lua", "fair_acquire.lua"];
    FAIR_UNLOCK: ["clock.lua", "fair_common.lua", "fair_unlock.lua"];
    FAIR_LEAVE: ["clock.lua", "fair_common.lua", "fair_leave.lua"];
    FAIR_FORCE_UNLOCK: ["clock.lua", "fair_common.lua", "fair_force_unlock.lua"];

    RW_READ_ACQUIRE: ["rw_read_acquire.lua"];
    RW_WRITE_ACQUIRE: ["rw_write_acquire.lua"];
    RW_READ_UNLOCK: ["rw_common.lua", "rw_read_unlock.lua"];
    RW_WRITE_UNLOCK: ["rw_common.lua", "rw_write_unlock.lua"];
    RW_READ_RENEW: ["rw_read_renew.lua"];
    RW_FORCE_UNLOCK: ["rw_force_unlock.lua"];

    SEMAPHORE_TRY_SET_PERMITS: ["semaphore_try_set_permits.lua"];
    SEMAPHORE_ADD_PERMITS: ["semaphore_add_permits.lua"];
    SEMAPHORE_ACQUIRE: ["semaphore_acquire.lua"];
    SEMAPHORE_PRIORITY_ACQUIRE: [
        "clock.lua", "priority_common.lua", "semaphore_priority_gate.lua", "semaphore_acquire.lua"
    ];
    PRIORITY_LEAVE: ["priority_leave.lua"];
    SEMAPHORE_SETTLE: ["semaphore_settle.lua"];
    SEMAPHORE_RELEASE: ["semaphore_release.lua"];
    SEMAPHORE_DRAIN: ["semaphore_drain.lua"];
    SEMAPHORE_SET: ["semaphore_set.lua"];
    SEMAPHORE_CHECK: ["semaphore_check.lua"];

    PES_TRY_SET_PERMITS: ["clock.lua", "pes_check.lua", "pes_common.lua", "pes_try_set_permits.lua"];
    PES_ADD_PERMITS: ["clock.lua", "pes_check.lua", "pes_common.lua", "pes_add_permits.lua"];
    PES_ACQUIRE: ["clock.lua", "pes_check.lua", "pes_common.lua", "pes_acquire.lua"];
    PES_PRIORITY_ACQUIRE: [
        "clock.lua", "pes_check.lua", "pes_common.lua", "priority_common.lua",
        "pes_priority_gate.lua", "pes_acquire.lua"
    ];
    PES_RELEASE: ["clock.lua", "pes_check.lua", "pes_common.lua", "pes_release.lua"];
    PES_UPDATE_LEASE: ["clock.lua", "pes_check.lua", "pes_common.lua", "pes_update_lease.lua"];
    PES_AVAILABLE: ["clock.lua", "pes_check.lua", "pes_common.lua", "pes_available.lua"];
    PES_COUNTS: ["clock.lua", "pes_check.lua", "pes_counts.lua"];
    PES_LEASE: ["clock.lua", "pes_check.lua", "pes_lease.lua"];
    PES_RENEW: ["clock.lua", "pes_renew.lua"];

    LATCH_TRY_SET_COUNT: ["latch_common.lua", "latch_receipt.lua", "latch_try_set_count.lua"];
    LATCH_COUNT_DOWN: ["latch_common.lua", "latch_receipt.lua", "latch_count_down.lua"];
    LATCH_DELETE: ["latch_common.lua", "latch_delete.lua"];

    RATE_ACQUIRE: ["clock.lua", "rate_common.lua", "rate_acquire.lua"];
    RATE_AVAILABLE: ["clock.lua", "rate_common.lua", "rate_available.lua"];
    RATE_RELEASE: ["clock.lua", "rate_common.lua", "rate_release.lua"];
    RATE_SET: ["clock.lua", "rate_common.lua", "rate_set.lua"];
    RATE_TRY_SET: ["rate_try_set.lua"];
    RATE_DELETE: ["rate_delete.lua"];

    CONDITION_WAIT: ["clock.lua", "condition_common.lua", "condition_wait.lua"];
    CONDITION_CHECK: ["condition_check.lua"];
    CONDITION_LEAVE: ["clock.lua", "condition_common.lua", "condition_leave.lua"];
    CONDITION_PASS: ["clock.lua", "condition_common.lua", "condition_pass.lua"];
    CONDITION_NOTIFY: ["clock.lua", "condition_common.lua", "condition_notify.lua"];
    CONDITION_RENEW: ["clock.lua", "condition_common.lua", "condition_renew.lua"];
    CONDITION_RESTORE: ["condition_restore.lua"];

    FENCED_WRITE: ["fence_common.lua", "fenced_write.lua"];
    FENCED_READ: ["fence_common.lua", "fenced_read.lua"];

    ELECTION_PROCLAIM: ["clock.lua", "election_proclaim.lua"];
    ELECTION_RESIGN: ["election_resign.lua"];
    ELECTION_LEADER: ["election_leader.lua"];

    INSPECT: ["clock.lua", "rate_common.lua", "inspect.lua"];

    LOCK_ORDER: ["clock.lua", "lock_order.lua"];
    WAIT_RECORD: ["clock.lua", "wait_record.lua"];
    WAIT_RENEW: ["clock.lua", "wait_renew.lua"];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The highest `KEYS[n]` the code (not the comments) of `source` reads, and whether it
    /// reads keys by a computed index (a script whose keys vary in number).
    fn keys_read(source: &str) -> (usize, bool) {
        let code: String = source
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut highest = 0;
        let mut computed = code.contains("#KEYS") || code.contains("ipairs(KEYS)");
        for (at, _) in code.match_indices("KEYS[") {
            let index: String = code[at + 5..].chars().take_while(|c| *c != ']').collect();
            match index.parse::<usize>() {
                Ok(n) => highest = highest.max(n),
                Err(_) => computed = true,
            }
        }
        (highest, computed)
    }

    #[test]
    fn every_script_header_names_the_keys_its_code_reads() {
        // A call's key count is read from the header: a header missing a key would send
        // that key as an argument.
        for (name, lua) in all() {
            let (highest, computed) = keys_read(&lua.source);
            // A key may be passed and not read (the `pes_` scripts all take the same three),
            // but every key read must be named.
            assert!(lua.keys >= highest, "{name}: reads KEYS[{highest}]");
            if lua.keys == 0 {
                assert!(computed, "{name}: names no key and reads none");
            }
        }
        assert_eq!(LOCK_UNLOCK.keys, 2);
        assert_eq!(LOCK_RENEW.keys, 0);
    }

    #[test]
    fn only_the_operations_own_header_and_a_gates_count_its_keys() {
        let prelude = "-- KEYS[1] a prelude's own header\n-- KEYS[2] another\nlocal x = 1\n";
        let gate = "-- KEYS[2] the gate's\nlocal y = 2\n";
        let own = "-- KEYS[1] the lock\nreturn redis.call('exists', KEYS[1])\n";
        let lua = Lua::new(&[("p_common.lua", prelude), ("own.lua", own)]);
        assert_eq!(lua.keys, 1);
        assert_eq!(lua.source, format!("{prelude}{own}"));
        let gated = Lua::new(&[
            ("p_common.lua", prelude),
            ("x_gate.lua", gate),
            ("own.lua", own),
        ]);
        assert_eq!(gated.keys, 2);
        assert_eq!(gated.source, format!("{prelude}{gate}{own}"));
    }

    #[test]
    fn a_call_with_other_keys_than_the_header_names_is_refused() {
        let mut call = LOCK_UNLOCK.key("lock");
        assert!(call.check().is_err(), "one key of two");
        call.key("channel");
        assert!(call.check().is_ok());
        call.key("extra");
        assert!(call.check().is_err(), "three keys of two");

        let mut call = LOCK_UNLOCK.key("lock");
        call.arg(0).key("channel");
        let err = call.check().unwrap_err();
        assert!(err.to_string().contains("a key after an argument"), "{err}");
    }

    #[test]
    fn a_call_is_one_evalsha_with_the_key_count_first() {
        let mut call = LOCK_ACQUIRE.key("name");
        call.arg(30_000).arg("owner");
        let packed = String::from_utf8(call.cmd.get_packed_command()).expect("utf-8");
        let hash = LOCK_ACQUIRE.script.get_hash();
        assert_eq!(
            packed,
            format!(
                "*6\r\n$7\r\nEVALSHA\r\n$40\r\n{hash}\r\n$1\r\n1\r\n$4\r\nname\r\n\
                 $5\r\n30000\r\n$5\r\nowner\r\n"
            )
        );
    }

    #[test]
    fn a_thread_reuses_its_last_calls_buffers_unless_they_grew_big() {
        std::thread::spawn(|| {
            let packed = |call: &Call| String::from_utf8(call.cmd.get_packed_command()).unwrap();
            assert!(take_spare(&SPARE_CMD).is_none(), "a new thread has none");
            drop(LOCK_ACQUIRE.key("first"));
            assert!(take_spare(&SPARE_CMD).is_some(), "kept by the call's drop");
            drop(LOCK_ACQUIRE.key("first"));

            // Two calls at once: the second builds its own, and neither sees the other's.
            let mut outer = LOCK_ACQUIRE.key("outer");
            outer.arg(1).arg("a");
            let mut inner = LOCK_ACQUIRE.key("inner");
            inner.arg(2).arg("b");
            assert!(packed(&outer).contains("outer") && !packed(&outer).contains("inner"));
            assert!(packed(&inner).contains("inner") && !packed(&inner).contains("outer"));
            drop((outer, inner));

            // A reused command starts empty.
            let mut call = LOCK_ACQUIRE.key("again");
            call.arg(3).arg("c");
            assert_eq!(packed(&call).matches("EVALSHA").count(), 1);
            assert!(!packed(&call).contains("inner"));
            drop(call);

            // A big call's buffers are not kept.
            let _ = take_spare(&SPARE_CMD);
            let mut big = LOCK_ACQUIRE.key("big");
            big.arg(30_000).arg("x".repeat(SPARE_MAX_BYTES));
            drop(big);
            assert!(take_spare(&SPARE_CMD).is_none());
            let mut many = LOCK_ACQUIRE.key("many");
            for n in 0..SPARE_MAX_ARGS {
                many.arg(n);
            }
            drop(many);
            assert!(take_spare(&SPARE_CMD).is_none());
        })
        .join()
        .expect("the test thread");
    }
}
