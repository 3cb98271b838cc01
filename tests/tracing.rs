//! The `tracing` feature: spans for acquires (their waits inside), releases and renewals with
//! their fields, and an event for a lost hold, as a subscriber sees them.
#![cfg(feature = "tracing")]

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use redlatch::{Client, Config};
use support::{await_waiting, wait_until, RedisServer};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as recorded: its name, its parent's id, its fields (values as text).
#[derive(Clone, Debug)]
struct Seen {
    id: u64,
    name: &'static str,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

impl Seen {
    fn field(&self, f: &str) -> Option<&str> {
        self.fields.get(f).map(String::as_str)
    }
}

#[derive(Default)]
struct Recorder {
    next: AtomicU64,
    spans: Mutex<Vec<Seen>>,
    events: Mutex<Vec<HashMap<String, String>>>,
}

thread_local! {
    static STACK: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for &'static Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => STACK.with(|s| s.borrow().last().copied()),
            None => None,
        };
        self.spans.lock().unwrap().push(Seen {
            id,
            name: attrs.metadata().name(),
            parent,
            fields,
        });
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some(s) = spans.iter_mut().find(|s| s.id == span.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        fields.insert("level".into(), event.metadata().level().to_string());
        self.events.lock().unwrap().push(fields);
    }
    fn enter(&self, span: &Id) {
        STACK.with(|s| s.borrow_mut().push(span.into_u64()));
    }
    fn exit(&self, span: &Id) {
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|&x| x == span.into_u64()) {
                s.remove(i);
            }
        });
    }
}

/// The one recorder of this test binary (a global default: the watchdog's thread reports
/// too). Tests tell their spans apart by their locks' names.
fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<&'static Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let r: &'static Recorder = Box::leak(Box::default());
        tracing::subscriber::set_global_default(r).expect("the only subscriber");
        r
    })
}

fn spans(name: &'static str, lock: &str) -> Vec<Seen> {
    let spans = recorder().spans.lock().unwrap();
    spans
        .iter()
        .filter(|s| s.name == name && s.field("name") == Some(lock))
        .cloned()
        .collect()
}

#[test]
fn acquire_and_release_are_spans_with_their_fields() {
    let rec = recorder();
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let other = Client::open(server.url()).unwrap();
    let lock = client.lock("tr:plain");
    let guard = lock.lock().unwrap();
    let again = lock.lock().unwrap();
    drop(again);
    drop(guard);
    let acquires = spans("redlatch.acquire", "tr:plain");
    assert_eq!(acquires.len(), 2, "{acquires:?}");
    assert_eq!(acquires[0].field("kind"), Some("plain"));
    assert_eq!(acquires[0].field("outcome"), Some("acquired"));
    assert_eq!(acquires[0].field("hold_count"), Some("1"));
    assert_eq!(acquires[1].field("hold_count"), Some("2"), "the re-entry");
    assert!(acquires[0].field("waited_ms").is_some());
    assert_eq!(acquires[0].field("lease_ms"), None, "a watchdog lease");
    let releases = spans("redlatch.release", "tr:plain");
    let outcomes: Vec<_> = releases.iter().map(|s| s.field("outcome")).collect();
    assert_eq!(outcomes, [Some("still_held"), Some("released")]);

    // A try that finds it taken, and a wait inside its acquire.
    let held = other.lock("tr:plain").lock().unwrap();
    assert!(lock.try_lock().unwrap().is_none());
    let waiter = {
        let lock = lock.clone().with_lease(Duration::from_secs(20));
        std::thread::spawn(move || lock.lock().map(drop))
    };
    await_waiting(&client, 1);
    drop(held);
    waiter.join().unwrap().unwrap();
    let acquires = spans("redlatch.acquire", "tr:plain");
    let client_acquires: Vec<_> = acquires[2..].iter().collect();
    assert!(
        client_acquires
            .iter()
            .any(|s| s.field("outcome") == Some("busy")),
        "{acquires:?}"
    );
    let waited = acquires
        .iter()
        .find(|s| s.field("lease_ms") == Some("20000"))
        .expect("the waiter's acquire");
    assert_eq!(waited.field("outcome"), Some("acquired"));
    let all = rec.spans.lock().unwrap().clone();
    let wait = all
        .iter()
        .find(|s| s.name == "redlatch.wait" && s.parent == Some(waited.id))
        .expect("a wait span inside the acquire");
    assert_eq!(wait.field("outcome"), Some("done"));
    assert_eq!(
        wait.field("channel"),
        Some("redisson_lock__channel:{tr:plain}")
    );

    let sem = client.semaphore("tr:sem");
    sem.try_set_permits(3).unwrap();
    drop(sem.acquire(2).unwrap());
    let taken = spans("redlatch.acquire", "tr:sem");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].field("kind"), Some("semaphore"));
    assert_eq!(taken[0].field("hold_count"), Some("2"));
}

#[test]
fn renewals_are_spans_and_a_lost_hold_is_a_warn_event() {
    let rec = recorder();
    let server = RedisServer::new();
    let config = Config::builder(server.url())
        .watchdog_timeout(Duration::from_millis(600))
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let operator = Client::open(server.url()).unwrap();
    let guard = client.lock("tr:lost").lock().unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        rec.spans
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.name == "redlatch.renewal" && s.field("renewed").is_some())
    }));
    assert!(operator.lock("tr:lost").force_unlock().unwrap());
    assert!(wait_until(Duration::from_secs(10), || guard.is_lost()));
    // The guard may hear of the loss a moment before the event is written: wait for it.
    let named = |e: &std::collections::HashMap<String, String>| {
        e.get("name").map(String::as_str) == Some("tr:lost")
    };
    assert!(wait_until(Duration::from_secs(5), || rec
        .events
        .lock()
        .unwrap()
        .iter()
        .any(named)));
    let events = rec.events.lock().unwrap().clone();
    let lost = events
        .iter()
        .find(|e| e.get("name").map(String::as_str) == Some("tr:lost"))
        .expect("a lost-hold event");
    assert_eq!(lost.get("level").map(String::as_str), Some("WARN"));
    assert_eq!(lost.get("reason").map(String::as_str), Some("NotHeld"));
    assert!(lost["owner"].starts_with(client.id()), "{lost:?}");
}
