//! The key layout: every Redis key, hash field and pub/sub channel of every object, written
//! once. This is the wire contract with Redisson (`RedissonObject.prefixName` and
//! `suffixName`, and each object's channel name); primitives, `inspect`, `list` and `watch`
//! all take their names from here, and the key-layout tables of the crate docs and of the
//! guide's internals chapter are checked against it by a test.
//!
//! `name` is the object's mapped name (`names.rs`; the name as given unless a name mapper is
//! set), the key of its main value. Helper keys and channels carry the name as a cluster hash
//! tag (`prefix:{name}`), so that everything of one object lands in the name's slot; a name
//! that already contains `{` is used as it is (`prefix:name`), as Redisson does.

/// Prefix of a lock's channel: `redisson_lock__channel:{name}`.
pub(crate) const LOCK_CHANNEL: &str = "redisson_lock__channel";
/// Prefix of the key by which a lock set's owner leaves a freed lock to its waiter (ours, not
/// Redisson's): see [`lock_set_yield`].
pub(crate) const LOCK_SET_YIELD: &str = "redlatch_lockset_yield";
/// Prefix of a fair lock's queue of waiting owners.
pub(crate) const FAIR_QUEUE: &str = "redisson_lock_queue";
/// Prefix of a fair lock's waiter deadlines.
pub(crate) const FAIR_TIMEOUTS: &str = "redisson_lock_timeout";
/// Prefix of a fair lock's running turn (ours, not Redisson's): see [`fair_turn`].
pub(crate) const FAIR_TURN: &str = "redlatch_fair_turn";
/// Prefix of a fenced lock's token counter.
pub(crate) const FENCE_TOKEN: &str = "redisson_lock_token";
/// Prefix of an unlock's short-lived idempotency key.
pub(crate) const UNLOCK_LATCH: &str = "redisson_unlock_latch";
/// Prefix of a read-write lock's channel.
pub(crate) const RW_CHANNEL: &str = "redisson_rwlock";
/// Prefix of a semaphore's channel (both kinds).
pub(crate) const SEMAPHORE_CHANNEL: &str = "redisson_sc";
/// Prefix of a plain semaphore's generation (ours, not Redisson's): see
/// [`semaphore_generation`].
pub(crate) const SEMAPHORE_GENERATION: &str = "redlatch_semaphore";
/// Prefix of a [`FencedResource`](crate::FencedResource)'s fence (ours, not Redisson's).
pub(crate) const RESOURCE_FENCE: &str = "redlatch_fence";
/// Prefix of the channel a [`Watch`](crate::watch::Watch) subscribes beside each channel it
/// observes (ours, not Redisson's): see [`watch_channel`].
pub(crate) const WATCH_CHANNEL: &str = "redlatch_watch";
/// Prefix of a lock condition's waiters (ours, not Redisson's): see [`condition_waiters`].
pub(crate) const CONDITION_WAITERS: &str = "redlatch_condition";
/// Prefix of a lock condition's queue (ours): see [`condition_queue`].
pub(crate) const CONDITION_QUEUE: &str = "redlatch_condition_queue";
/// Prefix of a lock condition's waiter channels (ours): see [`condition_channel`].
pub(crate) const CONDITION_CHANNEL: &str = "redlatch_condition__channel";
/// Prefix of an election's leader record (ours): see [`election_leader`].
pub(crate) const ELECTION: &str = "redlatch_election";
/// Prefix of an election's log of leaders (ours): see [`election_log`].
pub(crate) const ELECTION_LOG: &str = "redlatch_election_log";
/// Prefix of an election's channel (ours): see [`election_channel`].
pub(crate) const ELECTION_CHANNEL: &str = "redlatch_election__channel";
/// Prefix of a rate limiter's channel (ours): see [`rate_channel`].
pub(crate) const RATE_CHANNEL: &str = "redlatch_rate";
/// Suffix of a rate limiter's permits left (Redisson's): see [`rate_keys`].
pub(crate) const RATE_VALUE: &str = "value";
/// Suffix of a rate limiter's permits taken (Redisson's): see [`rate_keys`].
pub(crate) const RATE_PERMITS: &str = "permits";
/// Prefix of a lock's pending revocation (ours): see [`revoke`].
pub(crate) const REVOKE: &str = "redlatch_revoke";
/// Prefix of a lock's log of revocations (ours): see [`revoke_log`].
pub(crate) const REVOKE_LOG: &str = "redlatch_revokes";
/// Prefix of a lock's queue of waiters with a priority (ours): see [`priority_queue`].
pub(crate) const PRIORITY: &str = "redlatch_priority";
/// Prefix of the ends of those waiters' places (ours): see [`priority_alive`].
pub(crate) const PRIORITY_ALIVE: &str = "redlatch_priority_alive";
/// Prefix of a lock's wait records (ours): see [`lock_waits`].
pub(crate) const LOCK_WAITS: &str = "redlatch_waits";
/// Prefix of a client's index of its owners' waits (ours): see [`client_waits`].
pub(crate) const CLIENT_WAITS: &str = "redlatch_waiting";
/// Prefix of the order records of a pair of locks (ours): see [`lock_order`].
pub(crate) const LOCK_ORDER: &str = "redlatch_order";
/// Prefix of a client's history stream (ours): see [`history`].
pub(crate) const HISTORY: &str = "redlatch_history";
/// Prefix of a client's who's-who for its history (ours): see [`history_who`].
pub(crate) const HISTORY_WHO: &str = "redlatch_history_who";
/// The broken deadlocks of a deployment (ours), a capped STREAM whose entries (see
/// `deadlock/record.rs`) name each member of a cycle: `v` the victim, `n` the number of
/// steps, and per step `i` (from 0) `o<i>` the owner, `l<i>` the lock's key it waited for,
/// `b<i>` the owner in its way, and where known `c<i>`, `h<i>`, `p<i>`, `t<i>` its client's
/// name, host, process id and its thread's name.
pub(crate) const DEADLOCKS: &str = "redlatch_deadlocks";
/// Suffix of a group lock's field holding when an owner's hold of a value ends (ms since the
/// epoch): `<value field>:<owner>:expire_time` (Redisson's `RedissonFasterMultiLock`, where
/// `<value field>` names the value's owner).
pub(crate) const GROUP_EXPIRE_TIME: &str = "expire_time";
/// Suffix of a group lock's field holding an owner's holds of a value:
/// `<value field>:<owner>:lock_count`.
pub(crate) const GROUP_LOCK_COUNT: &str = "lock_count";
/// What a force-unlock publishes on [`watch_channel`] before it deletes the lock.
pub(crate) const FORCED_MESSAGE: &str = "forced";
/// Suffix of a permit-expirable semaphore's permit expiries: `{name}:timeout`.
pub(crate) const PERMIT_TIMEOUTS: &str = "timeout";
/// What names one read hold's lease key, after the owner: `{name}:<owner>:rwlock_timeout:<n>`.
pub(crate) const READ_HOLD: &str = "rwlock_timeout";
/// Suffix of a writer's hash field in a read-write lock: `<owner>:write`.
pub(crate) const WRITE_FIELD: &str = "write";
/// The hash field of a read-write lock's mode ([`MODE_READ`] or [`MODE_WRITE`]).
pub(crate) const MODE_FIELD: &str = "mode";
/// A read-write lock's [`MODE_FIELD`] while only readers hold it.
pub(crate) const MODE_READ: &str = "read";
/// A read-write lock's [`MODE_FIELD`] while a writer holds it (and maybe reads too).
pub(crate) const MODE_WRITE: &str = "write";
/// The hash field of a [`FencedResource`](crate::FencedResource)'s fence that holds the newest
/// token (beside `holder`, who wrote or read for update with it).
pub(crate) const RESOURCE_TOKEN_FIELD: &str = "token";

