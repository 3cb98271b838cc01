//! Fair lock: FIFO grants across threads and clients, head-only wake-ups, clean give-ups, dead
//! waiters skipped, and the raw queue state in Redis.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config};
use support::{
    assert_quiet_for, await_waiting, command_calls, kill_pubsub_connections, numsub, wait_until,
    RedisServer,
};

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

fn queue(raw: &mut redis::Connection, name: &str) -> Vec<String> {
    raw.lrange(queue_key(name), 0, -1).unwrap()
}

fn deadline(raw: &mut redis::Connection, name: &str, owner: &str) -> Option<i64> {
    raw.zscore(timeout_key(name), owner).unwrap()
}

/// Asserts that no queued waiter's deadline has passed: they are all alive in these tests.
fn assert_no_deadline_passed(raw: &mut redis::Connection, name: &str) {
    let now = server_ms(raw);
    let deadlines: Vec<(String, i64)> = raw.zrange_withscores(timeout_key(name), 0, -1).unwrap();
    for (owner, d) in deadlines {
        assert!(
            d > now,
            "{owner}: deadline {d} passed (now {now}) while it waits"
        );
    }
}

fn server_ms(raw: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(raw).unwrap();
    s * 1000 + us / 1000
}

/// A client with the thread wait and lease under test; from a URL, as the child waiter has no
/// server of its own.
fn client_with(url: &str, thread_wait: Duration, watchdog: Duration) -> Client {
    let config = Config::builder(url)
        .fair_thread_wait(thread_wait)
        .watchdog_timeout(watchdog)
        .build()
        .unwrap();
    Client::new(config).unwrap()
}

/// What a waiter thread reports.
enum Event {
    Owner(String),
    Acquired(usize, Instant),
}

/// Starts a thread that reports its owner id, takes the fair lock `name`, reports the grant,
/// and holds the lock until told to release it (or at once if `release` is `None`).
fn waiter(
    client: &Client,
    name: &'static str,
    index: usize,
    events: mpsc::Sender<Event>,
    release: Option<mpsc::Receiver<()>>,
) -> std::thread::JoinHandle<()> {
    let client = client.clone();
    std::thread::spawn(move || {
        events.send(Event::Owner(client.owner_id())).unwrap();
        let guard = client.fair_lock(name).lock().unwrap();
        events.send(Event::Acquired(index, Instant::now())).unwrap();
        if let Some(release) = release {
            release.recv().unwrap();
        }
        guard.unlock().unwrap();
    })
}

fn recv_owner(events: &mpsc::Receiver<Event>) -> String {
    match events.recv_timeout(Duration::from_secs(5)).unwrap() {
        Event::Owner(o) => o,
        Event::Acquired(i, _) => panic!("waiter {i} acquired before queueing"),
    }
}

/// The next grant a waiter reports: its index and when `lock()` returned.
fn recv_grant(events: &mpsc::Receiver<Event>) -> (usize, Instant) {
    match events.recv_timeout(Duration::from_secs(10)).unwrap() {
        Event::Acquired(i, at) => (i, at),
        Event::Owner(_) => panic!("a waiter reported its owner id after the waiters queued"),
    }
}

/// The indexes of the next `n` grants, in grant order.
fn recv_grants(events: &mpsc::Receiver<Event>, n: usize) -> Vec<usize> {
    (0..n).map(|_| recv_grant(events).0).collect()
}

/// Two waiters of `client` queued on `name` behind the one waiter queued already, each
/// once it is in the queue: their events and threads.
fn two_waiters_behind_one(
    client: &Client,
    name: &'static str,
    raw: &mut redis::Connection,
) -> (mpsc::Receiver<Event>, Vec<std::thread::JoinHandle<()>>) {
    let (tx, events) = mpsc::channel();
    let mut handles = Vec::new();
    for i in 0..2 {
        handles.push(waiter(client, name, i, tx.clone(), None));
        recv_owner(&events);
        await_queued(raw, name, i + 2);
    }
    (events, handles)
}

/// After the first of [`two_waiters_behind_one`] got the lock: the second gets it next, and
/// nothing of the lock is left once both are done.
fn second_gets_it_and_nothing_is_left(
    events: &mpsc::Receiver<Event>,
    handles: Vec<std::thread::JoinHandle<()>>,
    raw: &mut redis::Connection,
    name: &str,
) {
    assert_eq!(recv_grant(events).0, 1);
    for h in handles {
        h.join().unwrap();
    }
    assert_nothing_left(raw, name);
}

/// Asserts that the lock, its queue and its timeout set are all gone from Redis.
fn assert_nothing_left(raw: &mut redis::Connection, name: &str) {
    for key in [name.to_owned(), queue_key(name), timeout_key(name)] {
        assert!(!raw.exists::<_, bool>(&key).unwrap(), "{key} left behind");
    }
}

/// Waits until `n` owners are queued on `name`.
fn await_queued(raw: &mut redis::Connection, name: &str, n: usize) {
    assert!(
        wait_until(Duration::from_secs(5), || queue(raw, name).len() == n),
        "{n} waiters never queued"
    );
}

#[test]
fn grant_order_equals_enqueue_order_for_20_threads_over_2_clients() {
    let server = RedisServer::new();
    let clients = [
        Client::open(server.url()).unwrap(),
        Client::open(server.url()).unwrap(),
    ];
    let mut raw = server.conn();
    let name = "fair:fifo";
    for round in 0..5 {
        let holder = clients[round % 2].fair_lock(name);
        let guard = holder.lock().unwrap();
        let (tx, events) = mpsc::channel();
        let mut handles = Vec::new();
        let mut owners = Vec::new();
        for i in 0..20 {
            handles.push(waiter(&clients[i % 2], name, i, tx.clone(), None));
            owners.push(recv_owner(&events));
            // Enqueue one at a time, so that the arrival order is known.
            await_queued(&mut raw, name, i + 1);
        }
        assert_eq!(
            queue(&mut raw, name),
            owners,
            "the queue holds the arrival order"
        );
        assert_eq!(raw.zcard::<_, usize>(timeout_key(name)).unwrap(), 20);
        if round == 0 {
            // The holder re-enters without queueing.
            let again = holder.lock().unwrap();
            assert_eq!(holder.hold_count().unwrap(), 2);
            assert_eq!(queue(&mut raw, name).len(), 20);
            drop(again);
            assert_eq!(holder.hold_count().unwrap(), 1);
        }
        drop(guard);
        let grants: Vec<usize> = recv_grants(&events, 20);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(grants, (0..20).collect::<Vec<_>>(), "round {round}");
        assert_nothing_left(&mut raw, name);
    }
}

