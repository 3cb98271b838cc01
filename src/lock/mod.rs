//! Locks: the raw protocol layer, one file per lock kind, and the typed API over them.

mod fair;
mod fenced;
mod guard;
mod kind;
mod multi;
mod plain;
mod raw;
mod read;
mod reentrant;
mod rw;
mod write;

pub(crate) use fair::Fair;
pub(crate) use fenced::Fenced;
pub use guard::LockGuard;
pub(crate) use kind::{BatchRenewal, Renewal};
pub use multi::{MultiLock, MultiLockGuard, RedLock};
pub(crate) use plain::Plain;
pub(crate) use raw::wait_replicas;
pub use reentrant::Lock;
pub use rw::ReadWriteLock;
