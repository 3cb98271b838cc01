//! Semaphores: the plain one (Redisson's `RSemaphore`) and the permit-expirable one.

mod expirable;

pub use expirable::PermitExpirableSemaphore;
