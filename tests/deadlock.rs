//! Deadlocks across processes: wait records on the server, cycles of waits found and broken
//! (one victim, `Error::Deadlock`), and no report where there is no cycle.

mod support;

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config, Error, MultiLock};
use support::child::ChildTest;
use support::{wait_until, RedisServer};

const GENEROUS: Duration = Duration::from_secs(20);
/// How long the test clients wait before they look (the default is 1 s).
const CHECK_AFTER: Duration = Duration::from_millis(200);

/// A client that looks for deadlocks after [`CHECK_AFTER`]; from a URL, as the member child
/// processes have no server of their own.
fn client(url: &str) -> Client {
    let config = Config::builder(url)
        .deadlock_check_after(CHECK_AFTER)
        .build()
        .unwrap();
    Client::new(config).unwrap()
}

/// `owner`'s record in `lock`'s wait records, if any.
fn record(server: &RedisServer, lock: &str, owner: &str) -> Option<String> {
    server
        .conn()
        .hget(format!("redlatch_waits:{{{lock}}}"), owner)
        .unwrap()
}

/// Waits until `owner`'s wait for `lock` is recorded.
fn await_record(server: &RedisServer, lock: &str, owner: &str) {
    assert!(
        wait_until(GENEROUS, || record(server, lock, owner).is_some()),
        "{owner}'s wait for `{lock}` was never recorded"
    );
}

/// How a member's wait ended, and when.
type Outcome = (redlatch::Result<()>, Instant);

