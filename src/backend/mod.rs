//! Where commands go, whatever the deployment: one server, the master Sentinel names, or a
//! Redis Cluster.
//!
//! [`Backend::open`] is the one place that looks at the configured topology: it builds a
//! [`Deployment`] (a [`Server`] over a fixed or a Sentinel [`Endpoint`], or a cluster's
//! router) and everything else asks the backend: where a key's calls go, which slot a key is
//! in, which command publishes, and which pub/sub dispatcher serves the client's waiters.
//!
//! - `pool.rs`: a pool of command connections to one endpoint (knows nothing of clusters).
//! - `sentinel.rs`: the endpoint that is the master Sentinel names, and the switch watcher.
//! - `cluster.rs`: hash slots, the slot map, and the router over one pool per node.

mod cluster;
mod pool;
mod sentinel;

use std::sync::Arc;

use redis::ConnectionInfo;

use crate::config::{Config, Topology};
use crate::error::Result;
use crate::net::Dial;
use crate::pubsub::{Dispatcher, Mode, PubSub};

use cluster::Cluster;
use pool::capped;
pub(crate) use pool::{with_call_timeout, Endpoint, Fixed, Pool};
use sentinel::Sentinel;

/// The command connections of a client and what goes with them; see the module docs.
pub(crate) struct Backend {
    deployment: Box<dyn Deployment>,
}

/// A call erased to what every deployment can run: the reply goes wherever the closure keeps it.
type Call<'a> = &'a mut dyn FnMut(&mut redis::Connection) -> redis::RedisResult<()>;

/// One kind of deployment, behind [`Backend`]. Each method is documented on the backend's
/// method of the same name.
trait Deployment: Send + Sync {
    /// Runs `f` on a connection to the server of `key`; with `retry`, a call that surely did
    /// not run is retried up to the configured attempts.
    fn run(&self, key: &str, retry: bool, f: Call<'_>) -> Result<()>;
    fn slot(&self, key: &str) -> u16;
    fn clustered(&self) -> bool;
    fn for_each_master(&self, f: &mut dyn FnMut(&Pool) -> Result<()>) -> Result<()>;
    fn publish_command(&self) -> &'static str;
    fn subscribe_command(&self) -> &'static str;
    fn servers_of<'a>(&self, channels: &[&'a str]) -> Result<Vec<(ConnectionInfo, Vec<&'a str>)>>;
    fn dispatcher(&self, dial: Dial) -> Result<Arc<Dispatcher>>;
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
        Ok(Backend { deployment })
    }

    /// Runs `f` on a connection to the server of `key` (the master of its slot on a
    /// cluster, following redirections), retrying a call that surely did not run: no
    /// connection could be made, or the server refused it for now (see [`Pool::run`]). Not
    /// retried under [`with_call_timeout`].
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.call(key, !capped(), f)
    }

    /// As [`run`](Self::run), without retries (redirections are still followed): for the
    /// watchdog, whose renewals are due again next period and must not hold up the others.
    pub(crate) fn run_once<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.call(key, false, f)
    }

    fn call<T>(
        &self,
        key: &str,
        retry: bool,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut reply = None;
        self.deployment
            .run(key, retry, &mut |c: &mut redis::Connection| {
                reply = Some(f(c)?);
                Ok(())
            })?;
        Ok(reply.expect("a call that succeeded kept its reply"))
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
        self.deployment.for_each_master(&mut f)
    }

    /// The command lock scripts publish with: `SPUBLISH` (sharded pub/sub) on a cluster,
    /// else `PUBLISH`.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.deployment.publish_command()
    }

    /// The command that hears what [`publish_command`](Self::publish_command) sends:
    /// `SSUBSCRIBE` on a cluster, else `SUBSCRIBE`.
    pub(crate) fn subscribe_command(&self) -> &'static str {
        self.deployment.subscribe_command()
    }

    /// Where to subscribe `channels`: each server that serves some of them (the one server,
    /// or the masters of their slots), with those channels, in the order first met.
    pub(crate) fn servers_of<'a>(
        &self,
        channels: &[&'a str],
    ) -> Result<Vec<(ConnectionInfo, Vec<&'a str>)>> {
        self.deployment.servers_of(channels)
    }

    /// Starts the pub/sub dispatcher for this backend's waiters, with connections opened by
    /// `dial`: one plain connection that follows a Sentinel master switch, or a cluster's
    /// sharded connections, one per node with waiters, placed by the slot map.
    pub(crate) fn dispatcher(&self, dial: Dial) -> Result<Arc<Dispatcher>> {
        self.deployment.dispatcher(dial)
    }
}

/// One server: at a fixed address, or the master Sentinel names. One pool; plain pub/sub.
struct Server {
    pool: Pool,
}

impl Server {
    fn new(endpoint: Arc<dyn Endpoint>, config: &Config) -> Server {
        Server {
            pool: Pool::new(endpoint, config),
        }
    }
}

impl Deployment for Server {
    fn run(&self, key: &str, retry: bool, f: Call<'_>) -> Result<()> {
        if retry {
            self.pool.run(key, f)
        } else {
            self.pool.run_once(key, f)
        }
    }

    fn slot(&self, _: &str) -> u16 {
        0
    }

    fn clustered(&self) -> bool {
        false
    }

    fn for_each_master(&self, f: &mut dyn FnMut(&Pool) -> Result<()>) -> Result<()> {
        f(&self.pool)
    }

    fn publish_command(&self) -> &'static str {
        "PUBLISH"
    }

    fn subscribe_command(&self) -> &'static str {
        "SUBSCRIBE"
    }

    fn servers_of<'a>(&self, channels: &[&'a str]) -> Result<Vec<(ConnectionInfo, Vec<&'a str>)>> {
        Ok(vec![(self.pool.resolve()?, channels.to_vec())])
    }

    fn dispatcher(&self, dial: Dial) -> Result<Arc<Dispatcher>> {
        let endpoint = self.pool.endpoint();
        let pubsub = PubSub::start(Arc::clone(endpoint), dial, Mode::Plain)?;
        let dispatcher = Arc::new(Dispatcher::Plain(pubsub));
        // After a Sentinel master switch, the pub/sub connection moves too.
        let weak = Arc::downgrade(&dispatcher);
        endpoint.on_switch(Box::new(move || {
            if let Some(dispatcher) = weak.upgrade() {
                dispatcher.reconnect();
            }
        }));
        Ok(dispatcher)
    }
}
