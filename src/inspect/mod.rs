//! Reading the state of a lock or synchronizer from its keys, for operators and dashboards:
//! [`Client::inspect`]. One read-only script (`lua/inspect.lua`) takes an atomic snapshot of
//! the name and its helper keys; `snapshot.rs` decodes and classifies it.

mod clients;
mod decode;
mod rate;
mod report;
mod snapshot;

use redis::Value;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::Result;
use crate::keys::{self, Layout};
use crate::scripts;

pub use rate::{RateBucket, RateInspection};
pub use report::{
    ClientConnection, ExpirablePermit, GroupValue, Holder, Inspection, Kind, PriorityWaiter,
    QueueEntry,
};
use snapshot::Snapshot;

/// The most items read from one key (hash fields, queue entries, permits, read holds of one
/// owner). A hash with more fields is no lock: it is reported as [`Kind::Unknown`].
const MAX_ITEMS: usize = 10_000;

impl Client {
    /// Reads what the name `name` holds: its [`Kind`], holders with hold counts, remaining
    /// lease, fair queue, read holders, permits, latch count, latest fencing token, as one
    /// atomic snapshot (a read-only script), plus the number of clients waiting on its
    /// channel (one more call). `Ok(None)` when nothing of that name exists.
    ///
    /// The kind is told from the keys' types and layout (see the crate docs' key layout); a
    /// key that fits none is [`Kind::Unknown`]. A semaphore and a count-down latch look alike
    /// in Redis: see [`Kind::SemaphoreOrLatch`]. Reading changes nothing (in particular, no
    /// dead fair-queue waiter is pruned and no expired permit reclaimed, and a rate
    /// limiter's permits taken longer than an interval ago are counted as back, not removed).
    ///
    /// A [per-client](crate::RateType::PerClient) rate limiter's buckets are named after
    /// their clients: they are found with `SCAN` (on every master, as
    /// [`list`](Self::list) does), then read with the config in one snapshot. That costs a
    /// pass over the keyspace more, for such a limiter only.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; connection errors.
    ///
    /// With a [`NameMapper`](crate::NameMapper), `name` is mapped as an object's name is, and
    /// the inspection's [`name`](Inspection::name) is `name` as given; its
    /// [`keys`](Inspection::keys) are the keys in Redis.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let _guard = client.lock("orders").lock()?;
    /// let found = client.inspect("orders")?.expect("held, so it exists");
    /// assert_eq!(found.kind, redlatch::inspect::Kind::Reentrant);
    /// assert_eq!(found.holders[0].owner.client_id, client.id());
    /// # Ok(()) }
    /// ```
    pub fn inspect(&self, name: &str) -> Result<Option<Inspection>> {
        let named = self.named(name);
        let mut found = self.inspect_excluding(&named.key, false)?;
        if found.as_ref().is_some_and(per_client) {
            let clients = self.rate_clients(&named.key)?;
            if !clients.is_empty() {
                found = self.inspect_with(&named.key, false, &clients)?;
            }
        }
        Ok(found.map(|i| i.named(&named.given)))
    }

    /// [`inspect`](Self::inspect) of the key `name` (a mapped name); when `watching`, this
    /// client's connection is subscribed for a watch, and is not counted on a channel where
    /// no thread of this client waits. A per-client rate limiter's buckets are not read.
    pub(crate) fn inspect_excluding(
        &self,
        name: &str,
        watching: bool,
    ) -> Result<Option<Inspection>> {
        self.inspect_with(name, watching, &[])
    }

    /// The ids of the clients with a bucket of the rate limiter `name` (a key), found with
    /// `SCAN`: at most [`MAX_ITEMS`].
    fn rate_clients(&self, name: &str) -> Result<Vec<String>> {
        let hashed = keys::hashed(name);
        let pattern = format!("{}:*", crate::glob::escape(&hashed));
        let mut clients: Vec<String> = Vec::new();
        for key in self.inner.backend.scan(&pattern)? {
            if let Some((of, Some(client))) = keys::rate_helper_of(&key) {
                if of == hashed && !clients.iter().any(|c| c == client) {
                    clients.push(client.to_owned());
                }
            }
        }
        clients.truncate(MAX_ITEMS);
        Ok(clients)
    }

