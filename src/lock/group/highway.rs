//! HighwayHash (128-bit), as Redisson's `org.redisson.misc.HighwayHash` computes it, with the
//! key of its `Hash` class: what names a group lock's value in its hash
//! ([`field`]: `Hash.hash128toBase64` of the value's encoded bytes).

/// Redisson's `Hash.KEY` (`misc/Hash.java`, line 30).
const KEY: [u64; 4] = [
    0x9e37_79b9_7f4a_7c15,
    0xf39c_c060_5ced_c834,
    0x1082_276b_f3a2_7251,
    0xf86c_6a11_d0c1_8e95,
];

struct State {
    v0: [u64; 4],
    v1: [u64; 4],
    mul0: [u64; 4],
    mul1: [u64; 4],
}

impl State {
    fn new(key: [u64; 4]) -> State {
        let mul0 = [
            0xdbe6_d5d5_fe4c_ce2f,
            0xa409_3822_299f_31d0,
            0x1319_8a2e_0370_7344,
            0x243f_6a88_85a3_08d3,
        ];
        let mul1 = [
            0x3bd3_9e10_cb0e_f593,
            0xc0ac_f169_b5f1_8a8c,
            0xbe54_66cf_34e9_0c6c,
            0x4528_21e6_38d0_1377,
        ];
        let mut s = State {
            v0: [0; 4],
            v1: [0; 4],
            mul0,
            mul1,
        };
        for i in 0..4 {
            s.v0[i] = mul0[i] ^ key[i];
            s.v1[i] = mul1[i] ^ key[i].rotate_left(32);
        }
        s
    }

    fn update(&mut self, a: [u64; 4]) {
        for (i, lane) in a.iter().enumerate() {
            self.v1[i] = self.v1[i].wrapping_add(self.mul0[i].wrapping_add(*lane));
        }
        for i in 0..4 {
            self.mul0[i] ^= (self.v1[i] & 0xffff_ffff).wrapping_mul(self.v0[i] >> 32);
            self.v0[i] = self.v0[i].wrapping_add(self.mul1[i]);
            self.mul1[i] ^= (self.v0[i] & 0xffff_ffff).wrapping_mul(self.v1[i] >> 32);
        }
        let (v0, v1) = (&mut self.v0, &mut self.v1);
        v0[0] = v0[0].wrapping_add(zipper_merge0(v1[1], v1[0]));
        v0[1] = v0[1].wrapping_add(zipper_merge1(v1[1], v1[0]));
        v0[2] = v0[2].wrapping_add(zipper_merge0(v1[3], v1[2]));
        v0[3] = v0[3].wrapping_add(zipper_merge1(v1[3], v1[2]));
        v1[0] = v1[0].wrapping_add(zipper_merge0(v0[1], v0[0]));
        v1[1] = v1[1].wrapping_add(zipper_merge1(v0[1], v0[0]));
        v1[2] = v1[2].wrapping_add(zipper_merge0(v0[3], v0[2]));
        v1[3] = v1[3].wrapping_add(zipper_merge1(v0[3], v0[2]));
    }

