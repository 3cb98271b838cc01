//! Object names as the caller gives them, and as Redis sees them: [`NameMapper`], Redisson's
//! `NameMapper` (`Config.setNameMapper`). A client maps each name once, when it makes an
//! object (`Client::named`); the mapped name is the key from which `keys.rs` makes every
//! helper key and channel, and the given name is what the object's `name()` returns.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};

type MapFn = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Maps every object name before any key is made from it, as Redisson's `NameMapper`
/// (`Config.setNameMapper`): several applications share one Redis by each keeping its
/// names under its own prefix, and a Rust and a Java service with the same mapper share
/// the same locks.
///
/// The mapped name stands for the name everywhere: it is the lock's key, and it is inside
/// every helper key and channel (`redisson_lock__channel:{app1:orders}`,
/// `redisson_lock_queue:{app1:orders}`, ...), as in Redisson, where an object keeps the
/// mapped name as its raw name. [`Client::inspect`](crate::Client::inspect),
/// [`list`](crate::Client::list) and [`watch`](crate::Client::watch) take and show names
/// as the caller gives them.
///
/// Set it with [`ConfigBuilder::name_prefix`](crate::ConfigBuilder::name_prefix) or
/// [`ConfigBuilder::name_mapper`](crate::ConfigBuilder::name_mapper). Defaults to
/// [`identity`](Self::identity).
///
/// # Examples
///
/// ```
/// let mapper = redlatch::NameMapper::prefix("app1:");
/// assert_eq!(mapper.map("orders"), "app1:orders");
/// assert_eq!(mapper.map("app1:orders"), "app1:orders"); // as Redisson: already prefixed
/// assert_eq!(mapper.unmap("app1:orders"), "orders");
/// ```
#[derive(Clone, Default)]
pub struct NameMapper(Mapping);

#[derive(Clone, Default)]
enum Mapping {
    #[default]
    Identity,
    Prefix(Arc<str>),
    Custom {
        map: MapFn,
        unmap: MapFn,
    },
}

impl NameMapper {
    /// What every mapped name starts with: `""` for the identity, the prefix for
    /// [`prefix`](Self::prefix); `None` for a custom mapping, which may map a name to anything.
    pub(crate) fn common_prefix(&self) -> Option<&str> {
        match &self.0 {
            Mapping::Identity => Some(""),
            Mapping::Prefix(prefix) => Some(prefix),
            Mapping::Custom { .. } => None,
        }
    }

    /// Names are used as given (Redisson's `NameMapper.direct()`, `DefaultNameMapper`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::NameMapper::identity().map("orders"), "orders");
    /// ```
    pub fn identity() -> NameMapper {
        NameMapper(Mapping::Identity)
    }

    /// Puts `prefix` in front of every name, as Redisson's `PrefixNameMapper`: a name that
    /// already starts with `prefix` is left as it is, and unmapping strips the prefix from
    /// names that start with it. An empty prefix is the identity.
    ///
    /// [`ConfigBuilder::build`](crate::ConfigBuilder::build) refuses a prefix with a
    /// control character (a newline pasted in from a file is the usual one).
    ///
    /// # Examples
    ///
    /// ```
    /// let mapper = redlatch::NameMapper::prefix("billing:");
    /// assert_eq!(mapper.map("invoices"), "billing:invoices");
    /// assert_eq!(mapper.unmap("other"), "other");
    /// ```
    pub fn prefix(prefix: &str) -> NameMapper {
        if prefix.is_empty() {
            return NameMapper::identity();
        }
        NameMapper(Mapping::Prefix(prefix.into()))
    }

    /// Any pair of functions, as a custom Redisson `NameMapper`: `map` turns a name into the
    /// name that keys are made from, `unmap` turns it back. For a Java service to share
    /// the objects, its mapper must map names the same way.
    ///
    /// `unmap(map(name))` should give `name` back: [`list`](crate::Client::list) shows only
    /// names for which `map(unmap(key)) == key`. [`ConfigBuilder::build`](crate::ConfigBuilder::build)
    /// checks this on one sample name, and that `map` gives no empty name.
    ///
    /// # Examples
    ///
    /// ```
    /// let mapper = redlatch::NameMapper::custom(|n| n.to_uppercase(), |n| n.to_lowercase());
    /// assert_eq!(mapper.map("orders"), "ORDERS");
    /// assert_eq!(mapper.unmap("ORDERS"), "orders");
    /// ```
    pub fn custom(
        map: impl Fn(&str) -> String + Send + Sync + 'static,
        unmap: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> NameMapper {
        NameMapper(Mapping::Custom {
            map: Arc::new(map),
            unmap: Arc::new(unmap),
        })
    }

    /// The name keys are made from for the object `name` (Redisson's `NameMapper.map`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::NameMapper::prefix("a:").map("b"), "a:b");
    /// ```
    pub fn map(&self, name: &str) -> String {
        match &self.0 {
            Mapping::Identity => name.to_owned(),
            Mapping::Prefix(prefix) if name.starts_with(&**prefix) => name.to_owned(),
            Mapping::Prefix(prefix) => format!("{prefix}{name}"),
            Mapping::Custom { map, .. } => map(name),
        }
    }

    /// The object name that the mapped name `mapped` stands for (Redisson's
    /// `NameMapper.unmap`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::NameMapper::prefix("a:").unmap("a:b"), "b");
    /// ```
    pub fn unmap(&self, mapped: &str) -> String {
        match &self.0 {
            Mapping::Identity => mapped.to_owned(),
            Mapping::Prefix(prefix) => mapped.strip_prefix(&**prefix).unwrap_or(mapped).to_owned(),
            Mapping::Custom { unmap, .. } => unmap(mapped),
        }
    }

    /// The object name that the key `key` is the mapped name of, or `None` when no name maps
    /// to it (another application's key, under another prefix or none).
    pub(crate) fn name_of(&self, key: &str) -> Option<String> {
        let name = self.unmap(key);
        (!name.is_empty() && self.map(&name) == key).then_some(name)
    }

    /// The `SCAN` glob that matches the mapped names of the names `pattern` matches, when
    /// this mapper can tell: the prefix (with glob characters escaped) before the pattern.
    /// A custom mapper cannot map a glob: the pattern is used as it is.
    pub(crate) fn map_pattern(&self, pattern: &str) -> String {
        match &self.0 {
            Mapping::Prefix(prefix) => {
                let mut glob = String::with_capacity(prefix.len() + pattern.len());
                for c in prefix.chars() {
                    if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                        glob.push('\\');
                    }
                    glob.push(c);
                }
                glob.push_str(pattern);
                glob
            }
            Mapping::Identity | Mapping::Custom { .. } => pattern.to_owned(),
        }
    }