    /// [`inspect_excluding`](Self::inspect_excluding), reading the buckets of `clients`
    /// where `name` is a per-client rate limiter.
    pub(crate) fn inspect_with(
        &self,
        name: &str,
        watching: bool,
        clients: &[String],
    ) -> Result<Option<Inspection>> {
        crate::names::check_name("object", name)?;
        let layout = Layout::new(name);
        // On a cluster, helper keys of a name such as `a}b`, `{}x` or `x{` hash to another
        // slot than the name (CROSSSLOT): they cannot exist next to it, so they count as
        // absent, and the name stands in for them.
        let backend = &self.inner.backend;
        let clustered = backend.clustered();
        let slot = backend.slot(name);
        let helpers = [
            &layout.queue,
            &layout.timeouts,
            &layout.token,
            &layout.permits,
            &layout.fence,
            &layout.generation,
            &layout.rate_value,
            &layout.rate_permits,
            &layout.priority,
            &layout.priority_alive,
        ]
        .map(|key| (backend.slot(key) == slot).then_some(key.as_str()));
        let flags: String = helpers
            .iter()
            .map(|k| if k.is_some() { '1' } else { '0' })
            .collect();
        // Read-hold keys share a slot only through the prefix's hash tag.
        let reads = !clustered
            || (has_tag(&layout.read_prefix) && backend.slot(&layout.read_prefix) == slot);
        let read_prefix = if reads {
            layout.read_prefix.as_str()
        } else {
            ""
        };
        let reply: Value = backend.run_repeatable(name, Policy::Retried, |c| {
            let mut call = scripts::INSPECT.key(name);
            for key in helpers {
                call.key(key.unwrap_or(name));
            }
            call.arg(read_prefix).arg(MAX_ITEMS).arg(&flags);
            for client in clients.iter().take(MAX_ITEMS) {
                call.arg(client);
            }
            call.invoke(c)
        })?;
        let snapshot = Snapshot::decode(&reply)?;
        let Some(mut found) = snapshot.classify(&layout) else {
            return Ok(None);
        };
        let channels = wait_channels(&layout, found.kind);
        if channels.is_empty() {
            return Ok(Some(found));
        }
        let mut counts = Vec::with_capacity(channels.len());
        for channel in channels {
            // Watchers are not waiting clients: each subscribes the channel's watch channel
            // too (`keys::watch_channel`), this client's own watch included; but a connection
            // of this client that also has a waiter on the channel is one.
            let (subscribers, watchers) = self.subscribers(channel)?;
            let own_waiter = watching && self.inner.pubsub.has_waiters(channel);
            counts.push(subscribers.saturating_sub(watchers) + u64::from(own_waiter));
        }
        if let [semaphore, latch] = counts[..] {
            // Waiters tell a semaphore from a latch by the channel they listen on.
            match (semaphore > 0, latch > 0) {
                (true, false) => {
                    found.kind = Kind::Semaphore;
                    found.count = None;
                }
                (false, true) => {
                    found.kind = Kind::CountDownLatch;
                    found.permits = None;
                }
                _ => {}
            }
        }
        found.subscribers = Some(counts.iter().sum());
        Ok(Some(found))
    }

    /// How many connections subscribe `channel`, and how many its watch channel (the
    /// watchers among them), in one call (on a cluster: sharded subscriptions on the node that
    /// owns their slot, which they share).
    fn subscribers(&self, channel: &str) -> Result<(u64, u64)> {
        let backend = &self.inner.backend;
        let which = backend.pubsub_mode().numsub();
        let watch = keys::watch_channel(channel);
        let reply: (String, u64, String, u64) =
            backend.run_repeatable(channel, Policy::Retried, |c| {
                redis::cmd("PUBSUB")
                    .arg(which)
                    .arg(channel)
                    .arg(&watch)
                    .query(c)
            })?;
        Ok((reply.1, reply.3))
    }
}

/// Whether `found` is a per-client rate limiter, whose buckets are named after clients.
fn per_client(found: &Inspection) -> bool {
    let rate = found.rate.as_ref();
    rate.is_some_and(|r| r.config.rate_type == crate::rate::RateType::PerClient)
}

/// Whether `key` has a hash tag (a non-empty `{...}` after its first `{`), which alone
/// decides its cluster slot.
fn has_tag(key: &str) -> bool {
    key.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .is_some_and(|(tag, _)| !tag.is_empty())
}

/// The channels whose subscribers wait on an object of `kind`.
fn wait_channels(layout: &Layout, kind: Kind) -> Vec<&str> {
    match kind {
        Kind::Reentrant | Kind::Fenced => vec![&layout.lock_channel],
        Kind::ReadWrite => vec![&layout.rw_channel],
        Kind::Semaphore | Kind::PermitExpirableSemaphore => vec![&layout.semaphore_channel],
        Kind::CountDownLatch => vec![&layout.latch_channel],
        Kind::SemaphoreOrLatch => vec![&layout.semaphore_channel, &layout.latch_channel],
        Kind::RateLimiter => vec![&layout.rate_channel],
        _ => vec![],
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hold::Owner;
    use std::time::Duration;

    #[test]
    fn hash_tags_are_non_empty_braces_after_the_first_open_brace() {
        assert!(has_tag("{orders}"));
        assert!(has_tag("{a}b}"));
        assert!(!has_tag("{}x"));
        assert!(!has_tag("x{"));
        assert!(!has_tag("{}{x}"));
    }

    /// An inspection of `kind` with holders `(thread, holds)` and queued threads, of
    /// client `c`.
    pub(crate) fn inspection(kind: Kind, holders: &[(u64, u32)], queue: &[u64]) -> Inspection {
        let owner = |thread| Owner {
            client_id: "c".to_owned(),
            thread,
        };
        Inspection {
            name: "x".to_owned(),
            kind,
            key_type: "hash".to_owned(),
            keys: vec!["x".to_owned()],
            lease: Some(Duration::from_secs(30)),
            holders: holders
                .iter()
                .map(|&(t, holds)| Holder {
                    owner: owner(t),
                    holds,
                    read_leases: Vec::new(),
                    connections: None,
                })
                .collect(),
            mode: None,
            readers: Vec::new(),
            queue: queue
                .iter()
                .map(|&t| QueueEntry {
                    owner: owner(t),
                    deadline: None,
                    connections: None,
                })
                .collect(),
            permits: None,
            count: None,
            permit_leases: Vec::new(),
            token: None,
            values: Vec::new(),
            rate: None,
            priorities: Vec::new(),
            subscribers: None,
        }
    }
}
