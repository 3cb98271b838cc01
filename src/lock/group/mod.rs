//! Redisson's `RedissonFasterMultiLock` (`getMultiLock(group, values)`, Redisson 3.38.0 and
//! later): one HASH per group, where each locked value (named by a hash of its encoded bytes,
//! `highway.rs`) has three fields: the owner, the owner's `:expire_time` and `:lock_count`.
//! All of an owner's values are taken and released at once, by `lua/group_*.lua`; a release
//! publishes `0` on the group's lock channel, where every waiter listens.

mod codec;
mod highway;

use std::borrow::Cow;
use std::sync::Arc;

use redis::{ConnectionLike, RedisResult, Value};

pub use codec::ValueCodec;

use crate::error::{Error, Result};
use crate::hold::LockKind;
use crate::keys;
use crate::lock::key::LockKey;
use crate::lock::kind::{Kind, Queueing, Release, Waiting};
use crate::scripts;
use crate::watchdog::{BatchRenewal, Renewal};

/// The group lock: its channel and its values' fields, sorted, each once (Redisson keeps a
/// set of them).
pub(crate) struct Group {
    channel: String,
    fields: Vec<String>,
}

impl Group {
    /// The values `values` (each the bytes Redisson's codec writes) of the group `name`.
    pub(crate) fn new<V: AsRef<[u8]>>(name: &str, values: impl IntoIterator<Item = V>) -> Group {
        let mut fields: Vec<String> = values
            .into_iter()
            .map(|v| highway::field(v.as_ref()))
            .collect();
        fields.sort_unstable();
        fields.dedup();
        Group {
            channel: keys::lock_channel(name),
            fields,
        }
    }
}

/// Between the owner and the value fields in a hold's watchdog field (no field has a space:
/// they are base64).
const SEPARATOR: char = ' ';

impl Kind for Group {
    fn label(&self) -> LockKind {
        LockKind::Group
    }

    fn check(&self) -> Result<()> {
        if self.fields.is_empty() {
            return Err(Error::invalid("a group lock needs at least one value"));
        }
        Ok(())
    }

    fn acquire(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        _queueing: Queueing,
    ) -> RedisResult<Value> {
        let mut call = scripts::GROUP_ACQUIRE.key(&lock.name);
        call.arg(lease_ms).arg(owner);
        for field in &self.fields {
            call.arg(field);
        }
        call.invoke(c)
    }

    fn unlock(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        release: &Release<'_>,
    ) -> RedisResult<Option<i64>> {
        let mut call = scripts::GROUP_UNLOCK.key(&lock.name);
        call.key(&self.channel)
            .key(release.latch)
            .arg(release.lease_ms)
            .arg(release.owner)
            .arg(lock.client.publish())
            .arg(release.latch_ttl_ms);
        for field in &self.fields {
            call.arg(field);
        }
        call.invoke(c)
    }

    /// Its holds of one owner share counts (a value counts once for every set that names
    /// it): a retried unlock is made idempotent by its latch, not by a count.
    fn latched_unlock(&self) -> bool {
        true
    }

    fn force_unlock(&self, lock: &LockKey, c: &mut dyn ConnectionLike) -> RedisResult<bool> {
        let mut call = scripts::GROUP_FORCE_UNLOCK.key(&lock.name);
        call.key(&self.channel).arg(lock.client.publish());
        for field in &self.fields {
            call.arg(field);
        }
        call.invoke(c)
    }

