//! Re-reads of the slot map: one at a time, shared by the callers that found it stale, asking
//! the nodes most likely to answer first.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Slot-map refreshes, one at a time. A caller notes [`mark`](Self::mark) when it learns the
/// map is stale (a redirect, a node that cannot be reached) and then asks for a refresh
/// [`after`](Self::after) that mark: if another one began since, that one read the map after
/// the caller's news and serves it too. So N threads redirected at once wait for one read of
/// the map, not N in a row.
///
/// "Began", not "ended": a refresh already running when the caller got its redirect may
/// have read the map before the change the redirect reports.
pub(super) struct Refreshes {
    /// How many refreshes have begun; only bumped with `running` held.
    pub(super) begun: AtomicU64,
    /// Held while a refresh runs; what the last one found.
    pub(super) running: Mutex<LastRefresh>,
}

#[derive(Default)]
pub(super) struct LastRefresh {
    /// The node (`host:port`) the last good refresh read the map from: asked first next time.
    pub(super) source: Option<String>,
    /// Why the last refresh failed; `None` if it succeeded or none ran yet.
    pub(super) error: Option<String>,
}

impl Refreshes {
    pub(super) fn new() -> Refreshes {
        Refreshes {
            begun: AtomicU64::new(0),
            running: Mutex::new(LastRefresh::default()),
        }
    }

    /// The mark to pass to [`after`](Self::after), taken when the caller learns that the map
    /// is stale (before it waits for any refresh).
    pub(super) fn mark(&self) -> u64 {
        self.begun.load(Ordering::Acquire)
    }

    /// Runs `refresh` (which says why it failed), unless a refresh began after `seen` was
    /// marked: that one has ended by now (they run one at a time), and its outcome is this
    /// caller's too.
    pub(super) fn after(
        &self,
        seen: u64,
        refresh: impl FnOnce(&mut LastRefresh) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let mut last = self.running.lock();
        if self.begun.load(Ordering::Acquire) == seen {
            self.begun.fetch_add(1, Ordering::AcqRel);
            last.error = refresh(&mut last).err();
        }
        match &last.error {
            None => Ok(()),
            Some(why) => Err(not_connected(why.clone())),
        }
    }
}

/// The order in which a refresh asks the candidate nodes `(host:port, info, serves slots)`
/// for the map, each address once: the node the last refresh read it from (`last`), then the
/// masters of the current map, then the other known nodes and the seeds (which may be
/// replicas, or masters that failed over); but any whose last attempt failed come after all
/// the others (ranked among themselves the same way), so that a dead master costs a connect
/// timeout only when nothing else answers.
pub(super) fn by_preference<T>(
    candidates: Vec<(String, T, bool)>,
    last: Option<&str>,
    failed: &HashSet<String>,
) -> Vec<(String, T)> {
    let mut listed = HashSet::new();
    let mut candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(addr, _, _)| listed.insert(addr.clone()))
        .collect();
    // Stable: the order of nodes within a rank is kept.
    candidates.sort_by_key(|(addr, _, master)| {
        (failed.contains(addr), Some(addr.as_str()) != last, !master)
    });
    candidates
        .into_iter()
        .map(|(addr, info, _)| (addr, info))
        .collect()
}

/// A connection-class error for "no node to send this to".
pub(super) fn not_connected(why: String) -> Error {
    Error::Connection(std::io::Error::new(std::io::ErrorKind::NotConnected, why).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_that_noticed_a_stale_map_before_a_refresh_began_share_it() {
        let refreshes = Refreshes::new();
        let runs = std::sync::atomic::AtomicUsize::new(0);
        let refresh = |_: &mut LastRefresh| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let (a, b) = (refreshes.mark(), refreshes.mark());
        refreshes.after(a, refresh).unwrap();
        refreshes.after(b, refresh).unwrap(); // b noticed before a's refresh began
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let c = refreshes.mark(); // news after that refresh began: a new one
        refreshes.after(c, refresh).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);

        // 16 threads that all noticed before any refresh began: one refresh between them,
        // whose failure each of them sees.
        let threads = 16;
        let noticed = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let seen = refreshes.mark();
                    noticed.wait();
                    let outcome = refreshes.after(seen, |_| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        Err("no node answers".into())
                    });
                    assert!(outcome.unwrap_err().is_connection());
                });
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn refresh_asks_the_last_source_then_masters_then_the_rest_and_failed_nodes_last() {
        let candidates = |list: &[(&str, bool)]| {
            list.iter()
                .map(|&(addr, master)| (addr.to_owned(), (), master))
                .collect::<Vec<_>>()
        };
        let order = |list, last, failed: &[&str]| {
            let failed = failed.iter().map(|f| f.to_string()).collect();
            by_preference(candidates(list), last, &failed)
                .into_iter()
                .map(|(addr, ())| addr)
                .collect::<Vec<_>>()
        };
        // Known nodes (the old master :1 no longer serves slots), then seeds.
        let list = [
            ("h:1", false),
            ("h:2", true),
            ("h:3", true),
            ("h:4", true),
            ("h:1", false),
            ("h:5", false),
        ];
        assert_eq!(order(&list, None, &[]), ["h:2", "h:3", "h:4", "h:1", "h:5"]);
        assert_eq!(
            order(&list, Some("h:3"), &[]),
            ["h:3", "h:2", "h:4", "h:1", "h:5"]
        );
        // The last source failed since, and so did a master: both go last, ranked alike.
        assert_eq!(
            order(&list, Some("h:3"), &["h:3", "h:2"]),
            ["h:4", "h:1", "h:5", "h:3", "h:2"]
        );
    }
}
