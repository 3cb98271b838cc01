//! A rate limiter as an inspection reads it: the rate part of the inspect script's reply
//! (the permits left of its buckets, counted as the limiter's own scripts count them), and
//! what an inspection reports of it ([`RateInspection`]).

use std::time::Duration;

use redis::Value;

use super::decode::{int, items};
use crate::keys::{rate_client_key, Layout};
use crate::rate::{parse_config, RateConfig, RateType};

/// The fields of a rate limiter's config HASH (Redisson's; `keepAliveTime` from 3.38 on).
const CONFIG_FIELDS: [&str; 4] = ["rate", "interval", "type", "keepAliveTime"];

/// A [`RateLimiter`](crate::RateLimiter)'s config and what it has left, as
/// [`Client::inspect`](crate::Client::inspect) reads them ([`Inspection::rate`] of a
/// [`Kind::RateLimiter`]).
///
/// The permits left are counted as the limiter's own scripts count them (recounted from the
/// permits taken where the count cannot be right), on the server's clock.
///
/// [`Inspection::rate`]: super::Inspection::rate
/// [`Kind::RateLimiter`]: super::Kind::RateLimiter
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// if let Some(rate) = client.inspect("partner-api")?.and_then(|i| i.rate) {
///     println!("{} per {:?}", rate.config.rate, rate.config.interval);
///     match rate.available {
///         Some(left) => println!("{left} left, the next back in {:?}", rate.next_back_in),
///         None => println!("per client: {} client(s) found", rate.clients.len()),
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RateInspection {
    /// Whom the rate binds, the rate, the interval and the keep-alive (serialized as an
    /// object: `type` (`overall` or `per-client`), `rate`, `interval_ms`, `keep_alive_ms`).
    #[cfg_attr(feature = "serde", serde(serialize_with = "config_fields"))]
    pub config: RateConfig,
    /// For an [overall](RateType::Overall) rate, the permits an acquire could take now;
    /// `None` for a [per-client](RateType::PerClient) one (see
    /// [`clients`](Self::clients)).
    pub available: Option<u64>,
    /// For an overall rate, when the oldest permit taken in the last interval comes back;
    /// `None` when none is taken, or for a per-client rate. Serialized as
    /// `next_back_in_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "next_back_in_ms",
            serialize_with = "crate::ser::opt_duration"
        )
    )]
    pub next_back_in: Option<Duration>,
    /// For a per-client rate, the buckets found: each client's own count, by client id
    /// (the clients that used the limiter lately). Empty for an overall rate.
    pub clients: Vec<RateBucket>,
}

/// One client's permits of a [per-client](RateType::PerClient) rate limiter
/// ([`RateInspection::clients`]).
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let rate = client.inspect("partner-api")?.and_then(|i| i.rate);
/// for bucket in rate.map(|r| r.clients).unwrap_or_default() {
///     println!("{}: {} left", bucket.client_id, bucket.available);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RateBucket {
    /// The client's id ([`Client::id`](crate::Client::id), or a Redisson instance's).
    pub client_id: String,
    /// The permits an acquire of that client could take now.
    pub available: u64,
    /// When the oldest permit it took in the last interval comes back; `None` when it took
    /// none. Serialized as `next_back_in_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "next_back_in_ms",
            serialize_with = "crate::ser::opt_duration"
        )
    )]
    pub next_back_in: Option<Duration>,
}

#[cfg(feature = "serde")]
fn config_fields<S: serde::Serializer>(
    c: &RateConfig,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("RateConfig", 4)?;
    let kind = match c.rate_type {
        RateType::Overall => "overall",
        RateType::PerClient => "per-client",
    };
    st.serialize_field("type", kind)?;
    st.serialize_field("rate", &c.rate)?;
    st.serialize_field("interval_ms", &crate::ser::millis(c.interval))?;
    st.serialize_field("keep_alive_ms", &c.keep_alive.map(crate::ser::millis))?;
    st.end()
}

/// One bucket in the script's reply: the TYPE of its count and of its ZSET, the permits
/// left and the ms until the next is back (-1, -1: a key of another type, not read).
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    value_type: String,
    permits_type: String,
    left: i64,
    back_in: i64,
}

