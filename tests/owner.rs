//! Owners that are not threads: `Client::lock_owner` and `Lock::with_owner`. A hold taken on
//! one thread is released on another, moves between the workers of a pool, is reentrant per
//! owner, is renewed and reported lost like a thread's, and excludes other owners on the
//! same thread.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::unbounded;
use redlatch::{Client, Config, LockGuard, LockOwner, LostReason};
use support::{wait_until, RedisServer};

fn hold_count(raw: &mut redis::Connection, name: &str, owner: &str) -> Option<u32> {
    redis::cmd("HGET").arg(name).arg(owner).query(raw).unwrap()
}

#[test]
fn a_hold_taken_on_one_thread_is_released_on_another() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let owner = client.lock_owner();
    assert!(owner.id().starts_with(client.id()));
    assert_ne!(owner.id(), client.owner_id(), "not this thread's id");
    let guard = client.lock("o:move").with_owner(&owner).lock().unwrap();
    assert_eq!(guard.owner(), owner.id());
    assert_eq!(hold_count(&mut raw, "o:move", owner.id()), Some(1));
    let released = thread::spawn(move || guard.unlock()).join().unwrap();
    released.unwrap();
    let exists: i64 = redis::cmd("EXISTS").arg("o:move").query(&mut raw).unwrap();
    assert_eq!(exists, 0, "released by the other thread");
}

#[test]
fn a_hold_moves_between_the_workers_of_a_pool() {
    // Three workers share a job queue; each job takes the owner's hold one step further:
    // acquire on one worker, re-enter and release on others, release the first hold last.
    let server = RedisServer::new();
    let mut raw = server.conn();
    let client = Client::open(server.url()).unwrap();
    let owner = client.lock_owner();
    let lock = client.lock("o:pool").with_owner(&owner);
    type Job = Box<dyn FnOnce() + Send>;
    let (jobs, queue) = unbounded::<Job>();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || {
                for job in queue {
                    job();
                }
            })
        })
        .collect();
    let (done, results) = mpsc::channel::<(thread::ThreadId, LockGuard<LockOwner>)>();
    let first = {
        let (lock, done) = (lock.clone(), done.clone());
        jobs.send(Box::new(move || {
            done.send((thread::current().id(), lock.lock().unwrap()))
                .unwrap();
        }))
        .unwrap();
        results.recv().unwrap()
    };
    let second = {
        let (lock, done) = (lock.clone(), done.clone());
        jobs.send(Box::new(move || {
            done.send((thread::current().id(), lock.lock().unwrap()))
                .unwrap();
        }))
        .unwrap();
        results.recv().unwrap()
    };
    assert_eq!(
        hold_count(&mut raw, "o:pool", owner.id()),
        Some(2),
        "reentrant per owner, whatever the thread"
    );
    // Another owner (and this thread) is excluded meanwhile.
    assert!(client.lock("o:pool").try_lock().unwrap().is_none());
    let (tx, rx) = mpsc::channel();
    for (_, guard) in [second, first] {
        let tx = tx.clone();
        jobs.send(Box::new(move || tx.send(guard.unlock()).unwrap()))
            .unwrap();
        rx.recv().unwrap().unwrap();
    }
    drop(jobs);
    for w in workers {
        w.join().unwrap();
    }
    let exists: i64 = redis::cmd("EXISTS").arg("o:pool").query(&mut raw).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn two_owners_on_one_thread_exclude_each_other() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let (a, b) = (client.lock_owner(), client.lock_owner());
    assert_ne!(a.id(), b.id());
    for make in [
        support::make_lock,
        support::make_fair_lock,
        support::make_fenced_lock,
    ] {
        let name = "o:two";
        let held = make(&client, name).with_owner(&a).lock().unwrap();
        assert!(make(&client, name)
            .with_owner(&b)
            .try_lock()
            .unwrap()
            .is_none());
        assert!(
            make(&client, name).try_lock().unwrap().is_none(),
            "nor this thread"
        );
        let waited = make(&client, name)
            .with_owner(&b)
            .try_lock_for(Duration::from_millis(100))
            .unwrap();
        assert!(waited.is_none());
        assert!(make(&client, name)
            .with_owner(&a)
            .is_held_by_current_thread()
            .unwrap());
        assert!(!make(&client, name)
            .with_owner(&b)
            .is_held_by_current_thread()
            .unwrap());
        held.unlock().unwrap();
        let other = make(&client, name).with_owner(&b).lock().unwrap();
        other.unlock().unwrap();
    }
}

#[test]
fn read_write_sides_and_fencing_tokens_work_for_owners() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let (a, b) = (client.lock_owner(), client.lock_owner());
    let rw = client.read_write_lock("o:rw");
    let ra = rw.read().with_owner(&a).lock().unwrap();
    let rb = rw.read().with_owner(&b).lock().unwrap();
    assert!(
        rw.write().with_owner(&a).try_lock().unwrap().is_none(),
        "b reads"
    );
    drop(rb);
    let wa = thread::spawn({
        let write = rw.write().with_owner(&a);
        move || write.lock().map(|g| g.owner().to_owned())
    });
    drop(ra);
    assert_eq!(wa.join().unwrap().unwrap(), a.id());

    let fenced = client.fenced_lock("o:fence");
    let t1 = fenced.with_owner(&a).lock().unwrap();
    let token = t1.token().unwrap();
    let resource = client.fenced_resource("o:fence:value");
    let writer = thread::spawn(move || {
        resource.write(&t1, "from another thread")?;
        t1.unlock()
    });
    writer.join().unwrap().unwrap();
    let t2 = fenced.with_owner(&b).lock().unwrap();
    assert!(t2.token().unwrap() > token);
}

#[test]
fn an_owners_hold_is_renewed_and_reported_lost_like_a_threads() {
    let server = RedisServer::new();
    let mut raw = server.conn();
    let config = Config::builder(server.url().as_str())
        .watchdog_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let owner = client.lock_owner();
    let guard = client.lock("o:renew").with_owner(&owner).lock().unwrap();
    let (lost_tx, lost_rx) = mpsc::channel();
    guard.on_lost(move |why| lost_tx.send(why).unwrap());
    // Handed to another thread, and renewed there past several leases (the watchdog renews
    // every 100 ms).
    let guard = thread::spawn(move || guard).join().unwrap();
    assert!(wait_until(Duration::from_secs(5), || client
        .metrics()
        .renewals
        >= 5));
    assert!(!guard.is_lost());
    let ttl: i64 = redis::cmd("PTTL").arg("o:renew").query(&mut raw).unwrap();
    assert!(ttl > 0, "renewed: PTTL {ttl}");
    assert!(client.lock("o:renew").force_unlock().unwrap());
    assert_eq!(
        lost_rx.recv_timeout(Duration::from_secs(2)).unwrap(),
        LostReason::NotHeld
    );
    assert!(guard.is_lost());
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    assert!(wait_until(Duration::from_secs(1), || client
        .metrics()
        .lost_locks
        == 1));
}

#[test]
fn owner_guards_are_send_and_thread_guards_keep_their_thread() {
    fn send<T: Send>() {}
    send::<LockGuard<LockOwner>>();
    send::<LockOwner>();
    // `LockGuard` (a thread's) stays !Send: see the compile_fail example in its docs.
}
