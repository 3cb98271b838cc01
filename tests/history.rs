//! A client's history (opt-in): events of holds and waits in its capped stream, stamped on
//! the server's clock, read back merged across clients; nothing recorded or sent when off.

mod support;

use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Commands;
use redlatch::{history::HistoryEvent, history::HistoryKind, Client, Config};
use support::{count_commands, wait_until, RedisServer};

const GENEROUS: Duration = Duration::from_secs(20);

fn recording(server: &RedisServer, name: &str) -> Client {
    support::client_with(server, |b| b.client_name(name).history(true))
}

/// The kinds of `owner`'s events but its waits' starts, which a client writes only for a wait
/// still going on at its write (an ended wait's end says how long it was).
fn kinds(events: &[HistoryEvent], owner: &str) -> Vec<HistoryKind> {
    events
        .iter()
        .filter(|e| e.owner.to_string() == owner && e.kind != HistoryKind::Wait)
        .map(|e| e.kind)
        .collect()
}

/// The history of `name` once it holds `n` events but waits' starts (written by the
/// watchdog's flush, about a second after they happen).
fn settled(client: &Client, name: &str, n: usize) -> Vec<HistoryEvent> {
    let mut events = Vec::new();
    assert!(
        wait_until(GENEROUS, || {
            events = client.history(name).unwrap();
            events
                .iter()
                .filter(|e| e.kind != HistoryKind::Wait)
                .count()
                == n
        }),
        "{events:#?}"
    );
    events
}

#[test]
fn holds_and_waits_are_recorded_with_who_and_server_time_and_never_overlap() {
    let server = RedisServer::new();
    let (a, b) = (recording(&server, "alpha"), recording(&server, "beta"));
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let held = a.lock("h:1").lock().unwrap();
    let a_owner = a.owner_id();
    let b2 = b.clone();
    let waiter = thread::Builder::new()
        .name("beta-worker".into())
        .spawn(move || {
            let guard = b2.lock("h:1").lock().unwrap();
            let owner = b2.owner_id();
            drop(guard);
            owner
        })
        .unwrap();
    assert!(wait_until(GENEROUS, || b.metrics().waiting == 1));
    drop(held);
    let b_owner = waiter.join().unwrap();
    // Written within about a second (the watchdog's flush).
    let events = settled(&a, "h:1", 4);
    assert_eq!(
        kinds(&events, &a_owner),
        [HistoryKind::Acquire, HistoryKind::Release]
    );
    assert_eq!(
        kinds(&events, &b_owner),
        [HistoryKind::Acquire, HistoryKind::Release]
    );
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    for e in &events {
        assert!(
            e.at_us >= before - 1_000_000 && e.at_us <= after + 1_000_000,
            "{e:?}"
        );
        assert_eq!(e.lock, "h:1");
        assert_eq!(e.mode.as_str(), "plain");
        assert_eq!(e.pid, std::process::id());
        assert!(!e.host.is_empty());
    }
    let b_acquire = events
        .iter()
        .find(|e| e.owner.to_string() == b_owner && e.kind == HistoryKind::Acquire)
        .unwrap();
    assert_eq!(b_acquire.client_name, "beta");
    assert_eq!(b_acquire.thread, "beta-worker");
    assert!(b_acquire.waited.unwrap() > Duration::ZERO);
    assert!(b_acquire.contended);
    assert!(
        !events[0].contended,
        "a's acquire found it free: {:?}",
        events[0]
    );
    let a_release = events
        .iter()
        .find(|e| e.owner.to_string() == a_owner && e.kind == HistoryKind::Release)
        .unwrap();
    assert!(a_release.held.is_some());
    assert!(
        a_release.at_us <= b_acquire.at_us,
        "the holds' spans overlap: {a_release:?} {b_acquire:?}"
    );
    // Capped, and no object to `list`.
    let streams: Vec<String> = server.conn().keys("redlatch_history:*").unwrap();
    assert_eq!(streams.len(), 2);
    let ttl: i64 = server.conn().pttl(&streams[0]).unwrap();
    assert!(ttl > 0);
    assert!(a.list("*").unwrap().is_empty());
    assert_eq!(
        a.recent_history(Duration::from_secs(60)).unwrap().len(),
        events.len()
    );
}

