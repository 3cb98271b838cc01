//! Sentinel (1 master, 2 replicas, 3 sentinels started by the harness): the client finds the
//! master by name, follows a `SENTINEL FAILOVER` within down-after + 2 s, and its waiters'
//! subscriptions move to the new master.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use support::sentinel::SentinelGroup;
use support::{key_exists, numsub, wait_until};

fn client(group: &SentinelGroup) -> Client {
    let config = Config::sentinel(group.sentinel_urls(), group.master_name())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(1))
        .retry_attempts(10)
        .retry_delay(Duration::from_millis(200))
        .build()
        .unwrap();
    Client::new(config).unwrap()
}

#[test]
fn finds_the_master_by_name() {
    let group = SentinelGroup::new();
    let client = client(&group);
    let guard = client.lock("sentinel:a").lock().unwrap();
    assert!(
        key_exists(&mut group.master().conn(), "sentinel:a"),
        "taken on the master"
    );
    guard.unlock().unwrap();
    assert!(!key_exists(&mut group.master().conn(), "sentinel:a"));

    let config = Config::sentinel(group.sentinel_urls(), "no-such-master")
        .connect_timeout(Duration::from_millis(300))
        .retry_attempts(0)
        .build()
        .unwrap();
    let err = Client::new(config).unwrap().lock("x").lock().unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(err.to_string().contains("no-such-master"), "{err}");
}

#[test]
fn follows_a_failover_and_moves_the_waiters() {
    let group = SentinelGroup::new();
    let holder = client(&group);
    let waiting = client(&group);
    let worker = client(&group);
    let down_after = group.config().down_after;

    // A waiter blocked on a lock held across the failover (30 s lease: only a message can
    // wake it in time).
    let guard = holder.lock("sentinel:held").lock().unwrap();
    let (woke_tx, woke_rx) = mpsc::channel();
    let lock = waiting.lock("sentinel:held");
    let waiter = thread::spawn(move || {
        let g = lock.lock().unwrap();
        woke_tx.send(Instant::now()).unwrap();
        g.unlock().unwrap();
    });
    let channel = "redisson_lock__channel:{sentinel:held}";
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut group.master().conn(),
        channel
    ) == 1));

    // A worker locking and unlocking in a loop, recording when calls succeed.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok_tx, ok_rx) = mpsc::channel();
    let worker_stop = Arc::clone(&stop);
    let looping = thread::spawn(move || {
        let lock = worker.lock("sentinel:loop");
        let mut failures = 0;
        while !worker_stop.load(Ordering::SeqCst) {
            match lock.lock().and_then(|g| g.unlock()) {
                Ok(()) => ok_tx.send(Instant::now()).unwrap(),
                Err(_) => failures += 1,
            }
            thread::sleep(Duration::from_millis(20)); // pacing of the load
        }
        failures
    });

    let started = Instant::now();
    let (old, new) = group.failover_switched();
    let switched = Instant::now();
    eprintln!(
        "sentinels switched {old} -> {new} in {:?}",
        switched - started
    );
    // The first call that succeeds after the switch, and it must go to the new master.
    let first_ok = loop {
        let at = ok_rx
            .recv_timeout(down_after + Duration::from_secs(2))
            .expect("calls succeed again");
        if at > switched {
            break at;
        }
    };
    let recovery = first_ok - switched;
    eprintln!("first lock call after the switch succeeded {recovery:?} later");
    assert!(
        recovery <= down_after + Duration::from_secs(2),
        "{recovery:?}"
    );
    let new_master = group.server_at(new);
    // The waiter's subscription moved to the new master.
    assert!(
        wait_until(down_after + Duration::from_secs(2), || numsub(
            &mut new_master.conn(),
            channel
        ) == 1),
        "the waiter re-subscribed on the new master"
    );
    // The held lock was replicated before the switch; its holder releases it on the new
    // master, and the waiter wakes by message.
    let released = Instant::now();
    guard.unlock().expect("unlock reaches the new master");
    let woke = woke_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("waiter woken");
    assert!(
        woke - released < Duration::from_secs(2),
        "{:?}",
        woke - released
    );
    waiter.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let failures = looping.join().unwrap();
    eprintln!("worker calls that failed during the failover: {failures}");
    // Calls go to the new master from now on: a lock taken now is there, not on the old one.
    let g = holder.lock("sentinel:after").lock().unwrap();
    assert!(key_exists(&mut new_master.conn(), "sentinel:after"));
    g.unlock().unwrap();
}

#[test]
fn an_election_carries_on_across_a_failover() {
    // Its lock, record and log were replicated: after the switch the leader resigns on the new
    // master, the waiting campaigner leads with a higher term, and an observer whose
    // subscription moved sees both leaders in order.
    let group = SentinelGroup::new();
    let leading = client(&group);
    let campaigning = client(&group);
    let watching = client(&group);
    let down_after = group.config().down_after;
    let first = leading.election("sentinel:e").campaign("first").unwrap();
    let first_term = first.term();
    let mut observer = watching.election("sentinel:e").observe();
    assert_eq!(observer.next().unwrap().unwrap().term, first_term);
    let (won_tx, won) = mpsc::channel();
    let c = campaigning.clone();
    let campaigner = thread::spawn(move || {
        let leadership = c.election("sentinel:e").campaign("second").unwrap();
        won_tx.send(leadership.term()).unwrap();
        leadership.resign().unwrap();
    });
    let lock_channel = "redisson_lock__channel:{sentinel:e}";
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut group.master().conn(),
        lock_channel
    ) == 1));
    let (_, new) = group.failover_switched();
    let new_master = group.server_at(new);
    // Both waits (the campaign's and the observer's) listen on the new master.
    let election_channel = "redlatch_election__channel:{sentinel:e}";
    let observe = thread::spawn(move || observer.next_timeout(Duration::from_secs(30)));
    assert!(wait_until(down_after + Duration::from_secs(5), || {
        let mut conn = new_master.conn();
        numsub(&mut conn, lock_channel) == 1 && numsub(&mut conn, election_channel) == 1
    }));
    first.resign().expect("resigned on the new master");
    let second_term = won.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(second_term > first_term);
    let seen = observe.join().unwrap().unwrap().unwrap();
    assert_eq!((seen.term, seen.value), (second_term, b"second".to_vec()));
    campaigner.join().unwrap();
}
