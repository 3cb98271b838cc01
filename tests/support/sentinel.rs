//! [`SentinelGroup`]: one master, its replicas and the Sentinels monitoring them, all real
//! processes on loopback ports, killed on drop.
//!
//! Every wait polls (every [`POLL`]) and, on timeout, panics with what it was waiting for,
//! the last unmet condition and every process's log.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::binary::binary;
use super::{info_field, wait_until_every, RedisServer};

/// How often waits poll (each poll opens one connection per process).
const POLL: Duration = Duration::from_millis(50);

/// Shape and timing of a [`SentinelGroup`].
#[derive(Debug, Clone)]
pub struct SentinelConfig {
    /// Replicas of the master (2 by default).
    pub replicas: usize,
    /// Sentinel processes (3 by default); the quorum is a majority of them.
    pub sentinels: usize,
    /// `sentinel down-after-milliseconds`: how long the master must be unreachable before a
    /// Sentinel deems it down (1 s by default).
    pub down_after: Duration,
    /// `sentinel failover-timeout` (5 s by default): bounds a failover's steps, and a
    /// Sentinel retries a failed failover only after twice this.
    pub failover_timeout: Duration,
}

impl Default for SentinelConfig {
    fn default() -> Self {
        SentinelConfig {
            replicas: 2,
            sentinels: 3,
            down_after: Duration::from_millis(1000),
            failover_timeout: Duration::from_millis(5000),
        }
    }
}

/// A master, its replicas (started with [`RedisServer::replica_of`]) and Sentinels
/// monitoring it under [`master_name`](Self::master_name). Each Sentinel is a
/// `redis-server <dir>/redis.conf --sentinel` [`RedisServer`] with its own temp dir and
/// writable config file (Sentinels rewrite it with what they learn).
pub struct SentinelGroup {
    name: String,
    /// Data servers: the initial master first, then the replicas.
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    config: SentinelConfig,
}

/// What one Sentinel says about the monitored master.
struct SentinelView {
    port: u16,
    master: Option<SocketAddr>,
    replicas: Vec<HashMap<String, String>>,
    sentinels: Vec<HashMap<String, String>>,
    ckquorum: Result<String, String>,
}

impl SentinelView {
    /// `Ok(None)` if the Sentinel does not answer at all (killed or stopped: left out of
    /// the checks), `Err` if it answered `PING` but then failed (the poll is retried).
    fn read(sentinel: &RedisServer, name: &str) -> Result<Option<SentinelView>, String> {
        let Some(mut conn) = sentinel.try_conn() else {
            return Ok(None);
        };
        let port = sentinel.port();
        let failed = |e: redis::RedisError| format!("Sentinel {port}: {e}");
        let mut listing = |sub: &str| -> Result<Vec<HashMap<String, String>>, String> {
            let entries: Vec<Vec<String>> = redis::cmd("SENTINEL")
                .arg(sub)
                .arg(name)
                .query(&mut conn)
                .map_err(failed)?;
            Ok(entries.into_iter().map(pairs).collect())
        };
        let replicas = listing("REPLICAS")?;
        let sentinels = listing("SENTINELS")?;
        let ckquorum = redis::cmd("SENTINEL")
            .arg("CKQUORUM")
            .arg(name)
            .query::<String>(&mut conn)
            .map_err(|e| e.to_string());
        let master = master_addr_of(&mut conn, name).map_err(failed)?;
        Ok(Some(SentinelView {
            port,
            master,
            replicas,
            sentinels,
            ckquorum,
        }))
    }
}

/// `[k1, v1, k2, v2, ...]` as a map.
fn pairs(flat: Vec<String>) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let mut items = flat.into_iter();
    while let (Some(k), Some(v)) = (items.next(), items.next()) {
        map.insert(k, v);
    }
    map
}

fn master_addr_of(
    conn: &mut redis::Connection,
    name: &str,
) -> redis::RedisResult<Option<SocketAddr>> {
    let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(name)
        .query(conn)?;
    Ok(addr.map(|(ip, port)| {
        SocketAddr::new(ip.parse().expect("Sentinel reports an IP address"), port)
    }))
}

/// What a data server reports in `INFO replication`.
struct Replication {
    role: String,
    master_port: Option<u16>,
    link: Option<String>,
}

