//! The bytes Redisson's codecs write for a value: what a group lock hashes to name it (see
//! [`Client::group_lock`](crate::Client::group_lock)).

/// A Redisson codec, for the values of a [group lock](crate::Client::group_lock): Redisson
/// hashes the bytes its client's codec (`Config.setCodec`) writes for each value, so a Rust
/// peer must give the same bytes to lock the same values.
///
/// For a codec not here, give the bytes it writes: `codec.getValueEncoder().encode(value)`
/// on the Java side, printed once as hex, shows them.
///
/// # Examples
///
/// ```
/// use redlatch::ValueCodec;
/// assert_eq!(ValueCodec::String.encode_str("001"), b"001");
/// // Redisson's default codec (Kryo5Codec) writes a class id first.
/// assert_eq!(ValueCodec::Kryo5.encode_str("a"), [0x03, 0x82, b'a']);
/// assert_eq!(ValueCodec::Kryo5.encode_i64(42), [0x09, 0x54]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueCodec {
    /// `StringCodec` (and `LongCodec`, `IntegerCodec` for numbers): the value's text in
    /// UTF-8.
    String,
    /// `Kryo5Codec`, Redisson's default since 3.x: a `String` or a `Long` value, written by
    /// Kryo 5 with its default class registrations.
    Kryo5,
}

impl ValueCodec {
    /// The bytes this codec writes for the Java `String` `value`.
    pub fn encode_str(self, value: &str) -> Vec<u8> {
        match self {
            ValueCodec::String => value.as_bytes().to_vec(),
            ValueCodec::Kryo5 => {
                // Class id 1 (String), written plus 2; then Kryo's `Output.writeString`.
                let mut out = vec![0x03];
                kryo5_string(&mut out, value);
                out
            }
        }
    }

    /// The bytes this codec writes for the Java `Long` `value`.
    pub fn encode_i64(self, value: i64) -> Vec<u8> {
        match self {
            ValueCodec::String => value.to_string().into_bytes(),
            ValueCodec::Kryo5 => {
                // Class id 7 (long), written plus 2; then a zig-zag variable-length long.
                let mut out = vec![0x09];
                let mut n = ((value << 1) ^ (value >> 63)) as u64;
                while n >= 0x80 {
                    out.push((n as u8 & 0x7f) | 0x80);
                    n >>= 7;
                }
                out.push(n as u8);
                out
            }
        }
    }
}

/// Kryo 5's `Output.writeString`: 2 to 32 ASCII characters as they are, the last one's high
/// bit set; else the length plus one (a flagged variable-length int), then each UTF-16 unit in
/// 1 to 3 bytes (a surrogate pair as two units of 3 bytes each, as Java's modified UTF-8).
fn kryo5_string(out: &mut Vec<u8>, value: &str) {
    let units: Vec<u16> = value.encode_utf16().collect();
    if units.len() > 1 && units.len() <= 32 && value.is_ascii() {
        out.extend_from_slice(value.as_bytes());
        if let Some(last) = out.last_mut() {
            *last |= 0x80;
        }
        return;
    }
    // writeVarIntFlag(true, length + 1, true): 6 bits with the flag, then 7 per byte.
    let n = units.len() as u64 + 1;
    let mut first = (n & 0x3f) as u8 | 0x80;
    let mut rest = n >> 6;
    if rest != 0 {
        first |= 0x40;
    }
    out.push(first);
    while rest != 0 {
        let byte = (rest & 0x7f) as u8;
        rest >>= 7;
        out.push(if rest != 0 { byte | 0x80 } else { byte });
    }
    for unit in units {
        let c = u32::from(unit);
        if c <= 0x7f {
            out.push(c as u8);
        } else if c <= 0x7ff {
            out.push(0xc0 | (c >> 6) as u8);
            out.push(0x80 | (c & 0x3f) as u8);
        } else {
            out.push(0xe0 | (c >> 12) as u8);
            out.push(0x80 | ((c >> 6) & 0x3f) as u8);
            out.push(0x80 | (c & 0x3f) as u8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes Redisson 4.7.0's `Kryo5Codec` and `StringCodec` wrote.
    #[test]
    fn encodings_are_those_redisson_writes() {
        let kryo = |s: &str| hex::encode(ValueCodec::Kryo5.encode_str(s));
        assert_eq!(kryo("a"), "038261");
        assert_eq!(kryo(""), "0381");
        assert_eq!(kryo("Jack_001"), "034a61636b5f3030b1");
        assert_eq!(kryo("é€"), "0383c3a9e282ac");
        assert_eq!(kryo("x\u{1F600}y"), "038578eda0bdedb88079");
        let x33 = "0123456789abcdef0123456789abcdefX";
        assert_eq!(kryo(x33), format!("03a2{}", hex::encode(x33)));
        let z70 = "z".repeat(70);
        assert_eq!(kryo(&z70), format!("03c701{}", hex::encode(&z70)));
        assert_eq!(hex::encode(ValueCodec::Kryo5.encode_i64(42)), "0954");
        assert_eq!(ValueCodec::String.encode_i64(42), b"42");
        assert_eq!(ValueCodec::String.encode_str("é€"), "é€".as_bytes());
    }
}
