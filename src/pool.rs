//! A small blocking pool of command connections.
//!
//! Why not r2d2: its `redis::Client` manager connects without a timeout and sets no read
//! timeout, it opens `max_size` connections eagerly, and it runs helper threads. Here
//! connections open on demand with `connect_timeout`, every reply is bounded by
//! `response_timeout`, and a connection that saw an I/O error or a timeout is dropped
//! (its reply stream can no longer be trusted) together with the idle ones, which are
//! likely dead for the same reason.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::ConnectionLike;

use crate::error::{Error, Result};

pub(crate) struct Pool {
    client: redis::Client,
    max: usize,
    connect_timeout: Duration,
    response_timeout: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    idle: Vec<redis::Connection>,
    /// Connections that exist: idle plus checked out plus being opened.
    open: usize,
}

impl Pool {
    pub(crate) fn new(
        info: redis::ConnectionInfo,
        max: usize,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Pool> {
        let client = redis::Client::open(info).map_err(|e| Error::invalid(e.to_string()))?;
        Ok(Pool {
            client,
            max,
            connect_timeout,
            response_timeout,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        })
    }

    /// Runs `f` on a pooled connection. `key` names the key the command is about, for errors.
    ///
    /// A connection error or a timeout drops the connection and all idle ones.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut conn = self.checkout()?;
        match f(&mut conn) {
            Ok(v) => {
                self.checkin(conn);
                Ok(v)
            }
            Err(e) => {
                let err = Error::from_redis(e, key);
                if err.breaks_connection() || !conn.is_open() {
                    log::debug!("dropping command connections after error: {err}");
                    self.discard(conn);
                } else {
                    self.checkin(conn);
                }
                Err(err)
            }
        }
    }

    fn checkout(&self) -> Result<redis::Connection> {
        let deadline = Instant::now() + self.connect_timeout;
        let mut state = self.state.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(conn);
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return self.connect().inspect_err(|_| {
                    self.state.lock().open -= 1;
                    self.freed.notify_one();
                });
            }
            if self.freed.wait_until(&mut state, deadline).timed_out() {
                return Err(Error::Timeout(format!(
                    "all {} pooled connections stayed busy for {:?}",
                    self.max, self.connect_timeout
                )));
            }
        }
    }

    fn connect(&self) -> Result<redis::Connection> {
        let conn = self
            .client
            .get_connection_with_timeout(self.connect_timeout)
            .map_err(|e| match Error::from_redis(e, "") {
                Error::Timeout(msg) => Error::Timeout(format!("connecting: {msg}")),
                Error::Connection(e) => Error::Connection(e),
                other => other,
            })?;
        conn.set_read_timeout(Some(self.response_timeout))
            .and_then(|()| conn.set_write_timeout(Some(self.response_timeout)))
            .map_err(Error::Connection)?;
        Ok(conn)
    }

    fn checkin(&self, conn: redis::Connection) {
        self.state.lock().idle.push(conn);
        self.freed.notify_one();
    }

    fn discard(&self, conn: redis::Connection) {
        let stale = {
            let mut state = self.state.lock();
            let stale = std::mem::take(&mut state.idle);
            state.open -= 1 + stale.len();
            stale
        };
        drop(conn);
        drop(stale);
        self.freed.notify_all();
    }
}
