//! RedLock over 5 independent masters started by the harness: majority, validity, dead and
//! paused nodes, and a clean slate after a failed attempt.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Error, RedLock};
use support::RedisServer;

struct Nodes {
    servers: Vec<RedisServer>,
}

impl Nodes {
    fn start() -> Nodes {
        Nodes {
            servers: (0..5).map(|_| RedisServer::new()).collect(),
        }
    }

    /// One client per node, with timeouts short enough for dead-node tests.
    fn clients(&self) -> Vec<Client> {
        self.servers
            .iter()
            .map(|s| {
                support::client_with(s, |b| {
                    b.connect_timeout(Duration::from_millis(500))
                        .response_timeout(Duration::from_secs(2))
                })
            })
            .collect()
    }

    /// Keys on node `i`, not counting the short-lived unlock latches an unlock leaves.
    fn keys_on(&self, i: usize) -> usize {
        self.keys_named_on(i).len()
    }

    /// [`keys_on`](Self::keys_on)'s keys, each with its PTTL, for a failure's message.
    fn keys_named_on(&self, i: usize) -> Vec<(String, i64)> {
        let mut conn = self.servers[i].conn();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        keys.into_iter()
            .filter(|k| !k.starts_with("redisson_unlock_latch:"))
            .map(|k| {
                let pttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut conn).unwrap();
                (k, pttl)
            })
            .collect()
    }
}

fn redlock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.lock(name))).unwrap()
}

#[test]
fn all_nodes_up_holds_on_every_node_and_unlocks_everywhere() {
    let nodes = Nodes::start();
    let clients = nodes.clients();
    let lock = redlock(&clients, "rl:all");
    assert_eq!(lock.quorum(), 3);
    let guard = lock.lock().unwrap();
    assert_eq!(guard.held(), 5);
    for (i, client) in clients.iter().enumerate() {
        let count: Option<u32> = redis::cmd("HGET")
            .arg("rl:all")
            .arg(client.owner_id())
            .query(&mut nodes.servers[i].conn())
            .unwrap();
        assert_eq!(count, Some(1), "node {i}");
    }
    let validity = guard.validity();
    assert!(
        validity > Duration::from_secs(29) && validity < Duration::from_secs(30),
        "{validity:?}"
    );
    guard.unlock().unwrap();
    for i in 0..5 {
        assert_eq!(nodes.keys_on(i), 0, "node {i}");
    }
}

#[test]
fn two_of_five_masters_killed_still_acquires() {
    let mut nodes = Nodes::start();
    let clients = nodes.clients();
    nodes.servers[1].kill();
    nodes.servers[3].kill();
    let lock = redlock(&clients, "rl:two-dead");
    let guard = lock.lock().unwrap();
    assert_eq!(guard.held(), 3);
    assert!(guard.member(1).is_none() && guard.member(3).is_none());
    assert!(!guard.is_lost());
    for i in [0, 2, 4] {
        assert_eq!(nodes.keys_on(i), 1, "node {i}");
    }
    // The three holds are enough to exclude everybody else.
    let others = nodes.clients();
    assert!(redlock(&others, "rl:two-dead")
        .try_lock()
        .unwrap()
        .is_none());
    guard.unlock().unwrap();
    for i in [0, 2, 4] {
        assert_eq!(nodes.keys_on(i), 0, "node {i}");
    }
}

