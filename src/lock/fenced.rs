//! The fenced lock's token as stored (`redisson_lock_token:{name}`); the kind itself is
//! [`Plain::fenced`](crate::lock::plain::Plain::fenced).

use crate::error::{Error, Result};

/// A stored token (`None` when absent); a value that is not one is the key's wrong type.
pub(crate) fn parse_token(value: Option<String>, key: &str) -> Result<Option<u64>> {
    value
        .map(|v| {
            v.parse().map_err(|_| Error::WrongType {
                key: key.to_owned(),
            })
        })
        .transpose()
}
