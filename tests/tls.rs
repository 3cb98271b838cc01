//! TLS (`rediss://`): commands and the pub/sub connection over TLS, certificate checks,
//! client certificates, and bad TLS settings.
#![cfg(feature = "tls")]

mod support;

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, LockGuard};
use support::binary::Need;
use support::tls::{ClientAuth, Pki, TlsCluster, TlsServer};
use support::wait_until;
use support::{
    auto_is_sharded, await_waiting, client_list, command_calls, kill_pubsub_connections, numsub,
    subscribers,
};

fn tls_client(server: &TlsServer) -> Client {
    let config = Config::builder(server.url("127.0.0.1").as_str())
        .tls_root_certificates(Pki::get().pem("ca.crt"))
        .build()
        .unwrap();
    Client::new(config).unwrap()
}

/// The `CLIENT LIST` lines of connections made to the TLS port.
fn tls_connections(server: &TlsServer) -> Vec<String> {
    let laddr = format!("laddr=127.0.0.1:{} ", server.tls_port());
    client_list(&mut server.server.conn())
        .into_iter()
        .filter(|l| l.contains(&laddr))
        .collect()
}

/// `holder` takes every lock of `names`; a thread per name waits for it through `client` and
/// returns its hold count once it has it.
fn hold_and_wait(
    holder: &Client,
    client: &Client,
    names: &[String],
) -> (Vec<LockGuard>, Vec<JoinHandle<u32>>) {
    let guards = names
        .iter()
        .map(|n| holder.lock(n).lock().unwrap())
        .collect();
    let waiters = names
        .iter()
        .map(|n| {
            let lock = client.lock(n);
            std::thread::spawn(move || lock.lock().unwrap().lock().hold_count().unwrap())
        })
        .collect();
    (guards, waiters)
}

#[test]
fn locks_and_wakeups_travel_over_tls() {
    require!(Need::Tls);
    let server = TlsServer::new(ClientAuth::No);
    let holder = tls_client(&server);
    let client = tls_client(&server);
    let channel = "redisson_lock__channel:{tls:handoff}";

    let guard = holder.lock("tls:handoff").lock().unwrap(); // 30 s lease: no TTL rescue
    assert_eq!(guard.lock().hold_count().unwrap(), 1);
    let lock = client.lock("tls:handoff");
    let waiter = std::thread::spawn(move || {
        let g = lock.lock().unwrap();
        let at = Instant::now();
        assert!(g.lock().is_held_by_current_thread().unwrap());
        drop(g);
        at
    });
    let mut raw = server.server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    // Every connection of the two clients (commands and pub/sub) came in on the TLS port,
    // the subscriber among them.
    let tls = tls_connections(&server);
    assert!(
        tls.iter().any(|l| l.contains(" sub=1 ")),
        "the subscription is on a TLS connection: {tls:#?}"
    );
    let plain: Vec<String> = client_list(&mut raw)
        .into_iter()
        .filter(|l| !l.contains(&format!("laddr=127.0.0.1:{} ", server.tls_port())))
        .collect();
    assert_eq!(
        plain.len(),
        1,
        "only the test's raw connection is plain: {plain:#?}"
    );

    let released = Instant::now();
    drop(guard);
    let latency = waiter.join().unwrap() - released;
    assert!(
        latency < Duration::from_secs(1),
        "woken by the TLS pub/sub connection, not the lease: {latency:?}"
    );
    let exists: bool = redis::cmd("EXISTS")
        .arg("tls:handoff")
        .query(&mut raw)
        .unwrap();
    assert!(!exists, "released");
}

#[test]
fn a_killed_tls_pubsub_connection_reconnects_and_the_waiter_still_wakes() {
    require!(Need::Tls);
    let server = TlsServer::new(ClientAuth::No);
    let holder = tls_client(&server);
    let client = tls_client(&server);
    let channel = "redisson_lock__channel:{tls:reconnect}";
    let guard = holder.lock("tls:reconnect").lock().unwrap();
    let lock = client.lock("tls:reconnect");
    let waiter = std::thread::spawn(move || {
        drop(lock.lock().unwrap());
        Instant::now()
    });
    let mut raw = server.server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw, channel
    ) == 1));
    assert_eq!(kill_pubsub_connections(&mut raw), 1);
    // The reader sees the TLS session end, reconnects (handshake included) and subscribes.
    assert!(wait_until(Duration::from_secs(5), || {
        numsub(&mut raw, channel) == 1
            && tls_connections(&server)
                .iter()
                .any(|l| l.contains(" sub=1 "))
    }));
    let released = Instant::now();
    drop(guard);
    let latency = waiter.join().unwrap() - released;
    assert!(latency < Duration::from_secs(1), "{latency:?}");
}

