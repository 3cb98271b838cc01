//! Raw connections for pub/sub, plain or TLS, and the TLS settings that command connections
//! (opened by `redis`) share with them.
//!
//! Command connections are `redis::Connection`s: `redis` does TLS for them from the
//! certificates in the address ([`Tls::address`]). The pub/sub connection is ours (a reader
//! thread blocks on it while registrations write to it), so it does its own TLS with the same
//! certificates: a [`Stream`] is a socket, or a socket with a rustls session shared by the
//! reader and the writers.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, Value};

use crate::error::{Error, Result};
use crate::metrics::Recorder;

/// The library name connections announce (`CLIENT SETINFO LIB-NAME`).
pub(crate) const LIB_NAME: &str = "redlatch";

/// TLS settings: off (plain TCP), or the certificates `rediss://` connections use.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    on: Option<Arc<tls::Settings>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_on() { "Tls(on)" } else { "Tls(off)" })
    }
}

/// Certificates given to the config builder, in PEM.
#[derive(Clone, Default)]
pub(crate) struct Certificates {
    /// Trust these CAs instead of the system's roots.
    pub(crate) roots: Option<Vec<u8>>,
    /// Client certificate chain and private key, for servers that check clients.
    pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is secret, and the certificates are long: only say what was given.
        f.debug_struct("Certificates")
            .field("roots", &self.roots.as_ref().map(|_| "<pem>"))
            .field("client", &self.client.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Certificates {
    pub(crate) fn is_empty(&self) -> bool {
        self.roots.is_none() && self.client.is_none()
    }
}

impl Tls {
    /// The TLS settings for `urls`: on if they are `rediss://` (all of them or none),
    /// with `certs` (which need TLS).
    pub(crate) fn for_urls(urls: &[ConnectionInfo], certs: &Certificates) -> Result<Tls> {
        let tls = urls
            .iter()
            .filter(|u| matches!(u.addr(), ConnectionAddr::TcpTls { .. }))
            .count();
        if let Some(u) = urls.iter().find(|u| {
            !matches!(
                u.addr(),
                ConnectionAddr::Tcp(..) | ConnectionAddr::TcpTls { .. }
            )
        }) {
            return Err(Error::invalid(format!(
                "only TCP addresses (redis:// or rediss://) are supported, not {}",
                u.addr()
            )));
        }
        if tls != 0 && tls != urls.len() {
            return Err(Error::invalid(
                "mixed redis:// and rediss:// addresses: use one scheme for all",
            ));
        }
        if let Some(u) = urls
            .iter()
            .find(|u| matches!(u.addr(), ConnectionAddr::TcpTls { insecure: true, .. }))
        {
            return Err(Error::invalid(format!(
                "{}: `#insecure` (no certificate check) is not supported; trust the server's \
                 CA with `tls_root_certificates` instead",
                u.addr()
            )));
        }
        if tls == 0 {
            if !certs.is_empty() {
                return Err(Error::invalid(
                    "TLS certificates were given, but the addresses are not rediss://",
                ));
            }
            return Ok(Tls::default());
        }
        Tls::on(certs)
    }

    #[cfg(feature = "tls")]
    fn on(certs: &Certificates) -> Result<Tls> {
        Ok(Tls {
            on: Some(Arc::new(tls::Settings::new(certs)?)),
        })
    }

    #[cfg(not(feature = "tls"))]
    fn on(_: &Certificates) -> Result<Tls> {
        Err(Error::invalid(
            "rediss:// needs redlatch's `tls` feature (on by default)",
        ))
    }

    pub(crate) fn is_on(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.on.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// `info` with this TLS's certificates, for `redis` to connect with (unchanged when TLS
    /// is off, or when no certificate was given).
    pub(crate) fn apply(&self, info: ConnectionInfo) -> Result<ConnectionInfo> {
        #[cfg(feature = "tls")]
        if let Some(settings) = &self.on {
            return settings.apply(info);
        }
        Ok(info)
    }

    /// The address of a node found at run time (a cluster node, a sentinel's master): TLS
    /// when these settings are on.
    pub(crate) fn address(
        &self,
        host: String,
        port: u16,
        settings: RedisConnectionInfo,
    ) -> Result<ConnectionInfo> {
        let addr = if self.is_on() {
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(host, port)
        };
        let info = addr
            .into_connection_info()
            .map_err(|e| Error::invalid(e.to_string()))?
            .set_redis_settings(settings);
        self.apply(info)
    }
}

/// How to open a pub/sub connection (timeouts and TLS), and where to count reconnects.
#[derive(Clone)]
pub(crate) struct Dial {
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) tls: Tls,
    pub(crate) metrics: Arc<Recorder>,
    /// The connection name (`CLIENT SETNAME`): `<prefix>:<client id>`.
    pub(crate) name: Option<Arc<str>>,
}

impl Dial {
    /// Plain TCP with both timeouts `timeout`.
    #[cfg(test)]
    pub(crate) fn plain(timeout: Duration) -> Dial {
        Dial {
            connect_timeout: timeout,
            response_timeout: timeout,
            tls: Tls::default(),
            metrics: Arc::new(Recorder::new()),
            name: None,
        }
    }

    /// Connects to `info` (TLS handshake included, for a `rediss://` address) and
    /// authenticates with its credentials; both bounded by the timeouts.
    pub(crate) fn open(&self, info: &ConnectionInfo) -> Result<Stream> {
        let io = |e: io::Error| Error::Connection(e.into());
        let (host, port) = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.as_str(), *port)
            }
            other => return Err(Error::invalid(format!("not a TCP address: {other}"))),
        };
        let mut last = None;
        let mut connected = None;
        for addr in (host, port).to_socket_addrs().map_err(io)? {
            match TcpStream::connect_timeout(&addr, self.connect_timeout) {
                Ok(s) => {
                    connected = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let socket = connected.ok_or_else(|| match last {
            Some(e) => io(e),
            None => Error::invalid(format!("cannot resolve {host}")),
        })?;
        socket.set_nodelay(true).map_err(io)?;
        let stream = match info.addr() {
            ConnectionAddr::TcpTls { .. } => self.secure(socket, host)?,
            _ => Stream::Plain(socket),
        };
        // AUTH (which must succeed), then the connection's name and library (whose errors
        // are ignored: a server before 7.2 has no CLIENT SETINFO, an ACL may refuse them), as
        // one write; the replies are read in order.
        let settings = info.redis_settings();
        let mut setup = Vec::new();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            auth.arg(password);
            setup.push(auth);
        }
        let authenticated = setup.len();
        if let Some(name) = &self.name {
            setup.push(redis::cmd("CLIENT").arg("SETNAME").arg(&**name).clone());
        }
        setup.push(
            redis::cmd("CLIENT")
                .arg("SETINFO")
                .arg("LIB-NAME")
                .arg(LIB_NAME)
                .clone(),
        );
        setup.push(
            redis::cmd("CLIENT")
                .arg("SETINFO")
                .arg("LIB-VER")
                .arg(env!("CARGO_PKG_VERSION"))
                .clone(),
        );
        let packed: Vec<u8> = setup.iter().flat_map(|c| c.get_packed_command()).collect();
        stream
            .set_read_timeout(Some(self.response_timeout))
            .map_err(io)?;
        (&stream).write_all(&packed).map_err(io)?;
        let mut parser = redis::Parser::new();
        for i in 0..setup.len() {
            let reply = parser.parse_value(&stream);
            match reply {
                Ok(Value::Okay) | Ok(Value::SimpleString(_)) => {}
                Ok(other) if i < authenticated => {
                    return Err(Error::Protocol(format!("AUTH replied {other:?}")))
                }
                Err(e) if i < authenticated => return Err(Error::from_redis(e, "")),
                Ok(Value::ServerError(e)) => log::debug!(
                    "pub/sub connection to {}: connection setup refused ({e:?})",
                    info.addr()
                ),
                Ok(other) => log::debug!("pub/sub connection setup replied {other:?}"),
                Err(e) => return Err(Error::from_redis(e, "")),
            }
        }
        stream.set_read_timeout(None).map_err(io)?;
        Ok(stream)
    }

    #[cfg(feature = "tls")]
    fn secure(&self, socket: TcpStream, host: &str) -> Result<Stream> {
        let Some(settings) = &self.tls.on else {
            return Err(Error::invalid(
                "a rediss:// address reached a client built without TLS",
            ));
        };
        let stream = tls::TlsStream::handshake(settings, socket, host, self.connect_timeout)?;
        Ok(Stream::Tls(Arc::new(stream)))
    }

    #[cfg(not(feature = "tls"))]
    fn secure(&self, _: TcpStream, _: &str) -> Result<Stream> {
        let _ = &self.tls;
        Err(Error::invalid(
            "rediss:// needs redlatch's `tls` feature (on by default)",
        ))
    }
}

/// A pub/sub connection: its clones (the reader's, the writer's) share the socket and, for
/// TLS, the session.
pub(crate) enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Arc<tls::TlsStream>),
}

