//! Redis Cluster: hash slots, the slot map, and routing each call to the master of its key's
//! slot, following `MOVED` and `ASK`.
//!
//! Why not `redis::cluster::ClusterConnection`: it re-sends a command whose reply timed out
//! (a lock script could run twice: a hold counted twice), loads scripts on every node,
//! replicas included (one dead replica fails every `NOSCRIPT` reload), routes `WAIT` to all
//! masters, and keeps a dead master in its slot map until another node says `MOVED`. Here
//! each node has a plain [`Pool`]; a script, its `SCRIPT LOAD` and its `WAIT` run on one
//! connection to the slot's master; a reply that timed out is never re-sent; and a node that
//! cannot be reached makes the client re-read the slot map before the (safe) retry.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::pool::Pool;
use crate::target::{open, Target};

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

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Routes calls to slot masters.
pub(crate) struct Router {
    config: Config,
    seeds: Vec<ConnectionInfo>,
    topo: RwLock<Topo>,
    /// Held while the slot map is re-read: one refresh at a time.
    refreshing: Mutex<()>,
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
            refreshing: Mutex::new(()),
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
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let slot = slot(key.as_bytes());
        let mut retries = if retry { self.config.retry_attempts } else { 0 };
        let mut redirects = 0;
        let mut ask: Option<Arc<Pool>> = None;
        loop {
            let outcome = match ask.take() {
                Some(pool) => pool.attempt(key, &mut |c: &mut redis::Connection| {
                    redis::cmd("ASKING").query::<()>(c)?;
                    f(c)
                }),
                None => match self.master_of(slot) {
                    Ok((pool, _)) => pool.attempt(key, &mut f),
                    Err(e) => Err((e, false)),
                },
            };
            let err = match outcome {
                Ok(v) => return Ok(v),
                Err((err, may_have_run)) => match redirect(&err) {
                    Some((kind, addr)) if redirects < MAX_REDIRECTS => {
                        redirects += 1;
                        log::debug!("slot {slot} of `{key}`: {kind} to {addr}");
                        match kind {
                            Redirect::Moved => {
                                self.moved(slot, &addr);
                            }
                            Redirect::Ask => ask = Some(self.pool_at(&addr)?),
                        }
                        continue;
                    }
                    _ if may_have_run || retries == 0 => return Err(err),
                    _ => err,
                },
            };
            retries -= 1;
            redirects = 0;
            log::debug!(
                "call on `{key}` (slot {slot}) did not run ({err}); re-reading the slot map, \
                 retrying in {:?}",
                self.config.retry_delay
            );
            std::thread::sleep(self.config.retry_delay);
            if let Err(e) = self.refresh() {
                log::debug!("re-reading the cluster slot map failed: {e}");
            }
        }
    }

    fn master_of(&self, slot: u16) -> Result<(Arc<Pool>, ConnectionInfo)> {
        {
            let topo = self.topo.read();
            if let Some(i) = topo.slots[usize::from(slot)] {
                let node = &topo.nodes[i];
                return Ok((Arc::clone(&node.pool), node.info.clone()));
            }
        }
        self.refresh()?;
        let topo = self.topo.read();
        match topo.slots[usize::from(slot)] {
            Some(i) => Ok((Arc::clone(&topo.nodes[i].pool), topo.nodes[i].info.clone())),
            None => Err(Error::Connection(
                std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    format!("no cluster node serves slot {slot}"),
                )
                .into(),
            )),
        }
    }

    /// After `MOVED`: the slot is served by `addr` now; the rest of the map is re-read too
    /// (a migration or failover rarely moves one slot alone).
    fn moved(&self, slot: u16, addr: &str) {
        if let Err(e) = self.refresh() {
            log::debug!("re-reading the cluster slot map failed: {e}");
        }
        let mut topo = self.topo.write();
        let i = topo.index_of(addr, &self.config, &self.seeds);
        if let Some(i) = i {
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

    /// Re-reads the slot map (`CLUSTER SLOTS`) from the first node that answers: known
    /// nodes first, then the seeds.
    pub(crate) fn refresh(&self) -> Result<()> {
        let _one_at_a_time = self.refreshing.lock();
        let mut candidates: Vec<ConnectionInfo> = self
            .topo
            .read()
            .nodes
            .iter()
            .map(|n| n.info.clone())
            .collect();
        candidates.extend(self.seeds.iter().cloned());
        let (connect, response) = (self.config.connect_timeout, self.config.response_timeout);
        let mut failures = Vec::new();
        for info in &candidates {
            let read = open(info, connect, response).and_then(|mut conn| {
                redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query::<Value>(&mut conn)
                    .map_err(|e| Error::from_redis(e, ""))
            });
            let ranges = match read.and_then(|v| parse_slots(&v, info)) {
                Ok(ranges) if !ranges.is_empty() => ranges,
                Ok(_) => {
                    failures.push(format!("{}: no slots assigned", info.addr()));
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{}: {e}", info.addr()));
                    continue;
                }
            };
            let mut topo = self.topo.write();
            let mut slots = vec![None; SLOTS];
            for (start, end, addr) in ranges {
                let i = topo.index_of(&addr, &self.config, &self.seeds);
                for s in start..=end {
                    slots[usize::from(s)] = i;
                }
            }
            topo.slots = slots;
            log::debug!("cluster slot map read from {}", info.addr());
            return Ok(());
        }
        Err(Error::Connection(
            std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("no cluster node gave a slot map ({})", failures.join("; ")),
            )
            .into(),
        ))
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
        let info = ConnectionAddr::Tcp(host.to_owned(), port)
            .into_connection_info()
            .ok()?
            .set_redis_settings(settings);
        let pool = Arc::new(Pool::new(Arc::new(Target::Fixed(info.clone())), config));
        self.nodes.push(Node {
            addr: addr.to_owned(),
            info,
            pool,
        });
        Some(self.nodes.len() - 1)
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

/// `(first slot, last slot, master host:port)` for each range of a `CLUSTER SLOTS` reply.
/// A master listed with an empty host is the node that answered (`asked`).
fn parse_slots(reply: &Value, asked: &ConnectionInfo) -> Result<Vec<(u16, u16, String)>> {
    let bad = || Error::Protocol(format!("unexpected CLUSTER SLOTS reply: {reply:?}"));
    let Value::Array(ranges) = reply else {
        return Err(bad());
    };
    let asked_host = match asked.addr() {
        ConnectionAddr::Tcp(host, _) => host.clone(),
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