/// Collects every message published on the lock's channels (PSUBSCRIBE on a raw connection).
fn listen(server: &RedisServer, name: &str) -> mpsc::Receiver<(String, String)> {
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut conn = server.conn();
    let pattern = format!("redisson_lock__channel:{{{name}}}*");
    std::thread::spawn(move || {
        let mut pubsub = conn.as_pubsub();
        pubsub.psubscribe(&pattern).unwrap();
        ready_tx.send(()).unwrap();
        // Ends when the server goes away with the test.
        while let Ok(msg) = pubsub.get_message() {
            let payload: String = msg.get_payload().unwrap();
            if tx
                .send((msg.get_channel_name().to_owned(), payload))
                .is_err()
            {
                break;
            }
        }
    });
    ready_rx.recv().unwrap();
    rx
}

#[test]
fn unlock_wakes_only_the_head_which_acquires_within_50ms_and_the_others_stay_silent() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    // A client each: a release inside one client passes the lock without a message (see
    // tests/handover.rs); this is the wake-up between processes. Without deadlock detection,
    // and with a minute's thread wait: a deadlock check (after a second of waiting) and a
    // waiter's check-in before its queue deadline (5 s by default) are script calls too,
    // which the rounds of a loaded machine can reach; here no timer fires during the test.
    let clients: Vec<Client> = (0..5)
        .map(|_| {
            let config = Config::builder(server.url().as_str())
                .deadlock_detection(false)
                .fair_thread_wait(Duration::from_secs(60))
                .build()
                .unwrap();
            Client::new(config).unwrap()
        })
        .collect();
    let name = "fair:head";
    let mut raw = server.conn();
    let messages = listen(&server, name);
    // Load the scripts first: a first EVALSHA answered NOSCRIPT would count as a call.
    drop(holder.fair_lock("fair:warm").lock().unwrap());
    let scripts_before = command_calls(&mut raw, "evalsha");
    let guard = holder.fair_lock(name).lock().unwrap();
    let (tx, events) = mpsc::channel();
    let mut releases = Vec::new();
    let mut handles = Vec::new();
    let mut owners = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let (release_tx, release_rx) = mpsc::channel();
        releases.push(release_tx);
        handles.push(waiter(client, name, i, tx.clone(), Some(release_rx)));
        owners.push(recv_owner(&events));
        await_queued(&mut raw, name, i + 1);
    }
    // The second listens on the head's channel too (a Redisson release wakes the head alone).
    for (i, owner) in owners.iter().enumerate() {
        let channel = format!("redisson_lock__channel:{{{name}}}:{owner}");
        let listeners = if i == 0 { 2 } else { 1 };
        assert!(wait_until(Duration::from_secs(5), || numsub(
            &mut raw, &channel
        ) == listeners));
    }
    // Each waiter blocks (the event), having tried twice: to join the queue, and once its
    // subscription was confirmed.
    for client in &clients {
        await_waiting(client, 1);
    }
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        scripts_before + 1 + 2 * 5
    );
    // Five blocked waiters: for a second, nothing but our own INFO calls reaches the server.
    assert_quiet_for(&mut raw, Duration::from_secs(1), "while waiting");

    let mut guard = Some(guard);
    let mut latencies = Vec::new();
    for (i, owner) in owners.iter().enumerate() {
        let evalsha = command_calls(&mut raw, "evalsha");
        let released_at = Instant::now();
        match guard.take() {
            Some(g) => drop(g),
            None => releases[i - 1].send(()).unwrap(),
        }
        let (j, at) = recv_grant(&events);
        assert_eq!(j, i, "the head gets the lock");
        latencies.push(at - released_at);
        // A quiet window: the release and the head's acquire are the only script calls, and
        // the only message went to the head's own channel.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(command_calls(&mut raw, "evalsha") - evalsha, 2, "round {i}");
        let (channel, payload) = messages.recv_timeout(Duration::from_secs(1)).unwrap();
        assert_eq!(
            channel,
            format!("redisson_lock__channel:{{{name}}}:{owner}")
        );
        assert_eq!(payload, "0");
        assert!(messages.try_recv().is_err(), "more than one waiter woken");
    }
    releases[4].send(()).unwrap();
    for h in handles {
        h.join().unwrap();
    }
    latencies.sort();
    assert!(latencies[2] < Duration::from_millis(50), "{latencies:?}");
    assert!(latencies[4] < Duration::from_millis(500), "{latencies:?}");
    assert_nothing_left(&mut raw, name);
}

