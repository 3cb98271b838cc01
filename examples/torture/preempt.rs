//! Kind `preempt`: fenced locks taken back. Each round a thread, at random, waits for a lock
//! with a priority (0 to 3), preempts its holder with a grace, steals it, or asks its holder
//! to release it. A holder honours notices (it stops as soon as its `on_revoke` fires, and
//! writes nothing more) or ignores them (it runs its whole section and writes the probe: a
//! write after its preemptor's is refused by the fence). Kind `preempt-broken` takes a lock
//! as an unconditional release would: it asks, waits the grace, and force-unlocks whoever
//! holds the lock then.
//!
//! Beside each section's `S` line (see `check.rs`) a worker logs:
//!
//! ```text
//! Z proc thread lock token owner role honour notice_ns lost_ns reason grace_ms   a hold's story
//! Y proc thread lock priority start_ns end_ns got                               a wait with a priority
//! ```
//!
//! `role`: `h` waited (with a priority), `p` preempted with a grace, `s` stole. `honour`:
//! `1` or `0`. `notice_ns`: when `on_revoke` fired (0: never); `lost_ns` and `reason`: when
//! `on_lost` fired and why (`preempted`, `other`; 0 and `-`: never). The runner adds the
//! locks' logs of revocations to `run.tsv`: `J lock event by whom token`.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use redlatch::{LostReason, Preempt};

use crate::{counter_name, lock_name, mono_ns, Res, Rng, Thread};

/// The kinds whose rounds take locks back.
pub const PREEMPT_KINDS: &[&str] = &["preempt", "preempt-broken"];

/// The highest priority a waiter asks for.
pub const TOP_PRIORITY: u64 = 3;

