//! The count-down latch (Redisson's `RCountDownLatch`).

use crate::client::Client;

/// A distributed count-down latch, wire-compatible with Redisson's `RCountDownLatch`.
///
/// Made by [`Client::count_down_latch`]; cheap to clone.
#[derive(Clone)]
pub struct CountDownLatch {
    pub(crate) client: Client,
    pub(crate) name: std::sync::Arc<str>,
}

impl CountDownLatch {
    pub(crate) fn new(client: Client, name: &str) -> CountDownLatch {
        CountDownLatch {
            client,
            name: name.into(),
        }
    }
}
