//! The client: configuration, command pool, pub/sub dispatcher and watchdog, shared by clones.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::backend::Backend;
use crate::backoff::Backoff;
use crate::config::Config;
use crate::error::Result;
use crate::fenced::FencedResource;
use crate::keys;
use crate::latch::CountDownLatch;
use crate::lock::{
    thread_number, Fair, Fenced, Lock, LockOwner, NonReentrant, NonReentrantFair, Plain,
    ReadWriteLock, Spin,
};
use crate::metrics::{Metrics, Recorder};
use crate::names::Named;
use crate::pubsub::Dispatcher;
use crate::semaphore::{PermitExpirableSemaphore, Semaphore};
use crate::watchdog::Watchdog;

/// A connection to one Redis deployment, from which locks are made.
///
/// Cheap to clone: clones share the command pool (one per master on a cluster), the pub/sub
/// thread (one per node with waiters on a cluster) and the watchdog thread.
/// When the last clone (and the last [`Lock`] made from it) is dropped, the threads stop and
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
    pub fn open(url: &str) -> Result<Client> {
        Client::new(Config::builder(url).build()?)
    }

    /// Creates a client from a checked [`Config`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an address this version
    /// cannot serve (only plain TCP for now: no TLS, no Unix sockets) or when a background
    /// thread cannot be spawned.
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
        let pubsub = backend.dispatcher(config.dial(&metrics))?;
        let watchdog = Watchdog::start(
            Arc::clone(&backend),
            config.watchdog_timeout,
            config.renew_batch_size,
            config.replica_sync,
            Arc::clone(&metrics),
        )?;
        log::debug!("redlatch client {id} created (connections named {name})");
        let client = Client {
            inner: Arc::new(Inner {
                config,
                id,
                requests: AtomicU64::new(1),
                watchdog,
                pubsub,
                backend,
                metrics,
            }),
        };
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
        self.inner.metrics.snapshot()
    }

    /// A reentrant lock named `name` (Redisson's `RLock`). Nothing is sent to Redis yet.
    ///
    /// The name is checked by each call on the lock: an empty name gives
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("inventory:1000");
    /// let _guard = lock.lock()?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Lock {
        let name = self.named(name);
        Lock::new(self.clone(), &name, Plain::new(&name.key))
    }

    /// A fair lock named `name` (Redisson's `RFairLock`): threads, in this process or any
    /// other, get it in the order they started waiting. Same API and guard as [`lock`](Self::lock).
    ///
    /// **When to pick it.** A plain lock goes to whichever waiter re-tries first after a
    /// release, and a thread that releases and locks again in a loop usually wins it back:
    /// waiters can starve. A fair lock queues waiters in Redis (FIFO) and wakes only the head
    /// of the queue on release, so no waiter starves and a releasing thread goes to the back.
    /// Pick it when order or starvation matters (job queues, turn-taking between services),
    /// or when many threads contend and each should make progress.
    ///
    /// **What it costs.** The queue is kept in Redis: each acquire or release also reads and
    /// writes a list and a sorted set (`redisson_lock_queue:{name}`,
    /// `redisson_lock_timeout:{name}`), every waiter subscribes its own channel, a waiter that
    /// gives up makes one more call to leave the queue, and throughput under contention is
    /// bounded by strict turn-taking (no lucky re-acquire by a thread already running). A
    /// waiting thread checks in once per half
    /// [`fair_thread_wait`](crate::ConfigBuilder::fair_thread_wait) (5 minutes by default) to
    /// keep its place; a waiter that dies holds up the queue until it is presumed dead, about
    /// one thread wait after its turn comes.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let fair = client.fair_lock("payments");
    /// let guard = fair.lock()?; // waits its turn behind earlier waiters
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Lock {
        let name = self.named(name);
        let fair = Fair::new(&name.key, self.inner.config.fair_thread_wait);
        Lock::new(self.clone(), &name, fair)
    }

    /// A non-reentrant lock named `name` (Redisson's `RedissonNonReentrantLock`): the keys,
    /// hash field and channel of [`lock`](Self::lock), so the two (and Java clients of either)
    /// exclude each other on the same name, but an owner that holds it cannot acquire it
    /// again. Same API and guard as [`lock`](Self::lock).
    ///
    /// A second `lock`, `try_lock` or `try_lock_for` by the owner (the same thread, through any
    /// `Lock` of this name, or the same [`LockOwner`] on any thread) returns
    /// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) at once: it neither waits for itself
    /// (a deadlock) nor counts a second hold, so the one guard's release frees the lock.
    /// Redisson throws `IllegalMonitorStateException` in that case.
    ///
    /// **When to pick it.** When code that runs under the lock must never take it again, and a
    /// re-entry would be a bug to report (a callback that calls back into the locking code,
    /// work handed to the same owner twice) rather than a nested hold to count.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.non_reentrant_lock("import:daily");
    /// let guard = lock.lock()?;
    /// assert!(lock.try_lock().unwrap_err().is_already_held());
    /// guard.unlock()?; // the lock is free again
    /// # Ok(()) }
    /// ```
    pub fn non_reentrant_lock(&self, name: &str) -> Lock {
        let name = self.named(name);
        Lock::new(self.clone(), &name, NonReentrant::new(&name.key))
    }

    /// A non-reentrant fair lock named `name` (Redisson's `RedissonNonReentrantFairLock`): the
    /// keys, queue and channels of [`fair_lock`](Self::fair_lock), granted in arrival order,
    /// but an owner that holds it cannot acquire it again, as with
    /// [`non_reentrant_lock`](Self::non_reentrant_lock). The refused acquire returns
    /// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) at once and never queues the owner
    /// behind itself.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.non_reentrant_fair_lock("payments");
    /// assert!(lock.is_fair() && !lock.is_reentrant());
    /// let guard = lock.lock()?; // waits its turn behind earlier waiters
    /// assert!(lock.lock().unwrap_err().is_already_held());
    /// # Ok(()) }
    /// ```
    pub fn non_reentrant_fair_lock(&self, name: &str) -> Lock {
        let name = self.named(name);
        let fair = NonReentrantFair::new(&name.key, self.inner.config.fair_thread_wait);
        Lock::new(self.clone(), &name, fair)
    }

    /// A fenced lock named `name` (Redisson's `RFencedLock`): a reentrant lock whose every
    /// acquire also takes a fencing token, [`LockGuard::token`](crate::LockGuard::token),
    /// from the counter `redisson_lock_token:{name}` (same script call, no extra round trip).
    /// Same API and guard as [`lock`](Self::lock).
    ///
    /// A lease cannot stop a holder that pauses (GC, swap, SIGSTOP) past it from acting as
    /// if it still held the lock; a token can, if the protected resource checks it: see
    /// [`FencedResource`](crate::FencedResource).
    ///
    /// Why only this kind has tokens: the plain, fair and read-write locks keep the layout of
    /// Redisson's `RLock`, `RFairLock` and `RReadWriteLock`, whose Java scripts count nothing.
    /// A counter bumped by our acquires alone would miss the Java clients' acquires of the
    /// same lock, so a resource could not tell a stale Rust holder from a current Java one;
    /// and it would leave a never-expiring key behind for every lock name. The fenced lock's
    /// counter is bumped by Redisson and by us alike, inside the acquire script, so its token
    /// costs no extra round trip.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.fenced_lock("ledger").lock()?;
    /// let token: u64 = guard.token().expect("a fenced lock's guard has a token");
    /// # Ok(()) }
    /// ```
    pub fn fenced_lock(&self, name: &str) -> Lock {
        let name = self.named(name);
        Lock::new(self.clone(), &name, Fenced::new(&name.key))
    }

    /// A spin lock named `name` (Redisson's `RSpinLock`): a reentrant lock whose waiters poll
    /// instead of listening, for servers and proxies that do not pass pub/sub. Same API and
    /// guard as [`lock`](Self::lock), watchdog included; waiters pace their retries with the
    /// client's [`spin_backoff`](crate::ConfigBuilder::spin_backoff).
    ///
    /// It keeps the plain lock's hash (`name`: owner → hold count), so a spin lock and a
    /// [`lock`](Self::lock) (or a fenced lock) of the same name exclude each other. A waiter
    /// sends no SUBSCRIBE: after a failed attempt it retries after a delay that starts at
    /// 1 ms, doubles (plus a few ms of jitter) and settles between 96 and 128 ms (the
    /// defaults), and never sleeps past the lock's remaining lease. A release publishes
    /// nothing, as Redisson's.
    ///
    /// **When to pick it.** When pub/sub does not reach the client: proxies (Envoy,
    /// twemproxy-like layers) or managed services that do not forward SUBSCRIBE, ACLs that
    /// deny the `@pubsub` commands, or a large cluster where every PUBLISH is broadcast to
    /// every node. Elsewhere, [`lock`](Self::lock) is cheaper and hands over faster.
    ///
    /// **What it costs.** One acquire script call per back-off step per waiting thread:
    /// with the defaults, the first attempt and 7 retries within about 0.2 s, then one retry
    /// per 96-128 ms, about 9 per second per waiter for as long as it waits (1,000 waiters:
    /// about 9,000 calls/s). A
    /// release is noticed at the waiter's next retry, up to 128 ms later (a plain lock's
    /// waiter hears it in one round trip). No waiter is woken: it is not fair, and a thread
    /// that releases and locks again usually wins.
    ///
    /// **Mixing with plain locks.** A plain lock's waiter is woken by a release of a plain
    /// lock, but not by a spin lock's release (which publishes nothing): it retries when the
    /// lease it last saw runs out, up to the watchdog timeout (30 s) later.
    ///
    /// **Differences from Redisson.** Same scripts, keys and default back-off (1 ms, ×2,
    /// 128 ms, plus up to n-1 ms of jitter on the n-th step). Once at the maximum, Redisson
    /// sleeps exactly the maximum; this client draws each delay between ¾ of it and it, so
    /// waiters that started together spread out. Each delay is also capped by the lock's
    /// remaining lease and the caller's deadline, and the wait is interruptible
    /// ([`Interrupter`](crate::Interrupter)) and ends on [`close`](Self::close).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.spin_lock("reports");
    /// let guard = lock.lock()?; // polls with back-off, no SUBSCRIBE
    /// # Ok(()) }
    /// ```
    pub fn spin_lock(&self, name: &str) -> Lock {
        self.spin_lock_with_backoff(name, self.inner.config.spin_backoff)
    }

    /// A [spin lock](Self::spin_lock) named `name` whose waiters pace their retries with
    /// `backoff` (Redisson's `getSpinLock(name, backOff)`).
    ///
    /// Bad bounds (see [`Backoff`]) are reported by the acquire calls as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let backoff = redlatch::Backoff::new(Duration::from_millis(10), Duration::from_millis(500));
    /// let guard = client.spin_lock_with_backoff("reports", backoff).lock()?;
    /// # Ok(()) }
    /// ```
    pub fn spin_lock_with_backoff(&self, name: &str, backoff: Backoff) -> Lock {
        let name = self.named(name);
        Lock::new(self.clone(), &name, Spin::new(&name.key, backoff))
    }

    /// A value named `name` that only the newest holder of a fenced lock may change: see
    /// [`FencedResource`]. Nothing is sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.fenced_lock("account:7").lock()?;
    /// client.fenced_resource("account:7:balance").write(&guard, "100")?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_resource(&self, name: &str) -> FencedResource {
        FencedResource::new(self.clone(), self.named(name))
    }

    /// A read-write lock named `name` (Redisson's `RReadWriteLock`): shared
    /// [`read`](ReadWriteLock::read) and exclusive [`write`](ReadWriteLock::write) sides.
    /// Nothing is sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let rw = client.read_write_lock("catalog");
    /// let _reading = rw.read().lock()?;
    /// # Ok(()) }
    /// ```
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), &self.named(name))
    }

    /// A semaphore named `name` (Redisson's `RSemaphore`): a count of permits in Redis.
    /// Nothing is sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.semaphore("encoder-slots");
    /// slots.try_set_permits(4)?;
    /// let _permit = slots.acquire_guard(1)?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::new(self.clone(), self.named(name))
    }

    /// A count-down latch named `name` (Redisson's `RCountDownLatch`). Nothing is sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("workers-ready");
    /// # Ok(()) }
    /// ```
    pub fn count_down_latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch::new(self.clone(), self.named(name))
    }

    /// A permit-expirable semaphore named `name` (Redisson's `RPermitExpirableSemaphore`):
    /// each permit has an id and a lease. Nothing is sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// # Ok(()) }
    /// ```
    pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.clone(), self.named(name))
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

    /// A new owner of lock holds that is not a thread: lock as it with
    /// [`Lock::with_owner`](crate::Lock::with_owner) from any thread, and release its guards
    /// (which are `Send`) on any thread. See [`LockOwner`](crate::LockOwner). Nothing is sent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let job = client.lock_owner();
    /// let guard = client.lock("job:42").with_owner(&job).lock()?;
    /// let pool_worker = std::thread::spawn(move || guard.unlock());
    /// pool_worker.join().unwrap()?;
    /// # Ok(()) }
    /// ```
    pub fn lock_owner(&self) -> LockOwner {
        LockOwner::new(self)
    }

    /// The owner id of the calling thread in this client, as written into lock hashes.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert!(client.owner_id().starts_with(client.id()));
    /// ```
    pub fn owner_id(&self) -> String {
        keys::owner_id(&self.inner.id, thread_number())
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

/// A number for the calling OS thread, given on first use and unique in this process
/// (Redisson uses the Java thread id in the same place).
impl Client {
    /// The command lock scripts publish unlock messages with.
    pub(crate) fn publish(&self) -> &'static str {
        self.inner.backend.pubsub_mode().publish()
    }

    /// The object name `name`, mapped by the configured [`NameMapper`](crate::NameMapper):
    /// every constructor above makes its object from this, once.
    pub(crate) fn named(&self, name: &str) -> Named {
        Named::new(&self.inner.config.name_mapper, name)
    }
}
