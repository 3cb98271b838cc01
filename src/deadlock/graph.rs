//! The wait-for graph as the server holds it: a lock's holders (its hash fields, and for a
//! fair lock the queue ahead of a waiter), the lock an owner waits for (its client's index,
//! then the lock's own record), each read as it is walked. A record counts while its expiry
//! has not passed on the clock of the node that keeps it (read in the same round trip), so
//! the records of a process that died stop counting within a lease. Each read is tried once
//! (a check that fails is tried again at the next).

use super::cycle::{Blocker, Edge, Graph, Mode, Wait};
use crate::backend::Policy;
use crate::client::Client;
use crate::error::Result;
use crate::keys;

/// The graph of one deployment, read through `client`.
pub(crate) struct Server<'a> {
    pub(crate) client: &'a Client,
}

/// A record's value, `<expires> <since> <what>`, split: `None` when it does not parse.
pub(crate) fn parse_record(value: &str) -> Option<(u64, u64, &str)> {
    let mut parts = value.splitn(3, ' ');
    let expires = parts.next()?.parse().ok()?;
    let since = parts.next()?.parse().ok()?;
    Some((expires, since, parts.next()?))
}

impl Server<'_> {
    /// `owner`'s live record in the HASH `key`: its since and what it names.
    fn live(&self, key: &str, owner: &str) -> Result<Option<(u64, String)>> {
        let (time, value): ((u64, u64), Option<String>) =
            self.client.inner.backend.run_with(key, Policy::Once, |c| {
                redis::pipe()
                    .cmd("TIME")
                    .cmd("HGET")
                    .arg(key)
                    .arg(owner)
                    .query(c)
            })?;
        let now = time.0 * 1000 + time.1 / 1000;
        Ok(value.and_then(|v| {
            let (expires, since, what) = parse_record(&v)?;
            (expires > now).then(|| (since, what.to_owned()))
        }))
    }

    /// The owners holding `lock`, each with the field it holds by: every field but the mode,
    /// or only a writer's (`writers_only`, for a reader, whom readers do not block).
    fn holders(&self, lock: &str, writers_only: bool) -> Result<Vec<Blocker>> {
        let fields: Vec<(String, String)> =
            self.client
                .inner
                .backend
                .run_with(lock, Policy::Once, |c| {
                    redis::cmd("HGETALL").arg(lock).query(c)
                })?;
        let mut out: Vec<Blocker> = Vec::new();
        for (field, _) in fields {
            if field == keys::MODE_FIELD {
                continue;
            }
            let owner = match keys::writer_of(&field) {
                Some(writer) => writer.to_owned(),
                None if writers_only => continue,
                None => field.clone(),
            };
            if !out.iter().any(|b| b.owner == owner) {
                out.push(Blocker {
                    owner,
                    field: Some(field),
                });
            }
        }
        Ok(out)
    }

    /// The owners queued ahead of `waiter` in `lock`'s fair queue (none if it is not queued).
    fn ahead(&self, lock: &str, waiter: &str) -> Result<Vec<String>> {
        let queue = keys::fair_queue(lock);
        let queued: Vec<String> =
            self.client
                .inner
                .backend
                .run_with(&queue, Policy::Once, |c| {
                    redis::cmd("LRANGE").arg(&queue).arg(0).arg(-1).query(c)
                })?;
        Ok(match queued.iter().position(|o| o == waiter) {
            Some(at) => queued[..at].to_vec(),
            None => Vec::new(),
        })
    }
}

impl Graph for Server<'_> {
    fn blockers(&mut self, lock: &str, mode: Mode, waiter: &str) -> Result<Vec<Blocker>> {
        let mut out = self.holders(lock, mode == Mode::Read)?;
        // A waiter is in its own way only when it holds the read side of the lock whose write
        // side it waits for (an upgrade, never granted). Otherwise, holding the lock means
        // the record is stale: its wait was granted and the record not removed yet.
        if mode != Mode::Write {
            out.retain(|b| b.owner != waiter);
        }
        if mode == Mode::Fair {
            for owner in self.ahead(lock, waiter)? {
                if !out.iter().any(|b| b.owner == owner) {
                    out.push(Blocker { owner, field: None });
                }
            }
        }
        Ok(out)
    }

    fn wait_of(&mut self, owner: &str) -> Result<Option<Wait>> {
        // An owner id another client made (a Java peer's) has no index: no edge.
        let Some((client, _)) = keys::owner_parts(owner) else {
            return Ok(None);
        };
        let Some((_, lock)) = self.live(&keys::client_waits(client), owner)? else {
            return Ok(None);
        };
        let Some((since_ms, letter)) = self.live(&keys::lock_waits(&lock), owner)? else {
            return Ok(None);
        };
        Ok(Mode::from_letter(&letter).map(|mode| Wait {
            owner: owner.to_owned(),
            lock,
            mode,
            since_ms,
        }))
    }

    fn still(&mut self, edge: &Edge) -> Result<bool> {
        let wait = &edge.wait;
        if self
            .live(&keys::lock_waits(&wait.lock), &wait.owner)?
            .is_none()
        {
            return Ok(false);
        }
        match &edge.by.field {
            Some(field) => {
                let lock = &wait.lock;
                let held: bool = self
                    .client
                    .inner
                    .backend
                    .run_with(lock, Policy::Once, |c| {
                        redis::cmd("HEXISTS").arg(lock).arg(field).query(c)
                    })?;
                Ok(held)
            }
            None => Ok(self
                .ahead(&wait.lock, &wait.owner)?
                .contains(&edge.by.owner)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_splits_into_expiry_since_and_what_it_names() {
        assert_eq!(parse_record("20 10 x"), Some((20, 10, "x")));
        assert_eq!(
            parse_record("20 10 a lock with spaces"),
            Some((20, 10, "a lock with spaces"))
        );
        assert_eq!(parse_record("20 10"), None);
        assert_eq!(parse_record("soon 10 x"), None);
    }
}
