//! Every key of a deployment matching a pattern: `SCAN` on every master (never `KEYS`), for
//! the operator's views (`list`, `waits`, lock-order warnings, history).

use std::collections::BTreeSet;

use super::{Backend, Policy};
use crate::error::Result;

/// Keys asked for per `SCAN` call.
const SCAN_COUNT: usize = 1000;

impl Backend {
    /// The keys matching the glob `pattern` on every master, in byte order; keys that are not
    /// UTF-8 are skipped (and logged at debug).
    pub(crate) fn scan(&self, pattern: &str) -> Result<BTreeSet<String>> {
        let mut keys = BTreeSet::new();
        self.for_each_master(|pool| {
            let mut cursor = 0u64;
            loop {
                let (next, page): (u64, Vec<Vec<u8>>) =
                    pool.run(pattern, Policy::Retried, |c| {
                        redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(SCAN_COUNT)
                            .query(c)
                    })?;
                for key in page {
                    match String::from_utf8(key) {
                        Ok(key) => {
                            keys.insert(key);
                        }
                        Err(e) => log::debug!(
                            "scan: skipping a key that is not UTF-8: {:?}",
                            String::from_utf8_lossy(e.as_bytes())
                        ),
                    }
                }
                if next == 0 {
                    return Ok(());
                }
                cursor = next;
            }
        })?;
        Ok(keys)
    }
}
