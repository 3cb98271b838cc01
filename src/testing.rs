//! Unit-test support: a real `redis-server` on a free loopback port, killed on drop.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis::{ConnectionInfo, IntoConnectionInfo, Value};

/// How long a test waits for what must come.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

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
    pub(crate) fn start_sharded() -> Option<Server> {
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
