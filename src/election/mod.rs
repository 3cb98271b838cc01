//! Leader election on a fenced lock: [`Election`], the [`Leadership`] a campaign wins, and
//! [`Observer`]s of the leaders, as etcd's `concurrency.Election` and Curator's
//! `LeaderLatch` have it.
//!
//! - `mod.rs`: [`Election`] (campaign, `leader`, `observe`) and [`Leader`].
//! - `leadership.rs`: [`Leadership`], the leader's guard: term, value, proclaim, resign,
//!   loss.
//! - `observe.rs`: [`Observer`], every leader once, in term order.
//!
//! Leading is holding the fenced lock `name` (Redisson's `RFencedLock`: a Java peer sees one),
//! so a term is the lock's fencing token: strictly increasing across leaders, and usable with
//! a [`FencedResource`](crate::FencedResource). Beside it, ours: the leader record
//! `redlatch_election:{name}`, the log of leaders `redlatch_election_log:{name}` and the
//! channel `redlatch_election__channel:{name}` (see `lua/election_*.lua`).

mod leadership;
mod observe;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::lock::{Lock, LockOwner, Ownership, ThreadOwned};
use crate::names::Named;
use crate::scripts;
use crate::time::{check_deadline, check_wait};

pub use leadership::Leadership;
pub use observe::Observer;

/// How many leaders an election's log keeps at least (`XADD MAXLEN ~`): an observer that
/// falls further behind skips the oldest.
const LOG_KEEPS: u32 = 1000;

/// A leader election: many threads or processes campaign, one leads at a time. Made by
/// [`Client::election`](crate::Client::election); cheap to clone.
///
/// A campaign ([`campaign`](Self::campaign)) blocks until this thread leads, and returns a
/// [`Leadership`]: its term (a fencing token, strictly increasing across leaders), its value
/// (what the leader tells the others: an address, an id), and a lost-lease signal. Leading is
/// holding the election's fenced lock, renewed by the watchdog; a leader that resigns (or
/// drops its leadership) hands over at once, one whose process dies within a lease.
/// [`leader`](Self::leader) says who leads now; [`observe`](Self::observe) yields every
/// leader in turn, woken by pub/sub.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let election = client.election("scheduler");
/// let leadership = election.campaign("host-a:8080")?; // blocks until this thread leads
/// while leadership.check().is_ok() {
///     // ... schedule, fencing side effects with leadership.term() ...
/// #   break;
/// }
/// leadership.resign()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election<O: Ownership = ThreadOwned> {
    pub(crate) lock: Lock<O>,
    pub(crate) keys: Arc<Keys>,
}

/// An election's keys.
pub(crate) struct Keys {
    /// The name as given.
    given: String,
    pub(crate) record: String,
    pub(crate) log: String,
    pub(crate) channel: String,
}

/// Who leads: what [`Election::leader`] and an [`Observer`] report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The leader's term: the fencing token of the acquire that made it leader.
    pub term: u64,
    /// What the leader proclaimed.
    pub value: Vec<u8>,
    /// The leader's owner id (`<client uuid>:<number>`).
    pub owner: String,
    /// When it started leading, on the server's clock.
    pub since: SystemTime,
}

impl Leader {
    /// The value as text (lossy for bytes that are not UTF-8).
    pub fn value_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.value)
    }
}

impl Election {
    pub(crate) fn new(client: Client, name: &Named) -> Election {
        Election {
            lock: client.fenced_lock(&*name.given),
            keys: Arc::new(Keys {
                given: name.given.to_string(),
                record: keys::election_leader(&name.key),
                log: keys::election_log(&name.key),
                channel: keys::election_channel(&name.key),
            }),
        }
    }
}

impl<O: Ownership> Election<O> {
    /// This election, campaigned in by `owner` instead of the calling thread: a leadership
    /// that is `Send`, and may be resigned from any thread.
    pub fn with_owner(&self, owner: &LockOwner) -> Election<LockOwner> {
        Election {
            lock: self.lock.with_owner(owner),
            keys: Arc::clone(&self.keys),
        }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.keys.given
    }

