//! Running a closure under a [`Lock`] or a [`LockSet`]: acquired before it, released after
//! it, whatever it returns, with one error type for the lock's errors and the closure's.

use std::time::{Duration, Instant};

use super::guard::LockGuard;
use super::handle::Lock;
use super::owner::Ownership;
use super::set::LockSet;
use super::set_guard::LockSetGuard;
use crate::error::Error;

/// A hold a closure runs under: released after it, with what to call it in a log line.
trait Held {
    fn release(self) -> Result<(), Error>;
    fn what(&self) -> String;
}

impl<O: Ownership> Held for LockGuard<O> {
    fn release(self) -> Result<(), Error> {
        self.unlock()
    }

    fn what(&self) -> String {
        format!("`{}`", self.lock().name())
    }
}

impl Held for LockSetGuard {
    fn release(self) -> Result<(), Error> {
        self.unlock()
    }

    fn what(&self) -> String {
        "a lock set".to_owned()
    }
}

impl LockSet {
    /// Takes every lock of the set (waiting as [`lock`](Self::lock) does), runs `f`, releases
    /// them, and returns what `f` returned: as [`Lock::with`], for the set.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), `f`'s own, and as [`LockSetGuard::unlock`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let moved = client.lock_set(["account:1", "account:2"]).with(|| {
    ///     // ... move money between the two accounts ...
    ///     Ok::<_, redlatch::Error>(100)
    /// })?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn with<T, E: From<Error>>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let guard = self.lock()?;
        run_then_release(guard, f)
    }
}

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
fn run_if_held<T, E: From<Error>>(
    guard: Option<impl Held>,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<Option<T>, E> {
    guard.map(|guard| run_then_release(guard, f)).transpose()
}

/// Runs `f` while `guard` holds, then releases it. A panic in `f` releases it too (the
/// guard's drop).
fn run_then_release<T, E: From<Error>>(
    guard: impl Held,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match f() {
        Ok(value) => guard.release().map(|()| value).map_err(E::from),
        Err(e) => {
            let what = guard.what();
            if let Err(release) = guard.release() {
                log::warn!("releasing {what} after its closure failed: {release}");
            }
            Err(e)
        }
    }
}
