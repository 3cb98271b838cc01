//! The inspect script's reply: decoding, and telling the kind from the keys' types and layout.

use redis::Value;

use super::decode::{
    int, integer, items, lease, lossy, pairs, permit_leases, quoted, scored, text, until,
};
use super::rate::RateReply;
use super::report::{
    ExpirablePermit, GroupValue, Holder, Inspection, Kind, PriorityWaiter, QueueEntry,
};
use crate::error::{Error, Result};
use crate::hold::LockKind;
use crate::hold::Owner;
use crate::keys::{
    group_count_field, group_expire_field, read_hold, writer_of, Layout, GROUP_EXPIRE_TIME,
    GROUP_LOCK_COUNT, MODE_FIELD, MODE_READ, MODE_WRITE,
};
use crate::lock::PRIORITY_AGING;

/// Fencing-token and permit-expiry scores at or above this never expire (Redisson's bound).
const NEVER_MS: f64 = 922_337_203_685_477.0;

/// The inspect script's reply, decoded.
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    now: i64,
    /// TYPE of the name, queue, timeouts, token, permits, fence.
    types: [String; 6],
    main: Main,
    pttl: i64,
    queue: Vec<String>,
    timeouts: Vec<(String, f64)>,
    token: Option<String>,
    permits: Vec<(String, f64)>,
    fence: Option<String>,
    /// Reader field → PTTL of each of its read holds.
    reads: Vec<(String, Vec<i64>)>,
    /// Some value was not UTF-8 (decoded lossily): the object is another application's.
    garbled: bool,
    /// A plain semaphore's generation (ours) is beside the name.
    generation: bool,
    /// The name is a HASH with a complete rate limiter config: its buckets.
    rate: Option<RateReply>,
    /// Waiters with a priority, lowest rank first: id, rank (ms), the end of its place
    /// (ms; -1 for none).
    priority: Vec<(String, i64, i64)>,
}

/// The value of the key `name`, when the script read it.
#[derive(Debug, Default)]
enum Main {
    Hash(Vec<(String, String)>),
    String(String),
    #[default]
    Unread,
}

impl Snapshot {
    /// Decodes the script's reply. Values that are not UTF-8 (another application's
    /// bytes) make it [`garbled`](Self::garbled), not an error.
    pub(super) fn decode(reply: &Value) -> Result<Snapshot> {
        if let Some(snapshot) = Snapshot::try_decode(reply, text) {
            return Ok(snapshot);
        }
        match Snapshot::try_decode(reply, lossy) {
            Some(snapshot) => Ok(Snapshot {
                garbled: true,
                ..snapshot
            }),
            None => Err(Error::Protocol(format!(
                "inspect script replied {}",
                quoted(reply)
            ))),
        }
    }

