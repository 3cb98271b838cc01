//! A cycle of waits through one waiter, found by walking the wait-for graph depth first
//! within bounds, and the one victim every member of a cycle picks. No I/O: the graph is
//! read through [`Graph`] (the server's records in `graph.rs`; a map in the tests).

use std::collections::HashSet;

use crate::error::Result;
use crate::hold::LockKind;

/// How a waiter waits for its lock, as its record says: what blocks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// An exclusive kind (plain, fenced, spin, non-reentrant): every holder blocks it.
    Exclusive,
    /// A fair lock: every holder, and every waiter ahead of it in the queue.
    Fair,
    /// The read side of a read-write lock: only a writer blocks it.
    Read,
    /// The write side: every holder, readers and writer.
    Write,
}

impl Mode {
    /// The letter a record keeps.
    pub(crate) fn letter(self) -> &'static str {
        match self {
            Mode::Exclusive => "x",
            Mode::Fair => "f",
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }

    /// The kind a report shows.
    pub(crate) fn kind(self) -> LockKind {
        match self {
            Mode::Exclusive => LockKind::Exclusive,
            Mode::Fair => LockKind::Fair,
            Mode::Read => LockKind::Read,
            Mode::Write => LockKind::Write,
        }
    }

    /// The mode a record's letter stands for.
    pub(crate) fn from_letter(letter: &str) -> Option<Mode> {
        match letter {
            "x" => Some(Mode::Exclusive),
            "f" => Some(Mode::Fair),
            "r" => Some(Mode::Read),
            "w" => Some(Mode::Write),
            _ => None,
        }
    }
}

/// One owner's wait, as recorded on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wait {
    pub(crate) owner: String,
    /// The lock's key (its mapped name).
    pub(crate) lock: String,
    pub(crate) mode: Mode,
    /// When the wait began, in ms on the server's clock.
    pub(crate) since_ms: u64,
}

/// An owner in the way of a wait: a holder of the lock (by its hash field), or a waiter
/// ahead of it in a fair queue (no field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocker {
    pub(crate) owner: String,
    /// The hash field it holds the lock by; `None` for a waiter ahead in a queue.
    pub(crate) field: Option<String>,
}

/// One step of a cycle: `wait` is blocked by `by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) wait: Wait,
    pub(crate) by: Blocker,
}

/// What a walk reads.
pub(crate) trait Graph {
    /// The owners in the way of a wait in `mode` for `lock` by `waiter`.
    fn blockers(&mut self, lock: &str, mode: Mode, waiter: &str) -> Result<Vec<Blocker>>;
    /// What `owner` waits for, if a live record says it waits.
    fn wait_of(&mut self, owner: &str) -> Result<Option<Wait>>;
    /// Whether `edge` still holds: its wait is still recorded and its blocker still holds
    /// (or is still queued ahead).
    fn still(&mut self, edge: &Edge) -> Result<bool>;
}

/// How far a walk goes: steps along one path, and reads in all.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) depth: usize,
    pub(crate) reads: usize,
}

/// The walk's bounds: cycles longer than 8 waits are not looked for, and a walk reads at
/// most 64 times (each read one command on one node).
pub(crate) const BOUNDS: Bounds = Bounds {
    depth: 8,
    reads: 64,
};

/// A cycle of waits that starts and ends at `me` (its first edge is `me`'s own wait), if
/// one is found within `bounds`. Only cycles through `me` count: the members of another
/// cycle find it themselves.
pub(crate) fn find(graph: &mut dyn Graph, me: &Wait, bounds: Bounds) -> Result<Option<Vec<Edge>>> {
    let mut walk = Walk {
        graph,
        me: &me.owner,
        bounds,
        reads: 0,
        on_path: HashSet::new(),
        path: Vec::new(),
    };
    Ok(walk.from(me)?.then_some(walk.path))
}