#[test]
fn waiter_that_gives_up_leaves_the_queue_and_those_behind_move_up() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let wait_ms = client.config().fair_thread_wait().as_millis() as i64;
    let name = "fair:giveup";
    let mut raw = server.conn();
    let guard = holder.fair_lock(name).lock().unwrap();
    let (tx, events) = mpsc::channel();

    // A waits; B gives up after 1.5 s; C waits behind B. Each is counted waiting once it
    // has checked in after subscribing (which moves its deadline): the deadlines read below
    // change only by B's leave (C's next check-in is half a thread wait away).
    let give_up = Duration::from_millis(1500);
    let a = waiter(&client, name, 0, tx.clone(), None);
    let owner_a = recv_owner(&events);
    await_queued(&mut raw, name, 1);
    await_waiting(&client, 1);
    let client_b = client.clone();
    let (owner_tx, owner_rx) = mpsc::channel();
    let b = std::thread::spawn(move || {
        owner_tx.send(client_b.owner_id()).unwrap();
        let started = Instant::now();
        let got = client_b.fair_lock(name).try_lock_for(give_up).unwrap();
        (got.is_some(), started.elapsed())
    });
    let owner_b = owner_rx.recv().unwrap();
    await_queued(&mut raw, name, 2);
    await_waiting(&client, 2);
    let c = waiter(&client, name, 2, tx.clone(), None);
    let owner_c = recv_owner(&events);
    await_queued(&mut raw, name, 3);
    await_waiting(&client, 3);
    assert_eq!(
        queue(&mut raw, name),
        [owner_a.as_str(), &owner_b, &owner_c]
    );
    let a_before = deadline(&mut raw, name, &owner_a).unwrap();
    let c_before = deadline(&mut raw, name, &owner_c).unwrap();

    let (got, took) = b.join().unwrap();
    assert!(!got);
    assert!(
        took >= give_up && took < give_up + Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(queue(&mut raw, name), [owner_a.as_str(), &owner_c]);
    assert_eq!(deadline(&mut raw, name, &owner_b), None);
    assert_eq!(deadline(&mut raw, name, &owner_a), Some(a_before));
    assert_eq!(
        deadline(&mut raw, name, &owner_c),
        Some(c_before - wait_ms),
        "the deadline behind the leaver moves up by one thread wait, as Redisson's"
    );

    drop(guard);
    let grants: Vec<usize> = recv_grants(&events, 2);
    assert_eq!(grants, [0, 2]);
    a.join().unwrap();
    c.join().unwrap();
    assert_nothing_left(&mut raw, name);
}

#[test]
fn head_that_gives_up_hands_its_turn_to_the_next_waiter() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let wait_ms = client.config().fair_thread_wait().as_millis() as i64;
    let name = "fair:headquits";
    let mut raw = server.conn();
    let guard = holder.fair_lock(name).lock().unwrap();
    let lock_h = client.fair_lock(name);
    let head = std::thread::spawn(move || {
        lock_h
            .try_lock_for(Duration::from_millis(400))
            .unwrap()
            .is_some()
    });
    await_queued(&mut raw, name, 1);
    let (tx, events) = mpsc::channel();
    let next = waiter(&client, name, 1, tx, None);
    let owner_next = recv_owner(&events);
    await_queued(&mut raw, name, 2);
    assert!(!head.join().unwrap());
    assert_eq!(queue(&mut raw, name), [owner_next.as_str()]);
    // Its turn started: the deadline is the lock's expiry plus one thread wait.
    let now = server_ms(&mut raw);
    let pttl: i64 = raw.pttl(name).unwrap();
    let d = deadline(&mut raw, name, &owner_next).unwrap();
    assert!(
        (d - (now + pttl + wait_ms)).abs() < 1000,
        "deadline {d}, now {now}, pttl {pttl}"
    );
    let released_at = Instant::now();
    drop(guard);
    let (who, at) = recv_grant(&events);
    assert_eq!(who, 1);
    assert!(at - released_at < Duration::from_millis(500));
    next.join().unwrap();
    assert_nothing_left(&mut raw, name);
}

#[test]
fn try_lock_never_queues() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let name = "fair:try";
    let mut raw = server.conn();
    let lock = client.fair_lock(name);
    let guard = lock.lock().unwrap();
    let other = lock.clone();
    let got = std::thread::spawn(move || {
        (
            other.try_lock().unwrap().is_some(),
            other.try_lock_until(Instant::now()).unwrap().is_some(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(got, (false, false));
    assert!(!raw.exists::<_, bool>(queue_key(name)).unwrap());
    assert!(!raw.exists::<_, bool>(timeout_key(name)).unwrap());
    drop(guard);
}

#[test]
fn force_unlock_wakes_the_head_only() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let operator = Client::open(server.url()).unwrap();
    let name = "fair:force";
    let mut raw = server.conn();
    let guard = holder.fair_lock(name).lock().unwrap();
    let (tx, events) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let first = waiter(&client, name, 0, tx.clone(), Some(release_rx));
    recv_owner(&events);
    await_queued(&mut raw, name, 1);
    let second = waiter(&client, name, 1, tx, None);
    let owner_second = recv_owner(&events);
    await_queued(&mut raw, name, 2);
    let forced_at = Instant::now();
    assert!(operator.fair_lock(name).force_unlock().unwrap());
    let (who, at) = recv_grant(&events);
    assert_eq!(who, 0, "the head must get the lock first");
    assert!(at - forced_at < Duration::from_millis(500));
    assert_eq!(queue(&mut raw, name), [owner_second.as_str()]);
    assert!(events.recv_timeout(Duration::from_millis(200)).is_err());
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    release_tx.send(()).unwrap();
    first.join().unwrap();
    second.join().unwrap();
    assert!(!raw.exists::<_, bool>(queue_key(name)).unwrap());
}

#[test]
fn queue_key_of_another_type_is_wrong_type() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut raw = server.conn();
    let _: () = raw.set(queue_key("fair:bad"), "x").unwrap();
    let lock = client.fair_lock("fair:bad");
    assert!(lock.try_lock().unwrap_err().is_wrong_type());
    assert!(lock.lock().unwrap_err().is_wrong_type());
    let v: String = raw.get(queue_key("fair:bad")).unwrap();
    assert_eq!(v, "x");
    assert!(!raw.exists::<_, bool>("fair:bad").unwrap());
}

const CHILD_ENV: &str = "REDLATCH_FAIR_CHILD";

/// Not a test by itself: the body of the child processes of the dead-waiter tests, which queue
/// on a fair lock from another OS process. Prints its owner id, then a line once it holds the lock.
#[test]
#[ignore = "run as a child process by the dead-waiter tests"]
fn child_waiter() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split(' ');
    let (url, name, wait_ms) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    let client = client_with(url, Duration::from_millis(wait_ms), Duration::from_secs(30));
    println!("OWNER {}", client.owner_id());
    let guard = client.fair_lock(name).lock().unwrap();
    println!("ACQUIRED");
    guard.unlock().unwrap();
    println!("RELEASED");
}

const CYCLER_ENV: &str = "REDLATCH_STOPPED_CHILD";

