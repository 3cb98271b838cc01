//! Connection names: every command and pub/sub connection of a client is named
//! `<client_name>:<client id>` (`CLIENT SETNAME`), so that `CLIENT LIST`,
//! `Client::connections` and `Inspection::trace` tell where a holder or waiter runs; the
//! library is announced with `CLIENT SETINFO` where the server has it (7.2+).

mod support;

use std::time::Duration;

use redlatch::{Client, Config};
use support::{await_waiting, client_list, RedisServer};

/// The value of `field` in a `CLIENT LIST` line.
fn field<'a>(line: &'a str, field: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
        .unwrap_or("")
}

#[test]
fn command_and_pubsub_connections_are_named_and_traced() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .client_name("billing")
        .build()
        .unwrap();
    let holder = Client::new(config).unwrap();
    let waiter = Client::open(server.url()).unwrap();
    let guard = holder.lock("names:ledger").lock().unwrap();
    let waiting = {
        let lock = waiter.lock("names:ledger");
        std::thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(30))
                .map(|g| g.is_some())
        })
    };
    await_waiting(&waiter, 1);

    let lines = client_list(&mut server.conn());
    let of = |id: &str| -> Vec<&String> {
        lines
            .iter()
            .filter(|l| field(l, "name").ends_with(id))
            .collect()
    };
    let held = of(holder.id());
    assert!(!held.is_empty(), "{lines:#?}");
    for line in &held {
        assert_eq!(field(line, "name"), format!("billing:{}", holder.id()));
    }
    // The waiter's pub/sub connection (subscribed to the lock's channel) is named too.
    let waits = of(waiter.id());
    let pubsub: Vec<_> = waits.iter().filter(|l| field(l, "sub") != "0").collect();
    assert_eq!(pubsub.len(), 1, "{lines:#?}");
    assert_eq!(
        field(pubsub[0], "name"),
        format!("redlatch:{}", waiter.id())
    );
    // The library, where the server takes CLIENT SETINFO (7.2+).
    let has_setinfo = redis::cmd("CLIENT")
        .arg(&["SETINFO", "LIB-NAME", "probe"])
        .query::<()>(&mut server.conn())
        .is_ok();
    if has_setinfo {
        for line in held.iter().chain(&waits) {
            assert_eq!(field(line, "lib-name"), "redlatch", "{line}");
            assert_eq!(field(line, "lib-ver"), env!("CARGO_PKG_VERSION"), "{line}");
        }
    } else {
        eprintln!("this redis-server has no CLIENT SETINFO (before 7.2): lib-name not checked");
    }

    // Traced: the holder to its connections, by its client id.
    let mut found = waiter.inspect("names:ledger").unwrap().unwrap();
    found.trace(&waiter.connections().unwrap());
    let traced = found.holders[0].connections.as_ref().unwrap();
    assert_eq!(traced.len(), held.len());
    for conn in traced {
        assert_eq!(conn.name, format!("billing:{}", holder.id()));
        assert!(conn.addr.starts_with("127.0.0.1:"), "{conn:?}");
    }
    // Gone: the holder's client closed, its hold left behind (the guard is forgotten).
    std::mem::forget(guard);
    holder.close();
    let mut gone = waiter.inspect("names:ledger").unwrap().unwrap();
    assert!(support::wait_until(Duration::from_secs(5), || {
        gone.trace(&waiter.connections().unwrap());
        gone.holders[0].connections.as_deref() == Some(&[])
    }));
    assert!(gone.lease.unwrap() > Duration::ZERO);
    drop(waiting);
}
