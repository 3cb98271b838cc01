//! TLS settings: whether a deployment's addresses are `rediss://`, the certificates given to
//! the builder, and the addresses of nodes found at run time, which inherit both.

#[cfg(feature = "tls")]
use std::sync::Arc;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::{Error, Result};

use super::certificates::Certificates;
#[cfg(feature = "tls")]
use super::session;

/// TLS settings: off (plain TCP), or the certificates `rediss://` connections use.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    pub(super) on: Option<Arc<session::Settings>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_on() { "Tls(on)" } else { "Tls(off)" })
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
            on: Some(Arc::new(session::Settings::new(certs)?)),
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
