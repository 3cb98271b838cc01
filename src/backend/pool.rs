//! A small blocking pool of command connections.
//!
//! Why not r2d2: its `redis::Client` manager connects without a timeout and sets no read
//! timeout, it opens `max_size` connections eagerly, and it runs helper threads. Here
//! connections open on demand with `connect_timeout`, every reply is bounded by
//! `response_timeout`, and a connection that saw an I/O error or a timeout is dropped
//! (its reply stream can no longer be trusted) together with the idle ones, which are
//! likely dead for the same reason.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::ConnectionLike;

use crate::backend::sentinel::Target;
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

/// Whether this thread's calls are capped by [`with_call_timeout`] (and so not retried).
pub(crate) fn capped() -> bool {
    CALL_TIMEOUT.get().is_some()
}

/// Where commands go: one server's pool, or a cluster's router over one pool per node.
pub(crate) enum Commands {
    Single(Pool),
    Cluster(Box<crate::backend::cluster::Router>),
}

impl From<Pool> for Commands {
    fn from(pool: Pool) -> Commands {
        Commands::Single(pool)
    }
}

impl Commands {
    /// Runs `f` on a connection to the server of `key`, with retries of calls that surely
    /// did not run (see [`Pool::run`]).
    pub(crate) fn run<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        match self {
            Commands::Single(pool) => pool.run(key, f),
            Commands::Cluster(router) => router.run(key, !capped(), f),
        }
    }

    /// As [`run`](Self::run), without retries (redirections are still followed).
    pub(crate) fn run_once<T>(
        &self,
        key: &str,
        f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        match self {
            Commands::Single(pool) => pool.run_once(key, f),
            Commands::Cluster(router) => router.run(key, false, f),
        }
    }

    /// The hash slot of `key` on a cluster (keys of one script call must share it); 0 on
    /// a single server, where any keys may go together.
    pub(crate) fn slot(&self, key: &str) -> u16 {
        match self {
            Commands::Single(_) => 0,
            Commands::Cluster(_) => crate::backend::cluster::slot(key.as_bytes()),
        }
    }

    /// Runs `f` on the pool of every master: the one server, or each master of a cluster.
    pub(crate) fn for_each_master(&self, mut f: impl FnMut(&Pool) -> Result<()>) -> Result<()> {
        match self {
            Commands::Single(pool) => f(pool),
            Commands::Cluster(router) => router.for_each_master(f),
        }
    }

    /// The command lock scripts publish with: `SPUBLISH` (sharded pub/sub) on a cluster.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self {
            Commands::Single(_) => "PUBLISH",
            Commands::Cluster(_) => "SPUBLISH",
        }
    }
}

pub(crate) struct Pool {
    target: Arc<Target>,
    max: usize,
    retry_attempts: u32,
    retry_delay: Duration,
    connect_timeout: Duration,
    response_timeout: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    /// Idle connections with the target generation they were opened in.
    idle: Vec<(redis::Connection, u64)>,
    /// Connections that exist: idle plus checked out plus being opened.
    open: usize,
}

impl Pool {
    pub(crate) fn new(target: Arc<Target>, config: &crate::Config) -> Pool {
        Pool {
            target,
            max: config.pool_size,
            retry_attempts: config.retry_attempts,
            retry_delay: config.retry_delay,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// Where this pool's connections go.
    pub(crate) fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// Runs `f` on a pooled connection. `key` names the key the command is about, for errors.
    ///
    /// A connection error or a timeout drops the connection and all idle ones. A call that
    /// surely did not run (no connection could be made, or the server refused it for now:
    /// `READONLY`, `LOADING`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`) is retried up to the
    /// configured attempts, except under [`with_call_timeout`].
    pub(crate) fn run<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut retries = if capped() { 0 } else { self.retry_attempts };
        loop {
            match self.attempt(key, &mut f) {
                Err((err, false)) if retries > 0 => {
                    retries -= 1;
                    log::debug!(
                        "call on `{key}` to {} did not run ({err}); retrying in {:?}",
                        self.target.describe(),
                        self.retry_delay
                    );
                    std::thread::sleep(self.retry_delay);
                }
                outcome => return outcome.map_err(|(err, _)| err),
            }
        }
    }

    /// As [`run`](Self::run), but never retried: for the watchdog, whose renewals are due
    /// again next period and must not hold up the others.
    pub(crate) fn run_once<T>(
        &self,
        key: &str,
        mut f: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.attempt(key, &mut f).map_err(|(err, _)| err)
    }

    /// One try; an error comes with whether the command may have run.
    pub(crate) fn attempt<T>(
        &self,
        key: &str,
        f: &mut impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, (Error, bool)> {
        let cap = CALL_TIMEOUT.get().filter(|t| *t < self.response_timeout);
        let (mut conn, generation) = self.checkout(cap)?;
        if let Some(t) = cap {
            if let Err(e) = set_timeouts(&conn, t) {
                self.discard(conn);
                return Err((Error::Connection(e), false));
            }
        }
        let result = f(&mut conn);
        // A connection whose timeouts cannot be put back is not reused.
        let restored = cap.is_none() || set_timeouts(&conn, self.response_timeout).is_ok();
        match result {
            Ok(v) => {
                if restored {
                    self.checkin(conn, generation);
                } else {
                    self.discard(conn);
                }
                Ok(v)
            }
            Err(e) => {
                let refused = refused_for_now(&e);
                let err = Error::from_redis(e, key);
                // After READONLY the connections point at a demoted master: drop them all.
                if err.breaks_connection() || !conn.is_open() || !restored || refused {
                    log::debug!("dropping command connections after error: {err}");
                    self.discard(conn);
                } else {
                    self.checkin(conn, generation);
                }
                Err((err, !refused))
            }
        }
    }

    /// A pooled or new connection. A failed connect is retryable (nothing was sent); pool
    /// exhaustion is reported as not retryable.
    fn checkout(
        &self,
        cap: Option<Duration>,
    ) -> std::result::Result<(redis::Connection, u64), (Error, bool)> {
        let connect_timeout = cap.map_or(self.connect_timeout, |t| t.min(self.connect_timeout));
        let deadline = Instant::now() + connect_timeout;
        let mut state = self.state.lock();
        loop {
            let current = self.target.generation();
            while let Some((conn, generation)) = state.idle.pop() {
                if generation == current {
                    return Ok((conn, generation));
                }
                // Opened to a master the sentinels have since replaced.
                state.open -= 1;
                drop(conn);
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return self
                    .connect(connect_timeout)
                    .map(|c| (c, current))
                    .map_err(|e| {
                        self.state.lock().open -= 1;
                        self.freed.notify_one();
                        (e, false)
                    });
            }
            if self.freed.wait_until(&mut state, deadline).timed_out() {
                return Err((
                    Error::Timeout(format!(
                        "all {} pooled connections stayed busy for {:?}",
                        self.max, connect_timeout
                    )),
                    true,
                ));
            }
        }
    }

    fn connect(&self, connect_timeout: Duration) -> Result<redis::Connection> {
        self.target.connect(connect_timeout, self.response_timeout)
    }

    fn checkin(&self, conn: redis::Connection, generation: u64) {
        let mut state = self.state.lock();
        if generation == self.target.generation() {
            state.idle.push((conn, generation));
        } else {
            state.open -= 1;
        }
        drop(state);
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

/// Server errors that say the command was not run and may succeed soon elsewhere or later.
fn refused_for_now(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind as K};
    matches!(
        e.kind(),
        ErrorKind::Server(
            K::ReadOnly | K::BusyLoading | K::MasterDown | K::TryAgain | K::ClusterDown
        )
    )
}