/// Starts a thread of `client` that holds `hold`, reports its owner id, waits for the word,
/// then waits for `want` and reports the outcome (and when it came); it keeps what it got
/// until told again.
fn member(
    client: &Client,
    hold: &'static str,
    want: &'static str,
) -> (String, mpsc::Sender<()>, mpsc::Receiver<Outcome>) {
    let client = client.clone();
    let (owner_tx, owner_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (out_tx, out_rx) = mpsc::channel();
    let thread = std::thread::Builder::new().name(format!("member-{hold}"));
    thread
        .spawn(move || {
            let held = client.lock(hold).lock().unwrap();
            owner_tx.send(client.owner_id()).unwrap();
            go_rx.recv().unwrap();
            // Bounded: a cycle that is never broken fails the test instead of hanging it.
            let got = client.lock(want).try_lock_for(GENEROUS);
            let outcome = match &got {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err(Error::Timeout(format!("{want} never came"))),
                Err(e) => Err(e.clone()),
            };
            out_tx.send((outcome, Instant::now())).unwrap();
            let _ = go_rx.recv();
            drop((got, held));
        })
        .unwrap();
    (owner_rx.recv().unwrap(), go_tx, out_rx)
}

#[test]
fn a_cycle_between_two_threads_ends_the_younger_wait_and_the_other_gets_its_lock() {
    let server = RedisServer::new();
    let client = client(&server.url());
    let (a, go_a, out_a) = member(&client, "t:1", "t:2");
    let (b, go_b, out_b) = member(&client, "t:2", "t:1");
    go_a.send(()).unwrap();
    await_record(&server, "t:2", &a);
    let started = Instant::now();
    go_b.send(()).unwrap();
    let (outcome, at) = out_b.recv_timeout(GENEROUS).expect("b's wait ended");
    let err = outcome.expect_err("b, the younger wait, is the victim");
    assert!(at - started < Duration::from_secs(3), "{:?}", at - started);
    let Error::Deadlock { cycle } = &err else {
        panic!("{err}")
    };
    let steps: Vec<(String, &str, String)> = cycle
        .iter()
        .map(|s| {
            (
                s.owner.to_string(),
                s.lock.as_str(),
                s.blocked_by.to_string(),
            )
        })
        .collect();
    let (a_id, b_id) = (a.to_string(), b.to_string());
    assert_eq!(
        steps,
        [(b_id.clone(), "t:1", a_id.clone()), (a_id, "t:2", b_id)],
        "{err}"
    );
    assert_eq!(client.metrics().deadlocks, 1, "one victim counted");
    assert!(
        record(&server, "t:1", &b).is_none(),
        "the victim's record is gone"
    );
    // b still holds t:2 (its other guard stays), so a waits on: no second victim.
    assert!(out_a.recv_timeout(Duration::from_millis(700)).is_err());
    go_b.send(()).unwrap(); // b releases t:2
    let (outcome, _) = out_a.recv_timeout(GENEROUS).expect("a's wait ended");
    outcome.expect("a gets t:2 once the victim releases it");
    assert!(
        record(&server, "t:2", &a).is_none(),
        "removed as it was granted"
    );
    go_a.send(()).unwrap();
}

#[test]
fn a_cycle_through_a_lock_set_ends_the_sets_wait_with_the_deadlock_error() {
    let server = RedisServer::new();
    let client = client(&server.url());
    let (b, go_b, out_b) = member(&client, "t:s3", "t:s1");
    let (set_tx, set_rx) = mpsc::channel();
    let (go_a, go_rx) = mpsc::channel::<()>();
    let c = client.clone();
    std::thread::spawn(move || {
        let _held = c.lock("t:s1").lock().unwrap();
        set_tx.send(Ok(c.owner_id())).unwrap();
        go_rx.recv().unwrap();
        let got = c.lock_set(["t:s2", "t:s3"]).try_lock_for(GENEROUS);
        set_tx.send(got.map(|g| format!("{g:?}"))).unwrap();
    });
    let a = set_rx.recv().unwrap().unwrap();
    go_b.send(()).unwrap();
    await_record(&server, "t:s1", &b);
    go_a.send(()).unwrap();
    // The set's wait for t:s3 (held by b, which waits for a's t:s1) is the younger.
    let err = set_rx
        .recv_timeout(GENEROUS)
        .expect("the set's wait ended")
        .expect_err("the set's wait is the victim");
    let Error::Deadlock { cycle } = &err else {
        panic!("{err}")
    };
    let steps: Vec<(String, &str)> = cycle
        .iter()
        .map(|s| (s.owner.to_string(), s.lock.as_str()))
        .collect();
    assert_eq!(
        steps,
        [(a.to_string(), "t:s3"), (b.to_string(), "t:s1")],
        "{err}"
    );
    assert!(record(&server, "t:s3", &a).is_none(), "its record is gone");
    // a's thread ended, releasing t:s1: b gets it, and the set took nothing.
    let (outcome, _) = out_b.recv_timeout(GENEROUS).expect("b's wait ended");
    outcome.expect("b gets t:s1");
    let exists: bool = server.conn().exists("t:s2").unwrap();
    assert!(!exists, "the set holds nothing after its wait failed");
    go_b.send(()).unwrap();
}

#[test]
fn a_cycle_through_a_multi_lock_ends_with_the_deadlock_error_itself() {
    let server = RedisServer::new();
    let client = client(&server.url());
    // a holds m:0 and waits for m:1; b holds m:1 and waits, as a multi-lock, for m:0 and m:2.
    let (a, go_a, out_a) = member(&client, "m:0", "m:1");
    let multi = client.clone();
    let (b_tx, b_rx) = mpsc::channel();
    let (b_go_tx, b_go_rx) = mpsc::channel::<()>();
    let b = std::thread::spawn(move || {
        let held = multi.lock("m:1").lock().unwrap();
        b_tx.send(multi.owner_id()).unwrap();
        b_go_rx.recv().unwrap();
        let both = MultiLock::new([multi.lock("m:0"), multi.lock("m:2")]).unwrap();
        let outcome = both.try_lock_for(GENEROUS).map(|g| g.is_some());
        drop(held);
        outcome
    });
    let b_owner = b_rx.recv().unwrap();
    go_a.send(()).unwrap();
    await_record(&server, "m:1", &a);
    b_go_tx.send(()).unwrap();
    let err = b
        .join()
        .unwrap()
        .expect_err("the multi-lock's wait is the younger");
    assert!(
        err.is_deadlock(),
        "not wrapped as a member's failure: {err}"
    );
    assert!(err.to_string().contains(&b_owner) && err.to_string().contains("m:0"));
    let (outcome, _) = out_a.recv_timeout(GENEROUS).expect("a's wait ended");
    outcome.expect("a gets m:1 once the multi-lock's thread released it");
    go_a.send(()).unwrap();
}

#[test]
fn a_wait_with_no_cycle_is_recorded_renewed_and_removed_and_never_reported() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .deadlock_check_after(Duration::from_millis(100))
        .watchdog_timeout(Duration::from_millis(900))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let holder = client.lock("r:held").lock().unwrap();
    let waiting = client.clone();
    let (owner_tx, owner_rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // A thread that holds a lock: only such a thread's waits are recorded.
        let _own = waiting.lock("r:own").lock().unwrap();
        owner_tx.send(waiting.owner_id()).unwrap();
        waiting
            .lock("r:held")
            .try_lock_for(Duration::from_millis(3500))
            .map(|g| g.is_some())
    });
    let owner = owner_rx.recv().unwrap();
    await_record(&server, "r:held", &owner);
    let first = record(&server, "r:held", &owner).unwrap();
    let mut conn = server.conn();
    let index: Option<String> = conn
        .hget(format!("redlatch_waiting:{{{}}}", client.id()), &owner)
        .unwrap();
    assert!(
        index.unwrap().ends_with(" r:held"),
        "the index names the lock"
    );
    let parts = |v: &str| -> (u64, u64, String) {
        let mut p = v.splitn(3, ' ');
        let e = p.next().unwrap().parse().unwrap();
        let s = p.next().unwrap().parse().unwrap();
        (e, s, p.next().unwrap().to_owned())
    };
    let (e1, s1, m1) = parts(&first);
    // Past the first expiry (a 900 ms lease), on the server's clock: the watchdog renewed
    // the record, which kept its since.
    assert!(wait_until(GENEROUS, || {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
        secs * 1000 + micros / 1000 > e1 + 100
    }));
    let later = record(&server, "r:held", &owner).expect("renewed past its lease");
    let (e2, s2, m2) = parts(&later);
    assert!(e2 > e1, "{first} then {later}");
    assert_eq!((s1, m1.as_str()), (s2, "x"));
    assert_eq!(m2, "x");
    // Given up: no report, and nothing left.
    assert!(!waiter.join().unwrap().expect("no deadlock, no error"));
    assert!(record(&server, "r:held", &owner).is_none());
    let left: Option<String> = conn
        .hget(format!("redlatch_waiting:{{{}}}", client.id()), &owner)
        .unwrap();
    assert_eq!(left, None);
    drop(holder);
}

