//! [`RedisCluster`]: a Redis Cluster of real `redis-server` processes on loopback ports,
//! created with `redis-cli --cluster create`, with live slot migration (including the
//! MIGRATING/IMPORTING middle state that makes nodes answer `-ASK`) and failovers.
//!
//! Every wait polls the nodes (every [`POLL`]) and, on timeout, panics with what it was
//! waiting for, the last unmet condition, each live node's `CLUSTER NODES` and every log.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::binary::binary;
use super::{free_port, info_field, wait_until_every, RedisServer};

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;
/// Default `cluster-node-timeout`: small, so that automatic failovers take a few seconds.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(2000);
/// How often topology waits poll the nodes (each poll opens one connection per node).
const POLL: Duration = Duration::from_millis(50);
/// `MIGRATE` timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5000;
/// Keys moved per `CLUSTER GETKEYSINSLOT` / `MIGRATE ... KEYS` round.
const MIGRATE_BATCH: usize = 100;

/// The hash slot of `key`: CRC16-XMODEM of the key (or of its hash tag, the part between
/// the first `{` and the next `}`, if that is non-empty) modulo 16384, as Redis Cluster
/// computes it.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16_xmodem(hashed) % SLOTS
}

/// CRC16-CCITT in the XMODEM variant (the `crc16` crate's, as the library and redis-rs use).
pub fn crc16_xmodem(data: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(data)
}

/// A free loopback port whose cluster bus port (the port + 10000, before Redis 7.0) is free
/// too, a moment ago.
fn port_with_free_bus_port() -> u16 {
    loop {
        let port = free_port();
        let Some(bus) = port.checked_add(10000) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
}

/// The `redis-cli` binary: `$REDIS_CLI_BIN`, else `redis-cli` next to `$REDIS_SERVER_BIN`,
/// else `redis-cli` from `PATH`.
pub fn redis_cli_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("REDIS_CLI_BIN") {
        return PathBuf::from(bin);
    }
    if let Ok(server) = std::env::var("REDIS_SERVER_BIN") {
        let beside = PathBuf::from(server).with_file_name("redis-cli");
        if beside.is_file() {
            return beside;
        }
    }
    PathBuf::from("redis-cli")
}

/// One `CLUSTER SLOTS` entry, by port (every node is on 127.0.0.1); replicas sorted, since
/// nodes may list them in different orders.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SlotRange {
    start: u16,
    end: u16,
    master: u16,
    replicas: Vec<u16>,
}

/// What one node says about the cluster, read over a single connection.
struct NodeView {
    port: u16,
    cluster_info: String,
    slots: Vec<SlotRange>,
    replication: String,
}

impl NodeView {
    /// `Ok(None)` if the node does not answer at all (killed or stopped: left out of the
    /// checks), `Err` if it answered `PING` but then failed (the poll is retried).
    fn read(node: &RedisServer) -> Result<Option<NodeView>, String> {
        let Some(mut conn) = node.try_conn() else {
            return Ok(None);
        };
        let port = node.port();
        let failed = |e: redis::RedisError| format!("node {port}: {e}");
        let cluster_info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut conn)
            .map_err(failed)?;
        let slots: redis::Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut conn)
            .map_err(failed)?;
        let replication: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .map_err(failed)?;
        Ok(Some(NodeView {
            port,
            cluster_info,
            slots: parse_cluster_slots(&slots)
                .ok_or_else(|| format!("node {port}: unexpected CLUSTER SLOTS {slots:?}"))?,
            replication,
        }))
    }

    /// The views of every node that answers.
    fn read_all(nodes: &[RedisServer]) -> Result<Vec<NodeView>, String> {
        let mut views = Vec::with_capacity(nodes.len());
        for node in nodes {
            views.extend(NodeView::read(node)?);
        }
        Ok(views)
    }

    fn cluster_field(&self, field: &str) -> Option<&str> {
        info_field(&self.cluster_info, field)
    }

    fn state_ok(&self) -> bool {
        self.cluster_field("cluster_state:") == Some("ok")
    }

    fn role(&self) -> Option<&str> {
        info_field(&self.replication, "role:")
    }
}