/// `Ok(None)` if `server` does not answer at all (killed or stopped), `Err` if it answered
/// `PING` but then failed (e.g. a Sentinel's `CLIENT KILL TYPE normal` while reconfiguring
/// it: the poll is retried).
fn replication_of(server: &RedisServer) -> Result<Option<Replication>, String> {
    let Some(mut conn) = server.try_conn() else {
        return Ok(None);
    };
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .map_err(|e| format!("{}: {e}", server.port()))?;
    Ok(Some(Replication {
        role: info_field(&info, "role:").unwrap_or("?").to_string(),
        master_port: info_field(&info, "master_port:").and_then(|p| p.parse().ok()),
        link: info_field(&info, "master_link_status:").map(str::to_string),
    }))
}

impl SentinelGroup {
    /// One master, 2 replicas, 3 Sentinels (quorum 2), with [`SentinelConfig::default`].
    pub fn new() -> Self {
        Self::with_config(SentinelConfig::default())
    }

    pub fn with_config(config: SentinelConfig) -> Self {
        assert!(config.sentinels >= 1, "a SentinelGroup needs a Sentinel");
        let name = "redlatch-master".to_string();
        let master = RedisServer::with_args(&["--repl-diskless-sync-delay", "0"]);
        let mut servers = vec![master];
        for _ in 0..config.replicas {
            let replica = RedisServer::replica_of(&servers[0]);
            // Any replica may become master and then serve full syncs: without the 5 s
            // default wait for more replicas. (Lost if the replica is restarted.)
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("repl-diskless-sync-delay")
                .arg(0)
                .query(&mut replica.conn())
                .expect("CONFIG SET on a replica");
            servers.push(replica);
        }
        let mut group = SentinelGroup {
            name,
            servers,
            sentinels: Vec::new(),
            config,
        };
        // `replica_of` waits until the master counts *one* replica for WAIT: here, wait
        // until it lists all of them and each replica's link is up (first sync done), so
        // the Sentinels find them all in the master's first INFO.
        let replica_count = group.config.replicas;
        group.wait_for("the replicas to link up", Duration::from_secs(20), |g| {
            let connected = g.servers[0].info("replication", "connected_slaves:");
            if connected != Some(replica_count.to_string()) {
                return Err(format!("master has connected_slaves:{connected:?}"));
            }
            for replica in &g.servers[1..] {
                let link = replica.info("replication", "master_link_status:");
                if link.as_deref() != Some("up") {
                    return Err(format!("replica {} link {link:?}", replica.port()));
                }
            }
            Ok(())
        });

        let conf = group.sentinel_conf();
        group.sentinels = (0..group.config.sentinels)
            .map(|_| RedisServer::launch(Some(&conf), |_| vec!["--sentinel".to_string()]))
            .collect();

        // Waits until every Sentinel answers and reports the initial master; lists every
        // replica as `slave` with `master-link-status:ok` (from the master's INFO, then the
        // replica's own); lists every other Sentinel, which it learns from their hello
        // messages on the master and replicas (published every 2 s); and `CKQUORUM` is OK
        // (enough reachable Sentinels for the quorum and to authorise a failover).
        let master = group.servers[0].addr();
        let mut replica_ports: Vec<u16> = group.servers[1..].iter().map(|s| s.port()).collect();
        replica_ports.sort_unstable();
        let others = group.config.sentinels - 1;
        let sentinel_count = group.config.sentinels;
        group.wait_for_sentinels("the Sentinels to discover the group", |views| {
            if views.len() != sentinel_count {
                return Err(format!(
                    "{} of {sentinel_count} Sentinels answer",
                    views.len()
                ));
            }
            for view in views {
                let port = view.port;
                if view.master != Some(master) {
                    return Err(format!("Sentinel {port} reports master {:?}", view.master));
                }
                let mut seen: Vec<u16> = Vec::new();
                for replica in &view.replicas {
                    let field = |k: &str| replica.get(k).map(String::as_str).unwrap_or("?");
                    if field("flags") != "slave" || field("master-link-status") != "ok" {
                        return Err(format!("Sentinel {port} sees replica {replica:?}"));
                    }
                    seen.push(field("port").parse().unwrap_or(0));
                }
                seen.sort_unstable();
                if seen != replica_ports {
                    return Err(format!("Sentinel {port} knows replicas {seen:?}"));
                }
                let healthy = view
                    .sentinels
                    .iter()
                    .filter(|s| s.get("flags").map(String::as_str) == Some("sentinel"))
                    .count();
                if healthy != others {
                    return Err(format!("Sentinel {port} knows {healthy} other Sentinels"));
                }
                if let Err(e) = &view.ckquorum {
                    return Err(format!("Sentinel {port}: CKQUORUM {e}"));
                }
            }
            Ok(())
        });
        group
    }