impl Bucket {
    /// `[TYPE of its count, TYPE of its ZSET, left, back_in]`.
    fn decode(v: &[Value], text: fn(&Value) -> Option<String>) -> Option<Bucket> {
        let [vt, pt, left, back_in] = v else {
            return None;
        };
        Some(Bucket {
            value_type: text(vt)?,
            permits_type: text(pt)?,
            left: int(left)?,
            back_in: int(back_in)?,
        })
    }

    /// Whether its keys are of a limiter's types (or absent).
    fn fits(&self) -> bool {
        matches!(self.value_type.as_str(), "none" | "string")
            && matches!(self.permits_type.as_str(), "none" | "zset")
    }

    /// Whether it was read: its keys fit, and the script counted it.
    fn read(&self) -> bool {
        self.fits() && self.left >= 0
    }

    fn next_back_in(&self) -> Option<Duration> {
        u64::try_from(self.back_in).ok().map(Duration::from_millis)
    }

    /// Its keys that exist, of `value` and `permits` (its count's and its ZSET's names).
    fn keys(&self, value: String, permits: String) -> Vec<String> {
        [(&self.value_type, value), (&self.permits_type, permits)]
            .into_iter()
            .filter(|(t, _)| *t != "none")
            .map(|(_, k)| k)
            .collect()
    }
}

/// The rate part of the inspect script's reply: the overall bucket, and the clients' of a
/// per-client limiter (see `lua/inspect.lua`).
#[derive(Debug, Clone, Default)]
pub(super) struct RateReply {
    overall: Bucket,
    clients: Vec<(String, Bucket)>,
}

impl RateReply {
    /// `None` for nil (the name is no limiter), `Some(None)` for a reply that makes no sense.
    pub(super) fn decode(
        v: &Value,
        text: fn(&Value) -> Option<String>,
    ) -> Option<Option<RateReply>> {
        if *v == Value::Nil {
            return Some(None);
        }
        let [overall @ .., clients] = items(v)? else {
            return None;
        };
        let overall = Bucket::decode(overall, text)?;
        let clients = items(clients)?
            .chunks(5)
            .map(|c| match c {
                [id, bucket @ ..] => Some((text(id)?, Bucket::decode(bucket, text)?)),
                [] => None,
            })
            .collect::<Option<_>>()?;
        Some(Some(RateReply { overall, clients }))
    }

