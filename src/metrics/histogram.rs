//! Latency histograms: log-linear buckets of microseconds, recorded with relaxed atomic adds
//! ([`AtomicHistogram`]) and read as a public [`Histogram`] snapshot with quantiles.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Values below this many µs have a bucket each.
const EXACT: usize = 16;
/// Sub-buckets per power of two above [`EXACT`]: a bucket spans at most 1/8 of its lower
/// bound, so a quantile is within 12.5% of the true value.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Buckets for every `u64` of µs: 16 exact ones, then 8 per power of two from 2^4 to 2^63.
const BUCKETS: usize = EXACT + (64 - 4) * SUB;

/// The bucket of `us` microseconds.
fn bucket(us: u64) -> usize {
    if us < EXACT as u64 {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // >= 4
    let sub = (us >> (exp - SUB_BITS)) as usize & (SUB - 1);
    EXACT + (exp as usize - 4) * SUB + sub
}

/// The largest value (µs) of bucket `i`.
fn bucket_max(i: usize) -> u64 {
    if i < EXACT {
        return i as u64;
    }
    let exp = ((i - EXACT) / SUB + 4) as u32;
    let sub = ((i - EXACT) % SUB) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    ((SUB as u64 + sub) * width).saturating_add(width - 1)
}

/// A histogram of durations that threads record into concurrently.
pub(crate) struct AtomicHistogram {
    buckets: Box<[AtomicU64]>,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl AtomicHistogram {
    pub(super) fn new() -> AtomicHistogram {
        AtomicHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }

    pub(crate) fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket(us)].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    pub(super) fn snapshot(&self) -> Histogram {
        let buckets: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        Histogram {
            count: buckets.iter().sum(),
            sum_us: self.sum_us.load(Relaxed),
            max_us: self.max_us.load(Relaxed),
            buckets,
        }
    }
}

/// A histogram of durations with microsecond resolution and at most 12.5% error on its
/// quantiles (log-linear buckets: 8 per power of two).
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let hold = client.metrics().hold_time;
/// if let (Some(p99), Some(max)) = (hold.p99(), hold.max()) {
///     println!("{} holds, p99 {p99:?}, max {max:?}", hold.count());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    count: u64,
    sum_us: u64,
    max_us: u64,
    buckets: Vec<u64>,
}

#[cfg(feature = "serde")]
impl serde::Serialize for Histogram {
    /// Its summary, in microseconds: `count`, `mean_us`, `p50_us`, `p90_us`, `p99_us` and
    /// `max_us` (null when empty).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let us = |d: Option<Duration>| d.map(|d| d.as_micros() as u64);
        let mut st = s.serialize_struct("Histogram", 6)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("mean_us", &us(self.mean()))?;
        st.serialize_field("p50_us", &us(self.p50()))?;
        st.serialize_field("p90_us", &us(self.quantile(0.9)))?;
        st.serialize_field("p99_us", &us(self.p99()))?;
        st.serialize_field("max_us", &us(self.max()))?;
        st.end()
    }
}

impl Histogram {
    /// How many durations were recorded.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.metrics().hold_time.count(), 0);
    /// ```
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean, or `None` when empty.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let mean = client.metrics().wait_time.mean();
    /// ```
    pub fn mean(&self) -> Option<Duration> {
        (self.count > 0).then(|| Duration::from_micros(self.sum_us / self.count))
    }

    /// The largest duration recorded (exact), or `None` when empty.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let longest_hold = client.metrics().hold_time.max();
    /// ```
    pub fn max(&self) -> Option<Duration> {
        (self.count > 0).then(|| Duration::from_micros(self.max_us))
    }

    /// The `q` quantile (`0.0..=1.0`, clamped): a duration that at least `q` of the recorded
    /// ones do not exceed, at most 12.5% above the true one (and never above the maximum).
    /// `None` when empty.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let p90 = client.metrics().wait_time.quantile(0.9);
    /// ```
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.count == 0 {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        // The rank of the quantile, 1-based: ceil(q * count), at least 1.
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_micros(bucket_max(i).min(self.max_us)));
            }
        }
        // Buckets and count were read at slightly different times.
        Some(Duration::from_micros(self.max_us))
    }

    /// The median: [`quantile(0.5)`](Self::quantile).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let p50 = client.metrics().wait_time.p50();
    /// ```
    pub fn p50(&self) -> Option<Duration> {
        self.quantile(0.5)
    }

    /// [`quantile(0.99)`](Self::quantile).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// let p99 = client.metrics().wait_time.p99();
    /// ```
    pub fn p99(&self) -> Option<Duration> {
        self.quantile(0.99)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for us in (0..5000u64).chain([u64::MAX / 2, u64::MAX - 1, u64::MAX]) {
            let b = bucket(us);
            assert!(b >= last, "monotonic at {us}");
            assert!(b < BUCKETS);
            assert!(bucket_max(b) >= us, "{us} fits its bucket {b}");
            if b > 0 {
                assert!(bucket_max(b - 1) < us, "{us} is above the previous bucket");
            }
            if us >= EXACT as u64 {
                let err = (bucket_max(b) - us) as f64 / us as f64;
                assert!(err <= 0.125, "{us}: {err}");
            }
            last = b;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_max(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn quantiles_are_within_an_eighth() {
        let h = AtomicHistogram::new();
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 1000);
        assert_eq!(s.max(), Some(Duration::from_millis(1000)));
        assert_eq!(s.mean(), Some(Duration::from_micros(500_500)));
        for (q, want) in [(0.5, 500.0), (0.99, 990.0), (0.0, 1.0), (1.0, 1000.0)] {
            let got = s.quantile(q).unwrap().as_secs_f64() * 1000.0;
            assert!(got >= want && got <= want * 1.125, "q{q}: {got} vs {want}");
        }
        let empty = AtomicHistogram::new().snapshot();
        assert_eq!((empty.p50(), empty.max(), empty.mean()), (None, None, None));
    }

    #[test]
    fn concurrent_records_are_all_counted() {
        let h = std::sync::Arc::new(AtomicHistogram::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = std::sync::Arc::clone(&h);
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        h.record(Duration::from_micros(i));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(h.snapshot().count(), 40_000);
    }
}