    fn update_packet(&mut self, packet: &[u8; 32]) {
        let lane = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&packet[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        self.update([lane(0), lane(1), lane(2), lane(3)]);
    }

    /// The last `bytes.len()` (1 to 31) bytes.
    fn update_remainder(&mut self, bytes: &[u8]) {
        let size = bytes.len();
        let (size_mod4, remainder) = (size & 3, size & !3);
        for v in &mut self.v0 {
            *v = v.wrapping_add(((size as u64) << 32) + size as u64);
        }
        for v in &mut self.v1 {
            let rotate = |half: u64| ((half << size) & 0xffff_ffff) | (half >> (32 - size));
            *v = rotate(*v & 0xffff_ffff) | (rotate(*v >> 32) << 32);
        }
        let mut packet = [0u8; 32];
        packet[..remainder].copy_from_slice(&bytes[..remainder]);
        if size & 16 != 0 {
            for i in 0..4 {
                packet[28 + i] = bytes[remainder + i + size_mod4 - 4];
            }
        } else if size_mod4 != 0 {
            packet[16] = bytes[remainder];
            packet[17] = bytes[remainder + (size_mod4 >> 1)];
            packet[18] = bytes[remainder + size_mod4 - 1];
        }
        self.update_packet(&packet);
    }

    fn permute_and_update(&mut self) {
        let v0 = self.v0;
        self.update([
            v0[2].rotate_left(32),
            v0[3].rotate_left(32),
            v0[0].rotate_left(32),
            v0[1].rotate_left(32),
        ]);
    }

    fn finalize128(mut self) -> [u64; 2] {
        for _ in 0..6 {
            self.permute_and_update();
        }
        [
            self.v0[0]
                .wrapping_add(self.mul0[0])
                .wrapping_add(self.v1[2])
                .wrapping_add(self.mul1[2]),
            self.v0[1]
                .wrapping_add(self.mul0[1])
                .wrapping_add(self.v1[3])
                .wrapping_add(self.mul1[3]),
        ]
    }
}

fn zipper_merge0(v1: u64, v0: u64) -> u64 {
    (((v0 & 0xff00_0000) | (v1 & 0x00ff_0000_0000)) >> 24)
        | (((v0 & 0xff00_0000_0000) | (v1 & 0x00ff_0000_0000_0000)) >> 16)
        | (v0 & 0xff_0000)
        | ((v0 & 0xff00) << 32)
        | ((v1 & 0xff00_0000_0000_0000) >> 8)
        | (v0 << 56)
}

fn zipper_merge1(v1: u64, v0: u64) -> u64 {
    (((v1 & 0xff00_0000) | (v0 & 0x00ff_0000_0000)) >> 24)
        | (v1 & 0xff_0000)
        | ((v1 & 0xff00_0000_0000) >> 16)
        | ((v1 & 0xff00) << 24)
        | ((v0 & 0x00ff_0000_0000_0000) >> 8)
        | ((v1 & 0xff) << 48)
        | (v0 & 0xff00_0000_0000_0000)
}

/// HighwayHash-128 of `data` with Redisson's key (`Hash.hash128`).
fn hash128(data: &[u8]) -> [u64; 2] {
    let mut state = State::new(KEY);
    let mut packets = data.chunks_exact(32);
    for packet in &mut packets {
        let packet: &[u8; 32] = packet.try_into().expect("32 bytes");
        state.update_packet(packet);
    }
    let rest = packets.remainder();
    if !rest.is_empty() {
        state.update_remainder(rest);
    }
    state.finalize128()
}

/// The hash field naming a value whose codec wrote `encoded`: Redisson's
/// `Hash.hash128toBase64` (`misc/Hash.java`, lines 76-91): the two 64-bit halves big-endian,
/// in standard base64, without the final `==`.
pub(crate) fn field(encoded: &[u8]) -> String {
    let [h0, h1] = hash128(encoded);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&h0.to_be_bytes());
    bytes[8..].copy_from_slice(&h1.to_be_bytes());
    let mut text = base64(&bytes);
    text.truncate(text.len() - 2);
    text
}

/// Standard base64 with padding (RFC 4648), as Netty's `Base64.encode` writes 16 bytes.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed by Redisson 4.7.0 (`Hash.hash128toBase64` of the bytes its codecs wrote):
    /// lengths 0, 1, 2, 3, 5, 6, 8, 9, 32, 33, 35, 56 and 72 cover every path of the remainder.
    #[test]
    fn fields_are_those_redisson_computes() {
        let cases: [(&str, &str); 16] = [
            ("", "t6rZwibGo2uy1OSmNVe8pg"),
            ("61", "qwvAS12pR0CgRitaypEjUw"),
            ("62", "Q5CdP+xmkHdTGWYr64Lw6A"),
            ("63", "b/ERpQOx2r8GXiGBU6d0Hg"),
            ("3432", "RE0IojEvPTY8Dofe3IkBNA"),
            ("038261", "Jon6GCcO+0QSJkhre5wXYA"),
            ("0381", "8kZ0F42HzoQfW3jDxQ6f4g"),
            ("0954", "VQXPsX8R0Nuk4PCULzvfjg"),
            ("c3a9e282ac", "JHGdOa33je2tmgAAuA/aYQ"),
            ("78f09f988079", "X26Z8tw40X24RAwyHXuFGQ"),
            ("4a61636b5f303031", "7pNoDdizVy2xY792MaFv+w"),
            ("034a61636b5f3030b1", "DScHoUUqdQJ9J7Ux220rcQ"),
            (
                "3031323334353637383961626364656630313233343536373839616263646566",
                "08hr0B8iaf3PoSsWAS8sWA",
            ),
            (
                "303132333435363738396162636465663031323334353637383961626364656658",
                "VjlgQDRPSK889um0d9QvSg",
            ),
            (
                "03a2303132333435363738396162636465663031323334353637383961626364656658",
                "GZZ/iJ194HZB4C5SUb165A",
            ),
            (
                "3031323334353637383961626364656630313233343536373839616263646566\
                 303132333435363738396162636465663031323334353637",
                "+06KgUVG695ofb+hJklgCw",
            ),
        ];
        for (hex, want) in cases {
            let bytes = hex::decode(hex).unwrap();
            assert_eq!(field(&bytes), want, "bytes {hex}");
        }
        let z = vec![b'z'; 70];
        assert_eq!(field(&z), "lKZOy4BPlfvIDlPZQLZLkw");
    }

    #[test]
    fn base64_pads_as_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
