//! A real Redisson in a JVM as the other side of the interop tests: the Maven project in
//! `tests/java-peer/`, built once per Redisson version and driven over stdin/stdout.
//!
//! The peer's line protocol is documented in its `Peer.java`: each line names an *actor* (a
//! Java thread of its own), so a lock a Java actor takes is held by that actor's thread until
//! the same actor unlocks it. [`JavaPeer::call`] sends a line and waits for its reply;
//! [`JavaPeer::send`] and [`JavaPeer::reply`] split the two for calls that block.
//!
//! Without `java` or `mvn` on the machine, [`require_java!`](crate::require_java) skips the
//! test with a printed reason.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The Redisson version the pom names: the newest Maven Central served when it was written.
pub const NEWEST: &str = "4.7.0";
/// The versions [`versions`] runs by default: the newest, the first with the unlock latch
/// (3.24.0), and 3.17.0, the two most cited by Redisson's users.
pub const ALL: [&str; 3] = [NEWEST, "3.24.0", "3.17.0"];

/// How long a peer has to start, and a reply to come (a JVM on a loaded 2-core machine).
const START_BOUND: Duration = Duration::from_secs(90);
const REPLY_BOUND: Duration = Duration::from_secs(60);

/// Why Java tests cannot run here, or `None` when `java` and `mvn` are both found.
pub fn missing() -> Option<&'static str> {
    static MISSING: OnceLock<Option<&'static str>> = OnceLock::new();
    *MISSING.get_or_init(|| {
        let runs = |cmd: &str| {
            Command::new(cmd)
                .arg("-version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !runs("java") {
            Some("no `java` on the PATH: the Redisson interop tests need a JDK (17 or newer)")
        } else if !runs("mvn") {
            Some(
                "no `mvn` on the PATH: the Redisson interop tests build their Java peer with Maven",
            )
        } else {
            None
        }
    })
}

/// Skips the calling test (returns, passing) unless `java` and `mvn` are there, printing
/// `skipped: why`.
#[macro_export]
macro_rules! require_java {
    () => {
        if let Some(why) = $crate::support::java::missing() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// The Redisson versions a test that sweeps versions runs: `$REDLATCH_REDISSON_VERSIONS`
/// (comma-separated, e.g. `4.7.0` alone), or [`ALL`].
pub fn versions() -> Vec<String> {
    match std::env::var("REDLATCH_REDISSON_VERSIONS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
        _ => ALL.iter().map(|v| v.to_string()).collect(),
    }
}

fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java-peer")
}

/// The JVM's flags for a peer: a quick start and a small footprint.
pub const JVM_FLAGS: [&str; 3] = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"];

/// The class path of the peer built for `version` (for the interop tests; panics where
/// [`build`] fails). Built at most once per version per process.
fn class_path(version: &str) -> String {
    static BUILT: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cp) = built.get(version) {
        return cp.clone();
    }
    let cp = build(version).unwrap_or_else(|e| panic!("{e}"));
    built.insert(version.to_owned(), cp.clone());
    cp
}

/// The class path of the peer (and the torture runner's Java worker) on Redisson `version`,
/// building it first (`mvn -q -B compile` in tests/java-peer, into `target/redisson-V/`)
/// when a Java source or the pom is newer than its last build. Processes that build the
/// same version at once take turns (a lock file beside the build).
pub fn build(version: &str) -> Result<String, String> {
    let project = project_dir();
    let target = project.join("target");
    std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    let lock_path = target.join(format!("redisson-{version}.lock"));
    let lock =
        std::fs::File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // SAFETY: a valid open descriptor; the lock goes with it when `lock` is dropped.
    unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    let out = target.join(format!("redisson-{version}"));
    let stamp = out.join("built");
    let modified = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let sources = std::fs::read_dir(project.join("src/main/java/redlatch/peer"))
        .map_err(|e| format!("the Java peer's sources: {e}"))?
        .filter_map(|e| Some(e.ok()?.path()))
        .chain([project.join("pom.xml")]);
    let newest_source = sources.filter_map(|p| modified(&p)).max();
    let stale = match (modified(&stamp), newest_source) {
        (Some(built_at), Some(source)) => built_at < source,
        _ => true,
    };
    if stale {
        let run = Command::new("mvn")
            .args(["-q", "-B", "-Dstyle.color=never", "compile"])
            .arg(format!("-Dredisson.version={version}"))
            .current_dir(&project)
            .output()
            .map_err(|e| format!("cannot run mvn: {e}"))?;
        if !run.status.success() {
            return Err(format!(
                "building the Java peer on Redisson {version} failed ({}) in {}:\n{}{}",
                run.status,
                project.display(),
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            ));
        }
        // Maven leaves an unchanged classpath.txt as it was: the stamp says when it built.
        std::fs::write(&stamp, version).map_err(|e| format!("{}: {e}", stamp.display()))?;
    }
    let deps = std::fs::read_to_string(out.join("classpath.txt"))
        .map_err(|e| format!("the Java peer's classpath.txt: {e}"))?;
    // `first/` holds a Redisson jar that must shadow the one the dependencies bring (3.24.0:
    // see the pom).
    Ok(format!(
        "{}:{}:{}",
        out.join("classes").display(),
        out.join("first/*").display(),
        deps.trim()
    ))
}