/// Not a test by itself: the body of the child process of
/// `a_process_stopped_and_resumed_mid_call_loses_no_acquire`. Takes and releases a fair and a
/// plain lock in turns until the key `stop` exists; prints a line per error, then `DONE n`.
#[test]
#[ignore = "run as a child process by the stop-and-resume test"]
fn child_cycler() {
    let Ok(url) = std::env::var(CYCLER_ENV) else {
        return;
    };
    let client = Client::open(&url).unwrap();
    let mut raw = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let (fair, plain) = (
        client.fair_lock("stopped:fair"),
        client.lock("stopped:plain"),
    );
    println!("STARTED");
    let mut cycles = 0u64;
    while !raw.exists::<_, bool>("stop").unwrap_or(false) {
        for lock in [&fair, &plain] {
            match lock.lock() {
                Ok(guard) => {
                    if let Err(e) = guard.unlock() {
                        println!("ERROR unlock: {e}");
                    }
                }
                Err(e) => println!("ERROR lock: {e:?}"),
            }
        }
        cycles += 1;
    }
    println!("DONE {cycles}");
}

/// A process stopped (SIGSTOP, a shell's Ctrl-Z, a debugger) and resumed while a call waits
/// for its reply gets EINTR from the socket read. An acquire whose reply was lost so has
/// still run: the lock is read back and the acquire goes on, no error, no hold left behind.
#[test]
fn a_process_stopped_and_resumed_mid_call_loses_no_acquire() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_cycler",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CYCLER_ENV, server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines: Vec<String> = {
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        // libtest prints its own lines first.
        assert!(out.any(|l| l.unwrap().contains("STARTED")));
        // Stops land at random points of the cycle: some during a reply's read.
        for _ in 0..150 {
            signal(&child, "-STOP");
            std::thread::sleep(Duration::from_millis(5));
            signal(&child, "-CONT");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _: () = raw.set("stop", 1).unwrap();
        out.map(|l| l.unwrap()).collect()
    };
    assert!(child.wait().unwrap().success());
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("ERROR")).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(lines.iter().any(|l| l.starts_with("DONE")), "{lines:?}");
    for name in ["stopped:fair", "stopped:plain"] {
        assert!(!raw.exists::<_, bool>(name).unwrap(), "{name} left held");
    }
    assert!(queue(&mut raw, "stopped:fair").is_empty());
}

/// Starts `child_waiter` in a new process; returns it with its owner id and its later lines.
fn spawn_child(url: &str, name: &str, wait_ms: u64) -> (Child, String, mpsc::Receiver<String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_waiter",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{url} {name} {wait_ms}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let owner = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("child starts");
        // libtest prints the test's name on the same line.
        if let Some((_, owner)) = line.split_once("OWNER ") {
            break owner.to_owned();
        }
    };
    (child, owner, rx)
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

#[test]
fn killed_waiter_process_is_skipped_after_the_thread_wait() {
    let server = RedisServer::new();
    let wait = Duration::from_secs(1);
    let client = client_with(&server.url(), wait, Duration::from_secs(2));
    let name = "fair:killed";
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    let (mut child, child_owner, _lines) = spawn_child(&server.url(), name, 1000);
    assert!(wait_until(Duration::from_secs(10), || queue(
        &mut raw, name
    ) == [
        child_owner.clone()
    ]));
    signal(&child, "-KILL");
    child.wait().unwrap();
    let (tx, events) = mpsc::channel();
    let live = waiter(&client, name, 1, tx, None);
    recv_owner(&events);
    await_queued(&mut raw, name, 2);
    let released_at = Instant::now();
    drop(guard); // wakes the dead head: nobody answers
    let (who, at) = recv_grant(&events);
    assert_eq!(who, 1);
    let took = at - released_at;
    assert!(
        took >= Duration::from_millis(800),
        "the dead head had its thread wait: {took:?}"
    );
    assert!(
        took < Duration::from_secs(4),
        "skipped within a few thread waits: {took:?}"
    );
    live.join().unwrap();
    assert_nothing_left(&mut raw, name);
}

#[test]
fn stalled_waiter_process_is_skipped_and_queues_again_when_it_resumes() {
    let server = RedisServer::new();
    let wait = Duration::from_secs(1);
    let client = client_with(&server.url(), wait, Duration::from_secs(2));
    let name = "fair:stalled";
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    let (mut child, child_owner, lines) = spawn_child(&server.url(), name, 1000);
    assert!(wait_until(Duration::from_secs(10), || queue(
        &mut raw, name
    ) == [
        child_owner.clone()
    ]));
    signal(&child, "-STOP");
    let (tx, events) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let live = waiter(&client, name, 1, tx, Some(release_rx));
    recv_owner(&events);
    await_queued(&mut raw, name, 2);
    drop(guard);
    assert_eq!(recv_grant(&events).0, 1);
    assert!(
        queue(&mut raw, name).is_empty(),
        "the stalled head was skipped"
    );
    signal(&child, "-CONT");
    // Resumed, the child finds itself skipped and queues again behind the live holder.
    assert!(wait_until(Duration::from_secs(10), || queue(
        &mut raw, name
    ) == [
        child_owner.clone()
    ]));
    release_tx.send(()).unwrap();
    live.join().unwrap();
    let line = lines.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(line.contains("ACQUIRED"), "{line}");
    assert!(child.wait().unwrap().success());
    assert_nothing_left(&mut raw, name);
}

