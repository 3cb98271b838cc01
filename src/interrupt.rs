//! Interrupting a thread's waits, as Java's `Thread.interrupt` does for
//! `Lock.lockInterruptibly`: a per-thread flag, and the slot of the wait the thread is
//! blocked in, which an interrupt wakes (see `pubsub::Alarms::block`). The same slot takes a
//! nudge: a thread of the client that passed this thread a lock it waits for (see
//! `handover.rs`) wakes it this way, without an interrupt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;
use parking_lot::Mutex;

/// One thread's interrupt state: the flag, and the wake-up slot of the wait it is blocked in.
#[derive(Default)]
pub(crate) struct Interruption {
    requested: AtomicBool,
    /// A nudge not yet seen by a block (see [`nudge`](Self::nudge)).
    nudged: AtomicBool,
    /// The slot the thread blocks on now, if it does (see [`arm`](Self::arm)).
    armed: Mutex<Option<Sender<()>>>,
}

thread_local! {
    static CURRENT: Arc<Interruption> = Arc::default();
}

impl Interruption {
    /// The calling thread's state.
    pub(crate) fn current() -> Arc<Interruption> {
        CURRENT.with(Arc::clone)
    }

    pub(crate) fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        if let Some(slot) = &*self.armed.lock() {
            // A full slot already wakes the thread.
            let _ = slot.try_send(());
        }
    }

    /// Whether an interrupt is pending.
    pub(crate) fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Takes a pending interrupt: true if there was one (the flag is then clear).
    pub(crate) fn take(&self) -> bool {
        self.requested.swap(false, Ordering::SeqCst)
    }

    /// Wakes the thread's wait once, without interrupting it: its slot if it is blocked, or
    /// its next block, which then returns at once (see [`take_nudge`](Self::take_nudge)).
    pub(crate) fn nudge(&self) {
        self.nudged.store(true, Ordering::SeqCst);
        if let Some(slot) = &*self.armed.lock() {
            let _ = slot.try_send(());
        }
    }

    /// Takes a nudge not yet seen: true if there was one.
    pub(crate) fn take_nudge(&self) -> bool {
        self.nudged.swap(false, Ordering::SeqCst)
    }

    /// Makes `slot` the one an interrupt wakes, until the returned guard drops. The caller
    /// checks [`is_requested`](Self::is_requested) after arming and before blocking: an
    /// interrupt is then either seen by that check or delivered to the slot.
    pub(crate) fn arm(&self, slot: &Sender<()>) -> Armed<'_> {
        *self.armed.lock() = Some(slot.clone());
        Armed(self)
    }
}

/// A slot armed for interrupts (see [`Interruption::arm`]); disarms on drop.
pub(crate) struct Armed<'a>(&'a Interruption);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        *self.0.armed.lock() = None;
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
pub struct Interrupter(pub(crate) Arc<Interruption>);

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
        self.0.is_requested()
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
