//! The master that Redis Sentinel names, looked up again for every new connection, and the
//! watcher that hears of a switch at once.
//!
//! Why not `redis::sentinel::SentinelClient`: it sets no connect or read timeout on the
//! sentinel, probe and master connections (a paused sentinel would hang the caller), and it
//! opens a second connection to the master after probing it. Here every step is bounded by
//! the client's timeouts, and the `ROLE` check runs on the connection that is then used.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use redis::{ConnectionInfo, RedisConnectionInfo};

use super::endpoint::{open, Endpoint};
use crate::error::{Error, Result};
use crate::net::Tls;
use crate::pubsub::Address;

/// The master the sentinels name `master`: an [`Endpoint`] whose server changes on failover.
pub(crate) struct Sentinel {
    sentinels: Vec<ConnectionInfo>,
    master: String,
    node: RedisConnectionInfo,
    /// TLS for the master (on with `rediss://` sentinels).
    tls: Tls,
    /// The sentinel that answered last: asked first next time.
    last_good: AtomicUsize,
    /// Bumped when the sentinels switch the master: connections opened before are dropped.
    generation: AtomicU64,
    /// Called after each switch (the pub/sub dispatcher reconnects).
    on_switch: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// Set when the client closes: the watcher stops (within a watch tick).
    closed: AtomicBool,
}

impl Sentinel {
    pub(crate) fn new(
        sentinels: Vec<ConnectionInfo>,
        master: String,
        node: RedisConnectionInfo,
        tls: Tls,
    ) -> Sentinel {
        Sentinel {
            sentinels,
            master,
            node,
            tls,
            last_good: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            on_switch: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }
    }

    /// Starts the thread that listens to the sentinels' `+switch-master` and retires the
    /// connections to the old master at once (the old master keeps accepting writes until
    /// the sentinels demote it, seconds later). It stops when the endpoint is dropped.
    pub(crate) fn watch(self: &Arc<Self>, connect: Duration) -> Result<()> {
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("redlatch-sentinel".into())
            .spawn(move || watch_switches(weak, connect))
            .map(drop)
            .map_err(|e| Error::invalid(format!("cannot spawn the sentinel watcher: {e}")))
    }
}

