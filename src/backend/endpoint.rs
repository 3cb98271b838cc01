//! Where command connections go, and how one is opened: an [`Endpoint`] (a fixed server,
//! or the master Sentinel names, `sentinel.rs`), opened with both timeouts set and named.

use std::time::Duration;

use redis::ConnectionInfo;

use crate::error::{Error, Result};
use crate::pubsub::Address;

/// Where a pool's (or a pub/sub handle's) connections go: one server, which may be replaced
/// while the client runs (Sentinel).
///
/// As an [`Address`] it says where the pub/sub connection goes: the server commands go to.
pub(crate) trait Endpoint: Address {
    /// Opens a command connection with both timeouts set.
    fn connect(&self, connect: Duration, response: Duration) -> Result<redis::Connection>;

    /// Which server connections opened now go to: changes when the server is replaced, and
    /// connections opened before are then dropped. Always 0 for a fixed server.
    fn generation(&self) -> u64 {
        0
    }

    /// Registers `f` to run after each replacement of the server. A fixed server is never
    /// replaced: `f` never runs.
    fn on_switch(&self, f: Box<dyn Fn() + Send + Sync>) {
        drop(f);
    }

    /// The client closes: stop whatever follows the server (a Sentinel watcher).
    fn close(&self) {}
}

/// One server at a fixed address.
pub(crate) struct Fixed(pub(crate) ConnectionInfo);

impl Endpoint for Fixed {
    fn connect(&self, connect: Duration, response: Duration) -> Result<redis::Connection> {
        open(&self.0, connect, response)
    }
}

impl Address for Fixed {
    fn resolve(&self, connect: Duration, response: Duration) -> Result<ConnectionInfo> {
        self.0.resolve(connect, response)
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}

/// Names `conn` (`CLIENT SETNAME`), for `CLIENT LIST` and `redlatch inspect`. A refusal (an
/// ACL without `CLIENT`) is logged, not an error: the connection works as well unnamed.
/// `NOAUTH` is an error: the server wants credentials and none were given, so the connection
/// is of no use (`address`: where it goes, for the error).
pub(super) fn name_connection(
    conn: &mut redis::Connection,
    name: &str,
    address: &str,
) -> Result<()> {
    let named: redis::RedisResult<()> = redis::cmd("CLIENT").arg("SETNAME").arg(name).query(conn);
    match named {
        Err(e) if e.code() == Some("NOAUTH") => Err(Error::Redis(e).connecting_to(address)),
        Err(e) => {
            log::debug!("connection not named {name}: {e}");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Opens a connection with both timeouts set. Its errors name the address.
pub(crate) fn open(
    info: &ConnectionInfo,
    connect: Duration,
    response: Duration,
) -> Result<redis::Connection> {
    let client = redis::Client::open(info.clone()).map_err(|e| Error::invalid(e.to_string()))?;
    let address = info.addr().to_string();
    let conn = client
        .get_connection_with_timeout(connect)
        .map_err(|e| Error::from_redis(e, "").connecting_to(&address))?;
    conn.set_read_timeout(Some(response))
        .and_then(|()| conn.set_write_timeout(Some(response)))
        .map_err(|e| Error::Connection(e).connecting_to(&address))?;
    Ok(conn)
}