impl Stream {
    fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.socket(),
        }
    }

    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Plain(s) => Stream::Plain(s.try_clone()?),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => Stream::Tls(Arc::clone(t)),
        })
    }

    /// Ends the connection: a reader blocked on it returns.
    pub(crate) fn shutdown(&self) {
        let _ = self.socket().shutdown(Shutdown::Both);
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(timeout)
    }

    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_write_timeout(timeout)
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => (&*s).read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => (&*s).write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => (&*s).flush(),
            #[cfg(feature = "tls")]
            Stream::Tls(_) => Ok(()),
        }
    }
}

#[cfg(feature = "tls")]
mod tls {
    use std::io::{self, Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;
    use redis::{ConnectionAddr, ConnectionInfo, TlsCertificates};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use rustls::{ClientConfig, ClientConnection, RootCertStore};

    use crate::error::{Error, Result};

    /// The certificates, in the two forms they are used in: for `redis` (command
    /// connections) and as a rustls config (pub/sub).
    pub(super) struct Settings {
        certs: Option<TlsCertificates>,
        config: Arc<ClientConfig>,
    }

    impl Settings {
        pub(super) fn new(certs: &super::Certificates) -> Result<Settings> {
            let bad = |what: &str, e: &dyn std::fmt::Display| {
                Error::invalid(format!("bad TLS {what}: {e}"))
            };
            let mut roots = RootCertStore::empty();
            match &certs.roots {
                Some(pem) => {
                    for cert in CertificateDer::pem_slice_iter(pem) {
                        let cert = cert.map_err(|e| bad("root certificate", &e))?;
                        roots.add(cert).map_err(|e| bad("root certificate", &e))?;
                    }
                    if roots.is_empty() {
                        return Err(Error::invalid(
                            "bad TLS root certificate: no certificate in the PEM",
                        ));
                    }
                }
                None => {
                    let found = rustls_native_certs::load_native_certs();
                    for e in &found.errors {
                        log::debug!("loading the system's TLS roots: {e}");
                    }
                    let (added, _) = roots.add_parsable_certificates(found.certs);
                    if added == 0 {
                        log::warn!(
                            "no trusted TLS roots found on this system; rediss:// connections \
                             will fail unless tls_root_certificates is set"
                        );
                    }
                }
            }
            let builder = ClientConfig::builder().with_root_certificates(roots);
            let config = match &certs.client {
                Some((chain, key)) => {
                    let chain = CertificateDer::pem_slice_iter(chain)
                        .collect::<std::result::Result<Vec<_>, _>>()
                        .map_err(|e| bad("client certificate", &e))?;
                    let key =
                        PrivateKeyDer::from_pem_slice(key).map_err(|e| bad("client key", &e))?;
                    builder
                        .with_client_auth_cert(chain, key)
                        .map_err(|e| bad("client certificate", &e))?
                }
                None => builder.with_no_client_auth(),
            };
            let certs = (!certs.is_empty()).then(|| TlsCertificates {
                client_tls: certs
                    .client
                    .as_ref()
                    .map(|(chain, key)| redis::ClientTlsConfig {
                        client_cert: chain.clone(),
                        client_key: key.clone(),
                    }),
                root_cert: certs.roots.clone(),
            });
            Ok(Settings {
                certs,
                config: Arc::new(config),
            })
        }

        pub(super) fn apply(&self, info: ConnectionInfo) -> Result<ConnectionInfo> {
            match (&self.certs, info.addr()) {
                (Some(certs), ConnectionAddr::TcpTls { .. }) => {
                    redis::Client::build_with_tls(info, certs.clone())
                        .map(|c| c.get_connection_info().clone())
                        .map_err(|e| Error::invalid(format!("bad TLS settings: {e}")))
                }
                _ => Ok(info),
            }
        }
    }

    /// A TLS session over a socket. The reader thread waits for bytes on the socket without
    /// the session's lock (with `peek`), then takes it to decrypt them; writers take it to
    /// encrypt and send.
    pub(crate) struct TlsStream {
        socket: TcpStream,
        session: Mutex<ClientConnection>,
    }

    impl TlsStream {
        pub(super) fn handshake(
            settings: &Settings,
            socket: TcpStream,
            host: &str,
            timeout: Duration,
        ) -> Result<TlsStream> {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| Error::invalid(format!("bad TLS server name `{host}`: {e}")))?;
            let mut session = ClientConnection::new(Arc::clone(&settings.config), name)
                .map_err(|e| Error::invalid(format!("TLS: {e}")))?;
            let io = |e: io::Error| Error::Connection(e.into());
            socket.set_read_timeout(Some(timeout)).map_err(io)?;
            socket.set_write_timeout(Some(timeout)).map_err(io)?;
            while session.is_handshaking() {
                session
                    .complete_io(&mut &socket)
                    .map_err(|e| handshake_failed(host, e))?;
            }
            socket.set_read_timeout(None).map_err(io)?;
            socket.set_write_timeout(None).map_err(io)?;
            Ok(TlsStream {
                socket,
                session: Mutex::new(session),
            })
        }

        pub(super) fn socket(&self) -> &TcpStream {
            &self.socket
        }

        pub(super) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
            loop {
                match self.session.lock().reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // Data, a clean close (0), or a close without `close_notify`.
                    other => return other,
                }
                // Wait for the next record without holding the session (writers need it).
                let mut probe = [0u8; 1];
                self.socket.peek(&mut probe)?;
                let mut session = self.session.lock();
                // Does not block: bytes are there (or the peer closed, read as 0: EOF).
                session.read_tls(&mut &self.socket)?;
                session
                    .process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                while session.wants_write() {
                    session.write_tls(&mut &self.socket)?;
                }
            }
        }

        pub(super) fn write(&self, buf: &[u8]) -> io::Result<usize> {
            let mut session = self.session.lock();
            let n = session.writer().write(buf)?;
            while session.wants_write() {
                session.write_tls(&mut &self.socket)?;
            }
            Ok(n)
        }
    }

    fn handshake_failed(host: &str, e: io::Error) -> Error {
        Error::Connection(
            io::Error::new(e.kind(), format!("TLS handshake with {host} failed: {e}")).into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<ConnectionInfo> {
        list.iter()
            .map(|u| u.into_connection_info().unwrap())
            .collect()
    }

    #[test]
    fn plain_urls_give_plain_node_addresses() {
        let tls =
            Tls::for_urls(&urls(&["redis://10.0.0.1:7000"]), &Certificates::default()).unwrap();
        assert!(!tls.is_on());
        let node = tls
            .address("10.0.0.2".into(), 7001, RedisConnectionInfo::default())
            .unwrap();
        assert!(matches!(node.addr(), ConnectionAddr::Tcp(h, 7001) if h == "10.0.0.2"));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn nodes_found_at_run_time_inherit_tls_and_its_certificates() {
        let tls =
            Tls::for_urls(&urls(&["rediss://10.0.0.1:7000"]), &Certificates::default()).unwrap();
        assert!(tls.is_on());
        let settings = RedisConnectionInfo::default().set_password("pw");
        let node = tls.address("10.0.0.2".into(), 7001, settings).unwrap();
        assert!(matches!(
            node.addr(),
            ConnectionAddr::TcpTls { host, port: 7001, insecure: false, .. } if host == "10.0.0.2"
        ));
        assert_eq!(node.redis_settings().password(), Some("pw"));
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn rediss_without_the_feature_says_which_feature() {
        let err = crate::Config::builder("rediss://10.0.0.1:7000")
            .build()
            .unwrap_err();
        assert!(err.is_invalid_argument());
        assert!(err.to_string().contains("`tls` feature"), "{err}");
    }

    #[test]
    fn certificates_are_not_printed() {
        let certs = Certificates {
            roots: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
            client: Some((b"chain".to_vec(), b"SECRET KEY".to_vec())),
        };
        let shown = format!("{certs:?}");
        assert!(
            !shown.contains("SECRET") && !shown.contains("BEGIN"),
            "{shown}"
        );
    }
}
