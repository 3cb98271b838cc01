//! Client configuration: what a [`Client`](crate::Client) is built with. `builder.rs` holds the
//! builder's constructors and setters, `build.rs` the checks that make a [`Config`].

mod address;
pub use address::ServerAddress;
mod acl;
mod build;
mod builder;

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::metrics::Recorder;
use crate::names::NameMapper;
use crate::net::{Certificates, Dial, Reconnected, Tls};
use crate::time::millis;

/// Everything a [`Client`](crate::Client) needs to know, checked when built.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// let config = redlatch::Config::builder("redis://127.0.0.1:6379/")
///     .pool_size(8)
///     .watchdog_timeout(Duration::from_secs(10))
///     .build()?;
/// let client = redlatch::Client::new(config)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) topology: Topology,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) pool_size: usize,
    pub(crate) batch_lanes: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) pubsub_ping_interval: Duration,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) renew_batch_size: usize,
    pub(crate) fair_thread_wait: Duration,
    pub(crate) spin_backoff: Backoff,
    pub(crate) name_mapper: NameMapper,
    pub(crate) replica_sync: Option<ReplicaSync>,
    pub(crate) sharded_subscription_mode: ShardedSubscriptionMode,
    /// TLS for `rediss://` addresses (those of nodes found at run time included).
    pub(crate) tls: Tls,
    /// The application prefix of connection names (see [`ConfigBuilder::client_name`]).
    pub(crate) client_name: String,
    /// `<client_name>:<client id>`: what connections are named (`CLIENT SETNAME`). Set by
    /// [`Client::new`](crate::Client::new), which makes the client id.
    pub(crate) connection_name: Option<Arc<str>>,
    /// Whether the `metrics` feature labels by lock name too.
    pub(crate) metrics_lock_names: bool,
    /// Whether [`Client::new`](crate::Client::new) runs [`Client::check`](crate::Client::check)
    /// and logs its findings.
    pub(crate) check_on_connect: bool,
    /// How long a wait blocks before it looks for a deadlock; `None`: never.
    pub(crate) deadlock_check_after: Option<Duration>,
    /// Whether the order in which this client's threads take locks is recorded and checked.
    pub(crate) lock_order_checks: bool,
    /// The most events the client's history stream keeps, when it records one.
    pub(crate) history: Option<usize>,
}

/// Whether a client on a Redis Cluster uses sharded pub/sub (`SSUBSCRIBE`, `SPUBLISH`,
/// Redis 7.0 and later) or plain pub/sub (`SUBSCRIBE`, `PUBLISH`) for wake-ups: Redisson's
/// `shardedSubscriptionMode`, set with [`ConfigBuilder::sharded_subscription_mode`].
///
/// Every client and Java service that shares locks on one cluster must end up in the same
/// mode: a message published one way does not reach subscribers of the other (a waiter
/// that misses it still wakes when the holder's lease runs out, but no sooner). Redisson
/// (3.22.0 and later) and redlatch both default to [`Auto`](Self::Auto), which agrees on any
/// one cluster. Redisson before 3.22.0 has only plain pub/sub: next to it on a Redis 7
/// cluster, set [`Off`](Self::Off). (Redisson decides once, at start: a failed check there
/// leaves it on plain pub/sub for good, where redlatch asks again. Where that matters, set
/// the mode on both sides.)
///
/// A single server and Sentinel always use plain pub/sub, whatever this says.
///
/// # Examples
///
/// ```
/// use redlatch::{Config, ShardedSubscriptionMode};
/// let config = Config::cluster(["redis://10.0.0.1:7000"])
///     .sharded_subscription_mode(ShardedSubscriptionMode::Off)
///     .build()
///     .unwrap();
/// assert_eq!(config.sharded_subscription_mode(), ShardedSubscriptionMode::Off);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ShardedSubscriptionMode {
    /// Sharded where the cluster has sharded pub/sub, plain otherwise: the client asks the
    /// cluster once (`PUBSUB SHARDNUMSUB`, which Redis before 7.0 does not know), on first
    /// need, and keeps the answer.
    #[default]
    Auto,
    /// Always sharded: for a cluster whose Java services are set to `ON`. On a cluster
    /// without sharded pub/sub every release then fails (`SPUBLISH` is unknown there).
    On,
    /// Always plain: for a cluster whose Java services are set to `OFF`, or older ones.
    Off,
}

