//! How a waiter that cannot listen for a release paces its retries: [`Backoff`], the
//! public bounds, and `Pacer`, one wait's sequence of jittered delays.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::time::{check_duration, MAX_DURATION};

/// How a [spin lock](crate::Client::spin_lock) waiter paces its retries: exponential back-off
/// with jitter, between two bounds.
///
/// The first retry comes `initial` after the failed attempt; each delay is the previous one
/// times `multiplier` plus a random 0 to n-1 ms on the n-th step (Redisson's jitter), and
/// never more than `max`. Once there, each delay is drawn anew between ¾ of `max` and `max`,
/// so that waiters that started together do not retry together. A delay is also never longer
/// than the lock's remaining lease, nor than the caller's deadline.
///
/// The defaults are Redisson's (`LockOptions.ExponentialBackOff`): 1 ms, 128 ms, ×2.
/// Invalid bounds (an initial delay under 1 ms, a maximum below it or over a year, a
/// multiplier of 0) are reported as [`Error::InvalidArgument`] by
/// [`ConfigBuilder::build`](crate::ConfigBuilder::build), or by the acquire calls of a lock
/// made with [`Client::spin_lock_with_backoff`](crate::Client::spin_lock_with_backoff).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let b = redlatch::Backoff::new(Duration::from_millis(5), Duration::from_millis(200))
///     .multiplier(3);
/// assert_eq!(b.max_delay(), Duration::from_millis(200));
/// assert_eq!(redlatch::Backoff::default().initial_delay(), Duration::from_millis(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    multiplier: u32,
}

impl Default for Backoff {
    /// Redisson's defaults: from 1 ms, doubling, up to 128 ms.
    fn default() -> Backoff {
        Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

impl Backoff {
    /// Delays from `initial` up to `max`, doubling (see [`multiplier`](Self::multiplier)).
    /// Checked where it is used (see the type's docs).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = redlatch::Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    /// assert_eq!(b.multiplier_value(), 2);
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            multiplier: 2,
        }
    }

    /// How much each delay grows over the previous one (before jitter). Defaults to 2; 1
    /// keeps the delay at `initial` (plus jitter).
    ///
    /// # Examples
    ///
    /// ```
    /// let b = redlatch::Backoff::default().multiplier(4);
    /// assert_eq!(b.multiplier_value(), 4);
    /// ```
    pub fn multiplier(mut self, multiplier: u32) -> Backoff {
        self.multiplier = multiplier;
        self
    }

    /// The first delay.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(redlatch::Backoff::default().initial_delay(), Duration::from_millis(1));
    /// ```
    pub fn initial_delay(&self) -> Duration {
        self.initial
    }

    /// The longest delay.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(redlatch::Backoff::default().max_delay(), Duration::from_millis(128));
    /// ```
    pub fn max_delay(&self) -> Duration {
        self.max
    }

    /// The growth factor.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::Backoff::default().multiplier_value(), 2);
    /// ```
    pub fn multiplier_value(&self) -> u32 {
        self.multiplier
    }

    /// The invariants: `initial` at least 1 ms, `initial <= max <=` one year, a multiplier of
    /// at least 1.
    pub(crate) fn check(&self) -> Result<()> {
        if self.initial < Duration::from_millis(1) {
            return Err(Error::invalid(format!(
                "spin back-off initial delay of {:?} is under 1 ms",
                self.initial
            )));
        }
        check_duration("spin back-off max delay", self.max)?;
        if self.max < self.initial {
            return Err(Error::invalid(format!(
                "spin back-off max delay {:?} is below its initial delay {:?}",
                self.max, self.initial
            )));
        }
        if self.multiplier == 0 {
            return Err(Error::invalid(
                "spin back-off multiplier must be at least 1",
            ));
        }
        debug_assert!(self.max <= MAX_DURATION);
        Ok(())
    }
}

/// One wait's delays (a checked [`Backoff`] and where it is at); its own random numbers.
pub(crate) struct Pacer {
    backoff: Backoff,
    /// The next delay before jitter at the cap, in ms.
    next_ms: u64,
    /// Delays handed out so far.
    steps: u64,
    rng: u64,
}

