//! Reading the recorded history back: every client's stream that matches, merged by time
//! and named as the caller names its locks ([`Client::history`](crate::Client::history),
//! [`Client::recent_history`](crate::Client::recent_history), `top`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::event::fields;
use super::who::{thread_field, CLIENT, HOST, PID};
use super::{HistoryEvent, HistoryKind};
use crate::backend::{Backend, Policy};
use crate::error::Result;
use crate::hold::{LockKind, Owner};
use crate::keys::{self, HISTORY};
use crate::names::NameMapper;

/// A stream's entries as `XRANGE` replies: id, then field, value, field, value, ...
type Entries = Vec<(String, Vec<String>)>;

/// The server's time, µs since the Unix epoch (of a cluster's node that keeps
/// `redlatch`'s slot): what event stamps are read against.
pub(crate) fn server_time_us(backend: &Backend) -> Result<u64> {
    let (secs, us): (u64, u64) = backend.run(HISTORY, |c| redis::cmd("TIME").query(c))?;
    Ok(secs * 1_000_000 + us)
}

/// The events of `lock` (a key; all when `None`) at `since_us` or later.
pub(crate) fn read(
    backend: &Backend,
    mapper: &NameMapper,
    lock: Option<&str>,
    since_us: u64,
) -> Result<Vec<HistoryEvent>> {
    let mut out = Vec::new();
    for stream in backend.scan(&format!("{HISTORY}:*"))? {
        let Some(client_id) = keys::history_client(&stream) else {
            continue;
        };
        let start = if since_us == 0 {
            "-".to_owned()
        } else {
            format!("{}-0", since_us / 1000)
        };
        let entries: Entries = backend.run_repeatable(&stream, Policy::Retried, |c| {
            redis::cmd("XRANGE")
                .arg(&stream)
                .arg(&start)
                .arg("+")
                .query(c)
        })?;
        if entries.is_empty() {
            continue;
        }
        let who_key = keys::history_who(client_id);
        let who: HashMap<String, String> =
            backend.run(&who_key, |c| redis::cmd("HGETALL").arg(&who_key).query(c))?;
        // A stream is in the order its client saw things: a hold shorter than the stamps'
        // uncertainty (a round trip) ends no earlier than it began.
        let mut began: HashMap<(Owner, String), u64> = HashMap::new();
        // A write sent again (its reply lost) repeats events: each counts once.
        let mut seen: HashSet<u64> = HashSet::new();
        for (_, values) in entries {
            let seq = values
                .chunks_exact(2)
                .find(|kv| kv[0] == fields::SEQ)
                .and_then(|kv| kv[1].parse::<u64>().ok());
            if seq.is_some_and(|s| !seen.insert(s)) {
                continue;
            }
            let Some(mut event) = parse(&values, &who) else {
                continue;
            };
            let hold = (event.owner.clone(), event.lock.clone());
            match event.kind {
                HistoryKind::Acquire => {
                    began.insert(hold, event.at_us);
                }
                HistoryKind::Release | HistoryKind::Lost | HistoryKind::Expired => {
                    if let Some(at) = began.remove(&hold) {
                        event.at_us = event.at_us.max(at);
                    }
                }
                _ => {}
            }
            if event.at_us < since_us || lock.is_some_and(|l| l != event.lock) {
                continue;
            }
            out.push(HistoryEvent {
                lock: mapper.name_of(&event.lock).unwrap_or(event.lock),
                ..event
            });
        }
    }
    out.sort_by_key(|e| (e.at_us, e.kind));
    Ok(out)
}

/// A stream entry's fields as an event (its lock still the key), with who recorded it.
fn parse(values: &[String], who: &HashMap<String, String>) -> Option<HistoryEvent> {
    let field = |name: &str| {
        values
            .chunks_exact(2)
            .find(|kv| kv[0] == name)
            .map(|kv| kv[1].as_str())
    };
    let number = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok());
    let id = field(fields::OWNER)?;
    let owner = Owner::parse(id)?;
    let known = |f: &str| who.get(f).cloned().unwrap_or_default();
    Some(HistoryEvent {
        at_us: number(fields::AT)?,
        kind: HistoryKind::from_word(field(fields::KIND)?)?,
        lock: field(fields::LOCK)?.to_owned(),
        mode: LockKind::parse(field(fields::MODE).unwrap_or_default()),
        client_name: known(CLIENT),
        host: known(HOST),
        pid: who.get(PID).and_then(|p| p.parse().ok()).unwrap_or(0),
        thread: known(&thread_field(id)),
        owner,
        waited: number(fields::WAITED).map(Duration::from_micros),
        held: number(fields::HELD).map(Duration::from_micros),
        contended: field(fields::CONTENDED) == Some("1"),
    })
}