#[test]
fn three_of_five_masters_killed_fails_clearly_and_leaves_no_keys() {
    let mut nodes = Nodes::start();
    let clients = nodes.clients();
    for i in [0, 2, 4] {
        nodes.servers[i].kill();
    }
    let lock = redlock(&clients, "rl:three-dead");
    let start = Instant::now();
    let err = lock.lock().unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    match &err {
        Error::NoQuorum {
            name,
            acquired,
            wanted,
            nodes: n,
            failures,
        } => {
            assert_eq!(name, "rl:three-dead");
            assert_eq!((*wanted, *n), (3, 5));
            assert!(*acquired <= 2);
            assert_eq!(failures.len(), 3, "{err}");
            assert!(failures.iter().all(|(_, e)| e.is_connection()), "{err}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    assert!(err.is_no_quorum());
    let text = err.to_string();
    assert!(text.contains("3 needed") && text.contains("#0"), "{text}");
    for i in [1, 3] {
        assert_eq!(nodes.keys_on(i), 0, "survivor {i} keeps no key");
    }
}

#[test]
fn a_paused_node_costs_only_the_node_timeout() {
    let nodes = Nodes::start();
    let clients = nodes.clients();
    nodes.servers[0].stop();
    let lock = redlock(&clients, "rl:paused")
        .with_node_timeout(Duration::from_millis(150))
        .unwrap();
    let start = Instant::now();
    let guard = lock.lock().unwrap();
    let took = start.elapsed();
    // The client's own response timeout is 2 s: the node timeout bounds the paused node.
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert_eq!(guard.held(), 4);
    guard.unlock().unwrap();
    nodes.servers[0].cont();
}

#[test]
fn split_votes_give_nobody_the_lock_and_leave_nothing_behind() {
    let nodes = Nodes::start();
    let clients = nodes.clients();
    // Another owner holds nodes 0 and 1, a third one node 2: no majority is possible.
    let x = nodes.clients();
    let y = nodes.clients();
    let held_x: Vec<_> = [0, 1]
        .iter()
        .map(|&i| x[i].lock("rl:split").lock().unwrap())
        .collect();
    let held_y = y[2].lock("rl:split").lock().unwrap();
    let lock = redlock(&clients, "rl:split");
    assert!(lock.try_lock().unwrap().is_none());
    let start = Instant::now();
    assert!(lock
        .try_lock_for(Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert!(start.elapsed() >= Duration::from_millis(300));
    for i in [3, 4] {
        assert_eq!(nodes.keys_on(i), 0, "node {i} was released");
    }
    drop(held_x);
    drop(held_y);
    let guard = lock.lock().unwrap();
    assert_eq!(guard.held(), 5);
}

#[test]
fn contending_redlocks_are_exclusive_and_wake_on_release() {
    let nodes = Nodes::start();
    let inside = Arc::new(AtomicBool::new(false));
    let sections = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let clients = nodes.clients();
            let (inside, sections) = (Arc::clone(&inside), Arc::clone(&sections));
            thread::spawn(move || {
                let lock = redlock(&clients, "rl:contended");
                for _ in 0..15 {
                    let guard = lock.lock().unwrap();
                    assert!(guard.held() >= 3);
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    thread::sleep(Duration::from_millis(1));
                    inside.store(false, Ordering::SeqCst);
                    sections.fetch_add(1, Ordering::SeqCst);
                    guard.unlock().unwrap();
                }
            })
        })
        .collect();
    support::join_within(
        handles,
        Duration::from_secs(60),
        "contending RedLocks stalled",
    );
    assert_eq!(sections.load(Ordering::SeqCst), 45);
    for i in 0..5 {
        assert_eq!(nodes.keys_on(i), 0, "node {i}");
    }
}

#[test]
fn validity_follows_the_formula_and_a_too_short_lease_is_an_error() {
    let nodes = Nodes::start();
    let clients = nodes.clients();
    // The node timeout is the clients' response timeout, not the default 200 ms, so that
    // every node answers in time even on a loaded machine.
    let lock = redlock(&clients, "rl:validity")
        .with_lease(Duration::from_secs(10))
        .with_node_timeout(Duration::from_secs(2))
        .unwrap();
    let before = Instant::now();
    let guard = lock.lock().unwrap();
    let elapsed = before.elapsed();
    let validity = guard.validity();
    // lease - elapsed - (lease / 100 + 2 ms) = 10 s - elapsed - 102 ms.
    assert!(validity <= Duration::from_millis(9898), "{validity:?}");
    assert!(
        validity >= Duration::from_millis(9898) - elapsed - Duration::from_millis(50),
        "{validity:?}"
    );
    guard.unlock().unwrap();

    // 2 ms cannot cover the 2 ms drift allowance: no majority is ever valid.
    let short = redlock(&clients, "rl:validity").with_lease(Duration::from_millis(2));
    let err = short.lock().unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("lease is too short"), "{err}");
    // A node whose reply came after the node timeout (a loaded machine) may hold what its
    // acquire took until the settle gives it back, once the node answers.
    for i in 0..5 {
        assert!(
            support::wait_until(Duration::from_secs(15), || nodes.keys_on(i) == 0),
            "node {i}: {:?}",
            nodes.keys_named_on(i)
        );
    }
}

// With 2 of 3 nodes paused for 350 ms, the acquires they ran on resuming (their replies came
// after the node timeout) left holds that nothing undid, which the owner re-entered and whose
// lease each unlock renewed; and a round that fell short waited on that one busy node for
// the caller's whole deadline: waits timed out with every node up.
#[test]
fn two_of_three_nodes_paused_for_350_ms_time_no_wait_out() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::new()).collect();
    let nodes = Nodes { servers };
    let done = Arc::new(AtomicBool::new(false));
    let sections = Arc::new(AtomicUsize::new(0));
    let timeouts = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let clients = nodes.clients();
            let (done, sections, timeouts) = (
                Arc::clone(&done),
                Arc::clone(&sections),
                Arc::clone(&timeouts),
            );
            thread::spawn(move || {
                let lock = redlock(&clients, "rl:paused2");
                while !done.load(Ordering::SeqCst) {
                    match lock.try_lock_for(Duration::from_secs(20)) {
                        Ok(Some(guard)) => {
                            sections.fetch_add(1, Ordering::SeqCst);
                            // A release while nodes are paused may fail on them: their
                            // holds are settled or run out.
                            let _ = guard.unlock();
                        }
                        Ok(None) => {
                            timeouts.fetch_add(1, Ordering::SeqCst);
                        }
                        // No quorum while two nodes are paused.
                        Err(e) => assert!(e.is_no_quorum() || e.is_timeout(), "{e}"),
                    }
                }
            })
        })
        .collect();
    let progress = |n: usize| {
        support::wait_until(Duration::from_secs(30), || {
            sections.load(Ordering::SeqCst) >= n
        })
    };
    assert!(progress(20), "no progress before the pause");
    for round in 0..3 {
        nodes.servers[0].stop();
        nodes.servers[1].stop();
        thread::sleep(Duration::from_millis(350));
        nodes.servers[0].cont();
        nodes.servers[1].cont();
        let resumed = sections.load(Ordering::SeqCst);
        assert!(
            progress(resumed + 30),
            "round {round}: {} sections since the nodes came back, {} waits timed out",
            sections.load(Ordering::SeqCst) - resumed,
            timeouts.load(Ordering::SeqCst)
        );
    }
    done.store(true, Ordering::SeqCst);
    support::join_within(handles, Duration::from_secs(60), "RedLock waiters stalled");
    assert_eq!(timeouts.load(Ordering::SeqCst), 0, "waits timed out");
    // What the late replies took was given back.
    for i in 0..3 {
        assert!(
            support::wait_until(Duration::from_secs(15), || nodes.keys_on(i) == 0),
            "node {i} keeps {} keys",
            nodes.keys_on(i)
        );
    }
}