#[test]
fn a_client_without_history_sends_nothing_more() {
    let server = RedisServer::new();
    let client = Client::open(server.url().as_str()).unwrap();
    let mut conn = server.conn();
    let before = count_commands(&mut conn);
    for _ in 0..10 {
        drop(client.lock("h:off").lock().unwrap());
    }
    // A client that records, on a server of its own, started after: once its events are
    // written, a write of the other client's would have been too.
    let marker_server = RedisServer::new();
    let marker = recording(&marker_server, "marker");
    drop(marker.lock("h:marker").lock().unwrap());
    assert!(wait_until(GENEROUS, || marker
        .history("h:marker")
        .unwrap()
        .len()
        == 2));
    assert!(count_commands(&mut conn) > before + 20);
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    for command in ["cmdstat_xadd:", "cmdstat_time:", "cmdstat_hset:"] {
        assert!(!stats.contains(command), "{command} sent: {stats}");
    }
    let streams: Vec<String> = conn.keys("redlatch_history*").unwrap();
    assert!(streams.is_empty(), "{streams:?}");
}

#[test]
fn an_expired_hold_is_told_apart_and_the_stream_stays_capped() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .history_max_len(50)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let lease = client
        .lock("h:lease")
        .with_lease(Duration::from_millis(100));
    let guard = lease.lock().unwrap();
    assert!(wait_until(GENEROUS, || guard.is_lost()));
    assert!(guard.unlock().is_err());
    let mut events = Vec::new();
    assert!(
        wait_until(GENEROUS, || {
            events = client.history("h:lease").unwrap();
            events.len() == 2
        }),
        "{events:?}"
    );
    assert_eq!(events[1].kind, HistoryKind::Expired);
    assert!(
        events[1].held.unwrap() >= Duration::from_millis(90),
        "{:?}",
        events[1]
    );
    for _ in 0..300 {
        drop(client.lock("h:many").lock().unwrap());
    }
    let stream = format!("redlatch_history:{{{}}}", client.id());
    assert!(wait_until(GENEROUS, || client
        .history("h:many")
        .unwrap()
        .len()
        > 40));
    let len: usize = redis::cmd("XLEN")
        .arg(&stream)
        .query(&mut server.conn())
        .unwrap();
    // Trimmed in whole nodes of the stream (100 entries each by default).
    assert!(len < 50 + 100, "{len} entries");
}

#[test]
fn a_condition_wait_ends_the_hold_and_taking_the_lock_back_begins_another() {
    let server = RedisServer::new();
    let client = recording(&server, "cond");
    let lock = client.lock("h:cond");
    let cond = lock.condition("ready");
    let mut guard = lock.lock().unwrap();
    let waited = cond
        .wait_for(&mut guard, Duration::from_millis(50))
        .unwrap();
    assert!(waited.timed_out());
    drop(guard);
    let mut events = Vec::new();
    assert!(
        wait_until(GENEROUS, || {
            events = client.history("h:cond").unwrap();
            events.len() == 4
        }),
        "{events:?}"
    );
    let kinds: Vec<HistoryKind> = events.iter().map(|e| e.kind).collect();
    use HistoryKind::{Acquire, Release};
    assert_eq!(kinds, [Acquire, Release, Acquire, Release], "{events:?}");
    // Two holds that do not overlap: released for the wait, about 50 ms, then taken back.
    assert!(events[1].at_us <= events[2].at_us);
    assert!(events[2].at_us - events[1].at_us >= 40_000, "{events:?}");
}

