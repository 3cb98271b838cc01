//! Both lock kinds (reentrant and fair): holds, ownership, queries, leases and bad input, against a real server.

mod support;

use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::{Client, Config, Error};
use support::{client, RedisServer};

for_each_kind! {
    fn same_thread_reenters_and_frees_only_after_last_unlock(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let lock = make(&client, "reentrant");
        let g1 = lock.lock().unwrap();
        let g2 = lock.lock().unwrap();
        let g3 = lock.try_lock().unwrap().expect("re-entry never waits");
        assert_eq!(lock.hold_count().unwrap(), 3);
        let mut raw = server.conn();
        let field: u32 = raw.hget("reentrant", client.owner_id()).unwrap();
        assert_eq!(field, 3);
        drop(g3);
        g2.unlock().unwrap();
        assert_eq!(lock.hold_count().unwrap(), 1);
        assert!(lock.is_locked().unwrap());
        drop(g1);
        assert!(!lock.is_locked().unwrap());
        assert_eq!(lock.hold_count().unwrap(), 0);
        assert!(!raw.exists::<_, bool>("reentrant").unwrap());
    }

    fn other_thread_or_client_cannot_unlock(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let lock = make(&client, "owned");
        let guard = lock.lock().unwrap();
        let other = lock.clone();
        let err = std::thread::spawn(move || other.unlock().unwrap_err())
            .join()
            .unwrap();
        assert!(
            matches!(err, Error::NotHeld { ref name } if name == "owned"),
            "{err:?}"
        );
        let err = make(&Client::open(server.url()).unwrap(), "owned")
            .unlock()
            .unwrap_err();
        assert!(err.is_not_held());
        assert_eq!(lock.hold_count().unwrap(), 1);
        assert!(lock.is_held_by_current_thread().unwrap());
        // and neither can take it
        let other = lock.clone();
        let taken = std::thread::spawn(move || other.try_lock().unwrap().is_some())
            .join()
            .unwrap();
        assert!(!taken);
        drop(guard);
        assert!(!lock.is_locked().unwrap());
    }

    fn leaked_hold_is_released_by_lock_unlock(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let lock = make(&client, "leaked");
        lock.lock().unwrap().leak();
        assert_eq!(lock.hold_count().unwrap(), 1);
        lock.unlock().unwrap();
        assert!(!lock.is_locked().unwrap());
        assert!(lock.unlock().unwrap_err().is_not_held());
    }

    fn explicit_lease_expires_and_waiter_then_acquires(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let lock = make(&client, "leased").with_lease(Duration::from_millis(400));
        let guard = lock.lock().unwrap();
        let pttl: i64 = server.conn().pttl("leased").unwrap();
        assert!((300..=400).contains(&pttl), "pttl {pttl}");
        let started = Instant::now();
        let other = lock.clone();
        let got = std::thread::spawn(move || {
            let g = other.try_lock_for(Duration::from_secs(5)).unwrap();
            (g.is_some(), started.elapsed())
        })
        .join()
        .unwrap();
        assert!(got.0, "waiter acquires after the lease ran out");
        assert!(
            got.1 >= Duration::from_millis(300) && got.1 < Duration::from_secs(2),
            "{:?}",
            got.1
        );
        assert!(
            guard.is_lost(),
            "an explicit lease that ran out is reported lost"
        );
        assert!(guard.unlock().unwrap_err().is_lock_lost());
    }

    fn queries_report_state(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let lock = make(&client, "queried");
        assert!(!lock.is_locked().unwrap());
        assert_eq!(lock.remaining_lease().unwrap(), None);
        let guard = lock.lock().unwrap();
        let left = lock.remaining_lease().unwrap().unwrap();
        assert!(left > Duration::from_secs(29) && left <= Duration::from_secs(30));
        assert!(lock.is_held_by_current_thread().unwrap());
        let other = lock.clone();
        let held_there = std::thread::spawn(move || other.is_held_by_current_thread().unwrap())
            .join()
            .unwrap();
        assert!(!held_there);
        assert!(lock.force_unlock().unwrap());
        assert!(!lock.is_locked().unwrap());
        assert!(!lock.force_unlock().unwrap());
        assert!(guard.unlock().unwrap_err().is_lock_lost());
    }

    fn bad_input_gives_clear_errors(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let empty = make(&client, "");
        assert!(empty.lock().unwrap_err().is_invalid_argument());
        assert!(empty.try_lock().unwrap_err().is_invalid_argument());
        assert!(empty.is_locked().unwrap_err().is_invalid_argument());
        assert!(empty.force_unlock().unwrap_err().is_invalid_argument());
        let lock = make(&client, "bad");
        let zero_lease = lock.clone().with_lease(Duration::ZERO);
        assert!(zero_lease.lock().unwrap_err().is_invalid_argument());
        let huge = Duration::from_secs(10 * 365 * 24 * 3600);
        assert!(lock
            .clone()
            .with_lease(huge)
            .try_lock()
            .unwrap_err()
            .is_invalid_argument());
        assert!(lock.try_lock_for(huge).unwrap_err().is_invalid_argument());
        assert!(lock
            .try_lock_until(Instant::now() + huge)
            .unwrap_err()
            .is_invalid_argument());
        assert!(Config::builder("redis://127.0.0.1/")
            .watchdog_timeout(Duration::ZERO)
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(Client::open("definitely not a url")
            .unwrap_err()
            .is_invalid_argument());
        // nothing was written by any of it
        let keys: Vec<String> = server.conn().keys("*").unwrap();
        assert!(keys.is_empty(), "{keys:?}");
        // A zero wait is one try (the lock is free).
        let guard = lock.try_lock_for(Duration::ZERO).unwrap().unwrap();
        assert!(lock.is_locked().unwrap());
        guard.unlock().unwrap();
    }

    fn key_of_another_type_is_wrong_type_and_left_alone(make) {
        let server = RedisServer::new();
        let client = client(&server);
        let mut raw = server.conn();
        let _: () = raw.set("stringy", "value").unwrap();
        let lock = make(&client, "stringy");
        let err = lock.try_lock().unwrap_err();
        assert!(
            matches!(err, Error::WrongType { ref key } if key == "stringy"),
            "{err:?}"
        );
        assert!(lock.lock().unwrap_err().is_wrong_type());
        assert!(lock.force_unlock().unwrap_err().is_wrong_type());
        assert!(lock.hold_count().unwrap_err().is_wrong_type());
        assert!(lock.unlock().unwrap_err().is_wrong_type());
        let v: String = raw.get("stringy").unwrap();
        assert_eq!(v, "value");
        // the client still works for other locks
        assert!(make(&client, "fine").try_lock().unwrap().is_some());
    }
}

/// Names and addresses as a program has them: a `String` name, a `&String` URL, a service's
/// own `redis::Client` handed over (its database kept).
#[test]
fn names_and_addresses_come_as_the_program_has_them() {
    let server = RedisServer::new();
    let url: String = server.url();
    let theirs = redis::Client::open(format!("{url}3")).unwrap();
    let client = Client::new(Config::builder(&theirs).build().unwrap()).unwrap();
    let job = 7;
    let guard = client.lock(format!("job:{job}")).lock().unwrap();
    let mut db3 = theirs.get_connection().unwrap();
    assert!(
        db3.exists::<_, bool>("job:7").unwrap(),
        "held in the service's database 3"
    );
    assert!(!server.conn().exists::<_, bool>("job:7").unwrap());
    let other = Client::new(Config::builder(&url).build().unwrap()).unwrap();
    let name = String::from("job:7");
    assert!(
        other.lock(&name).try_lock().unwrap().is_some(),
        "database 0: another lock"
    );
    guard.unlock().unwrap();
    assert!(!db3.exists::<_, bool>("job:7").unwrap());
}

/// `with` and its `try_` forms: the closure runs under the lock, its value or its error comes
/// back, and the lock is free afterwards, also after a panic.
#[test]
fn with_runs_the_closure_under_the_lock_and_releases_it() {
    #[derive(Debug)]
    enum JobError {
        Lock(Error),
        Failed(&'static str),
    }
    impl From<Error> for JobError {
        fn from(e: Error) -> JobError {
            JobError::Lock(e)
        }
    }
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let other = Client::open(server.url()).unwrap();
    let lock = client.lock("with:job");
    let mut raw = server.conn();

    let seen = lock
        .with(|| {
            let count: u32 = raw.hget("with:job", client.owner_id()).unwrap();
            Ok::<_, Error>((lock.is_locked()?, count))
        })
        .unwrap();
    assert_eq!(seen, (true, 1));
    assert!(!raw.exists::<_, bool>("with:job").unwrap());

    let failed: Result<(), JobError> = lock.with(|| Err(JobError::Failed("disk full")));
    assert!(matches!(failed, Err(JobError::Failed("disk full"))));
    assert!(!lock.is_locked().unwrap());

    // Taken elsewhere: the try forms do not run the closure.
    let held = other.lock("with:job").lock().unwrap();
    let mut ran = false;
    let got = lock
        .try_with(|| {
            ran = true;
            Ok::<_, Error>(())
        })
        .unwrap();
    assert_eq!((got, ran), (None, false));
    let started = Instant::now();
    let got = lock
        .try_with_for(Duration::from_millis(200), || Ok::<_, Error>(1))
        .unwrap();
    assert_eq!(got, None);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let got = lock
        .try_with_for(Duration::ZERO, || Ok::<_, Error>(1))
        .unwrap();
    assert_eq!(got, None, "a zero wait is one try");
    drop(held);
    let got = lock
        .try_with_until(Instant::now() + Duration::from_secs(5), || {
            Ok::<_, Error>(2)
        })
        .unwrap();
    assert_eq!(got, Some(2));

    // The hold lost while the closure ran: its value is not trusted.
    let lost = lock.with(|| {
        assert!(other.lock("with:job").force_unlock()?);
        Ok::<_, JobError>(3)
    });
    assert!(matches!(lost, Err(JobError::Lock(e)) if e.is_lock_lost()));

    // A panic releases the lock too.
    let lock2 = lock.clone();
    let panicked = std::thread::spawn(move || {
        lock2.with(|| -> Result<(), Error> { panic!("bug in the closure") })
    })
    .join();
    assert!(panicked.is_err());
    assert!(!lock.is_locked().unwrap());

    // A lock set runs a closure the same way: every lock held while it runs, none after.
    let set = client.lock_set(["with:a", "with:b"]);
    let held_both = set
        .with(|| Ok::<_, Error>(raw.exists::<_, u32>(&["with:a", "with:b"]).unwrap()))
        .unwrap();
    assert_eq!(held_both, 2);
    assert!(!raw.exists::<_, bool>("with:a").unwrap());
    let failed: Result<(), JobError> = set.with(|| Err(JobError::Failed("no funds")));
    assert!(matches!(failed, Err(JobError::Failed("no funds"))));
    assert!(!raw.exists::<_, bool>("with:b").unwrap());
}
