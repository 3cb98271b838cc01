//! Durations: the longest one any call accepts, the check every public call makes, and the
//! rounding to Redis's milliseconds.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The longest duration redlatch accepts for any timeout, lease or wait: one year. A longer
/// one would overflow nothing in Redis's millisecond arithmetic, but is surely a mistake, and
/// is refused as [`Error::InvalidArgument`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// assert_eq!(redlatch::MAX_DURATION, Duration::from_secs(365 * 24 * 3600));
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Rejects a zero duration or one longer than [`MAX_DURATION`].
pub(crate) fn check_duration(what: &str, d: Duration) -> Result<()> {
    if d.is_zero() {
        return Err(Error::invalid(format!("{what} must be non-zero")));
    }
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} of {d:?} is longer than one year"
        )));
    }
    Ok(())
}

/// Rejects a wait longer than [`MAX_DURATION`]. A zero wait is one try, as a deadline that
/// has passed.
pub(crate) fn check_wait(wait: Duration) -> Result<()> {
    if wait > MAX_DURATION {
        return Err(Error::invalid(format!(
            "wait of {wait:?} is longer than one year"
        )));
    }
    Ok(())
}

/// Rejects a deadline more than [`MAX_DURATION`] away.
pub(crate) fn check_deadline(deadline: Instant) -> Result<()> {
    if deadline.saturating_duration_since(Instant::now()) > MAX_DURATION {
        return Err(Error::invalid("deadline is more than one year away"));
    }
    Ok(())
}

/// A duration in whole milliseconds for Redis, rounded up so that 1 µs never becomes 0 ms.
pub(crate) fn millis(d: Duration) -> u64 {
    let ms = d.as_millis() as u64;
    if Duration::from_millis(ms) < d {
        ms + 1
    } else {
        ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_rounds_up() {
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_millis(30_000)), 30_000);
        assert_eq!(millis(Duration::from_micros(1500)), 2);
    }
}
