//! Who owns a hold: the calling thread (the default, as in Java), or a [`LockOwner`] that is
//! not bound to any thread (Redisson's async API takes an explicit thread id for the same need).
//!
//! Both write the owner id `<client uuid>:<number>` into the lock; thread numbers and owner
//! numbers come from one counter of the process, so they never collide.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::client::Client;
use crate::keys;

/// The next number of the process for a thread or a [`LockOwner`], from 1.
fn next_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The calling thread's number, given on first use.
pub(crate) fn thread_number() -> u64 {
    thread_local!(static NUMBER: u64 = next_number());
    NUMBER.with(|n| *n)
}

mod sealed {
    pub trait Sealed {}
}

/// Who owns the holds of a [`Lock`](crate::Lock): [`ThreadOwned`] (the default) or a
/// [`LockOwner`]. Implemented by those two only.
///
/// Code that works with locks of either ownership takes a `Lock<O>` with `O: Ownership`.
///
/// # Examples
///
/// ```no_run
/// use redlatch::{Lock, Ownership};
///
/// /// Runs `job` under `lock`, whoever owns the lock's holds.
/// fn guarded<O: Ownership>(lock: &Lock<O>, job: impl FnOnce()) -> redlatch::Result<()> {
///     let guard = lock.lock()?;
///     job();
///     guard.unlock()
/// }
///
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// guarded(&client.lock("a"), || {})?; // the thread owns the hold
/// let owner = client.lock_owner();
/// guarded(&client.lock("b").with_owner(&owner), || {})?; // `owner` does
/// # Ok(()) }
/// ```
pub trait Ownership: sealed::Sealed + Clone + Send + Sync + 'static {
    /// What makes a guard `!Send` for a thread's hold, and nothing for an owner's.
    #[doc(hidden)]
    type GuardMarker;

    /// The owner id written into the lock for a call made now by the calling thread.
    #[doc(hidden)]
    fn owner_id(&self, client: &Client) -> Arc<str>;

    /// Whether a waiting owner is its thread alone: nobody else can touch its hold count
    /// while it waits, so a release inside the client may pass it the lock.
    #[doc(hidden)]
    const ONE_THREAD: bool;
}

/// The default ownership: each hold belongs to the thread that takes it, as in Java. The
/// thread may lock again (reentrancy), and only it can release; its guards are not `Send`.
///
/// # Examples
///
/// ```
/// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
/// let lock: redlatch::Lock<redlatch::ThreadOwned> = client.lock("a");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadOwned;

impl sealed::Sealed for ThreadOwned {}

impl Ownership for ThreadOwned {
    type GuardMarker = *const ();
    const ONE_THREAD: bool = true;

    fn owner_id(&self, client: &Client) -> Arc<str> {
        // Made once per thread and client: a lock call formats and allocates nothing for it.
        thread_local! {
            /// The last client this thread locked with (its uuid), and the thread's owner id in it.
            static LAST: RefCell<Option<(Box<str>, Arc<str>)>> = const { RefCell::new(None) };
        }
        LAST.with_borrow_mut(|last| match last {
            Some((id, owner)) if **id == *client.id() => Arc::clone(owner),
            _ => {
                let owner: Arc<str> = Arc::from(keys::owner_id(client.id(), thread_number()));
                *last = Some((client.id().into(), Arc::clone(&owner)));
                owner
            }
        })
    }
}

/// An owner of holds that is not a thread: made by [`Client::lock_owner`], it locks from any
/// thread through [`Lock::with_owner`](crate::Lock::with_owner), and its guards are `Send`, so
/// a hold can be taken on one thread and released on another (a job that moves between the
/// workers of a pool, a request served by several threads).
///
/// Reentrancy is per owner: the owner may lock again, from any thread, and each hold has its
/// own guard. Two owners exclude each other even on one thread. The watchdog renews its holds,
/// and loss signals, fencing tokens and every lock kind work as for a thread. Its id is
/// `<client uuid>:<number>`, the form Redisson uses, with a number no thread of this process
/// has.
///
/// Cheap to clone; clones are the same owner.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let job = client.lock_owner();
/// let guard = client.lock("job:42").with_owner(&job).lock()?;
/// std::thread::spawn(move || guard.unlock()).join().unwrap()?; // released elsewhere
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockOwner {
    id: Arc<str>,
}

impl LockOwner {
    pub(crate) fn new(client: &Client) -> LockOwner {
        LockOwner {
            id: Arc::from(keys::owner_id(client.id(), next_number())),
        }
    }

    /// The owner id written into the locks it holds: `<client uuid>:<number>`.
    ///
    /// # Examples
    ///
    /// ```
    /// let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let owner = client.lock_owner();
    /// assert!(owner.id().starts_with(client.id()));
    /// assert_ne!(owner.id(), client.owner_id());
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl sealed::Sealed for LockOwner {}

impl Ownership for LockOwner {
    type GuardMarker = ();
    const ONE_THREAD: bool = false;

    fn owner_id(&self, _: &Client) -> Arc<str> {
        Arc::clone(&self.id)
    }
}

impl std::fmt::Debug for LockOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LockOwner").field(&self.id).finish()
    }
}

/// The guard's marker field for ownership `O`.
pub(crate) type NotSendFor<O> = PhantomData<<O as Ownership>::GuardMarker>;
