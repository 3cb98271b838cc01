//! Deadlocks across processes, and the wait-for graph an operator reads.
//!
//! A wait that blocks longer than the client's
//! `deadlock_check_after` is recorded on the server, and looks for a cycle of waits through
//! its own; the youngest wait of a cycle ends with [`Error::Deadlock`].
//!
//! A record is two entries (see `keys.rs`): the lock's wait records
//! (`redlatch_waits:{name}`, owner -> expiry, since, mode), and the client's index
//! (`redlatch_waiting:{client}`, owner -> the lock), by which a walk learns what a holder
//! waits for. Both are written at the wait's first check, renewed by the watchdog in its
//! batches (`lua/wait_renew.lua`), and removed as the wait ends, however it ends (the
//! `Checks` drop); a process that dies leaves them to expire within a lease. A record whose
//! owner holds the lock is no edge: the walk reads holders, not records alone.
//!
//! A check walks the graph depth first from the waiter's lock (`cycle.rs`, within
//! `cycle::BOUNDS`), reading as it goes (`graph.rs`); a cycle found is read again, edge
//! by edge, and counts only if every edge is still there. Every member of a cycle computes
//! the same victim; only the victim acts. Checks repeat at twice the interval each time, up
//! to every 30 seconds, so that a cycle whose victim is an older wait is still broken.
//!
//! - `cycle.rs`: the walk, the confirmation and the victim rule, over any graph (`cycle::Graph`).
//! - `graph.rs`: the graph as the server holds it.
//! - `report.rs`: [`Client::waits`](crate::Client::waits), the graph as an operator reads it
//!   ([`WaitRecord`]).
//! - `record.rs`: the deadlocks broken, kept on the server ([`BrokenDeadlock`],
//!   [`Client::deadlocks`](crate::Client::deadlocks)).

mod cycle;
mod graph;
mod record;
mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Policy;
use crate::client::Client;
pub use crate::error::DeadlockStep;
use crate::error::{Error, Result};
use crate::history;
use crate::keys;
use crate::scripts;
use crate::time::millis;
use crate::watchdog::{BatchRenewal, Renewal, Watch};
use cycle::{Edge, Wait, BOUNDS};
pub(crate) use cycle::{Graph, Mode};
pub(crate) use graph::{parse_record, Server};
pub use record::BrokenDeadlock;
pub use report::WaitRecord;

/// The most time between two checks of one wait.
const MAX_INTERVAL: Duration = Duration::from_secs(30);

/// `wait_renew.lua`: a record (or index entry) is its owner's field of a HASH.
static RENEW_WAIT: BatchRenewal = BatchRenewal {
    script: &scripts::WAIT_RENEW,
    add: |call, key, owner| {
        call.key(key).arg(owner);
    },
    holds: false,
    leased: true,
};

/// The deadlock checks of one blocked acquire: when the next is due, the wait's record once
/// written, and its removal (with the record's renewals) as the acquire ends.
pub(crate) struct Checks {
    client: Client,
    /// The lock's key.
    lock: Arc<str>,
    owner: Arc<str>,
    mode: Mode,
    started: Instant,
    /// When the next check is due; `None`: the client does not check.
    next: Option<Instant>,
    interval: Duration,
    record: Option<Record>,
}

/// A wait's record, as written.
struct Record {
    /// The renewals of the lock's record and of the index entry.
    watches: [Watch; 2],
}

impl Checks {
    /// The checks of `owner`'s wait for `lock` (its key) in `mode`, which began at `started`.
    pub(crate) fn new(
        client: &Client,
        lock: &Arc<str>,
        owner: &Arc<str>,
        mode: Mode,
        started: Instant,
    ) -> Checks {
        let after = client.inner.config.deadlock_check_after;
        Checks {
            client: client.clone(),
            lock: Arc::clone(lock),
            owner: Arc::clone(owner),
            mode,
            started,
            next: after.map(|a| started + a),
            interval: after.unwrap_or(MAX_INTERVAL),
            record: None,
        }
    }

    /// The time until the next check (at least 1 ms), if the client checks.
    pub(crate) fn until_next(&self) -> Option<Duration> {
        let next = self.next?;
        Some(
            next.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        )
    }

    /// Runs the check if one is due: [`Error::Deadlock`] when this wait is the victim of a
    /// cycle. A check that fails (the server does not answer) is logged and tried again at
    /// the next; the wait goes on.
    pub(crate) fn check(&mut self) -> Result<()> {
        let now = Instant::now();
        match self.next {
            Some(next) if now >= next => {}
            _ => return Ok(()),
        }
        self.interval = (self.interval * 2).min(MAX_INTERVAL);
        self.next = Some(now + self.interval);
        match self.look() {
            Ok(None) => Ok(()),
            Ok(Some(mut cycle)) => {
                self.client.inner.metrics.deadlocked();
                record::identify(&self.client, &mut cycle);
                record::keep(&self.client, &self.owner, &cycle);
                log::warn!(
                    "`{}` (owner {}): this wait ends a deadlock: {}",
                    self.lock,
                    self.owner,
                    Error::Deadlock {
                        cycle: cycle.clone()
                    }
                );
                Err(Error::Deadlock { cycle })
            }
            Err(e) => {
                log::debug!(
                    "looking for a deadlock through `{}` (owner {}) failed: {e}",
                    self.lock,
                    self.owner
                );
                Ok(())
            }
        }
    }

