//! The read-write lock (Redisson's `RReadWriteLock`): two [`Lock`]s over one hash, of the
//! kinds in `read.rs` and `write.rs`.

use crate::client::Client;
use crate::lock::handle::Lock;
use crate::lock::read::Read;
use crate::lock::write::Write;
use crate::names::Named;

/// A distributed read-write lock, wire-compatible with Redisson's `RReadWriteLock`.
///
/// Its two sides are ordinary [`Lock`]s with the same guard type:
/// - [`read`](Self::read): many owners (threads, in any process) hold it at once, each
///   reentrantly; it waits while another owner writes.
/// - [`write`](Self::write): one owner, reentrant; it waits for every reader and writer.
///
/// A thread that holds the write lock may also take the read lock (downgrade: after releasing
/// the write lock it keeps reading, and blocked readers get in). A thread that holds a read
/// lock and asks for the write lock **waits like any writer, for every read hold including its
/// own**: there is no upgrade, as in Java's `ReentrantReadWriteLock` and Redisson. With the
/// watchdog renewing its read hold, `write().lock()` then never returns (a warning is logged);
/// release the read lock first.
///
/// A read release deletes the lease key of the thread's newest read hold, whichever guard is
/// released (as Redisson does). So if one thread takes read holds with different explicit
/// leases and releases them out of order, the hold that remains runs on the other one's lease.
/// Use one lease per thread and lock (the watchdog default does).
///
/// Readers are preferred: a steady stream of overlapping readers keeps a writer waiting
/// (Redisson's behaviour). Each read hold has its own lease (a `rwlock_timeout` key); a reader
/// that dies stops counting once its lease runs out, and the lock is freed when the last live
/// hold goes.
///
/// Made by [`Client::read_write_lock`]; cheap to clone.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let rw = client.read_write_lock("catalog");
/// {
///     let _r1 = rw.read().lock()?;
///     let _r2 = client.read_write_lock("catalog").read().lock()?; // readers share
/// }
/// let w = rw.write().lock()?; // alone
/// let r = rw.read().lock()?; // the writer may read too
/// drop(w); // downgraded: still reading, other readers may join
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(client: Client, name: &Named) -> ReadWriteLock {
        ReadWriteLock {
            read: Lock::new(client.clone(), name, Read::new(&name.key)),
            write: Lock::new(client, name, Write::new(&name.key)),
        }
    }

    /// The lock's name: the Redis key of its hash.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.read_write_lock("catalog").name(), "catalog");
    /// ```
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The read side: shared among readers, excluded by a writer of another thread.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.read_write_lock("catalog").read().lock()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Lock {
        self.read.clone()
    }

    /// The write side: exclusive.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let write = client.read_write_lock("catalog").write();
    /// if let Some(_guard) = write.try_lock_for(Duration::from_secs(1))? {
    ///     // alone
    /// }
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> Lock {
        self.write.clone()
    }
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("name", &self.name())
            .finish()
    }
}
