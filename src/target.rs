//! Where a client's connections go: one fixed server, or the master that Redis Sentinel
//! names, looked up again for every new connection.
//!
//! Why not `redis::sentinel::SentinelClient`: it sets no connect or read timeout on the
//! sentinel, probe and master connections (a paused sentinel would hang the caller), and it
//! opens a second connection to the master after probing it. Here every step is bounded by
//! the client's timeouts, and the `ROLE` check runs on the connection that is then used.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::{Error, Result};

pub(crate) enum Target {
    Fixed(ConnectionInfo),
    Sentinel(Sentinel),
}

pub(crate) struct Sentinel {
    sentinels: Vec<ConnectionInfo>,
    master: String,
    node: RedisConnectionInfo,
    /// The sentinel that answered last: asked first next time.
    last_good: AtomicUsize,
}

impl Target {
    pub(crate) fn sentinel(
        sentinels: Vec<ConnectionInfo>,
        master: String,
        node: RedisConnectionInfo,
    ) -> Target {
        Target::Sentinel(Sentinel {
            sentinels,
            master,
            node,
            last_good: AtomicUsize::new(0),
        })
    }

    /// Opens a command connection with both timeouts set: to the fixed server, or to the
    /// master the sentinels name, checked with `ROLE`.
    pub(crate) fn connect(
        &self,
        connect: Duration,
        response: Duration,
    ) -> Result<redis::Connection> {
        match self {
            Target::Fixed(info) => open(info, connect, response),
            Target::Sentinel(s) => {
                let info = s.master_address(connect, response)?;
                let mut conn = open(&info, connect, response)?;
                let role: Vec<redis::Value> = redis::cmd("ROLE")
                    .query(&mut conn)
                    .map_err(|e| Error::from_redis(e, ""))?;
                match role.first() {
                    Some(redis::Value::BulkString(r)) if r == b"master" => Ok(conn),
                    _ => Err(not_yet(format!(
                        "sentinels name {} as master `{}`, but it is not a master (yet)",
                        info.addr(),
                        s.master
                    ))),
                }
            }
        }
    }

    /// The address and credentials of the server commands go to, for the pub/sub connection.
    pub(crate) fn resolve(&self, connect: Duration, response: Duration) -> Result<ConnectionInfo> {
        match self {
            Target::Fixed(info) => Ok(info.clone()),
            Target::Sentinel(s) => {
                // Probe it as a command connection would, so pub/sub follows the same master.
                drop(self.connect(connect, response)?);
                s.master_address(connect, response)
            }
        }
    }

    /// For log messages: the server, or the master's name.
    pub(crate) fn describe(&self) -> String {
        match self {
            Target::Fixed(info) => info.addr().to_string(),
            Target::Sentinel(s) => format!("sentinel master `{}`", s.master),
        }
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
                    let info = ConnectionAddr::Tcp(host, port)
                        .into_connection_info()
                        .map_err(|e| Error::from_redis(e, ""))?;
                    return Ok(info.set_redis_settings(self.node.clone()));
                }
                Ok(None) => failures.push(format!("{}: unknown master", sentinel.addr())),
                Err(e) => failures.push(format!("{}: {e}", sentinel.addr())),
            }
        }
        Err(not_yet(format!(
            "no sentinel named a master `{}` ({})",
            self.master,
            failures.join("; ")
        )))
    }
}

/// Opens a connection with both timeouts set.
pub(crate) fn open(
    info: &ConnectionInfo,
    connect: Duration,
    response: Duration,
) -> Result<redis::Connection> {
    let client = redis::Client::open(info.clone()).map_err(|e| Error::invalid(e.to_string()))?;
    let conn = client
        .get_connection_with_timeout(connect)
        .map_err(|e| match Error::from_redis(e, "") {
            Error::Timeout(msg) => Error::Timeout(format!("connecting to {}: {msg}", info.addr())),
            other => other,
        })?;
    conn.set_read_timeout(Some(response))
        .and_then(|()| conn.set_write_timeout(Some(response)))
        .map_err(Error::Connection)?;
    Ok(conn)
}

/// A connection-class error for "no usable master right now": retried like a refused
/// connection.
fn not_yet(msg: String) -> Error {
    Error::Connection(std::io::Error::new(std::io::ErrorKind::NotConnected, msg).into())
}
