//! The lock-order warnings of a deployment as an operator sees them:
//! [`Client::lock_order_warnings`], every pair of locks on record as taken in two orders that
//! can deadlock (recorded by clients with
//! [`lock_order_checks`](crate::ConfigBuilder::lock_order_checks) on).

use crate::client::Client;
use crate::error::Result;
use crate::keys::LOCK_ORDER;
use crate::lock::{conflicts, parse_order, LockOrderWarning};

impl Client {
    /// Every pair of locks that some owners took in one order and others in the opposite
    /// order (each order holding one lock while taking the other, not both reads), as recorded
    /// by the clients of the deployment that check lock order, on every master of a cluster,
    /// sorted by lock names: what `redlatch waits` lists under its waits. Records live a day
    /// past the last time a process took the pair.
    ///
    /// It costs one pass of `SCAN` over each master's keyspace and one read per pair on
    /// record: a tool for operators, not for hot paths.
    ///
    /// # Errors
    ///
    /// Connection errors and timeouts.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for warning in client.lock_order_warnings()? {
    ///     println!("{warning}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_order_warnings(&self) -> Result<Vec<LockOrderWarning>> {
        let mapper = &self.inner.config.name_mapper;
        let shown = |key: &str| mapper.name_of(key).unwrap_or_else(|| key.to_owned());
        let mut found = Vec::new();
        for key in self.scan(&format!("{LOCK_ORDER}:*"))? {
            let fields: Vec<(String, String)> = self
                .inner
                .backend
                .run(&key, |c| redis::cmd("HGETALL").arg(&key).query(c))?;
            let name = |f: &str| fields.iter().find(|(k, _)| k == f).map(|(_, v)| shown(v));
            let (Some(first), Some(second)) = (name("first"), name("second")) else {
                continue;
            };
            let orders: Vec<_> = fields
                .iter()
                .filter_map(|(f, v)| parse_order(&first, &second, f, v))
                .collect();
            found.extend(conflicts(&first, &orders));
        }
        Ok(found)
    }
}