#[test]
fn a_lock_set_is_recorded_counted_and_ordered_like_every_lock() {
    let server = RedisServer::new();
    let config = Config::builder(server.url().as_str())
        .history(true)
        .lock_order_checks(true)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let other = Client::open(server.url().as_str()).unwrap();
    let set = client.lock_set(["s:a", "s:b"]);

    // A wait for a member held elsewhere that runs out.
    let held = other.lock("s:b").lock().unwrap();
    assert!(set
        .try_lock_for(Duration::from_millis(200))
        .unwrap()
        .is_none());
    drop(held);
    assert_eq!(client.metrics().timeouts, 1);

    // Taken while the thread holds another lock, then released.
    let x = client.lock("s:x").lock().unwrap();
    let guard = set.lock().unwrap();
    assert_eq!(client.metrics().acquisitions, 3);
    guard.unlock().unwrap();
    drop(x);

    let mut b = Vec::new();
    assert!(
        wait_until(GENEROUS, || {
            b = client.history("s:b").unwrap();
            b.len() == 3
        }),
        "{b:?}"
    );
    // (The wait's start is left out: the event that ended it, in the same write, says how
    // long it was.)
    let kinds: Vec<HistoryKind> = b.iter().map(|e| e.kind).collect();
    use HistoryKind::{Acquire, GaveUp, Release};
    assert_eq!(kinds, [GaveUp, Acquire, Release], "{b:?}");
    assert!(b.iter().all(|e| e.mode.as_str() == "lock set"), "{b:?}");
    assert!(
        b[0].waited.unwrap() >= Duration::from_millis(190),
        "{:?}",
        b[0]
    );
    assert!(b[2].held.is_some(), "{:?}", b[2]);
    let a = client.history("s:a").unwrap();
    let kinds: Vec<HistoryKind> = a.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [Acquire, Release], "{a:?}");

    // The lock held before the set is recorded before each member; the members, taken at
    // once, are no order of each other.
    let mut conn = server.conn();
    let mut orders: Vec<String> = conn.keys("redlatch_order:*").unwrap();
    orders.sort();
    assert_eq!(orders.len(), 2, "{orders:?}");
    assert!(orders.iter().all(|k| k.contains("s:x")), "{orders:?}");
}

#[test]
fn a_semaphores_holds_and_waits_are_recorded_and_counted_like_a_locks() {
    let server = RedisServer::new();
    let (a, b) = (recording(&server, "alpha"), recording(&server, "beta"));
    let sem = a.semaphore("h:sem");
    assert!(sem.try_set_permits(1).unwrap());
    let held = sem.acquire(1).unwrap();
    let b2 = b.clone();
    let waiter = thread::spawn(move || {
        b2.semaphore("h:sem").acquire(1).unwrap().release().unwrap();
        b2.owner_id()
    });
    assert!(wait_until(GENEROUS, || b.metrics().waiting == 1));
    held.release().unwrap();
    let b_owner = waiter.join().unwrap();
    let expirable = a.permit_expirable_semaphore("h:pes");
    assert!(expirable.try_set_permits(1).unwrap());
    expirable
        .acquire(Duration::from_secs(30))
        .unwrap()
        .release()
        .unwrap();

    let events = settled(&a, "h:sem", 4);
    let both = [HistoryKind::Acquire, HistoryKind::Release];
    assert_eq!(kinds(&events, &a.owner_id()), both);
    assert_eq!(kinds(&events, &b_owner), both);
    assert!(
        events.iter().all(|e| e.mode.as_str() == "semaphore"),
        "{events:#?}"
    );
    let taken = |owner: &str| {
        events
            .iter()
            .find(|e| e.owner.to_string() == owner && e.kind == HistoryKind::Acquire)
            .unwrap()
            .clone()
    };
    assert!(!taken(&a.owner_id()).contended);
    assert!(taken(&b_owner).contended, "{events:#?}");
    assert!(taken(&b_owner).waited.unwrap() > Duration::ZERO);

    let mut permits = Vec::new();
    assert!(wait_until(GENEROUS, || {
        permits = a.history("h:pes").unwrap();
        permits.len() == 2
    }));
    assert_eq!(kinds(&permits, &a.owner_id()), both);
    assert!(permits
        .iter()
        .all(|e| e.mode.as_str() == "expirable semaphore"));

    let (ma, mb) = (a.metrics(), b.metrics());
    assert_eq!((ma.acquisitions, ma.contended_acquisitions), (2, 0));
    assert_eq!((mb.acquisitions, mb.contended_acquisitions), (1, 1));
    assert_eq!((ma.hold_time.count(), mb.hold_time.count()), (2, 1));
}

