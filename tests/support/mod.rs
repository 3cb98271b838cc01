//! Shared integration-test harness: real `redis-server` processes on free loopback ports.
//!
//! Each [`RedisServer`] owns its process and a temp dir (holding `redis.log`); both are cleaned up on
//! drop. Fault tests may [`kill`](RedisServer::kill), [`restart`](RedisServer::restart),
//! [`stop`](RedisServer::stop) and [`cont`](RedisServer::cont) their own servers only.
#![allow(dead_code)]

pub mod acl;
pub mod binary;
pub mod child;
pub mod cluster;
pub mod forget;
pub mod java;
pub mod proxy;
pub mod pty;
pub mod sentinel;
pub mod tls;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a freshly started server has to answer `PING`.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// How many fresh ports to try when the picked one was taken before the server bound it.
const PORT_ATTEMPTS: usize = 5;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A `redis-server` child process on `127.0.0.1`, killed (SIGKILL) and its temp dir removed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
    /// Passed as the first argument (`redis-server <file> ...`), e.g. a sentinel's config.
    config_file: Option<PathBuf>,
}

impl RedisServer {
    /// Starts a server with the default arguments, panicking (with its log) if it does not answer `PING`.
    pub fn new() -> Self {
        Self::with_args(&[])
    }

    /// Starts a server with extra command-line arguments, e.g. `&["--maxclients", "10"]`.
    pub fn with_args(extra_args: &[&str]) -> Self {
        let extra_args: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
        Self::launch(None, |_| extra_args.clone())
    }

    /// Starts `redis-server [<dir>/redis.conf] <default args> <extra args>`: `config`, if
    /// given, is written to `redis.conf` in the server's temp dir (where it stays writable,
    /// as sentinels need); `extra_args` gets the picked port and is called again on each
    /// retry, so it may pick further ports (e.g. a cluster bus port) itself.
    pub(crate) fn launch(config: Option<&str>, extra_args: impl Fn(u16) -> Vec<String>) -> Self {
        Self::launch_on(free_port, config, extra_args)
    }

