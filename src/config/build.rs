//! [`ConfigBuilder::build`]: the checks every setting must pass, and the [`Config`] they make.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::names::check_name;
use crate::net::{Tls, LIB_NAME};
use crate::time::check_duration;

use super::{Config, ConfigBuilder, Topology};

/// The shortest `pubsub_ping_interval`: a `PING` must have time to be answered.
const MIN_PING_INTERVAL: Duration = Duration::from_millis(100);

impl ConfigBuilder {
    /// Checks the settings and builds the [`Config`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an unparsable URL, a zero
    /// pool size, a zero or absurd (over one year) timeout, a `pubsub_ping_interval` under
    /// 100 ms, a batch size out of range, a
    /// replica setting of 0 replicas or a timeout not shorter than the response timeout, or
    /// bad spin back-off bounds.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlatch::Config::builder("redis://127.0.0.1/").pool_size(0).build().unwrap_err();
    /// assert!(err.is_invalid_argument());
    /// ```
    pub fn build(mut self) -> Result<Config> {
        // Taken out (an error left in its place): what follows borrows the other settings.
        let given = std::mem::replace(&mut self.topology, Err(String::new()))
            .map_err(|e| Error::invalid(format!("bad redis URL: {e}")))?;
        // TLS is on for `rediss://` addresses: the server's, the sentinels' or the seeds'.
        let tls_for = |urls: &[redis::ConnectionInfo]| {
            if urls.is_empty() {
                return Err(Error::invalid("no server address given"));
            }
            Tls::for_urls(urls, &self.certificates)
        };
        let with_node_settings = |mut node: redis::RedisConnectionInfo| {
            if let Some(user) = &self.username {
                node = node.set_username(user);
            }
            if let Some(password) = &self.password {
                node = node.set_password(password);
            }
            if let Some(db) = self.database {
                node = node.set_db(db);
            }
            // `CLIENT SETINFO` (Redis 7.2+; redis-rs sends it and ignores an error).
            node.set_lib_name(LIB_NAME, env!("CARGO_PKG_VERSION"))
        };
        let data_node = |url: redis::ConnectionInfo| {
            let node = with_node_settings(url.redis_settings().clone());
            url.set_redis_settings(node)
        };
        let (topology, tls) = match given {
            Topology::Single(url) => {
                let tls = tls_for(std::slice::from_ref(&url))?;
                (Topology::Single(data_node(tls.apply(url)?)), tls)
            }
            Topology::Sentinel {
                sentinels,
                master,
                node,
            } => {
                let tls = tls_for(&sentinels)?;
                let sentinels = sentinels
                    .into_iter()
                    .map(|u| tls.apply(u))
                    .collect::<Result<Vec<_>>>()?;
                check_name("sentinel master", &master)?;
                let node = with_node_settings(node);
                let topology = Topology::Sentinel {
                    sentinels,
                    master,
                    node,
                };
                (topology, tls)
            }
            Topology::Cluster { seeds } => {
                let tls = tls_for(&seeds)?;
                let seeds = seeds
                    .into_iter()
                    .map(|u| tls.apply(u).map(data_node))
                    .collect::<Result<Vec<_>>>()?;
                if seeds.iter().any(|u| u.redis_settings().db() != 0) {
                    return Err(Error::invalid("a Redis Cluster has only database 0"));
                }
                (Topology::Cluster { seeds }, tls)
            }
        };
        self.check_settings()?;
        Ok(Config {
            topology,
            retry_attempts: self.retry_attempts,
            retry_delay: self.retry_delay,
            pool_size: self.pool_size,
            batch_lanes: self.batch_lanes.min(self.pool_size),
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
            pubsub_ping_interval: self.pubsub_ping_interval,
            watchdog_timeout: self.watchdog_timeout,
            max_hold: self.max_hold,
            renew_batch_size: self.renew_batch_size,
            fair_thread_wait: self.fair_thread_wait,
            spin_backoff: self.spin_backoff,
            name_mapper: self.name_mapper,
            replica_sync: self.replica_sync,
            sharded_subscription_mode: self.sharded_subscription_mode,
            tls,
            client_name: self.client_name,
            connection_name: None,
            metrics_lock_names: self.metrics_lock_names,
            check_on_connect: self.check_on_connect,
            deadlock_check_after: self.deadlock_check_after,
            lock_order_checks: self.lock_order_checks,
            history: self.history,
        })
    }