#[test]
fn top_shows_a_hold_and_a_wait_older_than_its_window_with_history_on_and_off() {
    let server = RedisServer::new();
    let viewer = Client::open(server.url()).unwrap();
    let window = Duration::from_secs(1);
    let older = Duration::from_millis(1200);
    for history in [true, false] {
        let name = format!("top:{history}:stuck");
        let named = |n: &str| support::client_with(&server, |b| b.client_name(n).history(history));
        let (a, b) = (named("alpha"), named("beta"));
        // A busy lock with no waiter (free now: only a history shows it): the stuck one
        // sorts first.
        let busy = format!("top:{history}:busy");
        for _ in 0..20 {
            drop(a.lock(&busy).lock().unwrap());
        }
        let held = a.lock(&name).lock().unwrap();
        let b2 = b.clone();
        let waited = name.clone();
        // The waiter holds another lock, so that its wait is recorded (for deadlock checks)
        // and the server knows how long it has waited even without histories.
        let waiter = thread::spawn(move || {
            let _other = b2.lock(format!("{waited}:other")).lock().unwrap();
            drop(b2.lock(&waited).lock().unwrap());
        });
        assert!(wait_until(GENEROUS, || b.metrics().waiting == 1));
        let pattern = format!("top:{history}:*");
        let mut top = Vec::new();
        // Known once older than the window: from the histories (written once a second), or
        // without them from the wait record (written after `deadlock_check_after`, 1 s); a
        // hold's age only from the histories.
        assert!(
            wait_until(GENEROUS, || {
                top = viewer.top(&pattern, window).unwrap();
                top[0].longest_wait.is_some_and(|w| w >= older)
                    && (!history || top[0].holders[0].held_for.is_some_and(|h| h >= older))
            }),
            "{top:#?}"
        );
        let stuck = &top[0];
        assert_eq!((stuck.name.as_str(), stuck.waiters), (name.as_str(), 1));
        assert_eq!(stuck.holders.len(), 1, "{stuck:#?}");
        let holder = &stuck.holders[0];
        assert_eq!(holder.owner.to_string(), held.owner());
        let who = holder
            .who
            .clone()
            .expect("who holds, from history or the client list");
        assert_eq!(who.client_name.as_deref(), Some("alpha"));
        if history {
            assert_eq!(who.pid, Some(std::process::id()));
            assert!(who.host.is_some() && who.thread.is_some(), "{who:?}");
        } else {
            // The client list tells the address its connections come from.
            assert_eq!(who.host.as_deref(), Some("127.0.0.1"));
            // Nothing tells the process nor the hold's age: unknown, not zero.
            assert_eq!((who.pid, who.thread.as_deref()), (None, None));
            assert_eq!(holder.held_for, None);
        }
        if history {
            assert_eq!(top[1].name, busy, "{top:#?}");
        }
        drop(held);
        waiter.join().unwrap();
    }
}

