//! The Redis ACL rules a client needs ([`Config::acl_rules`]): the commands it sends, and the
//! keys and channels of the names it may use. The one list of them: the guide shows what it
//! returns, and `tests/acl.rs` runs every primitive as a user given exactly these rules.

use super::{Config, ShardedSubscriptionMode, Topology};
use crate::keys;

/// Commands every client sends: scripts (`EVALSHA`, and `SCRIPT LOAD` when a script is not
/// loaded), the commands the scripts run, the few sent directly (reads of a lock's state,
/// the batched `DEL` of receipts, deadlock detection's reads and `HDEL`), the election
/// observer's stream reads, `PING`, connection names, and plain pub/sub.
const COMMANDS: &[&str] = &[
    "+evalsha",
    "+script|load",
    "+ping",
    "+client|setname",
    // Announcing the library (Redis 7.2+; refused and ignored before). Redis 7.0 and 7.1 know
    // no such subcommand and refuse the rule: drop it there.
    "+client|setinfo",
    // Strings, counters and expiry.
    "+get",
    "+set",
    "+del",
    "+exists",
    "+type",
    "+incr",
    "+incrby",
    "+decr",
    "+decrby",
    "+strlen",
    "+pexpire",
    "+pttl",
    "+time",
    // Hashes: holds, read-write modes, fences, elections, wait records.
    "+hget",
    "+hset",
    "+hdel",
    "+hexists",
    "+hgetall",
    "+hincrby",
    "+hkeys",
    "+hlen",
    "+hmget",
    // Lists: fair and condition queues.
    "+lindex",
    "+lpop",
    "+lpos",
    "+lpush",
    "+lrange",
    "+lrem",
    "+rpush",
    // Sorted sets: fair deadlines, permits, condition waiters.
    "+zadd",
    "+zcount",
    "+zincrby",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zremrangebyscore",
    "+zscore",
    // Streams: the election log.
    "+xadd",
    "+xrevrange",
    "+xread",
    // Plain pub/sub.
    "+publish",
    "+subscribe",
    "+unsubscribe",
];

/// Commands on a Redis Cluster: the slot map, `ASKING` during a migration.
const CLUSTER: &[&str] = &["+cluster|slots", "+asking"];

/// Sharded pub/sub on a cluster (Redis 7.0), and the question of whether it has it.
const SHARDED: &[&str] = &[
    "+pubsub|shardnumsub",
    "+spublish",
    "+ssubscribe",
    "+sunsubscribe",
];

impl Config {
    /// The Redis ACL rules that a client of this configuration needs, and no more: the
    /// commands it sends, and the keys and channels of the names it can use (those that
    /// start with its [`name_prefix`](crate::ConfigBuilder::name_prefix)), each rule one
    /// argument of `ACL SETUSER <user> on ><password> <rules...>`, starting with `resetkeys
    /// resetchannels -@all`. Enough for every primitive (each lock kind, semaphores, latches,
    /// conditions, elections, fenced resources) and for what the configuration turns on
    /// (deadlock detection, lock-order checks, the history, replica sync, a cluster, a
    /// database other than 0). See the guide's [operating chapter](crate::_guide::operating)
    /// for what operating tools need besides.
    ///
    /// Without a name prefix (or with a custom [`NameMapper`](crate::NameMapper)), names can
    /// be anything, so the rules give every key and channel (`~*`, `&*`). Channel rules
    /// (`&`, `resetchannels`) need Redis 6.2; sharded pub/sub commands (on a cluster)
    /// Redis 7.0.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = redlatch::Config::builder("redis://127.0.0.1/")
    ///     .name_prefix("app:")
    ///     .build()
    ///     .unwrap();
    /// let rules = config.acl_rules();
    /// assert!(rules.contains(&"~app:*".to_string()));
    /// assert!(rules.contains(&"&redisson_*{app:*".to_string()));
    /// assert!(rules.contains(&"+evalsha".to_string()));
    /// println!("ACL SETUSER app on >secret {}", rules.join(" "));
    /// ```
    pub fn acl_rules(&self) -> Vec<String> {
        let mut rules: Vec<String> = ["resetkeys", "resetchannels", "-@all"]
            .iter()
            .chain(COMMANDS)
            .map(|r| r.to_string())
            .collect();
        let mut add = |more: &[&str]| rules.extend(more.iter().map(|r| r.to_string()));
        match &self.topology {
            Topology::Cluster { .. } => {
                add(CLUSTER);
                if self.sharded_subscription_mode != ShardedSubscriptionMode::Off {
                    add(SHARDED);
                }
            }
            // The master is checked with `ROLE` (the sentinels' own ACL is apart).
            Topology::Sentinel { .. } => add(&["+role"]),
            Topology::Single(_) => {}
        }
        if self.database() != 0 {
            add(&["+select"]);
        }
        if self.replica_sync.is_some() {
            add(&["+wait"]);
        }
        match self.name_mapper.common_prefix() {
            Some(prefix) if !prefix.is_empty() => rules.extend(patterns(&glob_escape(prefix))),
            _ => add(&["~*", "&*"]),
        }
        if self.deadlock_check_after.is_some() {
            // The wait index, who the waiters are, and the deadlocks broken.
            rules.push(format!("~{}:{{*", keys::CLIENT_WAITS));
            rules.push(format!("~{}:{{*", keys::HISTORY_WHO));
            rules.push(format!("~{}", keys::DEADLOCKS));
        }
        if self.lock_order_checks {
            rules.push(format!("~{}:*", keys::LOCK_ORDER));
        }
        if self.history.is_some() {
            rules.push(format!("~{}:{{*", keys::HISTORY));
            rules.push(format!("~{}:{{*", keys::HISTORY_WHO));
        }
        let mut seen = std::collections::HashSet::new();
        rules.retain(|r| seen.insert(r.clone()));
        rules
    }

