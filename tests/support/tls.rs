//! TLS test servers: a throwaway CA made with `openssl`, a server certificate for
//! `127.0.0.1` and `localhost`, a client certificate, and `redis-server` with a TLS port
//! beside its plain one (which the harness and the tests' raw checks use).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::cluster::{RedisCluster, DEFAULT_NODE_TIMEOUT};
use super::{free_port, RedisServer};

/// PEM files of one throwaway PKI, made once per test process.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// The process's PKI (made on first use): `ca.crt`, `server.{crt,key}` (signed by the
    /// CA, for IP 127.0.0.1 and DNS localhost), `named.{crt,key}` (the same, for DNS
    /// localhost only), `client.{crt,key}` (signed by the CA) and
    /// `other-ca.crt` (a CA that signed nothing here).
    pub fn get() -> &'static Pki {
        static PKI: OnceLock<Pki> = OnceLock::new();
        PKI.get_or_init(Pki::make)
    }

    fn make() -> Pki {
        let dir = std::env::temp_dir().join(format!("redlatch-pki-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create PKI dir");
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            openssl(
                &dir,
                &[
                    &["req", "-x509", "-new"],
                    &ec[..],
                    &[
                        "-keyout",
                        &format!("{ca}.key"),
                        "-out",
                        &format!("{ca}.crt"),
                        "-days",
                        "2",
                        "-subj",
                        &format!("/CN=redlatch test {ca}"),
                    ],
                ]
                .concat(),
            );
        }
        for (leaf, ext) in [
            (
                "server",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
            ),
            (
                "named",
                "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n",
            ),
            ("client", "extendedKeyUsage=clientAuth\n"),
        ] {
            openssl(
                &dir,
                &[
                    &["req", "-new"],
                    &ec[..],
                    &[
                        "-keyout",
                        &format!("{leaf}.key"),
                        "-out",
                        &format!("{leaf}.csr"),
                        "-subj",
                        &format!("/CN=redlatch test {leaf}"),
                    ],
                ]
                .concat(),
            );
            std::fs::write(dir.join(format!("{leaf}.ext")), ext).expect("write ext file");
            openssl(
                &dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{leaf}.csr"),
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-out",
                    &format!("{leaf}.crt"),
                    "-extfile",
                    &format!("{leaf}.ext"),
                ],
            );
        }
        Pki { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The contents of `file` (e.g. `ca.crt`).
    pub fn pem(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).expect("read PEM")
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run openssl ({e}): TLS tests need it (`apt-get install -y openssl`)")
        });
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether a TLS server checks client certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    No,
    Required,
}

/// Arguments for a TLS port (picked here, and returned) with certificate `cert`.
fn tls_args(cert: &str, auth: ClientAuth) -> (u16, Vec<String>) {
    let pki = Pki::get();
    let port = free_port();
    let path = |f: &str| pki.path(f).to_string_lossy().into_owned();
    let args = vec![
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path(&format!("{cert}.crt")),
        "--tls-key-file".into(),
        path(&format!("{cert}.key")),
        "--tls-ca-cert-file".into(),
        path("ca.crt"),
        "--tls-auth-clients".into(),
        if auth == ClientAuth::Required {
            "yes"
        } else {
            "no"
        }
        .into(),
    ];
    (port, args)
}

/// A 3-master cluster whose nodes also listen with TLS, and talk TLS among themselves
/// (`tls-cluster`, `tls-replication`); the harness still manages it over the plain ports.
pub struct TlsCluster {
    pub cluster: RedisCluster,
    /// Plain port → TLS port, per node.
    tls_ports: Vec<(u16, u16)>,
}

impl TlsCluster {
    pub fn new() -> TlsCluster {
        let cluster = RedisCluster::with_node_args(3, 0, DEFAULT_NODE_TIMEOUT, || {
            let (_, mut args) = tls_args("server", ClientAuth::No);
            args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
            args
        });
        let tls_ports = cluster
            .nodes()
            .iter()
            .map(|n| {
                let reply: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("tls-port")
                    .query(&mut n.conn())
                    .expect("CONFIG GET tls-port");
                (n.port(), reply[1].parse().expect("a port"))
            })
            .collect();
        TlsCluster { cluster, tls_ports }
    }

    /// `rediss://127.0.0.1:<tls port>/` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.tls_ports
            .iter()
            .map(|(_, tls)| format!("rediss://127.0.0.1:{tls}/"))
            .collect()
    }
}

/// A `redis-server` with a TLS port (certificates from [`Pki::get`]) beside its plain port.
pub struct TlsServer {
    pub server: RedisServer,
    tls_port: u16,
}

impl TlsServer {
    pub fn new(auth: ClientAuth) -> TlsServer {
        TlsServer::with_certificate(auth, "server")
    }

    /// A server presenting `cert` (`server` or `named`, see [`Pki::get`]).
    pub fn with_certificate(auth: ClientAuth, cert: &str) -> TlsServer {
        let picked = std::sync::Mutex::new(0);
        let server = RedisServer::launch(None, |_| {
            let (port, args) = tls_args(cert, auth);
            *picked.lock().unwrap() = port;
            args
        });
        let tls_port = *picked.lock().unwrap();
        TlsServer { server, tls_port }
    }

    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// `rediss://<host>:<tls port>/`
    pub fn url(&self, host: &str) -> String {
        format!("rediss://{host}:{}/", self.tls_port)
    }
}
