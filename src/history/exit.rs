//! The last events of a process that ends without closing its clients: `main` returns (or
//! `std::process::exit` is called) while other threads still hold client handles, so no
//! client is dropped and its watchdog thread, which flushes once a second, is stopped
//! mid-sleep. Each recorder is registered here, weakly; at the process's exit (a C `atexit`
//! handler, Unix only) the live ones write what they still keep, each within its write
//! bound, all within [`EXIT_BOUND`]. What an abrupt end (a signal, an abort) loses is the
//! events of the last flush period, [`FLUSH_EVERY`](super::FLUSH_EVERY).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::History;
use crate::backend::Backend;

/// The most time the exit's writes take, over all recorders.
const EXIT_BOUND: Duration = Duration::from_secs(2);

/// A recorder, the connections it writes through, and the process that made it.
struct Recorder {
    history: Weak<History>,
    backend: Weak<Backend>,
    pid: u32,
}

/// The recorders of this process.
static RECORDERS: Mutex<Vec<Recorder>> = Mutex::new(Vec::new());

/// Has `history` write its last events through `backend` when the process exits, if both
/// are alive then.
pub(crate) fn flush_at_exit(history: &Arc<History>, backend: &Arc<Backend>) {
    register_handler();
    let mut recorders = RECORDERS.lock();
    recorders.retain(|r| r.history.strong_count() > 0 && r.backend.strong_count() > 0);
    recorders.push(Recorder {
        history: Arc::downgrade(history),
        backend: Arc::downgrade(backend),
        pid: std::process::id(),
    });
}

/// Writes what every live recorder keeps, within [`EXIT_BOUND`] in all. A child forked
/// without `exec` leaves its parent's recorders alone (their locks may have been held by a
/// thread the fork did not copy, their connections are the parent's).
fn flush_all() {
    let started = Instant::now();
    let Some(recorders) = RECORDERS.try_lock_for(Duration::from_millis(100)) else {
        return;
    };
    let pid = std::process::id();
    let live: Vec<(Arc<History>, Arc<Backend>)> = recorders
        .iter()
        .filter(|r| r.pid == pid)
        .filter_map(|r| Some((r.history.upgrade()?, r.backend.upgrade()?)))
        .collect();
    drop(recorders);
    for (history, backend) in live {
        if started.elapsed() >= EXIT_BOUND {
            log::debug!("history: the exit's time is up; later events are not written");
            break;
        }
        history.flush(&backend);
    }
}

#[cfg(unix)]
fn register_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn at_exit() {
        // A panic must not unwind into C.
        let _ = std::panic::catch_unwind(flush_all);
    }
    ONCE.call_once(|| {
        // SAFETY: `at_exit` is a plain function with no arguments, as `atexit` expects; it
        // catches every panic, and touches nothing that the exit tears down (Rust runs no
        // destructor of statics, and other threads go on until the handlers return).
        let failed = unsafe { libc::atexit(at_exit) } != 0;
        if failed {
            log::debug!("history: no exit handler; an exit may lose the last second of events");
        }
    });
}

#[cfg(not(unix))]
fn register_handler() {}
