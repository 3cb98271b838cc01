//! The builder's constructors (one per topology) and its setters, each with its default.

use std::time::Duration;

use super::address::ServerAddress;
use super::{Config, ConfigBuilder, ReplicaSync, ShardedSubscriptionMode, Topology};
use crate::backoff::Backoff;
use crate::names::NameMapper;
use crate::net::Certificates;

/// The most events a client's history keeps, unless set.
const HISTORY_MAX_LEN: usize = 10_000;
/// How long a wait blocks before it looks for a deadlock, unless set.
const DEADLOCK_CHECK_AFTER: Duration = Duration::from_secs(1);
/// How often a pub/sub connection with waiters is sent a `PING`, unless set.
const PUBSUB_PING_INTERVAL: Duration = Duration::from_secs(2);

impl Config {
    /// Starts a builder for a single server at `url`
    /// (`redis://[user:pass@]host:port/[db]`, or `rediss://` for TLS; see
    /// [`tls_root_certificates`](ConfigBuilder::tls_root_certificates)). A `String`, a
    /// `redis::ConnectionInfo` or a service's own `redis::Client` do as well (see
    /// [`ServerAddress`]).
    ///
    /// An invalid URL is reported by [`ConfigBuilder::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").build().unwrap();
    /// assert_eq!(config.watchdog_timeout().as_secs(), 30);
    /// ```
    pub fn builder(url: impl ServerAddress) -> ConfigBuilder {
        ConfigBuilder::new(
            url.connection_info()
                .map(Topology::Single)
                .map_err(|e| url_error(&e)),
        )
    }

    /// Starts a builder for the master that Redis Sentinel monitors as `master_name`,
    /// found through any of the sentinels at `sentinel_urls` (their URLs carry the
    /// sentinels' own credentials, if any). The master's credentials and database are set
    /// with [`username`](ConfigBuilder::username), [`password`](ConfigBuilder::password) and
    /// [`database`](ConfigBuilder::database).
    ///
    /// Every new connection asks the sentinels for the master and checks with `ROLE` that it
    /// is one, so the client follows a failover: connections to the old master break (the
    /// sentinels close them) and the next ones go to the new master.
    ///
    /// With `rediss://` sentinel URLs, the master is reached over TLS too, with the same
    /// certificates.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::sentinel(
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    ///     "mymaster",
    /// )
    /// .password("secret")
    /// .build()
    /// .unwrap();
    /// ```
    pub fn sentinel<U: ServerAddress>(
        sentinel_urls: impl IntoIterator<Item = U>,
        master_name: &str,
    ) -> ConfigBuilder {
        let master = master_name.to_owned();
        ConfigBuilder::new(parse(sentinel_urls).map(|sentinels| Topology::Sentinel {
            sentinels,
            master,
            node: redis::RedisConnectionInfo::default(),
        }))
    }

    /// Starts a builder for a Redis Cluster reached through any of `urls` (a few of its
    /// nodes; the others are discovered). Credentials come from the URLs or from
    /// [`username`](ConfigBuilder::username) and [`password`](ConfigBuilder::password).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn cluster<U: ServerAddress>(urls: impl IntoIterator<Item = U>) -> ConfigBuilder {
        ConfigBuilder::new(parse(urls).map(|seeds| Topology::Cluster { seeds }))
    }
}

impl ConfigBuilder {
    fn new(topology: std::result::Result<Topology, String>) -> ConfigBuilder {
        ConfigBuilder {
            topology,
            username: None,
            password: None,
            database: None,
            retry_attempts: 3,
            retry_delay: Duration::from_millis(500),
            pool_size: 16,
            batch_lanes: 4,
            connect_timeout: Duration::from_secs(3),
            response_timeout: Duration::from_secs(3),
            pubsub_ping_interval: PUBSUB_PING_INTERVAL,
            watchdog_timeout: Duration::from_secs(30),
            max_hold: None,
            renew_batch_size: 100,
            fair_thread_wait: Duration::from_secs(300),
            spin_backoff: Backoff::default(),
            name_mapper: NameMapper::identity(),
            replica_sync: None,
            sharded_subscription_mode: ShardedSubscriptionMode::Auto,
            certificates: Certificates::default(),
            client_name: "redlatch".to_owned(),
            metrics_lock_names: false,
            check_on_connect: false,
            deadlock_check_after: Some(DEADLOCK_CHECK_AFTER),
            lock_order_checks: false,
            history: None,
        }
    }

