//! The wait-for graph of a deployment as an operator sees it: [`Client::waits`], every
//! recorded wait (a thread blocked on a lock longer than its client's
//! `deadlock_check_after`), who is in its way, and which waits form cycles.

use std::collections::BTreeMap;
use std::time::Duration;

use super::cycle::{find, Blocker, Edge, Wait, BOUNDS};
use super::{parse_record, Graph, Mode as WaitMode, Server as WaitGraph};
use crate::backend::Policy;
use crate::client::Client;
use crate::error::Result;
use crate::hold::{LockKind, Owner};
use crate::keys::{helper_of, unhashed, LOCK_WAITS};

/// One thread recorded as waiting for a lock ([`Client::waits`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct WaitRecord {
    /// The waiting owner.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub owner: Owner,
    /// The lock it waits for, as its name is given (unmapped).
    pub lock: String,
    /// How it waits: [`Exclusive`](LockKind::Exclusive), [`Fair`](LockKind::Fair),
    /// [`Read`](LockKind::Read) or [`Write`](LockKind::Write).
    pub mode: LockKind,
    /// How long it has waited, on the server's clock.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "waited_ms", serialize_with = "crate::ser::duration")
    )]
    pub waited: Duration,
    /// The owners in its way: the lock's holders (a reader's, only a writer), and for a fair
    /// lock the waiters queued ahead.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_ids"))]
    pub blocked_by: Vec<Owner>,
    /// Whether it is part of a cycle of recorded waits, as a client's deadlock check finds
    /// one (of at most 8 waits): a deadlock not broken yet, which each member looks for
    /// again at doubling intervals.
    pub in_cycle: bool,
}

impl Client {
    /// Every wait recorded in the deployment, on every master of a cluster, sorted by lock
    /// and then by how long each has waited (longest first): what the `redlatch waits`
    /// command shows. Only waits that can be part of a deadlock are recorded: those of a
    /// thread that holds another lock while it waits, once they have lasted the
    /// `deadlock_check_after` of their client (1 s unless set). A thread that holds nothing
    /// while it waits is in nobody's way and writes nothing; shorter waits, waits of clients
    /// with detection off and those of Java peers are not recorded either
    /// ([`top`](Self::top) counts every waiter).
    ///
    /// It costs one pass of `SCAN` over each master's keyspace, and per lock with waiters one
    /// read of its records and one of its holders per waiter (two for a fair lock): a tool
    /// for operators, not for hot paths.
    ///
    /// # Errors
    ///
    /// Connection errors and timeouts.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for wait in client.waits()? {
    ///     println!("{} waits {:?} for {} (held by {:?})", wait.owner, wait.waited, wait.lock,
    ///         wait.blocked_by);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn waits(&self) -> Result<Vec<WaitRecord>> {
        let keys = self.inner.backend.scan(&format!("{LOCK_WAITS}:*"))?;
        let mut graph = WaitGraph { client: self };
        let mut found = Vec::new();
        for key in keys {
            let Some(lock) = self.lock_of(&key)? else {
                continue;
            };
            found.extend(self.records(&mut graph, &key, &lock)?);
        }
        mark_cycles(&mut found);
        let mapper = &self.inner.config.name_mapper;
        for wait in &mut found {
            if let Some(name) = mapper.name_of(&wait.lock) {
                wait.lock = name;
            }
        }
        found.sort_by(|a, b| (&a.lock, b.waited).cmp(&(&b.lock, a.waited)));
        Ok(found)
    }

    /// The lock whose wait records `key` holds: of the names it may stand for, the one that
    /// exists (else the first).
    fn lock_of(&self, key: &str) -> Result<Option<String>> {
        let names = helper_of(key).map(unhashed).unwrap_or_default();
        if names.len() < 2 {
            return Ok(names.into_iter().next());
        }
        for name in &names {
            let exists: bool = self
                .inner
                .backend
                .run(name, |c| redis::cmd("EXISTS").arg(name).query(c))?;
            if exists {
                return Ok(Some(name.clone()));
            }
        }
        Ok(names.into_iter().next())
    }

    /// The live records of `key` (the wait records of `lock`), with their blockers.
    fn records(&self, graph: &mut WaitGraph<'_>, key: &str, lock: &str) -> Result<Vec<WaitRecord>> {
        let (time, fields): ((u64, u64), Vec<(String, String)>) = self
            .inner
            .backend
            .run_repeatable(key, Policy::Retried, |c| {
                redis::pipe().cmd("TIME").cmd("HGETALL").arg(key).query(c)
            })?;
        let now = time.0 * 1000 + time.1 / 1000;
        let mut out = Vec::new();
        for (owner, value) in fields {
            let Some((expires, since, letter)) = parse_record(&value) else {
                continue;
            };
            let Some(mode) = WaitMode::from_letter(letter).filter(|_| expires > now) else {
                continue;
            };
            let blocked_by = graph
                .blockers(lock, mode, &owner)?
                .into_iter()
                .map(|b| Owner::from_id(&b.owner))
                .collect();
            out.push(WaitRecord {
                owner: Owner::from_id(&owner),
                lock: lock.to_owned(),
                mode: mode.kind(),
                waited: Duration::from_millis(now.saturating_sub(since)),
                blocked_by,
                in_cycle: false,
            });
        }
        Ok(out)
    }
}

