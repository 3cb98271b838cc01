//! Reading values out of the inspect script's reply: text, integers, pairs and scored
//! members, leases and expiries, and the excerpt quoted when a reply makes no sense.

use std::time::Duration;

use redis::Value;

use crate::keys::permit_id;

/// The longest excerpt of a reply quoted in an error message.
const MAX_QUOTED: usize = 200;

/// A bulk or simple string (or an integer) as text.
pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        other => lossy(other),
    }
}

/// As [`text`], with bytes that are not UTF-8 replaced by U+FFFD.
pub(super) fn lossy(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".to_owned()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(super) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

/// `reply` for an error message, cut after [`MAX_QUOTED`] characters.
pub(super) fn quoted(reply: &Value) -> String {
    let all = format!("{reply:?}");
    match all.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}...", &all[..cut]),
        None => all,
    }
}

pub(super) fn items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(items) => Some(items),
        Value::Nil => Some(&[]),
        _ => None,
    }
}

/// `[a, b, c, d]` as `[(a, b), (c, d)]` of strings.
pub(super) fn pairs(
    v: &Value,
    text: fn(&Value) -> Option<String>,
) -> Option<Vec<(String, String)>> {
    items(v)?
        .chunks(2)
        .map(|p| match p {
            [a, b] => Some((text(a)?, text(b)?)),
            _ => None,
        })
        .collect()
}

/// A permit set's flat `ZRANGE ... WITHSCORES` as `(id, score)`: each member holds the bytes
/// of a permit id (`keys::permit_member`), shown as the id's hex text.
pub(super) fn permit_leases(
    v: &Value,
    text: fn(&Value) -> Option<String>,
) -> Option<Vec<(String, f64)>> {
    items(v)?
        .chunks(2)
        .map(|p| match p {
            [Value::BulkString(member), score] => {
                Some((permit_id(member), text(score)?.parse().ok()?))
            }
            _ => None,
        })
        .collect()
}

/// A flat `ZRANGE ... WITHSCORES` as `(member, score)`.
pub(super) fn scored(v: &Value, text: fn(&Value) -> Option<String>) -> Option<Vec<(String, f64)>> {
    pairs(v, text)?
        .into_iter()
        .map(|(m, s)| Some((m, s.parse().ok()?)))
        .collect()
}

/// A PTTL as a lease: -2 (absent) is `None`, -1 (no expiry) `Duration::MAX`.
pub(super) fn lease(pttl: i64) -> Option<Duration> {
    match pttl {
        -2 => None,
        ms if ms < 0 => Some(Duration::MAX),
        ms => Some(Duration::from_millis(ms as u64)),
    }
}

/// Time from `now` to the `at` (both ms on the server's clock), zero if passed.
pub(super) fn until(now: i64, at: f64) -> Duration {
    Duration::from_millis((at - now as f64).max(0.0) as u64)
}

/// A canonical decimal integer, as the semaphore and latch scripts accept.
pub(super) fn integer(value: &str) -> Option<i64> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    let canonical = value == "0"
        || (!digits.is_empty()
            && !digits.starts_with('0')
            && digits.bytes().all(|b| b.is_ascii_digit()));
    canonical.then(|| value.parse().ok()).flatten()
}