impl Pacer {
    /// A wait's pacer, seeded from the process's random hasher keys, the time and the thread.
    pub(crate) fn new(backoff: Backoff) -> Pacer {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        std::time::SystemTime::now().hash(&mut h);
        std::thread::current().id().hash(&mut h);
        Pacer::seeded(backoff, h.finish())
    }

    /// A pacer with a given seed (tests).
    pub(crate) fn seeded(backoff: Backoff, seed: u64) -> Pacer {
        Pacer {
            backoff,
            next_ms: backoff.initial.as_millis() as u64,
            steps: 0,
            rng: seed,
        }
    }

    /// The delay before the next retry.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let max = self.backoff.max.as_millis() as u64;
        let delay = if self.next_ms >= max {
            // At the cap: anywhere in [max - max/4, max], and never below the initial delay.
            let low = (max - max / 4).max(self.backoff.initial.as_millis() as u64);
            low + self.random(max - low + 1)
        } else {
            self.next_ms
        };
        self.steps += 1;
        let jitter = self.random(self.steps);
        self.next_ms = self
            .next_ms
            .saturating_mul(u64::from(self.backoff.multiplier))
            .saturating_add(jitter)
            .min(max);
        Duration::from_millis(delay)
    }

    /// A number in `0..n` (n > 0): splitmix64.
    fn random(&mut self, n: u64) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn delays(backoff: Backoff, seed: u64, n: usize) -> Vec<u64> {
        let mut p = Pacer::seeded(backoff, seed);
        (0..n).map(|_| p.next_delay().as_millis() as u64).collect()
    }

    #[test]
    fn default_delays_grow_from_one_ms_to_the_cap_and_stay_within_it() {
        let d = delays(Backoff::default(), 7, 40);
        assert_eq!(&d[..2], &[1, 2], "{d:?}");
        // Step n: at least twice the previous, plus under n ms of jitter.
        for w in d.windows(2).take(6) {
            assert!(w[1] >= 2 * w[0] && w[1] < 2 * w[0] + 8, "{d:?}");
        }
        assert!(d.iter().all(|&x| (1..=128).contains(&x)), "{d:?}");
        assert!(d[10..].iter().all(|&x| x >= 96), "{d:?}");
    }

    #[test]
    fn delays_are_jittered_and_the_seed_decides_them() {
        let a = delays(Backoff::default(), 1, 30);
        let b = delays(Backoff::default(), 2, 30);
        assert_ne!(a, b, "different seeds, different delays");
        assert_eq!(
            a,
            delays(Backoff::default(), 1, 30),
            "same seed, same delays"
        );
        let capped = &a[10..];
        assert!(
            capped.iter().any(|&x| x != capped[0]),
            "delays at the cap vary: {a:?}"
        );
    }

    #[test]
    fn a_multiplier_of_one_stays_near_the_initial_delay() {
        let d = delays(Backoff::new(ms(10), ms(1000)).multiplier(1), 3, 10);
        assert_eq!(d[0], 10);
        // Only jitter adds: under 1 + 2 + ... + 9 ms in all.
        assert!(d.iter().all(|&x| (10..10 + 45).contains(&x)), "{d:?}");
    }

    #[test]
    fn equal_bounds_give_a_constant_delay() {
        let d = delays(Backoff::new(ms(50), ms(50)), 9, 10);
        assert!(d.iter().all(|&x| x == 50), "{d:?}");
    }

    #[test]
    fn bad_bounds_are_invalid_arguments() {
        let bad = [
            Backoff::new(Duration::ZERO, ms(10)),
            Backoff::new(Duration::from_micros(500), ms(10)),
            Backoff::new(ms(20), ms(10)),
            Backoff::new(ms(1), MAX_DURATION + ms(1)),
            Backoff::default().multiplier(0),
        ];
        for b in bad {
            assert!(b.check().unwrap_err().is_invalid_argument(), "{b:?}");
        }
        assert!(Backoff::default().check().is_ok());
        assert!(Backoff::new(ms(1), ms(1)).multiplier(1).check().is_ok());
    }
}
