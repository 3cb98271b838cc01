//! Locks: the public [`Lock`] and its guard, the kind-independent protocol steps, and one
//! file per lock kind.
//!
//! - `handle.rs`: [`Lock`], the public blocking API of every kind but acquiring.
//! - `acquire.rs`: [`Lock::lock`] and its `try_` forms, and the one acquire path they take,
//!   which waits through `pubsub::wait` and ends in the guard.
//! - `with.rs`: running a closure under a [`Lock`], released after it whatever it returns.
//! - `guard.rs`: [`LockGuard`], one hold; release, loss signals.
//! - `raw.rs`: what every kind does alike (replica confirmation and undo, the unlock latch and
//!   its safe retry, force unlock, queries), calling the kind.
//! - `key.rs`: the lock as its kind sees it (client, mapped name, the bound on its calls).
//! - `kind.rs`: the [`Kind`](kind::Kind) trait a kind implements, and how its waiters wait.
//! - `plain.rs` (with its non-reentrant and fenced variants), `fair.rs` (and its
//!   non-reentrant variant), `spin.rs`, `group/` (a group's values), `read.rs`, `write.rs` (what the last two share in
//!   `side.rs`; `rw.rs` the read-write lock over them): one kind each, with its scripts, keys
//!   and wait channel (or, for `spin.rs`, its back-off). `fenced.rs`: the stored token.
//! - `quorum.rs`, `multi.rs`, `multi_guard.rs`: [`MultiLock`] and [`RedLock`] over member
//!   locks: the rounds they share, the two public types, their guard.
//! - `set.rs`, `set_guard.rs`: [`LockSet`], many plain locks taken all or none by one script
//!   per slot group, and its guard.
//! - `priority.rs`: waiters with a priority, and its aging.
//! - `revoke.rs`: taking a lock back (a request, a preemption with grace, a steal), and the
//!   holder's side (told by its renewal, unpreemptible sections).
//! - `owner.rs`: who owns a hold: the calling thread, or a [`LockOwner`].
//! - `pass.rs`: hand-overs inside one client, the releaser's side and the waiter's.
//! - `events.rs`: a lock's hold events (acquire, wait, release, loss), named once and sent
//!   to the features that are on.
//! - `settle.rs`: what settles an owner's calls whose reply never came.
//! - `condition/`: [`Condition`], wait and notify on a held lock across processes.
mod acquire;
mod condition;
mod events;
mod fair;
mod fenced;
mod group;
mod guard;
mod handle;
mod key;
mod kind;
mod multi;
mod multi_guard;
mod owner;
mod pass;
mod plain;
pub(crate) mod priority;
mod quorum;
mod raw;
mod read;
mod revoke;
mod rw;
mod set;
mod set_guard;
mod settle;
mod side;
mod spin;
mod with;
mod write;

pub use condition::{Condition, WaitTimeoutResult};
pub(crate) use fair::Fair;
pub(crate) use fenced::parse_token;
pub(crate) use group::Group;
pub use group::ValueCodec;
pub use guard::LockGuard;
pub use handle::Lock;
pub use multi::{MultiLock, RedLock};
pub use multi_guard::MultiLockGuard;
pub(crate) use owner::thread_number;
pub use owner::{LockOwner, Ownership, ThreadOwned};
pub(crate) use plain::Plain;
pub use priority::{MAX_PRIORITY, PRIORITY_AGING};
pub use revoke::{Preempt, RevokeEvent};
pub use rw::ReadWriteLock;
pub use set::LockSet;
pub use set_guard::LockSetGuard;
pub(crate) use spin::Spin;
