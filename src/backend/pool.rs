//! A small blocking pool of command connections to one [`Endpoint`]: a fixed server, or
//! the master Sentinel names (see `sentinel.rs`). It knows nothing of clusters: a cluster
//! has one pool per node.
//!
//! Why not r2d2: its `redis::Client` manager connects without a timeout and sets no read
//! timeout, it opens `max_size` connections eagerly, and it runs helper threads. Here
//! connections open on demand with `connect_timeout`, every reply is bounded by
//! `response_timeout`, and a connection that saw an I/O error or a timeout is dropped
//! (its reply stream can no longer be trusted) together with the idle ones, which are
//! likely dead for the same reason.
//!
//! Calls share round trips (see `batch.rs`): up to `batch_lanes` connections carry calls at
//! once, and a call that finds them all busy joins the next write of one of them. A call that
//! needs a connection to itself (a write followed by `WAIT`, `ASKING` and its command, a call
//! with bounded times, [`Policy::Bounded`](super::Policy::Bounded)) takes one, as a client that sends one command per round
//! trip does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::ConnectionLike;

use super::batch::Batcher;
use super::checkout::{Counted, Held, Lender, Slots, State};
#[cfg(test)]
use super::endpoint::Fixed;
use super::endpoint::{name_connection, Endpoint};
use super::shared::Shared;
use super::{Policy, Written};
use crate::error::{Error, Result};

pub(crate) struct Pool {
    endpoint: Arc<dyn Endpoint>,
    /// Where calls share round trips; `None` when every call takes a connection of its own
    /// (with [`sync_replicas`](crate::ConfigBuilder::sync_replicas), whose `WAIT` must follow
    /// the write on its connection).
    pub(super) batcher: Option<Batcher>,

    max: usize,
    retry_attempts: u32,
    retry_delay: Duration,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// What connections are named (`CLIENT SETNAME`).
    name: Option<Arc<str>>,
    /// The pool's count of connections, shared with each [`Held`] (see [`Counted`]).
    slots: Arc<Slots>,
}

impl Pool {
    /// A pool of connections to `endpoint`; `cluster_node`: its keys may be in different
    /// slots.
    pub(crate) fn new(
        endpoint: Arc<dyn Endpoint>,
        config: &crate::config::Config,
        cluster_node: bool,
    ) -> Pool {
        let shared = config.replica_sync.is_none() && config.batch_lanes > 0;
        Pool {
            endpoint,
            batcher: shared.then(|| Batcher::new(config.batch_lanes, cluster_node)),
            max: config.pool_size,
            retry_attempts: config.retry_attempts,
            retry_delay: config.retry_delay,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            name: config.connection_name.clone(),
            slots: Arc::new(Slots {
                state: Mutex::new(State {
                    closed: false,
                    idle: Vec::new(),
                    open: 0,
                    flushes: 0,
                }),
                freed: Condvar::new(),
            }),
        }
    }

    /// Where this pool's connections go.
    pub(crate) fn endpoint(&self) -> &Arc<dyn Endpoint> {
        &self.endpoint
    }