    /// What the limiter of `layout` whose config HASH is `fields` reports, and its keys beside
    /// the config; `None` if a field is not a config's, or a key not of a limiter's type.
    pub(super) fn inspect(
        &self,
        fields: &[(String, String)],
        layout: &Layout,
    ) -> Option<(RateInspection, Vec<String>)> {
        if fields
            .iter()
            .any(|(f, _)| !CONFIG_FIELDS.contains(&f.as_str()))
        {
            return None;
        }
        let config: Vec<Option<String>> = CONFIG_FIELDS
            .iter()
            .map(|name| {
                fields
                    .iter()
                    .find(|(f, _)| f == name)
                    .map(|(_, v)| v.clone())
            })
            .collect();
        let config = parse_config(&config)?;
        // The overall keys of a per-client limiter are left from an overall rate: its keys
        // still, but not what it counts.
        if !self.overall.fits() {
            return None;
        }
        let (value, permits) = (&layout.rate_value, &layout.rate_permits);
        let mut keys = self.overall.keys(value.clone(), permits.clone());
        let mut found = RateInspection {
            config,
            available: None,
            next_back_in: None,
            clients: Vec::new(),
        };
        match found.config.rate_type {
            RateType::Overall => {
                if !self.overall.read() {
                    return None;
                }
                found.available = Some(self.overall.left as u64);
                found.next_back_in = self.overall.next_back_in();
            }
            RateType::PerClient => {
                for (id, bucket) in &self.clients {
                    if !bucket.read() {
                        return None;
                    }
                    keys.extend(
                        bucket.keys(rate_client_key(value, id), rate_client_key(permits, id)),
                    );
                    found.clients.push(RateBucket {
                        client_id: id.clone(),
                        available: bucket.left as u64,
                        next_back_in: bucket.next_back_in(),
                    });
                }
            }
        }
        Some((found, keys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c";

    fn config(fields: &[(&str, &str)]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    fn bucket(vt: &str, pt: &str, left: i64, back_in: i64) -> Bucket {
        Bucket {
            value_type: vt.to_owned(),
            permits_type: pt.to_owned(),
            left,
            back_in,
        }
    }

    #[test]
    fn an_overall_limiter_shows_what_is_left_and_when_more_comes_back() {
        let reply = RateReply {
            overall: bucket("string", "zset", 7, 400),
            clients: Vec::new(),
        };
        let fields = config(&[("rate", "10"), ("interval", "1000"), ("type", "0")]);
        let (found, keys) = reply.inspect(&fields, &Layout::new("api")).unwrap();
        assert_eq!(found.config.rate, 10);
        assert_eq!(found.config.interval, Duration::from_secs(1));
        assert_eq!(found.config.rate_type, RateType::Overall);
        assert_eq!(found.available, Some(7));
        assert_eq!(found.next_back_in, Some(Duration::from_millis(400)));
        assert_eq!(keys, ["{api}:value", "{api}:permits"]);

        // Nothing taken yet: no count key, the whole rate, nothing to come back.
        let fresh = RateReply {
            overall: bucket("none", "none", 10, -1),
            clients: Vec::new(),
        };
        let (found, keys) = fresh.inspect(&fields, &Layout::new("api")).unwrap();
        assert_eq!((found.available, found.next_back_in), (Some(10), None));
        assert!(keys.is_empty());
    }

    #[test]
    fn a_per_client_limiter_shows_each_clients_bucket() {
        let reply = RateReply {
            overall: bucket("none", "none", -1, -1),
            clients: vec![(C.to_owned(), bucket("string", "zset", 2, 900))],
        };
        let fields = config(&[
            ("rate", "3"),
            ("interval", "60000"),
            ("type", "1"),
            ("keepAliveTime", "120000"),
        ]);
        let (found, keys) = reply.inspect(&fields, &Layout::new("api")).unwrap();
        assert_eq!(found.config.rate_type, RateType::PerClient);
        assert_eq!(found.config.keep_alive, Some(Duration::from_secs(120)));
        assert_eq!(found.available, None);
        assert_eq!(found.clients.len(), 1);
        assert_eq!(found.clients[0].client_id, C);
        assert_eq!(found.clients[0].available, 2);
        assert_eq!(
            found.clients[0].next_back_in,
            Some(Duration::from_millis(900))
        );
        assert_eq!(
            keys,
            [format!("{{api}}:value:{C}"), format!("{{api}}:permits:{C}")]
        );
    }

    #[test]
    fn other_fields_or_key_types_are_no_limiter() {
        let reply = RateReply {
            overall: bucket("string", "zset", 7, 400),
            clients: Vec::new(),
        };
        let layout = Layout::new("api");
        let extra = config(&[
            ("rate", "10"),
            ("interval", "1000"),
            ("type", "0"),
            ("owner", "x"),
        ]);
        assert!(reply.inspect(&extra, &layout).is_none());
        let half = config(&[("rate", "10"), ("type", "0")]);
        assert!(reply.inspect(&half, &layout).is_none());
        let odd = RateReply {
            overall: bucket("hash", "zset", -1, -1),
            clients: Vec::new(),
        };
        let fields = config(&[("rate", "10"), ("interval", "1000"), ("type", "0")]);
        assert!(odd.inspect(&fields, &layout).is_none());
    }

    #[test]
    fn the_reply_decodes_or_says_it_makes_no_sense() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let text = super::super::decode::text;
        assert!(matches!(RateReply::decode(&Value::Nil, text), Some(None)));
        let reply = Value::Array(vec![
            bulk("none"),
            bulk("none"),
            Value::Int(-1),
            Value::Int(-1),
            Value::Array(vec![
                bulk(C),
                bulk("string"),
                bulk("zset"),
                Value::Int(1),
                Value::Int(50),
            ]),
        ]);
        let decoded = RateReply::decode(&reply, text).unwrap().unwrap();
        assert_eq!(decoded.clients[0].0, C);
        assert_eq!(decoded.clients[0].1.left, 1);
        assert!(RateReply::decode(&Value::Int(3), text).is_none());
    }
}
