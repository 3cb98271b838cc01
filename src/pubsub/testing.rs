//! Test helpers: pub/sub handles driven by hand, fake replies, and a real `redis-server`.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionInfo, IntoConnectionInfo, Value};

use parking_lot::Mutex;

use super::{Mode, PubSub, Shared};
use crate::net::{Dial, Stream};

/// How long a test waits for anything that should happen at once.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);

/// The far end of a [`wired`] handle's write side: reads what the handle wrote.
pub(super) struct Peer {
    stream: TcpStream,
    /// Kept across reads: it may have buffered the start of the next command.
    parser: redis::Parser,
}

impl Peer {
    /// The next command written, as text.
    pub(super) fn command(&mut self) -> Vec<String> {
        let value = self.parser.parse_value(&self.stream).unwrap();
        as_command(value).unwrap_or_else(|v| panic!("not a command: {v:?}"))
    }

    /// The next command written; `None` once the handle closed its write side.
    pub(super) fn next_command(&mut self) -> Option<Vec<String>> {
        let value = self.parser.parse_value(&self.stream).ok()?;
        Some(as_command(value).unwrap_or_else(|v| panic!("not a command: {v:?}")))
    }

    /// Every command written until the handle closed its write side.
    pub(super) fn rest(mut self) -> Vec<Vec<String>> {
        std::iter::from_fn(|| self.next_command()).collect()
    }
}

/// A command's arguments as text; the value itself if it is not a command.
fn as_command(value: Value) -> Result<Vec<String>, Value> {
    let Value::Array(parts) = value else {
        return Err(value);
    };
    parts
        .into_iter()
        .map(|p| match p {
            Value::BulkString(b) => {
                String::from_utf8(b).map_err(|e| Value::BulkString(e.into_bytes()))
            }
            other => Err(other),
        })
        .collect()
}

/// A handle in `mode` with no reader thread, whose write side is a live loopback socket:
/// commands are written (and, in sharded mode, remembered for their replies) as on a real
/// connection. Returns the socket's far end, to read what was written; replies are routed
/// by hand with `shared.route`.
pub(super) fn wired(mode: Mode) -> (PubSub, Peer) {
    let info = "redis://127.0.0.1:1/".into_connection_info().unwrap();
    let timeout = Duration::from_millis(50);
    // As the cluster dispatcher's node connections (sharded) or a server's (plain).
    let shared = Shared::new(
        Arc::new(info),
        Dial::plain(timeout),
        mode,
        mode == Mode::Sharded,
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (stream, _) = listener.accept().unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    shared.registry.lock().wire.writer = Some(Stream::Plain(writer));
    let pubsub = PubSub {
        shared,
        thread: Mutex::new(None),
    };
    let peer = Peer {
        stream,
        parser: redis::Parser::new(),
    };
    (pubsub, peer)
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// A message as the server pushes it: `kind` is `message` or `smessage`.
pub(super) fn push(kind: &str, channel: &str, payload: &str) -> Value {
    Value::Array(vec![bulk(kind), bulk(channel), bulk(payload)])
}

/// A subscribe-family reply (`ssubscribe`, `sunsubscribe`, ...) with the subscription count.
pub(super) fn reply(kind: &str, channel: &str, count: i64) -> Value {
    Value::Array(vec![bulk(kind), bulk(channel), Value::Int(count)])
}

/// The error a node replies to SSUBSCRIBE of a channel whose slot it does not own.
pub(super) fn moved_error() -> Value {
    let value = redis::parse_redis_value(b"-MOVED 3999 127.0.0.1:7002\r\n").unwrap();
    assert!(matches!(value, Value::ServerError(_)), "{value:?}");
    value
}

/// A `redis-server` on a free loopback port, killed on drop.
pub(crate) struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Starts one (from `REDIS_SERVER_BIN`, or `redis-server` on the `PATH`) and waits until
    /// it says it accepts connections, then checks that it answers `PING`.
    pub(crate) fn start() -> Server {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
        for _ in 0..5 {
            // Free now; another process may take it before the server binds (then retry).
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(&bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--logfile", ""])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start `{bin}` (set REDIS_SERVER_BIN?): {e}"));
            // The log goes to stdout: its "ready" line (or its end, if the server exits) is the
            // event to wait for. The rest is drained so that logging never blocks the server.
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let ready = lines
                .by_ref()
                .map_while(|line| line.ok())
                .any(|line| line.contains("Ready to accept connections"));
            std::thread::spawn(move || lines.for_each(drop));
            let server = Server { child, port };
            if ready {
                let pong: String = redis::cmd("PING").query(&mut server.conn()).unwrap();
                assert_eq!(pong, "PONG");
                return server;
            }
        }
        panic!("`{bin}` did not start (5 attempts)");
    }

    /// Starts one as [`start`](Self::start) does, if it has sharded pub/sub (Redis 7.0 and
    /// later, Valkey); otherwise says the test is skipped, and why, and gives `None`.
    pub(super) fn start_sharded() -> Option<Server> {
        let server = Server::start();
        let asked = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .query::<Value>(&mut server.conn());
        match asked {
            Ok(_) => Some(server),
            Err(e) => {
                eprintln!("skipped: the server has no sharded pub/sub (Redis 7.0 brought it): {e}");
                None
            }
        }
    }

    /// Where it listens.
    pub(crate) fn info(&self) -> ConnectionInfo {
        format!("redis://127.0.0.1:{}/", self.port)
            .into_connection_info()
            .unwrap()
    }

    /// A command connection, for the test's own commands.
    pub(crate) fn conn(&self) -> redis::Connection {
        let conn = redis::Client::open(self.info())
            .unwrap()
            .get_connection_with_timeout(PATIENCE)
            .unwrap();
        conn.set_read_timeout(Some(PATIENCE)).unwrap();
        conn
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
