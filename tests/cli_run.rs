//! `redlatch run NAME -- CMD` against a real server: runs of one name never overlap,
//! `--permits 2` runs two at once, a force-unlock stops the command (SIGTERM, then SIGKILL
//! after the grace period, or not with `--on-lost ignore`), signals reach the command or end
//! the wait without leaving a queue place, the environment, and every exit status. The
//! commands are `sh` scripts that write what they see to files in a temp dir, which the tests
//! wait for.
#![cfg(unix)]

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::Client;
use support::{key_exists, numsub, wait_until, RedisServer};

/// How long anything a test waits for may take before the test fails.
const BOUND: Duration = Duration::from_secs(20);

/// A temp dir of one test, removed on drop; its path is `$DIR` in the commands.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("redlatch-run-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).unwrap_or_default()
    }

    fn has(&self, name: &str) -> bool {
        self.file(name).exists()
    }

    fn touch(&self, name: &str) {
        std::fs::write(self.file(name), "").unwrap();
    }

    /// Waits until the command wrote `name`.
    fn await_file(&self, name: &str) {
        assert!(
            wait_until(BOUND, || self.has(name)),
            "no {name} within {BOUND:?}"
        );
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `redlatch --url <server> run <args>` with `$DIR` in its environment, and the signals the
/// tests send at their default action: the tests may run ignoring them (started in the
/// background by a shell without job control, or under `nohup`), redlatch's command would
/// inherit that, and a shell that starts ignoring a signal cannot trap it.
fn run_command(server: &RedisServer, dir: &Dir, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlatch"));
    cmd.args(["--url", &server.url(), "run"])
        .args(args)
        .env_remove("REDIS_URL")
        .env("DIR", &dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec, only `signal`, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
}

/// `run <args> -- sh -c <script>`.
fn sh(server: &RedisServer, dir: &Dir, args: &[&str], script: &str) -> Command {
    let mut cmd = run_command(server, dir, args);
    cmd.args(["--", "sh", "-c", script]);
    cmd
}

/// How a run ended: its exit code and stderr.
struct Ended {
    code: i32,
    stderr: String,
}

/// Waits for `child` to exit (killed after [`BOUND`]: a hang fails the test).
fn finish(child: Child) -> Ended {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(BOUND) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; the child is not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("redlatch run did not exit within {BOUND:?}");
        }
    };
    Ended {
        code: out.status.code().expect("exited, not killed"),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.spawn().expect("run redlatch")
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions; the child is not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// `(start, end)` ns of each command, from the lines `start end` they appended to `file`.
fn intervals(dir: &Dir, file: &str) -> Vec<(u128, u128)> {
    let mut all: Vec<(u128, u128)> = dir
        .read(file)
        .lines()
        .map(|l| {
            let (s, e) = l.split_once(' ').unwrap();
            (s.parse().unwrap(), e.parse().unwrap())
        })
        .collect();
    all.sort();
    all
}

/// The most intervals that overlap at one time.
fn max_overlap(intervals: &[(u128, u128)]) -> usize {
    intervals
        .iter()
        .map(|&(start, _)| {
            intervals
                .iter()
                .filter(|&&(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// A command that appends `start end` (ns) to `$DIR/log`, and waits for `$DIR/go` between.
const LOGGED: &str = "s=$(date +%s%N); touch $DIR/running.$$; \
    while [ ! -e $DIR/go ]; do sleep 0.01; done; echo \"$s $(date +%s%N)\" >> $DIR/log";

fn running(dir: &Dir) -> usize {
    std::fs::read_dir(&dir.0)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("running.")
        })
        .count()
}

#[test]
fn two_runs_of_one_name_never_overlap() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let dir = Dir::new("overlap");
    let held = client.lock("job").lock().unwrap();
    dir.touch("go");
    let runs: Vec<Child> = (0..3)
        .map(|_| spawn(&mut sh(&server, &dir, &["job"], LOGGED)))
        .collect();
    // All three wait for the lock before it comes free.
    let channel = "redisson_lock__channel:{job}";
    assert!(wait_until(BOUND, || numsub(&mut server.conn(), channel) == 3));
    assert_eq!(running(&dir), 0);
    held.unlock().unwrap();
    for run in runs {
        let ended = finish(run);
        assert_eq!(ended.code, 0, "{}", ended.stderr);
    }
    let seen = intervals(&dir, "log");
    assert_eq!(seen.len(), 3);
    for pair in seen.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "overlapping runs: {seen:?}");
    }
    assert!(
        !key_exists(&mut server.conn(), "job"),
        "the lock is released"
    );
}

#[test]
fn permits_2_run_exactly_two_commands_at_once() {
    let server = RedisServer::new();
    let dir = Dir::new("permits");
    let runs: Vec<Child> = (0..4)
        .map(|_| spawn(&mut sh(&server, &dir, &["--permits", "2", "slots"], LOGGED)))
        .collect();
    // Two run (and wait for go), two wait for a permit.
    assert!(wait_until(BOUND, || running(&dir) == 2
        && numsub(&mut server.conn(), "redisson_sc:{slots}") == 2));
    assert_eq!(running(&dir), 2);
    dir.touch("go");
    for run in runs {
        let ended = finish(run);
        assert_eq!(ended.code, 0, "{}", ended.stderr);
    }
    let seen = intervals(&dir, "log");
    assert_eq!(seen.len(), 4);
    assert_eq!(max_overlap(&seen), 2, "{seen:?}");
    let mut conn = server.conn();
    let count: i64 = redis::cmd("GET").arg("slots").query(&mut conn).unwrap();
    let taken: i64 = redis::cmd("ZCARD")
        .arg("{slots}:timeout")
        .query(&mut conn)
        .unwrap();
    assert_eq!((count, taken), (2, 0), "every permit is back");

    // The semaphore keeps its number: another is refused, and nothing runs.
    let ended = finish(spawn(&mut sh(
        &server,
        &dir,
        &["--permits", "3", "slots"],
        "touch $DIR/ran",
    )));
    assert_eq!(ended.code, 125);
    assert!(
        ended.stderr.contains("has 2 permits, not 3"),
        "{}",
        ended.stderr
    );
    assert!(!dir.has("ran"));
}

/// A command that says it runs, writes `TERM` to `$DIR/term` on SIGTERM and exits 0.
const TERMINABLE: &str = "trap 'echo TERM > $DIR/term; exit 0' TERM; echo $$ > $DIR/pid; \
    touch $DIR/ready; while :; do sleep 0.05; done";

fn force_unlock(server: &RedisServer, name: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_redlatch"))
        .args(["--url", &server.url(), "force-unlock", "--yes", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("broke lock"));
}

#[test]
fn force_unlock_stops_the_command_within_a_renewal() {
    let server = RedisServer::new();
    let dir = Dir::new("lost");
    // Renewed every second.
    let run = spawn(&mut sh(
        &server,
        &dir,
        &["--watchdog-timeout", "3s", "job"],
        TERMINABLE,
    ));
    dir.await_file("ready");
    force_unlock(&server, "job");
    let broke = Instant::now();
    dir.await_file("term");
    let stopped = broke.elapsed();
    let ended = finish(run);
    assert_eq!(ended.code, 122, "{}", ended.stderr);
    assert!(
        stopped < Duration::from_millis(1000 + 1500),
        "stopped {stopped:?} after the force-unlock (renewal every 1 s)"
    );
    assert_eq!(dir.read("term").trim(), "TERM");
    assert!(
        ended.stderr.contains("lost lock job") && ended.stderr.contains("force-unlocked"),
        "{}",
        ended.stderr
    );
    assert!(!key_exists(&mut server.conn(), "job"));
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let server = RedisServer::new();
    let dir = Dir::new("grace");
    let script = "trap '' TERM; echo $$ > $DIR/pid; touch $DIR/ready; \
        while :; do sleep 0.05; done";
    let args = ["--watchdog-timeout", "3s", "--grace", "300ms", "job"];
    let run = spawn(&mut sh(&server, &dir, &args, script));
    dir.await_file("ready");
    force_unlock(&server, "job");
    let ended = finish(run);
    assert_eq!(ended.code, 122, "{}", ended.stderr);
    assert!(
        ended.stderr.contains("SIGKILL") && ended.stderr.contains("killed by SIGKILL"),
        "{}",
        ended.stderr
    );
    let pid: i32 = dir.read("pid").trim().parse().unwrap();
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "the command is gone");
}

#[test]
fn on_lost_ignore_lets_the_command_finish_and_says_so() {
    let server = RedisServer::new();
    let dir = Dir::new("ignore");
    let script = "touch $DIR/ready; while [ ! -e $DIR/go ]; do sleep 0.01; done; exit 4";
    let args = ["--watchdog-timeout", "3s", "--on-lost=ignore", "job"];
    let mut run = spawn(&mut sh(&server, &dir, &args, script));
    let stderr = run.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    dir.await_file("ready");
    force_unlock(&server, "job");
    let said = rx.recv_timeout(BOUND).expect("nothing said on stderr");
    assert!(
        said.contains("lost lock job") && said.contains("runs on without it"),
        "{said}"
    );
    assert!(!dir.has("go"));
    dir.touch("go");
    let ended = finish(run);
    assert_eq!(ended.code, 4, "the command's status");
}

#[test]
fn the_command_status_passes_through_and_the_lock_is_released() {
    let server = RedisServer::new();
    let dir = Dir::new("status");
    for (script, code) in [
        ("exit 0", 0),
        ("exit 7", 7),
        ("kill -TERM $$", 128 + libc::SIGTERM),
        ("kill -KILL $$", 128 + libc::SIGKILL),
    ] {
        let ended = finish(spawn(&mut sh(&server, &dir, &["--fair", "job"], script)));
        assert_eq!(ended.code, code, "{script}: {}", ended.stderr);
        assert!(
            !key_exists(&mut server.conn(), "job"),
            "{script}: the lock is released"
        );
    }
    let missing = finish(spawn(&mut {
        let mut cmd = run_command(&server, &dir, &["job", "--", "/no/such/command"]);
        cmd.arg("x");
        cmd
    }));
    assert_eq!(missing.code, 127, "{}", missing.stderr);
    assert!(missing.stderr.contains("cannot run `/no/such/command`"));
    let not_executable = dir.file("plain.txt");
    std::fs::write(&not_executable, "not a program").unwrap();
    let path = not_executable.to_str().unwrap();
    let denied = finish(spawn(&mut run_command(&server, &dir, &["job", "--", path])));
    assert_eq!(denied.code, 126, "{}", denied.stderr);
    assert!(
        !key_exists(&mut server.conn(), "job"),
        "released after a command that did not run"
    );
}

#[test]
fn wait_gives_up_with_124_and_runs_nothing() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let dir = Dir::new("wait");
    let _held = client.lock("job").lock().unwrap();
    for wait in ["300ms", "0"] {
        let started = Instant::now();
        let args = ["--wait", wait, "job"];
        let ended = finish(spawn(&mut sh(&server, &dir, &args, "touch $DIR/ran")));
        assert_eq!(ended.code, 124, "--wait {wait}: {}", ended.stderr);
        assert!(ended.stderr.contains("not had within"), "{}", ended.stderr);
        assert!(started.elapsed() >= Duration::from_millis(if wait == "0" { 0 } else { 300 }));
        assert!(!dir.has("ran"));
    }
    assert!(client.lock("job").is_held_by_current_thread().unwrap());
}

#[test]
fn a_signal_ends_the_wait_and_leaves_no_queue_place() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let dir = Dir::new("interrupt");
    let _held = client.fair_lock("job").lock().unwrap();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let run = spawn(&mut sh(&server, &dir, &["--fair", "job"], "touch $DIR/ran"));
        assert!(wait_until(BOUND, || client
            .inspect("job")
            .unwrap()
            .is_some_and(|i| i.queue.len() == 1)));
        signal(&run, sig);
        let ended = finish(run);
        assert_eq!(ended.code, 128 + sig, "{}", ended.stderr);
        assert!(ended.stderr.contains("stopped waiting"), "{}", ended.stderr);
        assert!(!dir.has("ran"));
        assert!(
            !key_exists(&mut server.conn(), "redisson_lock_queue:{job}"),
            "no queue left"
        );
        assert!(
            !key_exists(&mut server.conn(), "redisson_lock_timeout:{job}"),
            "no queue left"
        );
    }
    assert!(client.fair_lock("job").is_held_by_current_thread().unwrap());
}

