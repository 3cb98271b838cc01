//! Where commands go, whatever the deployment: one server, the master Sentinel names, or a
//! Redis Cluster.
//!
//! [`Backend::open`] is the one place that looks at the configured topology: it builds a
//! [`Deployment`] (a [`Server`] over a fixed or a Sentinel [`Endpoint`], or a cluster's
//! router) and everything else asks the backend: where a key's calls go, which slot a key is
//! in, which command publishes, and which pub/sub dispatcher serves the client's waiters.
//!
//! - `endpoint.rs`: where a pool's connections go, and how one opens.
//! - `pool.rs`: a pool of command connections to one endpoint (knows nothing of clusters).
//! - `checkout.rs`: a connection checked out of a pool, and what the batcher borrows through.
//! - `batch/`: calls from many threads sharing round trips on a pool's connections.
//! - `shared.rs`: a call's connection through the batcher, as the `redis` crate sees it.
//! - `sentinel.rs`: the endpoint that is the master Sentinel names, and the switch watcher.
//! - `cluster/`: hash slots, the slot map, and the router over one pool per node.
//! - `scan.rs`: every key matching a pattern, on every master.

mod batch;
mod checkout;
mod cluster;
mod endpoint;
mod merge;
mod pool;
mod scan;
mod sentinel;
mod shared;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::ConnectionLike;

use crate::config::{Config, Topology};
use crate::error::{retry_interrupted, Error, Result};
use crate::net::Dial;
use crate::pubsub::{Address, Dispatcher, Mode, PubSub, Subscriptions};

use cluster::Cluster;
pub(crate) use endpoint::{Endpoint, Fixed};
pub(crate) use pool::Pool;
use sentinel::Sentinel;

/// The command connections of a client and what goes with them; see the module docs.
pub(crate) struct Backend {
    deployment: Box<dyn Deployment>,
    /// Set by [`close`](Backend::close): every call fails with [`Error::Closed`].
    closed: AtomicBool,
    /// How many times a call is made again (the configured retry attempts).
    retries: u32,
}

/// A call erased to what every deployment can run: the reply goes wherever the closure keeps it.
type Call<'a> = &'a mut dyn FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<()>;

/// What a caller runs once its call's command is written, while the reply is still to come
/// (where the pool sees that moment: see `batch/mod.rs`). The backend knows nothing of what
/// it does.
pub(crate) type Written<'a> = Option<&'a dyn Fn()>;

/// How one call is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// A call that surely did not run is retried up to the configured attempts.
    Retried,
    /// Tried once (redirections are still followed).
    Once,
    /// Tried once, on a connection of its own, with connecting, waiting for a connection and
    /// each reply bounded by this where it is shorter than the pool's own setting: a
    /// [`RedLock`](crate::RedLock) member's node timeout.
    Bounded(Duration),
}

impl Policy {
    /// How many times a call that surely did not run is tried again, of the `configured`
    /// retry attempts.
    pub(crate) fn retries(self, configured: u32) -> u32 {
        match self {
            Policy::Retried => configured,
            _ => 0,
        }
    }

    /// The bound on the call's times, if any.
    pub(crate) fn bound(self) -> Option<Duration> {
        match self {
            Policy::Bounded(t) => Some(t),
            _ => None,
        }
    }
}

/// One kind of deployment, behind [`Backend`]. Each method is documented on the backend's
/// method of the same name.
trait Deployment: Send + Sync {
    /// Runs `f` on a connection to the server of `key`, as `policy` says, with `written`
    /// run as the batcher writes a command of it.
    fn run(&self, key: &str, policy: Policy, written: Written<'_>, f: Call<'_>) -> Result<()>;
    fn slot(&self, key: &str) -> u16;
    fn delete_later(&self, key: String);
    fn clustered(&self) -> bool;
    fn for_each_master(&self, f: &mut dyn FnMut(&Pool) -> Result<()>) -> Result<()>;
    /// Closes the idle connections of every pool, and each one checked in later.
    fn close(&self);
    fn pubsub_mode(&self) -> Mode;
    /// How this deployment's waiters hear of releases (see [`Backend::dispatcher`]).
    fn subscriptions(&self, dial: Dial) -> Result<Arc<dyn Subscriptions>>;
}

