//! Script calls of several callers sent as one: the batcher's queued calls of the scripts
//! that `scripts::merged` lists go out as one EVALSHA of `lua/batch.lua`, which runs each
//! with its own keys and arguments and replies one array of their replies. The batcher knows
//! them only as scripts.
//!
//! A script call costs the server about as much again as the `redis.call`s it makes (parsing
//! it, finding the script, setting up its `KEYS` and `ARGV`, running the Lua VM, writing the
//! reply): on the lock path, half of a cycle's server time. Run as one, the calls pay it
//! once per batch. What the calls do, and so what any other client sees, is unchanged: the
//! same keys, values, expiries and messages, each call's as it would be alone (they come from
//! different callers, so their order among themselves, after the batch's unmerged calls, is
//! any order they could have had; no other client's command runs between them). Each caller
//! gets its own reply or error. One difference: a server at its `maxmemory` refuses a
//! script call that writes before it starts (OOM), and so a merged batch as a whole, where
//! alone some of its calls might have run before it filled up.
//!
//! Only on a server whose keys share one keyspace (not a cluster node, whose script calls
//! must keep to one slot). The merged call is built from the callers' packed commands (the
//! `*n` `$len` framing `redis` writes), so nothing above the batcher knows of it.

use std::io::Write;
use std::sync::LazyLock;

use redis::{Script, Value};

use crate::scripts::{self, Lua};

/// The operations that merge, in the order `lua/batch.lua` numbers them (from 1).
fn ops() -> [&'static Lua; 3] {
    scripts::merged()
}

/// The batch script and the hashes of the operations it runs.
pub(crate) struct Merger {
    script: Script,
    source: String,
    /// `ops()`'s hashes, in order.
    hashes: Vec<String>,
}

/// `lua/batch.lua` with every operation's script as a function of `KEYS` and `ARGV` before it.
pub(crate) static MERGER: LazyLock<Merger> = LazyLock::new(|| {
    let mut source = String::from("local ops, nkeys = {}, {};\n");
    for (i, op) in ops().iter().enumerate() {
        source.push_str(&format!("nkeys[{}] = {};\n", i + 1, op.key_count()));
        source.push_str(&format!("ops[{}] = function(KEYS, ARGV)\n", i + 1));
        source.push_str(op.source());
        source.push_str("\nend;\n");
    }
    source.push_str(include_str!("../../lua/batch.lua"));
    Merger {
        script: Script::new(&source),
        source,
        hashes: ops().iter().map(|op| op.hash().to_owned()).collect(),
    }
});

/// Operations are numbered below this: a call's operation and its number of arguments go
/// as one number, `arguments * OPS_LIMIT + operation` (see `lua/batch.lua`).
const OPS_LIMIT: usize = 16;

/// What precedes the hash in a packed `EVALSHA`, after its `*n\r\n`.
const EVALSHA: &[u8] = b"$7\r\nEVALSHA\r\n$40\r\n";

impl Merger {
    /// The operation `cmd` calls (its number in `lua/batch.lua`), if it is one packed
    /// `EVALSHA` of one of them.
    pub(crate) fn op_of(&self, cmd: &[u8]) -> Option<usize> {
        if cmd.first() != Some(&b'*') {
            return None;
        }
        let header = cmd.windows(2).position(|w| w == b"\r\n")? + 2;
        let rest = cmd.get(header..)?.strip_prefix(EVALSHA)?;
        let hash = rest.get(..40)?;
        let i = self.hashes.iter().position(|h| h.as_bytes() == hash)?;
        Some(i + 1)
    }

    /// One packed `EVALSHA` of the batch script running `calls` (each one packed `EVALSHA`
    /// of `op`, as [`op_of`](Self::op_of) found), in order; `None` if one is not framed as
    /// `redis` frames commands.
    pub(crate) fn pack(&self, calls: &[(usize, &[u8])]) -> Option<Vec<u8>> {
        let mut keys: Vec<&[u8]> = Vec::with_capacity(calls.len() * 2);
        // Each call's code (see `OPS_LIMIT`), then its arguments.
        let mut argv: Vec<Result<usize, &[u8]>> = Vec::with_capacity(calls.len() * 4);
        let mut own: Vec<&[u8]> = Vec::new();
        for &(op, cmd) in calls {
            own.clear();
            parse(cmd, &mut own)?;
            // EVALSHA, hash, key count, keys, arguments.
            let nk: usize = std::str::from_utf8(own.get(2)?).ok()?.parse().ok()?;
            if op == 0 || op >= OPS_LIMIT || nk != ops().get(op - 1)?.key_count() {
                return None;
            }
            keys.extend_from_slice(own.get(3..3 + nk)?);
            let call_args = &own[3 + nk..];
            argv.push(Ok(call_args.len() * OPS_LIMIT + op));
            argv.extend(call_args.iter().map(|a| Err(*a)));
        }
        let mut out = Vec::with_capacity(64 + calls.iter().map(|c| c.1.len()).sum::<usize>());
        let _ = write!(out, "*{}\r\n", 3 + keys.len() + argv.len());
        bulk(&mut out, b"EVALSHA");
        bulk(&mut out, self.script.get_hash().as_bytes());
        number(&mut out, keys.len());
        for key in keys {
            bulk(&mut out, key);
        }
        for arg in argv {
            match arg {
                Ok(code) => number(&mut out, code),
                Err(bytes) => bulk(&mut out, bytes),
            }
        }
        Some(out)
    }