/// The prefixes of helper keys `prefix:{name}` that stand for an object `name` (for `list`,
/// which groups keys under their object). Unlock latches come with a request id after the
/// name and are listed apart ([`UNLOCK_LATCH`]).
pub(crate) const TAGGED_HELPERS: [&str; 14] = [
    PRIORITY,
    PRIORITY_ALIVE,
    REVOKE,
    REVOKE_LOG,
    FAIR_QUEUE,
    SEMAPHORE_GENERATION,
    FAIR_TIMEOUTS,
    FAIR_TURN,
    FENCE_TOKEN,
    RESOURCE_FENCE,
    ELECTION,
    ELECTION_LOG,
    LOCK_WAITS,
    LOCK_SET_YIELD,
];

/// `prefix:{name}`, or `prefix:name` when the name carries its own hash tag (Redisson's
/// `prefixName`).
pub(crate) fn tagged(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `{name}:suffix`, or `name:suffix` when the name carries its own hash tag (Redisson's
/// `suffixName`).
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    format!("{}:{suffix}", hashed(name))
}

/// `{name}`, or the name itself when it carries its own hash tag: what every read-hold lease
/// key of a read-write lock starts with.
pub(crate) fn hashed(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// A group lock's field of `owner`'s holds of the value whose field (hash) is `value`.
pub(crate) fn group_count_field(value: &str, owner: &str) -> String {
    format!("{value}:{owner}:{GROUP_LOCK_COUNT}")
}

/// A group lock's field of when `owner`'s hold of the value `value` ends (ms since the epoch).
pub(crate) fn group_expire_field(value: &str, owner: &str) -> String {
    format!("{value}:{owner}:{GROUP_EXPIRE_TIME}")
}

/// The channel on which a lock's (plain, fenced) release is published: `0` wakes one waiter.
pub(crate) fn lock_channel(name: &str) -> String {
    tagged(LOCK_CHANNEL, name)
}

/// The owner of a lock set that just released `name` while somebody waited for it, for a
/// moment (`lua/lock_set_unlock.lua`): that owner's set leaves `name` to the waiter meanwhile.
pub(crate) fn lock_set_yield(name: &str) -> String {
    tagged(LOCK_SET_YIELD, name)
}

/// A fair lock's waiter `owner`'s own channel: `0` when its turn comes.
pub(crate) fn fair_waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

/// A fair lock's LIST of waiting owners, in arrival order.
pub(crate) fn fair_queue(name: &str) -> String {
    tagged(FAIR_QUEUE, name)
}

/// A fair lock's ZSET owner → deadline (ms on the server's clock).
pub(crate) fn fair_timeouts(name: &str) -> String {
    tagged(FAIR_TIMEOUTS, name)
}

/// A fair lock's running turn, the HASH `owner` (the head woken with the lock free), `chain`
/// (the deadline it had before, on which our newcomers chain) and `until` (its deadline now:
/// one thread wait after its turn started), expiring a second after `until`. Valid while the
/// head is `owner` and its deadline `until` (`lua/fair_common.lua`).
pub(crate) fn fair_turn(name: &str) -> String {
    tagged(FAIR_TURN, name)
}

/// A fenced lock's token counter (INCR on every acquire, never expires).
pub(crate) fn fence_token(name: &str) -> String {
    tagged(FENCE_TOKEN, name)
}

/// The short-lived key that makes a retried unlock idempotent: request number `request` of
/// the client with uuid `client` (a request id unique without drawing a random number, and
/// without a `:`, as Redisson's, so that the name parses back). Calls make it with
/// [`UnlockLatches`]; the tests with this.
#[cfg(test)]
pub(crate) fn unlock_latch(name: &str, client: &str, request: impl std::fmt::Display) -> String {
    format!("{}-{request}", UnlockLatches::new(name, client).prefix)
}

/// How long a receipt (an [`unlock_latch`] key holding a call's reply) lives, from when its
/// script ran: long enough for the call to be sent again after its reply was lost, or for a
/// settle, tried within a few seconds of the server answering, to read it. Those of calls
/// whose reply came are deleted sooner, with a later write, where the pool batches.
pub(crate) const RECEIPT_TTL: std::time::Duration = std::time::Duration::from_secs(20);

/// The [`unlock_latch`] keys of one lock and client, made without formatting per unlock; a
/// semaphore's acquire receipts (`lua/semaphore_acquire.lua`), a latch's receipts
/// (`lua/latch_receipt.lua`) and a condition's notify receipts (`lua/condition_notify.lua`)
/// are such keys too.
#[derive(Clone)]
pub(crate) struct UnlockLatches {
    /// Everything up to the request number.
    prefix: String,
}

impl UnlockLatches {
    pub(crate) fn new(name: &str, client: &str) -> UnlockLatches {
        UnlockLatches {
            prefix: format!("{}:{client}", tagged(UNLOCK_LATCH, name)),
        }
    }

    /// The latch of request number `request`: `unlock_latch(name, client, request)`.
    pub(crate) fn key(&self, request: u64) -> String {
        use std::fmt::Write;
        let mut key = String::with_capacity(self.prefix.len() + 21);
        key.push_str(&self.prefix);
        key.push('-');
        let _ = write!(key, "{request}");
        key
    }
}

/// A read-write lock's channel: `1` after a write release (wake all), `0` after a read
/// release frees it.
pub(crate) fn rw_channel(name: &str) -> String {
    tagged(RW_CHANNEL, name)
}

/// The hash field of `owner`'s write holds in a read-write lock.
pub(crate) fn write_field(owner: &str) -> String {
    format!("{owner}:{WRITE_FIELD}")
}

/// `{name}:<owner>:rwlock_timeout`: `owner`'s read holds are `<this>:<n>`, n = 1, 2, ...
pub(crate) fn read_holds(name: &str, owner: &str) -> String {
    format!("{}:{READ_HOLD}", suffixed(name, owner))
}

/// `owner`'s read hold number `n` (1, 2, ...) of a read-write lock:
/// `{name}:<owner>:rwlock_timeout:<n>`, a STRING whose PEXPIRE is the hold's lease.
pub(crate) fn read_hold(name: &str, owner: &str, n: impl std::fmt::Display) -> String {
    format!("{}:{n}", read_holds(name, owner))
}

/// An owner id, the hash field of a hold: `<client id>:<number>` (the number a thread's, or
/// a [`LockOwner`](crate::LockOwner)'s), as Redisson writes `<client id>:<thread id>`.
pub(crate) fn owner_id(client_id: &str, number: u64) -> String {
    format!("{client_id}:{number}")
}

/// An owner id split into its client id and number (the inverse of [`owner_id`]); `None`
/// for text of another form.
pub(crate) fn owner_parts(id: &str) -> Option<(&str, u64)> {
    let (client, number) = id.rsplit_once(':')?;
    if client.is_empty() || number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((client, number.parse().ok()?))
}

/// A redlatch connection's name (`CLIENT SETNAME`): `<prefix>:<client id>`, by which
/// `inspect` finds a holder's connections.
pub(crate) fn connection_name(prefix: &str, client_id: &str) -> String {
    format!("{prefix}:{client_id}")
}

/// The client id in a connection's name: what follows the last `:` (the inverse of
/// [`connection_name`]); `None` for a name without one.
pub(crate) fn connection_client_id(name: &str) -> Option<&str> {
    name.rsplit_once(':').map(|(_, id)| id)
}

/// The owner of a writer's hash field `<owner>:write` (the inverse of [`write_field`]);
/// `None` for any other field.
pub(crate) fn writer_of(field: &str) -> Option<&str> {
    field.strip_suffix(WRITE_FIELD)?.strip_suffix(':')
}

/// A read hold's lease key `{name}:<client id>:<thread>:rwlock_timeout:<n>` split into
/// `{name}` (the [`hashed`] name), the owner and `n` (the inverse of [`read_hold`]); `None`
/// for any other key.
pub(crate) fn split_read_hold(key: &str) -> Option<(&str, &str, &str)> {
    let (before, n) = key.rsplit_once(&format!(":{READ_HOLD}:"))?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (base, _) = before
        .rsplit_once(':')
        .and_then(|(b, _)| b.rsplit_once(':'))?;
    Some((base, &before[base.len() + 1..], n))
}

/// `key` without `prefix:` in front.
fn after<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    key.strip_prefix(prefix)?.strip_prefix(':')
}

/// Whether `key` is an unlock's short-lived idempotency key ([`unlock_latch`]).
pub(crate) fn is_unlock_latch(key: &str) -> bool {
    after(key, UNLOCK_LATCH).is_some()
}

/// Whether `key` is a client's index of its waits ([`client_waits`]): no object's key.
pub(crate) fn is_client_waits(key: &str) -> bool {
    after(key, CLIENT_WAITS).is_some()
}

/// Whether `key` is a client's history stream or its who's-who ([`history`],
/// [`history_who`]), or the deployment's broken deadlocks ([`DEADLOCKS`]): no object's key.
pub(crate) fn is_history(key: &str) -> bool {
    after(key, HISTORY).is_some() || after(key, HISTORY_WHO).is_some() || key == DEADLOCKS
}

/// Whether `key` holds the order records of a pair of locks ([`lock_order`]): no object's
/// key.
pub(crate) fn is_lock_order(key: &str) -> bool {
    after(key, LOCK_ORDER).is_some()
}

/// What stands for the object's name in `key`, if `key` is a helper key that belongs to an
/// object (a [`TAGGED_HELPERS`] key, a lock condition's key, an unlock latch, permit
/// expiries or a read hold): the [`hashed`] name, whose [`unhashed`] names are the objects it
/// may belong to.
pub(crate) fn helper_of(key: &str) -> Option<&str> {
    if let Some(rest) = TAGGED_HELPERS.iter().find_map(|p| after(key, p)) {
        return Some(rest);
    }
    if let Some(rest) = [CONDITION_WAITERS, CONDITION_QUEUE]
        .iter()
        .find_map(|p| after(key, p))
    {
        // `{lock}:<condition>`, read to the first `}:`; a lock named with its own tag,
        // `lock:<condition>`, read to the last `:`. (A lock name with `}:` in it, or a
        // condition name with `:` in it beside a lock of its own tag, is misread.)
        return match rest.find("}:") {
            Some(end) if rest.starts_with('{') => Some(&rest[..=end]),
            _ => rest.rsplit_once(':').map(|(lock, _condition)| lock),
        };
    }
    if let Some(rest) = after(key, UNLOCK_LATCH) {
        return rest.rsplit_once(':').map(|(name, _request)| name);
    }
    if let Some(base) = key
        .strip_suffix(PERMIT_TIMEOUTS)
        .and_then(|b| b.strip_suffix(':'))
    {
        return Some(base);
    }
    split_read_hold(key).map(|(base, _owner, _n)| base)
}

/// The names whose [`hashed`] form is `hashed` (the inverse of [`hashed`]): `{a}` is that of
/// `a` and of `{a}` itself, `{a}b` only that of `{a}b`, and a string without braces none.
pub(crate) fn unhashed(hashed: &str) -> Vec<String> {
    let inner = hashed.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
    match inner {
        Some(inner) if !inner.is_empty() && !inner.contains(['{', '}']) => {
            vec![inner.to_owned(), hashed.to_owned()]
        }
        _ if hashed.contains('{') => vec![hashed.to_owned()],
        _ => Vec::new(),
    }
}

/// A semaphore's channel (both kinds): the message is the new permit count.
pub(crate) fn semaphore_channel(name: &str) -> String {
    tagged(SEMAPHORE_CHANNEL, name)
}

/// A plain semaphore's generation: a STRING naming who made its count (an acquire of ours
/// writes one where there is none, a set of ours that makes the count writes a new one), with
/// the count's expiry. A guard's permits go back only into the generation they came from, so
/// that permits taken before a data loss never swell the semaphore made after it.
pub(crate) fn semaphore_generation(name: &str) -> String {
    tagged(SEMAPHORE_GENERATION, name)
}

/// A permit-expirable semaphore's ZSET permit id (its bytes: [`permit_member`]) → expiry (ms,
/// server clock).
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffixed(name, PERMIT_TIMEOUTS)
}