#[test]
fn signals_are_passed_to_the_command_and_the_lock_released_after_it() {
    let server = RedisServer::new();
    let dir = Dir::new("signals");
    for (sig, name) in [
        (libc::SIGINT, "INT"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGHUP, "HUP"),
    ] {
        let _ = std::fs::remove_file(dir.file("ready"));
        let script = format!(
            "trap 'echo {name} > $DIR/got; exit 3' {name}; touch $DIR/ready; \
             while :; do sleep 0.05; done"
        );
        let run = spawn(&mut sh(&server, &dir, &["job"], &script));
        dir.await_file("ready");
        assert!(key_exists(&mut server.conn(), "job"));
        signal(&run, sig);
        let ended = finish(run);
        assert_eq!(ended.code, 3, "{name}: {}", ended.stderr);
        assert_eq!(dir.read("got").trim(), name);
        assert!(!key_exists(&mut server.conn(), "job"), "{name}: released");
    }
}

#[test]
fn the_environment_names_the_lock_the_owner_and_the_token() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let dir = Dir::new("env");
    let script = "echo \"$REDLATCH_NAME|$REDLATCH_OWNER|$REDLATCH_TOKEN|$REDLATCH_PERMIT\" \
        > $DIR/env.tmp; mv $DIR/env.tmp $DIR/env; while [ ! -e $DIR/go ]; do sleep 0.01; done";
    let first = client.fenced_lock("job").lock().unwrap();
    let next = first.token().unwrap() + 1;
    first.unlock().unwrap();
    let mut cmd = sh(&server, &dir, &["--fenced", "job"], script);
    let run = spawn(cmd.env("REDLATCH_PERMIT", "inherited"));
    dir.await_file("env");
    let env = dir.read("env");
    let seen: Vec<&str> = env.trim().split('|').collect();
    let found = client.inspect("job").unwrap().unwrap();
    let holder = &found.holders[0].owner;
    assert_eq!(seen[0], "job");
    assert_eq!(seen[1], format!("{}:{}", holder.client_id, holder.thread));
    assert_eq!(seen[2], next.to_string());
    assert_eq!(
        client.fenced_lock("job").latest_token().unwrap(),
        Some(next)
    );
    assert_eq!(seen[3], "", "not inherited");
    dir.touch("go");
    assert_eq!(finish(run).code, 0);

    // A plain lock has no token, even one inherited from an outer run.
    let _ = std::fs::remove_file(dir.file("env"));
    let mut cmd = sh(&server, &dir, &["plain"], script);
    let ended = finish(spawn(cmd.env("REDLATCH_TOKEN", "99")));
    assert_eq!(ended.code, 0, "{}", ended.stderr);
    let env = dir.read("env");
    let seen: Vec<&str> = env.trim().split('|').collect();
    assert_eq!((seen[0], seen[2], seen[3]), ("plain", "", ""));

    // A permit: its id, as the semaphore has it.
    let _ = std::fs::remove_file(dir.file("env"));
    std::fs::remove_file(dir.file("go")).unwrap();
    let run = spawn(&mut sh(&server, &dir, &["--permits", "1", "slots"], script));
    dir.await_file("env");
    let env = dir.read("env");
    let seen: Vec<&str> = env.trim().split('|').collect();
    let found = client.inspect("slots").unwrap().unwrap();
    assert_eq!(found.permit_leases.len(), 1);
    assert_eq!((seen[0], seen[1]), ("slots", ""));
    assert_eq!(seen[3], found.permit_leases[0].id);
    dir.touch("go");
    assert_eq!(finish(run).code, 0);
}

