//! A small blocking pool of command connections.
//!
//! Why not r2d2: its `redis::Client` manager connects without a timeout and sets no read
//! timeout, it opens `max_size` connections eagerly, and it runs helper threads. Here
//! connections open on demand with `connect_timeout`, every reply is bounded by
//! `response_timeout`, and a connection that saw an I/O error or a timeout is dropped
//! (its reply stream can no longer be trusted) together with the idle ones, which are
//! likely dead for the same reason.

use std::cell::Cell;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::ConnectionLike;

use crate::error::{Error, Result};

thread_local! {
    /// A cap on connect and reply times for the calls this thread makes, set by
    /// [`with_call_timeout`].
    static CALL_TIMEOUT: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// Runs `f` with every pool call it makes on this thread bounded by `timeout` (connecting,
/// waiting for a pooled connection, and each reply), where that is shorter than the pool's
/// own setting: a [`RedLock`](crate::RedLock) keeps one slow node from eating its wait.
pub(crate) fn with_call_timeout<T>(timeout: Duration, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Duration>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CALL_TIMEOUT.set(self.0);
        }
    }
    let _restore = Restore(CALL_TIMEOUT.replace(Some(timeout)));
    f()
}

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
        let cap = CALL_TIMEOUT.get().filter(|t| *t < self.response_timeout);
        let mut conn = self.checkout(cap)?;
        if let Some(t) = cap {
            if let Err(e) = set_timeouts(&conn, t) {
                self.discard(conn);
                return Err(Error::Connection(e));
            }
        }
        let result = f(&mut conn);
        // A connection whose timeouts cannot be put back is not reused.
        let restored = cap.is_none() || set_timeouts(&conn, self.response_timeout).is_ok();
        match result {
            Ok(v) => {
                if restored {
                    self.checkin(conn);
                } else {
                    self.discard(conn);
                }
                Ok(v)
            }
            Err(e) => {
                let err = Error::from_redis(e, key);
                if err.breaks_connection() || !conn.is_open() || !restored {
                    log::debug!("dropping command connections after error: {err}");
                    self.discard(conn);
                } else {
                    self.checkin(conn);
                }
                Err(err)
            }
        }
    }

    fn checkout(&self, cap: Option<Duration>) -> Result<redis::Connection> {
        let connect_timeout = cap.map_or(self.connect_timeout, |t| t.min(self.connect_timeout));
        let deadline = Instant::now() + connect_timeout;
        let mut state = self.state.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(conn);
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return self.connect(connect_timeout).inspect_err(|_| {
                    self.state.lock().open -= 1;
                    self.freed.notify_one();
                });
            }
            if self.freed.wait_until(&mut state, deadline).timed_out() {
                return Err(Error::Timeout(format!(
                    "all {} pooled connections stayed busy for {:?}",
                    self.max, connect_timeout
                )));
            }
        }
    }

    fn connect(&self, connect_timeout: Duration) -> Result<redis::Connection> {
        let conn = self
            .client
            .get_connection_with_timeout(connect_timeout)
            .map_err(|e| match Error::from_redis(e, "") {
                Error::Timeout(msg) => Error::Timeout(format!("connecting: {msg}")),
                Error::Connection(e) => Error::Connection(e),
                other => other,
            })?;
        set_timeouts(&conn, self.response_timeout).map_err(Error::Connection)?;
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

fn set_timeouts(conn: &redis::Connection, t: Duration) -> redis::RedisResult<()> {
    conn.set_read_timeout(Some(t))
        .and_then(|()| conn.set_write_timeout(Some(t)))
}