    /// Records the wait (once), walks the graph, and returns the cycle if one is found,
    /// confirmed, and this wait is its victim.
    fn look(&mut self) -> Result<Option<Vec<DeadlockStep>>> {
        let since_ms = self.record()?;
        let me = Wait {
            owner: self.owner.to_string(),
            lock: self.lock.to_string(),
            mode: self.mode,
            since_ms,
        };
        let mut graph = graph::Server {
            client: &self.client,
        };
        let Some(cycle) = cycle::find(&mut graph, &me, BOUNDS)? else {
            return Ok(None);
        };
        let victim = cycle::victim(&cycle).map(|w| w.owner.clone());
        log::debug!(
            "`{}` (owner {}): a cycle of {} waits found; victim {victim:?}",
            self.lock,
            self.owner,
            cycle.len()
        );
        if victim.as_deref() != Some(&*self.owner) || !cycle::confirm(&mut graph, &cycle)? {
            return Ok(None);
        }
        Ok(Some(cycle.into_iter().map(step).collect()))
    }

    /// Writes the wait's record and index entry (again at every check: one lost with a
    /// failover, or expired while renewals failed, comes back with its since), and has the
    /// watchdog renew them: the wait's since, on the server's clock. The owner is one thread
    /// (see `acquire.rs`): it waits for one lock at a time.
    fn record(&mut self) -> Result<u64> {
        if self.record.is_some() {
            return self.write();
        }
        let since_ms = match self.write() {
            Ok(since) => since,
            Err(e) => {
                // Either may have been written: removed (or left to expire).
                self.remove();
                return Err(e);
            }
        };
        self.introduce();
        let watchdog = &self.client.inner.watchdog;
        let now = Instant::now();
        let watches = [self.waits_key(), self.index_key()].map(|key| {
            let renewal = Renewal {
                field: Arc::clone(&self.owner),
                batch: &RENEW_WAIT,
            };
            watchdog.watch(&Arc::from(key), renewal, now, 1, None).0
        });
        self.record = Some(Record { watches });
        Ok(since_ms)
    }

    /// Writes who this wait's owner is in its client's who's-who, so that a cycle it is in
    /// names it (tried once: a failure is logged, and the cycle names the owner alone).
    fn introduce(&self) {
        let mut pipe = redis::pipe();
        let thread = history::this_thread();
        let client_name = &self.client.inner.config.client_name;
        let me = [(&*self.owner, thread.as_str())];
        history::introduce(&mut pipe, self.client.id(), client_name, me);
        let key = self.index_key();
        let backend = &self.client.inner.backend;
        let written: Result<()> = backend.run_with(&key, Policy::Once, |c| pipe.query(c));
        if let Err(e) = written {
            log::debug!("writing who {} is failed: {e}", self.owner);
        }
    }

    /// Writes the record, then the index entry; the since of the record.
    fn write(&self) -> Result<u64> {
        let since = self.write_in(&self.waits_key(), self.mode.letter())?;
        self.write_in(&self.index_key(), &self.lock)?;
        Ok(since)
    }

    /// Writes the owner's entry naming `what` in the HASH `key` (`lua/wait_record.lua`).
    fn write_in(&self, key: &str, what: &str) -> Result<u64> {
        let lease = millis(self.client.inner.config.watchdog_timeout);
        let waited = millis(self.started.elapsed());
        // Sent again after an interrupted read: a record that exists keeps its since.
        let backend = &self.client.inner.backend;
        backend.run_repeatable(key, Policy::Retried, |c| {
            scripts::WAIT_RECORD
                .key(key)
                .arg(&*self.owner)
                .arg(lease)
                .arg(waited)
                .arg(what)
                .invoke(c)
        })
    }

    fn waits_key(&self) -> String {
        keys::lock_waits(&self.lock)
    }

    fn index_key(&self) -> String {
        keys::client_waits(self.client.id())
    }

    /// Deletes the record and the index entry (each expires within a lease anyway). `HDEL`
    /// is idempotent, so a call that may have run (a connection killed under it: no reply) is
    /// sent once more: a record left behind would be a false edge, one that a later check of
    /// another wait could close a cycle with, until it expires.
    fn remove(&self) {
        let backend = &self.client.inner.backend;
        for key in [self.waits_key(), self.index_key()] {
            let hdel = || -> Result<i64> {
                backend.run(&key, |c| {
                    redis::cmd("HDEL").arg(&key).arg(&*self.owner).query(c)
                })
            };
            let removed = match hdel() {
                Err(e) if e.is_connection() || e.is_timeout() => hdel(),
                done => done,
            };
            if let Err(e) = removed {
                log::debug!(
                    "removing the wait record of {} from `{key}` failed: {e}; it expires \
                     within a lease",
                    self.owner
                );
            }
        }
    }
}

impl Drop for Checks {
    /// Removes the record, however the wait ended (the lock taken, given up, an error, an
    /// interrupt, the client closed).
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            let watchdog = &self.client.inner.watchdog;
            for watch in record.watches {
                watchdog.unwatch(watch);
            }
            self.remove();
        }
    }
}

/// A cycle's edge as the error names it.
fn step(edge: Edge) -> DeadlockStep {
    DeadlockStep::new(&edge.wait.owner, edge.wait.lock, &edge.by.owner)
}
