//! What an acquire whose reply never came hands the watchdog (see `doubt.rs`): the
//! [`Settle`] that gives back what it may have taken, what a settle is told
//! ([`Unsettled`]) and what it did ([`Settled`]), and the [`Doubt`] kept for each hold.

use std::time::Instant;

use crate::error::Result;

/// What settles acquires in doubt on one hold, given what is known when it runs.
pub(crate) type Settle = Box<dyn FnMut(Unsettled) -> Result<Settled> + Send>;

/// What a [`Settle`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Settled: the doubt is over.
    Done,
    /// Nothing found yet, where a command delayed on the way could still arrive: look again
    /// later (as after a failure, without its log line), a few times.
    LookAgain,
}

/// What a [`Settle`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsettled {
    /// Acquires in doubt: each may have taken one hold.
    pub(crate) acquires: u32,
    /// The holds of this name and field the client's guards have (renewed by the watchdog).
    pub(crate) known_holds: u32,
    /// Run by the owner's next call, which waits for the server as any of its calls does;
    /// else on the watchdog thread, whose calls must be short.
    pub(crate) by_owner: bool,
}

/// The acquires in doubt on one hold (a lock name and hash field): `doubt.rs` adds, settles
/// and counts them.
pub(super) struct Doubt {
    pub(super) acquires: u32,
    /// `None` while a thread runs it.
    pub(super) settle: Option<Settle>,
    /// When the watchdog thread tries it next.
    pub(super) next_try: Instant,
    /// Failed tries so far.
    pub(super) failures: u32,
}