#[test]
fn a_broken_hold_is_recorded_when_found_once_and_a_process_exit_keeps_its_last_events() {
    let server = RedisServer::new();
    // A period of one second: the break is found within one.
    let a = support::client_with(&server, |b| {
        b.client_name("breaker")
            .history(true)
            .watchdog_timeout(Duration::from_secs(3))
    });
    let other = support::client(&server);
    let guard = a.lock("h:broken").lock().unwrap();
    let owner = guard.owner().to_owned();
    let broke = std::time::Instant::now();
    other.lock("h:broken").force_unlock().unwrap();
    assert!(wait_until(GENEROUS, || guard.is_lost()));
    // Recorded while the guard lives: the watchdog's check found it.
    let events = settled(&a, "h:broken", 2);
    assert_eq!(
        kinds(&events, &owner),
        [HistoryKind::Acquire, HistoryKind::Lost]
    );
    assert!(broke.elapsed() < Duration::from_secs(4), "{broke:?}");
    // The guard's own report of the loss is not written again.
    assert!(guard.unlock().unwrap_err().is_lock_lost());
    drop(a.lock("h:broken").lock().unwrap());
    let events = settled(&a, "h:broken", 4);
    assert_eq!(
        kinds(&events, &owner),
        [
            HistoryKind::Acquire,
            HistoryKind::Lost,
            HistoryKind::Acquire,
            HistoryKind::Release
        ]
    );
    let spans = redlatch::history::timeline(&events, events[3].at_us).spans;
    let outcomes: Vec<&str> = spans.iter().map(|s| s.outcome).collect();
    assert_eq!(outcomes, ["lost", "released"], "{spans:#?}");

    // Found by the check that a pub/sub reconnect asks for, long before the next renewal
    // (every 10 s with the default lease): the client's subscribed connection is killed.
    let slow = support::client_with(&server, |b| b.history(true));
    let held = slow.lock("h:reconnect").lock().unwrap();
    let busy = other.lock("h:busy").lock().unwrap();
    let waiter = {
        let lock = slow.lock("h:busy");
        thread::spawn(move || lock.try_lock_for(GENEROUS).map(|g| g.is_some()))
    };
    let mut conn = server.conn();
    let channel = "redisson_lock__channel:{h:busy}";
    assert!(wait_until(GENEROUS, || support::numsub(&mut conn, channel) == 1));
    other.lock("h:reconnect").force_unlock().unwrap();
    let killed = std::time::Instant::now();
    assert!(support::kill_pubsub_connections(&mut conn) > 0);
    assert!(wait_until(GENEROUS, || held.is_lost()));
    assert!(killed.elapsed() < Duration::from_secs(8), "{killed:?}");
    let events = settled(&slow, "h:reconnect", 2);
    assert_eq!(
        kinds(&events, held.owner()),
        [HistoryKind::Acquire, HistoryKind::Lost]
    );
    drop(busy);
    assert!(waiter.join().unwrap().unwrap());
    drop(held);

    // A loss recorded when found belongs to its own hold: a later hold's loss, found at its
    // release, is recorded too (though the first guard was leaked, and never ended).
    let first = a.lock("h:leak").lock().unwrap();
    other.lock("h:leak").force_unlock().unwrap();
    assert!(wait_until(GENEROUS, || first.is_lost()));
    settled(&a, "h:leak", 2);
    first.leak();
    let second = a.lock("h:leak").lock().unwrap();
    other.lock("h:leak").force_unlock().unwrap();
    assert!(second.unlock().unwrap_err().is_lock_lost());
    let events = settled(&a, "h:leak", 4);
    assert_eq!(
        kinds(&events, &owner),
        [
            HistoryKind::Acquire,
            HistoryKind::Lost,
            HistoryKind::Acquire,
            HistoryKind::Lost
        ]
    );

    // So is a renewed permit's, released behind its guard's back.
    let slots = a.permit_expirable_semaphore("h:slots");
    assert!(slots.try_set_permits(1).unwrap());
    let permit = slots.acquire_renewed().unwrap();
    other
        .permit_expirable_semaphore("h:slots")
        .release(permit.id())
        .unwrap();
    assert!(wait_until(GENEROUS, || permit.is_lost()));
    let events = settled(&a, "h:slots", 2);
    assert_eq!(
        kinds(&events, &owner),
        [HistoryKind::Acquire, HistoryKind::Lost]
    );
    drop(permit);

    // The last handle's drop writes what its client still keeps before it returns.
    let brief = support::client_with(&server, |b| b.history(true));
    let brief_owner = brief.owner_id();
    drop(brief.lock("h:drop").lock().unwrap());
    drop(brief);
    assert_eq!(
        kinds(&a.history("h:drop").unwrap(), &brief_owner),
        [HistoryKind::Acquire, HistoryKind::Release]
    );

    // A process that ends while another thread keeps a client handle (no close, no last
    // drop) writes its last events at its exit.
    let mut child = support::child::ChildTest::start(
        "history_exit_child",
        &[("REDLATCH_HISTORY_URL", server.url())],
    );
    let child_owner = child.next("OWNER", GENEROUS);
    let status = child.exit_within(GENEROUS);
    assert!(status.success(), "{status:?}");
    let events = a.history("h:exit").unwrap();
    assert_eq!(
        kinds(&events, &child_owner),
        [HistoryKind::Acquire, HistoryKind::Release],
        "{events:#?}"
    );
}

/// The child half: a lock taken and released just before the process ends, with a thread
/// keeping a handle of the client.
#[test]
#[ignore]
fn history_exit_child() {
    let Ok(url) = std::env::var("REDLATCH_HISTORY_URL") else {
        return;
    };
    let config = Config::builder(url.as_str()).history(true).build().unwrap();
    let client = Client::new(config).unwrap();
    let kept = client.clone();
    thread::spawn(move || loop {
        thread::park();
        let _ = &kept;
    });
    // The first flush is a second away: the events below are written by the exit.
    let guard = client.lock("h:exit").lock().unwrap();
    println!("OWNER {}", guard.owner());
    drop(guard);
}

