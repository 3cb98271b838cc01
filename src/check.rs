//! [`Client::check`]: what in a deployment threatens the locks on it, each finding with what
//! to do. The facts are read from every master (`CONFIG GET`, `INFO`, `TIME`); judging them
//! is a pure function of those facts and the client's configuration (`assess`). And
//! [`Client::ping`]: whether the deployment answers at all.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::backend::{Policy, Pool};
use crate::client::Client;
use crate::error::Result;
use crate::pubsub::Mode;

/// What threatens locks on a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Risk {
    /// An eviction policy other than `noeviction` with a memory limit: Redis may delete a
    /// lock key (every lock key has a TTL, so `volatile-*` policies pick them too) when
    /// memory runs short, and another client then takes the lock.
    Eviction,
    /// Neither RDB snapshots nor the AOF: a restart frees every lock, and the fencing token
    /// counters start again (from the server's clock, so tokens still grow).
    NoPersistence,
    /// Replicas, and the client does not wait for them
    /// ([`sync_replicas`](crate::ConfigBuilder::sync_replicas)): a failover can promote a
    /// replica that never saw a lock, and two clients hold it.
    UnsyncedReplicas,
    /// A cluster whose servers cannot serve the configured pub/sub mode (sharded pub/sub
    /// before Redis 7.0).
    PubSubMode,
    /// The server's clock is far from this machine's. Leases run on the server's clock, so
    /// this is no risk to them by itself; but it shows a clock that may also jump, and a
    /// jump forward expires leases early.
    ClockSkew,
    /// What the check needed could not be read (`CONFIG` disabled or refused by an ACL, as
    /// on many managed services): check that setting by hand.
    Unknown,
}

/// One finding of [`Client::check`]: on which server, what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// The server (`host:port`).
    pub server: String,
    /// What threatens the locks there.
    pub risk: Risk,
    /// What was found, in words (`maxmemory-policy allkeys-lru with maxmemory 100mb`).
    pub found: String,
    /// What to do about it.
    pub advice: &'static str,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ({:?}). {}",
            self.server, self.found, self.risk, self.advice
        )
    }
}

/// What [`assess`] judges, read from one server; `None` where it could not be read.
#[derive(Debug, Default, Clone)]
pub(crate) struct Facts {
    pub(crate) maxmemory: Option<u64>,
    pub(crate) policy: Option<String>,
    /// `CONFIG GET save`: empty when RDB snapshots are off.
    pub(crate) save: Option<String>,
    pub(crate) appendonly: Option<bool>,
    pub(crate) replicas: Option<u32>,
    /// The server's `TIME` minus this machine's clock, at the reply.
    pub(crate) skew: Option<Duration>,
    pub(crate) major_version: Option<u32>,
}

/// How far the clocks may differ before it is worth a finding.
const SKEW_LIMIT: Duration = Duration::from_secs(1);

/// The findings for one server's `facts`; `syncs_replicas`: the client waits for replicas;
/// `sharded`: the client uses sharded pub/sub on a cluster.
pub(crate) fn assess(
    server: &str,
    facts: &Facts,
    syncs_replicas: bool,
    sharded: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut say = |risk, found: String, advice| {
        out.push(Finding {
            server: server.to_owned(),
            risk,
            found,
            advice,
        })
    };
    match (facts.maxmemory, &facts.policy) {
        (Some(0), _) => {}
        (Some(limit), Some(policy)) if policy != "noeviction" => say(
            Risk::Eviction,
            format!("maxmemory-policy {policy} with maxmemory {limit} bytes"),
            "Set maxmemory-policy noeviction on the servers that hold locks (writes then fail \
             when memory is full, instead of locks disappearing), or keep locks on a server \
             of their own.",
        ),
        (Some(_), Some(_)) => {}
        _ => say(
            Risk::Unknown,
            "maxmemory and maxmemory-policy could not be read".to_owned(),
            "Make sure the server does not evict keys (maxmemory-policy noeviction, or no \
             maxmemory).",
        ),
    }
    match (&facts.save, facts.appendonly) {
        (Some(save), Some(false)) if save.trim().is_empty() => say(
            Risk::NoPersistence,
            "no RDB snapshots (save \"\") and no AOF (appendonly no)".to_owned(),
            "A restart frees every lock: turn on the AOF (appendonly yes, appendfsync \
             everysec), or accept it and have holders react to on_lost.",
        ),
        (Some(_), Some(_)) => {}
        _ => say(
            Risk::Unknown,
            "save and appendonly could not be read".to_owned(),
            "Check that the server persists its data, or that losing every lock at a \
             restart is acceptable.",
        ),
    }
    match facts.replicas {
        Some(n) if n > 0 && !syncs_replicas => say(
            Risk::UnsyncedReplicas,
            format!("{n} replica(s), and this client does not wait for them"),
            "Use ConfigBuilder::sync_replicas(n, timeout) so that a lock is on n replicas \
             before the acquire returns, and a fenced lock with FencedResource for the data.",
        ),
        Some(_) => {}
        None => say(
            Risk::Unknown,
            "the replication role could not be read".to_owned(),
            "If the server has replicas, use ConfigBuilder::sync_replicas.",
        ),
    }
    if let Some(skew) = facts.skew {
        if skew > SKEW_LIMIT {
            say(
                Risk::ClockSkew,
                format!("the server's clock is {skew:?} away from this machine's"),
                "Run NTP (or chrony) on both machines; leases run on the server's clock, and \
                 a clock that steps forward expires them early.",
            );
        }
    }
    if sharded && facts.major_version.is_some_and(|v| v < 7) {
        say(
            Risk::PubSubMode,
            format!(
                "sharded pub/sub configured, on Redis {}",
                facts.major_version.unwrap_or(0)
            ),
            "Sharded pub/sub needs Redis 7.0: set ShardedSubscriptionMode::Off (or Auto).",
        );
    }
    out
}