#[test]
fn usage_errors_and_redis_failures_exit_125() {
    let server = RedisServer::new();
    let dir = Dir::new("usage");
    for args in [
        &["job"][..],
        &["--permits", "0", "job", "--", "true"],
        &["--fair", "--fenced", "job", "--", "true"],
        &["--wait", "soon", "job", "--", "true"],
    ] {
        let ended = finish(spawn(&mut run_command(&server, &dir, args)));
        assert_eq!(ended.code, 125, "{args:?}");
        assert!(
            ended.stderr.contains("redlatch help run"),
            "{}",
            ended.stderr
        );
    }
    // Unreachable, and a name that is no lock.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlatch"));
    cmd.args(["--url", "redis://127.0.0.1:1/", "run", "job", "--", "true"])
        .stderr(Stdio::piped());
    let ended = finish(spawn(&mut cmd));
    assert_eq!(ended.code, 125);
    assert!(ended.stderr.contains("cannot reach"), "{}", ended.stderr);
    redis::cmd("SET")
        .arg("text")
        .arg("x")
        .query::<()>(&mut server.conn())
        .unwrap();
    let ended = finish(spawn(&mut sh(&server, &dir, &["text"], "touch $DIR/ran")));
    assert_eq!(ended.code, 125, "{}", ended.stderr);
    assert!(!dir.has("ran"));
}