fn parse_cluster_slots(value: &redis::Value) -> Option<Vec<SlotRange>> {
    fn int(value: &redis::Value) -> Option<i64> {
        match value {
            redis::Value::Int(n) => Some(*n),
            _ => None,
        }
    }
    // A node: [ip, port, id, (metadata)].
    fn port(value: &redis::Value) -> Option<u16> {
        match value {
            redis::Value::Array(items) => u16::try_from(int(items.get(1)?)?).ok(),
            _ => None,
        }
    }
    let redis::Value::Array(entries) = value else {
        return None;
    };
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let redis::Value::Array(items) = entry else {
            return None;
        };
        let mut replicas = items
            .get(3..)?
            .iter()
            .map(port)
            .collect::<Option<Vec<u16>>>()?;
        replicas.sort_unstable();
        ranges.push(SlotRange {
            start: u16::try_from(int(items.first()?)?).ok()?,
            end: u16::try_from(int(items.get(1)?)?).ok()?,
            master: port(items.get(2)?)?,
            replicas,
        });
    }
    ranges.sort_by_key(|r| r.start);
    Some(ranges)
}

fn owner_in(map: &[SlotRange], slot: u16) -> Option<u16> {
    map.iter()
        .find(|r| r.start <= slot && slot <= r.end)
        .map(|r| r.master)
}

/// Checks that every view reports `cluster_state:ok` and the same slot map; returns it.
fn agreed_map(views: &[NodeView]) -> Result<Vec<SlotRange>, String> {
    let first = views.first().ok_or("no node answers")?;
    for view in views {
        if !view.state_ok() {
            return Err(format!(
                "node {} reports cluster_state:{}",
                view.port,
                view.cluster_field("cluster_state:").unwrap_or("?")
            ));
        }
        if view.slots != first.slots {
            return Err(format!(
                "slot maps differ: node {} has {:?}, node {} has {:?}",
                first.port, first.slots, view.port, view.slots
            ));
        }
    }
    Ok(first.slots.clone())
}

/// One line of `CLUSTER NODES`.
struct NodeLine {
    port: u16,
    flags: Vec<String>,
    /// The master's id for a replica, `None` for a master.
    master_id: Option<String>,
}

fn parse_cluster_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            // 127.0.0.1:6379@16379[,hostname]
            let addr = fields.next()?;
            let port = addr.split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let flags = fields.next()?.split(',').map(str::to_string).collect();
            let master_id = Some(fields.next()?)
                .filter(|m| *m != "-")
                .map(str::to_string);
            Some(NodeLine {
                port,
                flags,
                master_id,
            })
        })
        .collect()
}

/// A Redis Cluster of `masters` masters with `replicas_per_master` replicas each, every
/// node a [`RedisServer`] (killed on drop). Node identities are fixed; roles and slot
/// ownership are re-read from the cluster by every accessor.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// `CLUSTER MYID` of each node, parallel to `nodes`.
    ids: Vec<String>,
    node_timeout: Duration,
}

impl RedisCluster {
    /// `masters` (at least 3, as `redis-cli` requires) masters, each with
    /// `replicas_per_master` replicas, and the [`DEFAULT_NODE_TIMEOUT`].
    pub fn new(masters: usize, replicas_per_master: usize) -> Self {
        Self::with_node_timeout(masters, replicas_per_master, DEFAULT_NODE_TIMEOUT)
    }

    /// Like [`new`](Self::new) with a `cluster-node-timeout` of `node_timeout`: a node
    /// unreachable that long is suspected failing, and its replica is promoted a few node
    /// timeouts later.
    pub fn with_node_timeout(
        masters: usize,
        replicas_per_master: usize,
        node_timeout: Duration,
    ) -> Self {
        Self::with_node_args(masters, replicas_per_master, node_timeout, Vec::new)
    }

