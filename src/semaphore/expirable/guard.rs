//! [`PermitGuard`]: one permit of a [`PermitExpirableSemaphore`], released on drop.

use std::fmt;
use std::time::Duration;

use super::{PermitExpirableSemaphore, PermitId};
use crate::error::Result;

/// One permit taken from a [`PermitExpirableSemaphore`]; dropping the guard releases it.
///
/// Made by [`acquire_guard`](PermitExpirableSemaphore::acquire_guard) and its `try_*`
/// siblings. A permit belongs to no thread, so the guard is `Send`: it may be released by
/// another thread. Its lease still runs: a guard kept past its lease finds its permit gone
/// (back in the semaphore, maybe taken by another), and dropping it then logs a warning;
/// [`release`](Self::release) returns [`Error::UnknownPermit`](crate::Error::UnknownPermit)
/// instead. Dropping logs any other release error too.
///
/// # Examples
///
/// ```no_run
/// # use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let slots = client.permit_expirable_semaphore("render-slots");
/// {
///     let permit = slots.acquire_guard(Duration::from_secs(60))?;
///     println!("rendering with permit {}", permit.id());
/// } // released here
/// # Ok(()) }
/// ```
#[must_use = "if unused the permit is released immediately"]
#[clippy::has_significant_drop]
pub struct PermitGuard {
    semaphore: PermitExpirableSemaphore,
    id: PermitId,
    released: bool,
}

impl PermitGuard {
    pub(super) fn new(semaphore: PermitExpirableSemaphore, id: PermitId) -> PermitGuard {
        PermitGuard {
            semaphore,
            id,
            released: false,
        }
    }

    /// The id of the permit.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire_guard(Duration::from_secs(30))?;
    /// assert_eq!(permit.id().as_str().len(), 32);
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &PermitId {
        &self.id
    }

    /// The semaphore the permit came from.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire_guard(Duration::from_secs(30))?;
    /// assert_eq!(permit.semaphore().name(), "slots");
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self) -> &PermitExpirableSemaphore {
        &self.semaphore
    }

    /// How long the permit has left: as
    /// [`PermitExpirableSemaphore::remaining_lease`] for [`id`](Self::id).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::remaining_lease`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire_guard(Duration::from_secs(30))?;
    /// if permit.remaining_lease()?.is_none() {
    ///     println!("the permit expired: stop");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.semaphore.remaining_lease(&self.id)
    }

    /// Sets the permit's lease to `lease` from now: as
    /// [`PermitExpirableSemaphore::update_lease`] for [`id`](Self::id).
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::update_lease`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let permit = client
    ///     .permit_expirable_semaphore("slots")
    ///     .acquire_guard(Duration::from_secs(10))?;
    /// permit.update_lease(Duration::from_secs(60))?;
    /// # Ok(()) }
    /// ```
    pub fn update_lease(&self, lease: Duration) -> Result<()> {
        self.semaphore.update_lease(&self.id, lease)
    }

    /// Releases the permit and reports errors.
    ///
    /// # Errors
    ///
    /// As [`PermitExpirableSemaphore::release`]: [`Error::UnknownPermit`](crate::Error::UnknownPermit)
    /// if the permit's lease ran out (or somebody released it by id) first.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// slots.acquire_guard(Duration::from_secs(30))?.release()?;
    /// # Ok(()) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        self.semaphore.release(&self.id)
    }

    /// Keeps the permit taken: the guard is dropped without releasing it, and the id is
    /// returned, to release it later by id (or let its lease run out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let slots = client.permit_expirable_semaphore("slots");
    /// let id = slots.acquire_guard(Duration::from_secs(30))?.forget();
    /// // ... hand `id` to another process, which releases it
    /// slots.release(&id)?;
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) -> PermitId {
        self.released = true;
        std::mem::replace(&mut self.id, PermitId::new(String::new()))
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.semaphore.try_release(&self.id) {
            Ok(true) => {}
            Ok(false) => log::warn!(
                "permit {} of semaphore `{}` was gone when its guard was dropped: its lease \
                 ran out, or it was released by id",
                self.id,
                self.semaphore.name()
            ),
            Err(e) => log::warn!(
                "releasing permit {} of semaphore `{}` failed: {e}",
                self.id,
                self.semaphore.name()
            ),
        }
    }
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.semaphore.name())
            .field("id", &self.id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::PermitGuard;

    #[test]
    fn a_permit_guard_may_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<PermitGuard>();
    }
}
