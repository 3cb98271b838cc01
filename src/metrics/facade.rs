//! The `metrics` feature: what a client counts, reported through the [`metrics`] crate's
//! facade as well, to whatever recorder the application installed (a Prometheus exporter,
//! StatsD, ...). Without the feature, these functions do nothing.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `redlatch_acquisitions_total` | counter | `kind` |
//! | `redlatch_contended_acquisitions_total` | counter | `kind` |
//! | `redlatch_timeouts_total` | counter | `kind` |
//! | `redlatch_wait_seconds` | histogram | `kind` |
//! | `redlatch_hold_seconds` | histogram | `kind` |
//! | `redlatch_locks_held` | gauge | `kind` |
//! | `redlatch_threads_waiting` | gauge | |
//! | `redlatch_renewals_total` | counter | |
//! | `redlatch_failed_renewals_total` | counter | |
//! | `redlatch_lost_locks_total` | counter | |
//! | `redlatch_pubsub_reconnects_total` | counter | |
//! | `redlatch_handovers_total` | counter | |
//!
//! `kind` is the lock kind: `plain`, `fair`, `fenced`, `spin`, `read`, `write`,
//! `non-reentrant`, `non-reentrant fair`, `group`, `lock set` (a set's members), or
//! `semaphore` and `expirable semaphore` (permits held), or `rate limiter` (admissions: they
//! count as acquisitions and hold nothing, so no hold time nor held gauge). A `name` label (the lock's key) is
//! added only with
//! [`ConfigBuilder::metrics_lock_names`](crate::ConfigBuilder::metrics_lock_names).

/// Which lock an event is about: its kind, and its name when names are labels.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Labels<'a> {
    pub(crate) kind: &'static str,
    pub(crate) name: Option<&'a str>,
}

#[cfg(feature = "metrics")]
mod on {
    use std::sync::Once;
    use std::time::Duration;

    use metrics::{Label, Unit};

    use super::Labels;

    fn labels(l: Labels<'_>) -> Vec<Label> {
        let mut out = vec![Label::new("kind", l.kind)];
        if let Some(name) = l.name {
            out.push(Label::new("name", name.to_owned()));
        }
        out
    }

    /// Describes every metric to the recorder installed when the first client is made.
    pub(crate) fn describe() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            use metrics::{describe_counter, describe_gauge, describe_histogram};
            describe_counter!(
                "redlatch_acquisitions_total",
                Unit::Count,
                "Locks acquired (re-entries count)"
            );
            describe_counter!(
                "redlatch_contended_acquisitions_total",
                Unit::Count,
                "Acquisitions that found the lock busy and waited"
            );
            describe_counter!(
                "redlatch_timeouts_total",
                Unit::Count,
                "Waits for a lock that ended without it"
            );
            describe_histogram!(
                "redlatch_wait_seconds",
                Unit::Seconds,
                "From the start of an acquire call to holding the lock"
            );
            describe_histogram!(
                "redlatch_hold_seconds",
                Unit::Seconds,
                "From acquiring a lock to releasing it"
            );
            describe_gauge!("redlatch_locks_held", Unit::Count, "Holds alive now");
            describe_gauge!(
                "redlatch_threads_waiting",
                Unit::Count,
                "Threads blocked in a wait now"
            );
            describe_counter!(
                "redlatch_renewals_total",
                Unit::Count,
                "Leases renewed by the watchdog"
            );
            describe_counter!(
                "redlatch_failed_renewals_total",
                Unit::Count,
                "Renewals that failed and were retried"
            );
            describe_counter!("redlatch_lost_locks_total", Unit::Count, "Holds found lost");
            describe_counter!(
                "redlatch_pubsub_reconnects_total",
                Unit::Count,
                "Pub/sub connections re-made"
            );
            describe_counter!(
                "redlatch_handovers_total",
                Unit::Count,
                "Releases that passed the lock to a waiting thread of the same client"
            );
            describe_counter!(
                "redlatch_deadlocks_total",
                Unit::Count,
                "Waits ended as the victims of deadlocks"
            );
            describe_counter!(
                "redlatch_lock_order_inversions_total",
                Unit::Count,
                "Pairs of locks taken in an order opposite to one on record"
            );
        });
    }

    pub(crate) fn acquired(l: Labels<'_>, waited: Duration, contended: bool) {
        admitted(l, waited, contended);
        metrics::gauge!("redlatch_locks_held", labels(l)).increment(1.0);
    }

    /// An acquisition that holds nothing afterwards (a rate limiter's).
    pub(crate) fn admitted(l: Labels<'_>, waited: Duration, contended: bool) {
        metrics::counter!("redlatch_acquisitions_total", labels(l)).increment(1);
        if contended {
            metrics::counter!("redlatch_contended_acquisitions_total", labels(l)).increment(1);
        }
        metrics::histogram!("redlatch_wait_seconds", labels(l)).record(waited);
    }

    pub(crate) fn timed_out(l: Labels<'_>) {
        metrics::counter!("redlatch_timeouts_total", labels(l)).increment(1);
    }

    pub(crate) fn released(l: Labels<'_>, held: Duration) {
        metrics::histogram!("redlatch_hold_seconds", labels(l)).record(held);
        metrics::gauge!("redlatch_locks_held", labels(l)).decrement(1.0);
    }

    pub(crate) fn waiting(delta: f64) {
        metrics::gauge!("redlatch_threads_waiting").increment(delta);
    }

    pub(crate) fn count(name: &'static str) {
        metrics::counter!(name).increment(1);
    }
}

#[cfg(feature = "metrics")]
pub(crate) use on::{acquired, admitted, count, describe, released, timed_out, waiting};

#[cfg(not(feature = "metrics"))]
mod off {
    use std::time::Duration;

    use super::Labels;

    pub(crate) fn describe() {}
    pub(crate) fn acquired(_: Labels<'_>, _: Duration, _: bool) {}
    pub(crate) fn admitted(_: Labels<'_>, _: Duration, _: bool) {}
    pub(crate) fn timed_out(_: Labels<'_>) {}
    pub(crate) fn released(_: Labels<'_>, _: Duration) {}
    pub(crate) fn waiting(_: f64) {}
    pub(crate) fn count(_: &'static str) {}
}

#[cfg(not(feature = "metrics"))]
pub(crate) use off::{acquired, admitted, count, describe, released, timed_out, waiting};
