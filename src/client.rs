//! The client: configuration, command pool, pub/sub dispatcher and watchdog, shared by clones.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::{Backend, Policy};
use crate::config::{Config, ServerAddress};
use crate::error::{Error, Result};
use crate::extensions::Extensions;
use crate::handover::HandOvers;
use crate::history::{self, History, HistoryEvent, FLUSH_EVERY};
use crate::keys;
use crate::metrics::{Metrics, Recorder};
use crate::names::Named;
use crate::pubsub::Dispatcher;
use crate::watchdog::{Chore, Watchdog};

/// A connection to one Redis deployment, from which locks are made.
///
/// Cheap to clone: clones share the command pool (one per master on a cluster), the pub/sub
/// thread (one per node with waiters on a cluster) and the watchdog thread.
/// When the last clone (and the last [`Lock`](crate::Lock) made from it) is dropped, the threads stop and
/// every connection is closed.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1:6379/")?;
/// let guard = client.lock("inventory:1000").lock()?;
/// // critical section
/// drop(guard);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    /// This client's UUID, the first half of every owner id.
    pub(crate) id: String,
    /// The number of this client's next unlock request (its latch key; see `RawLock::unlock`).
    pub(crate) requests: AtomicU64,
    // Field order is drop order: the watchdog and pub/sub threads stop before the backend closes.
    pub(crate) watchdog: Watchdog,
    pub(crate) pubsub: Dispatcher,
    pub(crate) backend: Arc<Backend>,
    pub(crate) metrics: Arc<Recorder>,
    /// This client's threads waiting for a lock that a release here may pass to them.
    pub(crate) handovers: HandOvers,
    /// What features above the client keep per client (the lock-order pairs recorded).
    pub(crate) extensions: Extensions,
    /// This client's history recorder, when it records one (`history`).
    pub(crate) history: Option<Arc<History>>,
    /// Whether a wait on a semaphore nobody set up was warned of (once per client; later
    /// ones are logged at debug).
    pub(crate) unset_warned: AtomicBool,
}

impl Client {
    /// Connects (lazily) to the server at `url` with default settings.
    ///
    /// Command connections open on first use, so a dead server shows up at the first call, as
    /// [`Error::Connection`](crate::Error::Connection); the pub/sub thread connects in the
    /// background and keeps retrying.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an unparsable URL.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1:6379/").unwrap();
    /// assert!(redlatch::Client::open("not a url").is_err());
    /// ```
    pub fn open(url: impl ServerAddress) -> Result<Client> {
        Client::new(Config::builder(url).build()?)
    }

    /// Creates a client from a checked [`Config`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an address this version
    /// cannot serve (a Unix socket; a `rediss://` address in a build without the `tls`
    /// feature) or when a background thread cannot be spawned.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/").pool_size(4).build().unwrap();
    /// let client = redlatch::Client::new(config).unwrap();
    /// ```
    pub fn new(mut config: Config) -> Result<Client> {
        let id = uuid::Uuid::new_v4().to_string();
        let name = keys::connection_name(&config.client_name, &id);
        config.connection_name = Some(name.as_str().into());
        let metrics = Arc::new(Recorder::new().labelled_by_name(config.metrics_lock_names));
        let backend = Arc::new(Backend::open(&config)?);
        let history = config.history.map(|max| {
            let lease = config.watchdog_timeout;
            Arc::new(History::new(&id, &config.client_name, max, lease))
        });
        let chore = history.as_ref().map(|history| {
            history::flush_at_exit(history, &backend);
            let (history, backend) = (Arc::clone(history), Arc::clone(&backend));
            Chore {
                every: FLUSH_EVERY,
                run: Box::new(move || history.flush(&backend)),
            }
        });
        let watchdog = Watchdog::start(
            Arc::clone(&backend),
            config.watchdog_timeout,
            config.renew_batch_size,
            config.replica_sync,
            Arc::clone(&metrics),
            chore,
        )?;
        // A pub/sub connection back after a loss (a restart, a failover) has every hold
        // checked at once, not at its next renewal, on fresh command connections. So does
        // its first connection if locks were taken before it (its thread started late): the
        // server may have restarted in between, unseen.
        let recheck = watchdog.recheck();
        let weak_backend = Arc::downgrade(&backend);
        let reconnected = Arc::new(move |first: bool| {
            if first && !recheck.watches_any() {
                return;
            }
            if let Some(backend) = weak_backend.upgrade() {
                backend.drop_connections();
            }
            recheck.now();
        });
        let pubsub = backend.dispatcher(config.dial(&metrics, reconnected))?;
        log::debug!("redlatch client {id} created (connections named {name})");
        let check = config.check_on_connect;
        let client = Client {
            inner: Arc::new(Inner {
                config,
                id,
                requests: AtomicU64::new(1),
                watchdog,
                pubsub,
                backend,
                metrics,
                handovers: HandOvers::default(),
                extensions: Extensions::default(),
                history,
                unset_warned: AtomicBool::new(false),
            }),
        };
        if check {
            client.log_findings();
        }
        Ok(client)
    }

