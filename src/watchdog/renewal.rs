//! What an owner hands the watchdog for a hold: a [`Renewal`] (the hold's field and its batch
//! script), and the [`BatchRenewal`] scripts that renew many holds in one call. Each lock kind
//! and the permit-expirable semaphore define their own; the watchdog groups holds by them.

use std::sync::{Arc, LazyLock};

use redis::ScriptInvocation;

use crate::scripts;

/// What the watchdog renews for a held lock: the hold's hash field (what tells the holds of
/// one lock apart), and the batch script that renews it.
pub(crate) struct Renewal {
    /// The hash field of the hold: the owner id, or `<owner>:write` for a write hold.
    pub(crate) field: Arc<str>,
    pub(crate) batch: &'static BatchRenewal,
}

/// A script that renews many holds in one call: ARGV[1] is the lease in ms, and each hold
/// adds its own keys and arguments in turn. The watchdog groups holds by it.
pub(crate) struct BatchRenewal {
    pub(crate) script: &'static LazyLock<scripts::Lua>,
    /// Adds one hold of lock `name`, hash field `field`, to the call.
    pub(crate) add: fn(call: &mut ScriptInvocation<'_>, name: &str, field: &str),
    /// Whether what it renews is a hold (of a lock or a permit), whose loss is logged and
    /// counted as one; false for a waiter's bookkeeping (a condition waiter's place, a wait
    /// record), which ends with its wait.
    pub(crate) holds: bool,
    /// Whether what it renews has a lease, which runs out on the client's clock while the
    /// calls fail; false for a hold with none, which the script only checks (a plain
    /// semaphore's permits: failing calls are retried for as long as it takes).
    pub(crate) leased: bool,
}