#[test]
fn many_waiters_behind_long_holds_with_no_cycle_are_never_reported() {
    let server = RedisServer::new();
    let clients: Vec<Client> = (0..4).map(|_| client(&server.url())).collect();
    // One holder per lock; 200 waiters over 4 clients and 4 locks; each holder also waits
    // for a lock held by nobody in a cycle with it (a chain, not a cycle).
    let holds: Vec<_> = (0..4)
        .map(|i| clients[i].lock(format!("w:{i}")).lock().unwrap())
        .collect();
    let (done_tx, done_rx) = mpsc::channel();
    for n in 0..200 {
        let client = clients[n % 4].clone();
        let done = done_tx.clone();
        std::thread::spawn(move || {
            // Each holds a lock of its own (so that its wait is recorded and checked).
            let _own = client.lock(format!("w:own:{n}")).lock().unwrap();
            let got = client
                .lock(format!("w:{}", n % 4))
                .try_lock_for(GENEROUS)
                .map(|g| g.is_some());
            done.send(got).unwrap();
        });
    }
    // Every waiter recorded (its first check), then every record written again (its second
    // check rewrites the expiry): each walked the graph at least twice, and found no cycle.
    let mut conn = server.conn();
    let mut records = || -> Vec<(String, String)> {
        (0..4)
            .flat_map(|i| {
                conn.hgetall::<_, Vec<(String, String)>>(format!("redlatch_waits:{{w:{i}}}"))
                    .unwrap()
            })
            .collect()
    };
    let mut first = Vec::new();
    assert!(wait_until(GENEROUS, || {
        first = records();
        first.len() == 200
    }));
    assert!(wait_until(GENEROUS, || {
        let now = records();
        now.len() == 200 && now.iter().all(|r| !first.contains(r))
    }));
    drop(holds);
    for _ in 0..200 {
        let got = done_rx.recv_timeout(GENEROUS).expect("every waiter ends");
        assert!(
            got.expect("no deadlock reported"),
            "every waiter gets its lock"
        );
    }
}

