//! Kind `group`: each lock is a group of [`VALUES`] values (`client.group_lock`, Redisson's
//! `RedissonFasterMultiLock`: one HASH per group, a field per locked value). Each section, a
//! thread takes a seeded subset of one to three values of one group, with the run's wait
//! bound, probes each value of it (the lost-update probe, one counter per value), and
//! releases them together.
//!
//! After an acquire that failed with an error (its request or reply lost: the acquire is in
//! doubt, and the watchdog settles it 250 ms or more later), the thread's next section takes
//! an overlapping set on purpose: the failed values and one more (one fewer, if it named all
//! six), in the same group, the first value probed after a quarter of the lease, so that the
//! hold is alive when the doubt is settled. A settle that gave back what the live hold holds
//! lets another thread take a value under it: a silent overlap (the `drop-acquire` fault aims
//! at that).
//!
//! Logged: one `S` line per value of a section, its lock field `<group>/<value>`, with the
//! section's times and outcome and that value's probe write; so each value is checked as a
//! lock of its own (two sections holding a value at once, neither told its hold was lost, is
//! a silent overlap), and the runner's `C` lines give each value's counter. A timed-out wait
//! is a `T` line naming the group. The runner finds a group's holders by inspecting it (the
//! inspection lists each owner of a value).

use std::thread;
use std::time::Duration;

use redlatch::ValueCodec;

use super::{mono_ns, Held, Res, Rng, Thread, SLOW_LOCK};

/// Values per group: few enough that subsets of up to three often share one.
pub(crate) const VALUES: u32 = 6;

/// The lock field of value `v` of `group` in the log (and the name of its counter).
pub(crate) fn value_lock(group: &str, v: u32) -> String {
    format!("{group}/v{v}")
}

/// Every value of the groups `groups`, as the log names them.
pub(crate) fn value_locks(groups: &[String]) -> Vec<String> {
    groups
        .iter()
        .flat_map(|g| (0..VALUES).map(move |v| value_lock(g, v)))
        .collect()
}

impl Thread<'_> {
    /// One section of kind `group`: a subset of one to three values of `group`, each probed
    /// (pausing 0..=`--work-ms` between read and write), then released; after an acquire
    /// that failed with an error, the overlapping set the module's doc says. The slow thread
    /// (`slow`: how long it holds) takes value 0 of the slow group alone.
    pub(crate) fn group_cycle(&mut self, rng: &mut Rng, slow: Option<Duration>) -> Res<()> {
        let doubted = self.doubted.take().filter(|_| slow.is_none());
        let overlapping = doubted.is_some();
        let (group, values) = match (slow, doubted) {
            (Some(_), _) => (SLOW_LOCK.to_owned(), vec![0]),
            (None, Some((group, mut failed))) => {
                let others: Vec<u32> = (0..VALUES).filter(|v| !failed.contains(v)).collect();
                if others.is_empty() {
                    failed.pop();
                } else {
                    failed.push(others[rng.range(0, others.len() as u64 - 1) as usize]);
                }
                (group, failed)
            }
            (None, None) => {
                let group = super::lock_name(rng.range(0, u64::from(self.w.run.locks) - 1) as u32);
                let n = rng.range(1, 3) as usize;
                // The first n of a seeded shuffle.
                let mut all: Vec<u32> = (0..VALUES).collect();
                for i in 0..n {
                    let j = rng.range(i as u64, u64::from(VALUES) - 1) as usize;
                    all.swap(i, j);
                }
                all.truncate(n);
                (group, all)
            }
        };
        let mut pauses: Vec<Duration> = values
            .iter()
            .map(|_| {
                slow.unwrap_or_else(|| Duration::from_millis(rng.range(0, self.w.run.work_ms)))
            })
            .collect();
        if overlapping {
            pauses[0] = Duration::from_millis(self.w.run.lease_ms / 4);
        }
        let encoded = values
            .iter()
            .map(|v| ValueCodec::String.encode_str(&format!("v{v}")));
        let wait = Duration::from_millis(self.w.run.wait_ms);
        let (p, t) = (self.w.process, self.thread);
        let held = match self.clients[0]
            .group_lock(&group, encoded)
            .try_lock_for(wait)
        {
            Ok(Some(guard)) => Held::Guard(guard),
            Ok(None) => return self.log(format!("T\t{p}\t{t}\t{group}\t{}", mono_ns())),
            Err(e) => {
                if slow.is_none() {
                    self.doubted = Some((group.clone(), values));
                }
                self.error(&group, "lock", &e)?;
                // A dead server fails at once: do not spin.
                thread::sleep(Duration::from_millis(20));
                return Ok(());
            }
        };
        let enter = mono_ns();
        let mut probed = Vec::with_capacity(values.len());
        for (&v, pause) in values.iter().zip(pauses) {
            let name = value_lock(&group, v);
            let done = match self.probe(&name, &held, pause) {
                Ok(done) => done,
                Err(e) => {
                    self.error(&name, "probe", &e)?;
                    ("err", 0, 0)
                }
            };
            probed.push((name, done));
        }
        let exit = mono_ns();
        let lost_at_exit = Self::known_lost(&held);
        let released = self.release(&group, held)?;
        let outcome = if lost_at_exit { "lost" } else { released };
        for (name, (write, wstart, wend)) in probed {
            self.log(format!(
                "S\t{p}\t{t}\t{name}\t-\t{enter}\t{exit}\t{outcome}\t{write}\t{wstart}\t{wend}\tx"
            ))?;
        }
        Ok(())
    }
}
