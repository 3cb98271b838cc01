//! Blocking distributed locks on Redis, wire-compatible with Redisson.
//!
//! `redlatch` gives plain-thread Rust programs `std::sync`-style lock guards that work across
//! processes and machines. A Rust service and a Java service using Redisson can guard the same
//! resource with the same lock and wake each other.
//!
//! ```no_run
//! use std::time::Duration;
//! # fn main() -> redlatch::Result<()> {
//! let client = redlatch::Client::open("redis://127.0.0.1:6379/")?;
//! let lock = client.lock("inventory:1000");
//! {
//!     let _guard = lock.lock()?; // blocks; renewed by the watchdog while held
//!     // critical section
//! } // released: one waiter (per client) is woken by pub/sub
//! if let Some(guard) = lock.try_lock_for(Duration::from_secs(3))? {
//!     guard.unlock()?;
//! }
//! # Ok(()) }
//! ```
//!
//! # How it works
//!
//! Each [`Client`] has a pool of command connections, one pub/sub thread (one connection) that
//! wakes blocked threads when a lock is released, and one watchdog thread that renews the
//! leases of all held locks in batches. Waiting threads send nothing to Redis while they wait
//! (except a spin lock's, which polls: see below); while any does, the pub/sub connection is
//! checked with a `PING` every
//! [`pubsub_ping_interval`](ConfigBuilder::pubsub_ping_interval), whatever their number.
//!
//! # Topologies
//!
//! [`Config::builder`] for one server, [`Config::sentinel`] for a master found through Redis
//! Sentinel (followed across failovers), [`Config::cluster`] for a Redis Cluster (one pool per
//! master, and one pub/sub connection and thread per node with waiters). Each takes `rediss://`
//! addresses for TLS (the default `tls` feature; see
//! [`ConfigBuilder::tls_root_certificates`]). [`MultiLock`] holds
//! several locks as one; [`RedLock`] holds a lock on a majority of independent masters (read
//! its docs for why we recommend a replica-synced fenced lock instead).
//!
//! # Plain or fair
//!
//! [`Client::lock`] gives the lock to whichever waiter re-tries first after a release (cheap,
//! but a busy thread can win it back again and again). [`Client::fair_lock`] queues waiters in
//! Redis and grants in arrival order, across threads and processes, at the cost of keeping the
//! queue: see [`Client::fair_lock`] for when to pick which.
//!
//! # Without pub/sub: the spin lock
//!
//! [`Client::spin_lock`] (Redisson's `RSpinLock`) is the plain lock's hash, so it excludes
//! plain and fenced locks of the same name, but its waiters never subscribe: each retries
//! its acquire after an exponential back-off with jitter ([`Backoff`]; by default from 1 ms,
//! doubling, up to 128 ms), and a release publishes nothing. Pick it when pub/sub does not
//! reach the client (a proxy or managed service that does not forward SUBSCRIBE, an ACL
//! without `@pubsub`, a cluster too large for broadcast PUBLISH). It costs one script call
//! per back-off step per waiting thread: with the defaults, 8 in the first ~0.2 s, then about
//! 9 per second for as long as it waits; and a release is noticed up to 128 ms late. Its
//! waits are interruptible and end on [`Client::close`], as every other wait, and count in
//! [`Metrics::waiting`] once they have retried once.

