//! [`Observer`]: every leader of an election, once each, in term order.
//!
//! Each new leader is appended to the election's log (a STREAM) in the script that proclaims
//! it, and its term published on the election's channel. An observer reads the log after the
//! last entry it yielded, and when there is none waits on the channel through the one wait
//! function: no polling, and a message published while it was not listening is found in the
//! log at its next look (after the subscription's confirmation). As a lock waiter's block is
//! bounded by the lease, an observer's is bounded by the watchdog timeout: a message lost
//! without a reconnect costs one such bound, and an idle observer one log read per bound.
//!
//! A leader whose lease runs out without resigning publishes nothing: the observers hear of
//! the next leader, whom the lapse lets in (a campaigner waits on the election's lock, woken
//! by its release or, for an expiry, at the lease end it last saw).

use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::election::{Election, Leader};
use crate::error::Result;
use crate::lock::{Ownership, ThreadOwned};
use crate::pubsub::{wait, Channel, Tried};
use crate::time::check_wait;

/// A log entry as `XRANGE` and `XREAD` reply it: its id and its fields.
type Entry = (String, Vec<(String, Vec<u8>)>);

/// Every leader of an [`Election`] from its making on, once each and in term order: an
/// iterator whose `next` blocks until the next leader proclaims (`Some(Err(_))` on an error,
/// such as [`Error::Interrupted`](crate::Error::Interrupted) or
/// [`Error::Closed`](crate::Error::Closed)). Made by
/// [`Election::observe`]. A value proclaimed again by the same leader
/// ([`Leadership::proclaim`](crate::Leadership::proclaim)) is not a new leader, and not
/// yielded.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// for leader in client.election("scheduler").observe() {
///     let leader = leader?;
///     println!("term {}: {} leads", leader.term, leader.value_str());
/// #   break;
/// }
/// # Ok(()) }
/// ```
pub struct Observer<O: Ownership = ThreadOwned> {
    election: Election<O>,
    /// The log entry after which to read: `None` until the first look.
    after: Option<String>,
    /// The newest term yielded: an entry at or below it is not yielded again.
    term: u64,
}

impl<O: Ownership> Observer<O> {
    pub(super) fn new(election: Election<O>) -> Observer<O> {
        Observer {
            election,
            after: None,
            term: 0,
        }
    }

    /// The next leader, waiting at most `timeout`: `None` if none came by then.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a timeout longer than a year; [`Error::Interrupted`](crate::Error::Interrupted),
    /// [`Error::Closed`](crate::Error::Closed) as every wait; connection errors.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Leader>> {
        check_wait(timeout)?;
        self.next_until(Some(Instant::now() + timeout))
    }

    fn next_until(&mut self, deadline: Option<Instant>) -> Result<Option<Leader>> {
        crate::names::check_name("election", self.election.name())?;
        if self.after.is_none() {
            // The first look: the leader now, if any, then the entries after the newest
            // (both read before either is kept: a failed look is made again).
            let newest = self.newest()?;
            let now = self.election.leader()?;
            self.after = Some(newest.unwrap_or_else(|| "0-0".to_owned()));
            if let Some(leader) = now {
                self.term = leader.term;
                return Ok(Some(leader));
            }
        }
        // A wait ends at the watchdog timeout at the latest, as a lock waiter's at the lease:
        // a message lost without a reconnect costs one such bound.
        let bound = self
            .election
            .lock
            .raw
            .key
            .client
            .inner
            .config
            .watchdog_timeout;
        let mut found = None;
        let election = self.election.clone();
        let dispatcher = &election.lock.raw.key.client.inner.pubsub;
        let channel = &election.keys.channel;
        let mut attempt = || -> Result<Tried> {
            while let Some((id, leader)) = self.read_next()? {
                self.after = Some(id);
                match leader {
                    Some(leader) if leader.term > self.term => {
                        self.term = leader.term;
                        found = Some(leader);
                        return Ok(Tried::done());
                    }
                    _ => {}
                }
            }
            Ok(Tried::again(Some(bound)))
        };
        wait(dispatcher, Channel::all(channel), deadline, &mut attempt)?;
        Ok(found)
    }

    /// The id of the log's newest entry, if any.
    fn newest(&self) -> Result<Option<String>> {
        let raw = &self.election.lock.raw;
        let log = &self.election.keys.log;
        let newest: Vec<Entry> = raw.key.run_repeatable(|c| {
            redis::cmd("XREVRANGE")
                .arg(log)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query(c)
        })?;
        Ok(newest.into_iter().next().map(|(id, _)| id))
    }

    /// The log entry after `self.after`, if any: its id, and its leader (`None` for an
    /// entry this client cannot read, skipped with a warning).
    fn read_next(&self) -> Result<Option<(String, Option<Leader>)>> {
        let raw = &self.election.lock.raw;
        let log = &self.election.keys.log;
        let after = self.after.as_deref().unwrap_or("0-0");
        let read: Option<Vec<(String, Vec<Entry>)>> = raw.key.run_repeatable(|c| {
            redis::cmd("XREAD")
                .arg("COUNT")
                .arg(1)
                .arg("STREAMS")
                .arg(log)
                .arg(after)
                .query(c)
        })?;
        let Some((id, fields)) = read
            .into_iter()
            .flatten()
            .flat_map(|(_, entries)| entries)
            .next()
        else {
            return Ok(None);
        };
        let field = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let text = |name: &str| field(name).map(|v| String::from_utf8_lossy(&v).into_owned());
        let term = text("term").and_then(|t| t.parse().ok());
        let since = text("since").and_then(|t| t.parse::<u64>().ok());
        let (Some(term), Some(since)) = (term, since) else {
            log::warn!(
                "election `{}`: log entry {id} is not a leader's: skipped",
                self.election.name()
            );
            return Ok(Some((id, None)));
        };
        let leader = Leader {
            term,
            value: field("value").unwrap_or_default(),
            owner: text("owner").unwrap_or_default(),
            since: UNIX_EPOCH + Duration::from_millis(since),
        };
        Ok(Some((id, Some(leader))))
    }
}

impl<O: Ownership> Iterator for Observer<O> {
    type Item = Result<Leader>;

    fn next(&mut self) -> Option<Result<Leader>> {
        self.next_until(None).transpose()
    }
}

impl<O: Ownership> std::fmt::Debug for Observer<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("election", &self.election.name())
            .field("term", &self.term)
            .finish()
    }
}
