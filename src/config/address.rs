//! [`ServerAddress`]: what [`Config::builder`](super::Config::builder) takes to find a single
//! server.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult};

/// Where a single server is: a URL (`&str`, `String`, `&String`), or what a service that
/// already talks to Redis has at hand: a [`redis::ConnectionInfo`] (from its own
/// configuration), a [`redis::Client`] (its address, credentials, database and protocol are
/// taken; redlatch opens its own connections), or a [`redis::ConnectionAddr`].
///
/// # Examples
///
/// ```
/// use redlatch::Config;
///
/// let url = String::from("redis://127.0.0.1:6379/");
/// Config::builder(&url).build().unwrap();
///
/// // A service's own `redis::Client`, handed over.
/// let theirs = redis::Client::open("redis://127.0.0.1:6379/2").unwrap();
/// Config::builder(&theirs).build().unwrap();
/// ```
pub trait ServerAddress {
    /// The connection info of this address, or why it is not one.
    fn connection_info(self) -> RedisResult<ConnectionInfo>;
}

impl ServerAddress for &str {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        self.into_connection_info()
    }
}

impl ServerAddress for String {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        self.as_str().into_connection_info()
    }
}

impl ServerAddress for &String {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        self.as_str().into_connection_info()
    }
}

impl ServerAddress for ConnectionInfo {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        Ok(self)
    }
}

impl ServerAddress for &ConnectionInfo {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        Ok(self.clone())
    }
}

impl ServerAddress for ConnectionAddr {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        self.into_connection_info()
    }
}

impl ServerAddress for redis::Client {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        Ok(self.get_connection_info().clone())
    }
}

impl ServerAddress for &redis::Client {
    fn connection_info(self) -> RedisResult<ConnectionInfo> {
        Ok(self.get_connection_info().clone())
    }
}
