//! Locks: the public [`Lock`] and its guard, the kind-independent protocol steps, and one
//! file per lock kind.
//!
//! - `handle.rs`: [`Lock`], the public blocking API of every kind; its one acquire path
//!   waits through `pubsub::wait` and ends in the guard.
//! - `guard.rs`: [`LockGuard`], one hold; release, loss signals.
//! - `raw.rs`: what every kind does alike (replica confirmation and undo, the unlock latch and
//!   its safe retry, force unlock, queries), calling the kind.
//! - `kind.rs`: the [`Kind`](kind::Kind) trait a kind implements, and the renewal it hands
//!   the watchdog.
//! - `plain.rs`, `fair.rs`, `fenced.rs`, `spin.rs`, `read.rs`, `write.rs` (and `rw.rs`, the
//!   read-write lock over the last two): one kind each, with its scripts, keys and wait
//!   channel (or, for `spin.rs`, its back-off).
//! - `nonreentrant.rs`: the plain and fair kinds, refusing an owner's second acquire.
//! - `multi.rs`: [`MultiLock`] and [`RedLock`], over member locks.
//! - `owner.rs`: who owns a hold: the calling thread, or a [`LockOwner`].

mod fair;
mod fenced;
mod guard;
mod handle;
mod key;
mod kind;
mod multi;
mod multi_guard;
mod nonreentrant;
mod owner;
mod plain;
mod quorum;
mod raw;
mod read;
mod rw;
mod side;
mod spin;
mod write;

pub(crate) use fair::Fair;
pub(crate) use fenced::{parse_token, Fenced};
pub use guard::LockGuard;
pub use handle::Lock;
pub use multi::{MultiLock, RedLock};
pub use multi_guard::MultiLockGuard;
pub(crate) use nonreentrant::{NonReentrant, NonReentrantFair};
pub(crate) use owner::thread_number;
pub use owner::{LockOwner, Ownership, ThreadOwned};
pub(crate) use plain::Plain;
pub use rw::ReadWriteLock;
pub(crate) use spin::Spin;