    /// As [`launch`](Self::launch), on a port that `pick` gives (asked again on each retry).
    pub(crate) fn launch_on(
        pick: impl Fn() -> u16,
        config: Option<&str>,
        extra_args: impl Fn(u16) -> Vec<String>,
    ) -> Self {
        let mut last_log = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = pick();
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!(
                "redlatch-test-{}-{}-{}",
                std::process::id(),
                n,
                port
            ));
            std::fs::create_dir_all(&dir).expect("create redis temp dir");
            let config_file = config.map(|text| {
                let file = dir.join("redis.conf");
                std::fs::write(&file, text).expect("write redis.conf");
                file
            });
            let mut server = RedisServer {
                child: None,
                port,
                dir,
                extra_args: extra_args(port),
                config_file,
            };
            server.spawn();
            match server.wait_for_ping() {
                Ok(()) => return server,
                // Most likely the port was taken between picking and binding: try another one.
                Err(log) => last_log = log,
            }
        }
        panic!("redis-server did not answer PING after {PORT_ATTEMPTS} attempts; last log:\n{last_log}");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `redis://127.0.0.1:P/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis url")
    }

    /// A raw connection, for inspecting server state independently of the code under test.
    pub fn conn(&self) -> redis::Connection {
        self.client()
            .get_connection()
            .expect("connect to test redis-server")
    }

    /// A connection with short (1 s) timeouts that has answered `PING`, or `None` if the
    /// server was killed, is stopped or does not answer: for polling the topology of many
    /// servers without hanging on a stopped one.
    pub fn try_conn(&self) -> Option<redis::Connection> {
        const QUICK: Duration = Duration::from_secs(1);
        if !self.is_running() {
            return None;
        }
        let mut conn = self.client().get_connection_with_timeout(QUICK).ok()?;
        conn.set_read_timeout(Some(QUICK)).ok()?;
        conn.set_write_timeout(Some(QUICK)).ok()?;
        redis::cmd("PING").exec(&mut conn).ok()?;
        Some(conn)
    }

    /// Process id of the running server; panics if it was killed.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .expect("redis-server is not running")
            .id()
    }

    /// SIGKILLs the server and reaps it. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server if still running, then starts it again on the same port with the same
    /// arguments and waits for `PING`.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            self.spawn();
            match self.wait_for_ping() {
                Ok(()) => return,
                // The old socket may linger briefly; retry until the deadline.
                Err(log) if Instant::now() >= deadline => {
                    panic!(
                        "redis-server did not restart on port {}; log:\n{log}",
                        self.port
                    )
                }
                Err(_) => thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Pauses the server with SIGSTOP: connections stay open but nothing is answered.
    pub fn stop(&self) {
        self.signal("-STOP");
    }

    /// Resumes a server paused by [`stop`](Self::stop) (SIGCONT).
    pub fn cont(&self) {
        self.signal("-CONT");
    }

    /// Starts a replica of `master` and waits until its first sync is done and the master
    /// counts it as connected.
    pub fn replica_of(master: &RedisServer) -> RedisServer {
        // Diskless full sync waits 5 s by default for more replicas to join: not here.
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-diskless-sync-delay")
            .arg(0)
            .query(&mut master.conn())
            .expect("CONFIG SET on the master");
        let port = master.port().to_string();
        let replica = RedisServer::with_args(&["--replicaof", "127.0.0.1", &port]);
        // Linked is not enough: the master counts the replica for WAIT only once it is
        // online and has acknowledged an offset (up to a second after the link is up).
        let mut on_master = master.conn();
        let counted = wait_until(Duration::from_secs(10), || {
            let acked: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(100)
                .query(&mut on_master)
                .expect("WAIT on the master");
            acked >= 1
        });
        assert!(
            counted,
            "replica did not link up; its log:\n{}",
            replica.log()
        );
        replica
    }

    /// On a replica: cuts its link to the master for good (until `REPLICAOF` is sent
    /// again). The replica reconnects every second, so it is made to fail authentication:
    /// writes on the master reach it no more, deterministically.
    pub fn cut_replication(&self) {
        let mut conn = self.conn();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("masterauth")
            .arg("not-the-password")
            .query(&mut conn)
            .expect("CONFIG SET masterauth");
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("master")
            .query(&mut conn)
            .expect("CLIENT KILL TYPE master");
        assert!(wait_until(Duration::from_secs(5), || {
            self.info("replication", "master_link_status:").as_deref() == Some("down")
        }));
    }

    /// On a replica: makes it a master (`REPLICAOF NO ONE`), as a failover would.
    pub fn promote(&self) {
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query(&mut self.conn())
            .expect("REPLICAOF NO ONE");
    }

    /// The value of `field` (e.g. `"role:"`) in `INFO section`; `None` if absent or the
    /// server does not answer.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let mut conn = self.client().get_connection().ok()?;
        let info: String = redis::cmd("INFO").arg(section).query(&mut conn).ok()?;
        info_field(&info, field).map(str::to_owned)
    }

    /// Contents of the server's log file (empty if not written yet).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// Whether the process was started and not killed since (a stopped one counts as running).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {sig} {} failed", self.pid());
    }

    fn spawn(&mut self) {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string());
        let port = self.port.to_string();
        let log = self.dir.join("redis.log");
        // Config errors go to stderr before the log file is opened: keep them for failure messages.
        let stdio = std::fs::File::create(self.dir.join("stdio.log")).expect("create stdio.log");
        let stdio2 = stdio.try_clone().expect("clone stdio.log handle");
        let mut command = Command::new(&bin);
        if let Some(config_file) = &self.config_file {
            command.arg(config_file);
        }
        let child = command
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--port", &port])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(stdio)
            .stderr(stdio2)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{bin}`: {e}. Integration tests need a redis-server binary: \
                     install it (`apt-get install -y redis-server`) or set REDIS_SERVER_BIN=/path/to/redis-server"
                )
            });
        self.child = Some(child);
    }

    /// Waits until the server answers `PING` (itself, not another process on its port); on failure kills it and returns its log and stdio.
    fn wait_for_ping(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        while Instant::now() < deadline {
            let pid = self.child.as_ref().map(Child::id);
            if pid.is_some_and(|pid| answers(self.addr(), pid)) {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        let stdio = std::fs::read_to_string(self.dir.join("stdio.log")).unwrap_or_default();
        Err(format!("{}\n--- stdout/stderr ---\n{stdio}", self.log()))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Whether the server on `addr` answers `PING` and is the process `pid`: a port picked as
/// free may be taken by another test's server before ours binds it (ours then exits), and
/// that server answers too. Raw RESP, so that a server still loading (`-LOADING`) is not
/// taken for up.
fn answers(addr: SocketAddr, pid: u32) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
        stream.set_read_timeout(Some(Duration::from_millis(500)))?;
        (&stream).write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")?;
        let mut reader = BufReader::new(&stream);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line != "+PONG\r\n" {
            return Ok(false);
        }
        line.clear();
        reader.read_line(&mut line)?;
        let Some(len) = line
            .trim_end()
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return Ok(false);
        };
        let mut info = vec![0; len];
        reader.read_exact(&mut info)?;
        let info = String::from_utf8_lossy(&info);
        Ok(info_field(&info, "process_id:") == Some(pid.to_string().as_str()))
    };
    attempt().unwrap_or(false)
}