/// Marks the waits that a cycle of recorded waits leads back to, found as a client's check
/// finds one (the walk of `cycle.rs`, within its bounds) over the records read.
fn mark_cycles(waits: &mut [WaitRecord]) {
    let mut graph = Recorded {
        waits: waits.iter().map(|w| (w.owner.to_string(), w)).collect(),
    };
    let in_cycle: Vec<bool> = waits
        .iter()
        .map(|w| {
            let me = graph.wait(w);
            find(&mut graph, &me, BOUNDS).is_ok_and(|c| c.is_some())
        })
        .collect();
    for (wait, in_cycle) in waits.iter_mut().zip(in_cycle) {
        wait.in_cycle = in_cycle;
    }
}

/// The wait-for graph of the records read: a wait's blockers are the owners in its way.
struct Recorded<'a> {
    waits: BTreeMap<String, &'a WaitRecord>,
}

impl Recorded<'_> {
    fn wait(&self, w: &WaitRecord) -> Wait {
        Wait {
            owner: w.owner.to_string(),
            lock: w.lock.clone(),
            mode: WaitMode::Exclusive,
            since_ms: 0,
        }
    }
}

impl Graph for Recorded<'_> {
    fn blockers(&mut self, _: &str, _: WaitMode, waiter: &str) -> Result<Vec<Blocker>> {
        let by = self
            .waits
            .get(waiter)
            .map_or(&[][..], |w| &w.blocked_by[..]);
        Ok(by
            .iter()
            .map(|o| Blocker {
                owner: o.to_string(),
                field: None,
            })
            .collect())
    }

    fn wait_of(&mut self, owner: &str) -> Result<Option<Wait>> {
        Ok(self.waits.get(owner).map(|w| self.wait(w)))
    }

    fn still(&mut self, _: &Edge) -> Result<bool> {
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(owner: &str, blocked_by: &[&str]) -> WaitRecord {
        WaitRecord {
            owner: Owner::from_id(owner),
            lock: "l".into(),
            mode: LockKind::Exclusive,
            waited: Duration::ZERO,
            blocked_by: blocked_by.iter().map(|s| Owner::from_id(s)).collect(),
            in_cycle: false,
        }
    }

    #[test]
    fn only_the_waits_of_a_cycle_are_marked() {
        // a -> b -> c -> a is a cycle; d waits behind it; e behind a holder that waits not.
        let mut waits = vec![
            wait("a", &["b"]),
            wait("b", &["c"]),
            wait("c", &["a"]),
            wait("d", &["a"]),
            wait("e", &["x"]),
        ];
        mark_cycles(&mut waits);
        let marked: Vec<&str> = waits
            .iter()
            .filter(|w| w.in_cycle)
            .map(|w| w.owner.client_id.as_str())
            .collect();
        assert_eq!(marked, ["a", "b", "c"]);
    }
}
