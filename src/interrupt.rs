//! Interrupting a thread's waits, as Java's `Thread.interrupt` does for
//! `Lock.lockInterruptibly`: a per-thread flag and a wake-up that every blocking wait of the
//! crate also listens to (see `pubsub::wait`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};

/// One thread's interrupt state: the flag, and a slot that wakes the thread's blocked wait.
pub(crate) struct Interruption {
    requested: AtomicBool,
    tx: Sender<()>,
    rx: Receiver<()>,
}

thread_local! {
    static CURRENT: Arc<Interruption> = Arc::new(Interruption::new());
}

impl Interruption {
    fn new() -> Interruption {
        let (tx, rx) = bounded(1);
        Interruption {
            requested: AtomicBool::new(false),
            tx,
            rx,
        }
    }

    /// The calling thread's state.
    pub(crate) fn current() -> Arc<Interruption> {
        CURRENT.with(Arc::clone)
    }

    fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        // A full slot already wakes the thread.
        let _ = self.tx.try_send(());
    }

    /// Takes a pending interrupt: true if there was one (the flag is then clear). A wake-up
    /// left in the slot by an interrupt taken this way is stale: [`signal`](Self::signal)
    /// may still deliver it, and the wait then finds nothing to take and blocks again.
    pub(crate) fn take(&self) -> bool {
        let was = self.requested.swap(false, Ordering::SeqCst);
        if was {
            while self.rx.try_recv().is_ok() {}
        }
        was
    }

    /// Ready when an interrupt was requested (or one taken since left a stale wake-up).
    pub(crate) fn signal(&self) -> &Receiver<()> {
        &self.rx
    }
}

/// A handle that interrupts the waits of one thread, from any thread.
///
/// Get it on the thread whose waits you want to be able to interrupt
/// ([`current`](Self::current)) and hand it to another thread (it is `Send + Sync` and cheap
/// to clone). [`interrupt`](Self::interrupt) then makes the thread's blocking call, whichever
/// it is (a lock of any kind, a [`MultiLock`](crate::MultiLock) or
/// [`RedLock`](crate::RedLock), a semaphore acquire, a latch await, of any client), return
/// [`Error::Interrupted`](crate::Error::Interrupted) within milliseconds, leaving nothing
/// behind in Redis: no fair-queue place, no subscription, no permit; a wake-up the thread had
/// received goes on to the next waiter.
///
/// As in Java, the interrupt is a flag that stays set until a wait takes it: a thread
/// interrupted while it is not waiting fails its next blocking wait at once (and a call that
/// needs no wait, such as a `try_lock` or an acquire that finds the lock free, neither fails
/// nor takes it). [`clear`](Self::clear) drops a pending interrupt, as Java's
/// `Thread.interrupted()` does.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let worker = {
///     let client = client.clone();
///     std::thread::spawn(move || {
///         tx.send(redlatch::Interrupter::current()).unwrap();
///         match client.lock("reports").lock() {
///             Err(e) if e.is_interrupted() => println!("stopped waiting"),
///             Err(e) => println!("failed: {e}"),
///             Ok(_guard) => println!("got it"),
///         }
///     })
/// };
/// let interrupter = rx.recv().unwrap();
/// std::thread::sleep(Duration::from_secs(1));
/// interrupter.interrupt(); // the worker's wait ends with Error::Interrupted
/// worker.join().unwrap();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Interrupter(Arc<Interruption>);

impl Interrupter {
    /// The handle of the calling thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let me = redlatch::Interrupter::current();
    /// assert!(!me.is_interrupted());
    /// ```
    pub fn current() -> Interrupter {
        Interrupter(Interruption::current())
    }

    /// Interrupts the thread: its current blocking wait (or its next one, if it is not
    /// waiting now) returns [`Error::Interrupted`](crate::Error::Interrupted).
    ///
    /// # Examples
    ///
    /// ```
    /// let me = redlatch::Interrupter::current();
    /// me.interrupt();
    /// assert!(me.is_interrupted());
    /// assert!(me.clear());
    /// ```
    pub fn interrupt(&self) {
        self.0.request();
    }

    /// Whether an interrupt is pending (requested and not yet taken by a wait or
    /// [`clear`](Self::clear)).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlatch::Interrupter::current().is_interrupted());
    /// ```
    pub fn is_interrupted(&self) -> bool {
        self.0.requested.load(Ordering::SeqCst)
    }

    /// Drops a pending interrupt; true if there was one.
    ///
    /// # Examples
    ///
    /// ```
    /// let me = redlatch::Interrupter::current();
    /// assert!(!me.clear());
    /// ```
    pub fn clear(&self) -> bool {
        self.0.take()
    }
}

impl std::fmt::Debug for Interrupter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupter")
            .field("interrupted", &self.is_interrupted())
            .finish()
    }
}
