//! Kind `deadlock`: each round, a thread takes two or three of the shared locks (reentrant,
//! `client.lock(name)`), in an order of its seeded choice (by name with `--ordered`), each
//! with `lock()` and no wait bound, probes each as it gets it (the lost-update probe of the
//! exclusive kinds), then releases them, the last taken first. Threads of different processes
//! taking the same locks in other orders close cycles of waits; the clients check for them
//! `--check-ms` after a wait began (`deadlock_check_after`), and the youngest wait of each
//! cycle ends with `Error::Deadlock`: its thread releases what it holds (each hold logged),
//! counts the broken deadlock, and goes on with the next round.
//!
//! Logged: an `S` line for every hold (the lock's section from the return of its lock() call
//! to its unlock, as every exclusive kind's, so the overlap rules apply to every lock held);
//! a `D` line for every lock() call, with how it ended (a deadlock with its cycle); a `U`
//! line for every round. A call still blocked 5 s past its bound ([`stuck_after_ms`]) is logged
//! as `stuck`, and its worker gives up. See `deadlock_check.rs` for the rules.

use std::fs::File;
use std::io::{LineWriter, Write as _};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::{deadlock_check, lock_name, mono_ns, Held, Opts, Res, Rng, Thread, WorkerOpts};

/// Each thread's lock() call in flight: the lock, and when the call began.
pub(crate) type InFlight = parking_lot::Mutex<Vec<Option<(String, u64)>>>;

/// How a hold's probe write went (`acc`, `err`), and when it began and ended.
type Probed = (&'static str, u64, u64);

/// The longest a lock() call of run `o` may block: the wait bound, or with faults the fault
/// bound (see `deadlock_check.rs`).
pub(crate) fn call_bound_ms(o: &Opts) -> u64 {
    if o.faults.is_empty() {
        o.wait_ms
    } else {
        deadlock_check::with_fault_ms(o.wait_ms, o.lease_ms)
    }
}

/// How long a lock() call may stay blocked before its worker reports it stuck and gives up:
/// its bound and 5 s more.
pub(crate) fn stuck_after_ms(o: &Opts) -> u64 {
    call_bound_ms(o) + 5_000
}

impl Thread<'_> {
    /// One round: the locks taken one after the other (each probed once held), then released.
    pub(crate) fn deadlock_round(&mut self, rng: &mut Rng) -> Res<()> {
        let locks = self.w.run.locks;
        let n = rng.range(2, 3).min(u64::from(locks)) as usize;
        // The first n of a seeded shuffle.
        let mut picked: Vec<u32> = (0..locks).collect();
        for i in 0..n {
            let j = rng.range(i as u64, u64::from(locks) - 1) as usize;
            picked.swap(i, j);
        }
        let mut names: Vec<String> = picked[..n].iter().map(|&i| lock_name(i)).collect();
        if self.w.run.ordered {
            names.sort();
        }
        let pauses: Vec<Duration> = names
            .iter()
            .map(|_| Duration::from_millis(rng.range(0, self.w.run.work_ms)))
            .collect();
        let (p, t) = (self.w.process, self.thread);
        let start = mono_ns();
        // (lock, hold, enter, its probe)
        let mut held: Vec<(&str, Held, u64, Probed)> = Vec::new();
        let mut outcome = "done";
        for (name, pause) in names.iter().zip(pauses) {
            let called = mono_ns();
            self.in_flight.lock()[t as usize] = Some((name.clone(), called));
            let got = self.clients[0].lock(name.as_str()).lock();
            let returned = mono_ns();
            self.in_flight.lock()[t as usize] = None;
            let guard = match got {
                Ok(guard) => {
                    self.log(format!("D\t{p}\t{t}\t{name}\t{called}\t{returned}\tok\t-"))?;
                    guard
                }
                Err(e) if e.is_deadlock() => {
                    let cycle = e.to_string().replace(['\t', '\n'], " ");
                    self.log(format!(
                        "D\t{p}\t{t}\t{name}\t{called}\t{returned}\tdeadlock\t{cycle}"
                    ))?;
                    outcome = "deadlock";
                    break;
                }
                Err(e) => {
                    self.log(format!("D\t{p}\t{t}\t{name}\t{called}\t{returned}\terr\t-"))?;
                    self.error(name, "lock", &e)?;
                    outcome = "err";
                    break;
                }
            };
            let hold = Held::Guard(guard);
            let probed = match self.probe(name, &hold, pause) {
                Ok(done) => done,
                Err(e) => {
                    self.error(name, "probe", &e)?;
                    ("err", 0, 0)
                }
            };
            held.push((name, hold, returned, probed));
        }
        // The victim of a deadlock still holds the others: released here, as the rest.
        while let Some((name, hold, enter, (write, wstart, wend))) = held.pop() {
            let exit = mono_ns();
            let lost_at_exit = Self::known_lost(&hold);
            let released = self.release(name, hold)?;
            let outcome = if lost_at_exit { "lost" } else { released };
            self.log(format!(
                "S\t{p}\t{t}\t{name}\t-\t{enter}\t{exit}\t{outcome}\t{write}\t{wstart}\t{wend}\tx"
            ))?;
        }
        let (end, names) = (mono_ns(), names.join(","));
        self.log(format!("U\t{p}\t{t}\t{names}\t{start}\t{end}\t{outcome}"))?;
        if outcome == "err" {
            // A dead server fails at once: do not spin.
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// Watches the worker's threads until they have all finished: a lock() call blocked for
/// longer than [`stuck_after_ms`] is logged as `stuck` (ending now), and the worker gives up
/// (an error: the runner records the worker's failure).
pub(crate) fn await_threads(
    w: &WorkerOpts,
    threads: &[JoinHandle<Res<()>>],
    in_flight: &InFlight,
    out: &parking_lot::Mutex<LineWriter<File>>,
) -> Res<()> {
    let limit = stuck_after_ms(&w.run) * 1_000_000;
    while !threads.iter().all(JoinHandle::is_finished) {
        let now = mono_ns();
        let stuck: Vec<(usize, String, u64)> = in_flight
            .lock()
            .iter()
            .enumerate()
            .filter_map(|(t, call)| {
                let (lock, start) = call.as_ref()?;
                (now.saturating_sub(*start) > limit).then(|| (t, lock.clone(), *start))
            })
            .collect();
        if !stuck.is_empty() {
            let p = w.process;
            for (t, lock, start) in &stuck {
                writeln!(out.lock(), "D\t{p}\t{t}\t{lock}\t{start}\t{now}\tstuck\t-")?;
            }
            return Err(format!(
                "{} lock() calls blocked for more than {} ms",
                stuck.len(),
                stuck_after_ms(&w.run)
            )
            .into());
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