/// Replica confirmation of lock writes: `WAIT replicas timeout` after each lock, unlock and
/// renewal script (Redisson's `checkLockSyncedSlaves` and `slavesSyncTimeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaSync {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

/// `WAIT replicas timeout` on `c` after a write, when the client syncs replicas: how many
/// replicas confirmed, `None` when not asked (or nothing was written).
pub(crate) fn wait_replicas(
    sync: Option<ReplicaSync>,
    c: &mut dyn redis::ConnectionLike,
    wrote: bool,
) -> redis::RedisResult<Option<u32>> {
    match sync {
        Some(sync) if wrote => redis::cmd("WAIT")
            .arg(sync.replicas)
            .arg(millis(sync.timeout))
            .query(c)
            .map(Some),
        _ => Ok(None),
    }
}

/// Which servers a client talks to. A builder holds them as given; [`ConfigBuilder::build`]
/// checks them and gives the data nodes TLS and the credentials and database set on it.
#[derive(Debug, Clone)]
pub(crate) enum Topology {
    /// One server (a standalone master).
    Single(redis::ConnectionInfo),
    /// The master that the sentinels name `master`; `node` carries its credentials and db.
    Sentinel {
        sentinels: Vec<redis::ConnectionInfo>,
        master: String,
        node: redis::RedisConnectionInfo,
    },
    /// A Redis Cluster, discovered from any of `seeds`.
    Cluster { seeds: Vec<redis::ConnectionInfo> },
}

impl Config {
    /// How many times a call is retried when it surely did not run: no connection could be
    /// made, or the server refused it for a moment (`READONLY` after a failover, `LOADING`,
    /// `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.retry_attempts(), 3);
    /// ```
    pub fn retry_attempts(&self) -> u32 {
        self.retry_attempts
    }

    /// The pause before each retry.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.retry_delay().as_millis(), 500);
    /// ```
    pub fn retry_delay(&self) -> std::time::Duration {
        self.retry_delay
    }

    /// The replica confirmation setting: how many replicas must confirm each lock write, and
    /// how long to wait for them. `None` (the default) when off.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .sync_replicas(1, Duration::from_secs(1))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.sync_replicas(), Some((1, Duration::from_secs(1))));
    /// ```
    pub fn sync_replicas(&self) -> Option<(u32, Duration)> {
        self.replica_sync.map(|s| (s.replicas, s.timeout))
    }

    /// The lease given to locks taken without an explicit lease; they are renewed every third of it.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.watchdog_timeout(), std::time::Duration::from_secs(30));
    /// ```
    pub fn watchdog_timeout(&self) -> Duration {
        self.watchdog_timeout
    }

    /// The maximum hold time of locks renewed by the watchdog, if any
    /// ([`ConfigBuilder::max_hold`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.max_hold(), None);
    /// ```
    pub fn max_hold(&self) -> Option<Duration> {
        self.max_hold
    }

    /// How long a wait blocks before it looks for a deadlock, or `None` when this client does
    /// not look ([`ConfigBuilder::deadlock_check_after`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.deadlock_check_after(), Some(Duration::from_secs(1)));
    /// ```
    pub fn deadlock_check_after(&self) -> Option<Duration> {
        self.deadlock_check_after
    }

    /// Whether this client records the order in which its threads take locks and warns of
    /// two opposite orders ([`ConfigBuilder::lock_order_checks`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert!(!config.lock_order_checks());
    /// ```
    pub fn lock_order_checks(&self) -> bool {
        self.lock_order_checks
    }