//! # Non-reentrant locks
//!
//! [`Client::non_reentrant_lock`] and [`Client::non_reentrant_fair_lock`] are Redisson's
//! `RedissonNonReentrantLock` and `RedissonNonReentrantFairLock`: the plain and fair locks on
//! the same keys and channels (so they exclude [`Client::lock`], [`Client::fair_lock`] and
//! Java clients of the same name), except that an owner that holds one and acquires it again
//! gets [`Error::AlreadyHeld`] at once, whether it would have waited or not: the acquire is
//! neither counted nor a deadlock, and nothing is queued. Pick them where a re-entry is a bug
//! to catch rather than a nested hold to count. Redisson throws
//! `IllegalMonitorStateException` in that case; [`Error::is_already_held`] tells it apart.
//!
//! # Safety beyond leases
//!
//! [`Client::fenced_lock`] hands each hold a fencing token ([`LockGuard::token`]) and
//! [`FencedResource`] refuses writes with stale tokens; [`LockGuard::is_lost`] and
//! [`LockGuard::on_lost`] tell a holder its lock is gone; [`ConfigBuilder::sync_replicas`]
//! makes lock writes wait for replicas. The guide's [safety chapter](_guide::safety) says what
//! each guarantees.
//!
//! # A cap on holding
//!
//! The watchdog renews a hold for as long as its guard lives, so a thread that is stuck (a
//! deadlock, a hung call without timeout) or a guard kept by mistake holds the lock forever.
//! [`ConfigBuilder::max_hold`] (for every lock of a client) or [`Lock::with_max_hold`] (for
//! one) caps that: the watchdog sends no renewal whose lease would end more than the maximum
//! hold time after the acquire, so the lease runs out in Redis at the cap at the latest (and
//! at most a third of the watchdog timeout before it), others can take the lock, and the
//! guard turns lost: [`LockGuard::is_lost`] is true, its [`on_lost`](LockGuard::on_lost)
//! callbacks get [`LostReason::MaxHoldReached`], a warning names the lock and owner, and its
//! release sends nothing and returns [`Error::LockLost`].
//!
//! Use it where a hold longer than some bound is a bug, to trade a stuck lock for a lost one
//! that the holder is told about. Pick a cap well above the longest legitimate hold, and at
//! least one [watchdog timeout](ConfigBuilder::watchdog_timeout): a shorter cap ends the hold
//! when the acquire's lease runs out. Holds with an explicit lease ([`Lock::with_lease`]) end
//! with it and are not capped. A re-entry by the same thread keeps the cap of the thread's
//! first hold (it counts from that acquire), and a re-entry or the release of an inner hold
//! sets the lease in Redis no further than the cap. [`Client::close`] loses capped holds as
//! any other.
//!
//! Redisson has no such cap: its watchdog renews a lock taken without a lease time until it
//! is unlocked or the client shuts down; only a `leaseTime` bounds a hold, and that lease is
//! never renewed. A Java client cannot tell a capped hold from another.
//!
//! # Synchronizers
//!
//! Redisson's other synchronizers, on the same keys and channels and in the same blocking style:
//! [`Client::read_write_lock`] (a [`ReadWriteLock`] whose sides are [`Lock`]s),
//! [`Client::semaphore`] ([`Semaphore`], with [`SemaphoreGuard`]),
//! [`Client::permit_expirable_semaphore`] ([`PermitExpirableSemaphore`], permits with ids and
//! leases, with [`PermitGuard`]), [`Client::count_down_latch`] ([`CountDownLatch`]) and
//! [`Client::rate_limiter`] ([`RateLimiter`], at most a rate of permits per interval; see
//! the [guide's chapter](crate::_guide::rate_limits)).
//! A permit taken with [`PermitExpirableSemaphore::acquire_renewed`] has no lease of
//! its own: the watchdog renews it, as it renews locks, for as long as its guard lives.
//!
//! **Set them up first.** As in Redisson, a semaphore nobody set has 0 permits, so its
//! `acquire` waits until somebody adds some (for ever, if nobody does); and a latch nobody
//! set is open, so its [`await_zero`](CountDownLatch::await_zero) returns at once. Run the
//! setter ([`Semaphore::try_set_permits`], [`PermitExpirableSemaphore::try_set_permits`],
//! [`CountDownLatch::try_set_count`], [`RateLimiter::try_set_rate`]) before the first
//! acquire or await. A rate limiter without a rate fails with [`Error::RateNotSet`].
//!
//! # Naming: blocking, trying, waiting
//!
//! Every primitive names its calls the same way (parking_lot's and crossbeam's habit):
//!
//! | call | waits | gives up |
//! |---|---|---|
//! | `x(what)` | until it succeeds | never (errors only) |
//! | `try_x(what)` | never: one attempt | `Ok(false)` / `Ok(None)` at once |
//! | `try_x_for(what, wait: Duration)` | at most `wait` | `Ok(false)` / `Ok(None)` |
//! | `try_x_until(what, deadline: Instant)` | until `deadline` | `Ok(false)` / `Ok(None)` |
//!
//! `what` is what the call takes, first (a semaphore's permits, a lease), then the wait or
//! the deadline, last: [`Semaphore::try_acquire_for`]`(permits, wait)`,
//! [`PermitExpirableSemaphore::try_acquire_many_for`]`(permits, lease, wait)`. A call that
//! succeeds hands back a guard where there is something to give back ([`LockGuard`],
//! [`SemaphoreGuard`], [`PermitGuard`]): the names do not say so. [`Lock`]'s calls are plain
//! `lock`, `try_lock`, `try_lock_for`, `try_lock_until`. A permit whose lease the watchdog
//! renews, instead of one given, adds `_renewed` to the verb and takes no lease
//! ([`PermitExpirableSemaphore::try_acquire_renewed_for`]`(wait)`). `_for` computes a
//! deadline and calls `_until`. A zero `wait` makes one attempt, as `try_x` does, and so does
//! a deadline already past; a wait or deadline over a year away is an
//! [`Error::InvalidArgument`], before anything is sent. Running out of time is not an error.
//!
//! ```
//! use std::time::Duration;
//! let client = redlatch::Client::open("redis://127.0.0.1/")?; // connects lazily
//! let over_a_year = redlatch::MAX_DURATION + Duration::from_secs(1);
//! let err = client.lock("orders").try_lock_for(over_a_year).unwrap_err();
//! assert!(err.is_invalid_argument());
//! # Ok::<(), redlatch::Error>(())
//! ```
//!
//! A wait that takes nothing, [`CountDownLatch::await_zero`], drops the `try_` prefix as
//! parking_lot's `Condvar::wait_for` does: `await_for(wait)` and `await_until(deadline)`
//! return whether the latch opened. Setting up follows the same split: `set_x` writes
//! whatever was there, `try_set_x` only where nothing was ([`Semaphore::set_permits`],
//! [`Semaphore::try_set_permits`], [`CountDownLatch::try_set_count`]), and
//! `try_set_x_with_expiry` also gives the key a time to live
//! ([`Semaphore::try_set_permits_with_expiry`]).
//!
//! # Owners that are not threads
//!
//! A hold belongs to the thread that takes it, as in Java: a [`LockGuard`] is not `Send`,
//! and returning one from a spawned or scoped thread fails to compile with "`*const ()`
//! cannot be sent between threads safely ... required because it appears within the type
//! `LockGuard`". Release it on its thread (or use [`Lock::with`]). For a hold that must
//! outlive its thread (a job moving between the workers of a pool), [`Client::lock_owner`] makes a
//! [`LockOwner`]: [`Lock::with_owner`] locks as it from any thread, its guards are `Send` and
//! release on any thread, and reentrancy is per owner. Its id keeps Redisson's form
//! `<client uuid>:<number>`, with numbers no thread of the process has (Redisson's async API
//! takes an explicit thread id for the same need). [`MultiLock`] and [`RedLock`] take
//! thread-owned locks only.
//!
//! # Interrupting waits, closing a client
//!
//! Every blocking call (a lock of any kind, [`MultiLock`], [`RedLock`], a semaphore acquire,
//! a latch await) can be interrupted from another thread through the waiting thread's
//! [`Interrupter`], as Java's `lockInterruptibly`: it returns [`Error::Interrupted`] within
//! milliseconds and leaves nothing behind in Redis. [`Client::close`] wakes every waiter of
//! the client with [`Error::Closed`] and stops its threads; the locks it still holds expire
//! with their lease.
//!
//! # Operating locks
//!
//! [`Client::inspect`] reads what a name holds ([`inspect::Inspection`]: its kind, holders with
//! client id, thread and hold count, lease, fair queue, readers, permits, count, fencing
//! token) from its keys; [`Client::list`] finds them by pattern with `SCAN`;
//! [`Client::watch`] follows one live ([`watch::Event`]s). Each client names its connections
//! `<prefix>:<client id>` ([`ConfigBuilder::client_name`]), so [`Client::connections`] and
//! [`Inspection::trace`](inspect::Inspection::trace) tell which host and process a holder or waiter is, or that its
//! client is gone. The `redlatch` binary (`cargo install redlatch --features cli`) does all
//! this from a shell, breaks stuck locks, and runs commands under a lock. See the guide's
//! [operating chapter](_guide::operating).
//!
//! The crate's root holds the locks and synchronizers, their guards, the client and its
//! configuration; what an operator reads lives in a module per view: [`inspect`],
//! [`watch`], [`history`] (with the spans both `top` and the timeline draw), [`top`],
//! [`deadlock`] (the wait-for graph), [`order`] (lock-order warnings), [`check`] and
//! [`metrics`].
//!
//! # Cargo features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `tls` | yes | `rediss://` addresses, your own CA, client certificates |
//! | `serde` | no | `Serialize` on every report type ([`inspect`], [`watch`], [`metrics`], [`history`], [`top`], [`deadlock`], [`order`]) |
//! | `metrics` | no | counters, histograms and gauges through the [`metrics`](https://docs.rs/metrics) facade, labelled by lock kind ([`ConfigBuilder::metrics_lock_names`] adds the name) |
//! | `tracing` | no | [`tracing`](https://docs.rs/tracing) spans at `debug` level: `redlatch.acquire` (fields `name`, `kind`, `lease_ms`, `outcome`, `waited_ms`, `hold_count`) with `redlatch.wait` inside it, `redlatch.release` (`name`, `kind`, `outcome`), `redlatch.renewal` (`holds`, `renewed`, `failed`); a `warn` event for a lost hold (`name`, `owner`, `reason`). `log` goes on as without it |
//! | `cli` | no | the `redlatch` binary (clap, serde_json); library users do not build it |
//!
//! # The guide
//!
//! Longer than these docs, shorter than the code: [`_guide`] has a chapter each on the
//! synchronizers, safety, sharing locks with Java services, topologies, operating locks, and
//! how it works.
//!
//! # Several applications on one Redis: the name mapper
//!
//! [`ConfigBuilder::name_prefix`] (or [`ConfigBuilder::name_mapper`] with a [`NameMapper`])
//! maps every object's name before any key is made from it, as Redisson's `NameMapper`
//! (`Config.setNameMapper`, `PrefixNameMapper`): with the prefix `app1:`, the lock `orders`
//! is the key `app1:orders`, and the mapped name stands for `name` in every key and channel
//! of the table below (`redisson_lock__channel:{app1:orders}`,
//! `redisson_lock_queue:{app1:orders}`, ...), as Redisson uses an object's mapped (raw) name
//! for all of them. So services sharing one Redis keep apart, and a Java and a Rust service
//! with the same mapper share their locks. As Redisson's, the prefix mapper leaves a name
//! that already starts with the prefix as it is.
//!
//! Objects, [`Client::inspect`], [`Client::list`], [`Client::watch`] and the `redlatch`
//! binary (`--name-prefix`) take and show names as the caller gives them (`name()` returns
//! `orders`); error messages and logs show the mapped name, the key an operator finds in
//! Redis.
//!
//! # Key layout (Redisson's)
//!
//! | key | content |
//! |---|---|
//! | `name` | HASH: `<client uuid>:<thread number>` → hold count; PEXPIRE = lease |
//! | `redisson_lock__channel:{name}` | channel: `0` published when the lock is freed |
//! | `redisson_unlock_latch:{name}:<client uuid>-<n>` | STRING, short-lived: makes a retried unlock of a group lock idempotent (the other locks' unlocks write none: each says the hold count it expects); for a [semaphore](Semaphore), the receipt of an acquire (the permits taken), by which one whose reply was lost is settled; the verdict of a [`FencedResource`] write, for the write sent again; deleted after the reply (16 to a `DEL`) |
//! | `redisson_lock_queue:{name}` | [fair lock](Client::fair_lock): LIST of waiting owners, in arrival order |
//! | `redisson_lock_timeout:{name}` | fair lock: ZSET owner → deadline (ms on the server's clock) |
//! | `redlatch_fair_turn:{name}` | fair lock (ours): HASH `owner`, `chain`, `until`: the head woken with the lock free, whose deadline became one thread wait from then (`until`), and the deadline it had (`chain`), on which our newcomers chain; expires a second after `until` |
//! | `redisson_lock__channel:{name}:<owner>` | fair lock: each waiter's own channel, `0` when its turn comes |
//! | `name` | [group lock](Client::group_lock): HASH `<value>` → owner, `<value>:<owner>:expire_time` → ms since the epoch, `<value>:<owner>:lock_count` → holds (`<value>`: HighwayHash-128 of the encoded value, base64 without `==`); released on `redisson_lock__channel:{name}` |
//! | `name` | [read-write lock](ReadWriteLock): HASH `mode` → `read`/`write`, `<owner>` → read holds, `<owner>:write` → write holds |
//! | `{name}:<owner>:rwlock_timeout:<n>` | read-write lock: STRING per read hold, PEXPIRE = its lease |
//! | `redisson_rwlock:{name}` | read-write lock channel: `1` after a write unlock (wake all), `0` when a read unlock frees it |
//! | `name` | [semaphore](Semaphore): STRING, available permits; channel `redisson_sc:{name}` carries the new count |
//! | `{name}:timeout` | [permit-expirable semaphore](PermitExpirableSemaphore): ZSET permit id (the 16 bytes its hex stands for) → expiry (ms, server clock) |
//! | `name` | [count-down latch](CountDownLatch): STRING count; channel `redisson_countdownlatch__channel__{name}` |
//! | `name`, `{name}:value`, `{name}:permits` | [rate limiter](RateLimiter): HASH `rate`, `interval` (ms), `type`; STRING permits left; ZSET of the permits taken (member `struct.pack('Bc0I', #random, random, permits)`, score ms, server clock for ours); per client `{name}:value:<client id>` and `{name}:permits:<client id>`; channel `redlatch_rate:{name}` (ours) carries the permits left after a release (`rate` after a new rate, `deleted` when deleted) |
//! | `redisson_lock_token:{name}` | [fenced lock](Client::fenced_lock): STRING token counter, INCR on every acquire, no expiry; a missing one starts at the server's `TIME` in µs (Redisson's at 1) |
//! | `redlatch_semaphore:{name}` | [semaphore](Semaphore) (ours): STRING, the generation its permits were taken in, with the count's expiry |
//! | `redlatch_fence:{name}` | [`FencedResource`] (ours): HASH `token`, `holder` of the newest writer of the STRING `name` |
//! | `redlatch_watch:<channel>` | channel (ours): subscribed by a [`watch`](Client::watch) beside each channel it hears, so that `inspect` does not count it as a waiter; `forced` published before a [`force_unlock`](Lock::force_unlock) deletes a lock |
//! | `redlatch_condition:{name}:<condition>` | [condition](Condition) (ours): ZSET waiter id → deadline (ms, server clock; renewed while it waits), `-1` once a notification picked it |
//! | `redlatch_condition_queue:{name}:<condition>` | condition (ours): LIST of the waiters not yet picked, in arrival order |
//! | `redlatch_condition__channel:{name}:<condition>:<waiter>` | condition (ours): each waiter's own channel, `1` when a notification picks it |
//! | `redlatch_election:{name}` | [election](Election) (ours): HASH of the leader, `term` (its fencing token from the fenced lock `name`), `value`, `owner`, `since` (ms, server clock) |
//! | `redlatch_election_log:{name}` | election (ours): STREAM of every leader (`term`, `value`, `owner`, `since`), about the last 1,000 |
//! | `redlatch_election__channel:{name}` | election (ours): channel, a new leader's (or value's) term, `0` when a leader resigns |
//! | `redlatch_lockset_yield:{name}` | [lock set](LockSet) (ours): STRING, the owner whose set released the lock while somebody listened for it; its set leaves the lock to that waiter for 100 ms (PX) |
//! | `redlatch_revoke:{name}` | [revocation](crate::_guide::revocation) (ours): HASH of the one pending request on a plain or fenced lock (`victim`, `token`, `by`, `reason`, `at`, `bound`, `grace`, `defer`, `noticed`, `forced`; ms, server clock) and `calm:<owner>`, the end of a holder's unpreemptible section |
//! | `redlatch_revokes:{name}` | revocation (ours): capped STREAM, about the last 1,000 requests, notices and forced releases (`event`, `by`, `whom`, `token`, `reason`) |
//! | `redlatch_priority:{name}`, `redlatch_priority_alive:{name}` | [waiters with a priority](crate::Lock::with_priority) on a plain lock or a semaphore (ours): ZSET waiter → rank (ms, server clock: join time minus priority × aging step), and ZSET waiter → the end of its place (renewed at each attempt); on a fair lock the first only, the rank of each waiter in Redisson's queue (ten minutes' TTL, renewed by each acquire with a priority) |
//! | `redlatch_waits:{name}` | [deadlock detection](crate::_guide::deadlocks) (ours): HASH owner → `<expires> <since> <mode>` (ms, server clock; mode `x`, `f`, `r` or `w`) of each owner blocked on the lock longer than its client's `deadlock_check_after`; renewed while it waits, removed as the wait ends |
//! | `redlatch_waiting:{<client uuid>}` | deadlock detection (ours): HASH owner → `<expires> <since> <lock>`, the lock each of the client's recorded waiters waits for |
//! | `redlatch_order:<n>:<first>:<second>` | [lock-order warnings](crate::_guide::deadlocks) (ours, opt-in): HASH of the orders in which owners took two locks, `<d><held mode><taken mode>` → `<ms> <who and where>`, plus `first` and `second` (the names, `<n>` the first's length in bytes); a day's TTL, renewed while the pair recurs |
//! | `redlatch_history:{<client uuid>}` | [history](crate::ConfigBuilder::history) (ours, opt-in): a client's capped STREAM of events (`k` kind, `l` lock, `o` owner, `m` lock kind, `t` server µs, `w` waited µs, `h` held µs); a day's TTL past its last write |
//! | `redlatch_history_who:{<client uuid>}` | history and deadlock detection (ours): HASH `client`, `host`, `pid`, and `thread:<owner>` → thread name, who the client and its owners are |
//! | `redlatch_deadlocks` | deadlock detection (ours): the broken deadlocks, a capped STREAM (about 1,000, a week's TTL), each member's owner, lock and who it is |
//!
//! # Differences from `std::sync::Mutex`
//!
//! - The lock protects nothing in memory: it is a name in Redis. Guard the data yourself.
//! - It is reentrant per thread: a thread that holds it can lock again (hold count + 1),
//!   except a [non-reentrant lock](Client::non_reentrant_lock), which refuses.
//! - A hold can be lost: its lease may run out (an explicit lease, or a process paused longer
//!   than the watchdog timeout), or an operator may force-unlock it. Check
//!   [`LockGuard::is_lost`] before committing work that must be exclusive, or have
//!   [`LockGuard::on_lost`] call you (with a [`LostReason`]) as soon as the hold is known lost.
//! - Every call can fail (network, server): methods return [`Result`].
//! - No poisoning: a panic while holding releases the lock in `Drop` like any other exit.
//! - Guards are not `Send`: the hold belongs to the thread, as in Java (unless it belongs to a
//!   [`LockOwner`]).
//!
//! # Differences from Redisson
//!
//! - **Same wire protocol.** Keys, hash fields, channels, messages and script semantics are
//!   Redisson's, so a Java `RLock` (fair lock, read-write lock, semaphore, latch) and ours on
//!   the same name exclude and wake each other. Owner ids are `<client uuid>:<thread number>`,
//!   with a per-process thread counter in place of Java's thread id.
//! - **Blocking and guard-based.** No async API; a guard releases on drop, and guards are not
//!   `Send` (a hold belongs to its thread, as in Java), unless it belongs to a [`LockOwner`]
//!   (where Redisson's async API takes an explicit thread id).
//! - **Cheaper at scale.** One pub/sub connection and thread per client (per node with waiters
//!   on a cluster) serves every waiter, and one watchdog thread renews all held locks in
//!   batched script calls (Redisson renews each lock with its own call).
//! - **Faults are reported, not just logged.** [`LockGuard::is_lost`] and
//!   [`LockGuard::on_lost`] tell a holder its lease is gone; a [`MultiLock`] unlock releases
//!   every member and reports every failure (Redisson stops at the first); fencing tokens come
//!   with [`FencedResource`], which refuses stale writers.
//! - **Holds can be capped.** [`ConfigBuilder::max_hold`] and [`Lock::with_max_hold`] stop the
//!   watchdog renewing a hold after a maximum hold time (see above); Redisson has no such cap.
//! - **Observable.** [`Client::metrics`] counts acquisitions, waits, holds, renewals and lost
//!   locks; every log message names its lock and owner.
//! - **Not here:** Redisson's async and reactive APIs, and the locks it builds on its
//!   collections (such as `RMap::getLock`).