    /// Like [`new`](Self::new) with `extra()` added to each node's arguments (called once
    /// per node start, so it may pick ports).
    pub fn with_node_args(
        masters: usize,
        replicas_per_master: usize,
        node_timeout: Duration,
        extra: impl Fn() -> Vec<String>,
    ) -> Self {
        assert!(
            masters >= 3,
            "redis-cli --cluster create needs at least 3 masters"
        );
        let total = masters * (1 + replicas_per_master);
        let timeout_ms = node_timeout.as_millis().to_string();
        let binary = binary();
        let nodes: Vec<RedisServer> = (0..total)
            .map(|_| {
                let node_args = |port: u16| {
                    let mut args: Vec<String> = [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        &timeout_ms,
                        // A replica whose link has been down for a while stays eligible.
                        "--cluster-replica-validity-factor",
                        "0",
                        // Nor do replicas wander to other masters: roles change only by
                        // failover. (The barrier alone, before 6.2.)
                        "--cluster-migration-barrier",
                        "999",
                        // A full sync would otherwise wait 5 s for more replicas.
                        "--repl-diskless-sync-delay",
                        "0",
                        // CLUSTER SLOTS lists a replica only once its replication offset
                        // is not 0: after the sync from an idle master, that is the
                        // master's first ping down the link, 10 s later by default.
                        "--repl-ping-replica-period",
                        "1",
                    ]
                    .map(str::to_string)
                    .into();
                    if binary.has_cluster_allow_replica_migration() {
                        // Nor do emptied masters turn into replicas (6.2 and later do).
                        args.extend(["--cluster-allow-replica-migration", "no"].map(String::from));
                    }
                    if binary.has_cluster_port() {
                        // The bus port defaults to port + 10000, which may be taken or above
                        // 65535 for an ephemeral port: pick one.
                        let bus_port = std::iter::repeat_with(free_port)
                            .find(|&p| p != port)
                            .expect("a free port");
                        args.extend(["--cluster-port".to_string(), bus_port.to_string()]);
                    }
                    args.extend(extra());
                    args
                };
                if binary.has_cluster_port() {
                    RedisServer::launch(None, node_args)
                } else {
                    // Before 7.0 the bus port is always port + 10000: pick a port for which
                    // that one is free too.
                    RedisServer::launch_on(port_with_free_bus_port, None, node_args)
                }
            })
            .collect();

        let mut cluster = RedisCluster {
            ids: Vec::new(),
            nodes,
            node_timeout,
        };
        cluster.create(masters, replicas_per_master);
        cluster.ids = cluster
            .nodes
            .iter()
            .map(|node| {
                redis::cmd("CLUSTER")
                    .arg("MYID")
                    .query(&mut node.conn())
                    .expect("CLUSTER MYID")
            })
            .collect();
        cluster
    }