#[test]
fn a_run_killed_with_sigkill_leaves_a_lock_that_expires_with_its_lease() {
    let server = RedisServer::new();
    let dir = Dir::new("sigkill");
    let mut run = spawn(&mut sh(
        &server,
        &dir,
        &["--watchdog-timeout", "2s", "job"],
        TERMINABLE,
    ));
    dir.await_file("ready");
    run.kill().unwrap();
    run.wait().unwrap();
    let killed = Instant::now();
    let ttl: i64 = redis::cmd("PTTL")
        .arg("job")
        .query(&mut server.conn())
        .unwrap();
    assert!(0 < ttl && ttl <= 2000, "{ttl} ms left");
    assert!(wait_until(BOUND, || !key_exists(&mut server.conn(), "job")));
    assert!(killed.elapsed() < Duration::from_millis(2000 + 1000));
    if cfg!(target_os = "linux") {
        // Its death signal killed the command too.
        let pid = dir.read("pid");
        let gone = || {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
            stat.map_or(true, |s| s.contains(") Z "))
        };
        assert!(wait_until(BOUND, gone), "the command outlived redlatch");
        assert!(!dir.has("term"), "killed, not terminated");
    }
}

/// `redlatch --url <server> lock <args>`, stdout and stderr piped.
fn lock_command(server: &RedisServer, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlatch"));
    cmd.args(["--url", &server.url(), "lock"])
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The first line of `child`'s stdout, within [`BOUND`].
fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(BOUND).expect("a first line within BOUND")
}

