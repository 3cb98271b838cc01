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
    /// What the record `fields` (HGETALL of `redlatch_revoke:{name}`) says to `owner`: the
    /// request for its hold, or that its hold was released by force (`forced:<owner>`, kept
    /// when a later request replaced the record: then only who did it is known).
    pub(crate) fn from_record(fields: &HashMap<String, String>, owner: &str) -> Option<Revocation> {
        let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
        if fields.get("victim").map(String::as_str) != Some(owner) {
            let by = fields.get(&format!("forced:{owner}"))?.clone();
            return Some(Revocation {
                by,
                whom: owner.to_owned(),
                reason: String::new(),
                grace: None,
                token: None,
                forced: true,
            });
        }
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
            forced: fields.contains_key(&format!("forced:{owner}")),
        })
    }
}

/// An `on_revoke` callback: called for each request the holder is told of.
pub(crate) type NoticeCallback = Box<dyn FnMut(&Revocation) + Send>;

/// What a hold's lease keeps of a revocation: boxed, as few holds ever hear of one.
#[derive(Default)]
pub(crate) struct Notice(Mutex<Option<Box<Told>>>);

#[derive(Default)]
struct Told {
    /// The latest request read.
    revocation: Option<Arc<Revocation>>,
    /// Whether a renewal found a request (the record is read next).
    seen: bool,
    /// The request (its time, server ms) whose record was read last.
    read: Option<u64>,
    callbacks: Vec<NoticeCallback>,
    /// The guard let go: callbacks taken out to run are not put back.
    dropped: bool,
}

impl Notice {
    /// The revocation the holder was told of last, once read.
    pub(crate) fn revocation(&self) -> Option<Arc<Revocation>> {
        self.0.lock().as_ref().and_then(|t| t.revocation.clone())
    }

    /// Whether a renewal found a request for this hold.
    pub(crate) fn is_revoked(&self) -> bool {
        self.0.lock().as_ref().is_some_and(|t| t.seen)
    }

    /// Records that a renewal found the request made at `at` (`None`: the hold released by
    /// force); true when its record is to be read (not read yet, or a read that failed).
    pub(crate) fn see(&self, at: Option<u64>) -> bool {
        let mut told = self.0.lock();
        let told = told.get_or_insert_with(Default::default);
        told.seen = true;
        at.is_none() || told.read != at
    }

    /// Keeps `f` for the requests to come, calling it at once with the latest one if the
    /// holder was told of one already (outside the lock: `f` may read the guard).
    pub(crate) fn on_revoke(&self, name: &str, mut f: NoticeCallback) {
        let known = self.revocation();
        if let Some(r) = known {
            call_told(&mut f, &r, name);
        }
        let mut told = self.0.lock();
        let told = told.get_or_insert_with(Default::default);
        if !told.dropped {
            told.callbacks.push(f);
        }
    }

    /// The record of the request made at `at` was read: keeps it (the latest replaces an
    /// earlier one) and runs the callbacks, on the calling thread and outside the lock.
    pub(crate) fn tell(&self, name: &str, revocation: Revocation, at: Option<u64>) {
        let revocation = Arc::new(revocation);
        let mut callbacks = {
            let mut told = self.0.lock();
            let told = told.get_or_insert_with(Default::default);
            told.seen = true;
            if at.is_some() {
                told.read = at;
            }
            told.revocation = Some(Arc::clone(&revocation));
            std::mem::take(&mut told.callbacks)
        };
        for f in &mut callbacks {
            call_told(f, &revocation, name);
        }
        let mut told = self.0.lock();
        if let Some(told) = told.as_mut().filter(|t| !t.dropped) {
            // Registered meanwhile: after these, in order.
            callbacks.append(&mut told.callbacks);
            told.callbacks = callbacks;
        }
    }

    /// Drops the callbacks (the guard let go), and any that are running once they return.
    pub(crate) fn forget_callbacks(&self) {
        if let Some(told) = self.0.lock().as_mut() {
            told.callbacks.clear();
            told.dropped = true;
        }
    }
}

/// Runs one `on_revoke` callback, catching (and logging) a panic.
fn call_told(f: &mut NoticeCallback, revocation: &Revocation, name: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(revocation))) {
        let what = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string payload");
        log::warn!("an on_revoke callback of lock `{name}` panicked: {what}");
    }
}