// A node whose reply came after the node timeout is settled as any lost reply, and only what
// its own acquire took: the thread's own hold of the same lock on that node stays.
#[test]
fn a_late_member_is_given_back_but_not_the_threads_own_hold_there() {
    let nodes = Nodes {
        servers: (0..3).map(|_| RedisServer::new()).collect(),
    };
    let clients = nodes.clients();
    let own = clients[0].lock("rl:own").lock().unwrap();
    let count = || -> Option<i64> {
        redis::cmd("HGET")
            .arg("rl:own")
            .arg(clients[0].owner_id())
            .query(&mut nodes.servers[0].conn())
            .unwrap()
    };
    nodes.servers[0].stop();
    let guard = redlock(&clients, "rl:own").lock().unwrap();
    assert_eq!(guard.held(), 2);
    // Nothing settles while the node is paused.
    assert_eq!(
        clients[0].metrics().unsettled,
        1,
        "the late member is in doubt"
    );
    nodes.servers[0].cont();
    assert!(
        support::wait_until(Duration::from_secs(15), || clients[0].metrics().unsettled
            == 0),
        "the late member is settled"
    );
    assert_eq!(count(), Some(1), "the thread's own hold stays, alone");
    assert!(!own.is_lost());
    let other = nodes.clients();
    assert!(other[0].lock("rl:own").try_lock().unwrap().is_none());
    guard.unlock().unwrap();
    own.unlock().unwrap();
    for i in 0..3 {
        assert_eq!(nodes.keys_on(i), 0, "node {i}");
    }
}
