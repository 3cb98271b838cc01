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

use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::{auth_failed, Error, Result};
use crate::metrics::Recorder;
mod certificates;
#[cfg(feature = "tls")]
mod session;
mod tls;

pub(crate) use certificates::Certificates;
pub(crate) use tls::Tls;

/// The library name connections announce (`CLIENT SETINFO LIB-NAME`).
pub(crate) const LIB_NAME: &str = "redlatch";

/// How to open a pub/sub connection (timeouts and TLS), how often to check it, where to count
/// reconnects, and whom to tell of one.
#[derive(Clone)]
pub(crate) struct Dial {
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    /// How often a connection anything waits on is sent a `PING` (and how long one may go
    /// unanswered); also the TCP keepalive's idle time and probe interval.
    pub(crate) ping_interval: Duration,
    pub(crate) tls: Tls,
    pub(crate) metrics: Arc<Recorder>,
    /// The connection name (`CLIENT SETNAME`): `<prefix>:<client id>`.
    pub(crate) name: Option<Arc<str>>,
    /// Called once a connection is made after one was lost or could not be made (the server
    /// may have restarted without its data, or failed over to a replica that lacks some
    /// writes), with `false`; and as the client's own connection (not a cluster node's) is
    /// made for the first time, with `true`: locks taken before it may have been lost unseen.
    pub(crate) reconnected: Option<Reconnected>,
}

/// What a (re)connect calls: `first` for the first connection, with no loss seen.
pub(crate) type Reconnected = Arc<dyn Fn(bool) + Send + Sync>;

impl Dial {
    /// Plain TCP with both timeouts `timeout`.
    #[cfg(test)]
    pub(crate) fn plain(timeout: Duration) -> Dial {
        Dial {
            connect_timeout: timeout,
            response_timeout: timeout,
            ping_interval: Duration::from_secs(2),
            tls: Tls::default(),
            metrics: Arc::new(Recorder::new()),
            name: None,
            reconnected: None,
        }
    }

    /// Connects to `info` (TLS handshake included, for a `rediss://` address) and
    /// authenticates with its credentials; both bounded by the timeouts. Its errors name the
    /// address.
    pub(crate) fn open(&self, info: &ConnectionInfo) -> Result<Stream> {
        self.connect(info)
            .map_err(|e| e.connecting_to(&info.addr().to_string()))
    }

    fn connect(&self, info: &ConnectionInfo) -> Result<Stream> {
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
        keep_alive(&socket, self.ping_interval);
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
                // WRONGPASS (or any refusal) to AUTH.
                Ok(Value::ServerError(e)) if i < authenticated => {
                    let address = info.addr().to_string();
                    return Err(Error::Redis(auth_failed(&e.into(), &address)));
                }
                // NOAUTH to the first command, without AUTH.
                Ok(Value::ServerError(e)) if e.code() == "NOAUTH" => {
                    return Err(Error::Redis(e.into()));
                }
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
        let stream = session::TlsStream::handshake(settings, socket, host, self.connect_timeout)?;
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

/// Turns TCP keepalive on for `socket` (under TLS too: it is the socket's), with probes after
/// `interval` of silence, one per `interval` (at least a second: the kernel counts seconds),
/// and the connection dropped after 3 unanswered: a peer that is gone, or a NAT or firewall
/// that forgot the connection, is found even while nothing is sent on it. (While anything
/// waits on the connection, its `PING`s find that sooner, and also a peer that still
/// acknowledges packets but no longer answers, as a stalled proxy.) Where it cannot be set,
/// it is logged and the connection goes on without.
fn keep_alive(socket: &TcpStream, interval: Duration) {
    let every = interval.max(Duration::from_secs(1));
    let keepalive = socket2::TcpKeepalive::new().with_time(every);
    #[cfg(any(
        target_os = "android",
        target_os = "freebsd",
        target_os = "ios",
        target_os = "linux",
        target_os = "macos",
        target_os = "netbsd",
        target_os = "windows",
    ))]
    let keepalive = keepalive.with_interval(every).with_retries(3);
    if let Err(e) = socket2::SockRef::from(socket).set_tcp_keepalive(&keepalive) {
        log::debug!("pub/sub connection: cannot set TCP keepalive ({e})");
    }
}

/// A pub/sub connection: its clones (the reader's, the writer's) share the socket and, for
/// TLS, the session.
pub(crate) enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Arc<session::TlsStream>),
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
    /// Reads, made again when interrupted: a socket with a read timeout (the setup's) returns
    /// `EINTR` after its process was stopped and resumed, with no signal handler, and
    /// `std`'s `read` does not retry it (its `read_exact` and `write_all` do). That is no
    /// broken connection: a reconnect would wake every waiter and recheck every hold.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let read = match self {
                Stream::Plain(s) => (&*s).read(buf),
                #[cfg(feature = "tls")]
                Stream::Tls(t) => t.read(buf),
            };
            match read {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    log::debug!("a pub/sub read was interrupted ({e}): read again");
                }
                other => return other,
            }
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;

    use redis::IntoConnectionInfo;

    use super::*;

    /// A pub/sub connection's socket has TCP keepalive, probing after one ping interval of
    /// silence (a whole second at least). A TLS connection's socket is this one too.
    #[test]
    fn a_pub_sub_socket_has_tcp_keepalive_at_the_ping_interval() {
        for (interval, probe) in [(2_000, 2), (200, 1)] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let address = format!("redis://{}/", listener.local_addr().unwrap());
            let server = std::thread::spawn(move || {
                let (stream, _) = listener.accept().unwrap();
                let mut parser = redis::Parser::new();
                for _ in 0..2 {
                    parser.parse_value(&stream).unwrap(); // CLIENT SETINFO
                }
                (&stream).write_all(b"+OK\r\n+OK\r\n").unwrap();
                stream
            });
            let mut dial = Dial::plain(Duration::from_secs(10));
            dial.ping_interval = Duration::from_millis(interval);
            let stream = dial.open(&address.into_connection_info().unwrap()).unwrap();
            let socket = socket2::SockRef::from(stream.socket());
            assert!(socket.keepalive().unwrap(), "{interval} ms");
            #[cfg(target_os = "linux")]
            {
                let secs = Duration::from_secs(probe);
                assert_eq!(socket.tcp_keepalive_time().unwrap(), secs);
                assert_eq!(socket.tcp_keepalive_interval().unwrap(), secs);
                assert_eq!(socket.tcp_keepalive_retries().unwrap(), 3);
            }
            let _ = probe;
            drop(server.join().unwrap());
        }
    }
}