/// Reads the facts of the server of `pool`; what cannot be read stays `None`.
pub(crate) fn read_facts(pool: &Pool) -> Facts {
    let config_get = |name: &str| -> Option<String> {
        let pairs: Vec<String> = pool
            .run("", Policy::Once, |c| {
                redis::cmd("CONFIG").arg("GET").arg(name).query(c)
            })
            .ok()?;
        pairs.get(1).cloned()
    };
    let info = |section: &str| -> Option<String> {
        pool.run("", Policy::Once, |c| {
            redis::cmd("INFO").arg(section).query(c)
        })
        .ok()
    };
    let mut facts = Facts {
        maxmemory: config_get("maxmemory").and_then(|v| v.parse().ok()),
        policy: config_get("maxmemory-policy"),
        save: config_get("save"),
        appendonly: config_get("appendonly").map(|v| v == "yes"),
        ..Facts::default()
    };
    if let Some(text) = info("replication") {
        facts.replicas = field(&text, "connected_slaves").and_then(|v| v.parse().ok());
    }
    if let Some(text) = info("server") {
        facts.major_version = field(&text, "redis_version")
            .and_then(|v| v.split('.').next().and_then(|m| m.parse().ok()));
    }
    let time = pool.run("", Policy::Once, |c| {
        redis::cmd("TIME").query::<(u64, u64)>(c)
    });
    if let (Ok((secs, micros)), Ok(here)) = (time, SystemTime::now().duration_since(UNIX_EPOCH)) {
        let server = Duration::from_secs(secs) + Duration::from_micros(micros);
        facts.skew = Some(server.abs_diff(here));
    }
    facts
}

/// The value of `name` in an `INFO` reply.
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

impl Client {
    /// Checks that the deployment answers: connects to every master (the one server, the
    /// master Sentinel names, or each master of a cluster, in its slot map read afresh) if
    /// no connection is open, authenticates, and sends `PING`, once each, with no retry.
    /// Returns the slowest round trip, connecting included.
    ///
    /// A client connects lazily ([`Client::open`] sends nothing), so this is the call to
    /// make at start-up, to fail there, naming the server, rather than at the first lock.
    /// The pub/sub connection is not checked: its thread connects in the background and
    /// keeps retrying.
    ///
    /// # Errors
    ///
    /// Each names the server's address: [`Error::Connection`](crate::Error::Connection) (`cannot
    /// connect to 127.0.0.1:6390: Connection refused (os error 111)`),
    /// [`Error::Timeout`](crate::Error::Timeout), credentials refused
    /// ([`Error::is_auth_failed`](crate::Error::is_auth_failed)), an ACL without `PING`
    /// ([`Error::Redis`](crate::Error::Redis), `NOPERM`); [`Error::Closed`](crate::Error::Closed).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let round_trip = client.ping()?; // fails here if the server is down or refuses us
    /// log::info!("redis answers in {round_trip:?}");
    /// # Ok(()) }
    /// ```
    pub fn ping(&self) -> Result<Duration> {
        let mut slowest = Duration::ZERO;
        self.inner.backend.for_each_master(|pool| {
            let started = std::time::Instant::now();
            pool.run("", Policy::Once, |c| redis::cmd("PING").query::<String>(c))
                .map_err(|e| e.calling(&pool.endpoint().describe()))?;
            slowest = slowest.max(started.elapsed());
            Ok(())
        })?;
        Ok(slowest)
    }