/// `total_commands_processed`, less the `PING`s (a client's check of its pub/sub connection
/// while a thread waits: one per `pubsub_ping_interval`, whatever the number of waiters),
/// from one `INFO all` (which counts itself too).
pub fn count_commands(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("all").query(conn).expect("INFO all");
    let total: u64 = info_field(&info, "total_commands_processed:")
        .and_then(|v| v.parse().ok())
        .expect("total_commands_processed in INFO all");
    total - command_stat(&info, "ping", "calls")
}

/// Asserts that for `window` the server runs no command but our own `INFO` calls (and the
/// `PING`s of pub/sub connections, see [`count_commands`]); on failure names the commands
/// that ran, with the clients connected.
pub fn assert_quiet_for(conn: &mut redis::Connection, window: Duration, what: &str) {
    let info = |conn: &mut redis::Connection| -> String {
        redis::cmd("INFO").arg("all").query(conn).expect("INFO all")
    };
    let before = info(conn);
    std::thread::sleep(window);
    let after = info(conn);
    let total = |info: &str| -> u64 {
        let all: u64 = info_field(info, "total_commands_processed:")
            .and_then(|v| v.parse().ok())
            .expect("total_commands_processed in INFO all");
        all - command_stat(info, "ping", "calls")
    };
    // The second INFO reads a total that counts the first and nothing else.
    if total(&after) - total(&before) == 1 {
        return;
    }
    let calls = |info: &str| -> std::collections::BTreeMap<String, u64> {
        info.lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .filter_map(|l| {
                let (name, stats) = l.split_once(':')?;
                let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
                Some((name.to_owned(), calls.trim().parse().ok()?))
            })
            .collect()
    };
    let was = calls(&before);
    let ran: Vec<String> = calls(&after)
        .into_iter()
        .filter_map(|(name, n)| {
            let more = n - was.get(&name).copied().unwrap_or(0);
            (more > 0).then(|| format!("{name} x{more}"))
        })
        .collect();
    panic!(
        "{what}: {} commands in {window:?} besides our INFO: {}\nclients:\n{}",
        total(&after) - total(&before) - 1,
        ran.join(", "),
        client_list(conn).join("\n")
    );
}

/// A client of `server` with the default configuration.
pub fn client(server: &RedisServer) -> redlatch::Client {
    client_with(server, |builder| builder)
}

/// A client of `server` with the configuration `tune` makes of the default one, e.g.
/// `client_with(&server, |b| b.watchdog_timeout(lease))`.
pub fn client_with(
    server: &RedisServer,
    tune: impl FnOnce(redlatch::ConfigBuilder) -> redlatch::ConfigBuilder,
) -> redlatch::Client {
    let config = tune(redlatch::Config::builder(server.url()))
        .build()
        .expect("valid test config");
    redlatch::Client::new(config).expect("create a client")
}

/// A client of `server` that gives up on a connection or a reply after 500 ms: for tests
/// that kill, stop or cut off servers.
pub fn quick_client(server: &RedisServer) -> redlatch::Client {
    const QUICK: Duration = Duration::from_millis(500);
    client_with(server, |b| b.connect_timeout(QUICK).response_timeout(QUICK))
}

/// Whether `key` exists on the server of `conn` (`EXISTS`).
pub fn key_exists(conn: &mut redis::Connection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS").arg(key).query(conn).expect("EXISTS");
    n == 1
}

