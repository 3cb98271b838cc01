//! Faults: script cache flushed, pub/sub connection killed, server down or paused.

mod support;

use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use support::{kill_pubsub_connections, numsub, wait_until, RedisServer};

fn quick_client(server: &RedisServer) -> Client {
    let config = Config::builder(server.url().as_str())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    Client::new(config).unwrap()
}

#[test]
fn script_flush_is_invisible_to_callers() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let lock = client.lock("fault:flush");
    drop(lock.lock().unwrap());
    let mut raw = server.conn();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    let guard = lock.lock().expect("the script is reloaded transparently");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    guard.unlock().expect("unlock reloads too");
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn killed_pubsub_connection_reconnects_resubscribes_and_waiter_still_wakes() {
    let server = RedisServer::new();
    let holder = Client::open(server.url()).unwrap();
    let client = Client::open(server.url()).unwrap();
    let channel = "redisson_lock__channel:{fault:pubsub}";
    let guard = holder.lock("fault:pubsub").lock().unwrap(); // 30 s lease: no TTL rescue
    let lock = client.lock("fault:pubsub");
    let waiter = std::thread::spawn(move || {
        let g = lock.lock().unwrap();
        let at = Instant::now();
        drop(g);
        at
    });
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    assert_eq!(kill_pubsub_connections(&mut raw), 1);
    // The dispatcher reconnects and subscribes again on its own.
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    let released = Instant::now();
    drop(guard);
    let latency = waiter.join().unwrap() - released;
    assert!(
        latency < Duration::from_secs(1),
        "woken {latency:?} after unlock"
    );
}

#[test]
fn dead_server_gives_connection_error_in_time_and_client_recovers() {
    let mut server = RedisServer::new();
    let client = quick_client(&server);
    let lock = client.lock("fault:down");
    drop(lock.lock().unwrap()); // pool has a live connection now
    server.kill();
    for _ in 0..2 {
        let started = Instant::now();
        let err = lock.lock().unwrap_err();
        assert!(err.is_connection() || err.is_timeout(), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    let err = lock.try_lock().unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    server.restart();
    let guard = lock.lock().expect("works again once the server is back");
    assert!(lock.is_locked().unwrap());
    guard.unlock().unwrap();
}

#[test]
fn paused_server_gives_timeout_not_a_hang() {
    let server = RedisServer::new();
    let client = quick_client(&server);
    let lock = client.lock("fault:paused");
    drop(lock.lock().unwrap());
    server.stop();
    let started = Instant::now();
    let result = lock.lock();
    let took = started.elapsed();
    server.cont();
    let err = result.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let guard = lock.lock().expect("works again after SIGCONT");
    guard.unlock().unwrap();
}

#[test]
fn waiter_survives_a_server_restart() {
    let mut server = RedisServer::new();
    let client = quick_client(&server);
    let holder = quick_client(&server);
    let channel = "redisson_lock__channel:{fault:restart}";
    let guard = holder.lock("fault:restart").lock().unwrap();
    let lock = client.lock("fault:restart");
    let waiter = std::thread::spawn(move || {
        // Errors while the server is gone are the caller's to handle: retry.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match lock.try_lock_for(Duration::from_secs(10)) {
                Ok(Some(g)) => return g.unlock().is_ok(),
                Ok(None) => return false,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("{e}"),
            }
        }
    });
    let mut raw = server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    drop(raw);
    guard.leak(); // the restart wipes it anyway (persistence off)
    server.kill();
    server.restart();
    assert!(
        waiter.join().unwrap(),
        "the waiter acquired the lock after the restart"
    );
}

#[test]
fn a_call_that_could_not_connect_is_retried_until_the_server_is_back() {
    let mut server = RedisServer::new();
    let url = server.url();
    server.kill();
    let config = Config::builder(url.as_str())
        .connect_timeout(Duration::from_millis(200))
        .retry_attempts(25)
        .retry_delay(Duration::from_millis(200))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300)); // the outage being staged
        server.restart();
        server
    });
    let guard = client
        .lock("fault:retry")
        .lock()
        .expect("retried until the server was back");
    let server = restarter.join().unwrap();
    let count: Option<u32> = redis::cmd("HGET")
        .arg("fault:retry")
        .arg(guard.owner())
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(count, Some(1), "the acquire ran once");
    guard.unlock().unwrap();
}

#[test]
fn without_retries_a_dead_server_fails_at_once_and_readonly_is_retried_then_reported() {
    let mut dead = RedisServer::new();
    let url = dead.url();
    dead.kill();
    let config = Config::builder(url.as_str())
        .retry_attempts(0)
        .build()
        .unwrap();
    let start = Instant::now();
    let err = Client::new(config)
        .unwrap()
        .lock("fault:none")
        .lock()
        .unwrap_err();
    assert!(err.is_connection(), "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );

    // A replica refuses writes with READONLY: the call did not run, so it is retried.
    let master = RedisServer::new();
    let replica = RedisServer::replica_of(&master);
    let config = Config::builder(replica.url().as_str())
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(150))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let start = Instant::now();
    let err = client.lock("fault:readonly").lock().unwrap_err();
    let took = start.elapsed();
    assert!(err.to_string().contains("read only replica"), "{err}");
    assert!(
        took >= Duration::from_millis(300),
        "two retries 150 ms apart, {took:?}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
}
