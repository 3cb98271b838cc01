//! Who a client is, on the server: its who's-who, the HASH `keys::history_who` (its name,
//! host and process id, and each owner's thread name). The history's flush writes it beside
//! the stream; a wait recorded for the deadlock checks writes it too (see `deadlock/`), so
//! that a broken cycle names its members whether or not their clients record history.

use std::time::Duration;

use crate::backend::{Backend, Policy};
use crate::error::Result;
use crate::hold::{Owner, Who};
use crate::keys;
use crate::time::millis;
use crate::whoami::host;

/// How long a client's who's-who (and its history stream) lives past its last write.
pub(crate) const TTL: Duration = Duration::from_secs(24 * 3600);

/// The field of the client's name.
pub(crate) const CLIENT: &str = "client";
/// The field of the client's host.
pub(crate) const HOST: &str = "host";
/// The field of the client's process id.
pub(crate) const PID: &str = "pid";
/// The prefix of the field of an owner's thread name: `thread:<owner>`.
pub(crate) const THREAD: &str = "thread:";

/// The field of `owner`'s thread name.
pub(crate) fn thread_field(owner: &str) -> String {
    format!("{THREAD}{owner}")
}

/// The calling thread's name, or its id when it has none.
pub(crate) fn this_thread() -> String {
    let thread = std::thread::current();
    thread
        .name()
        .map_or_else(|| format!("{:?}", thread.id()), str::to_owned)
}

/// Adds to `pipe` (replies ignored) the write of client `client_id`'s who's-who: its name
/// `client_name`, this process's host and id, and the thread names of `threads` (owner,
/// name), with the TTL renewed.
pub(crate) fn introduce<'a>(
    pipe: &mut redis::Pipeline,
    client_id: &str,
    client_name: &str,
    threads: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    let key = keys::history_who(client_id);
    let hset = pipe.cmd("HSET").arg(&key);
    hset.arg(CLIENT).arg(client_name);
    hset.arg(HOST).arg(host());
    hset.arg(PID).arg(std::process::id());
    for (owner, name) in threads {
        hset.arg(thread_field(owner)).arg(name);
    }
    hset.ignore();
    pipe.cmd("PEXPIRE").arg(&key).arg(millis(TTL)).ignore();
}

/// Who `owner` is, as its client's who's-who says (all unknown where there is none: a Java
/// peer, a client gone for a day).
pub(crate) fn who_is(backend: &Backend, owner: &Owner) -> Result<Who> {
    let key = keys::history_who(&owner.client_id);
    let thread = thread_field(&owner.to_string());
    let (client_name, host, pid, thread): (
        Option<String>,
        Option<String>,
        Option<u32>,
        Option<String>,
    ) = backend.run_with(&key, Policy::Once, |c| {
        redis::cmd("HMGET")
            .arg(&key)
            .arg(CLIENT)
            .arg(HOST)
            .arg(PID)
            .arg(&thread)
            .query(c)
    })?;
    Ok(Who {
        client_name,
        host,
        pid,
        thread,
    })
}