impl Thread<'_> {
    /// One round of kind `preempt` (or `preempt-broken`).
    pub(crate) fn preempt_round(&mut self, rng: &mut Rng) -> Res<()> {
        let lock = lock_name(rng.range(0, u64::from(self.w.run.locks) - 1) as u32);
        let (p, t) = (self.w.process, self.thread);
        let c = self.clients[0].clone();
        let fenced = c.fenced_lock(&lock);
        let wait = Duration::from_millis(self.w.run.wait_ms);
        let grace = rng.range(100, 300);
        let reason = format!("torture {p}.{t}");
        let broken = self.w.run.kind == "preempt-broken";
        // The broken kind takes locks back more often: a short run must show what it breaks.
        let roll = match rng.range(0, 99) {
            roll if broken && roll >= 60 => rng.range(10, 29),
            roll => roll,
        };
        if roll < 10 {
            if let Err(e) = fenced.request_release(&reason) {
                self.error(&lock, "lock", &e)?;
            }
            thread::sleep(Duration::from_millis(rng.range(0, 50)));
            return Ok(());
        }
        let start = mono_ns();
        let (role, priority, got) = if roll < 30 {
            let (role, grace) = if roll < 25 { ("p", grace) } else { ("s", 0) };
            let got = if broken {
                self.take_unconditionally(&fenced, &reason, grace, wait)
            } else {
                let how = Preempt::with_grace(Duration::from_millis(grace)).reason(&reason);
                fenced.try_preempt_for(&how, wait).map_err(Into::into)
            };
            (role, None, got.map(|g| g.map(|g| (g, grace))))
        } else {
            let priority = rng.range(0, TOP_PRIORITY) as u32;
            let got = fenced.with_priority(priority).try_lock_for(wait);
            (
                "h",
                Some(priority),
                got.map(|g| g.map(|g| (g, 0))).map_err(Into::into),
            )
        };
        let end = mono_ns();
        let (guard, grace) = match got {
            Ok(Some(held)) => held,
            Ok(None) => {
                if let Some(priority) = priority {
                    self.log(format!(
                        "Y\t{p}\t{t}\t{lock}\t{priority}\t{start}\t{end}\t0"
                    ))?;
                }
                return self.log(format!("T\t{p}\t{t}\t{lock}\t{end}"));
            }
            Err(e) => {
                self.error(&lock, "lock", &e)?;
                thread::sleep(Duration::from_millis(20));
                return Ok(());
            }
        };
        let enter = mono_ns();
        if role != "h" && !broken {
            // The forced release this take made, if it made one: logged here too, since a
            // kill takes the lock's log away.
            match fenced.revocations(5) {
                Ok(events) => {
                    let mine = events
                        .iter()
                        .filter(|e| e.event == "forced" && e.by == guard.owner());
                    for e in mine {
                        let token = e.token.map_or("-".to_owned(), |t| t.to_string());
                        self.log(format!("J\t{lock}\tforced\t{}\t{}\t{token}", e.by, e.whom))?;
                    }
                }
                Err(e) => self.error(&lock, "probe", &e)?,
            }
        }
        if let Some(priority) = priority {
            self.log(format!(
                "Y\t{p}\t{t}\t{lock}\t{priority}\t{start}\t{end}\t1"
            ))?;
        }
        let notice = Arc::new(AtomicU64::new(0));
        let lost = Arc::new(AtomicU64::new(0));
        let why = Arc::new(AtomicU8::new(0));
        {
            let notice = Arc::clone(&notice);
            guard.on_revoke(move |_| {
                let _ = notice.compare_exchange(0, mono_ns(), Ordering::AcqRel, Ordering::Acquire);
            });
            let (lost, why) = (Arc::clone(&lost), Arc::clone(&why));
            guard.on_lost(move |reason| {
                why.store(
                    if reason == LostReason::Preempted {
                        1
                    } else {
                        2
                    },
                    Ordering::Release,
                );
                lost.store(mono_ns(), Ordering::Release);
            });
        }
        let honour = rng.range(0, 1) == 0;
        // An honouring holder may work long: it stops when told. One that ignores notices
        // sometimes outlasts its grace and a renewal period after the force.
        let pause = Duration::from_millis(rng.range(0, 1500));
        let token = guard.token().expect("a fenced lock's token");
        // The probe: read for update, work (an honouring holder stops when told, and then
        // writes nothing), write.
        let resource = self.resource.fenced_resource(counter_name(&lock));
        let rstart = mono_ns();
        let probed: Res<(&str, u64, u64)> = match resource.read_for_update(&guard) {
            Err(e) if e.is_stale_token() => Ok(("rej", rstart, mono_ns())),
            Err(e) => Err(e.into()),
            Ok(value) => {
                let value = value.map_or(Ok(0), |v| String::from_utf8_lossy(&v).parse::<i64>());
                let until = std::time::Instant::now() + pause;
                let mut stopped = false;
                while std::time::Instant::now() < until {
                    if honour && notice.load(Ordering::Acquire) != 0 {
                        stopped = true;
                        break;
                    }
                    thread::sleep(Duration::from_millis(1));
                }
                if stopped {
                    Ok(("none", 0, 0))
                } else {
                    let wstart = mono_ns();
                    match resource.write(&guard, (value? + 1).to_string()) {
                        Ok(()) => Ok(("acc", wstart, mono_ns())),
                        Err(e) if e.is_stale_token() => Ok(("rej", wstart, mono_ns())),
                        Err(e) => Err(e.into()),
                    }
                }
            }
        };
        let (write, wstart, wend) = match probed {
            Ok(done) => done,
            Err(e) => {
                self.error(&lock, "probe", &e)?;
                ("err", 0, 0)
            }
        };
        let exit = mono_ns();
        let owner = guard.owner().to_owned();
        let lost_at_exit = guard.is_lost();
        let released = match guard.unlock() {
            Ok(()) => "ok",
            Err(e) if e.is_lock_lost() => "late",
            Err(e) => {
                self.error(&lock, "unlock", &e)?;
                "err"
            }
        };
        let outcome = if lost_at_exit { "lost" } else { released };
        self.log(format!(
            "S\t{p}\t{t}\t{lock}\t{token}\t{enter}\t{exit}\t{outcome}\t{write}\t{wstart}\t{wend}\tx"
        ))?;
        let reason = match why.load(Ordering::Acquire) {
            1 => "preempted",
            2 => "other",
            _ => "-",
        };
        self.log(format!(
            "Z\t{p}\t{t}\t{lock}\t{token}\t{owner}\t{role}\t{}\t{}\t{}\t{reason}\t{grace}",
            u8::from(honour),
            notice.load(Ordering::Acquire),
            lost.load(Ordering::Acquire),
        ))?;
        thread::sleep(Duration::from_micros(rng.range(0, 1000)));
        Ok(())
    }

    /// Kind `preempt-broken`: ask, wait the grace, break the lock whoever holds it, take it.
    fn take_unconditionally(
        &self,
        lock: &redlatch::Lock,
        reason: &str,
        grace: u64,
        wait: Duration,
    ) -> Res<Option<redlatch::LockGuard>> {
        if let Some(guard) = lock.try_lock()? {
            return Ok(Some(guard));
        }
        lock.request_release(reason)?;
        thread::sleep(Duration::from_millis(grace));
        lock.force_unlock()?;
        Ok(lock.try_lock_for(wait)?)
    }
}

/// The `J` lines of `lock`'s log of revocations.
pub fn log_lines(conn: &mut redis::Connection, lock: &str) -> Res<Vec<String>> {
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(format!("redlatch_revokes:{{{lock}}}"))
        .arg("-")
        .arg("+")
        .query(conn)?;
    Ok(entries
        .into_iter()
        .map(|(_, fields)| {
            let get = |k: &str| {
                fields
                    .iter()
                    .find(|(f, _)| f == k)
                    .map_or("", |(_, v)| v.as_str())
                    .replace(['\t', '\n'], " ")
            };
            let token = match get("token") {
                t if t.is_empty() => "-".to_owned(),
                t => t,
            };
            format!(
                "J\t{lock}\t{}\t{}\t{}\t{token}",
                get("event"),
                get("by"),
                get("whom")
            )
        })
        .collect())
}