/// One reply of the peer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `Ok(value)` (`-` for none), or `Err(text)`: the Java exception's class and message.
    pub result: Result<String, String>,
    /// `System.nanoTime()` on the Java side before and after the call (CLOCK_MONOTONIC, as
    /// [`monotonic_ns`]); 0 for an error.
    pub t0: u64,
    pub t1: u64,
}

impl Reply {
    /// The value, panicking with the Java error if the call failed.
    pub fn value(&self) -> &str {
        match &self.result {
            Ok(v) => v,
            Err(e) => panic!("the Java call failed: {e}"),
        }
    }

    /// The value parsed as `T`.
    pub fn parse<T: std::str::FromStr>(&self) -> T
    where
        T::Err: std::fmt::Debug,
    {
        self.value()
            .parse()
            .expect("a Java reply of the expected type")
    }

    /// The Java error's text, panicking if the call succeeded.
    pub fn error(&self) -> &str {
        match &self.result {
            Ok(v) => panic!("the Java call succeeded with {v}, an error was expected"),
            Err(e) => e,
        }
    }
}

type Routes = Arc<Mutex<HashMap<String, (Sender<Reply>, Option<Receiver<Reply>>)>>>;

/// A running Java peer: one JVM with one Redisson client per `--single` server (or one
/// cluster or sentinel client). Killed on drop, holds and all, as a crashed service would be.
pub struct JavaPeer {
    child: Child,
    stdin: ChildStdin,
    routes: Routes,
    /// The jar Redisson's classes were loaded from, e.g. `redisson-3.24.0.jar`.
    pub jar: String,
    /// Redisson's id of the client: the part of its lock owners before the thread id.
    pub id: String,
}

impl JavaPeer {
    /// Starts the peer for Redisson `version` with the arguments `Peer.main` takes (e.g.
    /// `["--single", url]`), and waits until it is connected.
    pub fn start(version: &str, args: &[String]) -> JavaPeer {
        let cp = class_path(version);
        let mut child = Command::new("java")
            .args([
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xss512k",
                "-cp",
            ])
            .arg(&cp)
            .arg("redlatch.peer.Peer")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start java");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let routes: Routes = Arc::default();
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader_routes = routes.clone();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("ready ") {
                    let _ = ready_tx.send(rest.to_owned());
                    continue;
                }
                let (actor, reply) = parse_reply(&line);
                let _ = route(&reader_routes, &actor, |(tx, _)| tx.send(reply));
            }
        });
        let ready = ready_rx.recv_timeout(START_BOUND).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the Java peer (Redisson {version}) did not start within {START_BOUND:?}")
        });
        let (jar, id) = ready.split_once(' ').expect("ready JAR ID");
        assert_eq!(
            jar,
            format!("redisson-{version}.jar"),
            "Redisson's classes came from another jar than the version asked for"
        );
        JavaPeer {
            child,
            stdin,
            routes,
            jar: jar.to_owned(),
            id: id.to_owned(),
        }
    }

    /// [`start`](Self::start) on one server.
    pub fn single(version: &str, url: &str) -> JavaPeer {
        Self::start(version, &["--single".to_owned(), url.to_owned()])
    }

    /// Sends `line` to `actor` without waiting for its reply (for a call that blocks).
    pub fn send(&mut self, actor: &str, line: &str) {
        writeln!(self.stdin, "{actor} {line}").expect("write to the Java peer");
        self.stdin.flush().expect("flush to the Java peer");
    }

    /// The next reply of `actor`, panicking after a minute.
    pub fn reply(&mut self, actor: &str) -> Reply {
        self.reply_within(actor, REPLY_BOUND).unwrap_or_else(|| {
            panic!("the Java actor {actor} did not reply within {REPLY_BOUND:?}")
        })
    }

    /// The next reply of `actor`, or `None` if none came within `wait`.
    pub fn reply_within(&mut self, actor: &str, wait: Duration) -> Option<Reply> {
        let rx = route(&self.routes, actor, |(_, rx)| rx.take())
            .expect("one reader per actor at a time");
        let reply = rx.recv_timeout(wait).ok();
        route(&self.routes, actor, |(_, slot)| *slot = Some(rx));
        reply
    }

    /// Sends `line` to `actor` and waits for the reply.
    pub fn call(&mut self, actor: &str, line: &str) -> Reply {
        self.send(actor, line);
        self.reply(actor)
    }

    /// The owner id Redisson writes for `actor`'s thread (`<client id>:<thread id>`).
    pub fn owner(&mut self, actor: &str) -> String {
        let tid = self.call(actor, "tid").value().to_owned();
        format!("{}:{tid}", self.id)
    }

    /// Kills the JVM now (SIGKILL): its holds stay until their leases run out.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for JavaPeer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `f` on the channel pair of `actor`, made on first use. A reader takes the receiver
