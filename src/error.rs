//! The crate's error type.

use std::fmt;
use std::time::Instant;

use crate::hold::{Owner, Who};

/// A specialized `Result` for redlatch operations.
///
/// # Examples
///
/// ```no_run
/// fn take(client: &redlatch::Client) -> redlatch::Result<()> {
///     let guard = client.lock("orders").lock()?;
///     guard.unlock()
/// }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a redlatch call.
///
/// Contention is not an error: `try_*` methods return `Ok(None)` when the lock is taken.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// match client.lock("jobs").unlock() {
///     Err(e) if e.is_not_held() => println!("this thread held no lock"),
///     other => other?,
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The calling thread does not hold the lock it tried to release.
    ///
    /// The lock is untouched: whoever holds it keeps it.
    #[error("lock `{name}` is not held by this thread")]
    NotHeld {
        /// The lock's name.
        name: String,
    },
    /// A non-reentrant lock ([`Client::non_reentrant_lock`](crate::Client::non_reentrant_lock),
    /// [`Client::non_reentrant_fair_lock`](crate::Client::non_reentrant_fair_lock)) refused an
    /// acquire because its owner (the calling thread, or the lock's
    /// [`LockOwner`](crate::LockOwner)) holds it already. Redisson throws
    /// `IllegalMonitorStateException` here.
    ///
    /// Returned at once, without waiting. Nothing changed: the existing hold keeps its count
    /// of 1 (one release frees the lock), and a fair lock did not queue the owner.
    #[error("lock `{name}` is already held by this owner and is not reentrant")]
    AlreadyHeld {
        /// The lock's name.
        name: String,
    },
    /// A guard's lock was lost: its lease ran out, it was force-unlocked, or a renewal found
    /// it held by somebody else.
    ///
    /// Nothing was deleted: the lock may now belong to another owner.
    #[error("lock `{name}` was lost (lease expired or force-unlocked) while its guard lived")]
    LockLost {
        /// The lock's name.
        name: String,
    },
    /// A permit id given to a permit-expirable semaphore is not (or no longer) one of its
    /// permits: never acquired there, released already, or its lease ran out.
    ///
    /// Nothing was changed.
    #[error("permit `{id}` of semaphore `{name}` is unknown or expired")]
    UnknownPermit {
        /// The semaphore's name.
        name: String,
        /// The permit id.
        id: String,
    },
    /// A [`SemaphoreGuard`](crate::SemaphoreGuard)'s permits were not given back: the
    /// semaphore is no longer the one they were taken from. The server lost its data (a
    /// restart without persistence, a failover to a replica that lacked the write), or the
    /// semaphore expired or was deleted, and it was set up again since. Giving them back would
    /// raise it above the permits it was set to.
    ///
    /// Nothing was changed.
    #[error("{permits} permit(s) of semaphore `{name}` were lost: it was made anew since they were taken")]
    PermitsLost {
        /// The semaphore's name.
        name: String,
        /// How many permits the guard held.
        permits: u32,
    },
    /// A [`FencedResource`](crate::FencedResource) refused a write or a
    /// [read for update](crate::FencedResource::read_for_update): a newer fencing token (or
    /// the same token from another holder) has written or read for update there. Usually the
    /// caller's hold is stale: another holder took the lock after it. (A re-entry takes a new
    /// token too, so after an inner guard of the same thread has written, the outer guard's
    /// token is older.)
    ///
    /// Nothing was changed.
    #[error(
        "fencing token {token} for `{name}` is stale: token {newest} has written or read for \
         update since"
    )]
    StaleToken {
        /// The resource's name.
        name: String,
        /// The refused token.
        token: u64,
        /// The newest token the resource has seen.
        newest: u64,
    },
    /// Fewer replicas than required confirmed a lock acquire in time (with
    /// [`sync_replicas`](crate::ConfigBuilder::sync_replicas) set). This call does not hold
    /// the lock: the hold was released again (if that release fails too, it is logged and
    /// the hold expires with its lease, unrenewed).
    #[error("acquire of `{name}` was confirmed by {acked} of {wanted} replicas in time; undone")]
    NotReplicated {
        /// The lock's name.
        name: String,
        /// How many replicas confirmed the write.
        acked: u32,
        /// How many were required.
        wanted: u32,
    },
    /// A [`RedLock`](crate::RedLock) could not be taken on a majority of its nodes because
    /// too many of them failed (not because the lock was busy: that is `Ok(None)` or a wait).
    ///
    /// Nothing is held: every hold taken on the way was released again (a node whose release
    /// failed too keeps its hold until the lease runs out).
    #[error(
        "lock `{name}` was taken on {acquired} of {nodes} nodes, {wanted} needed; failed nodes: {}",
        list(failures)
    )]
    NoQuorum {
        /// The name of the lock on the first node.
        name: String,
        /// On how many nodes the last attempt took the lock.
        acquired: usize,
        /// How many nodes are needed.
        wanted: usize,
        /// How many nodes there are.
        nodes: usize,
        /// Each failed node (`#index name`) with its error.
        failures: Vec<(String, Error)>,
    },
    /// Releasing a [`MultiLockGuard`](crate::MultiLockGuard) failed on some of its locks.
    /// Every other lock was released all the same; a lock whose release failed keeps its
    /// hold until its lease runs out (it is no longer renewed).
    #[error("released {released} of {total} locks; failed: {}", list(failures))]
    PartialUnlock {
        /// How many locks were released.
        released: usize,
        /// How many locks the guard held.
        total: usize,
        /// Each lock whose release failed (`#index name`) with its error.
        failures: Vec<(String, Error)>,
    },
    /// A wait or a Redis reply did not complete within the configured time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A [`RateLimiter`](crate::RateLimiter) has no rate: nobody set it
    /// ([`try_set_rate`](crate::RateLimiter::try_set_rate)), or it was deleted or expired
    /// since. Redisson throws `RateLimiter is not initialized` here.
    ///
    /// Nothing was changed.
    #[error("rate limiter `{name}` has no rate set")]
    RateNotSet {
        /// The limiter's name.
        name: String,
    },
    /// The key under the lock's name (or a helper key) holds a value of another type.
    #[error("key `{key}` holds a value of the wrong type for this operation")]
    WrongType {
        /// The offending key.
        key: String,
    },
    /// An argument was rejected before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The connection to Redis could not be made or broke during the call. A connection that
    /// could not be made names the server's address (`host:port`, or a socket's path):
    /// `cannot connect to 127.0.0.1:6390: Connection refused (os error 111)`.
    ///
    /// The outcome of a command whose reply was lost is unknown.
    #[error("connection error: {0}")]
    Connection(#[source] redis::RedisError),
    /// Redis answered with an error. An ACL refusal names the command refused (`NoPerm: this
    /// user has no permissions to run the 'evalsha' command`). Credentials refused while
    /// connecting (a wrong password, `WRONGPASS`, or none given where one is needed,
    /// `NOAUTH`) are of the kind [`redis::ErrorKind::AuthenticationFailed`] and name the
    /// server ([`is_auth_failed`](Error::is_auth_failed)).
    #[error("redis error: {}", redis_text(.0))]
    Redis(#[source] redis::RedisError),
    /// Redis answered with a reply this crate does not understand.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// The calling thread's wait was interrupted through its
    /// [`Interrupter`](crate::Interrupter) (as Java's `lockInterruptibly` throws
    /// `InterruptedException`). Nothing of the wait is left behind: no fair-queue place, no
    /// subscription, no permit; a wake-up it had received went on to the next waiter.
    #[error("the wait was interrupted")]
    Interrupted,
    /// The client was closed ([`Client::close`](crate::Client::close)): it sends nothing
    /// any more, and its waits end with this error.
    #[error("the client is closed")]
    Closed,
    /// This wait was one of a cycle of waits (a deadlock, across processes or threads) and
    /// was chosen to end it: the youngest wait of the cycle (see the guide's deadlock
    /// chapter). Nothing of the wait is left behind; the caller's other guards stay held,
    /// and the other members of the cycle go on waiting: the next of them gets its lock once
    /// the caller releases what it holds.
    #[error("deadlock: {}", steps(cycle))]
    Deadlock {
        /// The cycle, from this wait: each owner, the lock it waits for, and the owner in its
        /// way, whose wait is the next step (the last step's is this one).
        cycle: Vec<DeadlockStep>,
    },
}

/// One step of a cycle of waits ([`Error::Deadlock`], [`BrokenDeadlock`]): `owner` waits for
/// `lock` (its key, the name as mapped), which `blocked_by` holds (or, in a fair lock's
/// queue, is ahead of it for).
///
/// [`BrokenDeadlock`]: crate::deadlock::BrokenDeadlock
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeadlockStep {
    /// The waiting owner.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub owner: Owner,
    /// Who the waiting owner is: its client's name, process, host and thread, as its client
    /// wrote them when it recorded the wait (unknown for a client gone for a day).
    pub who: Who,
    /// The lock it waits for.
    pub lock: String,
    /// The owner in its way (who it is: the step it waits in).
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub blocked_by: Owner,
}

impl DeadlockStep {
    pub(crate) fn new(owner: &str, lock: String, blocked_by: &str) -> DeadlockStep {
        DeadlockStep {
            owner: Owner::from_id(owner),
            who: Who::default(),
            lock,
            blocked_by: Owner::from_id(blocked_by),
        }
    }
}

/// `a (client, pid P on H, thread T) waits for `l1` held by b (...); b (...) waits for `l2`
/// held by a (...)` for a deadlock's cycle; an owner nothing is known of is named alone.
fn steps(cycle: &[DeadlockStep]) -> String {
    let named = |owner: &Owner| match cycle.iter().find(|s| s.owner == *owner) {
        Some(s) if !s.who.is_unknown() => format!("{owner} ({})", s.who),
        _ => owner.to_string(),
    };
    let items: Vec<String> = cycle
        .iter()
        .map(|s| {
            format!(
                "{} waits for `{}` held by {}",
                named(&s.owner),
                s.lock,
                named(&s.blocked_by)
            )
        })
        .collect();
    items.join("; ")
}

/// A Redis error in words: an authentication failure as `authentication failed on <address>:
/// <why>` (the `redis` crate's own form repeats its kind).
fn redis_text(e: &redis::RedisError) -> String {
    match (e.kind(), e.detail()) {
        (redis::ErrorKind::AuthenticationFailed, Some(detail)) => {
            format!("authentication failed {detail}")
        }
        _ => e.to_string(),
    }
}

/// `label: error; label: error` for the member failures of a multi-lock error.
fn list(failures: &[(String, Error)]) -> String {
    let items: Vec<String> = failures.iter().map(|(l, e)| format!("{l}: {e}")).collect();
    items.join("; ")
}

impl Error {
    /// True for [`Error::NotHeld`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// // Unlocking a lock this thread does not hold.
    /// let err = client.lock("orders").unlock().unwrap_err();
    /// assert!(err.is_not_held());
    /// ```
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// True for [`Error::AlreadyHeld`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let lock = client.non_reentrant_lock("orders");
    /// let guard = lock.lock().unwrap();
    /// // A second acquire by the same thread is refused, not counted.
    /// assert!(lock.try_lock().unwrap_err().is_already_held());
    /// ```
    pub fn is_already_held(&self) -> bool {
        matches!(self, Error::AlreadyHeld { .. })
    }

    /// True for [`Error::LockLost`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let guard = client.lock("orders").lock().unwrap();
    /// // ... the lease ran out, or an operator force-unlocked it ...
    /// if let Err(e) = guard.unlock() {
    ///     if e.is_lock_lost() {
    ///         log::warn!("our work on orders may have overlapped another holder's");
    ///     }
    /// }
    /// ```
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Error::LockLost { .. })
    }

    /// True for [`Error::UnknownPermit`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let sem = client.permit_expirable_semaphore("slots");
    /// let id = redlatch::PermitId::new("0123456789abcdef0123456789abcdef");
    /// // Never acquired, or already released or expired:
    /// assert!(sem.release(&id).unwrap_err().is_unknown_permit());
    /// ```
    pub fn is_unknown_permit(&self) -> bool {
        matches!(self, Error::UnknownPermit { .. })
    }

    /// True for [`Error::PermitsLost`]: a semaphore guard's permits were taken from a
    /// semaphore that has since been made anew (after a data loss), and were not given back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client.semaphore("slots").acquire(1)?;
    /// // ... the server restarts without its data, and the semaphore is set up again ...
    /// if let Err(e) = permit.release() {
    ///     assert!(e.is_permits_lost());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_permits_lost(&self) -> bool {
        matches!(self, Error::PermitsLost { .. })
    }

    /// True for [`Error::StaleToken`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let guard = client.fenced_lock("ledger").lock().unwrap();
    /// let ledger = client.fenced_resource("ledger:balance");
    /// match ledger.write(&guard, "balance=10") {
    ///     Err(e) if e.is_stale_token() => log::warn!("a newer holder wrote first"),
    ///     other => other.unwrap(),
    /// }
    /// ```
    pub fn is_stale_token(&self) -> bool {
        matches!(self, Error::StaleToken { .. })
    }

    /// True for [`Error::RateNotSet`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let api = client.rate_limiter("partner-api");
    /// match api.try_acquire(1) {
    ///     Err(e) if e.is_rate_not_set() => log::warn!("nobody set the partner API's rate"),
    ///     other => drop(other?),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_rate_not_set(&self) -> bool {
        matches!(self, Error::RateNotSet { .. })
    }

    /// True for [`Error::NotReplicated`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .sync_replicas(1, Duration::from_millis(500))
    ///     .build()
    ///     .unwrap();
    /// let client = redlatch::Client::new(config).unwrap();
    /// if let Err(e) = client.lock("orders").lock() {
    ///     assert!(e.is_not_replicated() || e.is_connection());
    /// }
    /// ```
    pub fn is_not_replicated(&self) -> bool {
        matches!(self, Error::NotReplicated { .. })
    }

    /// True for [`Error::Interrupted`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// match client.lock("jobs").lock() {
    ///     Err(e) if e.is_interrupted() => println!("asked to stop waiting"),
    ///     other => drop(other?),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Interrupted)
    }

    /// True for [`Error::Deadlock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let _orders = client.lock("orders").lock()?;
    /// match client.lock("stock").lock() {
    ///     // Chosen to break a cycle: release what is held, and try the whole job again.
    ///     Err(e) if e.is_deadlock() => println!("{e}"),
    ///     other => drop(other?),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Deadlock { .. })
    }

    /// True for [`Error::Closed`].
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// client.close();
    /// assert!(client.lock("jobs").lock().unwrap_err().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Closed)
    }

    /// True for [`Error::NoQuorum`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let nodes: Vec<redlatch::Client> = vec![];
    /// let redlock = redlatch::RedLock::new(nodes.iter().map(|c| c.lock("payouts"))).unwrap();
    /// if let Err(e) = redlock.lock() {
    ///     if e.is_no_quorum() {
    ///         log::error!("too many lock servers are down: {e}");
    ///     }
    /// }
    /// ```
    pub fn is_no_quorum(&self) -> bool {
        matches!(self, Error::NoQuorum { .. })
    }

    /// True for [`Error::PartialUnlock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let (a, b) = (redlatch::Client::open("redis://10.0.0.1/").unwrap(), redlatch::Client::open("redis://10.0.0.2/").unwrap());
    /// let both = redlatch::MultiLock::new([a.lock("x"), b.lock("y")]).unwrap();
    /// let guard = both.lock().unwrap();
    /// if let Err(e) = guard.unlock() {
    ///     assert!(e.is_partial_unlock() || e.is_lock_lost());
    /// }
    /// ```
    pub fn is_partial_unlock(&self) -> bool {
        matches!(self, Error::PartialUnlock { .. })
    }

    /// True for [`Error::Timeout`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// match client.lock("orders").lock() {
    ///     Err(e) if e.is_timeout() => log::warn!("redis is slow: {e}"),
    ///     other => drop(other.unwrap()),
    /// }
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// True for [`Error::Connection`]: the server is down or unreachable, or a reply was lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let client = redlatch::Client::open("redis://127.0.0.1:1/").unwrap(); // nothing listens
    /// assert!(client.lock("orders").lock().unwrap_err().is_connection());
    /// ```
    pub fn is_connection(&self) -> bool {
        matches!(self, Error::Connection(_))
    }

    /// True when a server refused the credentials while connecting: a wrong username or
    /// password (`WRONGPASS`), or none given to a server that requires one (`NOAUTH`). The
    /// error names the server. Trying again does not help: fix the configuration.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .password("not the password")
    ///     .build()
    ///     .unwrap();
    /// let client = redlatch::Client::new(config).unwrap();
    /// let err = client.ping().unwrap_err();
    /// assert!(err.is_auth_failed(), "{err}"); // redis error: authentication failed on 127.0.0.1:6379: ...
    /// ```
    pub fn is_auth_failed(&self) -> bool {
        matches!(self, Error::Redis(e) if e.kind() == redis::ErrorKind::AuthenticationFailed)
    }

    /// True for [`Error::WrongType`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// // "orders" is a list someone else made: not a lock.
    /// let err = client.lock("orders").lock().unwrap_err();
    /// assert!(err.is_wrong_type());
    /// ```
    pub fn is_wrong_type(&self) -> bool {
        matches!(self, Error::WrongType { .. })
    }

    /// True for [`Error::InvalidArgument`].
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlatch::Config::builder("redis://127.0.0.1/").pool_size(0).build().unwrap_err();
    /// assert!(err.is_invalid_argument());
    /// ```
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument(_))
    }

    pub(crate) fn invalid(what: impl fmt::Display) -> Error {
        Error::InvalidArgument(what.to_string())
    }

    /// Classifies an error of the `redis` crate; `key` names the key the command touched.
    pub(crate) fn from_redis(err: redis::RedisError, key: &str) -> Error {
        if err.is_timeout() {
            return Error::Timeout(format!("no reply from redis in time ({err})"));
        }
        if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            return Error::Connection(err);
        }
        if err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE") {
            return Error::WrongType {
                key: key.to_owned(),
            };
        }
        Error::Redis(err)
    }

    /// This error, met while connecting to `address` (`host:port`, or a socket's path), with
    /// the address in its text: a connection refused or broken (`cannot connect to
    /// <address>: ...`), a timeout, or credentials refused (`NOAUTH`, `WRONGPASS`, or the
    /// `redis` crate's own authentication failure), which becomes of the kind
    /// [`redis::ErrorKind::AuthenticationFailed`]. Any other error is returned as it is.
    pub(crate) fn connecting_to(self, address: &str) -> Error {
        if self.to_string().contains(address) {
            return self;
        }
        match self {
            Error::Connection(e) => Error::Connection(located("cannot connect to", address, e)),
            Error::Timeout(msg) => Error::Timeout(format!("connecting to {address}: {msg}")),
            Error::Redis(e) if refuses_credentials(&e) => Error::Redis(auth_failed(&e, address)),
            other => other,
        }
    }

    /// This error, met in a call to `address` (`host:port`) after it connected, with the
    /// address in its text where it had none: a broken connection or a timeout.
    pub(crate) fn calling(self, address: &str) -> Error {
        if self.to_string().contains(address) {
            return self;
        }
        match self {
            Error::Connection(e) => Error::Connection(located("connection to", address, e)),
            Error::Timeout(msg) => Error::Timeout(format!("{address}: {msg}")),
            other => other,
        }
    }

    /// This error's text for a list of failures by server: after `<address>: `, unless it
    /// names the address already.
    pub(crate) fn text_at(&self, address: &str) -> String {
        let text = self.to_string();
        if text.contains(address) {
            text
        } else {
            format!("{address}: {text}")
        }
    }

    /// True when the connection that produced this error must not be reused.
    pub(crate) fn breaks_connection(&self) -> bool {
        matches!(self, Error::Connection(_) | Error::Timeout(_))
    }

    /// True when the read of a reply was interrupted by a signal: a process stopped
    /// (`SIGSTOP`, a shell's Ctrl-Z, a debugger) and resumed gets `EINTR` from a socket read
    /// that has a timeout. The command had been sent whole, so it ran (or runs before anything
    /// sent after it): only its reply is lost.
    pub(crate) fn is_interrupted_read(&self) -> bool {
        match self {
            Error::Connection(e) => io_kind(e) == Some(std::io::ErrorKind::Interrupted),
            _ => false,
        }
    }
}