    /// Runs `f` on a pooled connection. `key` names the key the command is about, for errors.
    ///
    /// A connection error or a timeout drops the connection and all idle ones. A call that
    /// surely did not run (no connection could be made, or the server refused it for now:
    /// `READONLY`, `LOADING`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`) is retried up to the
    /// configured attempts under [`Policy::Retried`], and not under the others; under
    /// [`Policy::Bounded`] it runs on a connection of its own with its times bounded.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        policy: Policy,
        f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.run_written(key, policy, None, f)
    }

    /// As [`run`](Self::run), running `written` once a command of the call is written by the
    /// batcher (see `batch/mod.rs`).
    pub(crate) fn run_written<T>(
        &self,
        key: &str,
        policy: Policy,
        written: Written<'_>,
        mut f: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let mut retries = policy.retries(self.retry_attempts);
        loop {
            match self.attempt(key, policy.bound(), written, &mut f) {
                Err((err, false)) if retries > 0 => {
                    retries -= 1;
                    log::debug!(
                        "call on `{key}` to {} did not run ({err}); retrying in {:?}",
                        self.endpoint.describe(),
                        self.retry_delay
                    );
                    std::thread::sleep(self.retry_delay);
                }
                outcome => return outcome.map_err(|(err, _)| err),
            }
        }
    }

    /// One try; an error comes with whether the command may have run. The call shares
    /// round trips with other threads' calls unless its times are bounded (`bound`) or the
    /// pool does not batch; `written` runs once a command of it is written by the batcher.
    pub(crate) fn attempt<T>(
        &self,
        key: &str,
        bound: Option<Duration>,
        written: Written<'_>,
        f: &mut impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, (Error, bool)> {
        match &self.batcher {
            Some(batcher) if bound.is_none() => self.attempt_shared(batcher, key, written, f),
            _ => self.attempt_alone(key, bound, f),
        }
    }

    fn attempt_shared<T>(
        &self,
        batcher: &Batcher,
        key: &str,
        written: Written<'_>,
        f: &mut impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, (Error, bool)> {
        let mut shared = Shared::new(self, batcher, written);
        let result = f(&mut shared);
        if let Some(failure) = shared.failure() {
            return Err(failure);
        }
        result.map_err(|e| {
            let refused = refused_for_now(&e);
            let err = Error::from_redis(e, key);
            if refused {
                // After READONLY the connections point at a demoted master: drop them all
                // (the ones carrying other calls now, as they come back).
                log::debug!("dropping command connections after error: {err}");
                self.flush();
            }
            (err, !refused)
        })
    }

    /// One try on a connection of its own, its times bounded by `bound` where that is shorter
    /// than the pool's own settings.
    pub(crate) fn attempt_alone<T>(
        &self,
        key: &str,
        bound: Option<Duration>,
        f: &mut impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, (Error, bool)> {
        let cap = bound.filter(|t| *t < self.response_timeout);
        let mut held = self.checkout(cap)?;
        if let Some(t) = cap {
            if let Err(e) = set_timeouts(&held.conn, t) {
                self.discard(held);
                return Err((Error::Connection(e), false));
            }
        }
        let result = f(&mut held.conn);
        // A connection whose timeouts cannot be put back is not reused.
        let restored = cap.is_none() || set_timeouts(&held.conn, self.response_timeout).is_ok();
        match result {
            Ok(v) => {
                if restored {
                    self.checkin(held);
                } else {
                    self.discard(held);
                }
                Ok(v)
            }
            Err(e) => {
                let refused = refused_for_now(&e);
                let err = Error::from_redis(e, key);
                // After READONLY the connections point at a demoted master: drop them all.
                if err.breaks_connection() || !held.conn.is_open() || !restored || refused {
                    log::debug!("dropping command connections after error: {err}");
                    self.discard(held);
                    if refused {
                        self.flush();
                    }
                } else {
                    self.checkin(held);
                }
                Err((err, !refused))
            }
        }
    }

    /// Deletes `key` with a later call this pool writes (16 at a time), reading nothing back:
    /// a clean-up that costs no caller a round trip. Without batching it is not sent: the key
    /// must be one that expires by itself.
    pub(crate) fn delete_later(&self, key: String) {
        if let Some(batcher) = &self.batcher {
            batcher.delete_later(key);
        }
    }

    /// A connection for a batch's round trip (see `batch.rs`): as [`checkout`](Self::checkout)
    /// without a cap.
    pub(super) fn checkout_shared(&self) -> std::result::Result<Held, (Error, bool)> {
        self.checkout(None)
    }

    /// A pooled or new connection. A failed connect is retryable (nothing was sent), unless
    /// the server refused the credentials; pool exhaustion is reported as not retryable.
    fn checkout(&self, cap: Option<Duration>) -> std::result::Result<Held, (Error, bool)> {
        let connect_timeout = cap.map_or(self.connect_timeout, |t| t.min(self.connect_timeout));
        let deadline = Instant::now() + connect_timeout;
        let mut state = self.slots.state.lock();
        loop {
            if state.closed {
                // Not to be retried: nothing more goes out.
                return Err((Error::Closed, true));
            }
            let current = self.generation(&state);
            while let Some((conn, generation)) = state.idle.pop() {
                if generation == current {
                    let counted = self.counted();
                    return Ok(Held {
                        conn,
                        generation,
                        counted,
                    });
                }
                // Opened to a master the sentinels have since replaced.
                state.open -= 1;
                drop(conn);
            }
            if state.open < self.max {
                state.open += 1;
                // Counted from here, so that a panic while connecting gives the place back.
                let counted = self.counted();
                drop(state);
                return match self.connect(connect_timeout) {
                    Ok(conn) => Ok(Held {
                        conn,
                        generation: current,
                        counted,
                    }),
                    Err(e) => {
                        counted.give_back();
                        // Refused credentials stay refused: not retried.
                        let refused = e.is_auth_failed();
                        Err((e, refused))
                    }
                };
            }
            if self
                .slots
                .freed
                .wait_until(&mut state, deadline)
                .timed_out()
            {
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

    /// A place in the pool's `open` count, for a connection checked out.
    fn counted(&self) -> Counted {
        Counted(Some(Arc::clone(&self.slots)))
    }

    fn connect(&self, connect_timeout: Duration) -> Result<redis::Connection> {
        let mut conn = self
            .endpoint
            .connect(connect_timeout, self.response_timeout)?;
        if let Some(name) = &self.name {
            name_connection(&mut conn, name, &self.endpoint.describe())?;
        }
        Ok(conn)
    }

    /// Whether [`close`](Self::close) was called.
    pub(super) fn is_closed(&self) -> bool {
        self.slots.state.lock().closed
    }

    /// Closes the idle connections, and from now on each one checked in.
    pub(crate) fn close(&self) {
        let idle = {
            let mut state = self.slots.state.lock();
            state.closed = true;
            state.open -= state.idle.len();
            std::mem::take(&mut state.idle)
        };
        drop(idle);
        self.slots.freed.notify_all();
    }

    /// Which connections are current: the endpoint's generation (a Sentinel master switch
    /// moves it on) plus the flushes after `READONLY`.
    fn generation(&self, state: &State) -> u64 {
        self.endpoint.generation().wrapping_add(state.flushes)
    }

    pub(super) fn checkin(&self, held: Held) {
        let Held {
            conn,
            generation,
            counted,
        } = held;
        counted.settle();
        let mut state = self.slots.state.lock();
        if generation == self.generation(&state) && !state.closed {
            state.idle.push((conn, generation));
        } else {
            state.open -= 1;
        }
        drop(state);
        self.slots.freed.notify_one();
    }

    /// Drops `held` and the idle connections, likely dead for the same reason.
    pub(super) fn discard(&self, held: Held) {
        let Held { conn, counted, .. } = held;
        counted.settle();
        let stale = {
            let mut state = self.slots.state.lock();
            let stale = std::mem::take(&mut state.idle);
            state.open -= 1 + stale.len();
            stale
        };
        drop(conn);
        drop(stale);
        self.slots.freed.notify_all();
    }

    /// Drops the idle connections, and each one in use as it comes back.
    pub(crate) fn flush(&self) {
        let stale = {
            let mut state = self.slots.state.lock();
            state.flushes += 1;
            let stale = std::mem::take(&mut state.idle);
            state.open -= stale.len();
            stale
        };
        drop(stale);
        self.slots.freed.notify_all();
    }
}

impl Lender for Pool {
    fn checkout_shared(&self) -> std::result::Result<Held, (Error, bool)> {
        Pool::checkout_shared(self)
    }

    fn checkin(&self, held: Held) {
        Pool::checkin(self, held)
    }

    fn discard(&self, held: Held) {
        Pool::discard(self, held)
    }

    fn is_closed(&self) -> bool {
        Pool::is_closed(self)
    }
}

fn set_timeouts(conn: &redis::Connection, t: Duration) -> redis::RedisResult<()> {
    conn.set_read_timeout(Some(t))
        .and_then(|()| conn.set_write_timeout(Some(t)))
}

/// Server errors that say the command was not run and may succeed soon elsewhere or later.
fn refused_for_now(e: &redis::RedisError) -> bool {
    crate::error::refused_for_now(e)
}

/// A pool of connections to `endpoint` (of the test server `server`), configured by `f`.
#[cfg(test)]
pub(super) fn testing_pool(
    server: &crate::testing::Server,
    endpoint: impl Endpoint + 'static,
    f: impl FnOnce(crate::config::ConfigBuilder) -> crate::config::ConfigBuilder,
) -> Pool {
    let config = f(crate::config::Config::builder(server.info()))
        .build()
        .expect("config");
    Pool::new(Arc::new(endpoint), &config, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::Address;
    use redis::ConnectionInfo;

    #[test]
    fn a_connection_dropped_as_its_thread_unwinds_frees_its_place() {
        use crate::testing::Server;
        let server = Server::start();
        for batch_lanes in [0, 1] {
            // A pool of one: a place lost for good would leave it no connection at all.
            let pool = testing_pool(&server, Fixed(server.info()), |b| {
                b.pool_size(1)
                    .batch_lanes(batch_lanes)
                    .connect_timeout(Duration::from_millis(300))
            });
            panic_and_serve_again(&pool, || {
                let _held = pool.checkout_shared().expect("a connection");
                panic!("a bug while the connection is out");
            });
            let state = pool.slots.state.lock();
            assert_eq!((state.open, state.idle.len()), (1, 1));
        }
    }

    /// Runs `f`, which panics while it has a connection of `pool` out (or being opened); then
    /// the connection's place is free, and the pool serves calls again.
    fn panic_and_serve_again(pool: &Pool, f: impl FnOnce()) {
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        assert!(unwound.is_err());
        assert_eq!(pool.slots.state.lock().open, 0, "its place is free again");
        let echoed: String = pool
            .run("k", Policy::Retried, |c| {
                redis::cmd("ECHO").arg("again").query(c)
            })
            .expect("the pool opens another connection");
        assert_eq!(echoed, "again");
    }

    /// A server whose first connect panics (a bug in a dependency, say).
    struct PanicsOnce(Fixed, std::sync::atomic::AtomicBool);

    impl Endpoint for PanicsOnce {
        fn connect(&self, connect: Duration, response: Duration) -> Result<redis::Connection> {
            if !self.1.swap(true, std::sync::atomic::Ordering::SeqCst) {
                panic!("a bug while connecting");
            }
            self.0.connect(connect, response)
        }
    }

    impl Address for PanicsOnce {
        fn resolve(&self, connect: Duration, response: Duration) -> Result<ConnectionInfo> {
            self.0.resolve(connect, response)
        }

        fn describe(&self) -> String {
            self.0.describe()
        }
    }

    #[test]
    fn a_connect_that_panics_frees_its_place() {
        use crate::testing::Server;
        let server = Server::start();
        let endpoint = PanicsOnce(Fixed(server.info()), Default::default());
        let pool = testing_pool(&server, endpoint, |b| {
            b.pool_size(1).connect_timeout(Duration::from_millis(300))
        });
        panic_and_serve_again(&pool, || drop(pool.checkout_shared()));
    }

    #[test]
    fn connections_given_back_or_discarded_are_counted_once() {
        use crate::testing::Server;
        let server = Server::start();
        let pool = testing_pool(&server, Fixed(server.info()), |b| b.pool_size(2));
        let (a, b) = (pool.checkout_shared(), pool.checkout_shared());
        let (a, b) = (a.expect("first"), b.expect("second"));
        assert_eq!(pool.slots.state.lock().open, 2);
        pool.checkin(a);
        assert_eq!(pool.slots.state.lock().open, 2, "idle, still open");
        pool.discard(b);
        // The discard drops the idle one too (likely dead for the same reason).
        let state = pool.slots.state.lock();
        assert_eq!((state.open, state.idle.len()), (0, 0));
    }
}