    /// Whether names are used as given.
    pub(crate) fn is_identity(&self) -> bool {
        matches!(self.0, Mapping::Identity)
    }

    /// Checks the mapper when a config is built.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.0 {
            Mapping::Identity => Ok(()),
            Mapping::Prefix(prefix) => {
                if prefix.chars().any(char::is_control) {
                    return Err(Error::invalid(format!(
                        "name prefix {prefix:?} must not contain control characters"
                    )));
                }
                Ok(())
            }
            Mapping::Custom { map, unmap } => {
                const SAMPLE: &str = "redlatch-sample:name";
                let mapped = map(SAMPLE);
                if mapped.is_empty() {
                    return Err(Error::invalid("the name mapper maps a name to \"\""));
                }
                let back = unmap(&mapped);
                if back != SAMPLE {
                    return Err(Error::invalid(format!(
                        "the name mapper does not unmap what it maps: {SAMPLE:?} -> {mapped:?} -> {back:?}"
                    )));
                }
                Ok(())
            }
        }
    }
}

impl fmt::Debug for NameMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Mapping::Identity => f.write_str("NameMapper::Identity"),
            Mapping::Prefix(prefix) => f.debug_tuple("NameMapper::Prefix").field(prefix).finish(),
            Mapping::Custom { .. } => f.write_str("NameMapper::Custom"),
        }
    }
}

/// An object's name as the caller gave it, and the mapped name its keys are made from.
#[derive(Clone)]
pub(crate) struct Named {
    pub(crate) given: Arc<str>,
    pub(crate) key: Arc<str>,
}

impl Named {
    /// `name` mapped by `mapper`. An empty name stays empty, so that every object refuses it.
    pub(crate) fn new(mapper: &NameMapper, name: &str) -> Named {
        let key = if name.is_empty() {
            String::new()
        } else {
            mapper.map(name)
        };
        Named {
            given: name.into(),
            key: key.into(),
        }
    }
}

/// Refuses an empty object name (`what` is "lock", "semaphore", ...) before anything is sent.
pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{what} name must not be empty")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_maps_as_redisson() {
        let m = NameMapper::prefix("app1:");
        assert_eq!(m.map("orders"), "app1:orders");
        assert_eq!(m.map("app1:orders"), "app1:orders");
        assert_eq!(m.unmap("app1:orders"), "orders");
        assert_eq!(m.unmap("orders"), "orders");
        assert_eq!(m.name_of("app1:orders").as_deref(), Some("orders"));
        assert_eq!(m.name_of("app2:orders"), None);
        assert_eq!(m.name_of("app1:"), None);
        assert!(NameMapper::prefix("").is_identity());
    }

    #[test]
    fn prefix_glob_characters_are_escaped() {
        assert_eq!(
            NameMapper::prefix("a*[1]\\:").map_pattern("o?"),
            "a\\*\\[1\\]\\\\:o?"
        );
        assert_eq!(NameMapper::identity().map_pattern("o*"), "o*");
    }

    #[test]
    fn checks() {
        assert!(NameMapper::prefix("app1:").check().is_ok());
        assert!(NameMapper::prefix("app1\n")
            .check()
            .unwrap_err()
            .is_invalid_argument());
        let lossy = NameMapper::custom(|n| n.to_uppercase(), |n| n.to_owned());
        assert!(lossy.check().unwrap_err().is_invalid_argument());
        let empty = NameMapper::custom(|_| String::new(), |n| n.to_owned());
        assert!(empty.check().unwrap_err().is_invalid_argument());
        let upper = NameMapper::custom(|n| n.to_uppercase(), |n| n.to_lowercase());
        assert!(upper.check().is_ok());
    }

    #[test]
    fn empty_names_stay_empty() {
        let named = Named::new(&NameMapper::prefix("app1:"), "");
        assert_eq!(&*named.key, "");
        let named = Named::new(&NameMapper::prefix("app1:"), "orders");
        assert_eq!((&*named.given, &*named.key), ("orders", "app1:orders"));
    }
}
