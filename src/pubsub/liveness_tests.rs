//! The connection's check, against a server the test plays: `PING`s only while anything is
//! registered, their answers in each form, and a silent connection dropped and made anew.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{IntoConnectionInfo, Value};

use super::connection::{PubSub, Shared};
use super::registry::Command;
use super::testing::{accept_set_up, moved_error, reply, wired, Peer, PATIENCE};
use super::vocabulary::{Alarms, Mode, Wakeup};
use crate::net::Dial;

/// The interval of the connections the test plays the server of.
const INTERVAL: Duration = Duration::from_millis(200);

/// A `PING`'s answer on a subscribed RESP2 connection.
const PONG: &[u8] = b"*2\r\n$4\r\npong\r\n$0\r\n\r\n";

fn pong() -> Value {
    redis::parse_redis_value(PONG).unwrap()
}

/// A connection in `mode` to `listener`, checked every `interval`, with its reader thread.
fn scripted(listener: &TcpListener, interval: Duration, mode: Mode, placed: bool) -> PubSub {
    let mut dial = Dial::plain(PATIENCE);
    dial.ping_interval = interval;
    let address = format!("redis://{}/", listener.local_addr().unwrap());
    let target = Arc::new(address.into_connection_info().unwrap());
    PubSub::spawn(Shared::new(target, dial, mode, placed)).unwrap()
}

/// A subscribe-family reply as the server writes it.
fn confirm(kind: &str, channel: &str, count: i64) -> Vec<u8> {
    format!(
        "*3\r\n${}\r\n{kind}\r\n${}\r\n{channel}\r\n:{count}\r\n",
        kind.len(),
        channel.len()
    )
    .into_bytes()
}

#[test]
fn a_due_ping_is_written_and_answered_in_either_form() {
    let (ps, mut peer) = wired(Mode::Plain);
    let t0 = Instant::now();
    let interval = ps.shared.registry.lock().wire.liveness.interval();
    let tend = |at: Instant, active| ps.shared.registry.lock().wire.tend(at, active);
    let owed = || ps.shared.registry.lock().wire.liveness.is_owed();
    let w = ps.register("c");
    assert_eq!(peer.command(), ["SUBSCRIBE", "c"]);
    assert_eq!(tend(t0 + interval * 2, true), Ok(interval));
    assert_eq!(peer.command(), ["PING"]);
    assert!(owed());
    ps.shared.route(pong()); // subscribed, RESP2
    assert!(!owed());
    assert_eq!(tend(t0 + interval * 3, true), Ok(interval));
    assert_eq!(peer.command(), ["PING"]);
    ps.shared.route(Value::SimpleString("PONG".into())); // no subscription, or RESP3
    assert!(!owed());
    // An ACL without PING: the refusal shows the server reads and answers.
    assert_eq!(
        tend(t0 + interval * 3 + interval / 2, true),
        Ok(interval / 2)
    );
    ps.shared
        .route(redis::parse_redis_value(b"-NOPERM no PING for you\r\n").unwrap());
    assert!(!owed(), "nothing was owed: nothing changes");
    assert_eq!(tend(t0 + interval * 4, true), Ok(interval));
    assert_eq!(peer.command(), ["PING"]);
    ps.shared
        .route(redis::parse_redis_value(b"-NOPERM no PING for you\r\n").unwrap());
    assert!(!owed(), "a refusal answers");
    assert!(ps.shared.registry.lock().wire.writer.is_some());
    assert_eq!(tend(t0 + interval * 5, true), Ok(interval));
    assert_eq!(peer.command(), ["PING"]);
    assert_eq!(tend(t0 + interval * 6, true), Err(interval), "silent");
    drop(w);
    assert_eq!(peer.command(), ["UNSUBSCRIBE", "c"]);
}

#[test]
fn nothing_is_written_while_nothing_is_registered() {
    let (ps, peer) = wired(Mode::Plain);
    let t0 = Instant::now();
    for n in 1..10 {
        let due = ps
            .shared
            .registry
            .lock()
            .wire
            .tend(t0 + INTERVAL * n, false);
        assert!(due.is_ok());
    }
    ps.shared.registry.lock().wire.resync();
    assert!(peer.rest().is_empty());
}

#[test]
fn a_sharded_ping_is_remembered_for_its_answer_and_a_refusal_answers_it() {
    let (ps, mut peer) = wired(Mode::Sharded);
    let t0 = Instant::now();
    let interval = ps.shared.registry.lock().wire.liveness.interval();
    let tend = |at: Instant| ps.shared.registry.lock().wire.tend(at, true);
    let w = ps.register("c");
    assert_eq!(peer.command(), ["SSUBSCRIBE", "c"]);
    assert!(tend(t0 + interval * 2).is_ok());
    assert_eq!(peer.command(), ["PING"]);
    {
        let reg = ps.shared.registry.lock();
        let inflight: Vec<_> = reg.wire.inflight.iter().map(|(c, _)| *c).collect();
        assert_eq!(inflight, [Command::Subscribe, Command::Ping]);
    }
    ps.shared.route(reply("ssubscribe", "c", 1));
    ps.shared.route(pong());
    assert!(w.rx.try_recv().is_ok(), "confirmed");
    {
        let reg = ps.shared.registry.lock();
        assert!(reg.wire.inflight.is_empty() && !reg.wire.liveness.is_owed());
    }
    // An ACL without PING: the refusal answers the PING, and moves no channel.
    assert!(tend(t0 + interval * 3).is_ok());
    assert_eq!(peer.command(), ["PING"]);
    ps.shared.route(moved_error());
    {
        let reg = ps.shared.registry.lock();
        assert!(reg.wire.inflight.is_empty() && !reg.wire.liveness.is_owed());
        assert!(reg.wire.writer.is_some(), "not resynced");
    }
    assert!(!w.moved() && w.rx.try_recv().is_err());
    // A PING's answer where another reply is due: the bookkeeping is off, start over.
    drop(w);
    assert_eq!(peer.command(), ["SUNSUBSCRIBE", "c"]);
    ps.shared.route(pong());
    assert!(ps.shared.registry.lock().wire.writer.is_none(), "resynced");
}