#[test]
fn run_says_who_holds_the_lock_while_it_waits_unless_quiet() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let dir = Dir::new("busy");
    let channel = "redisson_lock__channel:{job}";
    for quiet in [false, true] {
        let held = client.lock("job").lock().unwrap();
        let args: &[&str] = if quiet { &["-q", "job"] } else { &["job"] };
        let run = spawn(&mut sh(&server, &dir, args, "true"));
        // Subscribed: it said what it waits for, if it does, before it subscribed.
        assert!(wait_until(BOUND, || numsub(&mut server.conn(), channel) == 1));
        held.unlock().unwrap();
        let ended = finish(run);
        assert_eq!(ended.code, 0, "{}", ended.stderr);
        let said = format!(
            "waiting for lock job, held by {} (1 hold)",
            client.owner_id()
        );
        if quiet {
            assert!(!ended.stderr.contains("waiting"), "{}", ended.stderr);
        } else {
            assert!(ended.stderr.contains(&said), "{}", ended.stderr);
            assert_eq!(
                ended.stderr.matches("waiting for").count(),
                1,
                "{}",
                ended.stderr
            );
        }
    }
    // Had at once: nothing said.
    let ended = finish(spawn(&mut sh(&server, &dir, &["job"], "true")));
    assert_eq!((ended.code, ended.stderr.as_str()), (0, ""));
}

#[test]
fn decimal_and_humantime_waits_are_taken() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let dir = Dir::new("durations");
    let _held = client.lock("job").lock().unwrap();
    for (wait, at_least) in [("0.3s", 300), ("250ms", 250)] {
        let started = Instant::now();
        let ended = finish(spawn(&mut sh(
            &server,
            &dir,
            &["--wait", wait, "job"],
            "true",
        )));
        assert_eq!(ended.code, 124, "--wait {wait}: {}", ended.stderr);
        assert!(started.elapsed() >= Duration::from_millis(at_least));
    }
    let ended = finish(spawn(&mut sh(
        &server,
        &dir,
        &["--wait", "1.5x", "job"],
        "true",
    )));
    assert_eq!(ended.code, 125);
    assert!(ended.stderr.contains("1m30s"), "{}", ended.stderr);
}