#[test]
fn a_rate_limiters_waits_are_recorded_and_top_counts_them_with_no_hold_left_open() {
    let server = RedisServer::new();
    let (a, b) = (recording(&server, "alpha"), recording(&server, "beta"));
    let viewer = Client::open(server.url()).unwrap();
    let name = "h:rate";
    let api = a.rate_limiter(name);
    assert!(api
        .try_set_rate(redlatch::RateType::Overall, 1, Duration::from_secs(60))
        .unwrap());
    api.acquire(1).unwrap();
    // Refused until its deadline: a wait that gave up.
    let refused = b
        .rate_limiter(name)
        .try_acquire_for(1, Duration::from_millis(100))
        .unwrap();
    assert!(refused.is_none());
    // Refused at once without waiting: no wait at all.
    assert!(b.rate_limiter(name).try_acquire(1).unwrap().is_none());
    let b2 = b.clone();
    let waiter = thread::spawn(move || {
        b2.rate_limiter("h:rate").acquire(1).unwrap();
        b2.owner_id()
    });
    assert!(wait_until(GENEROUS, || b.metrics().waiting == 1));
    // `top` shows the wait going on: the waiter, from the history and the channel.
    let mut top = Vec::new();
    assert!(
        wait_until(GENEROUS, || {
            top = viewer.top("h:*", Duration::from_secs(10)).unwrap();
            top.first()
                .is_some_and(|t| t.name == name && t.longest_wait.is_some())
        }),
        "{top:#?}"
    );
    let live = &top[0];
    assert_eq!(live.kind, Some(redlatch::inspect::Kind::RateLimiter));
    assert_eq!(live.waiters, 1);
    assert!(live.holders.is_empty(), "{live:#?}");
    assert_eq!(api.release(1).unwrap(), 1);
    let b_owner = waiter.join().unwrap();

    // a: admitted at once; b's thread gave up, its other thread was admitted after its
    // wait. An admission is an acquire and a release at once.
    let events = settled(&a, name, 5);
    assert!(
        events
            .iter()
            .all(|e| e.mode == redlatch::LockKind::RateLimiter),
        "{events:#?}"
    );
    use HistoryKind::{Acquire, GaveUp, Release};
    assert_eq!(kinds(&events, &a.owner_id()), [Acquire, Release]);
    assert_eq!(kinds(&events, &b.owner_id()), [GaveUp]);
    assert_eq!(kinds(&events, &b_owner), [Acquire, Release]);
    let gave_up = events.iter().find(|e| e.kind == GaveUp).unwrap();
    assert!(
        gave_up.waited.unwrap() >= Duration::from_millis(90),
        "{gave_up:?}"
    );
    let admitted = events
        .iter()
        .find(|e| e.owner.to_string() == b_owner && e.kind == Acquire)
        .unwrap();
    assert!(admitted.contended, "{admitted:?}");
    let now = events.last().unwrap().at_us + 1_000_000;
    let spans = redlatch::history::timeline(&events, now).spans;
    assert!(!spans.iter().any(|s| s.is_open()), "{spans:#?}");
    let waits: Vec<&str> = spans
        .iter()
        .filter(|s| s.kind == redlatch::history::SpanKind::Wait)
        .map(|s| s.outcome)
        .collect();
    assert_eq!(waits, ["gave_up", "acquired"], "{spans:#?}");
    assert!(spans
        .iter()
        .filter(|s| s.kind == redlatch::history::SpanKind::Hold)
        .all(|s| s.start_us == s.end_us));

    // Counted as acquisitions and waits, but no hold.
    let m = b.metrics();
    assert_eq!((m.acquisitions, m.contended_acquisitions), (1, 1));
    assert_eq!((m.timeouts, m.hold_time.count()), (1, 0));
    // Once the waiter's subscription is gone, nobody waits.
    let mut conn = server.conn();
    let channel = "redlatch_rate:{h:rate}";
    assert!(wait_until(GENEROUS, || support::numsub(&mut conn, channel) == 0));
    let top = viewer.top(name, Duration::from_secs(60)).unwrap();
    assert_eq!(top[0].waiters, 0);
    assert!(top[0].acquisitions_per_s > 0.0 && top[0].contended_per_s > 0.0);
    assert!(top[0].blame.is_empty(), "{:#?}", top[0]);
}
