//! Running a closure under a [`Lock`]: acquired before it, released after it, whatever it
//! returns, with one error type for the lock's errors and the closure's.

use std::time::{Duration, Instant};

use super::guard::LockGuard;
use super::handle::Lock;
use super::owner::Ownership;
use crate::error::Error;

impl<O: Ownership> Lock<O> {
    /// Takes the lock (waiting as [`lock`](Self::lock) does), runs `f`, releases the lock,
    /// and returns what `f` returned. `f`'s error type takes the lock's errors
    /// (`E: From<redlatch::Error>`; [`redlatch::Error`](Error) itself does), so that one `?`
    /// serves both.
    ///
    /// When `f` succeeds, a failed release is the call's error: a release that finds the
    /// hold gone ([`Error::LockLost`]) means `f` may have run without the lock for a while.
    /// When `f` fails, its error is returned and a failed release is only logged.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), `f`'s own, and as [`LockGuard::unlock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let order = 1001;
    /// let total = client.lock(format!("order:{order}")).with(|| {
    ///     // ... read, change and write the order ...
    ///     Ok::<_, redlatch::Error>(42)
    /// })?;
    /// assert_eq!(total, 42);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn with<T, E: From<Error>>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let guard = self.lock()?;
        run_then_release(guard, f)
    }

    /// As [`with`](Self::with) if the lock is free now (never waits): `Ok(None)`, without
    /// running `f`, when it is taken.
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let ran = client.lock("nightly-report").try_with(|| {
    ///     // ... only one process writes tonight's report ...
    ///     Ok::<_, redlatch::Error>(())
    /// })?;
    /// if ran.is_none() {
    ///     println!("another process is writing it");
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_with<T, E: From<Error>>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        run_if_held(self.try_lock()?, f)
    }

    /// As [`with`](Self::with), waiting at most `wait` for the lock (zero: one try):
    /// `Ok(None)`, without running `f`, when the wait ran out.
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with) and [`try_lock_for`](Self::try_lock_for).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let lock = client.lock("inventory:sku-7");
    /// match lock.try_with_for(Duration::from_secs(2), || Ok::<_, redlatch::Error>(7))? {
    ///     Some(stock) => println!("{stock} in stock"),
    ///     None => println!("busy: try again later"),
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_with_for<T, E: From<Error>>(
        &self,
        wait: Duration,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        run_if_held(self.try_lock_for(wait)?, f)
    }

    /// As [`with`](Self::with), waiting at most until `deadline` for the lock:
    /// `Ok(None)`, without running `f`, when it passed.
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with) and [`try_lock_until`](Self::try_lock_until).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let deadline = Instant::now() + Duration::from_millis(500);
    /// let done = client.lock("cache:refresh").try_with_until(deadline, || {
    ///     Ok::<_, redlatch::Error>("refreshed")
    /// })?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn try_with_until<T, E: From<Error>>(
        &self,
        deadline: Instant,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        run_if_held(self.try_lock_until(deadline)?, f)
    }
}

/// [`run_then_release`] when a try took the lock; `Ok(None)` without running `f` otherwise.
fn run_if_held<O: Ownership, T, E: From<Error>>(
    guard: Option<LockGuard<O>>,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<Option<T>, E> {
    guard.map(|guard| run_then_release(guard, f)).transpose()
}

/// Runs `f` while `guard` holds the lock, then releases it. A panic in `f` releases the lock
/// too (the guard's drop).
fn run_then_release<O: Ownership, T, E: From<Error>>(
    guard: LockGuard<O>,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match f() {
        Ok(value) => guard.unlock().map(|()| value).map_err(E::from),
        Err(e) => {
            let name = guard.lock().name().to_owned();
            if let Err(release) = guard.unlock() {
                log::warn!("releasing `{name}` after its closure failed: {release}");
            }
            Err(e)
        }
    }
}