/// out while it waits (and puts it back), so that waiting does not hold the map's lock.
fn route<T>(
    routes: &Routes,
    actor: &str,
    f: impl FnOnce(&mut (Sender<Reply>, Option<Receiver<Reply>>)) -> T,
) -> T {
    let mut map = routes.lock().unwrap();
    let entry = map.entry(actor.to_owned()).or_insert_with(|| {
        let (tx, rx) = mpsc::channel();
        (tx, Some(rx))
    });
    f(entry)
}

fn parse_reply(line: &str) -> (String, Reply) {
    let mut words = line.splitn(3, ' ');
    let actor = words.next().unwrap_or_default().to_owned();
    let kind = words.next().unwrap_or_default();
    let rest = words.next().unwrap_or_default();
    let reply = if kind == "ok" {
        let mut parts = rest.split(' ');
        let value = parts.next().unwrap_or_default().to_owned();
        let t0 = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        let t1 = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        Reply {
            result: Ok(value),
            t0,
            t1,
        }
    } else {
        Reply {
            result: Err(rest.to_owned()),
            t0: 0,
            t1: 0,
        }
    };
    (actor, reply)
}

/// Subscribers of the channels that match `pattern` (`PUBSUB CHANNELS`, then `NUMSUB`).
pub fn subscribers_matching(raw: &mut redis::Connection, pattern: &str) -> i64 {
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(pattern)
        .query(raw)
        .expect("PUBSUB CHANNELS");
    channels.iter().map(|c| super::numsub(raw, c)).sum()
}

/// Starts a Java call that blocks (`send`, e.g. a `lock` on a held lock) once nobody is
/// subscribed to the channels that match `pattern`, and returns once one subscriber is:
/// Redisson subscribes before it blocks, so a release from then on reaches it by pub/sub.
/// (Waiting for none first keeps an earlier waiter's lingering subscription from passing for
/// this one.)
pub fn java_waits(server: &super::RedisServer, pattern: &str, send: impl FnOnce()) {
    let mut raw = server.conn();
    let bound = Duration::from_secs(20);
    assert!(
        super::wait_until(bound, || subscribers_matching(&mut raw, pattern) == 0),
        "an earlier subscription to {pattern} stayed"
    );
    send();
    assert!(
        super::wait_until(bound, || subscribers_matching(&mut raw, pattern) == 1),
        "the Java waiter did not subscribe to {pattern}"
    );
}

/// A Rust thread that takes a lock, blocking as long as it must, notes when it got it, and
/// releases it at once: the other side of a Java holder.
pub struct RustWaiter {
    woke: Receiver<u64>,
    thread: std::thread::JoinHandle<()>,
}

impl RustWaiter {
    /// Starts the thread: it calls `lock.lock()`.
    pub fn spawn(lock: redlatch::Lock) -> RustWaiter {
        let (tx, woke) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let guard = lock.lock().expect("the Rust waiter's lock()");
            let _ = tx.send(monotonic_ns());
            guard.unlock().expect("the Rust waiter's unlock");
        });
        RustWaiter { woke, thread }
    }

    /// When it got the lock ([`monotonic_ns`]), panicking with `what` if that was not
    /// within 20 s.
    pub fn woke(self, what: &str) -> u64 {
        let at = self
            .woke
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("the Rust waiter did not get the lock: {what}"));
        self.thread.join().expect("the Rust waiter's thread");
        at
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of Java's `System.nanoTime()` on Linux.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