    fn sentinel_conf(&self) -> String {
        let name = &self.name;
        // Addresses only, as below (and the only kind before 6.2, which lacks the directive).
        let resolve = if binary().has_sentinel_resolve_hostnames() {
            "sentinel resolve-hostnames no\n"
        } else {
            ""
        };
        format!(
            "{resolve}\
             sentinel monitor {name} 127.0.0.1 {port} {quorum}\n\
             sentinel down-after-milliseconds {name} {down_after}\n\
             sentinel failover-timeout {name} {failover_timeout}\n\
             sentinel parallel-syncs {name} 1\n",
            port = self.servers[0].port(),
            quorum = self.quorum(),
            down_after = self.config.down_after.as_millis(),
            failover_timeout = self.config.failover_timeout.as_millis(),
        )
    }

    /// The name the Sentinels monitor the master under.
    pub fn master_name(&self) -> &str {
        &self.name
    }

    /// Sentinels that must agree the master is down (a majority of them).
    pub fn quorum(&self) -> usize {
        self.config.sentinels / 2 + 1
    }

    pub fn config(&self) -> &SentinelConfig {
        &self.config
    }

    /// `redis://127.0.0.1:P/` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The Sentinel processes.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The Sentinel processes, to kill, stop or restart some (a restarted Sentinel keeps what
    /// it learnt, from its rewritten config file).
    pub fn sentinels_mut(&mut self) -> &mut [RedisServer] {
        &mut self.sentinels
    }

    /// The data servers: the initial master first, then the replicas (whatever their current
    /// roles).
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The data servers, to kill, stop or restart some. A restarted replica replicates
    /// from the initial master again (its `--replicaof` argument) until a Sentinel
    /// reconfigures it.
    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// The data server at `addr`; panics if none is.
    pub fn server_at(&self, addr: SocketAddr) -> &RedisServer {
        &self.servers[self.index_of(addr)]
    }

    pub fn server_at_mut(&mut self, addr: SocketAddr) -> &mut RedisServer {
        let index = self.index_of(addr);
        &mut self.servers[index]
    }

    /// The master address per `SENTINEL GET-MASTER-ADDR-BY-NAME` on the first Sentinel
    /// that answers.
    pub fn master_addr(&self) -> SocketAddr {
        self.sentinels
            .iter()
            .find_map(|s| {
                master_addr_of(&mut s.try_conn()?, &self.name)
                    .ok()
                    .flatten()
            })
            .unwrap_or_else(|| panic!("no Sentinel reports a master\n{}", self.logs()))
    }

    /// The data server that is master per the Sentinels.
    pub fn master(&self) -> &RedisServer {
        self.server_at(self.master_addr())
    }

    pub fn master_mut(&mut self) -> &mut RedisServer {
        let addr = self.master_addr();
        self.server_at_mut(addr)
    }

    /// A forced failover (`SENTINEL FAILOVER name`, which needs no agreement from the other
    /// Sentinels), waited for until [settled](Self::wait_for_master_change). Returns the old
    /// and new master addresses.
    pub fn failover(&self) -> (SocketAddr, SocketAddr) {
        let old = self.request_failover();
        (old, self.wait_for_master_change(old))
    }

    /// A forced failover, waited for only until every Sentinel that answers reports the new
    /// master (about a second): the old master still claims `role:master` for several
    /// seconds after that, which is the window a client must handle. Returns the old and
    /// new master addresses.
    pub fn failover_switched(&self) -> (SocketAddr, SocketAddr) {
        let old = self.request_failover();
        let new = self.wait_for_sentinels("the Sentinels to switch master", |views| {
            match views.iter().map(|v| v.master).collect::<Vec<_>>()[..] {
                [Some(new), ..] if new != old && views.iter().all(|v| v.master == Some(new)) => {
                    Ok(new)
                }
                _ => Err(format!(
                    "Sentinels report {:?}",
                    views.iter().map(|v| v.master).collect::<Vec<_>>()
                )),
            }
        });
        (old, new)
    }