#[test]
fn killed_pubsub_connection_resubscribes_each_waiter_channel_and_order_holds() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let name = "fair:pubsub";
    let mut raw = server.conn();
    let guard = holder.fair_lock(name).lock().unwrap(); // 30 s lease: no TTL rescue
    let (tx, events) = mpsc::channel();
    let mut handles = Vec::new();
    let mut channels = Vec::new();
    for i in 0..3 {
        handles.push(waiter(&client, name, i, tx.clone(), None));
        let owner = recv_owner(&events);
        channels.push(format!("redisson_lock__channel:{{{name}}}:{owner}"));
        await_queued(&mut raw, name, i + 1);
    }
    let subscribed = |raw: &mut redis::Connection| channels.iter().all(|c| numsub(raw, c) == 1);
    assert!(wait_until(Duration::from_secs(5), || subscribed(&mut raw)));
    assert_eq!(kill_pubsub_connections(&mut raw), 1);
    assert!(wait_until(Duration::from_secs(5), || subscribed(&mut raw)));
    // Woken by the reconnect, the waiters checked in and kept their places.
    assert_eq!(queue(&mut raw, name).len(), 3);
    let released_at = Instant::now();
    drop(guard);
    let grants: Vec<(usize, Instant)> = (0..3).map(|_| recv_grant(&events)).collect();
    assert_eq!(grants.iter().map(|g| g.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(grants[2].1 - released_at < Duration::from_secs(1));
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn a_redisson_waiter_in_the_queue_keeps_its_turn_and_its_release_wakes_ours() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let name = "fair:java";
    let java = "6f0c2bd4-8f5e-4d3a-9d62-3a3b7f1e2c11:57"; // a Java client's id and thread id
    let mut raw = server.conn();
    let messages = listen(&server, name);
    let guard = client.fair_lock(name).lock().unwrap();
    // Queue the Java waiter as Redisson does: RPUSH the owner, ZADD its deadline.
    let now = server_ms(&mut raw);
    let _: () = raw.rpush(queue_key(name), java).unwrap();
    let _: () = raw.zadd(timeout_key(name), java, now + 330_000).unwrap();
    let (tx, events) = mpsc::channel();
    let ours = waiter(&client, name, 1, tx, None);
    let our_owner = recv_owner(&events);
    await_queued(&mut raw, name, 2);
    drop(guard);
    // The release wakes the Java head on its own channel; ours does not barge.
    let (channel, payload) = messages.recv_timeout(Duration::from_secs(1)).unwrap();
    assert_eq!(channel, format!("redisson_lock__channel:{{{name}}}:{java}"));
    assert_eq!(payload, "0");
    assert!(events.recv_timeout(Duration::from_millis(300)).is_err());
    assert_eq!(queue(&mut raw, name), [java, our_owner.as_str()]);
    // The Java client takes the lock and releases it, as RedissonFairLock's scripts do.
    let _: () = redis::pipe()
        .atomic()
        .lpop(queue_key(name), None)
        .zrem(timeout_key(name), java)
        .hset(name, java, 1)
        .pexpire(name, 30_000)
        .query(&mut raw)
        .unwrap();
    let released_at = Instant::now();
    let _: () = redis::pipe()
        .atomic()
        .del(name)
        .publish(format!("redisson_lock__channel:{{{name}}}:{our_owner}"), 0)
        .query(&mut raw)
        .unwrap();
    let (who, at) = recv_grant(&events);
    assert_eq!(who, 1);
    assert!(at - released_at < Duration::from_millis(500));
    ours.join().unwrap();
    assert_nothing_left(&mut raw, name);
}

#[test]
fn order_holds_when_a_hold_outlasts_lease_and_thread_wait() {
    // A waiter that reaches the head while the lock is taken must check in before its
    // deadline, however long the new holder keeps the lock.
    let server = RedisServer::new();
    let client = client_with(
        &server.url(),
        Duration::from_secs(1),
        Duration::from_millis(300),
    );
    let name = "fair:longhold";
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    let (tx, events) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let mut release_rx = Some(release_rx);
    let mut handles = Vec::new();
    let mut owners = Vec::new();
    for i in 0..4 {
        let release = if i == 1 { release_rx.take() } else { None };
        handles.push(waiter(&client, name, i, tx.clone(), release));
        owners.push(recv_owner(&events));
        await_queued(&mut raw, name, i + 1);
    }
    drop(guard);
    let first_two: Vec<usize> = recv_grants(&events, 2);
    assert_eq!(first_two, [0, 1]);
    // Waiter 1 holds for 2.5 thread waits (8 watchdog leases); 2 and 3 keep their places.
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        assert_eq!(
            queue(&mut raw, name),
            owners[2..],
            "a live waiter was skipped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    release_tx.send(()).unwrap();
    let rest: Vec<usize> = recv_grants(&events, 2);
    assert_eq!(rest, [2, 3]);
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn a_dead_head_is_skipped_but_the_live_waiters_behind_it_keep_their_places() {
    // The waiters behind the dead head joined several thread waits before it died: their
    // deadlines must not have run out with it.
    let server = RedisServer::new();
    let client = client_with(
        &server.url(),
        Duration::from_secs(1),
        Duration::from_secs(2),
    );
    let name = "fair:cascade";
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    let (mut child, child_owner, _lines) = spawn_child(&server.url(), name, 1000);
    assert!(wait_until(Duration::from_secs(10), || queue(
        &mut raw, name
    ) == [
        child_owner.clone()
    ]));
    let (tx, events) = mpsc::channel();
    let mut handles = Vec::new();
    let mut owners = Vec::new();
    for i in 0..2 {
        handles.push(waiter(&client, name, i, tx.clone(), None));
        owners.push(recv_owner(&events));
        await_queued(&mut raw, name, i + 2);
    }
    // Everybody checks in a few times; nobody's deadline may pass.
    let until = Instant::now() + Duration::from_millis(4500);
    while Instant::now() < until {
        assert_no_deadline_passed(&mut raw, name);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(queue(&mut raw, name).len(), 3);
    signal(&child, "-KILL");
    child.wait().unwrap();
    // While the lock is still held, the dead head's deadline passes and it is popped; the
    // live waiters stay.
    assert!(wait_until(Duration::from_secs(6), || queue(&mut raw, name) == owners));
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert_eq!(queue(&mut raw, name), owners);
        assert_no_deadline_passed(&mut raw, name);
        std::thread::sleep(Duration::from_millis(50));
    }
    let released_at = Instant::now();
    drop(guard);
    for expected in 0..2 {
        let (i, at) = recv_grant(&events);
        assert_eq!(i, expected);
        assert!(at - released_at < Duration::from_millis(500));
    }
    for h in handles {
        h.join().unwrap();
    }
}

/// What RedissonFairLock's acquire does to the queue, written for these tests from its
/// documented behaviour: pop heads whose deadline (client clock) passed; if the lock is free
/// and the caller is the head or nobody waits, take it, leave the queue and lower every other
/// deadline by one thread wait. Reply 1 if taken.
const REDISSON_ACQUIRE: &str = r"
local function prune()
    while true do
        local h = redis.call('lindex', KEYS[2], 0);
        if h == false then return; end;
        if tonumber(redis.call('zscore', KEYS[3], h)) > tonumber(ARGV[4]) then return; end;
        redis.call('zrem', KEYS[3], h);
        redis.call('lpop', KEYS[2]);
    end;
end;
prune();
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0
        or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], ARGV[2]);
    for _, w in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), w);
    end;
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
";

