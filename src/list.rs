//! Finding locks and synchronizers by name pattern: [`Client::list`], with `SCAN` on every
//! master (never `KEYS`), helper keys grouped under the name they belong to.

use std::collections::{BTreeMap, BTreeSet};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::inspect::{Inspection, Kind};
use crate::keys::{
    hashed, helper_of, is_client_waits, is_history, is_lock_order, is_unlock_latch, rate_helper_of,
    unhashed,
};

impl Client {
    /// Finds the locks and synchronizers with a key matching the glob `pattern` (Redis's
    /// `SCAN ... MATCH` syntax: `*`, `?`, `[abc]`, `\` escapes), on every master of a
    /// cluster, and [inspects](Client::inspect) each; sorted by name.
    ///
    /// Helper keys (a fair lock's queue and timeouts, a fenced lock's token counter,
    /// read-hold leases, permit expiries, unlock latches, an election's record and log, a
    /// rate limiter's permits left and taken, its clients' too) are grouped under their
    /// object's name, never listed on their own (keys laid out as a rate limiter's, but
    /// beside a name that is none, are listed on their own). A lock condition's keys
    /// are grouped under their lock while it is held; those of a free lock (whose waiters
    /// wait for a notification) are listed on their own, as
    /// [`Kind::Unknown`](crate::inspect::Kind::Unknown). An object is found when one of its keys matches:
    /// `orders:*` finds the locks named `orders:...`, but not a fenced lock that is free and
    /// so exists only as `redisson_lock_token:{orders:...}` (`*orders:*` finds both). Keys of
    /// other applications that match are listed as [`Kind::Unknown`](crate::inspect::Kind::Unknown)
    /// (or as a semaphore or latch, for integer strings: see
    /// [`Kind::SemaphoreOrLatch`](crate::inspect::Kind::SemaphoreOrLatch)).
    ///
    /// With a [`NameMapper`](crate::NameMapper), names are shown as the caller gives them
    /// (unmapped), and keys that no name maps to are left out (another application's). A
    /// [prefix](crate::NameMapper::prefix) is put before `pattern` (glob characters in it
    /// escaped), so `ord*` scans `app1:ord*`. A [custom](crate::NameMapper::custom) mapper
    /// cannot map a glob: `pattern` is then matched against the keys as they are in Redis,
    /// and each match is unmapped.
    ///
    /// It costs one pass of `SCAN` over each master's keyspace plus one inspection per name
    /// found: a tool for operators, not for hot paths. Objects created or deleted during the
    /// scan may or may not be listed (`SCAN`'s guarantee).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty pattern; connection errors
    /// and timeouts. A name whose inspection fails otherwise is left out (logged at debug level).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for found in client.list("orders:*")? {
    ///     println!("{} {} ({} holder(s))", found.name, found.kind, found.holders.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list(&self, pattern: &str) -> Result<Vec<Inspection>> {
        if pattern.is_empty() {
            return Err(Error::invalid(
                "pattern must not be empty (`*` matches all)",
            ));
        }
        let mapper = &self.inner.config.name_mapper;
        let pattern = &*mapper.map_pattern(pattern);
        let keys = self.inner.backend.scan(pattern)?;
        let found = self.group(&keys)?;
        if mapper.is_identity() {
            return Ok(found);
        }
        let mut named: Vec<Inspection> = found
            .into_iter()
            .filter_map(|i| {
                let name = mapper.name_of(&i.name);
                if name.is_none() {
                    log::debug!("list: skipping `{}`: no name maps to it", i.name);
                }
                Some(i.named(&name?))
            })
            .collect();
        named.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(named)
    }

    /// Inspects the names that `keys` belong to: first those their helper keys name, then
    /// each key no inspection accounted for, as a name of its own.
    fn group(&self, keys: &BTreeSet<String>) -> Result<Vec<Inspection>> {
        let mut listed = Listed::new(keys);
        let mut found: BTreeMap<String, Inspection> = BTreeMap::new();
        for key in keys {
            let (names, rate) = owners_of(key);
            if names.iter().any(|n| found.contains_key(n)) {
                continue;
            }
            // A rate limiter's key belongs to a rate limiter only.
            let fits = |i: &Inspection| !rate || i.kind == Kind::RateLimiter;
            let mut owner = None;
            // `redisson_lock_queue:{a}` is the queue of `a` and of a name `{a}` with its own
            // tag: it is `{a}`'s when the key `{a}` exists, else `a`'s.
            if let [_, tagged] = &names[..] {
                let i = listed.inspect(self, tagged)?;
                if i.is_some_and(|i| i.key_type != "none" && fits(i)) {
                    owner = Some(tagged);
                }
            }
            // Else the first candidate that exists.
            if owner.is_none() {
                for name in &names {
                    if listed.inspect(self, name)?.is_some_and(fits) {
                        owner = Some(name);
                        break;
                    }
                }
            }
            if let Some((name, Some(i))) = owner.map(|n| (n, listed.inspected(n))) {
                found.insert(name.clone(), i.clone());
            }
        }
        // Helper keys that no inspection names (an election's record and log, a condition's
        // keys: found by scanning only) join the object they belong to.
        for key in keys {
            let (names, rate) = owners_of(key);
            let owner = names.into_iter().find(|n| found.contains_key(n));
            if let Some(i) = owner.and_then(|n| found.get_mut(&n)) {
                let fits = !rate || i.kind == Kind::RateLimiter;
                if fits && !i.keys.contains(key) && !is_unlock_latch(key) {
                    i.keys.push(key.clone());
                }
            }
        }
        let explained: BTreeSet<&str> = found
            .values()
            .flat_map(|i| i.keys.iter().map(String::as_str))
            .collect();
        let rest: Vec<&String> = keys
            .iter()
            .filter(|k| !explained.contains(k.as_str()) && !is_unlock_latch(k))
            .filter(|k| !is_client_waits(k) && !is_lock_order(k) && !is_history(k))
            .filter(|k| !found.contains_key(*k))
            .collect();
        // Each inspected once: a name inspected as a candidate owner that was none (a name
        // beside keys laid out as a rate limiter's) is listed as it was read.
        let mut rest_found = Vec::new();
        for key in rest {
            if let Some(i) = listed.inspect(self, key)? {
                rest_found.push((key.clone(), i.clone()));
            }
        }
        found.extend(rest_found);
        Ok(found.into_values().collect())
    }
}