    fn try_decode(reply: &Value, text: fn(&Value) -> Option<String>) -> Option<Snapshot> {
        let (generation, rate, priority, fields) = match items(reply)? {
            [rest @ .., Value::Int(g), rate, priority] if rest.len() == 10 => {
                let priority = items(priority)?
                    .chunks(3)
                    .map(|w| match w {
                        [id, rank, ends] => Some((text(id)?, int(rank)?, int(ends)?)),
                        _ => None,
                    })
                    .collect::<Option<_>>()?;
                (*g == 1, RateReply::decode(rate, text)?, priority, rest)
            }
            [rest @ .., Value::Int(g), rate] if rest.len() == 10 => {
                (*g == 1, RateReply::decode(rate, text)?, Vec::new(), rest)
            }
            [rest @ .., Value::Int(g)] if rest.len() == 10 => (*g == 1, None, Vec::new(), rest),
            all => (false, None, Vec::new(), all),
        };
        let [now, types, main, pttl, queue, timeouts, token, permits, fence, reads] = fields else {
            return None;
        };
        let types: Vec<String> = items(types)?.iter().map(text).collect::<Option<_>>()?;
        let main = match main {
            Value::Nil => Main::Unread,
            Value::Array(_) => Main::Hash(pairs(main, text)?),
            other => Main::String(text(other)?),
        };
        let reads = items(reads)?
            .chunks(2)
            .map(|p| match p {
                [field, ttls] => Some((
                    text(field)?,
                    items(ttls)?.iter().map(int).collect::<Option<_>>()?,
                )),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let optional = |v: &Value| match v {
            Value::Nil => Some(None),
            other => text(other).map(Some),
        };
        Some(Snapshot {
            now: int(now)?,
            types: types.try_into().ok()?,
            main,
            pttl: int(pttl)?,
            queue: items(queue)?.iter().map(text).collect::<Option<_>>()?,
            timeouts: scored(timeouts, text)?,
            token: optional(token)?,
            permits: permit_leases(permits, text)?,
            fence: optional(fence)?,
            reads,
            generation,
            rate,
            priority,
            garbled: false,
        })
    }

    /// What the snapshot shows: `None` when nothing of the name exists.
    pub(super) fn classify(&self, layout: &Layout) -> Option<Inspection> {
        let present = |i: usize| self.types[i] != "none";
        let mut keys: Vec<String> = [
            &layout.name,
            &layout.queue,
            &layout.timeouts,
            &layout.token,
            &layout.permits,
            &layout.fence,
        ]
        .iter()
        .enumerate()
        .filter(|&(i, _)| present(i))
        .map(|(_, k)| (*k).clone())
        .collect();
        if self.generation {
            keys.push(layout.generation.clone());
        }
        if keys.is_empty() {
            return None;
        }
        // What is known of any name: its type and lease; the rest is read per layout.
        let blank = Inspection {
            name: layout.name.clone(),
            kind: Kind::Unknown,
            key_type: self.types[0].clone(),
            keys: Vec::new(),
            lease: lease(self.pttl),
            holders: Vec::new(),
            mode: None,
            readers: Vec::new(),
            queue: Vec::new(),
            permits: None,
            count: None,
            permit_leases: Vec::new(),
            token: None,
            values: Vec::new(),
            rate: None,
            priorities: Vec::new(),
            subscribers: None,
        };
        let mut found = blank.clone();
        // A rate limiter's keys beside its config.
        let mut rate_keys = Vec::new();
        let fair = self.types[1] == "list" || self.types[2] == "zset";
        let fenced = self.types[3] == "string";
        let expirable = self.types[4] == "zset";
        let resource = self.types[5] == "hash";
        // Helper keys of another type than their layout's, or of two layouts at once, make
        // it unknown: the name is not (only) ours.
        let odd_helpers = [
            (1, "list"),
            (2, "zset"),
            (3, "string"),
            (4, "zset"),
            (5, "hash"),
        ]
        .iter()
        .any(|&(i, t)| present(i) && self.types[i] != t);
        let layouts = [fair, fenced, expirable, resource]
            .iter()
            .filter(|&&b| b)
            .count();
        let known = !self.garbled
            && !odd_helpers
            && layouts <= 1
            && match (self.types[0].as_str(), &self.main) {
                ("hash", Main::Hash(fields)) if self.rate.is_some() => {
                    layouts == 0 && self.limiter(fields, layout, &mut found, &mut rate_keys)
                }
                ("hash", Main::Hash(fields)) if !expirable && !resource => {
                    self.lock(fields, fair, fenced, &mut found)
                }
                ("string", Main::String(value)) if !fair && !fenced => {
                    self.counter(value, expirable, resource, &mut found)
                }
                ("none", _) => self.helpers_only(fair, fenced, expirable, resource, &mut found),
                _ => false,
            };
        if !known {
            found = Inspection {
                keys: found.keys,
                lease: found.lease,
                subscribers: found.subscribers,
                ..blank
            };
        } else {
            keys.extend(rate_keys);
            self.priorities(layout, &mut found, &mut keys);
        }
        // Lossily decoded fields would name keys that do not exist.
        let reads = if self.garbled { &[][..] } else { &self.reads };
        for (field, ttls) in reads {
            for (n, ttl) in ttls.iter().enumerate() {
                if *ttl != -2 {
                    keys.push(read_hold(&layout.name, field, n + 1));
                }
            }
        }
        found.keys = keys;
        Some(found)
    }

    /// The waiters with a priority, highest effective priority first, and their keys.
    fn priorities(&self, layout: &Layout, found: &mut Inspection, keys: &mut Vec<String>) {
        if self.priority.is_empty() {
            return;
        }
        keys.push(layout.priority.clone());
        if self.priority.iter().any(|&(_, _, ends)| ends >= 0) {
            keys.push(layout.priority_alive.clone());
        }
        let aging = PRIORITY_AGING.as_millis() as f64;
        // A fair lock's ranks may name waiters gone since the last acquire with a priority.
        let fair = self.types[1] == "list";
        found.priorities = self
            .priority
            .iter()
            .filter(|(id, _, _)| !fair || self.queue.contains(id))
            .map(|(id, rank, ends)| PriorityWaiter {
                id: id.clone(),
                effective: (self.now - rank) as f64 / aging,
                place_ends_in: (*ends >= 0).then(|| until(self.now, *ends as f64)),
            })
            .collect();
    }

    /// A lock HASH: plain, fair, fenced or read-write. False if a field does not fit.
    fn lock(
        &self,
        fields: &[(String, String)],
        fair: bool,
        fenced: bool,
        found: &mut Inspection,
    ) -> bool {
        let count = |v: &str| v.parse::<u32>().ok().filter(|&n| n > 0);
        // Every field of the other locks but `mode` names an owner (`<client id>:<thread>`,
        // or ends in one); a group's value fields are base64, without a `:`.
        if fields
            .iter()
            .any(|(f, _)| !f.contains(':') && f != MODE_FIELD)
            && !fair
            && !fenced
        {
            return self.group(fields, found);
        }
        let mode = fields.iter().find(|(f, _)| f == MODE_FIELD).map(|(_, v)| v);
        let Some(mode) = mode else {
            found.kind = match (fair, fenced) {
                (true, _) => Kind::Fair,
                (_, true) => Kind::Fenced,
                _ => Kind::Reentrant,
            };
            for (field, value) in fields {
                let (Some(owner), Some(holds)) = (Owner::parse(field), count(value)) else {
                    return false;
                };
                found.holders.push(Holder {
                    owner,
                    holds,
                    read_leases: Vec::new(),
                    connections: None,
                });
            }
            return self.queue(found) && self.token(found);
        };
        if fair || fenced {
            return false;
        }
        found.kind = Kind::ReadWrite;
        found.mode = match mode.as_str() {
            MODE_READ => Some(LockKind::Read),
            MODE_WRITE => Some(LockKind::Write),
            _ => return false,
        };
        for (field, value) in fields.iter().filter(|(f, _)| f != MODE_FIELD) {
            let Some(holds) = count(value) else {
                return false;
            };
            if let Some(writer) = writer_of(field) {
                let Some(owner) = Owner::parse(writer) else {
                    return false;
                };
                found.holders.push(Holder {
                    owner,
                    holds,
                    read_leases: Vec::new(),
                    connections: None,
                });
                continue;
            }
            let Some(owner) = Owner::parse(field) else {
                return false;
            };
            let ttls = self.reads.iter().find(|(f, _)| f == field);
            let read_leases = ttls
                .map(|(_, t)| t.iter().map(|&ms| lease(ms)).collect())
                .unwrap_or_default();
            found.readers.push(Holder {
                owner,
                holds,
                read_leases,
                connections: None,
            });
        }
        // A write mode has one writer; a read mode none.
        let writers = found.holders.len();
        (found.mode == Some(LockKind::Write)) == (writers == 1) && writers <= 1
    }

    /// A rate limiter's config HASH (told by the script, which read its buckets): every
    /// field a config's. False if one is not, or a bucket's key is of another type.
    fn limiter(
        &self,
        fields: &[(String, String)],
        layout: &Layout,
        found: &mut Inspection,
        keys: &mut Vec<String>,
    ) -> bool {
        let Some((rate, rate_keys)) = self.rate.as_ref().and_then(|r| r.inspect(fields, layout))
        else {
            return false;
        };
        found.kind = Kind::RateLimiter;
        found.rate = Some(rate);
        *keys = rate_keys;
        true
    }

    /// A group lock's HASH: each value field names its owner, beside that owner's
    /// `expire_time` and `lock_count` of it. A value whose time has passed is free (its
    /// fields stay until the group goes). False if a field does not fit.
    fn group(&self, fields: &[(String, String)], found: &mut Inspection) -> bool {
        found.kind = Kind::Group;
        let get = |name: &str| {
            fields
                .iter()
                .find(|(f, _)| f == name)
                .map(|(_, v)| v.as_str())
        };
        let suffixes = [GROUP_EXPIRE_TIME, GROUP_LOCK_COUNT];
        let fits = |f: &str| {
            f.rsplit_once(':')
                .is_some_and(|(_, suffix)| suffixes.contains(&suffix))
        };
        for (field, holder) in fields {
            if field.contains(':') {
                if !fits(field) {
                    return false;
                }
                continue;
            }
            let Some(owner) = Owner::parse(holder) else {
                return false;
            };
            let holds = get(&group_count_field(field, holder)).and_then(|v| v.parse::<u32>().ok());
            let expire =
                get(&group_expire_field(field, holder)).and_then(|v| v.parse::<i64>().ok());
            let (Some(holds), Some(expire)) = (holds, expire) else {
                return false;
            };
            if expire < self.now || holds == 0 {
                continue;
            }
            match found.holders.iter_mut().find(|h| h.owner == owner) {
                Some(h) => h.holds += 1,
                None => found.holders.push(Holder {
                    owner: owner.clone(),
                    holds: 1,
                    read_leases: Vec::new(),
                    connections: None,
                }),
            }
            found.values.push(GroupValue {
                field: field.clone(),
                owner,
                holds,
                lease: std::time::Duration::from_millis((expire - self.now) as u64),
            });
        }
        found.values.sort_by(|a, b| a.field.cmp(&b.field));
        true
    }

    /// A STRING count: a semaphore's permits or a latch's count; or a fenced resource's value.
    fn counter(
        &self,
        value: &str,
        expirable: bool,
        resource: bool,
        found: &mut Inspection,
    ) -> bool {
        if resource {
            found.kind = Kind::FencedResource;
            return self.fence(found);
        }
        let Some(n) = integer(value) else {
            return false;
        };
        found.permits = Some(n);
        if expirable {
            found.kind = Kind::PermitExpirableSemaphore;
            return self.permit_leases(found);
        }
        // Our acquires and set-ups write a plain semaphore's generation beside its count.
        if self.generation {
            found.kind = Kind::Semaphore;
            return true;
        }
        // A latch's key goes when its count reaches zero (Redisson's countDown deletes it at
        // zero or below, and a count is set to 1 or more): zero or less is a semaphore's.
        if n <= 0 {
            found.kind = Kind::Semaphore;
            return true;
        }
        found.kind = Kind::SemaphoreOrLatch;
        found.count = Some(n);
        true
    }

    /// No key `name`, only helper keys: a free fair or fenced lock, a permit-expirable
    /// semaphore whose count key is gone (0 permits), or a deleted fenced value.
    fn helpers_only(
        &self,
        fair: bool,
        fenced: bool,
        expirable: bool,
        resource: bool,
        found: &mut Inspection,
    ) -> bool {
        if fair {
            found.kind = Kind::Fair;
            self.queue(found)
        } else if fenced {
            found.kind = Kind::Fenced;
            self.token(found)
        } else if expirable {
            found.kind = Kind::PermitExpirableSemaphore;
            found.permits = Some(0);
            self.permit_leases(found)
        } else if resource {
            found.kind = Kind::FencedResource;
            self.fence(found)
        } else {
            false
        }
    }

    fn queue(&self, found: &mut Inspection) -> bool {
        for waiter in &self.queue {
            let Some(owner) = Owner::parse(waiter) else {
                return false;
            };
            let deadline = self
                .timeouts
                .iter()
                .find(|(o, _)| o == waiter)
                .map(|&(_, at)| until(self.now, at));
            found.queue.push(QueueEntry {
                owner,
                deadline,
                connections: None,
            });
        }
        true
    }

    fn token(&self, found: &mut Inspection) -> bool {
        read_token(&self.token, found)
    }

    fn fence(&self, found: &mut Inspection) -> bool {
        read_token(&self.fence, found)
    }

    fn permit_leases(&self, found: &mut Inspection) -> bool {
        found.permit_leases = self
            .permits
            .iter()
            .map(|(id, at)| ExpirablePermit {
                id: id.clone(),
                expires_in: (*at < NEVER_MS).then(|| until(self.now, *at)),
            })
            .collect();
        true
    }
}

/// A token counter's value (none: fine), which must be a number.
fn read_token(value: &Option<String>, found: &mut Inspection) -> bool {
    match value {
        None => true,
        Some(t) => {
            found.token = t.parse().ok();
            found.token.is_some()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const A: &str = "0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:7";
    const B: &str = "9f3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:12";

    fn snapshot(types: [&str; 6]) -> Snapshot {
        Snapshot {
            now: 1_000_000,
            types: types.map(str::to_owned),
            pttl: if types[0] == "none" { -2 } else { 29_800 },
            ..Snapshot::default()
        }
    }

    fn hash(fields: &[(&str, &str)]) -> Main {
        Main::Hash(
            fields
                .iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn classify(s: &Snapshot) -> Option<Inspection> {
        s.classify(&Layout::new("x"))
    }

    const NONE: &str = "none";

    #[test]
    fn reentrant_lock_with_holder_and_lease() {
        let mut s = snapshot(["hash", NONE, NONE, NONE, NONE, NONE]);
        s.main = hash(&[(A, "2")]);
        let found = classify(&s).unwrap();
        assert_eq!(found.kind, Kind::Reentrant);
        assert_eq!(found.holders[0].owner, Owner::parse(A).unwrap());
        assert_eq!(found.holders[0].holds, 2);
        assert_eq!(found.lease, Some(Duration::from_millis(29_800)));
        assert_eq!(found.keys, vec!["x".to_owned()]);
    }

    #[test]
    fn fair_lock_queue_keeps_order_and_deadlines() {
        let mut s = snapshot(["hash", "list", "zset", NONE, NONE, NONE]);
        s.main = hash(&[(A, "1")]);
        s.queue = vec![B.to_owned(), A.to_owned()];
        s.timeouts = vec![(B.to_owned(), 1_005_000.0), (A.to_owned(), 999_000.0)];
        let found = classify(&s).unwrap();
        assert_eq!(found.kind, Kind::Fair);
        assert_eq!(found.queue[0].owner.thread, 12);
        assert_eq!(found.queue[0].deadline, Some(Duration::from_secs(5)));
        assert_eq!(found.queue[1].deadline, Some(Duration::ZERO));
        assert_eq!(
            found.keys,
            ["x", "redisson_lock_queue:{x}", "redisson_lock_timeout:{x}"]
        );
    }

    #[test]
    fn free_fenced_lock_is_its_token_counter() {
        let mut s = snapshot([NONE, NONE, NONE, "string", NONE, NONE]);
        s.token = Some("42".to_owned());
        let found = classify(&s).unwrap();
        assert_eq!(
            (found.kind, found.token, found.lease),
            (Kind::Fenced, Some(42), None)
        );
        assert!(found.holders.is_empty());
    }

    #[test]
    fn read_write_lock_readers_with_hold_leases() {
        let mut s = snapshot(["hash", NONE, NONE, NONE, NONE, NONE]);
        s.main = hash(&[("mode", "read"), (A, "2"), (B, "1")]);
        s.reads = vec![
            (A.to_owned(), vec![30_000, -2]),
            (B.to_owned(), vec![10_000]),
        ];
        let found = classify(&s).unwrap();
        assert_eq!(
            (found.kind, found.mode),
            (Kind::ReadWrite, Some(LockKind::Read))
        );
        assert!(found.holders.is_empty());
        assert_eq!(found.readers.len(), 2);
        assert_eq!(
            found.readers[0].read_leases,
            vec![Some(Duration::from_secs(30)), None]
        );
        assert_eq!(found.keys[1], format!("{{x}}:{A}:rwlock_timeout:1"));
        assert_eq!(found.keys.len(), 3);

        let mut s = snapshot(["hash", NONE, NONE, NONE, NONE, NONE]);
        s.main = hash(&[("mode", "write"), (&format!("{A}:write"), "1"), (A, "1")]);
        let found = classify(&s).unwrap();
        assert_eq!(found.holders[0].owner, Owner::parse(A).unwrap());
        assert_eq!(found.readers.len(), 1);
    }

    #[test]
    fn strings_are_counts_and_ambiguous_until_waiters_tell() {
        let mut s = snapshot(["string", NONE, NONE, NONE, NONE, NONE]);
        s.main = Main::String("3".to_owned());
        let found = classify(&s).unwrap();
        assert_eq!(found.kind, Kind::SemaphoreOrLatch);
        assert_eq!((found.permits, found.count), (Some(3), Some(3)));
        // No latch is at zero or below (its key goes at zero): a semaphore's permits.
        for value in ["0", "-2"] {
            s.main = Main::String(value.to_owned());
            let found = classify(&s).unwrap();
            assert_eq!(found.kind, Kind::Semaphore, "{value}");
            assert_eq!(found.count, None);
        }

        let mut s = snapshot(["string", NONE, NONE, NONE, "zset", NONE]);
        s.main = Main::String("1".to_owned());
        s.permits = vec![("p1".to_owned(), 1_060_000.0), ("p2".to_owned(), NEVER_MS)];
        let found = classify(&s).unwrap();
        assert_eq!(found.kind, Kind::PermitExpirableSemaphore);
        assert_eq!(
            found.permit_leases[0].expires_in,
            Some(Duration::from_secs(60))
        );
        assert_eq!(found.permit_leases[1].expires_in, None);
    }

    #[test]
    fn foreign_layouts_are_unknown_not_guessed() {
        let unknown = |s: &Snapshot| classify(s).unwrap().kind == Kind::Unknown;
        let mut s = snapshot(["hash", NONE, NONE, NONE, NONE, NONE]);
        s.main = hash(&[("name", "alice")]);
        assert!(unknown(&s), "a hash whose fields are not owners");
        s.main = hash(&[(A, "zero")]);
        assert!(unknown(&s), "a hold count that is not a number");
        s.main = hash(&[("mode", "upgrade"), (A, "1")]);
        assert!(unknown(&s), "a mode that is neither read nor write");
        let mut s = snapshot(["string", NONE, NONE, NONE, NONE, NONE]);
        s.main = Main::String("007".to_owned());
        assert!(unknown(&s), "not a canonical integer");
        s.main = Main::Unread;
        assert!(unknown(&s), "a string too long to be a count");
        let s = snapshot(["set", NONE, NONE, NONE, NONE, NONE]);
        assert!(unknown(&s));
        let mut s = snapshot(["hash", "list", NONE, "string", NONE, NONE]);
        s.main = hash(&[(A, "1")]);
        s.token = Some("1".to_owned());
        assert!(unknown(&s), "fair and fenced at once");
        let s = snapshot([NONE, "string", NONE, NONE, NONE, NONE]);
        assert!(unknown(&s), "a queue key that is not a list");
    }

    #[test]
    fn nothing_is_none() {
        assert!(classify(&snapshot([NONE; 6])).is_none());
    }

    #[test]
    fn decodes_the_script_reply() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let types = Value::Array(
            ["hash", "none", "none", "string", "none", "none"]
                .map(bulk)
                .to_vec(),
        );
        let reply = Value::Array(vec![
            Value::Int(5),
            types,
            Value::Array(vec![bulk(A), bulk("1")]),
            Value::Int(100),
            Value::Array(vec![]),
            Value::Array(vec![]),
            bulk("9"),
            Value::Array(vec![]),
            Value::Nil,
            Value::Array(vec![]),
        ]);
        let s = Snapshot::decode(&reply).unwrap();
        let found = s.classify(&Layout::new("x")).unwrap();
        assert_eq!((found.kind, found.token), (Kind::Fenced, Some(9)));
        assert!(Snapshot::decode(&Value::Int(1)).is_err());
    }

    #[test]
    fn a_rate_limiter_config_with_its_buckets_is_a_rate_limiter() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let types = |first: &str| {
            let mut t = vec![bulk(first)];
            t.extend((0..5).map(|_| bulk("none")));
            Value::Array(t)
        };
        let config = ["rate", "10", "interval", "1000", "type", "0"];
        let reply = |rate: Value, main: &[&str]| {
            Value::Array(vec![
                Value::Int(5),
                types("hash"),
                Value::Array(main.iter().map(|s| bulk(s)).collect()),
                Value::Int(-1),
                Value::Array(vec![]),
                Value::Array(vec![]),
                Value::Nil,
                Value::Array(vec![]),
                Value::Nil,
                Value::Array(vec![]),
                Value::Int(0),
                rate,
            ])
        };
        let buckets = Value::Array(vec![
            bulk("string"),
            bulk("zset"),
            Value::Int(7),
            Value::Int(400),
            Value::Array(vec![]),
        ]);
        let s = Snapshot::decode(&reply(buckets.clone(), &config)).unwrap();
        let found = s.classify(&Layout::new("x")).unwrap();
        assert_eq!(found.kind, Kind::RateLimiter);
        let rate = found.rate.unwrap();
        assert_eq!((rate.config.rate, rate.available), (10, Some(7)));
        assert_eq!(rate.next_back_in, Some(Duration::from_millis(400)));
        assert_eq!(found.keys, ["x", "{x}:value", "{x}:permits"]);
        assert_eq!(found.lease, Some(Duration::MAX));
        assert!(found.holders.is_empty());

        // A config with a field of no limiter's: unknown, its keys not claimed.
        let odd = [&config[..], &["owner", "x"]].concat();
        let s = Snapshot::decode(&reply(buckets, &odd)).unwrap();
        let found = s.classify(&Layout::new("x")).unwrap();
        assert_eq!((found.kind, found.rate), (Kind::Unknown, None));
        assert_eq!(found.keys, ["x"]);

        // No rate part (not a limiter): as before.
        let s = Snapshot::decode(&reply(Value::Nil, &[A, "1"])).unwrap();
        assert_eq!(s.classify(&Layout::new("x")).unwrap().kind, Kind::Reentrant);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_unknown_not_an_error() {
        let bulk = |s: &[u8]| Value::BulkString(s.to_vec());
        let types = Value::Array(
            ["string", "none", "none", "none", "none", "none"]
                .map(|t| bulk(t.as_bytes()))
                .to_vec(),
        );
        let mut reply = vec![
            Value::Int(5),
            types,
            bulk(b"\xff\xfe\x00"),
            Value::Int(-1),
            Value::Array(vec![]),
            Value::Array(vec![]),
            Value::Nil,
            Value::Array(vec![]),
            Value::Nil,
            Value::Array(vec![]),
        ];
        let s = Snapshot::decode(&Value::Array(reply.clone())).unwrap();
        let found = s.classify(&Layout::new("x")).unwrap();
        assert_eq!(
            (found.kind, found.keys),
            (Kind::Unknown, vec!["x".to_owned()])
        );
        // A queue member that would parse as an owner once decoded lossily.
        reply[1] = Value::Array(
            ["hash", "list", "none", "none", "none", "none"]
                .map(|t| bulk(t.as_bytes()))
                .to_vec(),
        );
        reply[2] = Value::Array(vec![bulk(A.as_bytes()), bulk(b"1")]);
        reply[4] = Value::Array(vec![bulk(b"\xc3\x28:1")]);
        let s = Snapshot::decode(&Value::Array(reply)).unwrap();
        assert_eq!(s.classify(&Layout::new("x")).unwrap().kind, Kind::Unknown);
    }

    #[test]
    fn a_reply_quoted_in_an_error_is_cut_short() {
        let huge = Value::BulkString(vec![b'a'; 100_000]);
        let Err(Error::Protocol(msg)) = Snapshot::decode(&huge) else {
            panic!("a bulk string is no snapshot");
        };
        assert!(msg.len() < 300, "{msg}");
    }
}
