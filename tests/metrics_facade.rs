//! The `metrics` feature: what a client reports through the `metrics` facade, captured by
//! `metrics-util`'s debugging recorder (installed once for this test binary: one test).

mod support;

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redlatch::{Client, Config};
use support::{await_waiting, wait_until, RedisServer};

/// What was reported so far, by kind, name and labels (sorted). The debugging recorder
/// hands out what changed since its last snapshot (counters and gauges swapped to 0,
/// histograms drained): each read adds it to the totals.
#[derive(Default)]
struct Totals {
    counters: HashMap<(String, Labels), u64>,
    gauges: HashMap<(String, Labels), f64>,
    histograms: HashMap<(String, Labels), Vec<f64>>,
}

type Labels = Vec<(String, String)>;

fn read(s: &Snapshotter, totals: &mut Totals) {
    for (key, _, _, value) in s.snapshot().into_vec() {
        let mut labels: Labels = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        let id = (key.key().name().to_owned(), labels);
        match value {
            DebugValue::Counter(n) => *totals.counters.entry(id).or_default() += n,
            DebugValue::Gauge(v) => *totals.gauges.entry(id).or_default() += v.into_inner(),
            DebugValue::Histogram(v) => totals
                .histograms
                .entry(id)
                .or_default()
                .extend(v.iter().map(|x| x.into_inner())),
        }
    }
}

fn id(name: &str, with: &[(&str, &str)]) -> (String, Labels) {
    let labels = with
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (name.to_owned(), labels)
}

impl Totals {
    fn counter(&self, name: &str, with: &[(&str, &str)]) -> u64 {
        self.counters.get(&id(name, with)).copied().unwrap_or(0)
    }
    fn gauge(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.gauges.get(&id(name, with)).copied().unwrap_or(0.0)
    }
    fn histogram(&self, name: &str, with: &[(&str, &str)]) -> Vec<f64> {
        self.histograms
            .get(&id(name, with))
            .cloned()
            .unwrap_or_default()
    }
    fn label_values(&self) -> Vec<(String, String)> {
        let keys = self.counters.keys().chain(self.gauges.keys());
        keys.chain(self.histograms.keys())
            .flat_map(|(_, l)| l.iter().cloned())
            .collect()
    }
}

#[test]
fn counters_histograms_and_gauges_by_kind_and_by_name_only_when_asked() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let mut all = Totals::default();

    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    // Holds: the gauge goes up while held, down when released; the histograms record.
    let plain = client.lock("fac:orders");
    let fair = client.fair_lock("fac:payments");
    let p = plain.lock().unwrap();
    let f = fair.lock().unwrap();
    read(&snapshotter, &mut all);
    let plain_kind = [("kind", "plain")];
    let fair_kind = [("kind", "fair")];
    assert_eq!(all.gauge("redlatch_locks_held", &plain_kind), 1.0);
    assert_eq!(all.gauge("redlatch_locks_held", &fair_kind), 1.0);
    assert!(
        all.label_values().iter().all(|(k, _)| k != "name"),
        "no name label unless asked"
    );

    // A thread waiting for the held plain lock: the waiting gauge.
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || {
            client
                .lock("fac:orders")
                .try_lock_for(Duration::from_secs(30))
                .map(|g| g.is_some())
        })
    };
    await_waiting(&client, 1);
    read(&snapshotter, &mut all);
    assert_eq!(all.gauge("redlatch_threads_waiting", &[]), 1.0);
    drop(p);
    assert!(waiter.join().unwrap().unwrap(), "the waiter got it");
    assert!(wait_until(Duration::from_secs(5), || {
        read(&snapshotter, &mut all);
        all.gauge("redlatch_threads_waiting", &[]) == 0.0
    }));
    drop(f);
    drop(plain.lock().unwrap());

    read(&snapshotter, &mut all);
    // Acquired: the first hold, the waiter's, and the last one.
    assert_eq!(all.counter("redlatch_acquisitions_total", &plain_kind), 3);
    assert_eq!(
        all.counter("redlatch_contended_acquisitions_total", &plain_kind),
        1
    );
    assert_eq!(all.counter("redlatch_acquisitions_total", &fair_kind), 1);
    assert_eq!(all.histogram("redlatch_wait_seconds", &plain_kind).len(), 3);
    let holds = all.histogram("redlatch_hold_seconds", &plain_kind);
    assert_eq!(holds.len(), 3, "each release records its hold");
    assert!(holds.iter().all(|&s| (0.0..30.0).contains(&s)), "{holds:?}");
    assert_eq!(all.gauge("redlatch_locks_held", &plain_kind), 0.0);
    assert_eq!(all.gauge("redlatch_locks_held", &fair_kind), 0.0);
    // The snapshot API counts the same.
    let m = client.metrics();
    assert_eq!((m.acquisitions, m.contended_acquisitions), (4, 1));

    // A timeout, by kind.
    let held = plain.lock().unwrap();
    let other = Client::open(server.url()).unwrap();
    let got = other
        .lock("fac:orders")
        .try_lock_for(Duration::from_millis(50));
    assert!(got.unwrap().is_none());
    drop(held);
    read(&snapshotter, &mut all);
    assert_eq!(all.counter("redlatch_timeouts_total", &plain_kind), 1);

    // A condition wait lets the lock go and takes it back under the same guard: one hold in
    // the gauge throughout, none after.
    let mut guard = plain.lock().unwrap();
    let timed_out = plain
        .condition("fac:never")
        .wait_for(&mut guard, Duration::from_millis(50))
        .unwrap();
    assert!(timed_out.timed_out());
    read(&snapshotter, &mut all);
    assert_eq!(all.gauge("redlatch_locks_held", &plain_kind), 1.0);
    drop(guard);
    read(&snapshotter, &mut all);
    assert_eq!(all.gauge("redlatch_locks_held", &plain_kind), 0.0);

    // Opted in: the name too.
    let config = Config::builder(server.url().as_str())
        .metrics_lock_names(true)
        .build()
        .unwrap();
    let named = Client::new(config).unwrap();
    drop(named.lock("fac:named").lock().unwrap());
    read(&snapshotter, &mut all);
    let with_name = [("kind", "plain"), ("name", "fac:named")];
    assert_eq!(all.counter("redlatch_acquisitions_total", &with_name), 1);
    assert_eq!(all.histogram("redlatch_hold_seconds", &with_name).len(), 1);
    let names: Vec<_> = all
        .label_values()
        .into_iter()
        .filter(|(k, _)| k == "name")
        .collect();
    assert!(names.iter().all(|(_, v)| v == "fac:named"), "{names:?}");
}