    /// The fenced lock whose holder leads.
    pub fn lock(&self) -> &Lock<O> {
        &self.lock
    }

    /// Blocks until this thread (or owner) leads, and proclaims `value`.
    ///
    /// # Errors
    ///
    /// [`Error::Interrupted`], [`Error::Closed`] as every wait; [`Error::AlreadyHeld`] when
    /// this owner leads already; [`Error::LockLost`] when the leadership was lost before it
    /// could be proclaimed (the lock is then released); connection errors.
    pub fn campaign(&self, value: impl AsRef<[u8]>) -> Result<Leadership<O>> {
        match self.campaign_until(None, value.as_ref())? {
            Some(leadership) => Ok(leadership),
            None => Err(Error::Protocol(
                "a campaign without a deadline gave up".into(),
            )),
        }
    }

    /// [`campaign`](Self::campaign), for at most `wait`: `None` if somebody else still
    /// leads then.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a wait longer than a year; otherwise as
    /// [`campaign`](Self::campaign).
    pub fn try_campaign_for(
        &self,
        wait: Duration,
        value: impl AsRef<[u8]>,
    ) -> Result<Option<Leadership<O>>> {
        check_wait(wait)?;
        self.campaign_until(Some(Instant::now() + wait), value.as_ref())
    }

    /// [`campaign`](Self::campaign), until `deadline` at most.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a deadline more than a year away; otherwise as
    /// [`campaign`](Self::campaign).
    pub fn try_campaign_until(
        &self,
        deadline: Instant,
        value: impl AsRef<[u8]>,
    ) -> Result<Option<Leadership<O>>> {
        check_deadline(deadline)?;
        self.campaign_until(Some(deadline), value.as_ref())
    }

    fn campaign_until(
        &self,
        deadline: Option<Instant>,
        value: &[u8],
    ) -> Result<Option<Leadership<O>>> {
        crate::names::check_name("election", &self.keys.given)?;
        if self.lock.is_held_by_current_thread()? {
            return Err(Error::AlreadyHeld {
                name: self.keys.given.clone(),
            });
        }
        let guard = match deadline {
            None => self.lock.lock()?,
            Some(deadline) => match self.lock.try_lock_until(deadline)? {
                Some(guard) => guard,
                None => return Ok(None),
            },
        };
        Leadership::proclaimed(self.clone(), guard, value).map(Some)
    }

    /// Who leads now, or `None`: nobody holds the election's lock with a proclaimed value
    /// (no campaign won, the leader resigned, or its lease ran out).
    ///
    /// # Errors
    ///
    /// Connection errors; [`Error::Protocol`] for a leader record this client cannot read.
    pub fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.leader_and_lease()?.map(|(leader, _)| leader))
    }

    /// The leader and the lock's remaining lease, if any.
    pub(crate) fn leader_and_lease(&self) -> Result<Option<(Leader, Option<Duration>)>> {
        let raw = &self.lock.raw;
        type Row = Option<(String, Vec<u8>, String, String, i64)>;
        let row: Row = raw.key.run_repeatable(|c| {
            scripts::ELECTION_LEADER
                .key(&raw.key.name)
                .key(&self.keys.record)
                .invoke(c)
        })?;
        let Some((term, value, owner, since, pttl)) = row else {
            return Ok(None);
        };
        let bad = || Error::Protocol(format!("election `{}`: bad leader record", self.keys.given));
        let term = term.parse().map_err(|_| bad())?;
        let since: u64 = since.parse().map_err(|_| bad())?;
        let leader = Leader {
            term,
            value,
            owner,
            since: UNIX_EPOCH + Duration::from_millis(since),
        };
        let lease = u64::try_from(pttl).ok().map(Duration::from_millis);
        Ok(Some((leader, lease)))
    }

    /// Every leader from now on, once each and in term order, as they come: an iterator
    /// that blocks ([`Observer::next_timeout`] for a bounded wait). The first item is the
    /// leader now, if any.
    pub fn observe(&self) -> Observer<O> {
        Observer::new(self.clone())
    }
}

impl<O: Ownership> std::fmt::Debug for Election<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.keys.given)
            .finish()
    }
}