/// Lines of `CLIENT LIST`, one per connected client.
pub fn client_list(conn: &mut redis::Connection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(conn)
        .expect("CLIENT LIST");
    list.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// How often command `name` (case-insensitive, e.g. `"evalsha"`) was called, from `INFO commandstats`;
/// 0 if it was never called.
pub fn command_calls(conn: &mut redis::Connection, name: &str) -> u64 {
    command_stat(&command_stats(conn), name, "calls")
}

fn command_stats(conn: &mut redis::Connection) -> String {
    redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats")
}

/// Field `key` (e.g. `"calls"`) of command `name` in `INFO commandstats`; 0 if absent.
fn command_stat(info: &str, name: &str, key: &str) -> u64 {
    let prefix = format!("cmdstat_{}:", name.to_ascii_lowercase());
    info_field(info, &prefix)
        .and_then(|stats| {
            stats
                .split(',')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn info_field<'a>(info: &'a str, prefix: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.trim_end().strip_prefix(prefix))
}

/// Polls `f` every 5 ms until it returns true or `timeout` elapses; returns the last result.
///
/// For observing raw server state (e.g. a key expiring, a client disconnecting) only: never use it to
/// wait on the crate's own behaviour, which tests must synchronise on through its API (as
/// [`await_waiting`] does, on the gauge the client keeps for it).
pub fn wait_until(timeout: Duration, f: impl FnMut() -> bool) -> bool {
    wait_until_every(timeout, Duration::from_millis(5), f)
}

/// How long [`await_waiting`] waits before it fails the test.
const AWAIT_BOUND: Duration = Duration::from_secs(10);

/// Waits until exactly `n` threads of `client` are blocked in a wait (its `waiting` gauge):
/// each has tried, subscribed, tried again once the subscription was confirmed (its re-check),
/// and blocks, so a release published from then on wakes it. Panics with the count it saw
/// after 10 s. The gauge is per client: threads of several clients are awaited client by
/// client.
pub fn await_waiting(client: &redlatch::Client, n: u64) {
    let mut seen = 0;
    let reached = wait_until(AWAIT_BOUND, || {
        seen = client.metrics().waiting;
        seen == n
    });
    assert!(
        reached,
        "{n} waiting thread(s) awaited, the client counts {seen}"
    );
}

/// [`wait_until`], polling every `interval`: for checks that open connections to many
/// servers (cluster and sentinel topology), which a 5 ms loop would churn through.
pub fn wait_until_every(
    timeout: Duration,
    interval: Duration,
    mut f: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(interval);
    }
}

/// Closes every pub/sub connection of the server (`CLIENT KILL TYPE pubsub`); returns how many.
pub fn kill_pubsub_connections(conn: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(conn)
        .expect("CLIENT KILL TYPE pubsub")
}

/// Number of subscribers the server counts on `channel` (`PUBSUB NUMSUB`).
pub fn numsub(conn: &mut redis::Connection, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(conn)
        .expect("PUBSUB NUMSUB");
    reply.1
}

/// Number of subscribers the server counts on `channel`: sharded ones (`PUBSUB
/// SHARDNUMSUB`) if `sharded`, else plain ones (`PUBSUB NUMSUB`).
pub fn subscribers(conn: &mut redis::Connection, channel: &str, sharded: bool) -> i64 {
    let which = if sharded { "SHARDNUMSUB" } else { "NUMSUB" };
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg(which)
        .arg(channel)
        .query(conn)
        .unwrap_or_else(|e| panic!("PUBSUB {which}: {e}"));
    reply.1
}

/// Whether a cluster client in the default mode
/// ([`ShardedSubscriptionMode::Auto`](redlatch::ShardedSubscriptionMode::Auto)) uses sharded
/// pub/sub on the server under test: where the server has it.
pub fn auto_is_sharded() -> bool {
    binary::binary()
        .lacks(binary::Need::ShardedPubSub)
        .is_none()
}

/// The constructor of one lock kind: `Client::lock` or `Client::fair_lock`.
pub type MakeLock = fn(&redlatch::Client, &str) -> redlatch::Lock;

/// Defines each test once per lock kind, as `reentrant::NAME` and `fair::NAME`; the body gets
/// the kind's constructor under the given name (`fn NAME(make) { .. make(&client, "x") .. }`).
#[macro_export]
macro_rules! for_each_kind {
    ($($(#[$meta:meta])* fn $name:ident($make:ident) $body:block)*) => {
        mod reentrant {
            #[allow(unused_imports)]
            use super::*;
            $($(#[$meta])* #[test] fn $name() {
                let $make: $crate::support::MakeLock = $crate::support::make_lock;
                $body
            })*
        }
        mod fair {
            #[allow(unused_imports)]
            use super::*;
            $($(#[$meta])* #[test] fn $name() {
                let $make: $crate::support::MakeLock = $crate::support::make_fair_lock;
                $body
            })*
        }
    };
}

/// Joins every thread, panicking with `what` if they have not all finished within `timeout`
/// (a deadlock or a stall would otherwise hang the test run).
pub fn join_within<T>(
    handles: Vec<thread::JoinHandle<T>>,
    timeout: Duration,
    what: &str,
) -> Vec<T> {
    let deadline = Instant::now() + timeout;
    handles
        .into_iter()
        .map(|h| {
            while !h.is_finished() {
                assert!(Instant::now() < deadline, "{what}");
                thread::sleep(Duration::from_millis(20));
            }
            h.join().unwrap()
        })
        .collect()
}

/// Queues `n` threads of `client` on the fair lock `name` (held elsewhere), one after the
/// other so that their order is known; each takes and releases the lock once it is its turn.
/// Returns their owner ids in queue order, and the threads.
pub fn queue_fair_waiters(
    client: &redlatch::Client,
    name: &'static str,
    n: usize,
) -> (Vec<String>, Vec<thread::JoinHandle<()>>) {
    let mut owners = Vec::new();
    let mut waiters = Vec::new();
    for place in 1..=n {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = client.clone();
        waiters.push(thread::spawn(move || {
            tx.send(waiter.owner_id()).unwrap();
            waiter.fair_lock(name).lock().unwrap().unlock().unwrap();
        }));
        owners.push(rx.recv().unwrap());
        assert!(wait_until(Duration::from_secs(10), || {
            client
                .inspect(name)
                .unwrap()
                .is_some_and(|i| i.queue.len() == place)
        }));
    }
    (owners, waiters)
}

/// Threads of this process whose name starts with `redlatch-` (a test that counts them must
/// be alone in its test binary).
pub fn redlatch_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("redlatch-"))
        .count()
}

/// Connections to the server at `port` holding bytes it has not read yet (while it is paused
/// with SIGSTOP): how many connections a client has written calls on.
pub fn unread_connections(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let hex = |s: Option<&str>| s.and_then(|h| usize::from_str_radix(h, 16).ok());
            let local_port = hex(fields[1].rsplit(':').next());
            let unread = hex(fields[4].split(':').nth(1));
            local_port == Some(usize::from(port)) && fields[3] == "01" && unread > Some(0)
        })
        .count()
}

