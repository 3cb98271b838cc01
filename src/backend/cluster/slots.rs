//! Hash slots: the slot of a key, and the slot ranges of a `CLUSTER SLOTS` reply.

use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::{Error, Result};

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: usize = 16384;
/// The hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag (the part between
/// the first `{` and the next `}`, when not empty), modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS as u16
}

/// CRC16 in the XMODEM variant, as Redis Cluster hashes keys.
fn crc16(data: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(data)
}

/// `(first slot, last slot, master host:port)` for each range of a `CLUSTER SLOTS` reply.
/// A master listed with an empty host is the node that answered (`asked`).
pub(super) fn parse_slots(
    reply: &Value,
    asked: &ConnectionInfo,
) -> Result<Vec<(u16, u16, String)>> {
    let bad = || Error::Protocol(format!("unexpected CLUSTER SLOTS reply: {reply:?}"));
    let Value::Array(ranges) = reply else {
        return Err(bad());
    };
    let asked_host = match asked.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => String::new(),
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(items) = range else {
            return Err(bad());
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (items.first(), items.get(1), items.get(2))
        else {
            return Err(bad());
        };
        let host = match master.first() {
            Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Value::SimpleString(h)) => h.clone(),
            _ => return Err(bad()),
        };
        let host = if host.is_empty() || host == "?" {
            asked_host.clone()
        } else {
            host
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return Err(bad());
        };
        let in_range = |n: i64| u16::try_from(n).ok().filter(|&s| usize::from(s) < SLOTS);
        let (Some(start), Some(end)) = (in_range(*start), in_range(*end)) else {
            return Err(bad());
        };
        out.push((start, end, format!("{host}:{port}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"redisson_lock__channel:{orders}"), slot(b"orders"));
        // An empty tag or an unclosed brace hashes the whole key.
        assert_eq!(slot(b"{}x"), crc16(b"{}x") % 16384);
        assert_eq!(slot(b"{x"), crc16(b"{x") % 16384);
        // Only the first tag counts.
        assert_eq!(slot(b"{a}{b}"), slot(b"a"));
    }

    #[test]
    fn parses_cluster_slots() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let node =
            |host: &str, port: i64| Value::Array(vec![bulk(host), Value::Int(port), bulk("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(16383), node("", 7001)]),
        ]);
        let asked = "redis://10.0.0.9:7001/".into_connection_info().unwrap();
        let ranges = parse_slots(&reply, &asked).unwrap();
        assert_eq!(
            ranges,
            vec![
                (0, 5460, "127.0.0.1:7000".to_owned()),
                (5461, 16383, "10.0.0.9:7001".to_owned())
            ]
        );
        let bad = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(99999),
            node("h", 1),
        ])]);
        assert!(parse_slots(&bad, &asked).is_err());
        assert!(parse_slots(&Value::Nil, &asked).is_err());
    }
}