    /// Runs `redis-cli --cluster create` (which assigns the slots to the masters, makes
    /// the nodes meet and attaches the replicas), then waits until the cluster is usable.
    fn create(&self, masters: usize, replicas_per_master: usize) {
        let cli = redis_cli_bin();
        let output = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(
                self.nodes
                    .iter()
                    .map(|node| format!("127.0.0.1:{}", node.port())),
            )
            .args([
                "--cluster-replicas",
                &replicas_per_master.to_string(),
                "--cluster-yes",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{}`: {e}. Cluster tests need redis-cli: install it \
                     (`apt-get install -y redis-tools`), or set REDIS_CLI_BIN=/path/to/redis-cli",
                    cli.display()
                )
            });
        let stdout = String::from_utf8_lossy(&output.stdout);
        // redis-cli exits 0 on some failures, but always ends a success with this line.
        if !output.status.success() || !stdout.contains("[OK] All 16384 slots covered") {
            panic!(
                "redis-cli --cluster create failed ({}):\n{stdout}\n--- stderr ---\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr),
                self.logs()
            );
        }

        // Waits until every node is up, knows all nodes, reports cluster_state:ok (a master
        // does so only ~2 s after its first cluster state update) and the same slot map with
        // `masters` owners and `replicas_per_master` replicas listed under each, and every
        // replica's replication link is up (its first sync is done).
        let total = self.nodes.len();
        self.wait_for(
            "the new cluster to be ok",
            Duration::from_secs(30),
            |views| {
                if views.len() != total {
                    return Err(format!("only {} of {total} nodes answer", views.len()));
                }
                let map = agreed_map(views)?;
                for view in views {
                    let known = view.cluster_field("cluster_known_nodes:");
                    if known != Some(total.to_string().as_str()) {
                        return Err(format!("node {} knows {known:?} nodes", view.port));
                    }
                    let replica_link = info_field(&view.replication, "master_link_status:");
                    if view.role() == Some("slave") && replica_link != Some("up") {
                        return Err(format!("replica {} has link {replica_link:?}", view.port));
                    }
                }
                let mut owners: BTreeMap<u16, usize> = BTreeMap::new();
                for range in &map {
                    owners.insert(range.master, range.replicas.len());
                }
                if owners.len() != masters || owners.values().any(|&r| r != replicas_per_master) {
                    return Err(format!("unexpected masters/replicas in {map:?}"));
                }
                Ok(())
            },
        );
    }

    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// Every node, masters and replicas, in creation order.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Every node, to [`kill`](RedisServer::kill), [`stop`](RedisServer::stop) or
    /// [`restart`](RedisServer::restart) some.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// `redis://127.0.0.1:P/` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The node listening on `port`; panics if none does.
    pub fn node_by_port(&self, port: u16) -> &RedisServer {
        &self.nodes[self.index_of_port(port)]
    }

    /// The cluster node id (`CLUSTER MYID`) of `node`.
    pub fn node_id(&self, node: &RedisServer) -> &str {
        &self.ids[self.index_of_port(node.port())]
    }

    /// The hash slot of `key` (see [`key_slot`]).
    pub fn slot_of(&self, key: impl AsRef<[u8]>) -> u16 {
        key_slot(key.as_ref())
    }

    /// The current masters (not flagged `fail`), per the first node that answers.
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.cluster_nodes()
            .into_iter()
            .filter(|l| {
                l.flags.iter().any(|f| f == "master") && !l.flags.iter().any(|f| f == "fail")
            })
            .map(|l| self.node_by_port(l.port))
            .collect()
    }

    /// The current replicas of `master`, per the first node that answers.
    pub fn replicas_of(&self, master: &RedisServer) -> Vec<&RedisServer> {
        let id = self.node_id(master);
        self.cluster_nodes()
            .into_iter()
            .filter(|l| l.master_id.as_deref() == Some(id))
            .map(|l| self.node_by_port(l.port))
            .collect()
    }

    /// The master currently owning `slot`, per the first node that answers.
    pub fn node_for_slot(&self, slot: u16) -> &RedisServer {
        &self.nodes[self.owner_index(slot)]
    }

    /// [`node_for_slot`](Self::node_for_slot), mutably (e.g. to kill it).
    pub fn node_for_slot_mut(&mut self, slot: u16) -> &mut RedisServer {
        let index = self.owner_index(slot);
        &mut self.nodes[index]
    }

    /// The master currently owning `key`'s slot.
    pub fn node_for_key(&self, key: impl AsRef<[u8]>) -> &RedisServer {
        self.node_for_slot(key_slot(key.as_ref()))
    }

    /// Moves `slot` from its owner to the master `to`, keys included, and waits until every
    /// node agrees that `to` owns it.
    pub fn migrate_slot(&self, slot: u16, to: &RedisServer) {
        self.begin_migration(slot, to).finish();
    }

    /// Starts moving `slot` to the master `to`: marks it `IMPORTING` on `to` and then
    /// `MIGRATING` on its owner. Until [`Migration::finish`], the owner still serves the keys
    /// it holds and answers `-ASK` for the others (those moved by [`Migration::move_keys`]
    /// or never written), and `to` answers those only after `ASKING`.
    pub fn begin_migration(&self, slot: u16, to: &RedisServer) -> Migration<'_> {
        let source = self.owner_index(slot);
        let target = self.index_of_port(to.port());
        assert_ne!(source, target, "slot {slot} is already on {}", to.port());
        setslot(&self.nodes[target], slot, "IMPORTING", &self.ids[source]);
        setslot(&self.nodes[source], slot, "MIGRATING", &self.ids[target]);
        Migration {
            cluster: self,
            slot,
            source,
            target,
        }
    }

    /// A manual failover: `CLUSTER FAILOVER` on `replica`, which waits for the replication
    /// offset to catch up with its master's, then takes over the master's slots. Waits until
    /// `replica` reports `role:master`, its old master (if it answers) `role:slave`, and every
    /// live node reports `cluster_state:ok` and the same slot map, with `replica` owning slots.
    pub fn failover(&self, replica: &RedisServer) {
        let index = self.index_of_port(replica.port());
        let mine = self
            .cluster_nodes_of(replica)
            .into_iter()
            .find(|l| l.port == replica.port())
            .expect("a node lists itself in CLUSTER NODES");
        let old_master = mine
            .master_id
            .as_deref()
            .map(|id| {
                self.ids
                    .iter()
                    .position(|i| i == id)
                    .expect("known master id")
            })
            .unwrap_or_else(|| panic!("node {} is not a replica", replica.port()));
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut self.nodes[index].conn())
            .expect("CLUSTER FAILOVER");
        let old_port = self.nodes[old_master].port();
        self.wait_for(
            &format!("replica {} to take over from {old_port}", replica.port()),
            self.failover_deadline(),
            |views| {
                let map = agreed_map(views)?;
                let role_of = |port| {
                    views
                        .iter()
                        .find(|v| v.port == port)
                        .and_then(NodeView::role)
                };
                if role_of(replica.port()) != Some("master") {
                    return Err(format!("{} is not master yet", replica.port()));
                }
                if views.iter().any(|v| v.port == old_port) && role_of(old_port) != Some("slave") {
                    return Err(format!("old master {old_port} is not a replica yet"));
                }
                if !map.iter().any(|r| r.master == replica.port()) {
                    return Err(format!("{} owns no slots in {map:?}", replica.port()));
                }
                Ok(())
            },
        );
    }