    /// The database of the data nodes' connections.
    fn database(&self) -> i64 {
        match &self.topology {
            Topology::Single(info) => info.redis_settings().db(),
            Topology::Sentinel { node, .. } => node.db(),
            Topology::Cluster { .. } => 0,
        }
    }
}

/// The key and channel patterns of the names that start with `prefix` (escaped for a glob):
/// the names themselves and what follows them (`{name}:timeout`, a read hold's
/// `{name}:<owner>:rwlock_timeout:<n>`), and every helper key and channel, Redisson's
/// (`redisson_lock_queue:{name}`, `redisson_countdownlatch__channel__{name}`) and ours
/// (`redlatch_fence:{name}`), in both forms: `{name}`, and `name` where the name carries its
/// own hash tag (`redisson_lock_queue:app:{orders}`).
fn patterns(prefix: &str) -> Vec<String> {
    let mut out = vec![format!("~{prefix}*"), format!("~{{{prefix}*")];
    for sigil in ['~', '&'] {
        for family in ["redisson_", "redlatch_"] {
            out.push(format!("{sigil}{family}*{{{prefix}*"));
            out.push(format!("{sigil}{family}*:{prefix}*"));
        }
    }
    out
}

/// `s` with the characters special to a Redis glob (`*`, `?`, `[`, `]`, `\`) escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_with_glob_characters_is_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\:"), "a\\*b\\?\\[c\\]\\\\:");
        assert_eq!(glob_escape("app:"), "app:");
    }

    #[test]
    fn every_key_and_channel_of_a_prefixed_name_matches_a_pattern() {
        let rules = patterns("app:");
        let (keys, channels): (Vec<_>, Vec<_>) = rules.iter().partition(|r| r.starts_with('~'));
        let matches = |globs: &[&String], s: &str| {
            globs.iter().any(|g| crate::glob::glob_matches(&g[1..], s))
        };
        for name in ["app:orders", "app:{orders}"] {
            let key_names = [
                name.to_owned(),
                keys::fair_queue(name),
                keys::fair_timeouts(name),
                keys::fair_turn(name),
                keys::fence_token(name),
                keys::unlock_latch(name, "client", 7),
                keys::read_hold(name, "client:1", 1),
                keys::permit_timeouts(name),
                keys::resource_fence(name),
                keys::condition_waiters(name, "c"),
                keys::condition_queue(name, "c"),
                keys::election_leader(name),
                keys::election_log(name),
                keys::lock_waits(name),
            ];
            for key in key_names {
                assert!(matches(&keys, &key), "{key} in {keys:?}");
            }
            let channel_names = [
                keys::lock_channel(name),
                keys::fair_waiter_channel(name, "client:1"),
                keys::rw_channel(name),
                keys::semaphore_channel(name),
                keys::latch_channel(name),
                keys::condition_channel(name, "c"),
                keys::condition_waiter_channel(name, "c", "w"),
                keys::election_channel(name),
            ];
            for channel in channel_names {
                assert!(matches(&channels, &channel), "{channel} in {channels:?}");
            }
        }
        // Another application's keys are not ours.
        assert!(!matches(&keys, "other:orders"));
        assert!(!matches(&keys, "redisson_lock_queue:{other:orders}"));
    }
}