/// Makes `call` again while its reply's read is interrupted (see
/// [`Error::is_interrupted_read`]): `retries` more times at most, or for as long as
/// `deadline` is ahead. Only for a call that may run twice, or one that first learns what
/// its lost call did (an acquire settled or read back).
pub(crate) fn retry_interrupted<T>(
    retries: u32,
    deadline: Option<Instant>,
    mut call: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut made = 0;
    loop {
        match call() {
            Err(e)
                if e.is_interrupted_read()
                    && (made < retries || deadline.is_some_and(|d| Instant::now() < d)) =>
            {
                made += 1;
                log::debug!("a reply's read was interrupted ({e}): the call is made again");
            }
            outcome => return outcome,
        }
    }
}

/// Whether `e` says that a server refused the credentials: the `redis` crate's
/// authentication failure, `NOAUTH` (none given, one needed) or `WRONGPASS`.
fn refuses_credentials(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// An authentication failure on `address`, with the server's words when it gave any.
pub(crate) fn auth_failed(e: &redis::RedisError, address: &str) -> redis::RedisError {
    let why = match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        // The `redis` crate keeps no words of the server's.
        _ => "the server refused the username or password".to_owned(),
    };
    let detail = format!("on {address}: {why}");
    redis::RedisError::from((
        redis::ErrorKind::AuthenticationFailed,
        "authentication failed",
        detail,
    ))
}

