//! A connection checked out of a pool ([`Held`]), its place in the pool's count
//! ([`Counted`], given back even when its thread unwinds), and the count itself ([`Slots`]),
//! and what a pool lends its batcher's lanes ([`Lender`]).

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::Error;

/// What a [`Batcher`](super::batch::Batcher)'s lanes borrow connections from: their pool.
pub(super) trait Lender: Sync {
    /// A connection for a batch's round trip.
    fn checkout_shared(&self) -> std::result::Result<Held, (Error, bool)>;
    /// Gives back a connection that is still good.
    fn checkin(&self, held: Held);
    /// Drops a connection that broke, and the idle ones.
    fn discard(&self, held: Held);
    /// Whether the pool is closed: nothing more goes out.
    fn is_closed(&self) -> bool;
}

/// A connection checked out of a pool, with the generation it was opened in.
pub(crate) struct Held {
    pub(super) conn: redis::Connection,
    pub(super) generation: u64,
    pub(super) counted: Counted,
}

/// A checked-out connection's place in its pool's count: given back by [`Pool::checkin`] or
/// [`Pool::discard`], or, when a thread unwinds with the connection (a panic: a bug here or
/// in a dependency), when it is dropped, so that the pool may open another. Without it each
/// such panic would shrink the pool by one for good, and a pool of one would be dead.
pub(super) struct Counted(pub(super) Option<Arc<Slots>>);

impl Counted {
    /// Accounted for by the caller.
    pub(super) fn settle(mut self) {
        self.0 = None;
    }

    /// The connection does not exist (it could not be opened): one more may be.
    pub(super) fn give_back(mut self) {
        if let Some(slots) = self.0.take() {
            slots.closed_one();
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(slots) = self.0.take() {
            if std::thread::panicking() {
                log::debug!("a pooled connection was dropped while its thread unwound");
            } else {
                // Every path but unwinding checks a connection in or discards it.
                debug_assert!(
                    false,
                    "a pooled connection dropped without checkin or discard"
                );
                log::warn!("a pooled connection was dropped without checkin or discard");
            }
            slots.closed_one();
        }
    }
}

/// What a pool knows of its connections, and who waits for one to be freed.
pub(super) struct Slots {
    pub(super) state: Mutex<State>,
    pub(super) freed: Condvar,
}

impl Slots {
    /// One connection fewer exists: one more may be opened.
    pub(super) fn closed_one(&self) {
        self.state.lock().open -= 1;
        self.freed.notify_one();
    }
}

pub(super) struct State {
    /// Set by [`Pool::close`]: connections checked in are closed, not kept.
    pub(super) closed: bool,
    /// Idle connections with the endpoint generation they were opened in.
    pub(super) idle: Vec<(redis::Connection, u64)>,
    /// Connections that exist: idle plus checked out plus being opened.
    pub(super) open: usize,
    /// How often the connections were all dropped after `READONLY` (see
    /// [`Pool::generation`]).
    pub(super) flushes: u64,
}
