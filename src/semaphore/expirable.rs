//! The permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`).

use crate::client::Client;

/// A distributed semaphore whose permits carry ids and leases, wire-compatible with
/// Redisson's `RPermitExpirableSemaphore`.
///
/// Made by [`Client::permit_expirable_semaphore`]; cheap to clone.
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(crate) client: Client,
    pub(crate) name: std::sync::Arc<str>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: Client, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            client,
            name: name.into(),
        }
    }
}
