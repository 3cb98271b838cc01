//! The plain semaphore (Redisson's `RSemaphore`): a count of permits in Redis that nobody
//! owns.
//!
//! - `handle.rs`: [`Semaphore`], the public API: setting up and changing the count, reading
//!   it, releasing permits.
//! - `acquire.rs`: every acquire, by count or as a guard, and the one acquire path they end
//!   in, which waits through `pubsub::wait`.
//! - `guard.rs`: [`SemaphoreGuard`], permits given back on drop.
//! - `raw.rs`: the protocol: the `lua/semaphore_*.lua` calls, the count read, the acquire
//!   attempt.

mod acquire;
mod guard;
mod handle;
mod raw;

pub use guard::SemaphoreGuard;
pub use handle::Semaphore;
