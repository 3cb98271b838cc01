//! The router: each call to the master of its key's slot, following `MOVED` and `ASK`, and
//! the slot map it routes by.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use redis::{ConnectionInfo, ConnectionLike, Value};

use super::refresh::{by_preference, not_connected, LastRefresh, Refreshes};
use super::slots::{parse_slots, slot, SLOTS};
use crate::backend::endpoint::{open, Fixed};
use crate::backend::pool::Pool;
use crate::backend::{Policy, Written};
use crate::config::Config;
use crate::error::{Error, Result};

/// How many `MOVED`/`ASK` redirections one call follows before giving up.
const MAX_REDIRECTS: u32 = 5;

/// Routes calls to slot masters.
pub(crate) struct Router {
    config: Config,
    seeds: Vec<ConnectionInfo>,
    topo: RwLock<Topo>,
    /// Re-reads of the slot map: one at a time, shared by the callers that found it stale.
    refreshes: Refreshes,
    /// Nodes (`host:port`) whose last attempt failed: a refresh that could not read the map
    /// from them, or a command connection that could not be made or lost its reply. A
    /// refresh asks them last.
    failed: Mutex<HashSet<String>>,
}

#[derive(Default)]
struct Topo {
    /// Slot → index in `nodes`; `None` until known.
    slots: Vec<Option<usize>>,
    nodes: Vec<Node>,
}

struct Node {
    /// `host:port`, as the cluster names it.
    addr: String,
    info: ConnectionInfo,
    pool: Arc<Pool>,
}

impl Router {
    pub(crate) fn new(config: Config, seeds: Vec<ConnectionInfo>) -> Router {
        Router {
            config,
            seeds,
            topo: RwLock::new(Topo {
                slots: vec![None; SLOTS],
                nodes: Vec::new(),
            }),
            refreshes: Refreshes::new(),
            failed: Mutex::new(HashSet::new()),
        }
    }

    /// The master of `key`'s slot (reading the slot map first if it is not known yet).
    pub(crate) fn node_for(&self, key: &str) -> Result<ConnectionInfo> {
        let (_, info) = self.master_of(slot(key.as_bytes()))?;
        Ok(info)
    }