    /// Closes the client, for all its clones: every thread waiting in any of its locks,
    /// semaphores or latches is woken and gets [`Error::Closed`](crate::Error::Closed) (within
    /// milliseconds, leaving nothing behind: fair-queue places are left, subscriptions
    /// dropped), its background threads stop, and every later call fails with
    /// [`Error::Closed`](crate::Error::Closed). Idempotent.
    ///
    /// It waits for the waiting threads to leave their fair-lock queues, at most
    /// [`response_timeout`](crate::ConfigBuilder::response_timeout) (on a server that does
    /// not answer), and not for calls in flight that do not wait: such a call gets the reply
    /// of a command already written, and [`Error::Closed`](crate::Error::Closed) for one
    /// not yet sent.
    ///
    /// **Locks it still holds are not released**: closing sends nothing more to Redis, so
    /// each such lock stays held until its lease runs out (with the watchdog, within
    /// [`watchdog_timeout`](crate::ConfigBuilder::watchdog_timeout), 30 s by default; an
    /// explicit lease as set) and other clients get it then. Their guards report the hold
    /// lost ([`LostReason::ClientClosed`](crate::LostReason::ClientClosed)) at once, calling
    /// their [`on_lost`](crate::LockGuard::on_lost) callbacks on this thread, and releasing
    /// them later does nothing but return [`Error::LockLost`](crate::Error::LockLost). The
    /// same holds for semaphore permits. To hand locks over promptly, release them before
    /// closing.
    ///
    /// Dropping the last clone of a client (and of every lock, semaphore and latch made from
    /// it) stops its threads and closes its connections too; no thread can be waiting then,
    /// since a waiting thread holds the object it waits on.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let waiter = {
    ///     let client = client.clone();
    ///     std::thread::spawn(move || client.lock("jobs").lock().map(drop))
    /// };
    /// // ... on shutdown:
    /// client.close();
    /// let outcome = waiter.join().unwrap();
    /// assert!(outcome.is_ok() || outcome.unwrap_err().is_closed());
    /// # Ok(()) }
    /// ```
    pub fn close(&self) {
        let inner = &self.inner;
        // Waiters first, while they can still leave a fair queue; then the connections.
        inner.pubsub.close(inner.config.response_timeout);
        // The history's last events, while the connections are still open.
        if let Some(history) = &inner.history {
            history.flush(&inner.backend);
        }
        inner.backend.close();
        inner.watchdog.close();
        log::debug!("redlatch client {} closed", inner.id);
    }

    /// Whether [`close`](Self::close) was called (on this client or a clone).
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert!(!client.is_closed());
    /// client.close();
    /// assert!(client.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.pubsub.is_closed()
    }

    /// A snapshot of this client's metrics (shared by its clones) since it was created:
    /// acquisitions, waits and holds, timeouts, renewals, lost locks and pub/sub reconnects.
    /// Reading it sends nothing to Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// drop(client.lock("report").lock()?);
    /// let m = client.metrics();
    /// assert_eq!(m.acquisitions, 1);
    /// assert_eq!(m.hold_time.count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn metrics(&self) -> Metrics {
        let mut metrics = self.inner.metrics.snapshot();
        metrics.unsettled = self.inner.watchdog.unsettled();
        metrics
    }

    /// This client's random id: the `<uuid>` in owner ids `"<uuid>:<thread number>"`.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.id().len(), 36);
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The configuration this client was built with.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.config().pool_size(), 16);
    /// ```
    pub fn config(&self) -> &Config {
        &self.inner.config
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .finish()
    }
}

impl Client {
    /// The command lock scripts publish unlock messages with.
    pub(crate) fn publish(&self) -> &'static str {
        self.inner.backend.pubsub_mode().publish()
    }

    /// The object name `name`, mapped by the configured [`NameMapper`](crate::NameMapper):
    /// every constructor (`objects.rs`) makes its object from this, once.
    pub(crate) fn named(&self, name: &str) -> Named {
        Named::new(&self.inner.config.name_mapper, name)
    }

    /// Runs `f` on the connection for `key` with a new receipt of `receipts` and its time to
    /// live in ms: a call made repeatable by its receipt (see [`Backend::run_receipted`]).
    pub(crate) fn receipted<T>(
        &self,
        key: &str,
        policy: Policy,
        receipts: &keys::UnlockLatches,
        f: impl FnMut(&mut dyn redis::ConnectionLike, &str, u64) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let inner = &self.inner;
        let receipt = receipts.key(inner.requests.fetch_add(1, Ordering::Relaxed));
        inner.backend.run_receipted(key, policy, receipt, f)
    }
}

/// Reading history back: the recorder's own folder reads; the client names whose.
impl Client {
    /// Every recorded event of the lock `name` still kept, from every client's history
    /// stream, oldest first: what `redlatch history NAME` prints. Only clients with
    /// [`history`](crate::ConfigBuilder::history) on record events; each stream keeps its
    /// latest events (10,000 unless set) for a day past its last write.
    ///
    /// It costs one pass of `SCAN` over each master's keyspace, and per client that records,
    /// one `XRANGE` of its stream and one read of who it is: a tool for operators.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; connection errors and timeouts.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for event in client.history("ledger")? {
    ///     println!("{} {} {} ({})", event.at_us, event.kind, event.owner, event.thread);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn history(&self, name: &str) -> Result<Vec<HistoryEvent>> {
        if name.is_empty() {
            return Err(Error::invalid("name must not be empty"));
        }
        let key = self.inner.config.name_mapper.map(name);
        history::read(
            &self.inner.backend,
            &self.inner.config.name_mapper,
            Some(&key),
            0,
        )
    }

    /// Every recorded event of the last `window`, of every lock, oldest first (what
    /// `redlatch top` computes rates and blame from). As [`history`](Self::history), for all
    /// locks.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a window over a year; connection errors and timeouts.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let minute = client.recent_history(Duration::from_secs(60))?;
    /// println!("{} events in the last minute", minute.len());
    /// # Ok(()) }
    /// ```
    pub fn recent_history(&self, window: Duration) -> Result<Vec<HistoryEvent>> {
        crate::time::check_duration("window", window)?;
        let since =
            history::server_time_us(&self.inner.backend)?.saturating_sub(window.as_micros() as u64);
        history::read(
            &self.inner.backend,
            &self.inner.config.name_mapper,
            None,
            since,
        )
    }
}