#[test]
fn lock_holds_until_sigterm_or_sigint_then_releases_and_exits_0() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut holder = spawn(&mut lock_command(&server, &["--fenced", "job"]));
        let said = first_line(&mut holder);
        let found = client.inspect("job").unwrap().expect("held");
        let owner = found.holders[0].owner.to_string();
        assert!(
            said.starts_with(&format!("holding lock job as {owner}, fencing token ")),
            "{said}"
        );
        signal(&holder, sig);
        let ended = finish(holder);
        assert_eq!(ended.code, 0, "{}", ended.stderr);
        assert!(!key_exists(&mut server.conn(), "job"), "released");
    }
    // Taken: --wait gives up with 124 and says by whom it is held.
    let _held = client.lock("other").lock().unwrap();
    let ended = finish(spawn(&mut lock_command(
        &server,
        &["--wait", "0.2s", "other"],
    )));
    assert_eq!(ended.code, 124, "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains(&format!("held by {}", client.owner_id())),
        "{}",
        ended.stderr
    );
    // A force-unlock: lost, 122.
    let mut holder = spawn(&mut lock_command(
        &server,
        &["--watchdog-timeout", "1s", "job"],
    ));
    first_line(&mut holder);
    assert!(client.lock("job").force_unlock().unwrap());
    let ended = finish(holder);
    assert_eq!(ended.code, 122, "{}", ended.stderr);
    assert!(ended.stderr.contains("lost lock job"), "{}", ended.stderr);
    // A --lease that ends as asked: the lock expires, 123, and no loss is reported.
    let mut holder = spawn(&mut lock_command(&server, &["--lease", "0.3s", "leased"]));
    first_line(&mut holder);
    let ended = finish(holder);
    assert_eq!(ended.code, 123, "{}", ended.stderr);
    assert!(!ended.stderr.contains("lost"), "{}", ended.stderr);
    assert!(!key_exists(&mut server.conn(), "leased"), "expired");
}

#[test]
fn lock_in_a_terminal_releases_on_ctrl_c() {
    let server = RedisServer::new();
    let url = server.url();
    let bin = env!("CARGO_BIN_EXE_redlatch");
    let Some(mut pty) = support::pty::Pty::spawn(bin, &["--url", &url, "lock", "job"], &[]) else {
        return;
    };
    pty.await_shown("Ctrl-C to release", BOUND);
    assert!(key_exists(&mut server.conn(), "job"));
    pty.type_in("\x03");
    pty.await_shown("released lock job (SIGINT)", BOUND);
    assert_eq!(pty.finish(BOUND), 0);
    assert!(!key_exists(&mut server.conn(), "job"));
}

/// `inspect` tells the semaphore `run --permits` makes from a latch while permits are out (its
/// `{NAME}:timeout` key), and a plain semaphore with none free (no latch is at zero); one with
/// every permit back is an integer alone, as a latch's count is: `semaphore-or-latch`.
#[test]
fn run_permits_shows_as_a_semaphore_in_inspect() {
    let server = RedisServer::new();
    let dir = Dir::new("permits-kind");
    let inspect = |name: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_redlatch"))
            .args(["--url", &server.url(), "inspect", name])
            .env_remove("REDIS_URL")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let run = spawn(&mut sh(
        &server,
        &dir,
        &["--permits", "2", "kind:slots"],
        "touch $DIR/in; while [ ! -e $DIR/go ]; do sleep 0.05; done",
    ));
    dir.await_file("in");
    let text = inspect("kind:slots");
    assert!(text.contains("kind:    expirable-semaphore\n"), "{text}");
    assert!(
        text.contains("permits: 1\n") && text.contains("leased permits:"),
        "{text}"
    );
    dir.touch("go");
    assert_eq!(finish(run).code, 0);
    let text = inspect("kind:slots");
    assert!(
        text.contains("kind:    semaphore-or-latch\n") && text.contains("permits: 2\n"),
        "{text}"
    );

    let client = Client::open(server.url()).unwrap();
    let sem = client.semaphore("kind:sem");
    sem.try_set_permits(1).unwrap();
    sem.try_acquire(1).unwrap().unwrap().forget();
    let text = inspect("kind:sem");
    assert!(text.contains("kind:    semaphore\n"), "{text}");
}

#[test]
fn lock_on_a_fair_lock_waits_in_its_queue_behind_a_thread_queued_first() {
    let server = RedisServer::new();
    let client = Client::open(server.url()).unwrap();
    let held = client.fair_lock("fq").lock().unwrap();
    let (_, waiters) = support::queue_fair_waiters(&client, "fq", 1);
    // Without --fair: it queues behind the thread, as a fair waiter.
    let mut cli = spawn(&mut lock_command(&server, &["fq"]));
    assert!(wait_until(BOUND, || {
        client
            .inspect("fq")
            .unwrap()
            .is_some_and(|i| i.queue.len() == 2)
    }));
    drop(held);
    let line = first_line(&mut cli);
    assert!(line.starts_with("holding lock fq"), "{line}");
    // The thread queued first had the lock first: it is done, though the CLI holds on.
    assert!(wait_until(BOUND, || waiters
        .iter()
        .all(|w| w.is_finished())));
    signal(&cli, libc::SIGTERM);
    let ended = finish(cli);
    assert_eq!(ended.code, 0, "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("fq is a fair lock: waiting in its queue"),
        "{}",
        ended.stderr
    );
}
