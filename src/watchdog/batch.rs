//! The renewal calls: a batch of due holds renewed in one script call per batch script and,
//! on a cluster, per hash slot (with `WAIT` when the client syncs replicas), and each reply
//! applied to its entry: renewed and rescheduled, lost, or retried.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::entry::owner;
use super::lease::LostReason;
use super::renewal::BatchRenewal;
use super::state::State;
use super::Shared;
use crate::backend::{Backend, Policy};
use crate::config::wait_replicas;
use crate::error::Result;
use crate::time::millis;
use crate::trace;

/// One lock to renew.
pub(super) struct Target {
    pub(super) name: Arc<str>,
    pub(super) field: Arc<str>,
    pub(super) renewal: &'static BatchRenewal,
}

impl Shared {
    /// Renews a batch: one script call per batch script (each renewal names its own) and,
    /// on a cluster, per hash slot. One outcome per target, in order: renewed, not held, or
    /// why its call failed (a failing call does not affect the targets of the others). With
    /// replica sync, a call is followed by `WAIT`, and renewals fewer replicas confirmed
    /// count as failed.
    pub(super) fn renew(&self, batch: &[Target]) -> Vec<Renewed> {
        let span = trace::Span::renewal(batch.len(), self.lease);
        let _in_span = span.enter();
        let out = self.renew_all(batch);
        let renewed = out.iter().filter(|r| matches!(r, Renewed::Held(_))).count();
        let failed = out
            .iter()
            .filter(|r| matches!(r, Renewed::Failed(_)))
            .count();
        span.renewed(renewed, failed);
        out
    }

    /// [`renew`](Self::renew) without its span.
    fn renew_all(&self, batch: &[Target]) -> Vec<Renewed> {
        let mut out: Vec<Renewed> = vec![Renewed::Failed(Arc::from("not sent")); batch.len()];
        let mut call = |renewal: &BatchRenewal, at: &[usize]| {
            let Some(&first) = at.first() else { return };
            let mut inv = renewal.script.prepare_invoke();
            inv.arg(millis(self.lease));
            for t in at.iter().map(|&i| &batch[i]) {
                (renewal.add)(&mut inv, &t.name, &t.field);
            }
            let reply = self
                .backend
                .run_with(&batch[first].name, Policy::Once, |c| {
                    let renewed: Vec<i64> = inv.invoke(c)?;
                    let acked = wait_replicas(self.sync, c, renewed.iter().any(|&r| r >= 1))?;
                    Ok((renewed, acked))
                });
            let reply = reply.map(|(renewed, acked)| match (acked, self.sync) {
                (Some(acked), Some(sync)) if acked < sync.replicas => {
                    let why = format!("confirmed by {acked} of {} replicas", sync.replicas);
                    (renewed, Some(Arc::from(why)))
                }
                _ => (renewed, None),
            });
            scatter(&mut out, at, reply);
        };
        // On a cluster the keys of one call must share a slot.
        for (renewal, group) in by_script_and_slot(&self.backend, batch) {
            call(renewal, &group);
        }
        out
    }

    pub(super) fn apply(
        &self,
        st: &mut State,
        ids: &[u64],
        sent_at: Instant,
        outcomes: Vec<Renewed>,
    ) {
        let now = Instant::now();
        // Retry soon, and at the lease end at the latest (a lease that ran out is lost then).
        let retry = now + (self.period / 4).max(Duration::from_millis(1));
        for (&id, outcome) in ids.iter().zip(outcomes) {
            let Some(e) = st.entry(id) else {
                continue; // released meanwhile
            };
            // What our last confirmed renewal left of the lease, at the latest moment this
            // one can have run (now): the expiry the server had then is at least this.
            let left = e.lease.expires().saturating_duration_since(now);
            match outcome {
                Renewed::Held(found) if e.lease.confirm(sent_at) => {
                    self.metrics.renewed();
                    if let Some(found) = found {
                        self.check_cut(&e.name, owner(e), found, left);
                    }
                    st.schedule(sent_at + self.period, id);
                }
                Renewed::Held(_) => {
                    // Confirmed too late: the guard may already have reported it lost.
                    let (e, reason) = st.lose(id, LostReason::LeaseExpired).expect("present");
                    log::warn!(
                        "lock `{}` (owner {}) lost ({reason:?}): its lease ran out before the \
                         renewal reply came",
                        e.name,
                        owner(&e)
                    );
                }
                Renewed::NotHeld => {
                    let (e, _) = st.lose(id, LostReason::NotHeld).expect("present");
                    log::warn!(
                        "lock `{}` (owner {}) is no longer held: renewal stopped, guard marked lost",
                        e.name,
                        owner(&e)
                    );
                }
                Renewed::Failed(why) => match e.lease.lost() {
                    Some(reason) => {
                        let (e, reason) = st.lose(id, reason).expect("present");
                        log::warn!(
                            "lock `{}` (owner {}) lost ({reason:?}): renewals failed for its \
                             whole lease ({why})",
                            e.name,
                            owner(&e)
                        );
                    }
                    None => {
                        self.metrics.renewal_failed();
                        log::warn!(
                            "renewal of lock `{}` (owner {}) failed, retrying: {why}",
                            e.name,
                            owner(e)
                        );
                        let at = retry.min(e.lease.expires());
                        st.schedule(at, id);
                    }
                },
            }
        }
    }
}