/// RedissonFairLock's release, likewise: prune, delete, publish `0` to the head's channel.
const REDISSON_RELEASE: &str = r"
while true do
    local h = redis.call('lindex', KEYS[2], 0);
    if h == false then break; end;
    if tonumber(redis.call('zscore', KEYS[3], h)) > tonumber(ARGV[1]) then break; end;
    redis.call('zrem', KEYS[3], h);
    redis.call('lpop', KEYS[2]);
end;
redis.call('del', KEYS[1]);
local h = redis.call('lindex', KEYS[2], 0);
if h ~= false then redis.call('publish', KEYS[4] .. ':' .. h, '0'); end;
";

#[test]
fn redisson_clients_sharing_the_queue_do_not_skip_live_redlatch_waiters() {
    let server = RedisServer::new();
    let wait = Duration::from_secs(1);
    let client = client_with(&server.url(), wait, Duration::from_secs(2));
    let name = "fair:mixed";
    let java = "2b9d8c1e-5f3a-4e7b-8c6d-1a2b3c4d5e6f:31";
    let keys = [name.to_owned(), queue_key(name), timeout_key(name)];
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    // The Java thread queues first, as Redisson does (deadline: lock expiry + thread wait).
    let now = server_ms(&mut raw);
    let pttl: i64 = raw.pttl(name).unwrap();
    let _: () = raw.rpush(queue_key(name), java).unwrap();
    let _: () = raw
        .zadd(timeout_key(name), java, now + pttl + 1000)
        .unwrap();
    let (tx, events) = mpsc::channel();
    let mut handles = Vec::new();
    let mut owners = Vec::new();
    for i in 0..2 {
        handles.push(waiter(&client, name, i, tx.clone(), None));
        owners.push(recv_owner(&events));
        await_queued(&mut raw, name, i + 2);
    }
    drop(guard); // wakes the Java head
    let taken: i64 = redis::Script::new(REDISSON_ACQUIRE)
        .key(&keys[..])
        .arg(2_000)
        .arg(java)
        .arg(1000)
        .arg(server_ms(&mut raw))
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(taken, 1);
    // The Java holder keeps it for 4 thread waits (renewing a 2 s lease) while another Java
    // thread tries (pruning the queue and lowering deadlines as Redisson does).
    let until = Instant::now() + Duration::from_millis(4000);
    while Instant::now() < until {
        let other_java: i64 = redis::Script::new(REDISSON_ACQUIRE)
            .key(&keys[..])
            .arg(2_000)
            .arg("2b9d8c1e-5f3a-4e7b-8c6d-1a2b3c4d5e6f:32")
            .arg(1000)
            .arg(server_ms(&mut raw))
            .invoke(&mut raw)
            .unwrap();
        assert_eq!(other_java, 0);
        assert_eq!(queue(&mut raw, name), owners, "a live waiter was skipped");
        assert_no_deadline_passed(&mut raw, name);
        let _: () = raw.pexpire(name, 2_000).unwrap(); // the Java holder's watchdog
        std::thread::sleep(Duration::from_millis(100));
    }
    let released_at = Instant::now();
    let _: () = redis::Script::new(REDISSON_RELEASE)
        .key(&keys[..])
        .key(&channel)
        .arg(server_ms(&mut raw))
        .invoke(&mut raw)
        .unwrap();
    for expected in 0..2 {
        let (i, at) = recv_grant(&events);
        assert_eq!(i, expected);
        assert!(at - released_at < Duration::from_millis(500));
    }
    for h in handles {
        h.join().unwrap();
    }
    for key in &keys {
        assert!(!raw.exists::<_, bool>(key).unwrap(), "{key} left behind");
    }
}

/// Holds `name` as a foreign owner would (no watchdog, so no script of ours runs but the
/// waiters'): the lock hash with a lease of `lease_ms`.
fn hold_raw(raw: &mut redis::Connection, name: &str, lease_ms: i64) {
    let _: () = raw.hset(name, "foreign:1", 1).unwrap();
    let _: () = raw.pexpire(name, lease_ms).unwrap();
}

/// Scripts run so far (each check-in of a waiter is one).
fn evalshas(raw: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(raw).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|l| l.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn a_check_in_chains_on_the_waiter_ahead_and_never_lowers_its_deadline() {
    let server = RedisServer::new();
    let wait = Duration::from_secs(1);
    let client = client_with(&server.url(), wait, Duration::from_secs(30));
    let name = "fair:chain";
    let java = "0d5c9a41-7b2e-4f18-9c3a-5e6f7a8b9c0d:44";
    let mut raw = server.conn();
    hold_raw(&mut raw, name, 60_000);
    let now = server_ms(&mut raw);
    let _: () = raw.rpush(queue_key(name), java).unwrap();
    let _: () = raw.zadd(timeout_key(name), java, now + 60_000).unwrap();
    let (tx, events) = mpsc::channel();
    let handle = waiter(&client, name, 0, tx, None);
    let ours = recv_owner(&events);
    await_queued(&mut raw, name, 2);
    // Joined behind a Redisson waiter: at least its deadline plus one thread wait.
    assert!(deadline(&mut raw, name, &ours).unwrap() >= now + 61_000);
    // The waiter ahead gets a later deadline (as a Redisson waiter's tryLock(1 hour) has):
    // the next check-in (every half thread wait) chains on it.
    let hour = now + 3_600_000;
    let _: () = raw.zadd(timeout_key(name), java, hour).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || deadline(&mut raw, name, &ours)
            == Some(hour + 1000)),
        "the check-in did not chain on the waiter ahead: {:?}",
        deadline(&mut raw, name, &ours)
    );
    // A deadline above every formula is kept through check-ins.
    let high = now + 7_200_000;
    let _: () = raw.zadd(timeout_key(name), &ours, high).unwrap();
    let before = evalshas(&mut raw);
    assert!(
        wait_until(Duration::from_secs(5), || evalshas(&mut raw) >= before + 2),
        "the waiter did not check in"
    );
    assert_eq!(deadline(&mut raw, name, &ours), Some(high));
    // Releasing wakes the Redisson head; its long deadline is kept (a turn never lowers one).
    let _: () = raw.del(name).unwrap();
    let taken: i64 = redis::Script::new(REDISSON_ACQUIRE)
        .key(&[name.to_owned(), queue_key(name), timeout_key(name)][..])
        .arg(2_000)
        .arg(java)
        .arg(3_600_000)
        .arg(server_ms(&mut raw))
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(taken, 1);
    assert_eq!(queue(&mut raw, name), std::slice::from_ref(&ours));
    let _: () = raw.del(name).unwrap();
    let _: () = raw
        .publish(format!("redisson_lock__channel:{{{name}}}:{ours}"), "0")
        .unwrap();
    assert_eq!(recv_grant(&events).0, 0);
    handle.join().unwrap();
    assert_nothing_left(&mut raw, name);
}