/// `e` with `<what> <address>: ` before its text, as an I/O error of the same kind (so that
/// it is classified as before), with `e` as its source.
fn located(what: &'static str, address: &str, e: redis::RedisError) -> redis::RedisError {
    let kind = io_kind(&e).unwrap_or(std::io::ErrorKind::Other);
    let at = Located {
        what,
        address: address.to_owned(),
        source: e,
    };
    std::io::Error::new(kind, at).into()
}

/// The kind of the I/O error inside `e`, if it has one. (The `redis` crate keeps its I/O
/// error behind an `Arc`.)
fn io_kind(e: &redis::RedisError) -> Option<std::io::ErrorKind> {
    let source = std::error::Error::source(e)?;
    let io = source.downcast_ref::<std::io::Error>().or_else(|| {
        source
            .downcast_ref::<std::sync::Arc<dyn std::error::Error + Send + Sync>>()
            .and_then(|inner| inner.downcast_ref::<std::io::Error>())
    });
    io.map(std::io::Error::kind)
}

/// An error and where it happened: `cannot connect to 127.0.0.1:6390: Connection refused`.
#[derive(Debug)]
struct Located {
    what: &'static str,
    address: String,
    source: redis::RedisError,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.what, self.address, self.source)
    }
}

impl std::error::Error for Located {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Whether a server error says that the command did not run and may succeed soon, elsewhere
/// or later: `READONLY` (a replica, as after a failover), `LOADING`, `MASTERDOWN`,
/// `TRYAGAIN`, `CLUSTERDOWN`; and a write that a replica refused inside a script.
pub(crate) fn refused_for_now(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind as K};
    matches!(
        e.kind(),
        ErrorKind::Server(
            K::ReadOnly | K::BusyLoading | K::MasterDown | K::TryAgain | K::ClusterDown
        )
    ) || refused_in_script(e.code(), e.detail())
}