/// The pub/sub connection's check works through TLS: PINGs go out while a thread waits, the
/// reads that time out between them leave the session whole (no reconnect), and a release
/// still wakes the waiter.
#[test]
fn a_tls_pubsub_connection_is_pinged_while_a_thread_waits_and_stays_up() {
    require!(Need::Tls);
    let server = TlsServer::new(ClientAuth::No);
    let interval = Duration::from_millis(100);
    let config = Config::builder(server.url("127.0.0.1").as_str())
        .tls_root_certificates(Pki::get().pem("ca.crt"))
        .pubsub_ping_interval(interval)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let holder = tls_client(&server);
    let guard = holder.lock("tls:ping").lock().unwrap();
    let lock = client.lock("tls:ping");
    let waiter = std::thread::spawn(move || {
        drop(lock.lock().unwrap());
        Instant::now()
    });
    await_waiting(&client, 1);
    let mut raw = server.server.conn();
    let before = command_calls(&mut raw, "ping");
    std::thread::sleep(interval * 10);
    let sent = command_calls(&mut raw, "ping") - before;
    assert!(sent >= 3, "{sent} PINGs in 10 intervals");
    assert_eq!(client.metrics().pubsub_reconnects, 0);
    let released = Instant::now();
    drop(guard);
    let latency = waiter.join().unwrap() - released;
    assert!(latency < Duration::from_secs(1), "{latency:?}");
}

