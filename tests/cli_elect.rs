//! `redlatch elect NAME -- CMD` and `redlatch leader NAME [--watch]` against a real server: a
//! command runs only while its process leads, with the term and value in its environment,
//! its status passed through and leadership handed on when it ends; `--again` campaigns
//! again; a lost leadership stops the command; `leader` prints who leads and `--watch`
//! follows every new leader.
#![cfg(unix)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redlatch::Client;
use support::{numsub, wait_until, RedisServer};

const BOUND: Duration = Duration::from_secs(20);

fn redlatch(server: &RedisServer, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlatch"));
    cmd.args(["--url", &server.url()])
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null());
    cmd
}

fn temp_dir(test: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("redlatch-elect-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).unwrap();
    path
}

/// Waits for `child` (killed after [`BOUND`]): its exit code, stdout and stderr.
fn finish(child: Child) -> (i32, String, String) {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(BOUND) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the child is not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("redlatch did not exit within {BOUND:?}");
        }
    };
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn elect_runs_the_command_while_leading_then_hands_over() {
    let server = RedisServer::new();
    let dir = temp_dir("runs");
    let client = Client::open(server.url()).unwrap();
    let first = client.election("e").campaign("rust").unwrap();
    let run = redlatch(&server, &["elect", "e", "--value", "cli", "--", "sh", "-c"])
        .arg("echo \"$REDLATCH_TOKEN $REDLATCH_VALUE\" > $DIR/env; exit 3")
        .env("DIR", &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It campaigns (waits on the election's lock) until the Rust leader resigns.
    assert!(wait_until(BOUND, || numsub(
        &mut server.conn(),
        "redisson_lock__channel:{e}"
    ) == 1));
    assert!(!dir.join("env").exists());
    let first_term = first.term();
    first.resign().unwrap();
    let (code, _, stderr) = finish(run);
    assert_eq!(code, 3, "CMD's status passes through: {stderr}");
    let env = std::fs::read_to_string(dir.join("env")).unwrap();
    let (term, value) = env.trim().split_once(' ').unwrap();
    assert!(term.parse::<u64>().unwrap() > first_term);
    assert_eq!(value, "cli");
    // Resigned when CMD ended.
    assert_eq!(client.election("e").leader().unwrap(), None);
    let (code, stdout, _) = finish(
        redlatch(&server, &["leader", "e"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!((code, stdout.trim()), (1, "e: nobody leads"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn elect_again_campaigns_again_until_a_signal() {
    let server = RedisServer::new();
    let dir = temp_dir("again");
    let run = redlatch(
        &server,
        &["elect", "--again", "-q", "again", "--", "sh", "-c"],
    )
    .arg("echo $REDLATCH_TOKEN >> $DIR/terms")
    .env("DIR", &dir)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let terms = || -> Vec<u64> {
        std::fs::read_to_string(dir.join("terms"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    assert!(wait_until(BOUND, || terms().len() >= 3));
    // SAFETY: kill has no memory-safety preconditions; the child is not yet waited for.
    assert_eq!(unsafe { libc::kill(run.id() as i32, libc::SIGTERM) }, 0);
    let (code, _, stderr) = finish(run);
    assert!(code == 143 || code == 0, "{code}: {stderr}");
    let seen = terms();
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "a new term each time: {seen:?}"
    );
    let client = Client::open(server.url()).unwrap();
    assert!(wait_until(BOUND, || client
        .election("again")
        .leader()
        .unwrap()
        .is_none()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lost_leadership_stops_the_command_with_122() {
    let server = RedisServer::new();
    let dir = temp_dir("lost");
    let run = redlatch(
        &server,
        &[
            "elect",
            "--watchdog-timeout",
            "900ms",
            "--grace",
            "1s",
            "lost",
            "--",
            "sh",
            "-c",
        ],
    )
    .arg("touch $DIR/running; while :; do sleep 0.05; done")
    .env("DIR", &dir)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(wait_until(BOUND, || dir.join("running").exists()));
    let client = Client::open(server.url()).unwrap();
    assert!(client.election("lost").lock().force_unlock().unwrap());
    let (code, _, stderr) = finish(run);
    assert_eq!(code, 122, "{stderr}");
    assert!(
        stderr.contains("lost leadership of election lost"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn leader_prints_who_leads_and_watch_follows_every_new_leader() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let mut watch = redlatch(&server, &["leader", "--watch", "w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    assert_eq!(lines.recv_timeout(BOUND).unwrap(), "w: nobody leads");
    assert!(wait_until(BOUND, || numsub(
        &mut server.conn(),
        "redlatch_election__channel:{w}"
    ) == 1));
    let mut terms = Vec::new();
    for value in ["a", "b"] {
        let leadership = client.election("w").campaign(value).unwrap();
        terms.push(leadership.term());
        let line = lines.recv_timeout(BOUND).unwrap();
        assert!(
            line.starts_with(&format!(
                "w: term {}, value {value}, owner ",
                leadership.term()
            )),
            "{line}"
        );
        // `leader` (no --watch), as JSON.
        let (code, stdout, _) = finish(
            redlatch(&server, &["--json", "leader", "w"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        assert_eq!(code, 0);
        assert!(
            stdout.contains(&format!("\"term\":{}", leadership.term())),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("\"value\":\"{value}\"")),
            "{stdout}"
        );
        leadership.resign().unwrap();
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(terms[0] < terms[1]);
}

/// `leader --watch` rides out a Redis restart as `watch` does: it says so on stderr, tries
/// again with a back-off, and prints the leader elected once the server is back, still
/// running.
#[test]
fn leader_watch_rides_out_a_redis_restart() {
    let mut server = RedisServer::new();
    let mut watch = redlatch(&server, &["leader", "--watch", "r"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (tx, errors) = mpsc::channel();
    let stderr = watch.stderr.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    assert_eq!(lines.recv_timeout(BOUND).unwrap(), "r: nobody leads");
    assert!(wait_until(BOUND, || numsub(
        &mut server.conn(),
        "redlatch_election__channel:{r}"
    ) == 1));
    let before = Client::open(server.url()).unwrap();
    let leadership = before.election("r").campaign("before").unwrap();
    let line = lines.recv_timeout(BOUND).unwrap();
    assert!(line.contains(", value before, "), "{line}");
    leadership.resign().unwrap();
    drop(before);

    // Killed and started again on the port (without its data): the watcher says so.
    server.restart();
    let said = errors.recv_timeout(BOUND).unwrap();
    assert!(
        said.contains("cannot reach redis at") && said.contains("retrying in"),
        "{said}"
    );
    let after = Client::open(server.url()).unwrap();
    let leadership = after.election("r").campaign("after").unwrap();
    let line = lines.recv_timeout(BOUND).unwrap();
    assert!(
        line.starts_with(&format!("r: term {}, value after, ", leadership.term())),
        "{line}"
    );
    assert!(watch.try_wait().unwrap().is_none(), "it runs on");
    let _ = watch.kill();
    let _ = watch.wait();
}