    /// The most events this client's history keeps on the server, or `None` when it records
    /// none ([`ConfigBuilder::history`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").history(true).build().unwrap();
    /// assert_eq!(config.history(), Some(10_000));
    /// ```
    pub fn history(&self) -> Option<usize> {
        self.history
    }

    /// The most command connections a client opens.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.pool_size(), 16);
    /// ```
    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    /// How many connections carry calls at once before calls share round trips (see
    /// [`ConfigBuilder::batch_lanes`]); at most [`pool_size`](Self::pool_size).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.batch_lanes(), 4);
    /// ```
    pub fn batch_lanes(&self) -> usize {
        self.batch_lanes
    }

    /// How often a pub/sub connection with waiters is sent a `PING`; one unanswered for as
    /// long is dropped and made anew ([`ConfigBuilder::pubsub_ping_interval`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.pubsub_ping_interval().as_secs(), 2);
    /// ```
    pub fn pubsub_ping_interval(&self) -> Duration {
        self.pubsub_ping_interval
    }

    /// How long the head of a fair lock's queue may stay silent before it is presumed dead
    /// and skipped (Redisson's `threadWaitTime`).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.fair_thread_wait().as_secs(), 300);
    /// ```
    pub fn fair_thread_wait(&self) -> Duration {
        self.fair_thread_wait
    }

    /// How waiters of the client's [spin locks](crate::Client::spin_lock) pace their retries.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.spin_backoff(), redlatch::Backoff::default());
    /// ```
    pub fn spin_backoff(&self) -> Backoff {
        self.spin_backoff
    }

    /// How object names are mapped before keys are made from them.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").name_prefix("app1:").build().unwrap();
    /// assert_eq!(config.name_mapper().map("orders"), "app1:orders");
    /// ```
    pub fn name_mapper(&self) -> &NameMapper {
        &self.name_mapper
    }

    /// Whether a cluster client uses sharded pub/sub
    /// ([`ConfigBuilder::sharded_subscription_mode`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::cluster(["redis://127.0.0.1:7000"]).build().unwrap();
    /// assert_eq!(
    ///     config.sharded_subscription_mode(),
    ///     redlatch::ShardedSubscriptionMode::Auto
    /// );
    /// ```
    pub fn sharded_subscription_mode(&self) -> ShardedSubscriptionMode {
        self.sharded_subscription_mode
    }
    /// How pub/sub connections are opened (and where their reconnects are counted).
    pub(crate) fn dial(&self, metrics: &Arc<Recorder>, reconnected: Reconnected) -> Dial {
        Dial {
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
            ping_interval: self.pubsub_ping_interval,
            tls: self.tls.clone(),
            metrics: Arc::clone(metrics),
            name: self.connection_name.clone(),
            reconnected: Some(reconnected),
        }
    }
}

/// Builds a [`Config`]; every setter documents its default.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let config = redlatch::Config::builder("redis://127.0.0.1/")
///     .response_timeout(Duration::from_millis(500))
///     .build()
///     .unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ConfigBuilder {
    /// The servers as given, or why their URLs do not parse.
    topology: std::result::Result<Topology, String>,
    username: Option<String>,
    password: Option<String>,
    database: Option<i64>,
    retry_attempts: u32,
    retry_delay: Duration,
    pool_size: usize,
    batch_lanes: usize,
    connect_timeout: Duration,
    response_timeout: Duration,
    pubsub_ping_interval: Duration,
    watchdog_timeout: Duration,
    max_hold: Option<Duration>,
    renew_batch_size: usize,
    fair_thread_wait: Duration,
    spin_backoff: Backoff,
    name_mapper: NameMapper,
    replica_sync: Option<ReplicaSync>,
    sharded_subscription_mode: ShardedSubscriptionMode,
    certificates: Certificates,
    client_name: String,
    metrics_lock_names: bool,
    check_on_connect: bool,
    deadlock_check_after: Option<Duration>,
    lock_order_checks: bool,
    history: Option<usize>,
}
