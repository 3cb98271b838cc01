//! Kind `condition`: each lock guards a bounded buffer of `--permits` items (a LIST on the
//! resource server, which is never faulted), with the lock's conditions `not_full` and
//! `not_empty`. Even threads produce, odd ones consume: under the lock, a producer waits on
//! `not_full` while the buffer is full, pushes an item and notifies `not_empty`; a consumer
//! waits on `not_empty` while it is empty, pops one and notifies `not_full`.
//!
//! Logged beside the `S` lines (one per span the lock is held: a wait ends one and starts
//! the next): `B` for each item put or taken, with the buffer's length after a put; `W` for
//! each wait, with how it ended. The checker (see `check.rs`) finds items lost or taken twice,
//! a buffer over its capacity, and consumers that waited while an item sat unclaimed for
//! longer than two leases.

use std::time::Duration;

use super::{mono_ns, Res, Thread};

/// The buffer of `lock`, on the resource server.
pub(crate) fn buffer_name(lock: &str) -> String {
    format!("{lock}:buffer")
}

impl Thread<'_> {
    /// One turn of a producer (`produce`) or consumer on `lock`'s buffer; `made` numbers a
    /// producer's items.
    pub(crate) fn condition_cycle(&mut self, lock: &str, produce: bool, made: &mut u64) -> Res<()> {
        let wait = Duration::from_millis(self.w.run.wait_ms);
        let (p, t) = (self.w.process, self.thread);
        let handle = self.clients[0].lock(lock);
        let mut guard = match handle.try_lock_for(wait) {
            Ok(Some(guard)) => guard,
            Ok(None) => return self.log(format!("T\t{p}\t{t}\t{lock}\t{}", mono_ns())),
            Err(e) => {
                self.error(lock, "lock", &e)?;
                std::thread::sleep(Duration::from_millis(20));
                return Ok(());
            }
        };
        let (mine, theirs, role) = if produce {
            ("not_full", "not_empty", "p")
        } else {
            ("not_empty", "not_full", "c")
        };
        let buffer = buffer_name(lock);
        let capacity = self.w.run.permits as usize;
        let mut enter = mono_ns();
        // Wait until this thread can act; false: it gave up (timeout or error).
        let ready = loop {
            let len: usize = match redis::cmd("LLEN").arg(&buffer).query(&mut self.probe) {
                Ok(len) => len,
                Err(e) => {
                    self.error(lock, "probe", &e)?;
                    break false;
                }
            };
            if (produce && len < capacity) || (!produce && len > 0) {
                break true;
            }
            self.span(lock, enter, if guard.is_lost() { "lost" } else { "ok" })?;
            let start = mono_ns();
            let waited = handle.condition(mine).wait_for(&mut guard, wait);
            let end = mono_ns();
            enter = end;
            match waited {
                Ok(w) if w.timed_out() => {
                    self.log(format!("W\t{p}\t{t}\t{lock}\t{role}\t{start}\t{end}\tt"))?;
                    break false;
                }
                Ok(_) => self.log(format!("W\t{p}\t{t}\t{lock}\t{role}\t{start}\t{end}\tn"))?,
                Err(e) => {
                    self.log(format!("W\t{p}\t{t}\t{lock}\t{role}\t{start}\t{end}\te"))?;
                    self.error(lock, "wait", &e)?;
                    if guard.is_lost() {
                        // Not held again: nothing to release, no span to log.
                        return Ok(());
                    }
                    break false;
                }
            }
        };
        if ready {
            self.act(lock, &buffer, produce, made)?;
            if let Err(e) = handle.condition(theirs).notify_one() {
                self.error(lock, "notify", &e)?;
            }
        }
        let exit = mono_ns();
        let lost = guard.is_lost();
        let released = self.release(lock, super::Held::Guard(guard))?;
        let outcome = if lost { "lost" } else { released };
        self.span_until(lock, enter, exit, outcome)
    }

    /// Puts an item (logging the buffer's length after it) or takes one.
    fn act(&mut self, lock: &str, buffer: &str, produce: bool, made: &mut u64) -> Res<()> {
        let (p, t) = (self.w.process, self.thread);
        if produce {
            let item = format!("{p}.{t}.{made}");
            *made += 1;
            match redis::cmd("RPUSH")
                .arg(buffer)
                .arg(&item)
                .query::<usize>(&mut self.probe)
            {
                Ok(len) => self.log(format!(
                    "B\t{p}\t{t}\t{lock}\tput\t{item}\t{}\t{len}",
                    mono_ns()
                )),
                Err(e) => self.error(lock, "probe", &e),
            }
        } else {
            match redis::cmd("LPOP")
                .arg(buffer)
                .query::<Option<String>>(&mut self.probe)
            {
                Ok(Some(item)) => self.log(format!(
                    "B\t{p}\t{t}\t{lock}\ttake\t{item}\t{}\t0",
                    mono_ns()
                )),
                // Empty although it was not a moment ago under the lock: an overlap.
                Ok(None) => self.error(lock, "probe", "the buffer emptied under the lock"),
                Err(e) => self.error(lock, "probe", &e),
            }
        }
    }

    /// An `S` line for a span held from `enter` until now that ends in a wait.
    fn span(&self, lock: &str, enter: u64, outcome: &str) -> Res<()> {
        self.span_until(lock, enter, mono_ns(), outcome)
    }

    fn span_until(&self, lock: &str, enter: u64, exit: u64, outcome: &str) -> Res<()> {
        let (p, t) = (self.w.process, self.thread);
        self.log(format!(
            "S\t{p}\t{t}\t{lock}\t-\t{enter}\t{exit}\t{outcome}\tnone\t0\t0\tx"
        ))
    }
}