/// The lock constructors as [`MakeLock`] values (the `Client` methods take any
/// `impl AsRef<str>`, so they are not `fn` pointers themselves).
pub fn make_lock(c: &redlatch::Client, name: &str) -> redlatch::Lock {
    c.lock(name)
}

pub fn make_fair_lock(c: &redlatch::Client, name: &str) -> redlatch::Lock {
    c.fair_lock(name)
}

pub fn make_fenced_lock(c: &redlatch::Client, name: &str) -> redlatch::Lock {
    c.fenced_lock(name)
}

pub fn make_non_reentrant_lock(c: &redlatch::Client, name: &str) -> redlatch::Lock {
    c.non_reentrant_lock(name)
}

pub fn make_non_reentrant_fair_lock(c: &redlatch::Client, name: &str) -> redlatch::Lock {
    c.non_reentrant_fair_lock(name)
}

/// The entries of a rate limiter's ZSET `key`, by member, as (permits, score in ms):
/// Redisson's `struct.pack('Bc0I', #random, random, permits)`, written by either side.
pub fn rate_entries(
    conn: &mut redis::Connection,
    key: &str,
) -> std::collections::HashMap<Vec<u8>, (u32, u64)> {
    let members: Vec<(Vec<u8>, u64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(conn)
        .unwrap();
    members
        .into_iter()
        .map(|(m, score)| {
            let n = m[0] as usize;
            assert_eq!(m.len(), 1 + n + 4, "member {m:?}");
            let permits = u32::from_le_bytes(m[1 + n..].try_into().unwrap());
            (m, (permits, score))
        })
        .collect()
}
