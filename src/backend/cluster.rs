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

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use redis::{ConnectionAddr, ConnectionInfo, ConnectionLike, Value};

use super::pool::{open, Fixed, Pool};
use super::{Call, Deployment};
use crate::config::{Config, ShardedSubscriptionMode};
use crate::error::{Error, Result};
use crate::net::Dial;
use crate::pubsub::{Locator, Mode, Sharded, Subscriptions};

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;

/// How many `MOVED`/`ASK` redirections one call follows before giving up.
const MAX_REDIRECTS: u32 = 5;

/// The hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag (the part between
/// the first `{` and the next `}`, when not empty), modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS as u16
}

/// CRC16 in the XMODEM variant, as Redis Cluster hashes keys.
fn crc16(data: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(data)
}

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
        let asked = self.router.run("", true, |c| {
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
    fn run(&self, key: &str, retry: bool, f: Call<'_>) -> Result<()> {
        self.router.run(key, retry, f)
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
        for node in &self.router.topo.read().nodes {
            node.pool.close();
        }
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

/// Slot-map refreshes, one at a time. A caller notes [`mark`](Self::mark) when it learns the
/// map is stale (a redirect, a node that cannot be reached) and then asks for a refresh
/// [`after`](Self::after) that mark: if another one began since, that one read the map after
/// the caller's news and serves it too. So N threads redirected at once wait for one read of
/// the map, not N in a row.
///
/// "Began", not "ended": a refresh already running when the caller got its redirect may
/// have read the map before the change the redirect reports.
struct Refreshes {
    /// How many refreshes have begun; only bumped with `running` held.
    begun: AtomicU64,
    /// Held while a refresh runs; what the last one found.
    running: Mutex<LastRefresh>,
}

#[derive(Default)]
struct LastRefresh {
    /// The node (`host:port`) the last good refresh read the map from: asked first next time.
    source: Option<String>,
    /// Why the last refresh failed; `None` if it succeeded or none ran yet.
    error: Option<String>,
}

impl Refreshes {
    fn new() -> Refreshes {
        Refreshes {
            begun: AtomicU64::new(0),
            running: Mutex::new(LastRefresh::default()),
        }
    }

    /// The mark to pass to [`after`](Self::after), taken when the caller learns that the map
    /// is stale (before it waits for any refresh).
    fn mark(&self) -> u64 {
        self.begun.load(Ordering::Acquire)
    }

    /// Runs `refresh` (which says why it failed), unless a refresh began after `seen` was
    /// marked: that one has ended by now (they run one at a time), and its outcome is this
    /// caller's too.
    fn after(
        &self,
        seen: u64,
        refresh: impl FnOnce(&mut LastRefresh) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let mut last = self.running.lock();
        if self.begun.load(Ordering::Acquire) == seen {
            self.begun.fetch_add(1, Ordering::AcqRel);
            last.error = refresh(&mut last).err();
        }
        match &last.error {
            None => Ok(()),
            Some(why) => Err(not_connected(why.clone())),
        }
    }
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
    /// configured attempts (none when `retry` is false).
    pub(crate) fn run<T>(
        &self,
        key: &str,
        retry: bool,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let slot = slot(key.as_bytes());
        let mut retries = if retry { self.config.retry_attempts } else { 0 };
        let mut redirects = 0;
        let mut ask: Option<(Arc<Pool>, String)> = None;
        loop {
            let (outcome, node) = match ask.take() {
                Some((pool, addr)) => (
                    pool.attempt_alone(key, &mut |c: &mut dyn ConnectionLike| asking(c, &mut f)),
                    Some(addr),
                ),
                None => match self.master_of(slot) {
                    Ok((pool, info)) => (pool.attempt(key, &mut f), Some(info.addr().to_string())),
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
    fn lookup(&self, slot: u16) -> Option<(Arc<Pool>, ConnectionInfo)> {
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
                        Err(e) => format!("{addr}: {e}"),
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

/// The order in which a refresh asks the candidate nodes `(host:port, info, serves slots)`
/// for the map, each address once: the node the last refresh read it from (`last`), then the
/// masters of the current map, then the other known nodes and the seeds (which may be
/// replicas, or masters that failed over); but any whose last attempt failed come after all
/// the others (ranked among themselves the same way), so that a dead master costs a connect
/// timeout only when nothing else answers.
fn by_preference<T>(
    candidates: Vec<(String, T, bool)>,
    last: Option<&str>,
    failed: &HashSet<String>,
) -> Vec<(String, T)> {
    let mut listed = HashSet::new();
    let mut candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(addr, _, _)| listed.insert(addr.clone()))
        .collect();
    // Stable: the order of nodes within a rank is kept.
    candidates.sort_by_key(|(addr, _, master)| {
        (failed.contains(addr), Some(addr.as_str()) != last, !master)
    });
    candidates
        .into_iter()
        .map(|(addr, info, _)| (addr, info))
        .collect()
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

/// A connection-class error for "no node to send this to".
fn not_connected(why: String) -> Error {
    Error::Connection(std::io::Error::new(std::io::ErrorKind::NotConnected, why).into())
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

/// `(first slot, last slot, master host:port)` for each range of a `CLUSTER SLOTS` reply.
/// A master listed with an empty host is the node that answered (`asked`).
fn parse_slots(reply: &Value, asked: &ConnectionInfo) -> Result<Vec<(u16, u16, String)>> {
    let bad = || Error::Protocol(format!("unexpected CLUSTER SLOTS reply: {reply:?}"));
    let Value::Array(ranges) = reply else {
        return Err(bad());
    };
    let asked_host = match asked.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => String::new(),
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(items) = range else {
            return Err(bad());
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (items.first(), items.get(1), items.get(2))
        else {
            return Err(bad());
        };
        let host = match master.first() {
            Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::SimpleString(h)) => h.clone(),
            _ => return Err(bad()),
        };
        let host = if host.is_empty() || host == "?" {
            asked_host.clone()
        } else {
            host
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return Err(bad());
        };
        let in_range = |n: i64| u16::try_from(n).ok().filter(|&s| usize::from(s) < SLOTS);
        let (Some(start), Some(end)) = (in_range(*start), in_range(*end)) else {
            return Err(bad());
        };
        out.push((start, end, format!("{host}:{port}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;
    use std::time::Duration;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"redisson_lock__channel:{orders}"), slot(b"orders"));
        // An empty tag or an unclosed brace hashes the whole key.
        assert_eq!(slot(b"{}x"), crc16(b"{}x") % 16384);
        assert_eq!(slot(b"{x"), crc16(b"{x") % 16384);
        // Only the first tag counts.
        assert_eq!(slot(b"{a}{b}"), slot(b"a"));
    }

    #[test]
    fn parses_cluster_slots() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let node =
            |host: &str, port: i64| Value::Array(vec![bulk(host), Value::Int(port), bulk("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(16383), node("", 7001)]),
        ]);
        let asked = "redis://10.0.0.9:7001/".into_connection_info().unwrap();
        let ranges = parse_slots(&reply, &asked).unwrap();
        assert_eq!(
            ranges,
            vec![
                (0, 5460, "127.0.0.1:7000".to_owned()),
                (5461, 16383, "10.0.0.9:7001".to_owned())
            ]
        );
        let bad = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(99999),
            node("h", 1),
        ])]);
        assert!(parse_slots(&bad, &asked).is_err());
        assert!(parse_slots(&Value::Nil, &asked).is_err());
    }

    #[test]
    fn callers_that_noticed_a_stale_map_before_a_refresh_began_share_it() {
        let refreshes = Refreshes::new();
        let runs = std::sync::atomic::AtomicUsize::new(0);
        let refresh = |_: &mut LastRefresh| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let (a, b) = (refreshes.mark(), refreshes.mark());
        refreshes.after(a, refresh).unwrap();
        refreshes.after(b, refresh).unwrap(); // b noticed before a's refresh began
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let c = refreshes.mark(); // news after that refresh began: a new one
        refreshes.after(c, refresh).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);

        // 16 threads that all noticed before any refresh began: one refresh between them,
        // whose failure each of them sees.
        let threads = 16;
        let noticed = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let seen = refreshes.mark();
                    noticed.wait();
                    let outcome = refreshes.after(seen, |_| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Err("no node answers".into())
                    });
                    assert!(outcome.unwrap_err().is_connection());
                });
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn refresh_asks_the_last_source_then_masters_then_the_rest_and_failed_nodes_last() {
        let candidates = |list: &[(&str, bool)]| {
            list.iter()
                .map(|&(addr, master)| (addr.to_owned(), (), master))
                .collect::<Vec<_>>()
        };
        let order = |list, last, failed: &[&str]| {
            let failed = failed.iter().map(|f| f.to_string()).collect();
            by_preference(candidates(list), last, &failed)
                .into_iter()
                .map(|(addr, ())| addr)
                .collect::<Vec<_>>()
        };
        // Known nodes (the old master :1 no longer serves slots), then seeds.
        let list = [
            ("h:1", false),
            ("h:2", true),
            ("h:3", true),
            ("h:4", true),
            ("h:1", false),
            ("h:5", false),
        ];
        assert_eq!(order(&list, None, &[]), ["h:2", "h:3", "h:4", "h:1", "h:5"]);
        assert_eq!(
            order(&list, Some("h:3"), &[]),
            ["h:3", "h:2", "h:4", "h:1", "h:5"]
        );
        // The last source failed since, and so did a master: both go last, ranked alike.
        assert_eq!(
            order(&list, Some("h:3"), &["h:3", "h:2"]),
            ["h:4", "h:1", "h:5", "h:3", "h:2"]
        );
    }

    #[test]
    fn an_unreachable_cluster_is_a_connection_error() {
        let config = Config::cluster(["redis://127.0.0.1:1/"])
            .connect_timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let seeds = vec!["redis://127.0.0.1:1/".into_connection_info().unwrap()];
        let router = Router::new(config, seeds);
        let err = router
            .run("k", false, |c| redis::cmd("PING").query::<String>(c))
            .unwrap_err();
        assert!(err.is_connection(), "{err}");
        assert!(router.masters().is_empty());
    }
}
