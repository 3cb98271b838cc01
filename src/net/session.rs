//! The rustls session of a pub/sub connection (the `tls` feature): the certificates as
//! `redis` and rustls each take them, and a TLS stream whose session the connection's reader
//! and writers share.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::{ConnectionAddr, ConnectionInfo, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use super::certificates::Certificates;
use crate::error::{Error, Result};

/// The certificates, in the two forms they are used in: for `redis` (command
/// connections) and as a rustls config (pub/sub).
pub(super) struct Settings {
    certs: Option<TlsCertificates>,
    config: Arc<ClientConfig>,
}

impl Settings {
    pub(super) fn new(certs: &Certificates) -> Result<Settings> {
        let bad =
            |what: &str, e: &dyn std::fmt::Display| Error::invalid(format!("bad TLS {what}: {e}"));
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
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| bad("client key", &e))?;
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
