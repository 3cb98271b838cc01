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

/// The recorders of this process, with the connections each writes through.
static RECORDERS: Mutex<Vec<(Weak<History>, Weak<Backend>)>> = Mutex::new(Vec::new());

/// Has `history` write its last events through `backend` when the process exits, if both
/// are alive then.
pub(crate) fn flush_at_exit(history: &Arc<History>, backend: &Arc<Backend>) {
    register_handler();
    let mut recorders = RECORDERS.lock();
    recorders.retain(|(h, b)| h.strong_count() > 0 && b.strong_count() > 0);
    recorders.push((Arc::downgrade(history), Arc::downgrade(backend)));
}

/// Writes what every live recorder keeps, within [`EXIT_BOUND`] in all.
fn flush_all() {
    let started = Instant::now();
    let live: Vec<(Arc<History>, Arc<Backend>)> = RECORDERS
        .lock()
        .iter()
        .filter_map(|(h, b)| Some((h.upgrade()?, b.upgrade()?)))
        .collect();
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