/// A permit's member in [`permit_timeouts`]: the bytes its id's hex text stands for, as
/// Redisson stores them (`RedissonPermitExpirableSemaphore`: `ByteBufUtil.decodeHexDump` of
/// the id, sent with `ByteArrayCodec`). Text that is not hex (no id either side makes) goes as
/// its own bytes: the member of no permit either side took.
pub(crate) fn permit_member(id: &str) -> Vec<u8> {
    hex::decode(id).unwrap_or_else(|_| id.as_bytes().to_vec())
}

/// A permit's id from its member in [`permit_timeouts`]: lowercase hex, as Redisson shows it.
pub(crate) fn permit_id(member: &[u8]) -> String {
    hex::encode(member)
}

/// A count-down latch's channel. Redisson always adds braces here, even to a name with its
/// own hash tag.
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A rate limiter's keys, as Redisson's `RRateLimiter` names them (`getRawName`,
/// `getValueName`, `getClientValueName`, `getPermitsName`, `getClientPermitsName`): the config
/// HASH `name`; the permits left `{name}:value` and this client's `{name}:value:<client id>`
/// (STRING); the permits taken `{name}:permits` and `{name}:permits:<client id>` (ZSET). All
/// in the slot of `name`. The per-client ones are the limiter's for type "1" (per client).
pub(crate) fn rate_keys(name: &str, client: &str) -> [String; 5] {
    let value = suffixed(name, RATE_VALUE);
    let permits = suffixed(name, RATE_PERMITS);
    let client_value = format!("{value}:{client}");
    let client_permits = format!("{permits}:{client}");
    [
        name.to_owned(),
        value,
        client_value,
        permits,
        client_permits,
    ]
}

/// A per-client rate limiter key, `{name}:value:<client id>` or `{name}:permits:<client
/// id>`, from the overall one ([`rate_keys`]).
pub(crate) fn rate_client_key(overall: &str, client: &str) -> String {
    format!("{overall}:{client}")
}

/// What stands for the limiter's name in `key`, if `key` is laid out as a rate limiter's
/// permits left or taken (`{name}:value`, `{name}:permits`, or either with `:<client id>`
/// after it): the [`hashed`] name (whose [`unhashed`] names are the limiters it may belong
/// to), and the client id of a per-client key. Application keys may look the same: `list`
/// groups such a key only under a name that is a rate limiter.
pub(crate) fn rate_helper_of(key: &str) -> Option<(&str, Option<&str>)> {
    fn base(k: &str) -> Option<&str> {
        [RATE_VALUE, RATE_PERMITS]
            .iter()
            .find_map(|suffix| k.strip_suffix(suffix)?.strip_suffix(':'))
            .filter(|hashed| hashed.contains('{'))
    }
    if let Some(hashed) = base(key) {
        return Some((hashed, None));
    }
    // A client id (a UUID, ours and Redisson's) has no `:`.
    let (rest, client) = key.rsplit_once(':')?;
    if client.is_empty() {
        return None;
    }
    Some((base(rest)?, Some(client)))
}

/// A rate limiter's channel (ours: Redisson's limiter has none): a release publishes the
/// permits left on it, a change of rate too, so that waiters take them at once.
pub(crate) fn rate_channel(name: &str) -> String {
    tagged(RATE_CHANNEL, name)
}

/// The channel a watch subscribes beside `channel`: `redlatch_watch:<channel>`, in the slot of
/// `channel` (the prefix has no brace, so the hash tag is the channel's).
///
/// A watch must hear the object's channels, but a subscriber of a channel counts as a waiting
/// client in `PUBSUB NUMSUB`, which `inspect` reads. Pattern subscriptions are not counted
/// there, but cluster nodes have no sharded pattern subscription, and a dispatcher connection
/// would speak two families of commands. So a watcher says what it is instead: it subscribes
/// this channel too, on the same connection, and `inspect` takes this channel's subscribers
/// off the channel's (one `PUBSUB NUMSUB` for both). A force-unlock publishes
/// [`FORCED_MESSAGE`] here before it deletes the lock, so that watchers tell it from a release.
pub(crate) fn watch_channel(channel: &str) -> String {
    format!("{WATCH_CHANNEL}:{channel}")
}

/// A [`FencedResource`](crate::FencedResource)'s fence: HASH `token`, `holder` of the
/// newest writer (or reader for update).
pub(crate) fn resource_fence(name: &str) -> String {
    tagged(RESOURCE_FENCE, name)
}

/// A condition's waiters, the ZSET waiter id → deadline (ms, server clock; -1 once a
/// notification picked it): `redlatch_condition:{lock}:<condition>`, in the lock's slot.
pub(crate) fn condition_waiters(lock: &str, condition: &str) -> String {
    format!("{}:{condition}", tagged(CONDITION_WAITERS, lock))
}

/// A condition's queue, the LIST of waiter ids not yet picked, in arrival order:
/// `redlatch_condition_queue:{lock}:<condition>`.
pub(crate) fn condition_queue(lock: &str, condition: &str) -> String {
    format!("{}:{condition}", tagged(CONDITION_QUEUE, lock))
}

/// The [`condition_queue`] beside the [`condition_waiters`] key `waiters` (what the
/// watchdog's renewal of a waiter knows).
pub(crate) fn condition_queue_of(waiters: &str) -> String {
    let rest = waiters.strip_prefix(CONDITION_WAITERS).unwrap_or(waiters);
    format!("{CONDITION_QUEUE}{rest}")
}

/// The prefix of a condition's waiter channels: a waiter `id` listens on
/// `redlatch_condition__channel:{lock}:<condition>:<id>` (see [`condition_waiter_channel`]).
pub(crate) fn condition_channel(lock: &str, condition: &str) -> String {
    format!("{}:{condition}", tagged(CONDITION_CHANNEL, lock))
}

/// The channel a notification of waiter `id` is published on: `1` once picked.
pub(crate) fn condition_waiter_channel(lock: &str, condition: &str, id: &str) -> String {
    format!("{}:{id}", condition_channel(lock, condition))
}

/// An election's leader record, HASH `term`, `value`, `owner`, `since` (ms, server clock):
/// `redlatch_election:{name}`, beside its fenced lock `name`.
pub(crate) fn election_leader(name: &str) -> String {
    tagged(ELECTION, name)
}

/// An election's log, a STREAM of every leader (`term`, `value`, `owner`, `since`), capped:
/// `redlatch_election_log:{name}`.
pub(crate) fn election_log(name: &str) -> String {
    tagged(ELECTION_LOG, name)
}

/// An election's channel: a new leader's (or value's) term, `0` when a leader resigns.
pub(crate) fn election_channel(name: &str) -> String {
    tagged(ELECTION_CHANNEL, name)
}

/// A plain or fenced lock's or a semaphore's queue of waiters with a priority, the ZSET
/// waiter -> rank (ms, server clock: join time minus priority times the aging step; lowest
/// first); a fair lock's ranks of the waiters in Redisson's queue: `redlatch_priority:{name}`,
/// in the lock's slot.
pub(crate) fn priority_queue(name: &str) -> String {
    tagged(PRIORITY, name)
}

/// The ends of those waiters' places, the ZSET owner -> ms (server clock), renewed at each
/// attempt: `redlatch_priority_alive:{name}`, in the lock's slot.
pub(crate) fn priority_alive(name: &str) -> String {
    tagged(PRIORITY_ALIVE, name)
}

/// A plain or fenced lock's pending revocation, the HASH of one request (who, whom, why,
/// its deadline's parts, and the holders' unpreemptible sections: `lua/revoke_common.lua`):
/// `redlatch_revoke:{name}`, in the lock's slot.
pub(crate) fn revoke(name: &str) -> String {
    tagged(REVOKE, name)
}

/// A lock's log of revocations, a capped STREAM of requests, notices, forced releases and
/// steals (`event`, `by`, `whom`, `token`, `reason`): `redlatch_revokes:{name}`, in the lock's
/// slot. Its scripts make it from the record's name ([`revoke`] with an `s`).
pub(crate) fn revoke_log(name: &str) -> String {
    tagged(REVOKE_LOG, name)
}

/// A lock's wait records, the HASH owner id -> `<expires> <since> <mode>` (ms, server clock;
/// the mode a letter: `x` exclusive, `f` fair, `r` read, `w` write) of each owner blocked on
/// it longer than a client's `deadlock_check_after`: `redlatch_waits:{name}`, in the lock's
/// slot.
pub(crate) fn lock_waits(name: &str) -> String {
    tagged(LOCK_WAITS, name)
}

/// A client's index of the locks its owners wait for, the HASH owner id ->
/// `<expires> <since> <lock>`: `redlatch_waiting:{<client id>}`. How a walk of the wait-for
/// graph learns what a holder waits for.
pub(crate) fn client_waits(client_id: &str) -> String {
    tagged(CLIENT_WAITS, client_id)
}

/// The order records of the locks `first` and `second` (keys, `first` < `second` in byte
/// order), the HASH `<d><held mode><taken mode>` -> `<ms> <who and where>` (see
/// `lua/lock_order.lua`), plus the two names: `redlatch_order:<bytes of first>:<first>:<second>`.
/// One key per pair, touched alone by its script, so it needs no slot of its own.
pub(crate) fn lock_order(first: &str, second: &str) -> String {
    format!("{LOCK_ORDER}:{}:{first}:{second}", first.len())
}

/// A client's history, a capped STREAM of events (fields in `history/event.rs`):
/// `redlatch_history:{<client uuid>}`.
pub(crate) fn history(client_id: &str) -> String {
    tagged(HISTORY, client_id)
}

/// The client id of the history stream `key` ([`history`]), if it is one.
pub(crate) fn history_client(key: &str) -> Option<&str> {
    after(key, HISTORY)?.strip_prefix('{')?.strip_suffix('}')
}

/// Who a client's history stream is from, the HASH `client`, `host`, `pid` and
/// `thread:<owner>` -> the owner's thread name: `redlatch_history_who:{<client uuid>}`, in the
/// stream's slot.
pub(crate) fn history_who(client_id: &str) -> String {
    tagged(HISTORY_WHO, client_id)
}

/// The keys and channels of the object `name`, in Redisson's layout: what `inspect` reads and
/// `watch` subscribes.
pub(crate) struct Layout {
    pub(crate) name: String,
    pub(crate) queue: String,
    pub(crate) timeouts: String,
    pub(crate) token: String,
    pub(crate) permits: String,
    pub(crate) fence: String,
    pub(crate) generation: String,
    /// `{name}`: what every read-hold lease key starts with.
    pub(crate) read_prefix: String,
    pub(crate) lock_channel: String,
    pub(crate) rw_channel: String,
    pub(crate) semaphore_channel: String,
    pub(crate) latch_channel: String,
    /// A rate limiter's permits left `{name}:value` (overall).
    pub(crate) rate_value: String,
    /// A rate limiter's permits taken `{name}:permits` (overall).
    pub(crate) rate_permits: String,
    pub(crate) rate_channel: String,
    /// Waiters with a priority: their ranks, and their places' ends.
    pub(crate) priority: String,
    pub(crate) priority_alive: String,
}

impl Layout {
    pub(crate) fn new(name: &str) -> Layout {
        Layout {
            name: name.to_owned(),
            queue: fair_queue(name),
            timeouts: fair_timeouts(name),
            token: fence_token(name),
            permits: permit_timeouts(name),
            fence: resource_fence(name),
            generation: semaphore_generation(name),
            read_prefix: hashed(name),
            lock_channel: lock_channel(name),
            rw_channel: rw_channel(name),
            semaphore_channel: semaphore_channel(name),
            latch_channel: latch_channel(name),
            rate_value: suffixed(name, RATE_VALUE),
            rate_permits: suffixed(name, RATE_PERMITS),
            rate_channel: rate_channel(name),
            priority: priority_queue(name),
            priority_alive: priority_alive(name),
        }
    }

    /// Every channel a waiter on any kind of object `name` listens on (but a fair lock's
    /// per-waiter channels).
    #[cfg(test)]
    pub(crate) fn channels(&self) -> [&str; 4] {
        [
            &self.lock_channel,
            &self.rw_channel,
            &self.semaphore_channel,
            &self.latch_channel,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key and channel of an object `name`, written as the docs' key-layout tables
    /// write them (`<owner>`, `<request id>`, `<n>` for the parts that vary).
    fn documented_keys() -> Vec<String> {
        let layout = Layout::new("name");
        let mut keys: Vec<String> = layout.channels().map(str::to_owned).to_vec();
        keys.extend([
            layout.name,
            layout.queue,
            layout.timeouts,
            layout.token,
            layout.permits,
            layout.fence,
            layout.generation,
            fair_turn("name"),
            unlock_latch("name", "<client uuid>", "<n>"),
            fair_waiter_channel("name", "<owner>"),
            read_hold("name", "<owner>", "<n>"),
            watch_channel("<channel>"),
            condition_waiters("name", "<condition>"),
            condition_queue("name", "<condition>"),
            condition_waiter_channel("name", "<condition>", "<waiter>"),
            election_leader("name"),
            election_log("name"),
            election_channel("name"),
            lock_waits("name"),
            lock_set_yield("name"),
            revoke("name"),
            revoke_log("name"),
            priority_queue("name"),
            priority_alive("name"),
            client_waits("<client uuid>"),
            // `<n>`: the first name's length, here that of `<first>`.
            lock_order("<first>", "<second>").replacen(":7:", ":<n>:", 1),
            history("<client uuid>"),
            history_who("<client uuid>"),
            DEADLOCKS.to_owned(),
            rate_channel("name"),
        ]);
        keys.extend(rate_keys("name", "<client id>").into_iter().skip(1));
        keys
    }

    /// The rows of the "Key layout (Redisson's)" table in `doc` (crate docs or markdown).
    fn key_table(doc: &str) -> Vec<&str> {
        doc.lines()
            .map(|line| line.trim_start_matches("//!").trim())
            .skip_while(|line| !line.ends_with("Key layout (Redisson's)"))
            .skip(1)
            .skip_while(|line| line.is_empty())
            .take_while(|line| line.starts_with('|'))
            .collect()
    }

    /// The `code` spans of a table row.
    fn spans(row: &str) -> impl Iterator<Item = &str> {
        row.split('`').skip(1).step_by(2)
    }

    #[test]
    fn the_docs_key_tables_list_what_this_module_produces() {
        let keys = documented_keys();
        let fields = [
            MODE_FIELD.to_owned(),
            write_field("<owner>"),
            RESOURCE_TOKEN_FIELD.to_owned(),
        ];
        let docs = [
            ("src/lib.rs", include_str!("lib.rs")),
            (
                "src/_guide/internals.md",
                include_str!("_guide/internals.md"),
            ),
        ];
        for (file, doc) in docs {
            let rows = key_table(doc);
            assert!(rows.len() > 10, "{file}: no key-layout table found");
            let listed: Vec<&str> = rows.iter().flat_map(|row| spans(row)).collect();
            for name in keys.iter().chain(&fields) {
                assert!(
                    listed.contains(&name.as_str()),
                    "{file} does not list `{name}`"
                );
            }
            // And no key or channel the module does not produce.
            for span in listed {
                let key_like = span.contains("name")
                    || span.starts_with("redisson")
                    || span.starts_with("redlatch_");
                assert!(
                    !key_like || keys.iter().any(|k| k == span),
                    "{file} lists `{span}`, which keys.rs does not produce"
                );
            }
        }
    }

    #[test]
    fn helper_keys_share_the_object_slot() {
        assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
        assert_eq!(
            lock_channel("{user:1}:cart"),
            "redisson_lock__channel:{user:1}:cart"
        );
        assert_eq!(permit_timeouts("sem"), "{sem}:timeout");
        assert_eq!(
            watch_channel(&latch_channel("{a}b")),
            "redlatch_watch:redisson_countdownlatch__channel__{{a}b}"
        );
        assert_eq!(permit_timeouts("{a}b"), "{a}b:timeout");
        assert_eq!(read_holds("rw", "u:7"), "{rw}:u:7:rwlock_timeout");
        assert_eq!(hashed("{a}b"), "{a}b");
        assert_eq!(
            condition_waiters("jobs", "ready"),
            "redlatch_condition:{jobs}:ready"
        );
        assert_eq!(
            condition_queue_of(&condition_waiters("{a}b", "x:y")),
            condition_queue("{a}b", "x:y")
        );
        assert_eq!(
            condition_waiter_channel("jobs", "ready", "u:1:2"),
            "redlatch_condition__channel:{jobs}:ready:u:1:2"
        );
        assert_eq!(
            latch_channel("{a}b"),
            "redisson_countdownlatch__channel__{{a}b}"
        );
    }

    #[test]
    fn helper_keys_parse_back_to_their_object() {
        for name in ["orders", "{user:1}:cart", "a{b", "{x}"] {
            let helpers = [
                fair_queue(name),
                fair_timeouts(name),
                fair_turn(name),
                fence_token(name),
                resource_fence(name),
                unlock_latch(name, "00ff", 1),
                permit_timeouts(name),
                read_hold(name, "c:7", 2),
            ];
            for key in helpers {
                let names = helper_of(&key).map(unhashed).unwrap_or_default();
                assert!(names.iter().any(|n| n == name), "{key}: {names:?}");
            }
            assert!(is_unlock_latch(&unlock_latch(name, "00ff", 1)));
            assert_eq!(
                UnlockLatches::new(name, "00ff").key(17),
                unlock_latch(name, "00ff", 17)
            );
        }
        assert_eq!(
            split_read_hold(&read_hold("{a}b", "c:7", 12)),
            Some(("{a}b", "c:7", "12"))
        );
        assert_eq!(split_read_hold("{rw}:c:7:rwlock_timeout:x"), None);
        assert_eq!(writer_of(&write_field("c:7")), Some("c:7"));
        assert_eq!(writer_of("c:7"), None);
        assert!(helper_of(&lock_channel("orders")).is_none());
        assert!(!is_unlock_latch(&fair_queue("orders")));
    }

    #[test]
    fn rate_limiter_keys_parse_back_to_their_limiter_and_client() {
        let client = "0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c";
        for name in ["api", "{user:1}:api", "a:value", "{x}"] {
            let [config, value, client_value, permits, client_permits] = rate_keys(name, client);
            assert_eq!(Layout::new(name).rate_value, value);
            assert_eq!(Layout::new(name).rate_permits, permits);
            assert_eq!(rate_client_key(&value, client), client_value);
            for (key, id) in [
                (&value, None),
                (&permits, None),
                (&client_value, Some(client)),
                (&client_permits, Some(client)),
            ] {
                let (hashed, found) = rate_helper_of(key).unwrap_or_else(|| panic!("{key}"));
                assert!(unhashed(hashed).contains(&config), "{key}: {hashed}");
                assert_eq!(found, id, "{key}");
            }
        }
        assert_eq!(rate_helper_of("session:value"), None, "no hashed name");
        assert_eq!(rate_helper_of("{a}:values"), None);
        assert_eq!(rate_helper_of("{a}:value:"), None);
        assert_eq!(rate_helper_of("orders"), None);
    }
}