    /// Trusts the CA certificates in `pem` (one or more, PEM-encoded) for `rediss://`
    /// servers, instead of the system's trusted roots. For servers with certificates of a
    /// private CA. Server names are checked: connect by a name (or IP address) that the
    /// server's certificate lists.
    ///
    /// Defaults to the system's roots. Checking can not be turned off: a `#insecure` URL
    /// is refused.
    ///
    /// # Errors
    ///
    /// [`build`](Self::build) gives [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a PEM without a certificate, or when the addresses are not `rediss://`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let ca = std::fs::read("/etc/redis/ca.crt").unwrap();
    /// let config = redlatch::Config::builder("rediss://redis.internal:6380/")
    ///     .tls_root_certificates(ca)
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.certificates.roots = Some(pem.into());
        self
    }

    /// Presents a client certificate (`chain_pem`, leaf first) with its private key
    /// (`key_pem`, PKCS#8, PKCS#1 or SEC1) to `rediss://` servers that check clients
    /// (`tls-auth-clients yes`).
    ///
    /// Defaults to none.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let config = redlatch::Config::builder("rediss://redis.internal:6380/")
    ///     .tls_root_certificates(std::fs::read("ca.crt").unwrap())
    ///     .tls_client_certificate(
    ///         std::fs::read("client.crt").unwrap(),
    ///         std::fs::read("client.key").unwrap(),
    ///     )
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn tls_client_certificate(
        mut self,
        chain_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.certificates.client = Some((chain_pem.into(), key_pem.into()));
        self
    }

    /// The username for the data nodes (ACL), overriding the one in the URLs. For Sentinel,
    /// the master's: the sentinels' own come from their URLs.
    ///
    /// Defaults to the URL's, or none.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").username("locks").password("pw");
    /// ```
    pub fn username(mut self, username: &str) -> Self {
        self.username = Some(username.to_owned());
        self
    }

    /// The password for the data nodes, overriding the one in the URLs. For Sentinel, the
    /// master's: the sentinels' own come from their URLs.
    ///
    /// Defaults to the URL's, or none.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").password("secret");
    /// ```
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// The database number, overriding the URL's. A cluster has only database 0.
    ///
    /// Defaults to the URL's, or 0.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").database(2);
    /// ```
    pub fn database(mut self, db: i64) -> Self {
        self.database = Some(db);
        self
    }

    /// How many times a call is retried when it surely did not run: no connection could be
    /// made, or the server refused it for now (`READONLY` after a failover, `LOADING`,
    /// `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`). A call whose reply was lost is not retried
    /// (it may have run), except an unlock, which is idempotent.
    /// [`RedLock`](crate::RedLock) calls are never retried (its node timeout rules).
    ///
    /// Defaults to 3. 0 turns retries off.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").retry_attempts(5);
    /// ```
    pub fn retry_attempts(mut self, attempts: u32) -> Self {
        self.retry_attempts = attempts;
        self
    }

    /// The pause before each retry.
    ///
    /// Defaults to 500 ms. Must be non-zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").retry_delay(Duration::from_millis(200));
    /// ```
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// The most command connections the client opens; they are opened on demand.
    /// Callers wait for a free one at most `connect_timeout`.
    ///
    /// Defaults to 16. Must be at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").pool_size(4).build().unwrap();
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// How many command connections (of each server) carry calls at once before calls start
    /// to share round trips. A call that finds that many busy joins the next write: the
    /// thread holding a connection when its round trip ends writes every call queued
    /// meanwhile at once, and hands the replies out. Under load from many threads, each round
    /// trip then carries many commands, and the server, whose CPU goes mostly to reading and
    /// writing sockets, serves several times more calls; a thread alone sends its own command
    /// at once, as without batching. 0 turns batching off: each call takes a connection of
    /// its own, waiting for one when all `pool_size` are busy.
    ///
    /// Calls that need a connection to themselves take one whatever this says: with
    /// [`sync_replicas`](Self::sync_replicas) (no batching at all: `WAIT` must follow the
    /// write on its connection), a cluster's `ASKING`, and each node of a
    /// [`RedLock`](crate::RedLock).
    ///
    /// Defaults to 4 (at most `pool_size`).
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").batch_lanes(2).build().unwrap();
    /// assert_eq!(config.batch_lanes(), 2);
    /// ```
    pub fn batch_lanes(mut self, lanes: usize) -> Self {
        self.batch_lanes = lanes;
        self
    }

    /// How long to wait for a TCP connection (and for a free pooled connection).
    ///
    /// Defaults to 3 seconds. Must be non-zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").connect_timeout(Duration::from_secs(1));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long to wait for the reply to one command before the call fails with
    /// [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// Defaults to 3 seconds. Must be non-zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").response_timeout(Duration::from_secs(1));
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How often the pub/sub connection (on a cluster, each node's) is checked while a thread
    /// waits on it: it is sent a `PING` every `interval` (as Redisson's
    /// `pingConnectionInterval`), and one whose `PING` is not answered within the next
    /// `interval` is dropped and made anew, after which every thread waiting on it re-checks
    /// what it waits for. So a connection that falls silent without an error (a NAT or
    /// firewall that forgot it, a half-open socket, a proxy that stalls) is found within two
    /// intervals of its last answer; its waiters would otherwise hear no release until the
    /// bound of their wait (a lock's remaining lease) ran out.
    ///
    /// Nothing is sent while no thread waits on the connection. Its socket also has TCP
    /// keepalive, with a probe after an interval of silence (at least a second).
    ///
    /// Defaults to 2 seconds: a silent connection is dropped within 4 seconds. Must be at
    /// least 100 ms and at most a year.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .pubsub_ping_interval(Duration::from_secs(1))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.pubsub_ping_interval(), Duration::from_secs(1));
    /// ```
    pub fn pubsub_ping_interval(mut self, interval: Duration) -> Self {
        self.pubsub_ping_interval = interval;
        self
    }

    /// The lease of locks taken without an explicit lease (Redisson's `lockWatchdogTimeout`);
    /// the watchdog renews them every third of it while their guard lives.
    ///
    /// Defaults to 30 seconds. Must be at least 3 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").watchdog_timeout(Duration::from_secs(10));
    /// ```
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// Caps how long the watchdog keeps renewing a hold: once renewing it would set a lease
    /// ending more than `max_hold` after the acquire, the watchdog stops, the lease runs out
    /// and the guard turns lost ([`LostReason::MaxHoldReached`](crate::LostReason::MaxHoldReached)
    /// to its [`on_lost`](crate::LockGuard::on_lost) callbacks). So a thread that is stuck,
    /// or forgot a guard, cannot keep a lock forever. [`Lock::with_max_hold`](crate::Lock::with_max_hold)
    /// overrides it for one lock; holds with an explicit lease
    /// ([`Lock::with_lease`](crate::Lock::with_lease)) end with their lease anyway and are not
    /// affected.
    ///
    /// The hold ends at the cap at the latest, and at most a renewal period (a third of the
    /// [watchdog timeout](Self::watchdog_timeout)) before it; a cap shorter than the watchdog
    /// timeout ends the hold when the lease set by the acquire runs out. Nested holds keep it:
    /// a re-entry or the release of an inner hold sets the lease in Redis no further than the
    /// cap. See the crate docs, "A cap on holding".
    ///
    /// Defaults to none (renewed as long as the guard lives). Must be non-zero and at most a
    /// year.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .max_hold(Duration::from_secs(600))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.max_hold(), Some(Duration::from_secs(600)));
    /// ```
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// How many locks one renewal script call renews at most.
    ///
    /// Defaults to 100 (as Redisson). Must be between 1 and 10,000.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = redlatch::Config::builder("redis://127.0.0.1/").renew_batch_size(50);
    /// ```
    pub fn renew_batch_size(mut self, size: usize) -> Self {
        self.renew_batch_size = size;
        self
    }

    /// For [fair locks](crate::Client::fair_lock): how long the waiter at the head of the
    /// queue may stay silent before the others skip it as dead (a crashed process, a killed
    /// thread). Live waiters check in on their own, so this only bounds how long a dead waiter
    /// can hold up the queue: after the lock is freed, the next live waiter gets it within
    /// about two thread waits. Same meaning as Redisson's `threadWaitTime`.
    ///
    /// Every waiting thread checks in once per half thread wait (the first two in line also
    /// when the holder's lease may run out), so a thread wait of a few seconds costs one
    /// script call per waiter every second or so.
    ///
    /// Defaults to 5 minutes (Redisson's default).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .fair_thread_wait(Duration::from_secs(10))
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn fair_thread_wait(mut self, wait: Duration) -> Self {
        self.fair_thread_wait = wait;
        self
    }

    /// How waiters of [spin locks](crate::Client::spin_lock) pace their retries (a lock may
    /// have its own: [`Client::spin_lock_with_backoff`](crate::Client::spin_lock_with_backoff)).
    ///
    /// Defaults to Redisson's: from 1 ms, doubling, up to 128 ms ([`Backoff::default`]).
    ///
    /// # Errors
    ///
    /// [`build`](Self::build) gives [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for bounds that [`Backoff`] does not allow (an initial delay under 1 ms, a maximum
    /// below it or over a year, a multiplier of 0).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .spin_backoff(redlatch::Backoff::new(Duration::from_millis(5), Duration::from_millis(50)))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.spin_backoff().max_delay(), Duration::from_millis(50));
    /// ```
    pub fn spin_backoff(mut self, backoff: Backoff) -> Self {
        self.spin_backoff = backoff;
        self
    }

    /// Keeps every object's keys under `prefix`: the lock `orders` is the key
    /// `app1:orders`, its channel `redisson_lock__channel:{app1:orders}`, and so on for
    /// every helper key. Shorthand for [`name_mapper`](Self::name_mapper) with
    /// [`NameMapper::prefix`], Redisson's `PrefixNameMapper`. An empty prefix maps nothing.
    ///
    /// Defaults to none (names are used as given).
    ///
    /// # Errors
    ///
    /// [`build`](Self::build) gives [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a prefix with a control character.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").name_prefix("app1:").build().unwrap();
    /// let client = redlatch::Client::new(config).unwrap();
    /// assert_eq!(client.lock("orders").name(), "orders"); // the key is `app1:orders`
    /// ```
    pub fn name_prefix(self, prefix: &str) -> Self {
        self.name_mapper(NameMapper::prefix(prefix))
    }

    /// Maps every object name with `mapper` before any key is made from it (Redisson's
    /// `Config.setNameMapper`): see [`NameMapper`]. Replaces a
    /// [`name_prefix`](Self::name_prefix) set before.
    ///
    /// Defaults to [`NameMapper::identity`].
    ///
    /// # Errors
    ///
    /// [`build`](Self::build) gives [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a custom mapper that maps a sample name to `""` or does not unmap it back.
    ///
    /// # Examples
    ///
    /// ```
    /// let mapper = redlatch::NameMapper::custom(|n| format!("{n}@eu"), |n| {
    ///     n.strip_suffix("@eu").unwrap_or(n).to_owned()
    /// });
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").name_mapper(mapper).build().unwrap();
    /// assert_eq!(config.name_mapper().map("orders"), "orders@eu");
    /// ```
    pub fn name_mapper(mut self, mapper: NameMapper) -> Self {
        self.name_mapper = mapper;
        self
    }

    /// Makes every lock write wait for `replicas` replicas of the master to confirm it, for
    /// at most `timeout` (Redisson's `checkLockSyncedSlaves`, whose timeout defaults to 1 s).
    ///
    /// After each acquire, unlock and renewal script of a lock (every kind: plain, fair,
    /// fenced, read-write) the client sends `WAIT replicas timeout` on the same connection:
    /// - an acquire that fewer replicas confirmed is undone (one hold released) and reported
    ///   as [`Error::NotReplicated`](crate::Error::NotReplicated);
    /// - a renewal that fewer replicas confirmed counts as failed: if none is confirmed for
    ///   a whole lease, the guard reports the lock as lost;
    /// - an unconfirmed unlock is logged (`warn`): the lock is free on the master, but a
    ///   failover before replication could bring it back until its lease runs out.
    ///
    /// This narrows the window in which a failover loses a lock, at the cost of one
    /// replication round trip per write; it cannot close it (replication stays
    /// asynchronous, and `WAIT` does not make a write durable). Semaphores, latches and
    /// [`FencedResource`](crate::FencedResource) writes are not synced. See the guide's
    /// [safety chapter](crate::_guide::safety).
    ///
    /// Off by default. `replicas` must be at least 1; `timeout` must be non-zero and
    /// shorter than the response timeout (the reply to `WAIT` must arrive in time).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .sync_replicas(1, Duration::from_secs(1))
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn sync_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_sync = Some(ReplicaSync { replicas, timeout });
        self
    }

    /// Sets whether a client on a Redis Cluster waits with sharded pub/sub (Redisson's
    /// `shardedSubscriptionMode`): see [`ShardedSubscriptionMode`]. Set it to what the Java
    /// services sharing the locks use.
    ///
    /// Defaults to [`ShardedSubscriptionMode::Auto`]: sharded where the cluster has it
    /// (Redis 7.0 and later, Valkey), plain otherwise. Only a cluster's clients read it: a
    /// single server and Sentinel always use plain pub/sub.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redlatch::{Client, Config, ShardedSubscriptionMode};
    /// # fn main() -> redlatch::Result<()> {
    /// let config = Config::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .sharded_subscription_mode(ShardedSubscriptionMode::Off)
    ///     .build()?;
    /// let client = Client::new(config)?;
    /// # Ok(()) }
    /// ```
    pub fn sharded_subscription_mode(mut self, mode: ShardedSubscriptionMode) -> Self {
        self.sharded_subscription_mode = mode;
        self
    }

    /// The application prefix of this client's connection names: each command and pub/sub
    /// connection is named `<prefix>:<client id>` (`CLIENT SETNAME`), so that `CLIENT LIST`,
    /// [`Client::connections`](crate::Client::connections) and `redlatch inspect` tell which
    /// host and process holds a lock (an owner id is `<client id>:<thread>`). Connections
    /// also announce the library (`CLIENT SETINFO`, Redis 7.2+). Defaults to `redlatch`.
    ///
    /// [`build`](Self::build) refuses a prefix that is empty, longer than 128 characters, or
    /// has spaces or characters outside printable ASCII.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").client_name("billing").build();
    /// assert!(config.is_ok());
    /// let bad = redlatch::Config::builder("redis://127.0.0.1/").client_name("a b").build();
    /// assert!(bad.unwrap_err().is_invalid_argument());
    /// ```
    pub fn client_name(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.client_name);
        self
    }

    /// Whether what the `metrics` feature reports is labelled by lock name (`name`) as well as
    /// by lock kind (`kind`). Off by default: names are often unbounded (`order:<id>`), and
    /// each label value is a time series to the collector. Without the `metrics` feature it
    /// changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").metrics_lock_names(true).build();
    /// assert!(config.is_ok());
    /// ```
    pub fn metrics_lock_names(mut self, on: bool) -> Self {
        self.metrics_lock_names = on;
        self
    }

    /// Whether [`Client::new`](crate::Client::new) checks the deployment
    /// ([`Client::check`](crate::Client::check)) and logs each finding as a warning (`log`
    /// target `redlatch::check`). Off by default: the check reads every master's
    /// configuration, a few round trips. A check that fails is logged too; the client is
    /// made either way.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").check_on_connect(true).build();
    /// assert!(config.is_ok());
    /// ```
    pub fn check_on_connect(mut self, on: bool) -> Self {
        self.check_on_connect = on;
        self
    }

    /// How long a thread that holds a lock waits for another before it looks for a deadlock: a
    /// cycle of waits through its own, across every client of the deployment (a thread that
    /// holds none is in nobody's way, and its waits send nothing more). Past this, the wait is
    /// recorded on the server (renewed by the watchdog, removed as the wait ends), with who
    /// its owner is (client name, process, host, thread), and the wait-for graph is walked,
    /// again after twice as long each time (at most every 30 seconds); the youngest wait of a
    /// cycle found twice ends with [`Error::Deadlock`](crate::Error::Deadlock), and the cycle
    /// is kept on the server ([`Client::deadlocks`](crate::Client::deadlocks)). See the
    /// guide's deadlock chapter.
    ///
    /// Defaults to 1 second (PostgreSQL's `deadlock_timeout`). Must be more than zero and at
    /// most a year; [`deadlock_detection(false)`](Self::deadlock_detection) turns it off.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .deadlock_check_after(Duration::from_millis(200))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.deadlock_check_after(), Some(Duration::from_millis(200)));
    /// ```
    pub fn deadlock_check_after(mut self, after: Duration) -> Self {
        self.deadlock_check_after = Some(after);
        self
    }

    /// Whether this client's waits look for deadlocks ([`deadlock_check_after`](Self::deadlock_check_after)).
    /// Off, its waits are never recorded, never walk the graph and never end with
    /// [`Error::Deadlock`](crate::Error::Deadlock); another client's walk does not see them
    /// (a cycle through one of them is not found).
    ///
    /// Defaults to on.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .deadlock_detection(false)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.deadlock_check_after(), None);
    /// ```
    pub fn deadlock_detection(mut self, on: bool) -> Self {
        self.deadlock_check_after = match (on, self.deadlock_check_after) {
            (false, _) => None,
            (true, Some(after)) => Some(after),
            (true, None) => Some(DEADLOCK_CHECK_AFTER),
        };
        self
    }

    /// Whether this client records the order in which its threads take locks, and warns when
    /// two locks were taken in opposite orders anywhere in the deployment: before the
    /// deadlock that those two orders can make happens (as the kernel's lockdep and Guava's
    /// `CycleDetectingLockFactory` do inside one process).
    ///
    /// On, a thread that takes a lock while it holds others (a call that may wait: not a
    /// `try_lock`) records each pair "held, then taken" on the server once per process (one
    /// script call per new pair; a day's time to live, renewed every few hours while the pair
    /// recurs); when the opposite order of a pair is on record from any client, a warning
    /// names both orders, the owners, processes and the code that took them (logged at warn,
    /// counted in [`Metrics::lock_order_inversions`](crate::metrics::Metrics::lock_order_inversions),
    /// and listed by [`Client::lock_order_warnings`](crate::Client::lock_order_warnings) and
    /// `redlatch waits`). Two reads never block each other, so reads taken in both orders
    /// are no warning. See the guide's deadlock chapter.
    ///
    /// Defaults to off.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .lock_order_checks(true)
    ///     .build()
    ///     .unwrap();
    /// assert!(config.lock_order_checks());
    /// ```
    pub fn lock_order_checks(mut self, on: bool) -> Self {
        self.lock_order_checks = on;
        self
    }

    /// Whether this client records the history of its locks on the server: every acquire
    /// (and the start of every wait), release, loss, wait given up (timed out, interrupted or
    /// failed) and deadlock of its threads, with the owner, thread, process, host and the
    /// server's time, in a capped stream of its own (`redlatch_history:{<client uuid>}`, a
    /// day's TTL past its last write), written once a second by the watchdog thread in one
    /// pipelined call, and at the client's close, its last drop and (Unix) the process's
    /// exit; an abrupt end loses at most the last second. A loss is recorded when the
    /// watchdog finds it. What
    /// [`Client::history`](crate::Client::history) and `redlatch history` read, and what
    /// `redlatch top` computes rates and blame from.
    ///
    /// Defaults to off: nothing is recorded or sent.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").history(true).build().unwrap();
    /// assert_eq!(config.history(), Some(10_000));
    /// ```
    pub fn history(mut self, on: bool) -> Self {
        self.history = match (on, self.history) {
            (false, _) => None,
            (true, Some(max)) => Some(max),
            (true, None) => Some(HISTORY_MAX_LEN),
        };
        self
    }

    /// The most events this client's history stream keeps (about: Redis trims whole nodes of
    /// the stream), and turns the history on.
    ///
    /// Defaults to 10,000. Must be at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .history_max_len(500)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(config.history(), Some(500));
    /// ```
    pub fn history_max_len(mut self, max: usize) -> Self {
        self.history = Some(max);
        self
    }
}

/// Parses `urls`, or says why one does not parse.
fn parse<U: ServerAddress>(
    urls: impl IntoIterator<Item = U>,
) -> std::result::Result<Vec<redis::ConnectionInfo>, String> {
    urls.into_iter()
        .map(|u| u.connection_info().map_err(|e| url_error(&e)))
        .collect()
}

/// Why a URL does not parse; `redis` refuses `rediss://` when built without TLS.
fn url_error(e: &redis::RedisError) -> String {
    let text = e.to_string();
    if cfg!(not(feature = "tls")) && text.contains("TLS") {
        return format!("{text} (rediss:// needs redlatch's `tls` feature, on by default)");
    }
    text
}
