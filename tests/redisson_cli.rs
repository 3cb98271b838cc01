//! What the `redlatch` CLI shows of Redisson holders and waiters: `inspect`, `list` and
//! `watch` against a real Redisson (tests/java-peer) holding and queueing on a fair lock.
//! Skipped, with a printed reason, where `java` or `mvn` is missing.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use redlatch::Client;
use serde_json::Value;
use support::java::{JavaPeer, NEWEST};
use support::{wait_until, RedisServer};

fn redlatch(server: &RedisServer, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_redlatch"))
        .arg("--url")
        .arg(server.url())
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "redlatch {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn inspect_list_and_watch_show_java_holders_and_waiters() {
    require_java!();
    let server = RedisServer::new();
    let mut java = JavaPeer::single(NEWEST, &server.url());
    let client = Client::open(server.url()).unwrap();
    let name = "interop:cli:fair";
    let queue = format!("redisson_lock_queue:{{{name}}}");
    let mut raw = server.conn();

    // Java holds; Java, Rust and Java wait, in that order.
    let holder = java.owner("h");
    java.call("h", &format!("lock fair {name}")).value();
    let first = java.owner("w1");
    let last = java.owner("w2");
    java.send("w1", &format!("lock fair {name}"));
    assert!(wait_until(Duration::from_secs(20), || raw
        .llen::<_, usize>(&queue)
        .unwrap()
        == 1));
    let lock = client.fair_lock(name);
    let (owner_tx, owner_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let rust = thread::spawn(move || {
        let guard = lock.lock().unwrap();
        owner_tx.send(guard.owner().to_owned()).unwrap();
        release_rx.recv().unwrap();
        guard.unlock().unwrap();
    });
    assert!(wait_until(Duration::from_secs(20), || raw
        .llen::<_, usize>(&queue)
        .unwrap()
        == 2));
    java.send("w2", &format!("lock fair {name}"));
    assert!(wait_until(Duration::from_secs(20), || raw
        .llen::<_, usize>(&queue)
        .unwrap()
        == 3));

    let j: Value = serde_json::from_str(&redlatch(&server, &["inspect", "--json", name])).unwrap();
    assert_eq!(j["kind"], "fair");
    let held_by = &j["holders"][0];
    assert_eq!(
        format!(
            "{}:{}",
            held_by["client_id"].as_str().unwrap(),
            held_by["thread"]
        ),
        holder,
        "{j}"
    );
    // Redisson does not name its connections with its id: not traced, and not called gone.
    assert_eq!(held_by["connections"], Value::Null, "{j}");
    let waiting: Vec<String> = j["queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["owner"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(waiting[0], first);
    assert!(waiting[1].starts_with(client.id()), "{j}");
    assert_eq!(waiting[2], last);
    assert_eq!(j["queue"][0]["connections"], Value::Null);
    assert!(!j["queue"][1]["connections"].as_array().unwrap().is_empty());

    let text = redlatch(&server, &["inspect", name]);
    let row = text
        .lines()
        .find(|l| l.starts_with(&java.id))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("untraced") && !row.contains("gone"), "{text}");
    let listed = redlatch(&server, &["list", "interop:*"]);
    assert!(
        listed.contains(&format!("held by {holder} (1 hold), 3 queued")),
        "{listed}"
    );

    // watch follows the hand-overs between Java and Rust owners.
    let mut watch = Killed(
        Command::new(env!("CARGO_BIN_EXE_redlatch"))
            .args([
                "--url",
                &server.url(),
                "watch",
                "--json",
                "--interval",
                "100ms",
                name,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let stdout = watch.0.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).unwrap());
        }
    });
    let next = |event: &str| -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {event} event"));
            if e["event"] == event {
                return e;
            }
        }
    };
    next("watching");
    java.call("h", &format!("unlock fair {name}")).value();
    assert_eq!(next("released")["owner"], holder.as_str());
    assert_eq!(next("acquired")["owner"], first.as_str());
    java.reply("w1").value();
    java.call("w1", &format!("unlock fair {name}")).value();
    let rust_owner = owner_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(next("acquired")["owner"], rust_owner.as_str());
    release_tx.send(()).unwrap();
    rust.join().unwrap();
    java.reply("w2").value();
    assert_eq!(next("acquired")["owner"], last.as_str());
}

/// A child process killed on drop, so that a failed test leaves no `watch` running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