    /// Waits until the master moved away from `old` (after [`failover`](Self::failover), or
    /// after the master was killed or stopped for longer than `down_after`) and settled:
    /// every Sentinel that answers reports the same new address; that server reports
    /// `role:master`; and every other data server that answers — the old master included,
    /// which a Sentinel demotes only ~8-10 s after the switch (once it has seen it still
    /// claim `role:master` for 8 s) — reports `role:slave` of the new master with its link
    /// up. Returns the new address.
    pub fn wait_for_master_change(&self, old: SocketAddr) -> SocketAddr {
        let deadline = self.config.failover_timeout * 3 + Duration::from_secs(20);
        let new = self.wait_for_sentinels("the Sentinels to switch master", |views| {
            let first = views[0].master;
            if let Some(view) = views.iter().find(|v| v.master != first) {
                return Err(format!(
                    "Sentinels disagree: {:?} vs {:?}",
                    first, view.master
                ));
            }
            match first {
                Some(new) if new != old => Ok(new),
                _ => Err(format!("Sentinels still report {first:?}")),
            }
        });
        let new_port = new.port();
        self.wait_for(
            &format!("{new} to be master and the others its replicas"),
            deadline,
            |g| {
                for server in &g.servers {
                    let is_new = server.port() == new_port;
                    let Some(Replication {
                        role,
                        master_port,
                        link,
                    }) = replication_of(server)?
                    else {
                        if is_new {
                            return Err(format!("new master {new} does not answer"));
                        }
                        continue;
                    };
                    if is_new {
                        if role != "master" {
                            return Err(format!("new master {new} reports role:{role}"));
                        }
                    } else if role != "slave"
                        || master_port != Some(new_port)
                        || link.as_deref() != Some("up")
                    {
                        return Err(format!(
                            "{} reports role:{role} master_port:{master_port:?} link:{link:?}",
                            server.port()
                        ));
                    }
                }
                Ok(())
            },
        );
        new
    }

    /// Sends `SENTINEL FAILOVER` to a Sentinel that answers; returns the master before it.
    fn request_failover(&self) -> SocketAddr {
        let old = self.master_addr();
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.try_conn().is_some())
            .expect("a Sentinel that answers");
        let _: () = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg(&self.name)
            .query(&mut sentinel.conn())
            .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}\n{}", self.logs()));
        old
    }

    /// Every process's log (data servers, then Sentinels), for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (kind, group) in [("server", &self.servers), ("sentinel", &self.sentinels)] {
            for process in group {
                out.push_str(&format!(
                    "\n===== {kind} 127.0.0.1:{} =====\n{}",
                    process.port(),
                    process.log()
                ));
            }
        }
        out
    }

    fn index_of(&self, addr: SocketAddr) -> usize {
        self.servers
            .iter()
            .position(|s| s.addr() == addr)
            .unwrap_or_else(|| panic!("no data server at {addr}"))
    }

    /// Polls `check` until it returns `Ok`; panics after `timeout` with `what`, the last
    /// error and [`logs`](Self::logs).
    fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> Result<T, String>,
    ) -> T {
        let started = Instant::now();
        let mut result = Err("not checked yet".to_string());
        wait_until_every(timeout, POLL, || {
            result = check(self);
            result.is_ok()
        });
        result.unwrap_or_else(|last| {
            panic!(
                "timed out after {:?} waiting for {what}: {last}\n{}",
                started.elapsed(),
                self.logs()
            )
        })
    }

    /// [`wait_for`](Self::wait_for) on the views of the Sentinels that answer (at least one).
    fn wait_for_sentinels<T>(
        &self,
        what: &str,
        mut check: impl FnMut(&[SentinelView]) -> Result<T, String>,
    ) -> T {
        let timeout = self.config.failover_timeout * 3 + Duration::from_secs(20);
        self.wait_for(what, timeout, |g| {
            let mut views = Vec::with_capacity(g.sentinels.len());
            for sentinel in &g.sentinels {
                views.extend(SentinelView::read(sentinel, &g.name)?);
            }
            if views.is_empty() {
                return Err("no Sentinel answers".to_string());
            }
            check(&views)
        })
    }
}

impl Default for SentinelGroup {
    fn default() -> Self {
        Self::new()
    }
}
