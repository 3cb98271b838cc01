//! Test helpers: pub/sub handles driven by hand by a test playing the server, and fake replies.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use redis::{IntoConnectionInfo, Value};

use parking_lot::Mutex;

use super::connection::{PubSub, Shared};
use super::vocabulary::Mode;
use crate::net::{Dial, Stream};
pub(super) use crate::testing::PATIENCE;

/// The far end of a [`wired`] handle's write side: reads what the handle wrote.
pub(super) struct Peer {
    stream: TcpStream,
    /// Kept across reads: it may have buffered the start of the next command.
    parser: redis::Parser,
}

impl Peer {
    /// The far end of a connection the test accepted, playing the server.
    pub(super) fn new(stream: TcpStream) -> Peer {
        Peer {
            stream,
            parser: redis::Parser::new(),
        }
    }

    /// The next command written within `timeout`; `None` if none came (or the handle closed
    /// its write side).
    pub(super) fn command_within(&mut self, timeout: Duration) -> Option<Vec<String>> {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let value = self.parser.parse_value(&self.stream);
        self.stream.set_read_timeout(Some(PATIENCE)).unwrap();
        match value {
            Ok(value) => Some(as_command(value).unwrap_or_else(|v| panic!("not a command: {v:?}"))),
            Err(_) => {
                // Nothing came: no command is half read.
                self.parser = redis::Parser::new();
                None
            }
        }
    }

    /// Writes `bytes` as the server's reply.
    pub(super) fn answer(&mut self, bytes: &[u8]) {
        use std::io::Write;
        (&self.stream).write_all(bytes).unwrap();
    }

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

/// Accepts the next connection and answers its setup (the two `CLIENT SETINFO` of a dial
/// without a name) as a server would; the connection is then up.
pub(super) fn accept_set_up(listener: &TcpListener) -> TcpStream {
    use std::io::Write;
    let (stream, _) = listener.accept().unwrap();
    let mut parser = redis::Parser::new();
    for _ in 0..2 {
        parser.parse_value(&stream).unwrap();
    }
    (&stream).write_all(b"+OK\r\n+OK\r\n").unwrap();
    stream
}