impl Backend {
    /// The backend of `config`'s topology. Nothing is sent yet (connections open on first
    /// use); for Sentinel, the thread that watches for master switches starts.
    pub(crate) fn open(config: &Config) -> Result<Backend> {
        let deployment: Box<dyn Deployment> = match &config.topology {
            Topology::Single(info) => Box::new(Server::new(Arc::new(Fixed(info.clone())), config)),
            Topology::Sentinel {
                sentinels,
                master,
                node,
            } => {
                let sentinel = Arc::new(Sentinel::new(
                    sentinels.clone(),
                    master.clone(),
                    node.clone(),
                    config.tls.clone(),
                ));
                sentinel.watch(config.connect_timeout)?;
                Box::new(Server::new(sentinel, config))
            }
            Topology::Cluster { seeds } => Box::new(Cluster::new(config.clone(), seeds.clone())),
        };
        Ok(Backend {
            deployment,
            closed: AtomicBool::new(false),
            retries: config.retry_attempts,
        })
    }

    /// Runs `f` on a connection to the server of `key` (the master of its slot on a
    /// cluster, following redirections), retrying a call that surely did not run: no
    /// connection could be made, or the server refused it for now (see [`Pool::run`]).
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.run_with(key, Policy::Retried, f)
    }

    /// As [`run`](Self::run), as `policy` says: [`Policy::Once`] for the watchdog, whose
    /// renewals are due again next period and must not hold up the others (redirections are
    /// still followed); [`Policy::Bounded`] for a RedLock member.
    pub(crate) fn run_with<T>(
        &self,
        key: &str,
        policy: Policy,
        f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.call(key, policy, None, f)
    }

    /// As [`run_with`](Self::run_with), for a call that may run twice (a read, a renewal, a
    /// release with its latch, `HDEL`...): one whose reply's read was interrupted (a process
    /// stopped and resumed gets `EINTR`) is sent again, up to the configured retry attempts.
    pub(crate) fn run_repeatable<T>(
        &self,
        key: &str,
        policy: Policy,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        retry_interrupted(self.retries, None, || self.call(key, policy, None, &mut f))
    }

    /// As [`run_repeatable`](Self::run_repeatable), for a call made repeatable by `receipt`, a
    /// key of its own that its script writes its reply to (given to `f` with its time to live
    /// in ms, [`keys::RECEIPT_TTL`](crate::keys::RECEIPT_TTL)): sent again, it returns the first
    /// call's reply and changes nothing more. The receipt is deleted later once a reply came.
    pub(crate) fn run_receipted<T>(
        &self,
        key: &str,
        policy: Policy,
        receipt: String,
        mut f: impl FnMut(&mut dyn ConnectionLike, &str, u64) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let ttl = crate::time::millis(crate::keys::RECEIPT_TTL);
        let reply = self.run_repeatable(key, policy, |c| f(c, &receipt, ttl))?;
        self.delete_later(receipt);
        Ok(reply)
    }

    /// The retry attempts configured: how many times a call interrupted this way is made again
    /// by a caller without a deadline.
    pub(crate) fn retries(&self) -> u32 {
        self.retries
    }

    /// As [`run_with`](Self::run_with), running `written` once: as soon as a command of the
    /// call is written, while its reply is still to come, where the pool sees that moment
    /// (a call its thread writes itself), or else as the call returns.
    pub(crate) fn run_written<T>(
        &self,
        key: &str,
        policy: Policy,
        written: &dyn Fn(),
        f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let done = std::cell::Cell::new(false);
        let once = || {
            if !done.replace(true) {
                written();
            }
        };
        let outcome = self.call(key, policy, Some(&once), f);
        once();
        outcome
    }

    fn call<T>(
        &self,
        key: &str,
        policy: Policy,
        written: Written<'_>,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        let mut reply = None;
        self.deployment
            .run(key, policy, written, &mut |c: &mut dyn ConnectionLike| {
                reply = Some(f(c)?);
                Ok(())
            })?;
        Ok(reply.expect("a call that succeeded kept its reply"))
    }

    /// Deletes `key` with a later call written to its server (16 at a time), reading nothing
    /// back: a clean-up (an unlock latch) that costs no caller a round trip. Without batching,
    /// or when the cluster's slot map does not know `key`'s node, it is not sent: `key` must be
    /// one that expires by itself, and this only deletes it sooner.
    pub(crate) fn delete_later(&self, key: String) {
        if !self.is_closed() {
            self.deployment.delete_later(key);
        }
    }

    /// The hash slot of `key` on a cluster (keys of one script call must share it); 0 on
    /// one server, where any keys may go together.
    pub(crate) fn slot(&self, key: &str) -> u16 {
        self.deployment.slot(key)
    }

    /// Whether keys live in hash slots (a Redis Cluster): keys of different slots cannot
    /// be used in one call.
    pub(crate) fn clustered(&self) -> bool {
        self.deployment.clustered()
    }

    /// Runs `f` on the pool of every master: the one server, or each master of a cluster
    /// (in the slot map read afresh), one after the other; stops at the first error.
    pub(crate) fn for_each_master(&self, mut f: impl FnMut(&Pool) -> Result<()>) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        self.deployment.for_each_master(&mut f)
    }

    /// Drops the command connections (idle ones now, the others as they come back): a pub/sub
    /// connection to the same server broke, so they may be broken too, and the next call
    /// (a renewal that checks what the server still has) must not fail on one of them.
    pub(crate) fn drop_connections(&self) {
        let _ = self.for_each_master(|pool| {
            pool.flush();
            Ok(())
        });
    }

    /// Refuses every call from now on ([`Error::Closed`]) and closes the connections as
    /// they come back idle. Idempotent.
    pub(crate) fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.deployment.close();
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Which pub/sub commands this deployment's messages travel by: on a cluster, sharded
    /// (`SPUBLISH`) or plain as configured or detected (see `cluster.rs`), plain (`PUBLISH`)
    /// otherwise. Scripts publish with [`Mode::publish`], and waiters subscribe to match.
    pub(crate) fn pubsub_mode(&self) -> Mode {
        self.deployment.pubsub_mode()
    }

    /// Starts the pub/sub dispatcher for this backend's waiters, with connections opened by
    /// `dial`: one plain connection that follows a Sentinel master switch, or a cluster's
    /// node connections (in [`pubsub_mode`](Self::pubsub_mode)), one per node with waiters,
    /// placed by the slot map.
    pub(crate) fn dispatcher(&self, dial: Dial) -> Result<Dispatcher> {
        let metrics = Arc::clone(&dial.metrics);
        Ok(Dispatcher::new(
            self.deployment.subscriptions(dial)?,
            metrics,
        ))
    }
}