    /// Runs `f` on a connection to the master of `key`'s slot, following redirections, and
    /// retrying (after re-reading the slot map) a call that surely did not run, up to the
    /// configured attempts (none unless `policy` is [`Policy::Retried`]).
    /// `written` runs once a command of the call is written, where the pool sees that moment
    /// (see `batch/mod.rs`).
    pub(crate) fn run<T>(
        &self,
        key: &str,
        policy: Policy,
        written: Written<'_>,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let slot = slot(key.as_bytes());
        let mut retries = policy.retries(self.config.retry_attempts);
        let mut redirects = 0;
        let mut ask: Option<(Arc<Pool>, String)> = None;
        loop {
            let (outcome, node) = match ask.take() {
                Some((pool, addr)) => (
                    pool.attempt_alone(key, policy.bound(), &mut |c: &mut dyn ConnectionLike| {
                        asking(c, &mut f)
                    }),
                    Some(addr),
                ),
                None => match self.master_of(slot) {
                    Ok((pool, info)) => (
                        pool.attempt(key, policy.bound(), written, &mut f),
                        Some(info.addr().to_string()),
                    ),
                    Err(e) => (Err((e, false)), None),
                },
            };
            let (err, may_have_run) = match outcome {
                Ok(v) => return Ok(v),
                Err(failure) => failure,
            };
            // Before waiting for any refresh: one that begins from now on serves this call.
            let seen = self.refreshes.mark();
            if let Some(addr) = node.filter(|_| err.breaks_connection()) {
                self.failed.lock().insert(addr);
            }
            match redirect(&err) {
                Some((kind, addr)) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    log::debug!("slot {slot} of `{key}`: {kind} to {addr}");
                    match kind {
                        Redirect::Moved => self.moved(slot, &addr, seen),
                        Redirect::Ask => ask = Some((self.pool_at(&addr)?, addr)),
                    }
                    continue;
                }
                _ if may_have_run || retries == 0 => return Err(err),
                _ => {}
            }
            retries -= 1;
            redirects = 0;
            log::debug!(
                "call on `{key}` (slot {slot}) did not run ({err}); re-reading the slot map, \
                 retrying in {:?}",
                self.config.retry_delay
            );
            std::thread::sleep(self.config.retry_delay);
            if let Err(e) = self.refresh_after(seen) {
                log::debug!("re-reading the cluster slot map failed: {e}");
            }
        }
    }

    fn master_of(&self, slot: u16) -> Result<(Arc<Pool>, ConnectionInfo)> {
        let seen = self.refreshes.mark();
        if let Some(found) = self.lookup(slot) {
            return Ok(found);
        }
        self.refresh_after(seen)?;
        self.lookup(slot)
            .ok_or_else(|| not_connected(format!("no cluster node serves slot {slot}")))
    }

    /// The pool and address of `slot`'s master, if the map knows it.
    pub(super) fn lookup(&self, slot: u16) -> Option<(Arc<Pool>, ConnectionInfo)> {
        let topo = self.topo.read();
        let node = &topo.nodes[topo.slots[usize::from(slot)]?];
        Some((Arc::clone(&node.pool), node.info.clone()))
    }

    /// After `MOVED` (seen at refresh mark `seen`): the redirect names the slot's new owner,
    /// which takes the slot's calls at once; then the rest of the map is re-read (a migration
    /// or failover rarely moves one slot alone), unless a refresh began since.
    fn moved(&self, slot: u16, addr: &str, seen: u64) {
        self.assign(slot, addr);
        if let Err(e) = self.refresh_after(seen) {
            log::debug!("re-reading the cluster slot map failed: {e}");
        }
        // The redirect is first-hand: a map read from a node that has not heard of the move
        // yet must not undo it (calls would bounce between the two until they give up).
        self.assign(slot, addr);
    }

    /// Routes `slot` to node `addr`.
    fn assign(&self, slot: u16, addr: &str) {
        let mut topo = self.topo.write();
        if let Some(i) = topo.index_of(addr, &self.config, &self.seeds) {
            topo.slots[usize::from(slot)] = Some(i);
        }
    }

    /// The pool of node `addr` (known or new), for an `ASK` redirection.
    fn pool_at(&self, addr: &str) -> Result<Arc<Pool>> {
        let mut topo = self.topo.write();
        match topo.index_of(addr, &self.config, &self.seeds) {
            Some(i) => Ok(Arc::clone(&topo.nodes[i].pool)),
            None => Err(Error::Protocol(format!(
                "bad node address in a redirection: {addr}"
            ))),
        }
    }

    /// Re-reads the slot map now (after any refresh already running), for the pub/sub
    /// locator, which shares its own refreshes between waiters.
    pub(crate) fn refresh(&self) -> Result<()> {
        self.refresh_after(self.refreshes.mark())
    }

    /// Re-reads the slot map unless a refresh began after mark `seen` (see [`Refreshes`]).
    fn refresh_after(&self, seen: u64) -> Result<()> {
        self.refreshes.after(seen, |last| self.read_slot_map(last))
    }

    /// Reads the slot map (`CLUSTER SLOTS`) from the first node that answers, asking each
    /// node once, in [`by_preference`] order.
    fn read_slot_map(&self, last: &mut LastRefresh) -> std::result::Result<(), String> {
        let candidates = {
            let topo = self.topo.read();
            let mut serving = vec![false; topo.nodes.len()];
            for &i in topo.slots.iter().flatten() {
                serving[i] = true;
            }
            let known = topo
                .nodes
                .iter()
                .zip(serving)
                .map(|(n, master)| (n.addr.clone(), n.info.clone(), master));
            let seeds = self
                .seeds
                .iter()
                .map(|s| (s.addr().to_string(), s.clone(), false));
            by_preference(
                known.chain(seeds).collect(),
                last.source.as_deref(),
                &self.failed.lock(),
            )
        };
        let (connect, response) = (self.config.connect_timeout, self.config.response_timeout);
        let mut failures = Vec::new();
        for (addr, info) in &candidates {
            let read = open(info, connect, response).and_then(|mut conn| {
                redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query::<Value>(&mut conn)
                    .map_err(|e| Error::from_redis(e, ""))
            });
            let ranges = match read.and_then(|v| parse_slots(&v, info)) {
                Ok(ranges) if !ranges.is_empty() => ranges,
                outcome => {
                    failures.push(match outcome {
                        Err(e) => e.text_at(&addr.to_string()),
                        Ok(_) => format!("{addr}: no slots assigned"),
                    });
                    self.failed.lock().insert(addr.clone());
                    continue;
                }
            };
            self.failed.lock().remove(addr);
            last.source = Some(addr.clone());
            let mut topo = self.topo.write();
            let mut slots = vec![None; SLOTS];
            for (start, end, addr) in ranges {
                let i = topo.index_of(&addr, &self.config, &self.seeds);
                for s in start..=end {
                    slots[usize::from(s)] = i;
                }
            }
            topo.slots = slots;
            log::debug!("cluster slot map read from {addr}");
            return Ok(());
        }
        Err(format!(
            "no cluster node gave a slot map ({})",
            failures.join("; ")
        ))
    }

    /// Runs `f` on the pool of each master in the slot map, read afresh (a key-space
    /// walk such as `SCAN` must see every master), one after the other; stops at the first error.
    /// Closes every node's pool.
    pub(super) fn close(&self) {
        for node in &self.topo.read().nodes {
            node.pool.close();
        }
    }

    pub(crate) fn for_each_master(&self, mut f: impl FnMut(&Pool) -> Result<()>) -> Result<()> {
        self.refresh()?;
        let pools: Vec<Arc<Pool>> = {
            let topo = self.topo.read();
            let mut used: Vec<usize> = topo.slots.iter().flatten().copied().collect();
            used.sort_unstable();
            used.dedup();
            used.iter()
                .map(|&i| Arc::clone(&topo.nodes[i].pool))
                .collect()
        };
        pools.iter().try_for_each(|pool| f(pool))
    }

    /// Every master currently in the slot map, for diagnostics and tests.
    #[cfg(test)]
    fn masters(&self) -> Vec<String> {
        let topo = self.topo.read();
        let mut used: Vec<String> = topo
            .slots
            .iter()
            .flatten()
            .map(|&i| topo.nodes[i].addr.clone())
            .collect();
        used.sort();
        used.dedup();
        used
    }
}

