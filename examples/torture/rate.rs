//! The rate kinds: each lock is a rate limiter of `--rate` permits per `--interval-ms`.
//!
//! Kind `rate` (`client.rate_limiter`, Redisson's `RRateLimiter`): every thread sets each
//! limiter's rate with `try_set_rate(Overall, ..)` before its first call, then loops: a
//! limiter at random, 1 to 3 permits (at most the rate), taken with `acquire` (three calls in
//! four) or `try_acquire_for` the wait bound. Each grant is an `M` line with its server time
//! (`Admitted::at`) and the call's CLOCK_MONOTONIC start and end; a bounded wait that ran out a
//! `T` line. A call that finds no rate (`Error::RateNotSet`: a kill of the server lost it) is
//! an `N` line, and the thread sets the rate again; any other error is an `E` line. Nobody
//! releases: a permit counts against the rate for its whole interval. See `rate_check.rs`
//! for the rules.
//!
//! Kind `rate-broken` runs the same loop on a limiter that checks, then takes, in separate
//! calls on the lock server: the server's `TIME`, the permits its own ZSET
//! (`<limiter>:broken`, each entry `<who>:<permits>` scored with that time) holds from the
//! last interval, and a `ZADD` where they leave room. Threads that check at once all take:
//! the checker must find windows over the rate.

use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};

use redlatch::RateType;

use super::{lock_name, mono_ns, Res, Rng, Thread};

impl Thread<'_> {
    /// Sets every limiter's rate, unless it is set (before the thread's first call).
    pub(crate) fn rate_setup(&mut self) -> Res<()> {
        if self.w.run.kind == "rate" {
            for i in 0..self.w.run.locks {
                self.set_rate(&lock_name(i))?;
            }
        }
        Ok(())
    }

    fn set_rate(&self, limiter: &str) -> Res<()> {
        let interval = Duration::from_millis(self.w.run.interval_ms);
        let set = self.clients[0].rate_limiter(limiter).try_set_rate(
            RateType::Overall,
            self.w.run.rate,
            interval,
        );
        if let Err(e) = set {
            self.error(limiter, "set", &e)?;
        }
        Ok(())
    }

    /// One call of a rate kind on a limiter at random, logged.
    pub(crate) fn rate_cycle(&mut self, rng: &mut Rng) -> Res<()> {
        let limiter = lock_name(rng.range(0, u64::from(self.w.run.locks) - 1) as u32);
        let permits = rng.range(1, self.w.run.rate.min(3)) as u32;
        let wait = (rng.range(0, 3) == 0).then(|| Duration::from_millis(self.w.run.wait_ms));
        let start = mono_ns();
        let taken = if self.w.run.kind == "rate-broken" {
            self.broken_take(&limiter, permits, wait)
        } else {
            self.take(&limiter, permits, wait)
        };
        let end = mono_ns();
        let (p, t) = (self.w.process, self.thread);
        let call = if wait.is_some() { "w" } else { "a" };
        match taken {
            Ok(Some(at)) => self.log(format!(
                "M\t{p}\t{t}\t{limiter}\t{permits}\t{at}\t{at}\t{start}\t{end}\t{call}"
            )),
            Ok(None) => self.log(format!("T\t{p}\t{t}\t{limiter}\t{end}")),
            Err(e)
                if e.downcast_ref::<redlatch::Error>()
                    .is_some_and(redlatch::Error::is_rate_not_set) =>
            {
                self.log(format!("N\t{p}\t{t}\t{limiter}\t{start}\t{end}"))?;
                self.set_rate(&limiter)
            }
            Err(e) => {
                self.error(&limiter, "acquire", &e)?;
                // A dead server fails at once: do not spin.
                thread::sleep(Duration::from_millis(20));
                Ok(())
            }
        }
    }

    /// Takes `permits` of `limiter` (waiting at most `wait`): the grant's server time in ms.
    fn take(&self, limiter: &str, permits: u32, wait: Option<Duration>) -> Res<Option<u64>> {
        let limiter = self.clients[0].rate_limiter(limiter);
        let admitted = match wait {
            Some(wait) => limiter.try_acquire_for(permits, wait)?,
            None => Some(limiter.acquire(permits)?),
        };
        Ok(admitted.map(|a| {
            let at = a.at.duration_since(UNIX_EPOCH).unwrap_or_default();
            at.as_millis() as u64
        }))
    }

    /// The broken limiter (see the module's doc), polling every millisecond.
    fn broken_take(
        &mut self,
        limiter: &str,
        permits: u32,
        wait: Option<Duration>,
    ) -> Res<Option<u64>> {
        let taken = self.broken_take_on(limiter, permits, wait);
        if taken.is_err() {
            self.raw_lock = None; // reconnect next time
        }
        taken
    }

    fn broken_take_on(
        &mut self,
        limiter: &str,
        permits: u32,
        wait: Option<Duration>,
    ) -> Res<Option<u64>> {
        let key = format!("{limiter}:broken");
        let (rate, interval) = (self.w.run.rate, self.w.run.interval_ms);
        let until = wait.map(|w| Instant::now() + w);
        let member = format!("{}.{}.{}:{permits}", self.w.process, self.thread, mono_ns());
        let conn = self.raw_lock()?;
        loop {
            let (s, us): (u64, u64) = redis::cmd("TIME").query(conn)?;
            let now = s * 1000 + us / 1000;
            let recent: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(&key)
                .arg(format!("({}", now - interval))
                .arg("+inf")
                .query(conn)?;
            let used: u64 = (recent.iter())
                .filter_map(|m| m.rsplit(':').next()?.parse::<u64>().ok())
                .sum();
            if used + u64::from(permits) <= rate {
                // Whoever checked meanwhile takes too.
                redis::cmd("ZADD")
                    .arg(&key)
                    .arg(now)
                    .arg(&member)
                    .exec(conn)?;
                return Ok(Some(now));
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
}