/// A replica's `READONLY`, wrapped in a script error: before Redis 7.0 a replica runs a
/// script, and its first write fails with "ERR Error running script (call to f_...):
/// @user_script:N: -READONLY You can't write against a read only replica." Nothing was
/// written (a replica takes no write), so the call may go again. (From 7.0 on, a script that
/// may write is refused up front, with a plain `READONLY`.)
fn refused_in_script(code: Option<&str>, detail: Option<&str>) -> bool {
    code == Some("ERR")
        && detail.is_some_and(|d| d.starts_with("Error running script") && d.contains("-READONLY "))
}

#[cfg(test)]
mod tests {
    use super::refused_in_script;

    #[test]
    fn readonly_wrapped_in_a_script_error_is_a_refusal() {
        // As Redis 6.2.14 words it.
        let detail = "Error running script (call to f_0123abcd): @user_script:7: \
                      @user_script: 7: -READONLY You can't write against a read only replica.";
        assert!(refused_in_script(Some("ERR"), Some(detail)));
        // Any other script error is not a refusal: the script may have written before it.
        let other = "Error running script (call to f_0123abcd): @user_script:7: \
                     @user_script: 7: -OOM command not allowed when used memory > 'maxmemory'.";
        assert!(!refused_in_script(Some("ERR"), Some(other)));
        assert!(!refused_in_script(
            Some("ERR"),
            Some("-READONLY but not from a script")
        ));
        assert!(!refused_in_script(Some("ERR"), None));
        assert!(!refused_in_script(None, Some(detail)));
    }
}
