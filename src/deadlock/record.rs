//! Broken deadlocks, kept to look back on: the victim of a cycle writes what it broke to a
//! capped, expiring stream of our own (`keys::DEADLOCKS`) before its wait ends with
//! [`Error::Deadlock`](crate::Error::Deadlock): when (the entry's id, the server's clock),
//! the victim, and each step of the cycle with who its owner is (its client's who's-who,
//! which a client writes as it records a wait: see `history/who.rs`).
//! [`Client::deadlocks`] reads them back.

use std::time::Duration;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::{DeadlockStep, Result};
use crate::history::who_is;
use crate::hold::{Owner, Who};
use crate::keys::DEADLOCKS;
use crate::time::millis;

/// The most broken deadlocks kept (about: the stream is trimmed in whole nodes).
const MAX_KEPT: usize = 1000;
/// How long they are kept past the last one.
const KEPT_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// A deadlock that a client broke ([`Client::deadlocks`]): its victim's wait ended with
/// [`Error::Deadlock`](crate::Error::Deadlock), naming the same cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BrokenDeadlock {
    /// When it was broken, µs since the Unix epoch on the server's clock (ms precision).
    pub at_us: u64,
    /// The owner whose wait ended to break it (the youngest wait of the cycle).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub victim: Owner,
    /// The cycle, from the victim's wait: each owner with who it is, the lock it waited for,
    /// and the owner in its way.
    pub cycle: Vec<DeadlockStep>,
}

/// Fills in who each owner of `cycle` is, from its client's who's-who; an owner whose read
/// fails stays unknown.
pub(super) fn identify(client: &Client, cycle: &mut [DeadlockStep]) {
    for step in cycle {
        match who_is(&client.inner.backend, &step.owner) {
            Ok(who) => step.who = who,
            Err(e) => log::debug!("who {} is could not be read: {e}", step.owner),
        }
    }
}

/// Keeps the cycle that `victim`'s wait broke (tried once: a failure is logged, and the
/// error the wait returns says the same).
pub(super) fn keep(client: &Client, victim: &str, cycle: &[DeadlockStep]) {
    let mut xadd = redis::cmd("XADD");
    xadd.arg(DEADLOCKS)
        .arg("MAXLEN")
        .arg("~")
        .arg(MAX_KEPT)
        .arg("*")
        .arg("v")
        .arg(victim)
        .arg("n")
        .arg(cycle.len());
    for (i, s) in cycle.iter().enumerate() {
        xadd.arg(format!("o{i}")).arg(s.owner.to_string());
        xadd.arg(format!("l{i}")).arg(&s.lock);
        xadd.arg(format!("b{i}")).arg(s.blocked_by.to_string());
        let who = &s.who;
        for (field, value) in [
            ('c', who.client_name.clone()),
            ('h', who.host.clone()),
            ('p', who.pid.map(|p| p.to_string())),
            ('t', who.thread.clone()),
        ] {
            if let Some(v) = value {
                xadd.arg(format!("{field}{i}")).arg(v);
            }
        }
    }
    let mut pipe = redis::pipe();
    pipe.add_command(xadd).ignore();
    pipe.cmd("PEXPIRE")
        .arg(DEADLOCKS)
        .arg(millis(KEPT_FOR))
        .ignore();
    let backend = &client.inner.backend;
    let kept: Result<()> = backend.run_with(DEADLOCKS, Policy::Once, |c| pipe.query(c));
    if let Err(e) = kept {
        log::warn!("the deadlock broken by {victim} could not be kept on the server: {e}");
    }
}

impl Client {
    /// The deadlocks broken in the deployment over the last week (at most about the last
    /// 1,000), oldest first: what `redlatch waits --deadlocks` prints. Each names its
    /// victim and its cycle: every member's owner, who it is (client name, process, host,
    /// thread), the lock it waited for (its key) and the owner in its way. A victim writes
    /// its record as it breaks the cycle, whether or not its client records history.
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
    /// for d in client.deadlocks()? {
    ///     for step in &d.cycle {
    ///         println!("{} ({}) waited for {}", step.owner, step.who, step.lock);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn deadlocks(&self) -> Result<Vec<BrokenDeadlock>> {
        self.deadlocks_since(0)
    }

    /// The deadlocks kept that were broken at `since_ms` (ms since the epoch, the server's
    /// clock) or later, oldest first.
    pub(crate) fn deadlocks_since(&self, since_ms: u64) -> Result<Vec<BrokenDeadlock>> {
        type Entry = (String, Vec<(String, String)>);
        let entries: Vec<Entry> = self
            .inner
            .backend
            .run_with(DEADLOCKS, Policy::Retried, |c| {
                redis::cmd("XRANGE")
                    .arg(DEADLOCKS)
                    .arg(since_ms)
                    .arg("+")
                    .query(c)
            })?;
        Ok(entries.iter().filter_map(|(id, f)| parse(id, f)).collect())
    }
}

/// A stream entry as a broken deadlock; `None` when it does not parse (a newer version's).
fn parse(id: &str, fields: &[(String, String)]) -> Option<BrokenDeadlock> {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let ms: u64 = id.split_once('-')?.0.parse().ok()?;
    let n: usize = field("n")?.parse().ok()?;
    let mut cycle = Vec::with_capacity(n.min(64));
    for i in 0..n {
        let text = |c: char| field(&format!("{c}{i}")).map(str::to_owned);
        let mut step = DeadlockStep::new(
            field(&format!("o{i}"))?,
            text('l')?,
            field(&format!("b{i}"))?,
        );
        step.who = Who {
            client_name: text('c'),
            host: text('h'),
            pid: text('p').and_then(|p| p.parse().ok()),
            thread: text('t'),
        };
        cycle.push(step);
    }
    Some(BrokenDeadlock {
        at_us: ms.saturating_mul(1000),
        victim: Owner::from_id(field("v")?),
        cycle,
    })
}