    /// After the owner of `slot` was killed or stopped: waits for the automatic failover,
    /// i.e. until `slot` is owned by a master that answers and reports `role:master`, and
    /// every node that answers reports `cluster_state:ok` and the same slot map. Returns the
    /// new owner. (Failure detection takes one node timeout, then a majority of masters must
    /// agree and the replica waits 0.5-1 s before its election.)
    pub fn wait_for_failover(&self, slot: u16) -> &RedisServer {
        let port = self.wait_for(
            &format!("a live master for slot {slot}"),
            self.failover_deadline(),
            |views| {
                let map = agreed_map(views)?;
                let owner = owner_in(&map, slot).ok_or(format!("slot {slot} is unassigned"))?;
                match views.iter().find(|v| v.port == owner) {
                    Some(view) if view.role() == Some("master") => Ok(owner),
                    Some(_) => Err(format!("owner {owner} of slot {slot} is not master")),
                    None => Err(format!("owner {owner} of slot {slot} does not answer")),
                }
            },
        );
        self.node_by_port(port)
    }

    /// Waits until every node that answers reports `cluster_state:ok` and the same slot map.
    pub fn wait_until_stable(&self) {
        self.wait_for(
            "the cluster to be stable",
            self.failover_deadline(),
            |views| agreed_map(views).map(drop),
        );
    }

    /// Every node's `CLUSTER NODES` (if it answers) and `redis.log`, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let id = self.ids.get(i).map(String::as_str).unwrap_or("?");
            out.push_str(&format!(
                "\n===== node 127.0.0.1:{} ({id}) =====\n",
                node.port()
            ));
            if let Some(mut conn) = node.try_conn() {
                let nodes: redis::RedisResult<String> =
                    redis::cmd("CLUSTER").arg("NODES").query(&mut conn);
                out.push_str(&format!(
                    "--- CLUSTER NODES ---\n{}\n",
                    nodes.unwrap_or_default()
                ));
            } else {
                out.push_str("(does not answer)\n");
            }
            out.push_str("--- redis.log ---\n");
            out.push_str(&node.log());
        }
        out
    }

    /// Polls the views of every node that answers until `check` returns `Ok`; panics after
    /// `timeout` with `what`, the last error and [`logs`](Self::logs).
    fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&[NodeView]) -> Result<T, String>,
    ) -> T {
        let started = Instant::now();
        let mut result = Err("not checked yet".to_string());
        wait_until_every(timeout, POLL, || {
            result = NodeView::read_all(&self.nodes).and_then(|views| check(&views));
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

    /// Generous bound on a failover: detection, election and gossip take a few node timeouts.
    fn failover_deadline(&self) -> Duration {
        Duration::from_secs(15) + self.node_timeout * 10
    }

    fn index_of_port(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    fn owner_index(&self, slot: u16) -> usize {
        assert!(slot < SLOTS, "slot {slot} out of range");
        let map = self
            .nodes
            .iter()
            .find_map(|node| NodeView::read(node).ok().flatten())
            .unwrap_or_else(|| panic!("no cluster node answers\n{}", self.logs()))
            .slots;
        let port =
            owner_in(&map, slot).unwrap_or_else(|| panic!("slot {slot} is unassigned in {map:?}"));
        self.index_of_port(port)
    }

    /// `CLUSTER NODES` of the first node that answers.
    fn cluster_nodes(&self) -> Vec<NodeLine> {
        let node = self
            .nodes
            .iter()
            .find(|n| n.try_conn().is_some())
            .unwrap_or_else(|| panic!("no cluster node answers\n{}", self.logs()));
        self.cluster_nodes_of(node)
    }

    fn cluster_nodes_of(&self, node: &RedisServer) -> Vec<NodeLine> {
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut node.conn())
            .expect("CLUSTER NODES");
        parse_cluster_nodes(&text)
    }
}

fn setslot(node: &RedisServer, slot: u16, subcommand: &str, id: &str) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(subcommand)
        .arg(id)
        .query(&mut node.conn())
        .unwrap_or_else(|e| {
            panic!(
                "CLUSTER SETSLOT {slot} {subcommand} {id} on {}: {e}",
                node.port()
            )
        });
}

/// A slot in the middle of a live migration (`MIGRATING` on its source, `IMPORTING` on its
/// target), from [`RedisCluster::begin_migration`]. Dropping it without
/// [`finish`](Self::finish) leaves the slot in that state.
pub struct Migration<'a> {
    cluster: &'a RedisCluster,
    slot: u16,
    source: usize,
    target: usize,
}