/// One server: at a fixed address, or the master Sentinel names. One pool; plain pub/sub.
struct Server {
    pool: Pool,
}

impl Server {
    fn new(endpoint: Arc<dyn Endpoint>, config: &Config) -> Server {
        Server {
            pool: Pool::new(endpoint, config, false),
        }
    }
}

impl Deployment for Server {
    fn run(&self, key: &str, policy: Policy, written: Written<'_>, f: Call<'_>) -> Result<()> {
        self.pool.run_written(key, policy, written, f)
    }

    fn slot(&self, _: &str) -> u16 {
        0
    }

    fn delete_later(&self, key: String) {
        self.pool.delete_later(key);
    }

    fn clustered(&self) -> bool {
        false
    }

    fn for_each_master(&self, f: &mut dyn FnMut(&Pool) -> Result<()>) -> Result<()> {
        f(&self.pool)
    }

    fn close(&self) {
        self.pool.close();
        self.pool.endpoint().close();
    }

    fn pubsub_mode(&self) -> Mode {
        Mode::Plain
    }

    fn subscriptions(&self, dial: Dial) -> Result<Arc<dyn Subscriptions>> {
        let endpoint = self.pool.endpoint();
        let address: Arc<dyn Address> = Arc::clone(endpoint) as Arc<dyn Address>;
        let pubsub = Arc::new(PubSub::start(address, dial, Mode::Plain)?);
        // After a Sentinel master switch, the pub/sub connection moves too.
        let weak = Arc::downgrade(&pubsub);
        endpoint.on_switch(Box::new(move || {
            if let Some(pubsub) = weak.upgrade() {
                pubsub.reconnect();
            }
        }));
        Ok(pubsub)
    }
}