    /// The checks of every setting but the addresses.
    fn check_settings(&self) -> Result<()> {
        check_duration("retry_delay", self.retry_delay)?;
        if self.pool_size == 0 {
            return Err(Error::invalid("pool_size must be at least 1"));
        }
        check_duration("connect_timeout", self.connect_timeout)?;
        check_duration("response_timeout", self.response_timeout)?;
        check_duration("pubsub_ping_interval", self.pubsub_ping_interval)?;
        if self.pubsub_ping_interval < MIN_PING_INTERVAL {
            return Err(Error::invalid(format!(
                "pubsub_ping_interval must be at least {MIN_PING_INTERVAL:?}"
            )));
        }
        check_duration("watchdog_timeout", self.watchdog_timeout)?;
        check_duration("fair_thread_wait", self.fair_thread_wait)?;
        if self.history == Some(0) {
            return Err(Error::invalid("history_max_len must be at least 1"));
        }
        if let Some(after) = self.deadlock_check_after {
            check_duration("deadlock_check_after", after)?;
        }
        if let Some(max_hold) = self.max_hold {
            check_duration("max_hold", max_hold)?;
        }
        if self.watchdog_timeout < Duration::from_millis(3) {
            return Err(Error::invalid("watchdog_timeout must be at least 3 ms"));
        }
        if !(1..=10_000).contains(&self.renew_batch_size) {
            return Err(Error::invalid(
                "renew_batch_size must be between 1 and 10000",
            ));
        }
        self.spin_backoff.check()?;
        self.name_mapper.check()?;
        if let Some(sync) = self.replica_sync {
            if sync.replicas == 0 {
                return Err(Error::invalid("sync_replicas needs at least 1 replica"));
            }
            check_duration("sync_replicas timeout", sync.timeout)?;
            if sync.timeout >= self.response_timeout {
                return Err(Error::invalid(format!(
                    "sync_replicas timeout {:?} must be shorter than response_timeout {:?}",
                    sync.timeout, self.response_timeout
                )));
            }
        }
        check_client_name(&self.client_name)?;
        Ok(())
    }
}

/// A connection name prefix Redis takes: not empty, no spaces or control characters
/// (`CLIENT SETNAME` refuses them).
fn check_client_name(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix.len() > 128 || !prefix.chars().all(|c| c.is_ascii_graphic()) {
        return Err(Error::invalid(format!(
            "client_name {prefix:?} must be 1 to 128 printable ASCII characters without spaces"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MAX_DURATION;

    #[test]
    fn rejects_bad_settings() {
        let b = || Config::builder("redis://127.0.0.1/");
        assert!(b().pool_size(0).build().unwrap_err().is_invalid_argument());
        assert!(b()
            .watchdog_timeout(Duration::ZERO)
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(b()
            .response_timeout(Duration::from_secs(400 * 24 * 3600))
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(b().renew_batch_size(0).build().is_err());
        for bad in [Duration::ZERO, Duration::from_millis(99), MAX_DURATION * 2] {
            let err = b().pubsub_ping_interval(bad).build().unwrap_err();
            assert!(err.is_invalid_argument(), "{bad:?}: {err}");
        }
        let ping = |d| {
            b().pubsub_ping_interval(d)
                .build()
                .unwrap()
                .pubsub_ping_interval()
        };
        assert_eq!(ping(Duration::from_millis(100)), Duration::from_millis(100));
        // A silent connection is dropped within two intervals: within 5 s by default.
        assert!(b().build().unwrap().pubsub_ping_interval() * 2 <= Duration::from_secs(5));
        assert!(b()
            .max_hold(Duration::ZERO)
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(b()
            .max_hold(Duration::from_secs(400 * 24 * 3600))
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert_eq!(b().build().unwrap().max_hold(), None);
        assert!(b()
            .fair_thread_wait(Duration::ZERO)
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(Config::builder("nonsense://x")
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(b().build().is_ok());
        assert!(b()
            .retry_delay(Duration::ZERO)
            .build()
            .unwrap_err()
            .is_invalid_argument());
        let none: [&str; 0] = [];
        assert!(Config::cluster(none)
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(Config::sentinel(["redis://127.0.0.1:26379"], "")
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(Config::cluster(["redis://127.0.0.1:7000/1"])
            .build()
            .unwrap_err()
            .is_invalid_argument());
        assert!(Config::builder("redis+unix:///tmp/redis.sock")
            .build()
            .unwrap_err()
            .is_invalid_argument());
        let sync = |n, ms| b().sync_replicas(n, Duration::from_millis(ms)).build();
        assert!(sync(0, 100).unwrap_err().is_invalid_argument());
        assert!(sync(1, 0).unwrap_err().is_invalid_argument());
        assert!(sync(1, 3000).unwrap_err().is_invalid_argument());
        assert_eq!(
            sync(2, 500).unwrap().sync_replicas(),
            Some((2, Duration::from_millis(500)))
        );
        assert_eq!(b().build().unwrap().sync_replicas(), None);
    }

    #[test]
    fn node_settings_override_the_urls() {
        let config = Config::builder("redis://u:p@127.0.0.1:6380/3")
            .password("other")
            .database(5)
            .build()
            .unwrap();
        let Topology::Single(info) = &config.topology else {
            panic!("single")
        };
        let node = info.redis_settings();
        assert_eq!(
            (node.username(), node.password(), node.db()),
            (Some("u"), Some("other"), 5)
        );

        let config = Config::sentinel(["redis://127.0.0.1:26379", "redis://127.0.0.1:26380"], "m")
            .username("app")
            .password("pw")
            .database(1)
            .build()
            .unwrap();
        let Topology::Sentinel {
            sentinels,
            master,
            node,
        } = &config.topology
        else {
            panic!("sentinel")
        };
        assert_eq!((sentinels.len(), master.as_str()), (2, "m"));
        assert_eq!(
            (node.username(), node.password(), node.db()),
            (Some("app"), Some("pw"), 1)
        );
        assert_eq!(sentinels[0].redis_settings().password(), None);
        assert_eq!(
            (config.retry_attempts(), config.retry_delay()),
            (3, Duration::from_millis(500))
        );
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn rediss_without_the_feature_says_which_feature() {
        let err = Config::builder("rediss://10.0.0.1:7000")
            .build()
            .unwrap_err();
        assert!(err.is_invalid_argument());
        assert!(err.to_string().contains("`tls` feature"), "{err}");
    }
}
