//! Who a holder is on the network: the connections of its client, from `CLIENT LIST`.
//!
//! Each client names its connections `<prefix>:<client id>` (see
//! [`ConfigBuilder::client_name`](crate::ConfigBuilder::client_name)), and an owner id is
//! `<client id>:<thread>`: a holder's connections are those whose name ends in `:<client id>`.

use std::time::Duration;

use super::report::{ClientConnection, Holder, Inspection, QueueEntry};
use crate::backend::Policy;
use crate::client::Client;
use crate::error::Result;
use crate::keys;

impl ClientConnection {
    /// The client id in its name: what follows the last `:` (`None` for a name without one).
    fn client_id(&self) -> Option<&str> {
        keys::connection_client_id(&self.name)
    }

    /// Whether it may be the connection of a lock owner that does not name its connections
    /// with its id (a Redisson client's): not a redlatch client's (whose name ends in its
    /// client id, a UUID), nor a replication link or a sentinel's.
    fn may_be_anonymous_owner(&self) -> bool {
        let redlatch = self
            .client_id()
            .is_some_and(|id| uuid::Uuid::parse_str(id).is_ok());
        let replication = self.flags.contains(['S', 'M']);
        !redlatch && !replication && !self.name.starts_with("sentinel-")
    }
}

/// The connections in a `CLIENT LIST` reply (one line each, `key=value` fields).
fn parse(reply: &str, server: &str) -> Vec<ClientConnection> {
    reply
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let field = |key: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                    .filter(|v| !v.is_empty())
            };
            let secs =
                |key| Duration::from_secs(field(key).and_then(|v| v.parse().ok()).unwrap_or(0));
            ClientConnection {
                addr: field("addr").unwrap_or_default().to_owned(),
                name: field("name").unwrap_or_default().to_owned(),
                id: field("id").and_then(|v| v.parse().ok()).unwrap_or(0),
                lib_name: field("lib-name").map(str::to_owned),
                lib_ver: field("lib-ver").map(str::to_owned),
                age: secs("age"),
                idle: secs("idle"),
                flags: field("flags").unwrap_or_default().to_owned(),
                server: server.to_owned(),
            }
        })
        .collect()
}

impl Client {
    /// The connections to Redis of every client (`CLIENT LIST`, on every master of a
    /// cluster): with [`Inspection::trace`], which host and process holds or waits for a
    /// lock.
    ///
    /// # Errors
    ///
    /// Connection errors and timeouts; a Redis error if the ACL user may not run
    /// `CLIENT LIST`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let mine = client.connections()?.into_iter().filter(|c| c.name.ends_with(client.id()));
    /// println!("{} connection(s) of this client", mine.count());
    /// # Ok(()) }
    /// ```
    pub fn connections(&self) -> Result<Vec<ClientConnection>> {
        let mut all = Vec::new();
        self.inner.backend.for_each_master(|pool| {
            let server = pool.endpoint().describe();
            let reply: String = pool.run("", Policy::Retried, |c| {
                redis::cmd("CLIENT").arg("LIST").query(c)
            })?;
            all.extend(parse(&reply, &server));
            Ok(())
        })?;
        Ok(all)
    }
}

