//! The permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`): permits with ids
//! and leases, a permit going back to the semaphore by itself when its lease runs out.
//!
//! - `handle.rs`: [`PermitExpirableSemaphore`], the public API: setting up and changing the
//!   count, reading the counts and leases, releasing permits, updating leases.
//! - `acquire.rs`: the acquires with a fixed lease, by id or as a guard, and the one acquire
//!   path every acquire ends in, which waits through `pubsub::wait`.
//! - `renewed.rs`: the acquires whose permit the watchdog renews, and the renewal it uses.
//! - `guard.rs`: [`PermitGuard`], one permit, released on drop; loss signals when renewed.
//! - `id.rs`: [`PermitId`], a permit's id, and its member in the `{name}:timeout` set.
//! - `raw.rs`: the protocol: the `lua/pes_*.lua` calls, their replies, the acquire attempt.

mod acquire;
mod guard;
mod handle;
mod id;
mod raw;
mod renewed;

pub use guard::PermitGuard;
pub use handle::PermitExpirableSemaphore;
pub use id::PermitId;
