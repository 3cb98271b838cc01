//! [`PermitId`]: the id of one permit, as text and as its member in Redis.

use std::fmt;

use crate::keys;

/// The id of one permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore): 32
/// lowercase hex characters when made by [`acquire`](crate::PermitExpirableSemaphore::acquire)
/// (Redisson's ids have the same form).
///
/// A permit belongs to nobody in particular: any thread or process that has its id may
/// [`release`](crate::PermitExpirableSemaphore::release) it or
/// [`update its lease`](crate::PermitExpirableSemaphore::update_lease). Send it as text with
/// [`as_str`](Self::as_str) and make it again with [`PermitId::new`] or `parse`.
///
/// # Examples
///
/// ```
/// use redlatch::PermitId;
/// let id: PermitId = "0123456789abcdef0123456789abcdef".parse().unwrap();
/// assert_eq!(id, PermitId::new("0123456789abcdef0123456789abcdef"));
/// assert_eq!(id, PermitId::new("0123456789ABCDEF0123456789ABCDEF")); // the same permit
/// assert_eq!(id.to_string(), id.as_str());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId(String);

impl PermitId {
    /// A permit id from its text, as [`as_str`](Self::as_str) gave it (hex is taken in
    /// either case, and kept in lowercase). Not checked: an id that is no permit of the
    /// semaphore is reported by the calls that use it.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = redlatch::PermitId::new("0123456789abcdef0123456789abcdef");
    /// assert_eq!(id.as_str().len(), 32);
    /// ```
    pub fn new(id: impl Into<String>) -> PermitId {
        let mut id = id.into();
        // Hex in either case is the same permit (the same bytes in Redis): one spelling, so
        // that equal permits are equal ids.
        if id.bytes().all(|b| b.is_ascii_hexdigit()) {
            id.make_ascii_lowercase();
        }
        PermitId(id)
    }

    /// The id as text, as Redisson shows its ids too: Redis holds the bytes that the hex
    /// stands for (the member of the `{name}:timeout` sorted set).
    ///
    /// # Examples
    ///
    /// ```
    /// let id = redlatch::PermitId::new("abc");
    /// assert_eq!(id.as_str(), "abc");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's member in the semaphore's `{name}:timeout` set: the 16 bytes its hex stands
    /// for, as Redisson stores them.
    pub(super) fn member(&self) -> Vec<u8> {
        keys::permit_member(&self.0)
    }

    /// A fresh random id: 32 lowercase hex characters.
    pub(super) fn random() -> PermitId {
        PermitId(uuid::Uuid::new_v4().simple().to_string())
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for PermitId {
    fn from(id: String) -> PermitId {
        PermitId::new(id)
    }
}

impl std::str::FromStr for PermitId {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> std::result::Result<PermitId, Self::Err> {
        Ok(PermitId::new(s))
    }
}

impl AsRef<str> for PermitId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