impl Endpoint for Sentinel {
    /// Opens a connection to the master the sentinels name, checked with `ROLE`.
    fn connect(&self, connect: Duration, response: Duration) -> Result<redis::Connection> {
        let info = self.master_address(connect, response)?;
        let mut conn = open(&info, connect, response)?;
        let role: Vec<redis::Value> = redis::cmd("ROLE")
            .query(&mut conn)
            .map_err(|e| Error::from_redis(e, "").connecting_to(&info.addr().to_string()))?;
        match role.first() {
            Some(redis::Value::BulkString(r)) if r == b"master" => Ok(conn),
            _ => Err(not_yet(format!(
                "sentinels name {} as master `{}`, but it is not a master (yet)",
                info.addr(),
                self.master
            ))),
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn on_switch(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.on_switch.lock().push(f);
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

impl Address for Sentinel {
    fn resolve(&self, connect: Duration, response: Duration) -> Result<ConnectionInfo> {
        // Probe it as a command connection would, so pub/sub follows the same master.
        drop(self.connect(connect, response)?);
        self.master_address(connect, response)
    }

    fn describe(&self) -> String {
        format!("sentinel master `{}`", self.master)
    }
}

impl Sentinel {
    /// Asks the sentinels in turn (the last one that answered first) for the master's address.
    fn master_address(&self, connect: Duration, response: Duration) -> Result<ConnectionInfo> {
        let n = self.sentinels.len();
        let first = self.last_good.load(Ordering::Relaxed) % n;
        let mut failures = Vec::new();
        for i in (0..n).map(|k| (first + k) % n) {
            let sentinel = &self.sentinels[i];
            let asked = open(sentinel, connect, response).and_then(|mut conn| {
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.master)
                    .query::<Option<(String, u16)>>(&mut conn)
                    .map_err(|e| Error::from_redis(e, ""))
            });
            match asked {
                Ok(Some((host, port))) => {
                    self.last_good.store(i, Ordering::Relaxed);
                    return self.tls.address(host, port, self.node.clone());
                }
                Ok(None) => failures.push(format!("{}: unknown master", sentinel.addr())),
                Err(e) => failures.push(e.text_at(&sentinel.addr().to_string())),
            }
        }
        Err(not_yet(format!(
            "no sentinel named a master `{}` ({})",
            self.master,
            failures.join("; ")
        )))
    }
}

/// How often the watcher looks up whether its endpoint is gone (it has no other way to hear
/// of it while blocked reading), and how long it waits between reconnects.
const WATCH_TICK: Duration = Duration::from_secs(1);

/// Runs `f` on the sentinel endpoint if it still exists.
fn with_sentinel<R>(target: &Weak<Sentinel>, f: impl FnOnce(&Sentinel) -> R) -> Option<R> {
    target
        .upgrade()
        .filter(|s| !s.closed.load(Ordering::SeqCst))
        .map(|s| f(&s))
}

/// Whether the watcher should stop: its client is gone or closed.
fn gone(target: &Weak<Sentinel>) -> bool {
    with_sentinel(target, |_| ()).is_none()
}

/// The sentinel watcher's loop: subscribed to `+switch-master` on one sentinel at a time.
fn watch_switches(target: Weak<Sentinel>, connect: Duration) {
    let mut known: Option<String> = None;
    let mut next = 0usize;
    let mut backoff = Duration::from_millis(200);
    while let Some(sentinel) =
        with_sentinel(&target, |s| s.sentinels[next % s.sentinels.len()].clone())
    {
        next += 1;
        let outcome = open(&sentinel, connect, WATCH_TICK).and_then(|mut conn| {
            let mut pubsub = conn.as_pubsub();
            pubsub
                .subscribe("+switch-master")
                .map_err(|e| Error::from_redis(e, ""))?;
            // A switch missed while not subscribed shows as a changed address.
            with_sentinel(&target, |s| {
                if let Ok(info) = s.master_address(connect, WATCH_TICK) {
                    let addr = info.addr().to_string();
                    if known.as_ref().is_some_and(|k| *k != addr) {
                        s.switched(&addr);
                    }
                    known = Some(addr);
                }
            });
            loop {
                match pubsub.get_message() {
                    Ok(msg) => {
                        let payload: String = msg.get_payload().unwrap_or_default();
                        // "<name> <old ip> <old port> <new ip> <new port>"
                        let parts: Vec<&str> = payload.split(' ').collect();
                        let [name, _, _, ip, port] = parts[..] else {
                            continue;
                        };
                        let addr = format!("{ip}:{port}");
                        let ours = with_sentinel(&target, |s| name == s.master);
                        match ours {
                            None => return Ok(()),   // the client is gone
                            Some(false) => continue, // another master of these sentinels
                            Some(true) => {}
                        }
                        if known.as_deref() != Some(addr.as_str()) {
                            with_sentinel(&target, |s| s.switched(&addr));
                        }
                        known = Some(addr);
                    }
                    Err(e) if e.is_timeout() => {
                        if gone(&target) {
                            return Ok(());
                        }
                    }
                    Err(e) => return Err(Error::from_redis(e, "")),
                }
            }
        });
        match outcome {
            Ok(()) => backoff = Duration::from_millis(200),
            Err(e) => {
                log::debug!("sentinel watcher on {}: {e}", sentinel.addr());
                // A failure that persists (say, a sentinel that wants a password) is
                // retried at most once a few seconds.
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
        if gone(&target) {
            return;
        }
        std::thread::sleep(backoff);
    }
}

impl Sentinel {
    /// The sentinels switched the master to `addr`: retire every connection to the old one.
    fn switched(&self, addr: &str) {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        log::warn!(
            "sentinels switched master `{}` to {addr}; dropping connections to the old one \
             (generation {generation})",
            self.master
        );
        for f in self.on_switch.lock().iter() {
            f();
        }
    }
}

/// A connection-class error for "no usable master right now": retried like a refused
/// connection.
fn not_yet(msg: String) -> Error {
    Error::Connection(std::io::Error::new(std::io::ErrorKind::NotConnected, msg).into())
}
