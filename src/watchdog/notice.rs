//! What a holder is told of a revocation: the [`Revocation`] its renewal found (who asked, why,
//! whether the hold will be released by force), kept with the hold's lease, and the
//! `on_revoke` callbacks that hear of it. The renewal that finds the request tells the
//! watchdog; the watchdog reads the record and tells the guards, outside its state lock.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// A request to release a held lock, as its holder is told of it
/// ([`LockGuard::revocation`](crate::LockGuard::revocation),
/// [`LockGuard::on_revoke`](crate::LockGuard::on_revoke)).
///
/// See the guide's [revocation chapter](crate::_guide::revocation).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Revocation {
    /// Who asked: a preemptor's owner id (`<client id>:<thread>`), or the name an operator
    /// gave.
    pub by: String,
    /// The holder it is for (the owner id of the hold).
    pub whom: String,
    /// Why, as the asker gave it (may be empty).
    pub reason: String,
    /// The time the holder has, once told, before its hold is released by force; `None` for a
    /// request that is never enforced; zero for a steal.
    pub grace: Option<Duration>,
    /// The fencing token of the hold it is for (a fenced lock).
    pub token: Option<u64>,
    /// Whether the hold was released by force (the guard reports it lost:
    /// [`LostReason::Preempted`](crate::LostReason::Preempted)).
    pub forced: bool,
}

impl Revocation {
    /// The record `fields` (HGETALL of `redlatch_revoke:{name}`), if it names a request.
    pub(crate) fn from_record(fields: &HashMap<String, String>) -> Option<Revocation> {
        let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
        let by = fields.get("by")?.clone();
        let grace = get("grace")
            .parse::<i64>()
            .ok()
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        Some(Revocation {
            by,
            whom: get("victim"),
            reason: get("reason"),
            grace,
            token: get("token").parse().ok(),
            forced: fields.contains_key("forced"),
        })
    }
}

/// An `on_revoke` callback.
pub(crate) type NoticeCallback = Box<dyn FnOnce(&Revocation) + Send>;

/// What a hold's lease keeps of a revocation: boxed, as few holds ever hear of one.
#[derive(Default)]
pub(crate) struct Notice(Mutex<Option<Box<Told>>>);

#[derive(Default)]
struct Told {
    /// Set once the record was read.
    revocation: Option<Arc<Revocation>>,
    /// Whether the watchdog saw the request (the record is read next).
    seen: bool,
    callbacks: Vec<NoticeCallback>,
}

impl Notice {
    /// The revocation the holder was told of, once read.
    pub(crate) fn revocation(&self) -> Option<Arc<Revocation>> {
        self.0.lock().as_ref().and_then(|t| t.revocation.clone())
    }

    /// Whether a renewal found a request for this hold.
    pub(crate) fn is_revoked(&self) -> bool {
        self.0.lock().as_ref().is_some_and(|t| t.seen)
    }

    /// Records that a renewal found a request; true the first time (the record is to be read).
    pub(crate) fn see(&self) -> bool {
        let mut told = self.0.lock();
        let told = told.get_or_insert_with(Default::default);
        !std::mem::replace(&mut told.seen, true)
    }

    /// Keeps `f` for the revocation, or calls it at once if it is known.
    pub(crate) fn on_revoke(&self, name: &str, f: NoticeCallback) {
        let known = {
            let mut told = self.0.lock();
            let told = told.get_or_insert_with(Default::default);
            match &told.revocation {
                Some(r) => Some(Arc::clone(r)),
                None => {
                    told.callbacks.push(f);
                    return;
                }
            }
        };
        if let Some(r) = known {
            call_told(f, &r, name);
        }
    }

    /// The record was read: keeps it and runs the callbacks (on the calling thread).
    pub(crate) fn tell(&self, name: &str, revocation: Revocation) {
        let revocation = Arc::new(revocation);
        let callbacks = {
            let mut told = self.0.lock();
            let told = told.get_or_insert_with(Default::default);
            told.seen = true;
            told.revocation = Some(Arc::clone(&revocation));
            std::mem::take(&mut told.callbacks)
        };
        for f in callbacks {
            call_told(f, &revocation, name);
        }
    }

    /// Drops the callbacks (the guard let go).
    pub(crate) fn forget_callbacks(&self) {
        if let Some(told) = self.0.lock().as_mut() {
            told.callbacks.clear();
        }
    }
}

/// Runs one `on_revoke` callback, catching (and logging) a panic.
fn call_told(f: NoticeCallback, revocation: &Revocation, name: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || f(revocation))) {
        let what = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string payload");
        log::warn!("an on_revoke callback of lock `{name}` panicked: {what}");
    }
}
