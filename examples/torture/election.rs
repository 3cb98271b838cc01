//! Kind `election`: each lock is an election. Every thread campaigns (`try_campaign_for` the
//! wait bound), and as leader updates the fenced probe with its term (a read for update, then
//! a write: `Leadership::guard` is the hold the term is the token of), then resigns: the `S`
//! lines of the other kinds, with the term as the token, so the checker's token and fence
//! rules apply. Beside them, each worker process runs one observer per election, logging
//! every leader it yields (`O` lines); the checker (see `election_check.rs`) compares the
//! observers' sequences with the leaders that ran.

use std::fs::File;
use std::io::{LineWriter, Write as _};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redlatch::Client;

use super::{lock_name, mono_ns, Res};

/// Starts an observer of each of `locks` elections, logging to `out` until `deadline`.
pub(crate) fn observers(
    client: &Client,
    process: u32,
    locks: u32,
    deadline: Instant,
    out: &std::sync::Arc<parking_lot::Mutex<LineWriter<File>>>,
) -> Vec<JoinHandle<Res<()>>> {
    (0..locks)
        .map(|i| {
            let (client, out) = (client.clone(), std::sync::Arc::clone(out));
            thread::spawn(move || -> Res<()> {
                let lock = lock_name(i);
                let mut observer = client.election(&lock).observe();
                while Instant::now() < deadline {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match observer.next_timeout(left.min(Duration::from_millis(500))) {
                        Ok(Some(leader)) => {
                            let (term, value, at) = (leader.term, leader.value_str(), mono_ns());
                            writeln!(out.lock(), "O\t{process}\t{lock}\t{term}\t{value}\t{at}")?;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let msg = e.to_string().replace(['\t', '\n'], " ");
                            let at = mono_ns();
                            writeln!(out.lock(), "E\t{process}\t-1\t{lock}\t{at}\tobserve\t{msg}")?;
                            // A dead server fails at once: do not spin.
                            thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
                Ok(())
            })
        })
        .collect()
}