/// What a listing's scan found beside the names (the clients of per-client rate limiters,
/// by the [`hashed`] name their buckets' keys carry), and the inspections made, each once.
struct Listed<'k> {
    rate_clients: BTreeMap<&'k str, Vec<String>>,
    /// Every name inspected: `None` when nothing of it exists (or its inspection failed).
    inspected: BTreeMap<String, Option<Inspection>>,
}

impl<'k> Listed<'k> {
    fn new(keys: &'k BTreeSet<String>) -> Listed<'k> {
        let mut rate_clients: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for key in keys {
            if let Some((name, Some(client))) = rate_helper_of(key) {
                let clients = rate_clients.entry(name).or_default();
                if !clients.iter().any(|c| c == client) {
                    clients.push(client.to_owned());
                }
            }
        }
        Listed {
            rate_clients,
            inspected: BTreeMap::new(),
        }
    }

    /// What inspecting `name` found, if it was inspected.
    fn inspected(&self, name: &str) -> Option<&Inspection> {
        self.inspected.get(name)?.as_ref()
    }

    /// [`inspect`](Client::inspect) of a key for `list` (not mapped again), once, with the
    /// buckets the scan found where it is a per-client rate limiter: only connection errors
    /// and timeouts end the listing; a name that fails otherwise is skipped (logged at debug
    /// level).
    fn inspect(&mut self, client: &Client, name: &str) -> Result<Option<&Inspection>> {
        if !self.inspected.contains_key(name) {
            let clients = self
                .rate_clients
                .get(hashed(name).as_str())
                .map_or(&[][..], Vec::as_slice);
            let found = match client.inspect_with(name, false, clients) {
                Err(e) if !e.is_connection() && !e.is_timeout() => {
                    log::debug!("list: skipping `{name}`: {e}");
                    None
                }
                outcome => outcome?,
            };
            self.inspected.insert(name.to_owned(), found);
        }
        Ok(self.inspected(name))
    }
}

/// The names `key` may be a helper key of, in Redisson's layout (two when the layout is
/// ambiguous: `redisson_lock_queue:{a}` belongs to `a`, or to a name `{a}` with its own tag),
/// and whether it is laid out as a rate limiter's key (which belongs to a rate limiter only).
fn owners_of(key: &str) -> (Vec<String>, bool) {
    if let Some(name) = helper_of(key) {
        return (unhashed(name), false);
    }
    match rate_helper_of(key) {
        Some((name, _)) => (unhashed(name), true),
        None => (Vec::new(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::owners_of;

    #[test]
    fn helper_keys_name_their_object() {
        let owners = |k: &str| owners_of(k).0;
        assert_eq!(
            owners("redisson_lock_queue:{orders}"),
            ["orders", "{orders}"]
        );
        assert_eq!(
            owners("redisson_lock_token:{user:1}:cart"),
            ["{user:1}:cart"]
        );
        assert_eq!(
            owners("redisson_unlock_latch:{orders}:00ff"),
            ["orders", "{orders}"]
        );
        assert_eq!(owners("{slots}:timeout"), ["slots", "{slots}"]);
        assert_eq!(owners("{a}b:timeout"), ["{a}b"]);
        assert_eq!(
            owners("{catalog}:0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:7:rwlock_timeout:2"),
            ["catalog", "{catalog}"]
        );
        assert_eq!(
            owners("redlatch_condition:{buffer}:not-full"),
            ["buffer", "{buffer}"]
        );
        assert_eq!(owners("redlatch_condition_queue:{a}b:c"), ["{a}b"]);
        assert_eq!(owners("redlatch_condition_queue:x{a}:c"), ["x{a}"]);
        assert_eq!(
            owners("redlatch_condition:{a}:b}:c"),
            ["a", "{a}"],
            "a lock named `a}}:b` is misread"
        );
        assert_eq!(owners("redlatch_election:{leader}"), ["leader", "{leader}"]);
        assert_eq!(
            owners("redlatch_election_log:{leader}"),
            ["leader", "{leader}"]
        );
        assert_eq!(
            owners_of("{api}:value"),
            (vec!["api".into(), "{api}".into()], true)
        );
        assert_eq!(
            owners_of("{api}:permits:0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c"),
            (vec!["api".into(), "{api}".into()], true)
        );
        assert_eq!(owners_of("{a}b:permits"), (vec!["{a}b".into()], true));
        assert!(owners("orders").is_empty());
        assert!(owners("session:timeout").is_empty());
        assert!(owners("redisson_lock_queue:plain").is_empty());
    }
}
