//! The `serde` feature: how durations and times are written. Durations are whole
//! milliseconds (`Duration::MAX`, "never expires", is -1); times are RFC 3339 in UTC
//! (`2024-05-01T12:00:01.234Z`), beside their milliseconds since 1970.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::{Deserialize, Deserializer, Error as _};
use serde::ser::{SerializeSeq, Serializer};

use crate::hold::Owner;

/// Milliseconds, -1 for `Duration::MAX`.
pub(crate) fn millis(d: Duration) -> i128 {
    if d == Duration::MAX {
        -1
    } else {
        d.as_millis() as i128
    }
}

pub(crate) fn duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i128(millis(*d))
}

pub(crate) fn opt_duration<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_i128(millis(*d)),
        None => s.serialize_none(),
    }
}

pub(crate) fn opt_durations<S: Serializer>(
    ds: &[Option<Duration>],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(ds.len()))?;
    for d in ds {
        seq.serialize_element(&d.map(millis))?;
    }
    seq.end()
}

/// An owner as its id, `"<client id>:<thread>"`.
pub(crate) fn owner_id<S: Serializer>(o: &Owner, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(o)
}

/// Owners as their ids.
pub(crate) fn owner_ids<S: Serializer>(os: &[Owner], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(os.iter().map(Owner::to_string))
}

/// An owner from its id.
pub(crate) fn parse_owner<'de, D: Deserializer<'de>>(d: D) -> Result<Owner, D::Error> {
    let id = String::deserialize(d)?;
    Owner::parse(&id).ok_or_else(|| D::Error::custom(format!("not an owner id: {id:?}")))
}

/// Whole microseconds.
pub(crate) fn opt_micros<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_micros() as u64),
        None => s.serialize_none(),
    }
}

/// A duration from whole microseconds.
pub(crate) fn parse_opt_micros<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.map(Duration::from_micros))
}

/// Milliseconds since 1970 (0 before it).
pub(crate) fn epoch_millis(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// `2024-05-01T12:00:01.234Z` (UTC, RFC 3339; a time before 1970 as 1970).
pub(crate) fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t.max(UNIX_EPOCH)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_714_564_801_234);
        assert_eq!(timestamp(t), "2024-05-01T12:00:01.234Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(timestamp(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn durations_are_milliseconds_and_never_is_minus_one() {
        assert_eq!(millis(Duration::from_micros(1_500)), 1);
        assert_eq!(millis(Duration::MAX), -1);
    }
}