impl Inspection {
    /// Attaches to each holder, reader and fair-queue waiter the `connections` of its client
    /// (from [`Client::connections`]): [`Holder::connections`] and
    /// [`QueueEntry::connections`]. An owner whose client has no connection left gets an
    /// empty list: a crashed holder, whose hold lasts until its [lease](Self::lease) runs out.
    /// Only redlatch names its connections with its client id: an owner that no connection
    /// names, on servers where some client connections are not named by redlatch (Redisson's,
    /// which carry no name or the `clientName` of its config, or a `redis-cli`'s), may be one
    /// of those and alive. Its connections stay `None`: not traced. (Replication links and
    /// sentinels' connections do not count.)
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let connections = client.connections()?;
    /// if let Some(mut found) = client.inspect("orders")? {
    ///     found.trace(&connections);
    ///     for holder in &found.holders {
    ///         match holder.connections.as_deref() {
    ///             Some([]) => println!("{}: client gone", holder.owner),
    ///             None => println!("{}: not traced (another client library?)", holder.owner),
    ///             Some(conns) => println!("{}: from {}", holder.owner, conns[0].addr),
    ///         }
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn trace(&mut self, connections: &[ClientConnection]) {
        let others = connections
            .iter()
            .any(ClientConnection::may_be_anonymous_owner);
        let of = |client_id: &str| -> Option<Vec<ClientConnection>> {
            let found: Vec<ClientConnection> = connections
                .iter()
                .filter(|c| c.client_id() == Some(client_id))
                .cloned()
                .collect();
            (!found.is_empty() || !others).then_some(found)
        };
        for h in self.holders.iter_mut().chain(self.readers.iter_mut()) {
            let Holder {
                owner, connections, ..
            } = h;
            *connections = of(&owner.client_id);
        }
        for QueueEntry {
            owner, connections, ..
        } in &mut self.queue
        {
            *connections = of(&owner.client_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_list_lines_are_read_field_by_field() {
        let reply =
            "id=7 addr=10.0.0.5:51234 laddr=10.0.0.1:6379 fd=9 name=billing:0b3c-9a age=42 \
                     idle=3 flags=N db=0 lib-name=redlatch lib-ver=0.1.0\n\
                     id=8 addr=10.0.0.6:40000 fd=10 name= age=1 idle=1 flags=N db=0\n";
        let conns = parse(reply, "127.0.0.1:6379");
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[0].addr, "10.0.0.5:51234");
        assert_eq!(conns[0].name, "billing:0b3c-9a");
        assert_eq!(conns[0].client_id(), Some("0b3c-9a"));
        assert_eq!((conns[0].id, conns[0].age), (7, Duration::from_secs(42)));
        assert_eq!(conns[0].lib_name.as_deref(), Some("redlatch"));
        assert_eq!(
            (conns[1].name.as_str(), conns[1].lib_name.as_deref()),
            ("", None)
        );
        assert_eq!(conns[1].client_id(), None);
        assert!(parse("", "x").is_empty());
    }

    const OWNER: &str = "0b3c1d2e-0000-4000-8000-000000000001";

    /// The holder of an inspection (client `OWNER`, thread 1) traced with `list`.
    fn traced(list: &str) -> Option<Vec<ClientConnection>> {
        let mut found =
            crate::inspect::tests::inspection(crate::inspect::Kind::Reentrant, &[(1, 1)], &[]);
        found.holders[0].owner.client_id = OWNER.to_owned();
        found.trace(&parse(list, "s"));
        found.holders.remove(0).connections
    }

    #[test]
    fn an_owner_no_connection_names_is_gone_only_where_every_client_is_named() {
        let ours = format!("id=1 addr=a:1 name=redlatch:{OWNER} flags=N\n");
        let other = "id=2 addr=b:2 name=app:0b3c1d2e-0000-4000-8000-000000000002 flags=N\n";
        let anonymous = "id=3 addr=c:3 name= flags=N\n";
        let replica = "id=4 addr=d:4 name= flags=S\n";
        let sentinel = "id=5 addr=e:5 name=sentinel-1a2b3c4d-cmd flags=N\n";
        assert_eq!(traced(&format!("{ours}{anonymous}")).unwrap()[0].id, 1);
        assert_eq!(traced(other), Some(Vec::new()), "gone");
        assert_eq!(
            traced(&format!("{other}{replica}{sentinel}")),
            Some(Vec::new()),
            "replication and sentinels do not hold locks"
        );
        assert_eq!(traced(&format!("{other}{anonymous}")), None, "untraced");
        assert_eq!(traced("id=6 addr=f:6 name=java-app flags=N\n"), None);
    }
}
