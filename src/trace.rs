//! Spans and events for the `tracing` feature, in one place: an acquire (its wait inside it),
//! a wait, a release and a batch of renewals are spans, with the fields `name`, `kind`,
//! `outcome`, `waited_ms`, `hold_count` and `lease_ms` where they apply; a lost hold is a
//! `warn` event. Spans are at `debug` level, so that a service that keeps `info` pays nothing
//! for them. Without the feature, [`Span`] is empty and every call here does nothing.

use std::time::Duration;

/// A span, or nothing without the `tracing` feature.
pub(crate) struct Span {
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

/// While alive, the span is the thread's current one (the parent of spans begun meanwhile).
pub(crate) struct Entered<'a> {
    #[cfg(feature = "tracing")]
    _entered: tracing::span::Entered<'a>,
    #[cfg(not(feature = "tracing"))]
    _span: std::marker::PhantomData<&'a Span>,
}

#[cfg(feature = "tracing")]
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Span {
    /// One acquire: of a lock `kind` (`plain`, `fair`, ..., or `semaphore`,
    /// `expirable semaphore`), with its explicit lease if any.
    #[allow(unused_variables)]
    pub(crate) fn acquire(kind: &'static str, name: &str, lease: Option<Duration>) -> Span {
        Span {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!(
                "redlatch.acquire",
                name,
                kind,
                lease_ms = lease.map(ms),
                outcome = tracing::field::Empty,
                waited_ms = tracing::field::Empty,
                hold_count = tracing::field::Empty,
            ),
        }
    }

    /// The blocking part of an acquire (inside its span): until woken for good, the deadline,
    /// or an error.
    #[allow(unused_variables)]
    pub(crate) fn wait(channel: &str) -> Span {
        Span {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!("redlatch.wait", channel, outcome = tracing::field::Empty),
        }
    }

    /// One release of a hold of a lock `kind`.
    #[allow(unused_variables)]
    pub(crate) fn release(kind: &'static str, name: &str) -> Span {
        Span {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!(
                "redlatch.release",
                name,
                kind,
                outcome = tracing::field::Empty
            ),
        }
    }

    /// One batch of watchdog renewals, `holds` of them.
    #[allow(unused_variables)]
    pub(crate) fn renewal(holds: usize, lease: Duration) -> Span {
        Span {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!(
                "redlatch.renewal",
                holds,
                lease_ms = ms(lease),
                renewed = tracing::field::Empty,
                failed = tracing::field::Empty,
            ),
        }
    }

    /// Makes this the thread's current span until the returned value is dropped.
    pub(crate) fn enter(&self) -> Entered<'_> {
        Entered {
            #[cfg(feature = "tracing")]
            _entered: self.span.enter(),
            #[cfg(not(feature = "tracing"))]
            _span: std::marker::PhantomData,
        }
    }

    /// How the span's call ended: `acquired`, `timed_out`, `busy` (a try that did not wait),
    /// `error`, `released`, `still_held`, `not_held`, `woken`, ...
    #[allow(unused_variables)]
    pub(crate) fn outcome(&self, outcome: &'static str) {
        #[cfg(feature = "tracing")]
        self.span.record("outcome", outcome);
    }

    /// An acquire's result: the hold count now (the permits taken, for a semaphore) and how
    /// long the call took.
    #[allow(unused_variables)]
    pub(crate) fn acquired(&self, hold_count: u32, waited: Duration) {
        #[cfg(feature = "tracing")]
        {
            self.span.record("outcome", "acquired");
            self.span.record("hold_count", hold_count);
            self.span.record("waited_ms", ms(waited));
        }
    }

    /// An acquire that did not acquire: `outcome` and how long it took.
    #[allow(unused_variables)]
    pub(crate) fn gave_up(&self, outcome: &'static str, waited: Duration) {
        #[cfg(feature = "tracing")]
        {
            self.span.record("outcome", outcome);
            self.span.record("waited_ms", ms(waited));
        }
    }

    /// A renewal batch's result.
    #[allow(unused_variables)]
    pub(crate) fn renewed(&self, renewed: usize, failed: usize) {
        #[cfg(feature = "tracing")]
        {
            self.span.record("renewed", renewed);
            self.span.record("failed", failed);
        }
    }
}

/// A hold lost: `reason` as `LostReason`'s `Debug`.
#[allow(unused_variables)]
pub(crate) fn lost(name: &str, owner: &str, reason: &dyn std::fmt::Debug) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        name,
        owner,
        reason = ?reason,
        "redlatch: hold lost"
    );
}