fn turn_key(name: &str) -> String {
    format!("redlatch_fair_turn:{{{name}}}")
}

#[test]
fn a_release_gives_the_head_one_thread_wait_and_newcomers_still_chain_on_its_longer_deadline() {
    // The head's turn lasts one thread wait, so that a dead head costs no more; a newcomer
    // queued meanwhile chains on the deadline the head had (a Redisson tryLock(1 hour)'s),
    // which that head's acquire lowers by the hour.
    let server = RedisServer::new();
    let wait = Duration::from_secs(20);
    let client = client_with(&server.url(), wait, Duration::from_secs(30));
    let name = "fair:turn";
    let java = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d:12";
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    let hour = server_ms(&mut raw) + 3_600_000;
    let _: () = raw.rpush(queue_key(name), java).unwrap();
    let _: () = raw.zadd(timeout_key(name), java, hour).unwrap();
    let before = server_ms(&mut raw);
    guard.unlock().unwrap();
    let after = server_ms(&mut raw);
    let turn = deadline(&mut raw, name, java).unwrap();
    assert!(
        (before + 20_000..=after + 20_000).contains(&turn),
        "the head's turn ends one thread wait after the release: {turn} ({before}..{after})"
    );
    let kept: (String, i64, i64) = redis::cmd("HMGET")
        .arg(turn_key(name))
        .arg(&["owner", "chain", "until"])
        .query(&mut raw)
        .unwrap();
    assert_eq!(kept, (java.to_owned(), hour, turn));
    let (tx, events) = mpsc::channel();
    let handle = waiter(&client, name, 0, tx, None);
    let ours = recv_owner(&events);
    await_queued(&mut raw, name, 2);
    assert!(deadline(&mut raw, name, &ours).unwrap() >= hour + 20_000);
    // The Redisson head takes the lock, lowering every deadline by its hour: ours is ahead.
    let taken: i64 = redis::Script::new(REDISSON_ACQUIRE)
        .key(&[name.to_owned(), queue_key(name), timeout_key(name)][..])
        .arg(30_000)
        .arg(java)
        .arg(3_600_000)
        .arg(server_ms(&mut raw))
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(taken, 1);
    assert_no_deadline_passed(&mut raw, name);
    assert_eq!(queue(&mut raw, name), std::slice::from_ref(&ours));
    let _: () = raw.del(name).unwrap();
    let _: () = raw
        .publish(format!("redisson_lock__channel:{{{name}}}:{ours}"), "0")
        .unwrap();
    assert_eq!(recv_grant(&events).0, 0);
    handle.join().unwrap();
    assert_nothing_left(&mut raw, name);
    assert!(!raw.exists::<_, bool>(turn_key(name)).unwrap());
}

#[test]
fn a_dead_head_costs_one_thread_wait_after_a_release_not_its_lease() {
    // The dead head queued behind a 30 s lease: its deadline was that lease plus a thread wait.
    let server = RedisServer::new();
    let wait = Duration::from_secs(1);
    let client = client_with(&server.url(), wait, Duration::from_secs(30));
    let name = "fair:dead-lease";
    let mut raw = server.conn();
    let guard = client.fair_lock(name).lock().unwrap();
    let (mut child, child_owner, _lines) = spawn_child(&server.url(), name, 1000);
    assert!(wait_until(Duration::from_secs(10), || queue(
        &mut raw, name
    ) == [
        child_owner.clone()
    ]));
    let (events, handles) = two_waiters_behind_one(&client, name, &mut raw);
    signal(&child, "-KILL");
    child.wait().unwrap();
    let released_at = Instant::now();
    drop(guard); // wakes the dead head: nobody answers
    let (first, at) = recv_grant(&events);
    assert_eq!(first, 0);
    let took = at - released_at;
    assert!(
        took >= Duration::from_millis(900) && took < wait + Duration::from_secs(1),
        "the dead head cost one thread wait after the release: {took:?}"
    );
    second_gets_it_and_nothing_is_left(&events, handles, &mut raw, name);
}

