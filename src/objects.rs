//! The objects a [`Client`] makes: every lock kind, the read-write lock, both semaphores, the
//! latch, the fenced resource, and owners that are not threads. Each is a handle (nothing is
//! sent until it is used) over the client and the object's mapped name.

use crate::backoff::Backoff;
use crate::client::Client;
use crate::election::Election;
use crate::fenced::FencedResource;
use crate::keys;
use crate::latch::CountDownLatch;
use crate::lock::{
    thread_number, Fair, Group, Lock, LockOwner, LockSet, Plain, ReadWriteLock, Spin,
};
use crate::rate::RateLimiter;
use crate::semaphore::{PermitExpirableSemaphore, Semaphore};

impl Client {
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
    pub fn lock(&self, name: impl AsRef<str>) -> Lock {
        let name = self.named(name.as_ref());
        Lock::new(self.clone(), &name, Plain::new(&name.key))
    }

    /// Many plain locks, one per name in `names`, taken all or none under one deadline by
    /// one script call per server and hash slot (see [`LockSet`]). Nothing is sent yet.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.lock_set(["sku:1", "sku:2", "sku:3"]).lock()?;
    /// # Ok(()) }
    /// ```
    pub fn lock_set(&self, names: impl IntoIterator<Item = impl AsRef<str>>) -> LockSet {
        LockSet::new(self, names)
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
    pub fn fair_lock(&self, name: impl AsRef<str>) -> Lock {
        let name = self.named(name.as_ref());
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
    pub fn non_reentrant_lock(&self, name: impl AsRef<str>) -> Lock {
        let name = self.named(name.as_ref());
        Lock::new(self.clone(), &name, Plain::non_reentrant(&name.key))
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
    pub fn non_reentrant_fair_lock(&self, name: impl AsRef<str>) -> Lock {
        let name = self.named(name.as_ref());
        let fair = Fair::non_reentrant(&name.key, self.inner.config.fair_thread_wait);
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
    pub fn fenced_lock(&self, name: impl AsRef<str>) -> Lock {
        let name = self.named(name.as_ref());
        Lock::new(self.clone(), &name, Plain::fenced(&name.key))
    }

    /// The leader election `name`: threads and processes campaign, one leads at a time,
    /// with a term (a fencing token) and a value; others can ask who leads and observe every
    /// leader in turn. Leading is holding the fenced lock `name` (see
    /// [`fenced_lock`](Self::fenced_lock)), which a Java peer sees as Redisson's
    /// `RFencedLock`. See [`Election`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// if let Some(leader) = client.election("compactor").leader()? {
    ///     println!("{} leads (term {})", leader.value_str(), leader.term);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl AsRef<str>) -> Election {
        Election::new(self.clone(), &self.named(name.as_ref()))
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
    pub fn spin_lock(&self, name: impl AsRef<str>) -> Lock {
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
    pub fn spin_lock_with_backoff(&self, name: impl AsRef<str>, backoff: Backoff) -> Lock {
        let name = self.named(name.as_ref());
        Lock::new(self.clone(), &name, Spin::new(backoff))
    }

    /// A lock on some `values` of the group `group`, all taken and released at once: Redisson's
    /// `getMultiLock(group, values)` (`RedissonFasterMultiLock`, Redisson 3.38.0 and later), with
    /// the same keys, fields and messages, so that a Java service and a Rust one exclude each
    /// other. Two locks of one group exclude each other when they share a value; a lock of
    /// `{a, b}` and one of `{c}` are held at once. Same API and guard as [`lock`](Self::lock):
    /// waits, leases, watchdog renewal, reentrancy (per value), loss signals.
    ///
    /// `values` are the bytes Redisson's codec writes for each value: Redisson names a value
    /// by a hash of them. [`ValueCodec`](crate::ValueCodec) writes them as `StringCodec` and
    /// Redisson's default `Kryo5Codec` do; with another codec, give its bytes.
    ///
    /// The group is one hash holding every value locked in it: Redisson asks that a group be
    /// as small as the data allows (`class_100`, not `class`). Nothing is sent to Redis yet;
    /// a lock of no values is refused by each call with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    ///
    /// **Differences from Redisson.** The scripts read the server's clock (Redisson's client
    /// sends its own); a release publishes only when it freed a value; a renewal does not
    /// bring back a value whose time ran out; [`Lock::hold_count`] counts the holds of the
    /// first value (by field order) where Redisson has no count. The lock has no
    /// [conditions](Lock::condition).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redlatch::ValueCodec;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// // As Java's `redisson.getMultiLock("class_100", List.of("001", "002"))` with StringCodec.
    /// let students = ["001", "002"].map(|s| ValueCodec::String.encode_str(s));
    /// let lock = client.group_lock("class_100", students);
    /// let _guard = lock.lock()?;
    /// # Ok(()) }
    /// ```
    pub fn group_lock<V: AsRef<[u8]>>(
        &self,
        group: impl AsRef<str>,
        values: impl IntoIterator<Item = V>,
    ) -> Lock {
        let name = self.named(group.as_ref());
        Lock::new(self.clone(), &name, Group::new(&name.key, values))
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
    pub fn fenced_resource(&self, name: impl AsRef<str>) -> FencedResource {
        FencedResource::new(self.clone(), self.named(name.as_ref()))
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
    pub fn read_write_lock(&self, name: impl AsRef<str>) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), &self.named(name.as_ref()))
    }

    /// A semaphore named `name` (Redisson's `RSemaphore`): a count of permits in Redis.
    /// Nothing is sent yet.
    ///
    /// Set its permits first ([`try_set_permits`](Semaphore::try_set_permits)): a semaphore
    /// nobody set has 0 permits, and [`acquire`](Semaphore::acquire) waits until somebody
    /// adds some, for ever if nobody does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.semaphore("encoder-slots");
    /// slots.try_set_permits(4)?; // first: unset, it has no permits
    /// let _permit = slots.acquire(1)?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl AsRef<str>) -> Semaphore {
        Semaphore::new(self.clone(), self.named(name.as_ref()))
    }

    /// A count-down latch named `name` (Redisson's `RCountDownLatch`). Nothing is sent yet.
    ///
    /// Set its count first ([`try_set_count`](CountDownLatch::try_set_count)): a latch nobody
    /// set is open, and [`await_zero`](CountDownLatch::await_zero) returns at once.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let latch = client.count_down_latch("workers-ready");
    /// latch.try_set_count(3)?; // first: unset, it is open
    /// # Ok(()) }
    /// ```
    pub fn count_down_latch(&self, name: impl AsRef<str>) -> CountDownLatch {
        CountDownLatch::new(self.clone(), self.named(name.as_ref()))
    }

    /// A rate limiter named `name` (Redisson's `RRateLimiter`): at most a rate of permits
    /// per interval, across every client. Nothing is sent yet.
    ///
    /// Set its rate first ([`try_set_rate`](RateLimiter::try_set_rate)): an acquire on a
    /// limiter without one fails with [`Error::RateNotSet`](crate::Error::RateNotSet).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let api = client.rate_limiter("partner-api");
    /// api.try_set_rate(redlatch::RateType::Overall, 100, Duration::from_secs(1))?;
    /// # Ok(()) }
    /// ```
    pub fn rate_limiter(&self, name: impl AsRef<str>) -> RateLimiter {
        RateLimiter::new(self.clone(), self.named(name.as_ref()))
    }

    /// A permit-expirable semaphore named `name` (Redisson's `RPermitExpirableSemaphore`):
    /// each permit has an id and a lease. Nothing is sent yet.
    ///
    /// Set its permits first
    /// ([`try_set_permits`](PermitExpirableSemaphore::try_set_permits)): one nobody set has
    /// 0 permits, and an acquire waits until somebody adds some.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("render-slots");
    /// slots.try_set_permits(4)?; // first: unset, it has no permits
    /// # Ok(()) }
    /// ```
    pub fn permit_expirable_semaphore(&self, name: impl AsRef<str>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.clone(), self.named(name.as_ref()))
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
}
