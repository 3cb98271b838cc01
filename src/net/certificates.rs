//! The certificates a config is given for TLS, in PEM, as the builder keeps them: what both
//! the session (`session.rs`) and the TLS settings (`tls.rs`) are made from.

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