#[test]
fn many_waiters_share_one_tls_pubsub_connection() {
    require!(Need::Tls);
    // The reader decrypts while registrations write subscribe commands on the same session.
    let server = TlsServer::new(ClientAuth::No);
    let client = tls_client(&server);
    let holder = tls_client(&server);
    let names: Vec<String> = (0..20).map(|i| format!("tls:many:{i}")).collect();
    let (guards, waiters) = hold_and_wait(&holder, &client, &names);
    let mut raw = server.server.conn();
    assert!(wait_until(Duration::from_secs(10), || names.iter().all(
        |n| numsub(&mut raw, &format!("redisson_lock__channel:{{{n}}}")) == 1
    )));
    let subscribers = tls_connections(&server)
        .iter()
        .filter(|l| l.contains(" sub="))
        .filter(|l| !l.contains(" sub=0 "))
        .count();
    assert_eq!(
        subscribers, 1,
        "one pub/sub connection for the client's 20 waiters"
    );
    let released = Instant::now();
    drop(guards);
    let counts = support::join_within(waiters, Duration::from_secs(10), "TLS waiters stalled");
    assert!(counts.iter().all(|&c| c == 1));
    assert!(released.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_certificate_from_an_untrusted_ca_is_refused() {
    require!(Need::Tls);
    let server = TlsServer::new(ClientAuth::No);
    let config = Config::builder(server.url("127.0.0.1").as_str())
        .tls_root_certificates(Pki::get().pem("other-ca.crt"))
        .retry_attempts(0)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let started = Instant::now();
    let err = client.lock("tls:untrusted").lock().unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "says why: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(3), "fails at once");
    let exists: bool = redis::cmd("EXISTS")
        .arg("tls:untrusted")
        .query(&mut server.server.conn())
        .unwrap();
    assert!(!exists, "nothing was run");
}

#[test]
fn the_server_name_is_checked() {
    require!(Need::Tls);
    // This certificate names `localhost` only: connecting by IP address is refused.
    let server = TlsServer::with_certificate(ClientAuth::No, "named");
    let config = |host: &str| {
        Config::builder(server.url(host).as_str())
            .tls_root_certificates(Pki::get().pem("ca.crt"))
            .retry_attempts(0)
            .build()
            .unwrap()
    };
    let guard = Client::new(config("localhost"))
        .unwrap()
        .lock("tls:name")
        .lock()
        .unwrap();
    assert_eq!(guard.lock().hold_count().unwrap(), 1);
    drop(guard);
    let err = Client::new(config("127.0.0.1"))
        .unwrap()
        .lock("tls:name")
        .lock()
        .unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "says why: {err}"
    );
}

#[test]
fn client_certificates_are_presented_when_the_server_asks() {
    require!(Need::Tls);
    let server = TlsServer::new(ClientAuth::Required);
    let pki = Pki::get();

    let without = Config::builder(server.url("127.0.0.1").as_str())
        .tls_root_certificates(pki.pem("ca.crt"))
        .retry_attempts(0)
        .build()
        .unwrap();
    let err = Client::new(without)
        .unwrap()
        .lock("tls:mtls")
        .lock()
        .unwrap_err();
    assert!(
        err.is_connection(),
        "refused without a certificate: {err:?}"
    );

    let with = Config::builder(server.url("127.0.0.1").as_str())
        .tls_root_certificates(pki.pem("ca.crt"))
        .tls_client_certificate(pki.pem("client.crt"), pki.pem("client.key"))
        .build()
        .unwrap();
    let holder = Client::new(with.clone()).unwrap();
    let client = Client::new(with).unwrap();
    let guard = holder.lock("tls:mtls").lock().unwrap();
    let lock = client.lock("tls:mtls");
    let waiter = std::thread::spawn(move || {
        let g = lock.lock().unwrap();
        (Instant::now(), g.lock().hold_count().unwrap())
    });
    let mut raw = server.server.conn();
    assert!(wait_until(Duration::from_secs(5), || numsub(
        &mut raw,
        "redisson_lock__channel:{tls:mtls}"
    ) == 1));
    let released = Instant::now();
    drop(guard);
    let (woken, count) = waiter.join().unwrap();
    assert_eq!(count, 1);
    assert!(woken - released < Duration::from_secs(1));
}

#[test]
fn bad_tls_settings_are_refused_at_build() {
    let pki = Pki::get();
    let invalid = |b: redlatch::ConfigBuilder| {
        let err = b.build().unwrap_err();
        assert!(err.is_invalid_argument(), "{err:?}");
        err.to_string()
    };
    let msg = invalid(Config::builder("rediss://127.0.0.1:6380/#insecure"));
    assert!(msg.contains("insecure"), "{msg}");
    let msg = invalid(Config::cluster([
        "rediss://127.0.0.1:7000/",
        "redis://127.0.0.1:7001/",
    ]));
    assert!(msg.contains("mixed"), "{msg}");
    let msg = invalid(
        Config::builder("redis://127.0.0.1:6379/").tls_root_certificates(pki.pem("ca.crt")),
    );
    assert!(msg.contains("not rediss"), "{msg}");
    let msg = invalid(
        Config::builder("rediss://127.0.0.1:6380/").tls_root_certificates(&b"not a pem"[..]),
    );
    assert!(msg.contains("root certificate"), "{msg}");
    let msg = invalid(
        Config::builder("rediss://127.0.0.1:6380/")
            .tls_root_certificates(pki.pem("ca.crt"))
            .tls_client_certificate(pki.pem("client.crt"), &b"no key here"[..]),
    );
    assert!(msg.contains("client key"), "{msg}");
    let msg = invalid(Config::builder("unix:///tmp/redis.sock"));
    assert!(msg.contains("TCP"), "{msg}");
}

#[test]
fn a_cluster_over_tls_routes_and_wakes_on_every_master() {
    require!(Need::Tls);
    // The client is given one node; the others come from CLUSTER SLOTS (over TLS, which
    // names their TLS ports) and are reached over TLS with the same CA.
    let tls = TlsCluster::new();
    let urls = tls.urls();
    let config = || {
        Config::cluster([urls[0].as_str()])
            .tls_root_certificates(Pki::get().pem("ca.crt"))
            .build()
            .unwrap()
    };
    let holder = Client::new(config()).unwrap();
    let client = Client::new(config()).unwrap();
    // One name per master.
    let mut names: Vec<String> = Vec::new();
    for i in 0.. {
        let name = format!("tls:cluster:{i}");
        let port = tls.cluster.node_for_key(&name).port();
        if names
            .iter()
            .all(|n| tls.cluster.node_for_key(n).port() != port)
        {
            names.push(name);
        }
        if names.len() == 3 {
            break;
        }
    }
    let (guards, waiters) = hold_and_wait(&holder, &client, &names);
    for n in &names {
        let mut raw = tls.cluster.node_for_key(n).conn();
        let channel = format!("redisson_lock__channel:{{{n}}}");
        assert!(wait_until(Duration::from_secs(10), || {
            subscribers(&mut raw, &channel, auto_is_sharded()) == 1
        }));
        let owner: Vec<String> = redis::cmd("HKEYS").arg(n).query(&mut raw).unwrap();
        assert_eq!(owner.len(), 1, "held on its slot's master");
    }
    // The client's connections are all TLS ones, on every master.
    for node in tls.cluster.nodes() {
        let plain = format!("laddr=127.0.0.1:{} ", node.port());
        let plain_clients = client_list(&mut node.conn())
            .into_iter()
            .filter(|l| l.contains(&plain) && !l.contains("cmd=client|list"))
            .count();
        assert_eq!(plain_clients, 0, "no plain connection on {}", node.port());
    }
    let released = Instant::now();
    drop(guards);
    let counts = support::join_within(waiters, Duration::from_secs(10), "cluster TLS waiters");
    assert!(counts.iter().all(|&c| c == 1));
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "woken by pub/sub"
    );
}