/// The server stops answering (it still reads) once a waiter is subscribed: the connection
/// is dropped within two intervals, made anew, the channel subscribed again and the waiter
/// woken to re-check (on a cluster node's connection, told its channel may have moved).
#[test]
fn a_connection_that_falls_silent_is_made_anew_and_its_waiters_re_check() {
    for (mode, placed) in [(Mode::Plain, false), (Mode::Sharded, true)] {
        let subscribe = Command::Subscribe.name(mode);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ps = scripted(&listener, INTERVAL, mode, placed);
        let mut first = Peer::new(accept_set_up(&listener));
        let mut w = ps.register("c");
        assert_eq!(first.command(), [subscribe, "c"]);
        first.answer(&confirm(&subscribe.to_ascii_lowercase(), "c", 1));
        let woken = w.wait_until(Instant::now() + PATIENCE, &Alarms::none());
        assert_eq!(woken, Wakeup::Woken, "{mode:?}: confirmed");
        w.attempted();
        let silent = Instant::now();
        assert_eq!(first.command(), ["PING"]);
        let mut second = Peer::new(accept_set_up(&listener));
        let took = silent.elapsed();
        // Two intervals, and room for a loaded machine.
        assert!(
            took < INTERVAL * 2 + Duration::from_secs(2),
            "{mode:?}: {took:?}"
        );
        assert_eq!(second.command(), [subscribe, "c"], "{mode:?}: again");
        let woken = w.wait_until(Instant::now() + PATIENCE, &Alarms::none());
        assert_eq!(woken, Wakeup::Woken, "{mode:?}: woken to re-check");
        assert_eq!(w.moved(), placed);
        w.attempted();
        drop(w);
        ps.shut();
    }
}

/// No `PING` while nothing is registered, before and after a wait; one per interval during.
#[test]
fn pings_are_sent_only_while_something_is_registered() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let interval = Duration::from_millis(100);
    let ps = scripted(&listener, interval, Mode::Plain, false);
    let mut server = Peer::new(accept_set_up(&listener));
    assert_eq!(server.command_within(interval * 5), None, "idle");
    let w = ps.register("c");
    assert_eq!(server.command(), ["SUBSCRIBE", "c"]);
    server.answer(&confirm("subscribe", "c", 1));
    let started = Instant::now();
    let mut pings = 0;
    while started.elapsed() < interval * 5 {
        assert_eq!(server.command(), ["PING"]);
        server.answer(PONG);
        pings += 1;
    }
    assert!((2..=6).contains(&pings), "{pings} PINGs in 5 intervals");
    drop(w);
    // A PING may have gone out before the unsubscribe's reply was read: answered, it is
    // the last one.
    let mut after = 0;
    let mut unsubscribed = false;
    while let Some(command) = server.command_within(interval * 5) {
        match command.first().map(String::as_str) {
            Some("UNSUBSCRIBE") => {
                server.answer(&confirm("unsubscribe", "c", 0));
                unsubscribed = true;
            }
            Some("PING") => {
                server.answer(b"+PONG\r\n");
                after += usize::from(unsubscribed);
            }
            _ => panic!("{command:?}"),
        }
    }
    assert!(unsubscribed && after <= 1, "{after} PINGs once idle");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "the connection stayed up");
    ps.shut();
}

/// Against a real server, in both modes: PINGs go out while a waiter waits, their answers
/// keep the connection up (no reconnect), and a release still wakes the waiter.
#[test]
fn a_real_server_answers_the_pings_of_both_modes_and_the_connection_stays_up() {
    let Some(server) = crate::testing::Server::start_sharded() else {
        return;
    };
    let interval = Duration::from_millis(100);
    for (mode, publish) in [(Mode::Plain, "PUBLISH"), (Mode::Sharded, "SPUBLISH")] {
        let mut dial = Dial::plain(PATIENCE);
        dial.ping_interval = interval;
        let metrics = Arc::clone(&dial.metrics);
        let ps = PubSub::start(Arc::new(server.info()), dial, mode).unwrap();
        let channel = "redisson_lock__channel:{liveness}";
        let mut w = ps.register(channel);
        let woken = w.wait_until(Instant::now() + PATIENCE, &Alarms::none());
        assert_eq!(woken, Wakeup::Woken, "{mode:?}: confirmed");
        w.attempted();
        let mut conn = server.conn();
        let pings = |conn: &mut redis::Connection| {
            let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_ping:calls="))
                .and_then(|v| v.split(',').next()?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let before = pings(&mut conn);
        std::thread::sleep(interval * 10);
        let sent = pings(&mut conn) - before;
        assert!(sent >= 3, "{mode:?}: {sent} PINGs in 10 intervals");
        assert_eq!(metrics.snapshot().pubsub_reconnects, 0, "{mode:?}");
        let heard: i64 = redis::cmd(publish)
            .arg(channel)
            .arg("0")
            .query(&mut conn)
            .unwrap();
        assert_eq!(heard, 1, "{mode:?}");
        let woken = w.wait_until(Instant::now() + PATIENCE, &Alarms::none());
        assert_eq!(woken, Wakeup::Woken, "{mode:?}: the release");
        w.attempted();
        w.succeeded();
        drop(w);
        ps.shut();
    }
}
