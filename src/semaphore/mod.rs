//! Semaphores: the plain one (Redisson's `RSemaphore`, in `plain/`) and the permit-expirable
//! one (in `expirable/`), each split as `lock/` is: a raw protocol (`raw.rs`) under the public
//! handle (`handle.rs`), its acquires (`acquire.rs`) and its guard (`guard.rs`). `shared.rs`
//! holds what both share: the name and permit checks and the wait for permits.

mod expirable;
mod plain;
mod shared;

pub use expirable::{PermitExpirableSemaphore, PermitGuard, PermitId};
pub use plain::{Semaphore, SemaphoreGuard};
