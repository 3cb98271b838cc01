//! The server binary under test (`$REDIS_SERVER_BIN`, or `redis-server` on the `PATH`): which
//! product and version it is, and so what it can do. The one place that maps versions to
//! features: the harness adapts its setup to it, and a test that needs what the binary lacks
//! is skipped with [`require!`](crate::require), which says why.
//!
//! Detected once per test process: `--version` for the product and version, and (TLS being
//! a build option) one short start with a TLS port.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// What a test may need that not every server has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `SSUBSCRIBE`/`SPUBLISH` (Redis 7.0).
    ShardedPubSub,
    /// A TLS port (a build option: Debian's and Redis Stack's have it; the PyPI wheels of
    /// Redis 6 and Valkey do not).
    Tls,
    /// `rejected_calls` in `INFO commandstats` (6.2): how often a command was refused
    /// before it ran (a `MOVED` or `ASK` counts).
    RejectedCallsStat,
}

/// The server binary and what it can do.
#[derive(Debug)]
pub struct Binary {
    pub path: PathBuf,
    /// "Redis" or "Valkey".
    pub product: String,
    pub version: (u32, u32, u32),
    pub tls: bool,
}

/// The binary under test, detected on first use.
pub fn binary() -> &'static Binary {
    static BINARY: OnceLock<Binary> = OnceLock::new();
    BINARY.get_or_init(Binary::detect)
}

impl Binary {
    fn detect() -> Binary {
        let path = PathBuf::from(
            std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string()),
        );
        let out = Command::new(&path)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{} --version`: {e}. Integration tests need a redis-server \
                     binary: install it (`apt-get install -y redis-server`) or set \
                     REDIS_SERVER_BIN=/path/to/redis-server",
                    path.display()
                )
            });
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (product, version) = parse_version(&text)
            .unwrap_or_else(|| panic!("`{} --version` said {text:?}", path.display()));
        let tls = has_tls(&path);
        Binary {
            path,
            product,
            version,
            tls,
        }
    }

    /// "Redis 6.2.14", "Valkey 9.1.2".
    pub fn describe(&self) -> String {
        let (a, b, c) = self.version;
        format!("{} {a}.{b}.{c}", self.product)
    }

    /// The Redis version whose features it has: Valkey forked from Redis 7.2.4, and has
    /// every Redis feature the tests use since.
    fn redis_level(&self) -> (u32, u32, u32) {
        if self.product == "Valkey" {
            (7, 2, 4).max(self.version)
        } else {
            self.version
        }
    }

    fn at_least(&self, major: u32, minor: u32) -> bool {
        self.redis_level() >= (major, minor, 0)
    }

    /// `cluster-port` (7.0): before, the bus port is always the port + 10000.
    pub fn has_cluster_port(&self) -> bool {
        self.at_least(7, 0)
    }

    /// `cluster-allow-replica-migration` (6.2); before, emptied masters do not turn into
    /// replicas, and `cluster-migration-barrier` alone keeps replicas in place.
    pub fn has_cluster_allow_replica_migration(&self) -> bool {
        self.at_least(6, 2)
    }

    /// `sentinel resolve-hostnames` (6.2); before, sentinels take addresses only, as the
    /// harness gives them anyway.
    pub fn has_sentinel_resolve_hostnames(&self) -> bool {
        self.at_least(6, 2)
    }

    /// `INFO commandstats` counts subcommands apart (`cmdstat_cluster|slots`, 7.0); before,
    /// all of a command's subcommands count together (`cmdstat_cluster`).
    pub fn has_subcommand_stats(&self) -> bool {
        self.at_least(7, 0)
    }

    /// Why the binary cannot run a test that needs `need`, if it cannot.
    pub fn lacks(&self, need: Need) -> Option<String> {
        let has = match need {
            Need::ShardedPubSub => self.at_least(7, 0),
            Need::Tls => self.tls,
            Need::RejectedCallsStat => self.at_least(6, 2),
        };
        let why = match need {
            Need::ShardedPubSub => "has no sharded pub/sub (Redis 7.0 brought it)",
            Need::Tls => "was built without TLS",
            Need::RejectedCallsStat => {
                "counts no rejected calls in INFO commandstats (Redis 6.2 brought it)"
            }
        };
        (!has).then(|| format!("{} ({}) {why}", self.describe(), self.path.display()))
    }
}

/// `("Redis", (6, 2, 14))` from "Redis server v=6.2.14 sha=...", and the same for Valkey
/// ("Valkey server v=9.1.2 ...", also when run by a `redis-server` link).
pub fn parse_version(text: &str) -> Option<(String, (u32, u32, u32))> {
    let (product, rest) = text.split_once(" server v=")?;
    let version = rest.split_whitespace().next()?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    let version = (
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    );
    Some((product.trim().to_string(), version))
}

/// Whether the binary serves TLS: started with a TLS port and a certificate that does not
/// exist, a build with TLS fails to load the certificate; one without says it has no TLS
/// ("Bad directive" before Redis 7, "Failed finding TLS support" in Valkey).
fn has_tls(path: &PathBuf) -> bool {
    let port = super::free_port().to_string();
    let missing = std::env::temp_dir().join("redlatch-no-such-certificate.pem");
    let out = Command::new(path)
        .args(["--port", "0", "--tls-port", &port, "--logfile", ""])
        .arg("--tls-cert-file")
        .arg(&missing)
        .arg("--tls-key-file")
        .arg(&missing)
        .arg("--tls-ca-cert-file")
        .arg(&missing)
        .stdin(Stdio::null())
        .output()
        .expect("run the server binary");
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    said.contains("Failed to load certificate")
}

/// Skips the calling test (returns from it, passing) unless the server binary has `need`
/// ([`Need`]), printing `skipped: why` (the test matrix counts these).
#[macro_export]
macro_rules! require {
    ($need:expr) => {
        if let Some(why) = $crate::support::binary::binary().lacks($need) {
            eprintln!("skipped: {why}");
            return;
        }
    };
}
