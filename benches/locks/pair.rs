//! One holder, one waiter: the hand-over of a lock from a thread that releases it to one
//! already blocked on it, timed from the release's start to the waiter's acquire returning.
//! Three ways, in alternating rounds of the same run:
//!
//! - `floor`: bare connections, Redisson's two scripts. The waiter's one thread blocks
//!   reading its own subscription (a connection of its own), then sends its acquire: one
//!   wake-up, the publish and one round trip. No client does less.
//! - `in_client`: two threads of one redlatch client.
//! - `between_clients`: two redlatch clients (as two processes would), one thread each.
//!
//! The holder holds 1 ms before releasing, so the waiter is blocked by then; the waiter
//! releases at once and tells the holder, which takes the lock for the next hand-over.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::throughput::{RawKeys, RawScripts};
use crate::{percentile_us, raw_connection, Ctx};

/// Hand-overs per round, and rounds of each way.
const PER_ROUND: usize = 60;
const ROUNDS: usize = 4;
/// How long the holder holds before it releases.
const HOLD: Duration = Duration::from_millis(1);

/// The p50 (and p99) hand-over of each way, in µs.
pub(crate) struct Pair {
    pub(crate) floor_p50: f64,
    pub(crate) in_client_p50: f64,
    pub(crate) in_client_p99: f64,
    pub(crate) between_p50: f64,
    pub(crate) between_p99: f64,
}

/// Measures the three ways on `make_lock`'s locks (the floor is always the plain protocol).
pub(crate) fn pair(
    ctx: &Ctx,
    key: &str,
    make_lock: fn(&redlatch::Client, &str) -> redlatch::Lock,
) -> Pair {
    let (mut floor, mut inside, mut between) = (Vec::new(), Vec::new(), Vec::new());
    let one = ctx.client();
    let other = ctx.client();
    for round in 0..ROUNDS {
        // Which way goes first turns with the rounds.
        for way in 0..3 {
            match (way + round) % 3 {
                0 => floor.extend(bare(ctx, &format!("{key}:floor"))),
                1 => {
                    let name = format!("{key}:in_client");
                    inside.extend(redlatch_pair(
                        make_lock(&one, &name),
                        make_lock(&one, &name),
                    ));
                }
                _ => {
                    let name = format!("{key}:between");
                    between.extend(redlatch_pair(
                        make_lock(&one, &name),
                        make_lock(&other, &name),
                    ));
                }
            }
        }
    }
    Pair {
        floor_p50: percentile_us(&mut floor, 50.0),
        in_client_p50: percentile_us(&mut inside, 50.0),
        in_client_p99: percentile_us(&mut inside, 99.0),
        between_p50: percentile_us(&mut between, 50.0),
        between_p99: percentile_us(&mut between, 99.0),
    }
}

/// One round of hand-overs from `holder`'s thread to `waiter`'s.
fn redlatch_pair(holder: redlatch::Lock, waiter: redlatch::Lock) -> Vec<Duration> {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<Instant>();
    let waiting = thread::spawn(move || {
        while go_rx.recv().is_ok() {
            let guard = waiter.lock().expect("waiter lock");
            let granted = Instant::now();
            guard.unlock().expect("waiter unlock");
            done_tx.send(granted).expect("holder gone");
        }
    });
    let mut took = Vec::with_capacity(PER_ROUND);
    for _ in 0..PER_ROUND {
        let guard = holder.lock().expect("holder lock");
        go_tx.send(()).expect("waiter gone");
        thread::sleep(HOLD);
        let released = Instant::now();
        guard.unlock().expect("holder unlock");
        let granted = done_rx.recv().expect("waiter gone");
        took.push(granted.saturating_duration_since(released));
    }
    drop(go_tx);
    waiting.join().expect("waiter panicked");
    took
}

/// One round of hand-overs on bare connections, Redisson's scripts.
fn bare(ctx: &Ctx, key: &str) -> Vec<Duration> {
    let keys = RawKeys::new(key);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<Instant>();
    let url = ctx.url.clone();
    let channel = keys.channel.clone();
    let key_owned = key.to_owned();
    let waiting = thread::spawn(move || {
        let keys = RawKeys::new(&key_owned);
        let mut cmd = raw_connection(&url);
        let scripts = RawScripts::load(&mut cmd);
        let mut sub = raw_connection(&url);
        let mut sub = sub.as_pubsub();
        sub.subscribe(&channel).expect("SUBSCRIBE");
        let mut n = 0u64;
        while go_rx.recv().is_ok() {
            loop {
                let reply: redis::Value = scripts
                    .acquire(&keys.key, "bare:waiter")
                    .query(&mut cmd)
                    .expect("bare acquire");
                let redis::Value::Int(ttl) = reply else { break };
                sub.set_read_timeout(Some(Duration::from_millis(ttl.max(1) as u64)))
                    .expect("read timeout");
                // A message (or the bound): try again.
                let _ = sub.get_message();
            }
            let granted = Instant::now();
            n += 1;
            let _: redis::Value = scripts
                .unlock(&keys.key, &keys.channel, &keys.latch(n), "bare:waiter")
                .query(&mut cmd)
                .expect("bare unlock");
            done_tx.send(granted).expect("holder gone");
        }
    });
    let mut cmd = raw_connection(&ctx.url);
    let scripts = RawScripts::load(&mut cmd);
    let mut took = Vec::with_capacity(PER_ROUND);
    for n in 0..PER_ROUND as u64 {
        loop {
            let reply: redis::Value = scripts
                .acquire(&keys.key, "bare:holder")
                .query(&mut cmd)
                .expect("bare acquire");
            if reply == redis::Value::Nil {
                break;
            }
            thread::sleep(Duration::from_micros(100));
        }
        go_tx.send(()).expect("waiter gone");
        thread::sleep(HOLD);
        let released = Instant::now();
        let _: redis::Value = scripts
            .unlock(
                &keys.key,
                &keys.channel,
                &keys.latch(1_000_000 + n),
                "bare:holder",
            )
            .query(&mut cmd)
            .expect("bare unlock");
        let granted = done_rx.recv().expect("waiter gone");
        took.push(granted.saturating_duration_since(released));
    }
    drop(go_tx);
    waiting.join().expect("bare waiter panicked");
    took
}