impl Topo {
    /// The index of node `addr`, adding it (with its own pool) if new; `None` for an address
    /// that does not parse.
    fn index_of(&mut self, addr: &str, config: &Config, seeds: &[ConnectionInfo]) -> Option<usize> {
        if let Some(i) = self.nodes.iter().position(|n| n.addr == addr) {
            return Some(i);
        }
        let (host, port) = addr.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        let settings = seeds.first()?.redis_settings().clone();
        let info = config.tls.address(host.to_owned(), port, settings).ok()?;
        let pool = Arc::new(Pool::new(Arc::new(Fixed(info.clone())), config, true));
        self.nodes.push(Node {
            addr: addr.to_owned(),
            info,
            pool,
        });
        Some(self.nodes.len() - 1)
    }
}

/// Runs `f` on the node an `ASK` named, after `ASKING` (which lets the next command, and only
/// it, use the slot that node is importing).
///
/// A script the node does not have yet answers NOSCRIPT, which uses up the `ASKING`:
/// `scripts::Call::invoke` then loads the script and re-sends EVALSHA without it, and the
/// importing node answers `MOVED` (back to the slot's owner, which would `ASK` again). So a
/// `MOVED` here is answered with `ASKING` and `f` once more, on the same connection, where
/// the script is loaded now. That is as safe as following the `MOVED` (nothing ran); if the
/// node really is not importing the slot, it costs one round trip before the `MOVED` is
/// followed.
fn asking<T>(
    c: &mut dyn ConnectionLike,
    f: &mut impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
) -> redis::RedisResult<T> {
    redis::cmd("ASKING").query::<()>(c)?;
    match f(c) {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => {
            // Re-running `f` is safe only because every closure passed to Router::run issues
            // one keyed command (plus WAIT or SCRIPT LOAD).
            redis::cmd("ASKING").query::<()>(c)?;
            f(c)
        }
        outcome => outcome,
    }
}

#[derive(Debug, Clone, Copy)]
enum Redirect {
    Moved,
    Ask,
}

impl std::fmt::Display for Redirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Redirect::Moved => "MOVED",
            Redirect::Ask => "ASK",
        })
    }
}

/// The redirection an error asks for, with the target `host:port`.
fn redirect(err: &Error) -> Option<(Redirect, String)> {
    let Error::Redis(e) = err else { return None };
    let kind = match e.kind() {
        redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => Redirect::Moved,
        redis::ErrorKind::Server(redis::ServerErrorKind::Ask) => Redirect::Ask,
        _ => return None,
    };
    let (addr, _slot) = e.redirect_node()?;
    Some((kind, addr.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;
    use std::time::Duration;

    #[test]
    fn an_unreachable_cluster_is_a_connection_error() {
        let config = Config::cluster(["redis://127.0.0.1:1/"])
            .connect_timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let seeds = vec!["redis://127.0.0.1:1/".into_connection_info().unwrap()];
        let router = Router::new(config, seeds);
        let err = router
            .run("k", Policy::Once, None, |c| {
                redis::cmd("PING").query::<String>(c)
            })
            .unwrap_err();
        assert!(err.is_connection(), "{err}");
        assert!(router.masters().is_empty());
    }
}
