//! [`SemaphoreGuard`]: permits taken from a [`Semaphore`], given back on drop.

use super::handle::Semaphore;
use crate::error::Result;

/// Permits taken from a [`Semaphore`]; dropping the guard gives them back.
///
/// Permits have no owner, so the guard is `Send`: it may be released by another thread.
/// Dropping logs a release error; [`release`](Self::release) returns it.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let permit = client.semaphore("slots").acquire(2)?;
/// assert_eq!(permit.permits(), 2);
/// permit.release()?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the permits are released immediately"]
#[clippy::has_significant_drop]
pub struct SemaphoreGuard {
    semaphore: Semaphore,
    permits: u32,
    released: bool,
}

impl SemaphoreGuard {
    pub(super) fn new(semaphore: Semaphore, permits: u32) -> SemaphoreGuard {
        SemaphoreGuard {
            semaphore,
            permits,
            released: false,
        }
    }

    /// How many permits this guard holds.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// assert_eq!(client.semaphore("slots").acquire(3)?.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore the permits came from.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client.semaphore("slots").acquire(1)?;
    /// assert_eq!(permit.semaphore().name(), "slots");
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    /// Gives the permits back and reports errors.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::release`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// client.semaphore("slots").acquire(1)?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.semaphore.release(self.permits).map(drop)
    }

    /// Keeps the permits taken: the guard is dropped without giving them back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let sem = client.semaphore("one-shot");
    /// sem.acquire(1)?.forget(); // consumed for good
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) {
        self.released = true;
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Err(e) = self.semaphore.release(self.permits) {
                log::warn!(
                    "releasing {} permits of semaphore `{}` failed: {e}",
                    self.permits,
                    self.semaphore.raw.name
                );
            }
        }
    }
}

impl std::fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreGuard")
            .field("semaphore", &self.semaphore.raw.name)
            .field("permits", &self.permits)
            .finish()
    }
}