#[test]
fn a_cycle_that_dissolves_before_the_check_is_not_reported() {
    let server = RedisServer::new();
    let a_client = client(&server.url());
    // b looks only after 1 s (the default) and gives up before.
    let b_client = Client::open(server.url()).unwrap();
    let (a, go_a, out_a) = member(&a_client, "d:1", "d:2");
    let b_held = b_client.lock("d:2").lock().unwrap();
    go_a.send(()).unwrap();
    await_record(&server, "d:2", &a);
    let gave_up = b_client
        .lock("d:1")
        .try_lock_for(Duration::from_millis(600))
        .expect("no deadlock: b's wait ended before it looked");
    assert!(gave_up.is_none());
    drop(b_held);
    let (outcome, _) = out_a.recv_timeout(GENEROUS).unwrap();
    outcome.expect("a was never the victim");
    go_a.send(()).unwrap();
}

#[test]
fn a_thread_that_holds_no_lock_is_never_recorded() {
    // It is in nobody's way: no cycle can go through it, so its wait costs nothing more.
    let server = RedisServer::new();
    let client = client(&server.url());
    let holder = Client::open(server.url()).unwrap();
    let _held = holder.lock("free:held").lock().unwrap();
    let got = client
        .lock("free:held")
        .try_lock_for(Duration::from_millis(700))
        .unwrap();
    assert!(got.is_none());
    let keys: Vec<String> = server.conn().keys("redlatch_wait*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[test]
fn a_client_with_detection_off_records_nothing() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .deadlock_detection(false)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let holder = Client::open(server.url()).unwrap();
    let _held = holder.lock("off").lock().unwrap();
    let _own = client.lock("off:own").lock().unwrap();
    let got = client
        .lock("off")
        .try_lock_for(Duration::from_millis(1300))
        .unwrap();
    assert!(got.is_none());
    let keys: Vec<String> = server.conn().keys("redlatch_wait*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// A member of a cycle in a process of its own: holds `HOLD`, says so, and on a line of its
/// stdin waits for `WANT`; says how that ended, and releases everything.
#[test]
#[ignore = "the child half of the cross-process deadlock tests"]
fn deadlock_member_child() {
    let Ok(url) = std::env::var("REDLATCH_DEADLOCK_URL") else {
        return;
    };
    let hold = std::env::var("REDLATCH_DEADLOCK_HOLD").unwrap();
    let want = std::env::var("REDLATCH_DEADLOCK_WANT").unwrap();
    let client = client(&url);
    let held = client.lock(&hold).lock().unwrap();
    println!("HELD {}", client.owner_id());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    match client.lock(&want).try_lock_for(GENEROUS) {
        Ok(Some(got)) => {
            println!("ACQUIRED");
            drop(got);
        }
        Ok(None) => println!("TIMED OUT"),
        Err(e) if e.is_deadlock() => println!("DEADLOCK {e}"),
        Err(e) => println!("ERROR {e}"),
    }
    std::io::stdout().flush().unwrap();
    drop(held);
}

fn child_member(server: &RedisServer, hold: &str, want: &str) -> (ChildTest, String) {
    let child = ChildTest::start(
        "deadlock_member_child",
        &[
            ("REDLATCH_DEADLOCK_URL", server.url()),
            ("REDLATCH_DEADLOCK_HOLD", hold.to_owned()),
            ("REDLATCH_DEADLOCK_WANT", want.to_owned()),
        ],
    );
    let owner = child.next("HELD", GENEROUS);
    (child, owner)
}

fn go(child: &mut ChildTest) {
    let stdin = child.child.stdin.as_mut().unwrap();
    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
}

#[test]
fn a_cycle_between_two_processes_ends_exactly_one_wait() {
    let server = RedisServer::new();
    let client = client(&server.url());
    let (a, go_a, out_a) = member(&client, "p:1", "p:2");
    let (mut child, b) = child_member(&server, "p:2", "p:1");
    go_a.send(()).unwrap();
    await_record(&server, "p:2", &a);
    let started = Instant::now();
    go(&mut child);
    let said = child.next("DEADLOCK", GENEROUS);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(said.contains(&a) && said.contains(&b), "{said}");
    // The error names each member's client, process and thread.
    let child_pid = format!("pid {} on", child.pid());
    let this_pid = format!("pid {} on", std::process::id());
    for part in [&child_pid, &this_pid, "thread member-p:1", "(redlatch, "] {
        assert!(said.contains(part), "{part} in {said}");
    }
    let (outcome, _) = out_a.recv_timeout(GENEROUS).unwrap();
    outcome.expect("this process's wait proceeds and holds");
    assert_eq!(
        client.lock("p:2").hold_count().unwrap(),
        0,
        "another thread holds it"
    );
    assert!(client.lock("p:2").is_locked().unwrap());

    // Kept on the server for a look back: one record, every member named.
    let kept = client.deadlocks().unwrap();
    assert_eq!(kept.len(), 1, "{kept:#?}");
    let broken = &kept[0];
    assert_eq!(broken.victim.to_string(), b);
    let step = |owner: &str| {
        let found = broken.cycle.iter().find(|s| s.owner.to_string() == owner);
        found
            .unwrap_or_else(|| panic!("{owner} in {broken:#?}"))
            .clone()
    };
    let (mine, theirs) = (step(&a), step(&b));
    assert_eq!((mine.lock.as_str(), theirs.lock.as_str()), ("p:2", "p:1"));
    assert_eq!(mine.blocked_by.to_string(), b);
    assert_eq!(mine.who.pid, Some(std::process::id()));
    assert_eq!(theirs.who.pid, Some(child.pid()));
    assert_eq!(mine.who.thread.as_deref(), Some("member-p:1"));
    assert!(theirs.who.thread.is_some(), "{theirs:?}");
    for who in [&mine.who, &theirs.who] {
        assert_eq!(who.client_name.as_deref(), Some("redlatch"));
        assert!(who.host.as_deref().is_some_and(|h| !h.is_empty()));
    }
    let now_us = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .unwrap()
        .as_micros() as u64;
    assert!(broken.at_us.abs_diff(now_us) < 60_000_000, "{broken:?}");
    // Counted in top, for both locks of the cycle.
    let top = client.top("p:*", Duration::from_secs(60)).unwrap();
    let counted: Vec<(&str, usize)> = top.iter().map(|r| (r.name.as_str(), r.deadlocks)).collect();
    assert!(
        counted.contains(&("p:1", 1)) && counted.contains(&("p:2", 1)),
        "{counted:?}"
    );
    // Bounded and expiring.
    let ttl: i64 = server.conn().pttl("redlatch_deadlocks").unwrap();
    assert!(ttl > 6 * 24 * 3600 * 1000, "{ttl}");
    go_a.send(()).unwrap();
}

#[test]
fn a_cycle_across_three_processes_ends_the_youngest_wait() {
    let server = RedisServer::new();
    let client = client(&server.url());
    let (a, go_a, out_a) = member(&client, "q:1", "q:2");
    let (mut b, b_owner) = child_member(&server, "q:2", "q:3");
    let (mut c, c_owner) = child_member(&server, "q:3", "q:1");
    go_a.send(()).unwrap();
    await_record(&server, "q:2", &a);
    go(&mut b);
    await_record(&server, "q:3", &b_owner);
    go(&mut c);
    let said = c.next("DEADLOCK", GENEROUS);
    for owner in [&a, &b_owner, &c_owner] {
        assert!(said.contains(owner.as_str()), "{said}");
    }
    assert_eq!(b.next("ACQUIRED", GENEROUS), "");
    let (outcome, _) = out_a.recv_timeout(GENEROUS).unwrap();
    outcome.expect("the oldest wait gets its lock last");
    go_a.send(()).unwrap();
}

/// The keys of the deployment's lock-order records.
fn order_keys(server: &RedisServer) -> Vec<String> {
    server.conn().keys("redlatch_order:*").unwrap()
}

#[test]
fn locks_taken_in_opposite_orders_are_warned_of_and_reads_and_tries_are_not() {
    let server = RedisServer::new();
    let checking = |on: bool| {
        let config = Config::builder(server.url().as_str())
            .lock_order_checks(on)
            .build()
            .unwrap();
        Client::new(config).unwrap()
    };
    let (one, two, off) = (checking(true), checking(true), checking(false));
    let both = |c: &Client, first: &str, second: &str| {
        let _first = c.lock(first).lock().unwrap();
        let _second = c.lock(second).lock().unwrap();
    };
    both(&off, "o:a", "o:b");
    both(&off, "o:b", "o:a");
    assert!(
        order_keys(&server).is_empty(),
        "checks off: nothing recorded"
    );

    both(&one, "o:a", "o:b");
    let keys = order_keys(&server);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let ttl: i64 = server.conn().pttl(&keys[0]).unwrap();
    assert!(ttl > 0 && ttl <= 24 * 3600 * 1000, "{ttl}");
    let listed: Vec<String> = one.list("*").unwrap().into_iter().map(|i| i.name).collect();
    assert!(
        listed.is_empty(),
        "order records are no objects: {listed:?}"
    );
    // A try never waits, so it cannot deadlock: b then a tried is no record.
    {
        let _b = two.lock("o:b").lock().unwrap();
        let _a = two.lock("o:a").try_lock().unwrap().expect("free");
    }
    // Reads in both orders block nobody.
    let read = |c: &Client, first: &str, second: &str| {
        let _first = c.read_write_lock(first).read().lock().unwrap();
        let _second = c.read_write_lock(second).read().lock().unwrap();
    };
    read(&one, "o:r1", "o:r2");
    read(&two, "o:r2", "o:r1");
    assert_eq!(two.metrics().lock_order_inversions, 0);
    assert!(one.lock_order_warnings().unwrap().is_empty());

    // The opposite order, on another thread of another client: warned of at once.
    let (two_c, done) = (two.clone(), mpsc::channel());
    std::thread::spawn(move || {
        both(&two_c, "o:b", "o:a");
        done.0.send(two_c.owner_id()).unwrap();
    });
    let other_owner = done.1.recv_timeout(GENEROUS).unwrap();
    assert_eq!(two.metrics().lock_order_inversions, 1);
    let warnings = off.lock_order_warnings().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert_eq!((w.one.held.as_str(), w.one.taken.as_str()), ("o:a", "o:b"));
    assert_eq!(
        (w.other.held.as_str(), w.other.taken.as_str()),
        ("o:b", "o:a")
    );
    assert_eq!(w.one.held_mode, redlatch::LockKind::Exclusive);
    assert!(w.one.by.starts_with(&one.owner_id()), "{}", w.one.by);
    assert!(w.other.by.starts_with(&other_owner), "{}", w.other.by);
    let pid = format!("pid {}", std::process::id());
    assert!(w.other.by.contains(&pid), "{}", w.other.by);
    assert!(w.other.by.contains("tests/deadlock.rs:"), "{}", w.other.by);
    assert!(w.to_string().contains("opposite orders"), "{w}");
    // Once per process: the same orders again are not sent again, nor counted.
    both(&two, "o:b", "o:a");
    assert_eq!(two.metrics().lock_order_inversions, 1);
}
