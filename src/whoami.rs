//! This process as records on the server name it: its host and process id.

use std::sync::OnceLock;

/// This host's name.
pub(crate) fn host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| gethostname::gethostname().to_string_lossy().into_owned())
}

/// `pid <pid> on <host>`.
pub(crate) fn process() -> &'static str {
    static PROCESS: OnceLock<String> = OnceLock::new();
    PROCESS.get_or_init(|| format!("pid {} on {}", std::process::id(), host()))
}