impl Migration<'_> {
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The node the slot is moving from (it still owns it until `finish`).
    pub fn source(&self) -> &RedisServer {
        &self.cluster.nodes[self.source]
    }

    /// The node the slot is moving to.
    pub fn target(&self) -> &RedisServer {
        &self.cluster.nodes[self.target]
    }

    /// Moves one key of the slot to the target (`MIGRATE ... KEYS key`); `false` if the
    /// source did not hold it.
    pub fn move_key(&self, key: &str) -> bool {
        assert_eq!(
            key_slot(key.as_bytes()),
            self.slot,
            "{key} is not in the slot"
        );
        self.migrate(&[key.to_string()])
    }

    /// Moves every key the source still holds in the slot to the target
    /// (`CLUSTER GETKEYSINSLOT` + `MIGRATE ... KEYS`, until none is left); returns how many.
    pub fn move_keys(&self) -> usize {
        let mut conn = self.source().conn();
        let mut moved = 0;
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(MIGRATE_BATCH)
                .query(&mut conn)
                .expect("CLUSTER GETKEYSINSLOT");
            if keys.is_empty() {
                return moved;
            }
            self.migrate(&keys);
            moved += keys.len();
        }
    }

    /// Moves the remaining keys, then assigns the slot to the target with
    /// `CLUSTER SETSLOT slot NODE target-id` on the target, the source and every other
    /// master, and waits until every node that answers agrees that the target owns it.
    pub fn finish(self) {
        self.move_keys();
        let cluster = self.cluster;
        let target_id = &cluster.ids[self.target];
        setslot(self.target(), self.slot, "NODE", target_id);
        setslot(self.source(), self.slot, "NODE", target_id);
        let (source_port, target_port) = (self.source().port(), self.target().port());
        for master in cluster.masters() {
            if master.port() != source_port && master.port() != target_port {
                setslot(master, self.slot, "NODE", target_id);
            }
        }
        let slot = self.slot;
        cluster.wait_for(
            &format!("slot {slot} to move to {target_port}"),
            Duration::from_secs(15),
            |views| {
                let map = agreed_map(views)?;
                match owner_in(&map, slot) {
                    Some(owner) if owner == target_port => Ok(()),
                    owner => Err(format!("slot {slot} still on {owner:?}")),
                }
            },
        );
    }

    fn migrate(&self, keys: &[String]) -> bool {
        let reply: String = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(self.target().port())
            .arg("")
            .arg(0)
            .arg(MIGRATE_TIMEOUT_MS)
            .arg("KEYS")
            .arg(keys)
            .query(&mut self.source().conn())
            .unwrap_or_else(|e| panic!("MIGRATE of {keys:?}: {e}"));
        reply == "OK"
    }
}