/// Whether every edge of `cycle` still holds, read again (at least one round trip after
/// the walk read them).
pub(crate) fn confirm(graph: &mut dyn Graph, cycle: &[Edge]) -> Result<bool> {
    for edge in cycle {
        if !graph.still(edge)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The wait that ends: the youngest (the latest `since_ms`), and of waits that began in
/// the same ms, the one of the greatest owner id. Every member computes the same from the
/// same records.
pub(crate) fn victim(cycle: &[Edge]) -> Option<&Wait> {
    cycle
        .iter()
        .map(|e| &e.wait)
        .max_by(|a, b| (a.since_ms, &a.owner).cmp(&(b.since_ms, &b.owner)))
}

struct Walk<'a> {
    graph: &'a mut dyn Graph,
    me: &'a str,
    bounds: Bounds,
    reads: usize,
    /// The owners on the path being walked: a path does not go through one twice. (Owners
    /// met on another path are walked again: reached again nearer the walker, they may close
    /// a shorter cycle through it.)
    on_path: HashSet<String>,
    path: Vec<Edge>,
}

impl Walk<'_> {
    /// Whether a path from `wait` leads back to `me` (left in `path`).
    fn from(&mut self, wait: &Wait) -> Result<bool> {
        if self.path.len() >= self.bounds.depth || !self.read() {
            return Ok(false);
        }
        let blockers = self.graph.blockers(&wait.lock, wait.mode, &wait.owner)?;
        for by in blockers {
            let back = by.owner == self.me;
            let owner = by.owner.clone();
            self.path.push(Edge {
                wait: wait.clone(),
                by,
            });
            if back {
                return Ok(true);
            }
            if self.on_path.insert(owner.clone()) {
                if self.read() {
                    if let Some(next) = self.graph.wait_of(&owner)? {
                        if self.from(&next)? {
                            return Ok(true);
                        }
                    }
                }
                self.on_path.remove(&owner);
            }
            self.path.pop();
        }
        Ok(false)
    }

    /// Counts one read; false when the bound is reached.
    fn read(&mut self) -> bool {
        self.reads += 1;
        self.reads <= self.bounds.reads
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A graph in memory: lock -> holders, owner -> wait; `gone` edges fail `still`.
    #[derive(Default)]
    struct Map {
        holders: HashMap<&'static str, Vec<&'static str>>,
        waits: HashMap<&'static str, (&'static str, u64)>,
        gone: Vec<(&'static str, &'static str)>,
        reads: usize,
    }

    impl Map {
        fn hold(&mut self, lock: &'static str, owner: &'static str) {
            self.holders.entry(lock).or_default().push(owner);
        }
        fn wait(&mut self, owner: &'static str, lock: &'static str, since: u64) {
            self.waits.insert(owner, (lock, since));
        }
        fn wait_of_me(&self, owner: &'static str) -> Wait {
            let (lock, since) = self.waits[owner];
            wait(owner, lock, since)
        }
    }

    fn wait(owner: &str, lock: &str, since_ms: u64) -> Wait {
        Wait {
            owner: owner.into(),
            lock: lock.into(),
            mode: Mode::Exclusive,
            since_ms,
        }
    }

    impl Graph for Map {
        fn blockers(&mut self, lock: &str, _: Mode, waiter: &str) -> Result<Vec<Blocker>> {
            self.reads += 1;
            Ok(self
                .holders
                .get(lock)
                .into_iter()
                .flatten()
                .filter(|o| **o != waiter)
                .map(|o| Blocker {
                    owner: (*o).into(),
                    field: Some((*o).into()),
                })
                .collect())
        }
        fn wait_of(&mut self, owner: &str) -> Result<Option<Wait>> {
            self.reads += 1;
            Ok(self.waits.get(owner).map(|(l, s)| wait(owner, l, *s)))
        }
        fn still(&mut self, edge: &Edge) -> Result<bool> {
            Ok(!self
                .gone
                .iter()
                .any(|(o, b)| *o == edge.wait.owner && *b == edge.by.owner))
        }
    }

    fn owners(cycle: &[Edge]) -> Vec<&str> {
        cycle.iter().map(|e| e.wait.owner.as_str()).collect()
    }

    #[test]
    fn a_two_cycle_is_found_from_either_member_and_both_pick_the_youngest_wait() {
        let mut g = Map::default();
        g.hold("l1", "a");
        g.hold("l2", "b");
        g.wait("a", "l2", 100);
        g.wait("b", "l1", 250);
        let me = |o| g.wait_of_me(o);
        let (a, b) = (me("a"), me("b"));
        let from_a = find(&mut g, &a, BOUNDS).unwrap().unwrap();
        assert_eq!(owners(&from_a), ["a", "b"]);
        let from_b = find(&mut g, &b, BOUNDS).unwrap().unwrap();
        assert_eq!(owners(&from_b), ["b", "a"]);
        assert_eq!(victim(&from_a).unwrap().owner, "b");
        assert_eq!(victim(&from_b).unwrap().owner, "b");
    }

    #[test]
    fn a_three_cycle_is_found_and_a_chain_without_one_is_not() {
        let mut g = Map::default();
        for (lock, owner) in [("l1", "a"), ("l2", "b"), ("l3", "c")] {
            g.hold(lock, owner);
        }
        g.wait("a", "l2", 1);
        g.wait("b", "l3", 2);
        let me = g.wait_of_me("a");
        assert!(
            find(&mut g, &me, BOUNDS).unwrap().is_none(),
            "c waits for nothing"
        );
        g.wait("c", "l1", 3);
        let cycle = find(&mut g, &me, BOUNDS).unwrap().unwrap();
        assert_eq!(owners(&cycle), ["a", "b", "c"]);
        assert_eq!(cycle[2].by.owner, "a");
    }

    #[test]
    fn waits_of_the_same_ms_pick_the_greatest_owner_id() {
        let cycle = [
            Edge {
                wait: wait("u:2", "l1", 7),
                by: Blocker {
                    owner: "u:10".into(),
                    field: None,
                },
            },
            Edge {
                wait: wait("u:10", "l2", 7),
                by: Blocker {
                    owner: "u:2".into(),
                    field: None,
                },
            },
        ];
        assert_eq!(victim(&cycle).unwrap().owner, "u:2", "\"u:2\" > \"u:10\"");
    }

    #[test]
    fn a_cycle_not_through_the_walker_is_left_to_its_members() {
        // a waits for b, who is in a cycle with c: a is not in it.
        let mut g = Map::default();
        g.hold("l0", "x");
        g.hold("l1", "b");
        g.hold("l2", "c");
        g.wait("a", "l1", 1);
        g.wait("b", "l2", 2);
        g.wait("c", "l1", 3);
        let me = g.wait_of_me("a");
        assert!(find(&mut g, &me, BOUNDS).unwrap().is_none());
    }

    #[test]
    fn the_walk_stops_at_its_bounds() {
        // A chain of 20 waits back to the walker: longer than the depth bound.
        let mut g = Map::default();
        let names: Vec<&'static str> = (0..20)
            .map(|i| &*Box::leak(format!("o{i}").into_boxed_str()))
            .collect();
        let locks: Vec<&'static str> = (0..20)
            .map(|i| &*Box::leak(format!("l{i}").into_boxed_str()))
            .collect();
        for i in 0..20 {
            g.hold(locks[i], names[i]);
            g.wait(names[i], locks[(i + 1) % 20], i as u64);
        }
        let me = g.wait_of_me(names[0]);
        assert!(find(&mut g, &me, BOUNDS).unwrap().is_none());
        assert!(g.reads <= BOUNDS.reads, "{} reads", g.reads);
        let wide = Bounds {
            depth: 20,
            reads: 100,
        };
        g.reads = 0;
        assert_eq!(find(&mut g, &me, wide).unwrap().unwrap().len(), 20);
        let few = Bounds {
            depth: 20,
            reads: 10,
        };
        g.reads = 0;
        assert!(find(&mut g, &me, few).unwrap().is_none());
        assert!(g.reads <= 10, "{} reads", g.reads);
    }

    #[test]
    fn an_owner_met_first_at_the_end_of_a_long_chain_still_closes_the_short_cycle() {
        // y waits for l1, held by a (listed first) and x; a leads down a chain of waits that
        // ends at x, cut off by the depth bound; x waits for y's lock. The walk from y must
        // still find y -> x -> y.
        let mut g = Map::default();
        g.hold("l1", "a");
        g.hold("l1", "x");
        g.hold("ly", "y");
        g.wait("y", "l1", 100);
        g.wait("x", "ly", 1);
        let chain: Vec<&'static str> = (0..8)
            .map(|i| &*Box::leak(format!("c{i}").into_boxed_str()))
            .collect();
        let locks: Vec<&'static str> = (0..8)
            .map(|i| &*Box::leak(format!("lc{i}").into_boxed_str()))
            .collect();
        g.wait("a", locks[0], 2);
        for i in 0..8 {
            g.hold(locks[i], chain[i]);
            let next = if i + 1 < 8 { locks[i + 1] } else { "lx" };
            g.wait(chain[i], next, 3 + i as u64);
        }
        g.hold("lx", "x");
        let y = g.wait_of_me("y");
        let cycle = find(&mut g, &y, BOUNDS).unwrap().expect("the short cycle");
        assert_eq!(owners(&cycle), ["y", "x"]);
    }

    #[test]
    fn a_cycle_whose_edge_went_away_is_not_confirmed() {
        let mut g = Map::default();
        g.hold("l1", "a");
        g.hold("l2", "b");
        g.wait("a", "l2", 1);
        g.wait("b", "l1", 2);
        let a = g.wait_of_me("a");
        let cycle = find(&mut g, &a, BOUNDS).unwrap().unwrap();
        assert!(confirm(&mut g, &cycle).unwrap());
        // b released l2 (the edge a -> b is gone) before the second look.
        g.gone.push(("a", "b"));
        assert!(!confirm(&mut g, &cycle).unwrap());
    }
}