    /// The merged reply `reply` of `calls` calls, one per call; `Err` with the reply when it
    /// is not an array of as many (an error for the whole call: each call gets it).
    pub(crate) fn split(reply: Value, calls: usize) -> Result<Vec<Value>, Value> {
        match reply {
            Value::Array(items) if items.len() == calls => Ok(items),
            other => Err(other),
        }
    }

    /// Whether a merged call's reply says the batch script is not loaded.
    pub(crate) fn is_noscript(reply: &Value) -> bool {
        matches!(reply, Value::ServerError(e) if e.code() == "NOSCRIPT")
    }

    /// `SCRIPT LOAD` of the batch script, packed.
    pub(crate) fn load_command(&self) -> Vec<u8> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&self.source)
            .get_packed_command()
    }
}

/// `n` in decimal, as one argument.
fn number(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut cursor = std::io::Cursor::new(&mut digits[..]);
    let _ = write!(cursor, "{n}");
    let len = cursor.position() as usize;
    bulk(out, &digits[..len]);
}

/// One argument: `$len`, the bytes.
fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    let _ = write!(out, "${}\r\n", bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// The arguments of one packed command (`*n`, then `$len` and the bytes of each), into
/// `args`; `None` if it is not framed so.
fn parse<'a>(cmd: &'a [u8], args: &mut Vec<&'a [u8]>) -> Option<()> {
    let (n, mut rest) = line(cmd.strip_prefix(b"*")?)?;
    for _ in 0..n {
        let (len, after) = line(rest.strip_prefix(b"$")?)?;
        let arg = after.get(..len)?;
        rest = after.get(len..)?.strip_prefix(b"\r\n")?;
        args.push(arg);
    }
    rest.is_empty().then_some(())
}

/// A decimal number ended by `\r\n`, and what follows.
fn line(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let n = std::str::from_utf8(&bytes[..end]).ok()?.parse().ok()?;
    Some((n, &bytes[end + 2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_call_of_an_operation_is_found_and_others_are_not() {
        let m = &*MERGER;
        let mut cmd = scripts::LOCK_UNLOCK.key("a");
        cmd.key("ch").arg(30_000).arg("o").arg("PUBLISH");
        assert_eq!(m.op_of(&cmd.packed()), Some(2));
        let get = redis::cmd("GET").arg("a").get_packed_command();
        assert_eq!(m.op_of(&get), None);
        assert_eq!(m.op_of(b""), None);
        assert_eq!(m.op_of(b"*3\r\n$7\r\nEVALSHA\r\n$40\r\nabc"), None);
    }

    #[test]
    fn calls_are_packed_as_one_with_their_keys_first_and_their_arguments_in_order() {
        let m = &*MERGER;
        let mut a = scripts::LOCK_ACQUIRE.key("k1");
        a.arg(30_000).arg("o1");
        let mut u = scripts::LOCK_UNLOCK.key("k2");
        u.key("ch2").arg(5).arg("o2").arg("PUBLISH");
        let (a, u) = (a.packed(), u.packed());
        let packed = m.pack(&[(1, &a[..]), (2, &u[..])]).unwrap();
        let mut args = Vec::new();
        parse(&packed, &mut args).unwrap();
        let text: Vec<&str> = args
            .iter()
            .map(|a| std::str::from_utf8(a).unwrap())
            .collect();
        assert_eq!(text[0], "EVALSHA");
        assert_eq!(text[1], m.script.get_hash());
        assert_eq!(
            &text[2..],
            ["3", "k1", "k2", "ch2", "33", "30000", "o1", "50", "5", "o2", "PUBLISH"]
        );
        assert!(m.pack(&[(1, b"*1\r\n$3\r\nGE")]).is_none(), "cut short");
    }

    #[test]
    fn a_reply_splits_only_into_as_many_replies_as_calls() {
        let two = Value::Array(vec![Value::Nil, Value::Int(1)]);
        assert_eq!(Merger::split(two.clone(), 2).unwrap().len(), 2);
        assert!(Merger::split(two, 3).is_err());
        assert!(Merger::split(Value::Okay, 1).is_err());
    }
}