#[test]
fn a_dead_head_woken_by_a_redisson_release_costs_one_thread_wait_after_it() {
    // Redisson's release moves no deadline and wakes the head alone: the second of the queue
    // hears it on the head's channel too, and its check-in starts the head's turn.
    let server = RedisServer::new();
    // Long enough that the second's periodic check-in (every half thread wait) would come
    // too late: only hearing the release does it.
    let wait = Duration::from_secs(3);
    let client = client_with(&server.url(), wait, Duration::from_secs(30));
    let name = "fair:dead-java";
    let java = "3c2d1e0f-5a4b-4a9b-8c7d-6e5f4a3b2c1d:77"; // a JVM that died while it waited
    let keys = [name.to_owned(), queue_key(name), timeout_key(name)];
    let mut raw = server.conn();
    hold_raw(&mut raw, name, 60_000);
    let now = server_ms(&mut raw);
    let _: () = raw.rpush(queue_key(name), java).unwrap();
    let _: () = raw.zadd(timeout_key(name), java, now + 61_000).unwrap();
    let (events, handles) = two_waiters_behind_one(&client, name, &mut raw);
    let head_channel = format!("redisson_lock__channel:{{{name}}}:{java}");
    assert!(
        wait_until(Duration::from_secs(5), || numsub(&mut raw, &head_channel)
            == 1),
        "the second listens on the head's channel too"
    );
    let released_at = Instant::now();
    let _: () = redis::Script::new(REDISSON_RELEASE)
        .key(&keys[..])
        .key(format!("redisson_lock__channel:{{{name}}}"))
        .arg(server_ms(&mut raw))
        .invoke(&mut raw)
        .unwrap();
    let (first, at) = recv_grant(&events);
    assert_eq!(first, 0);
    let took = at - released_at;
    assert!(
        took >= wait - Duration::from_millis(100) && took < wait + Duration::from_secs(1),
        "the dead head cost one thread wait after the release: {took:?}"
    );
    second_gets_it_and_nothing_is_left(&events, handles, &mut raw, name);
    // Nobody listens on the dead head's channel any more.
    assert_eq!(numsub(&mut raw, &head_channel), 0);
}

#[test]
fn a_live_waiter_popped_by_a_redisson_prune_takes_back_the_head() {
    let server = RedisServer::new();
    let wait = Duration::from_secs(1);
    let client = client_with(&server.url(), wait, Duration::from_secs(30));
    let name = "fair:popped";
    let mut raw = server.conn();
    // A foreign holder whose lease the waiters see: the head checks in within it.
    hold_raw(&mut raw, name, 1_500);
    let (tx, events) = mpsc::channel();
    let mut handles = Vec::new();
    let mut owners = Vec::new();
    let mut releases = Vec::new();
    for i in 0..2 {
        let (release_tx, release_rx) = mpsc::channel();
        releases.push(release_tx);
        handles.push(waiter(&client, name, i, tx.clone(), Some(release_rx)));
        owners.push(recv_owner(&events));
        await_queued(&mut raw, name, i + 1);
    }
    // A Redisson waiter's decrement left the head's deadline in the past, and a Redisson
    // acquire (here a newcomer's try) pops it.
    // A loaded machine may let the head check in between the two steps (its deadline set
    // again, nothing to pop): the scene is set again until the pop happens.
    let _: () = raw.pexpire(name, 60_000).unwrap();
    let popped = (0..20).any(|_| {
        let past = server_ms(&mut raw) - 1;
        let _: () = raw.zadd(timeout_key(name), &owners[0], past).unwrap();
        let tried: i64 = redis::Script::new(REDISSON_ACQUIRE)
            .key(&[name.to_owned(), queue_key(name), timeout_key(name)][..])
            .arg(2_000)
            .arg("5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d:13")
            .arg(1_000)
            .arg(server_ms(&mut raw))
            .invoke(&mut raw)
            .unwrap();
        assert_eq!(tried, 0);
        queue(&mut raw, name) == [owners[1].clone()]
    });
    assert!(popped, "the head was popped: {:?}", queue(&mut raw, name));
    // Its next check-in (at the lock's expiry at the latest: 1.5 s) puts it back first.
    let _: () = raw.pexpire(name, 1_500).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || queue(&mut raw, name) == owners),
        "the popped waiter is not back at the head: {:?}",
        queue(&mut raw, name)
    );
    let _: () = raw.pexpire(name, 60_000).unwrap();
    let _: () = raw.del(name).unwrap();
    let _: () = raw
        .publish(
            format!("redisson_lock__channel:{{{name}}}:{}", owners[0]),
            "0",
        )
        .unwrap();
    assert_eq!(recv_grant(&events).0, 0);
    releases[0].send(()).unwrap();
    assert_eq!(recv_grant(&events).0, 1);
    releases[1].send(()).unwrap();
    for h in handles {
        h.join().unwrap();
    }
    assert_nothing_left(&mut raw, name);
}

#[test]
fn an_owner_waiting_on_two_threads_whose_first_call_left_queues_again_at_the_tail() {
    let server = RedisServer::new();
    let client = client_with(
        &server.url(),
        Duration::from_secs(1),
        Duration::from_secs(30),
    );
    let name = "fair:two-threads";
    let mut raw = server.conn();
    hold_raw(&mut raw, name, 60_000);
    let (tx, events) = mpsc::channel();
    let w0 = waiter(&client, name, 0, tx.clone(), None);
    let first = recv_owner(&events);
    await_queued(&mut raw, name, 1);
    // One owner, two calls: the first gives up soon, the second waits on.
    let owner = client.lock_owner();
    let shared = client.fair_lock(name).with_owner(&owner);
    let short = shared.clone();
    let gives_up = std::thread::spawn(move || {
        short
            .try_lock_for(Duration::from_secs(2))
            .unwrap()
            .is_none()
    });
    await_queued(&mut raw, name, 2);
    let w1 = waiter(&client, name, 1, tx, None);
    let behind = recv_owner(&events);
    await_queued(&mut raw, name, 3);
    let (got_tx, got) = mpsc::channel();
    let waits = std::thread::spawn(move || {
        let guard = shared.lock().unwrap();
        got_tx.send(()).unwrap();
        guard.unlock().unwrap();
    });
    assert!(gives_up.join().unwrap(), "the first call timed out");
    // The second call's next check-in queues the owner again, behind those who came before it.
    let expected = [first, behind, owner.id().to_owned()];
    assert!(
        wait_until(Duration::from_secs(5), || queue(&mut raw, name) == expected),
        "{:?}",
        queue(&mut raw, name)
    );
    let _: () = raw.del(name).unwrap();
    let _: () = raw
        .publish(
            format!("redisson_lock__channel:{{{name}}}:{}", expected[0]),
            "0",
        )
        .unwrap();
    assert_eq!(recv_grants(&events, 2), [0, 1]);
    got.recv_timeout(Duration::from_secs(10)).unwrap();
    for h in [w0, w1, waits] {
        h.join().unwrap();
    }
    assert_nothing_left(&mut raw, name);
}
