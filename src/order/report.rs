//! The lock-order warnings of a deployment as an operator sees them:
//! [`Client::lock_order_warnings`], every pair of locks on record as taken in two orders that
//! can deadlock (recorded by clients with
//! [`lock_order_checks`](crate::ConfigBuilder::lock_order_checks) on).

use std::fmt;

use crate::client::Client;
use crate::error::Result;
use crate::hold::LockKind;
use crate::keys::LOCK_ORDER;

impl Client {
    /// Every pair of locks that some owners took in one order and others in the opposite
    /// order (each order holding one lock while taking the other, not both reads), as recorded
    /// by the clients of the deployment that check lock order, on every master of a cluster,
    /// sorted by lock names: what `redlatch waits` lists under its waits. Records live a day
    /// past the last time a process took the pair.
    ///
    /// It costs one pass of `SCAN` over each master's keyspace and one read per pair on
    /// record: a tool for operators, not for hot paths.
    ///
    /// # Errors
    ///
    /// Connection errors and timeouts.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for warning in client.lock_order_warnings()? {
    ///     println!("{warning}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_order_warnings(&self) -> Result<Vec<LockOrderWarning>> {
        let mapper = &self.inner.config.name_mapper;
        let shown = |key: &str| mapper.name_of(key).unwrap_or_else(|| key.to_owned());
        let mut found = Vec::new();
        for key in self.inner.backend.scan(&format!("{LOCK_ORDER}:*"))? {
            let fields: Vec<(String, String)> = self
                .inner
                .backend
                .run(&key, |c| redis::cmd("HGETALL").arg(&key).query(c))?;
            let name = |f: &str| fields.iter().find(|(k, _)| k == f).map(|(_, v)| shown(v));
            let (Some(first), Some(second)) = (name("first"), name("second")) else {
                continue;
            };
            let orders: Vec<_> = fields
                .iter()
                .filter_map(|(f, v)| parse(&first, &second, f, v))
                .collect();
            found.extend(conflicts(&first, &orders));
        }
        Ok(found)
    }
}

/// One order in which an owner took two locks: `held`, then `taken`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LockOrder {
    /// The lock it held.
    pub held: String,
    /// How it held it: [`Read`](LockKind::Read) or [`Exclusive`](LockKind::Exclusive)
    /// (every other kind, writes included).
    pub held_mode: LockKind,
    /// The lock it took while holding `held`.
    pub taken: String,
    /// How it took it: [`Read`](LockKind::Read) or [`Exclusive`](LockKind::Exclusive).
    pub taken_mode: LockKind,
    /// Who took them and where: the owner, the client's name, the process, its host, the
    /// thread, and the source line of the acquire call.
    pub by: String,
    /// When it was last recorded, in ms since the Unix epoch on the server's clock.
    pub recorded_ms: u64,
}

/// Two locks taken in opposite orders: two threads doing so at once can deadlock
/// ([`Client::lock_order_warnings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LockOrderWarning {
    /// One order (the first lock in byte order held first).
    pub one: LockOrder,
    /// The opposite order.
    pub other: LockOrder,
}

impl fmt::Display for LockOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` ({}) then `{}` ({}) by {}",
            self.held, self.held_mode, self.taken, self.taken_mode, self.by
        )
    }
}

impl fmt::Display for LockOrderWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "locks taken in opposite orders, which can deadlock: {}; and {}",
            self.one, self.other
        )
    }
}

/// A record of the pair `(first, second)`: its field and value, as `lua/lock_order.lua`
/// keeps them; `None` if it does not parse.
pub(crate) fn parse(first: &str, second: &str, field: &str, value: &str) -> Option<LockOrder> {
    let &[d, held_mode, taken_mode] = field.as_bytes() else {
        return None;
    };
    let (held, taken) = match d {
        b'1' => (first, second),
        b'2' => (second, first),
        _ => return None,
    };
    let (ms, by) = value.split_once(' ')?;
    Some(LockOrder {
        held: held.to_owned(),
        held_mode: mode_word(held_mode)?,
        taken: taken.to_owned(),
        taken_mode: mode_word(taken_mode)?,
        by: by.to_owned(),
        recorded_ms: ms.parse().ok()?,
    })
}

fn mode_word(letter: u8) -> Option<LockKind> {
    match letter {
        b'r' => Some(LockKind::Read),
        b'x' => Some(LockKind::Exclusive),
        _ => None,
    }
}

/// Whether two opposite orders can deadlock: each one's held lock blocks the other's take
/// of it (a read blocks no read).
pub(crate) fn conflict(one: &LockOrder, other: &LockOrder) -> bool {
    let blocks = |held: LockKind, taken: LockKind| !(held.is_read() && taken.is_read());
    one.held == other.taken
        && one.taken == other.held
        && blocks(one.held_mode, other.taken_mode)
        && blocks(other.held_mode, one.taken_mode)
}

/// The pairs of `orders` (the records of the pair `first` and another lock) that conflict,
/// the order holding `first` first; each pair once.
pub(crate) fn conflicts(first: &str, orders: &[LockOrder]) -> Vec<LockOrderWarning> {
    let mut out = Vec::new();
    for one in orders.iter().filter(|o| o.held == first) {
        for other in orders.iter().filter(|o| conflict(one, o)) {
            out.push(LockOrderWarning {
                one: one.clone(),
                other: other.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(held: &str, hm: &str, taken: &str, tm: &str) -> LockOrder {
        LockOrder {
            held: held.into(),
            held_mode: LockKind::parse(hm),
            taken: taken.into(),
            taken_mode: LockKind::parse(tm),
            by: "t".into(),
            recorded_ms: 0,
        }
    }

    #[test]
    fn a_record_parses_into_its_order() {
        let o = parse("a", "b", "2rx", "17 owner at x.rs:3").unwrap();
        assert_eq!((o.held.as_str(), o.taken.as_str()), ("b", "a"));
        assert_eq!(
            (o.held_mode, o.taken_mode),
            (LockKind::Read, LockKind::Exclusive)
        );
        assert_eq!((o.recorded_ms, o.by.as_str()), (17, "owner at x.rs:3"));
        assert!(parse("a", "b", "3xx", "1 x").is_none());
        assert!(parse("a", "b", "1xq", "1 x").is_none());
        assert!(parse("a", "b", "1xx", "soon x").is_none());
        assert!(parse("a", "b", "first", "a").is_none());
    }

    #[test]
    fn opposite_orders_conflict_unless_reads_meet_reads() {
        let ab = order("a", "exclusive", "b", "exclusive");
        assert!(conflict(&ab, &order("b", "exclusive", "a", "exclusive")));
        assert!(!conflict(&ab, &ab), "one order is no conflict");
        // Read a then read b; read b then read a: nobody blocks anybody.
        let rr = order("a", "read", "b", "read");
        assert!(!conflict(&rr, &order("b", "read", "a", "read")));
        // Read a then take b; hold b then read a: the read of a waits for no reader, so
        // only the take of b waits, and nothing closes a cycle.
        let rx = order("a", "read", "b", "exclusive");
        assert!(!conflict(&rx, &order("b", "exclusive", "a", "read")));
        assert!(conflict(&rx, &order("b", "exclusive", "a", "exclusive")));
        let found = conflicts(
            "a",
            &[
                order("b", "exclusive", "a", "exclusive"),
                ab.clone(),
                rr.clone(),
            ],
        );
        // Reads of a and b against writes of both in the opposite order: the writer blocks
        // both reads, and the reads block it.
        let ones: Vec<&LockOrder> = found.iter().map(|w| &w.one).collect();
        assert_eq!(ones, [&ab, &rr]);
    }
}
