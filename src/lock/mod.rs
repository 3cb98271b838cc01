//! Locks: the raw protocol layer and the typed API over it.

mod guard;
mod multi;
mod raw;
mod reentrant;
mod rw;

pub use guard::LockGuard;
pub use multi::{MultiLock, MultiLockGuard, RedLock};
pub(crate) use raw::{wait_replicas, BatchRenewal, Renewal};
pub use reentrant::Lock;
pub use rw::ReadWriteLock;

pub(crate) use crate::keys::{suffixed, tagged};
