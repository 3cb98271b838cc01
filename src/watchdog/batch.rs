//! The renewal calls: a batch of due holds renewed in one script call per batch script and,
//! on a cluster, per hash slot (with `WAIT` when the client syncs replicas), and each reply
//! applied to its entry: renewed and rescheduled, lost, or retried.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::entry::owner;
use super::lease::{LeaseState, LostReason};
use super::notice::Revocation;
use super::renewal::BatchRenewal;
use super::state::State;
use super::Shared;
use crate::backend::{Backend, Policy};
use crate::config::wait_replicas;
use crate::error::Result;
use crate::keys;
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
                    let wrote = renewed.iter().any(|&r| r >= 1 || r <= -3);
                    let acked = wait_replicas(self.sync, c, wrote)?;
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

    /// Applies the `outcomes` of the renewal of `ids` sent at `sent_at`. Returns the holds
    /// whose renewal found a revocation to tell them of (first found, or a forced release):
    /// the caller reads the records with the state unlocked ([`tell`](Self::tell)).
    pub(super) fn apply(
        &self,
        st: &mut State,
        ids: &[u64],
        sent_at: Instant,
        outcomes: Vec<Renewed>,
    ) -> Vec<Told> {
        let mut told = Vec::new();
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
            // Told: each request's record read once (again if the read failed). Released by
            // force: read again (who, and that it was).
            let request = match outcome {
                Renewed::Told(at) => Some(Some(at)),
                Renewed::Preempted => Some(None),
                _ => None,
            };
            if let Some(at) = request {
                if e.lease.notice.see(at) {
                    told.push(Told {
                        name: Arc::clone(&e.name),
                        owner: Arc::from(owner(e)),
                        lease: Arc::clone(&e.lease),
                        at,
                    });
                }
            }
            match outcome {
                Renewed::Told(_) if e.lease.confirm(sent_at) => {
                    self.metrics.renewed();
                    st.schedule(sent_at + self.period, id);
                }
                Renewed::Held(found) if e.lease.confirm(sent_at) => {
                    self.metrics.renewed();
                    if let Some(found) = found {
                        self.check_cut(&e.name, owner(e), found, left);
                    }
                    st.schedule(sent_at + self.period, id);
                }
                Renewed::Held(_) | Renewed::Told(_) => {
                    // Confirmed too late: the guard may already have reported it lost.
                    let (e, reason) = st.lose(id, LostReason::LeaseExpired).expect("present");
                    log::warn!(
                        "lock `{}` (owner {}) lost ({reason:?}): its lease ran out before the \
                         renewal reply came",
                        e.name,
                        owner(&e)
                    );
                }
                Renewed::Preempted => {
                    let (e, _) = st.lose(id, LostReason::Preempted).expect("present");
                    log::warn!(
                        "lock `{}` (owner {}) was released by force by a preemptor: renewal \
                         stopped, guard marked lost",
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
        told
    }

    /// Reads the revocation record of each of `told` and tells the hold (its guards'
    /// `on_revoke` callbacks run here). A read that fails is made again at the next renewal.
    pub(super) fn tell(&self, told: Vec<Told>) {
        for t in told {
            let record = keys::revoke(&t.name);
            let read = self.backend.run_with(&t.name, Policy::Once, |c| {
                redis::cmd("HGETALL")
                    .arg(&record)
                    .query::<HashMap<String, String>>(c)
            });
            let name = &t.name;
            match read.map(|fields| Revocation::from_record(&fields, &t.owner)) {
                Ok(Some(revocation)) => {
                    log::debug!(
                        "lock `{name}`: its holder {} is asked to release it by {} ({})",
                        revocation.whom,
                        revocation.by,
                        revocation.reason
                    );
                    t.lease.notice.tell(name, revocation, t.at);
                }
                Ok(None) => log::debug!("lock `{name}`: the revocation record is gone"),
                Err(e) => log::debug!("lock `{name}`: reading its revocation failed: {e}"),
            }
        }
    }
}

/// A hold whose renewal found a revocation to tell it of: the request made at `at` (server
/// ms), or (`None`) a release by force.
pub(super) struct Told {
    name: Arc<str>,
    owner: Arc<str>,
    lease: Arc<LeaseState>,
    at: Option<u64>,
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
    /// Renewed, and the request made at this time (server ms) for the holder is pending.
    Told(u64),
    /// Not held: a preemptor released it by force.
    Preempted,
    /// The script call failed (or replied nonsense): the lease is unknown.
    Failed(Arc<str>),
}

/// Puts a script call's per-lock replies back at the batch positions `at`. A reply comes
/// with why its renewals are unconfirmed (too few replicas), if they are: those count as
/// failed. Per lock: 0 not held, 1 renewed, `2 + ms` renewed, and its expiry was `ms` just
/// before (a script that reports it), `-3 - at` renewed with the request made at `at`
/// pending, -2 not held: released by force (a plain lock's script).
fn scatter(out: &mut [Renewed], at: &[usize], reply: Result<(Vec<i64>, Option<Arc<str>>)>) {
    let outcomes: Vec<Renewed> = match reply {
        Ok((v, unconfirmed)) if v.len() == at.len() => v
            .into_iter()
            .map(|r| match (r, &unconfirmed) {
                (1, None) => Renewed::Held(None),
                (-2, _) => Renewed::Preempted,
                (..=-3, None) => Renewed::Told((-3 - r) as u64),
                (2.., None) => Renewed::Held(Some(Duration::from_millis(r as u64 - 2))),
                (1.. | ..=-3, Some(why)) => Renewed::Failed(Arc::clone(why)),
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
