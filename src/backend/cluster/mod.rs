//! Redis Cluster: hash slots, the slot map, and routing each call to the master of its key's
//! slot, following `MOVED` and `ASK`.
//!
//! Why not `redis::cluster::ClusterConnection`: it re-sends a command whose reply timed out
//! (a lock script could run twice: a hold counted twice), loads scripts on every node,
//! replicas included (one dead replica fails every `NOSCRIPT` reload), routes `WAIT` to all
//! masters, and keeps a dead master in its slot map until another node says `MOVED`. Here
//! each node has a plain [`Pool`]; a script, its `SCRIPT LOAD` and its `WAIT` run on one
//! connection to the slot's master; a reply that timed out is never re-sent; and a node that
//! cannot be reached makes the client re-read the slot map before the (safe) retry. Callers
//! that learn at the same time that the map is stale share one re-read of it ([`Refreshes`]),
//! which asks the nodes most likely to answer first ([`by_preference`]).

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use redis::{ConnectionInfo, Value};

use super::pool::Pool;
use super::{Call, Deployment, Policy, Written};
use crate::config::{Config, ShardedSubscriptionMode};
use crate::error::{Error, Result};
use crate::net::Dial;
use crate::pubsub::{Locator, Mode, Sharded, Subscriptions};

mod refresh;
mod router;
mod slots;

pub(crate) use router::Router;
pub(crate) use slots::slot;

/// A Redis Cluster: each call goes to the master of its key's slot; waiters listen on the
/// node of their channel's slot, with sharded or plain pub/sub ([`PubSubMode`]).
pub(super) struct Cluster {
    router: Arc<Router>,
    mode: Arc<PubSubMode>,
}

impl Cluster {
    pub(super) fn new(config: Config, seeds: Vec<ConnectionInfo>) -> Cluster {
        let setting = config.sharded_subscription_mode;
        let router = Arc::new(Router::new(config, seeds));
        Cluster {
            mode: Arc::new(PubSubMode::new(setting, Arc::clone(&router))),
            router,
        }
    }
}

/// The one place that decides a cluster's pub/sub [`Mode`]: the configured one, or for
/// [`ShardedSubscriptionMode::Auto`] the one the cluster has, asked once (as Redisson does,
/// with `PUBSUB SHARDNUMSUB`, a subcommand that Redis 7.0 brought with sharded pub/sub).
/// Scripts publish and the dispatcher subscribes by what this says.
struct PubSubMode {
    setting: ShardedSubscriptionMode,
    router: Arc<Router>,
    /// Auto: the answer, once the cluster gave one.
    detected: OnceLock<Mode>,
    /// Auto: held while asking, so that threads that need the mode at once ask once.
    asking: Mutex<()>,
}

impl PubSubMode {
    fn new(setting: ShardedSubscriptionMode, router: Arc<Router>) -> PubSubMode {
        PubSubMode {
            setting,
            router,
            detected: OnceLock::new(),
            asking: Mutex::new(()),
        }
    }

    /// The mode. Auto asks the cluster on first need (retrying as any call does); while no
    /// node answers, it is plain for now, not kept: the call that needed it cannot reach the
    /// cluster either.
    fn get(&self) -> Mode {
        match self.setting {
            ShardedSubscriptionMode::On => return Mode::Sharded,
            ShardedSubscriptionMode::Off => return Mode::Plain,
            ShardedSubscriptionMode::Auto => {}
        }
        if let Some(&mode) = self.detected.get() {
            return mode;
        }
        let _asking = self.asking.lock();
        if let Some(&mode) = self.detected.get() {
            return mode;
        }
        let asked = self.router.run("", Policy::Retried, None, |c| {
            redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .query::<Value>(c)
                .map(drop)
        });
        let mode = match asked {
            Ok(()) => Mode::Sharded,
            // "ERR unknown subcommand": so is sharded pub/sub. (A refusal for now, such as
            // CLUSTERDOWN, has a code of its own.)
            Err(Error::Redis(e)) if e.code() == Some("ERR") => {
                log::debug!("the cluster has no sharded pub/sub ({e}): plain pub/sub");
                Mode::Plain
            }
            Err(e) => {
                log::debug!("cannot ask the cluster for sharded pub/sub yet ({e}): plain for now");
                return Mode::Plain;
            }
        };
        log::debug!("cluster pub/sub mode: {mode:?}");
        *self.detected.get_or_init(|| mode)
    }
}

impl Deployment for Cluster {
    fn run(&self, key: &str, policy: Policy, written: Written<'_>, f: Call<'_>) -> Result<()> {
        self.router.run(key, policy, written, f)
    }

    fn slot(&self, key: &str) -> u16 {
        slot(key.as_bytes())
    }

    fn delete_later(&self, key: String) {
        if let Some((pool, _)) = self.router.lookup(slot(key.as_bytes())) {
            pool.delete_later(key);
        }
    }

    fn clustered(&self) -> bool {
        true
    }

    fn for_each_master(&self, f: &mut dyn FnMut(&Pool) -> Result<()>) -> Result<()> {
        self.router.for_each_master(f)
    }

    fn close(&self) {
        self.router.close();
    }

    fn pubsub_mode(&self) -> Mode {
        self.mode.get()
    }

    fn subscriptions(&self, dial: Dial) -> Result<Arc<dyn Subscriptions>> {
        let router = Arc::clone(&self.router);
        let locate: Locator = Box::new(move |channel: &str, refresh: bool| {
            if refresh {
                if let Err(e) = router.refresh() {
                    log::debug!("re-reading the slot map for pub/sub failed: {e}");
                }
            }
            router.node_for(channel)
        });
        let mode = Arc::clone(&self.mode);
        Ok(Arc::new(Sharded::new(
            locate,
            Box::new(move || mode.get()),
            dial,
        )))
    }
}