#![warn(missing_docs)]

pub mod _guide;
mod backend;
mod backoff;
pub mod check;
mod client;
mod config;
pub mod deadlock;
mod election;
mod error;
mod events;
mod extensions;
mod fenced;
mod glob;
mod handover;
pub mod history;
mod hold;
pub mod inspect;
mod interrupt;
mod keys;
mod latch;
mod list;
mod lock;
pub mod metrics;
mod names;
mod net;
mod objects;
pub mod order;
mod pubsub;
mod rate;
mod scripts;
mod semaphore;
#[cfg(feature = "serde")]
mod ser;
#[cfg(test)]
mod testing;
mod time;
pub mod top;
mod trace;
pub mod watch;
mod watchdog;
mod whoami;

pub use backoff::Backoff;
pub use client::Client;
pub use config::{Config, ConfigBuilder, ServerAddress, ShardedSubscriptionMode};
pub use election::{Election, Leader, Leadership, Observer};
pub use error::{Error, Result};
pub use fenced::FencedResource;
pub use hold::{LockKind, Owner};
pub use interrupt::Interrupter;
pub use latch::CountDownLatch;
pub use lock::{
    Condition, Lock, LockGuard, LockOwner, LockSet, LockSetGuard, MultiLock, MultiLockGuard,
    Ownership, Preempt, ReadWriteLock, RedLock, RevokeEvent, ThreadOwned, ValueCodec,
    WaitTimeoutResult, MAX_PRIORITY, PRIORITY_AGING,
};
pub use names::NameMapper;
pub use rate::{Admitted, RateConfig, RateLimiter, RateStatus, RateType};
pub use semaphore::{PermitExpirableSemaphore, PermitGuard, PermitId, Semaphore, SemaphoreGuard};
pub use time::MAX_DURATION;
pub use watchdog::{LostReason, Revocation};