    fn waiting(&self, _lock: &LockKey, _owner: &str) -> Waiting<'_> {
        Waiting::Channel(Cow::Borrowed(&self.channel))
    }

    /// What tells this owner's holds of these values apart from its holds of others of the
    /// group (for the watchdog and the client's count of holds): the owner and the fields.
    fn field(&self, owner: &str) -> String {
        let mut field = String::from(owner);
        for (i, value) in self.fields.iter().enumerate() {
            field.push(if i == 0 { SEPARATOR } else { ',' });
            field.push_str(value);
        }
        field
    }

    /// The first value's `lock_count` field: the owner's holds of all its values.
    fn count_field(&self, owner: &str) -> String {
        let first = self.fields.first().map_or("", String::as_str);
        keys::group_count_field(first, owner)
    }

    fn renewal(&self, owner: &Arc<str>) -> Renewal {
        Renewal {
            field: Arc::from(self.field(owner)),
            batch: &RENEW_GROUP,
        }
    }

    fn is_locked(&self, lock: &LockKey) -> Result<bool> {
        self.check()?;
        lock.check_name()?;
        lock.run(|c| {
            let mut call = scripts::GROUP_LOCKED.key(&lock.name);
            for field in &self.fields {
                call.arg(field);
            }
            call.invoke::<i64>(c)
        })
        .map(|n| n == 1)
    }

    /// The owner's holds of other sets of the group share the values' counts.
    fn overlapping(&self, owner: &str) -> Option<String> {
        Some(format!("{owner}{SEPARATOR}"))
    }

    /// Counts, for each value of this set, the holds of every set of the owner's that names
    /// it, and gives back one hold of the set only where each value has more than those
    /// (`lua/group_settle.lua`).
    fn settle_overlapping(
        &self,
        lock: &LockKey,
        c: &mut dyn ConnectionLike,
        owner: &str,
        lease_ms: u64,
        known: &[(Arc<str>, u32)],
    ) -> RedisResult<bool> {
        let mut call = scripts::GROUP_SETTLE.key(&lock.name);
        call.key(&self.channel)
            .arg(lease_ms)
            .arg(owner)
            .arg(lock.client.publish());
        for value in &self.fields {
            let holds: u32 = known
                .iter()
                .filter(|(field, _)| names_value(field, owner, value))
                .map(|(_, holds)| holds)
                .sum();
            call.arg(value).arg(holds);
        }
        call.invoke::<i64>(c).map(|released| released == 1)
    }

    /// A condition's wait releases a lock by its kind's own script; this one has none.
    fn has_conditions(&self) -> bool {
        false
    }
}

/// Whether the watchdog field `field` (see [`Group::field`]) is a hold of `owner`'s that names
/// `value`.
fn names_value(field: &str, owner: &str, value: &str) -> bool {
    field
        .strip_prefix(owner)
        .and_then(|rest| rest.strip_prefix(SEPARATOR))
        .is_some_and(|values| values.split(',').any(|v| v == value))
}

/// `lua/group_renew.lua`: each hold adds its group, owner, and value fields.
static RENEW_GROUP: BatchRenewal = BatchRenewal {
    script: &scripts::GROUP_RENEW,
    add: |call, name, field| {
        let (owner, values) = field.rsplit_once(SEPARATOR).unwrap_or((field, ""));
        let values: Vec<&str> = values.split(',').filter(|v| !v.is_empty()).collect();
        call.key(name).arg(owner).arg(values.len());
        for value in values {
            call.arg(value);
        }
    },
    holds: true,
    leased: true,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_names_its_owner_and_sorted_values_once() {
        let group = Group::new("class_100", ["b", "a", "b"]);
        // Redisson's fields of StringCodec's "a" and "b".
        assert_eq!(
            group.fields,
            ["Q5CdP+xmkHdTGWYr64Lw6A", "qwvAS12pR0CgRitaypEjUw"]
        );
        assert_eq!(
            group.field("u:1"),
            "u:1 Q5CdP+xmkHdTGWYr64Lw6A,qwvAS12pR0CgRitaypEjUw"
        );
        assert_eq!(
            group.count_field("u:1"),
            "Q5CdP+xmkHdTGWYr64Lw6A:u:1:lock_count"
        );
        assert_eq!(group.channel, "redisson_lock__channel:{class_100}");
        assert!(Group::new("g", Vec::<&[u8]>::new()).check().is_err());
    }

    #[test]
    fn a_hold_names_a_value_only_of_its_own_owner() {
        let field = Group::new("g", ["a", "b"]).field("u:1");
        let [a, b] = [&field[4..26], &field[27..]];
        assert!(names_value(&field, "u:1", a) && names_value(&field, "u:1", b));
        assert!(!names_value(&field, "u:1", "c"));
        assert!(!names_value(&field, "u:", a), "another owner's prefix");
        assert!(!names_value(&field, "u:10", a));
    }
}
