//! What the examples share: a Redis to run against. `REDIS_URL`, else
//! `redis://127.0.0.1:6379/`; when nothing answers there, a throwaway `redis-server` (from
//! `REDIS_SERVER_BIN` or `PATH`) on a free port, stopped when the returned value drops.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use std::{env, fs, net::TcpListener, path::PathBuf, thread};

pub type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The URL of a Redis to use, and the throwaway server behind it if one was started (keep it
/// until the end). `None` after explaining on stderr how to get a server.
pub fn redis(example: &str) -> Option<(String, Option<ThrowawayServer>)> {
    let url = env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    if ping(&url) {
        return Some((url, None));
    }
    match ThrowawayServer::start(example) {
        Ok(server) => {
            println!(
                "no Redis at {url}, started a throwaway redis-server on port {}",
                server.port
            );
            let url = format!("redis://127.0.0.1:{}/", server.port);
            Some((url, Some(server)))
        }
        Err(e) => {
            eprintln!("no Redis at {url} and no redis-server to start ({e}).");
            eprintln!("Install one: `apt-get install -y redis-server` (Debian/Ubuntu),");
            eprintln!("or set REDIS_SERVER_BIN to its path, or REDIS_URL to a running server.");
            None
        }
    }
}

/// True if a Redis server answers PING at `url` within 500 ms.
pub fn ping(url: &str) -> bool {
    let timeout = Duration::from_millis(500);
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(timeout))
        .and_then(|mut con| {
            con.set_read_timeout(Some(timeout))?;
            redis::cmd("PING").query::<String>(&mut con)
        })
        .is_ok()
}

/// A `redis-server` on a free local port, with no persistence; killed on drop.
pub struct ThrowawayServer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl ThrowawayServer {
    fn start(example: &str) -> Res<ThrowawayServer> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = env::temp_dir().join(format!("{example}-redis-{}", std::process::id()));
        fs::create_dir_all(&dir)?;
        let bin = env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
        let child = Command::new(&bin)
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                let _ = fs::remove_dir_all(&dir);
                format!("cannot run {bin}: {e}")
            })?;
        let server = ThrowawayServer { child, port, dir };
        let url = format!("redis://127.0.0.1:{port}/");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ping(&url) {
            if Instant::now() > deadline {
                return Err(format!("{bin} did not answer on port {port}").into());
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
