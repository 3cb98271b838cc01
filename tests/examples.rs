//! The examples run and keep their promises: each is run as a process against a server of
//! the harness and must say `OK`. `cargo test` builds the examples before it runs the tests;
//! a run that did not build them (`cargo test --test examples`) skips with a printed reason.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::RedisServer;

/// The example's binary next to this test's (`target/<profile>/examples/NAME`).
fn example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("examples").join(name);
    bin.exists().then_some(bin)
}

fn run_example(name: &str, args: &[&str]) {
    let Some(bin) = example(name) else {
        println!("skipped: the {name} example is not built (run the whole `cargo test`)");
        return;
    };
    let server = RedisServer::new();
    let out = Command::new(bin)
        .args(args)
        .env("REDIS_URL", server.url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.lines().any(|l| l.starts_with("OK:")), "{stdout}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.conn())
        .unwrap();
    assert!(
        keys.iter().all(|k| k.starts_with("redisson_unlock_latch")),
        "left: {keys:?}"
    );
}

#[test]
fn worker_pool_does_every_job_once_within_its_permits() {
    run_example("worker_pool", &["--jobs", "24"]);
}

#[test]
fn ticket_sale_sells_every_ticket_once() {
    run_example("ticket_sale", &["--processes", "2", "--threads", "3"]);
}

#[test]
fn bounded_buffer_delivers_every_item_once_across_processes() {
    run_example(
        "bounded_buffer",
        &["--producers", "2", "--consumers", "3", "--items", "30"],
    );
}