impl Shared {
    /// Warns (once per client; later at debug) when a renewal found the expiry of lock
    /// `name` at `found`, well below the `left` that this client's last renewal set: another
    /// client renewed it with a shorter lease. Redisson's read-lock renewal sets the whole
    /// read-write lock's expiry to its own lease, so a peer whose watchdog timeout is shorter
    /// than ours lets the lock expire early once that peer dies.
    fn check_cut(&self, name: &str, owner: &str, found: Duration, left: Duration) {
        // Slack for the clocks and the ms the server rounds to.
        let slack = (self.lease / 20).max(Duration::from_millis(50));
        if found + slack >= left {
            return;
        }
        let first = !self
            .cut_seen
            .swap(true, std::sync::atomic::Ordering::Relaxed);
        let level = if first {
            log::Level::Warn
        } else {
            log::Level::Debug
        };
        log::log!(
            level,
            "lock `{name}` (owner {owner}): its expiry was cut to {} ms, below the {} ms this \
             client's renewals left; likely a peer (a Redisson client) renewing it with a \
             shorter watchdog timeout than this client's {} ms: use the same on both sides, or \
             the lock expires soon after that peer dies while a holder here believes it holds",
            found.as_millis(),
            left.as_millis(),
            self.lease.as_millis()
        );
    }
}

/// Splits the positions of `batch` into groups of one batch script and one hash slot each
/// (one slot on a single server), keeping their order within a group.
fn by_script_and_slot(
    commands: &Backend,
    batch: &[Target],
) -> Vec<(&'static BatchRenewal, Vec<usize>)> {
    type BySlot = std::collections::BTreeMap<u16, Vec<usize>>;
    let mut groups: Vec<(&'static BatchRenewal, BySlot)> = Vec::new();
    for (i, t) in batch.iter().enumerate() {
        let at = match groups.iter().position(|(r, _)| std::ptr::eq(*r, t.renewal)) {
            Some(at) => at,
            None => {
                groups.push((t.renewal, BySlot::new()));
                groups.len() - 1
            }
        };
        let slot = commands.slot(&t.name);
        groups[at].1.entry(slot).or_default().push(i);
    }
    groups
        .into_iter()
        .flat_map(|(r, slots)| slots.into_values().map(move |group| (r, group)))
        .collect()
}

/// What one renewal found.
#[derive(Clone)]
pub(super) enum Renewed {
    /// Renewed; with the expiry the lock had just before, where the script reports it.
    Held(Option<Duration>),
    NotHeld,
    /// The script call failed (or replied nonsense): the lease is unknown.
    Failed(Arc<str>),
}

/// Puts a script call's per-lock replies back at the batch positions `at`. A reply comes
/// with why its renewals are unconfirmed (too few replicas), if they are: those count as
/// failed. Per lock: 0 not held, 1 renewed, `2 + ms` renewed, and its expiry was `ms` just
/// before (a script that reports it).
fn scatter(out: &mut [Renewed], at: &[usize], reply: Result<(Vec<i64>, Option<Arc<str>>)>) {
    let outcomes: Vec<Renewed> = match reply {
        Ok((v, unconfirmed)) if v.len() == at.len() => v
            .into_iter()
            .map(|r| match (r, &unconfirmed) {
                (1, None) => Renewed::Held(None),
                (2.., None) => Renewed::Held(Some(Duration::from_millis(r as u64 - 2))),
                (1.., Some(why)) => Renewed::Failed(Arc::clone(why)),
                _ => Renewed::NotHeld,
            })
            .collect(),
        Ok((v, _)) => {
            let why: Arc<str> =
                Arc::from(format!("reply of {} items for {} locks", v.len(), at.len()));
            vec![Renewed::Failed(why); at.len()]
        }
        Err(e) => vec![Renewed::Failed(Arc::from(e.to_string())); at.len()],
    };
    for (&i, o) in at.iter().zip(outcomes) {
        out[i] = o;
    }
}