// The report types' old paths, kept for one release.
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::check::Finding`")]
pub type Finding = check::Finding;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::check::Risk`")]
pub type Risk = check::Risk;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::deadlock::DeadlockStep`")]
pub type DeadlockStep = deadlock::DeadlockStep;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::deadlock::WaitRecord`")]
pub type WaitRecord = deadlock::WaitRecord;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::history::HistoryEvent`")]
pub type HistoryEvent = history::HistoryEvent;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::history::HistoryKind`")]
pub type HistoryKind = history::HistoryKind;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::ClientConnection`")]
pub type ClientConnection = inspect::ClientConnection;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::ExpirablePermit`")]
pub type ExpirablePermit = inspect::ExpirablePermit;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::GroupValue`")]
pub type GroupValue = inspect::GroupValue;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::Holder`")]
pub type Holder = inspect::Holder;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::Inspection`")]
pub type Inspection = inspect::Inspection;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::Kind`")]
pub type Kind = inspect::Kind;
#[doc(hidden)]
#[deprecated(note = "replaced by `redlatch::LockKind` (`Read`, `Write`)")]
pub type Mode = LockKind;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::inspect::QueueEntry`")]
pub type QueueEntry = inspect::QueueEntry;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::metrics::Histogram`")]
pub type Histogram = metrics::Histogram;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::metrics::Metrics`")]
pub type Metrics = metrics::Metrics;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::order::LockOrder`")]
pub type LockOrder = order::LockOrder;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::order::LockOrderWarning`")]
pub type LockOrderWarning = order::LockOrderWarning;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::top::Activity`")]
pub type Activity = top::Activity;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::top::Blame`")]
pub type Blame = top::Blame;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::top::TopHolder`")]
pub type TopHolder = top::TopHolder;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::top::Who`")]
pub type Who = top::Who;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::watch::Event`")]
pub type Event = watch::Event;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::watch::EventKind`")]
pub type EventKind = watch::EventKind;
#[doc(hidden)]
#[deprecated(note = "moved to `redlatch::watch::Watch`")]
pub type Watch = watch::Watch;