    /// Runs the check for [`check_on_connect`](crate::ConfigBuilder::check_on_connect): each
    /// finding a warning, a check that fails one too.
    pub(crate) fn log_findings(&self) {
        match self.check() {
            Ok(findings) => {
                for f in findings {
                    log::warn!(target: "redlatch::check", "{f}");
                }
            }
            Err(e) => log::warn!(target: "redlatch::check", "the deployment check failed: {e}"),
        }
    }

    /// Checks what in the deployment threatens the locks on it, server by server (every
    /// master): an eviction policy that can delete lock keys; no persistence (a restart frees
    /// every lock); replicas without [`sync_replicas`](crate::ConfigBuilder::sync_replicas);
    /// sharded pub/sub on a server without it; a server clock far from this machine's. Each
    /// [`Finding`] says what to do. What cannot be read (`CONFIG` refused, as on many managed
    /// services) is a finding of [`Risk::Unknown`]. An empty list: nothing found.
    ///
    /// [`check_on_connect`](crate::ConfigBuilder::check_on_connect) logs the findings as
    /// warnings when the client is made.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`](crate::Error::Connection) and the like when a server cannot be
    /// reached; [`Error::Closed`](crate::Error::Closed).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for finding in client.check()? {
    ///     eprintln!("{finding}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn check(&self) -> Result<Vec<Finding>> {
        let inner = &self.inner;
        let syncs = inner.config.replica_sync.is_some();
        let sharded = inner.backend.clustered() && inner.backend.pubsub_mode() == Mode::Sharded;
        let mut all = Vec::new();
        inner.backend.for_each_master(|pool| {
            let server = pool.endpoint().describe();
            // Reachable at all: a server that does not answer is an error, not findings.
            pool.run("", Policy::Retried, |c| {
                redis::cmd("PING").query::<String>(c)
            })?;
            let facts = read_facts(pool);
            all.extend(assess(&server, &facts, syncs, sharded));
            Ok(())
        })?;
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn safe() -> Facts {
        Facts {
            maxmemory: Some(0),
            policy: Some("allkeys-lru".into()),
            save: Some("3600 1".into()),
            appendonly: Some(false),
            replicas: Some(0),
            skew: Some(Duration::from_millis(3)),
            major_version: Some(7),
        }
    }

    fn risks(f: &Facts, syncs: bool, sharded: bool) -> Vec<Risk> {
        assess("h:1", f, syncs, sharded)
            .into_iter()
            .map(|f| f.risk)
            .collect()
    }

    #[test]
    fn each_fact_makes_its_finding_and_only_it() {
        assert_eq!(risks(&safe(), false, false), []);
        let mut f = safe();
        f.maxmemory = Some(1 << 20);
        assert_eq!(risks(&f, false, false), [Risk::Eviction]);
        f.policy = Some("noeviction".into());
        assert_eq!(risks(&f, false, false), []);
        let mut f = safe();
        f.save = Some(String::new());
        assert_eq!(risks(&f, false, false), [Risk::NoPersistence]);
        f.appendonly = Some(true);
        assert_eq!(risks(&f, false, false), []);
        let mut f = safe();
        f.replicas = Some(2);
        assert_eq!(risks(&f, false, false), [Risk::UnsyncedReplicas]);
        assert_eq!(risks(&f, true, false), []);
        let mut f = safe();
        f.skew = Some(Duration::from_secs(5));
        assert_eq!(risks(&f, false, false), [Risk::ClockSkew]);
        let mut f = safe();
        f.major_version = Some(6);
        assert_eq!(risks(&f, false, true), [Risk::PubSubMode]);
        assert_eq!(risks(&f, false, false), []);
        let unreadable = Facts::default();
        assert_eq!(
            risks(&unreadable, false, false),
            [Risk::Unknown, Risk::Unknown, Risk::Unknown]
        );
    }

    #[test]
    fn info_fields_are_read_by_name() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=x\r\n";
        assert_eq!(field(info, "connected_slaves"), Some("2"));
        assert_eq!(field(info, "role"), Some("master"));
        assert_eq!(field(info, "missing"), None);
    }
}
