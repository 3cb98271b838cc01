//! A value in Redis guarded by fencing tokens: the resource side of a fenced lock.

use std::sync::Arc;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::lock::{parse_token, LockGuard, Ownership};
use crate::names::Named;
use crate::scripts;

/// Tokens must stay below 2^53 - 1: the fence script compares them as Lua numbers (doubles),
/// exact only up to there. The fenced lock's counter stops there too.
const MAX_TOKEN: u64 = (1 << 53) - 1;

/// A value kept in Redis that only the newest holder of a [fenced lock] may change.
///
/// A lease cannot stop a holder that was paused (GC, swap, SIGSTOP) or cut off past its lease
/// from acting as if it still held the lock. Fencing can: every write carries the writer's
/// [token](LockGuard::token), and one script call checks it against the newest token the
/// value has seen and writes only if it is not older. A stale holder's write is refused with
/// [`Error::StaleToken`]; the newer holder's data stays intact.
///
/// A write computed from the value (a counter, a balance) reads it with
/// [`read_for_update`](Self::read_for_update), which is fenced too and claims the value for
/// the reader's token: a stale holder's write can then no longer land between the read and
/// the write. A plain [`read`](Self::read) (or a `GET`) claims nothing, and an update made
/// from it can be lost.
///
/// A token can be handed out twice when a Redis failover loses the increment of the token
/// counter (see the guide's [safety chapter](crate::_guide::safety)). The fence therefore remembers which holder
/// wrote with the newest token and refuses the same token from anybody else: of two holders
/// with one token, the first to write wins and the other is refused.
///
/// Keys: the value is the STRING `name` (readable with a plain `GET`); the fence is the HASH
/// `redlatch_fence:{name}` (`token`, `holder`), in the same cluster slot. The resource may
/// live on another Redis than the lock: make it from a client connected there.
///
/// Made by [`Client::fenced_resource`]; cheap to clone.
///
/// [fenced lock]: Client::fenced_lock
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let balance = client.fenced_resource("account:7:balance");
/// let guard = client.fenced_lock("account:7").lock()?;
/// match balance.write(&guard, "100") {
///     Ok(()) => {}
///     // Somebody acquired the lock after us and wrote: our hold is stale, drop the work.
///     Err(e) if e.is_stale_token() => eprintln!("not written: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FencedResource {
    client: Client,
    /// The mapped name: the key of the value.
    name: Arc<str>,
    /// The name as the caller gave it.
    given: Arc<str>,
    fence: Arc<str>,
    /// The keys of this client's receipts for writes (see `lua/fenced_write.lua`).
    receipts: keys::UnlockLatches,
}

impl FencedResource {
    pub(crate) fn new(client: Client, name: Named) -> FencedResource {
        FencedResource {
            fence: keys::resource_fence(&name.key).into(),
            receipts: keys::UnlockLatches::new(&name.key, client.id()),
            client,
            name: name.key,
            given: name.given,
        }
    }

    /// The value's name: its Redis key.
    ///
    /// # Examples
    ///
    /// ```
    /// # let client = redlatch::Client::open("redis://127.0.0.1/").unwrap();
    /// assert_eq!(client.fenced_resource("balance").name(), "balance");
    /// ```
    // `name` is the mapped name (the key); this returns the name as given.
    #[allow(clippy::misnamed_getters)]
    pub fn name(&self) -> &str {
        &self.given
    }

    /// Sets the value, if `guard`'s token is not older than the newest token seen here.
    ///
    /// # Errors
    ///
    /// [`Error::StaleToken`] if a newer token (or the same token from another holder) has
    /// written: nothing was changed. [`Error::InvalidArgument`] if the guard is not of a
    /// fenced lock; [`Error::WrongType`] if a key holds another type; connection errors (the
    /// outcome of a write whose reply was lost is unknown; a retry with the same guard is
    /// safe).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.fenced_lock("report").lock()?;
    /// client.fenced_resource("report:body").write(&guard, b"42 rows")?;
    /// # Ok(()) }
    /// ```
    pub fn write<O: Ownership>(&self, guard: &LockGuard<O>, value: impl AsRef<[u8]>) -> Result<()> {
        let token = self.token_of(guard)?;
        self.write_with_token(token, guard.owner(), value)
    }

    /// As [`write`](Self::write), with a token obtained elsewhere (another process, or a
    /// Java `RFencedLock`) and the id of its holder.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write); [`Error::InvalidArgument`] for token 0, a token of 2^53 - 1
    /// or more (tokens are compared exactly only below that), or an empty holder.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let resource = client.fenced_resource("report:body");
    /// let err = resource.write_with_token(1, "old-holder", "x").unwrap_err();
    /// assert!(err.is_stale_token());
    /// # Ok(()) }
    /// ```
    pub fn write_with_token(
        &self,
        token: u64,
        holder: &str,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.fenced("set", token, holder, value.as_ref())
    }

    /// Deletes the value, if `guard`'s token is not older than the newest token seen here.
    /// The fence stays, so older tokens remain refused.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let guard = client.fenced_lock("report").lock()?;
    /// client.fenced_resource("report:body").delete(&guard)?;
    /// # Ok(()) }
    /// ```
    pub fn delete<O: Ownership>(&self, guard: &LockGuard<O>) -> Result<()> {
        let token = self.token_of(guard)?;
        self.fenced("del", token, guard.owner(), b"")
    }

    /// The current value (`None` if there is none), read under `guard`'s token, which claims
    /// the value for it: from then on an older token can neither write nor read for update
    /// here, as after a write. The first half of a fenced read-modify-write: read, compute,
    /// [`write`](Self::write) with the same guard. A plain [`read`](Self::read) leaves a gap
    /// there: a stale holder's write that lands between the read and the write is accepted
    /// (no newer token has written yet) and then overwritten, an update lost. After this read
    /// the stale write is refused, and the holder that did it learns so.
    ///
    /// The check is a write's: refused if a newer token, or the same token from another
    /// holder, has written or read for update here.
    ///
    /// # Errors
    ///
    /// [`Error::StaleToken`] if refused: nothing was read or changed, and a write with this
    /// guard would be refused too. Otherwise as [`write`](Self::write) (a read whose reply was
    /// lost may have claimed the value; a retry with the same guard is safe).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let balance = client.fenced_resource("account:7:balance");
    /// let guard = client.fenced_lock("account:7").lock()?;
    /// let now: i64 = match balance.read_for_update(&guard)? {
    ///     Some(v) => String::from_utf8_lossy(&v).parse().unwrap_or(0),
    ///     None => 0,
    /// };
    /// // A stale holder can no longer write here; ours goes through unless a newer one came.
    /// balance.write(&guard, (now + 10).to_string())?;
    /// # Ok(()) }
    /// ```
    pub fn read_for_update<O: Ownership>(&self, guard: &LockGuard<O>) -> Result<Option<Vec<u8>>> {
        let token = self.token_of(guard)?;
        self.read_for_update_with_token(token, guard.owner())
    }

    /// As [`read_for_update`](Self::read_for_update), with a token obtained elsewhere
    /// (another process, or a Java `RFencedLock`) and the id of its holder.
    ///
    /// # Errors
    ///
    /// As [`read_for_update`](Self::read_for_update); [`Error::InvalidArgument`] as for
    /// [`write_with_token`](Self::write_with_token).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let resource = client.fenced_resource("report:body");
    /// let body = resource.read_for_update_with_token(42, "worker-3")?;
    /// resource.write_with_token(42, "worker-3", "new body")?;
    /// # Ok(()) }
    /// ```
    pub fn read_for_update_with_token(&self, token: u64, holder: &str) -> Result<Option<Vec<u8>>> {
        self.check_call(token, holder)?;
        // Sent again after an interrupted read, as a write is: the same holder's token passes.
        let backend = &self.client.inner.backend;
        let reply: Vec<redis::Value> =
            backend.run_repeatable(&self.name, Policy::Retried, |c| {
                scripts::FENCED_READ
                    .key(&self.name)
                    .key(&self.fence)
                    .arg(token)
                    .arg(holder)
                    .invoke(c)
            })?;
        match &reply[..] {
            [redis::Value::Int(1)] | [redis::Value::Int(1), redis::Value::Nil] => Ok(None),
            [redis::Value::Int(1), redis::Value::BulkString(v)] => Ok(Some(v.clone())),
            [redis::Value::Int(0), redis::Value::Int(newest)] => {
                Err(self.stale("read for update", token, holder, *newest))
            }
            _ => Err(Error::Protocol(format!(
                "fenced read script replied {reply:?}"
            ))),
        }
    }

    /// The current value, `None` if there is none. Reading needs no token, and is not fenced:
    /// a holder that computes its next write from this value can lose an update (a stale
    /// holder's write can land after this read and be overwritten). Use
    /// [`read_for_update`](Self::read_for_update) for a read-modify-write.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the key is not a string; connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let body: Option<Vec<u8>> = client.fenced_resource("report:body").read()?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> Result<Option<Vec<u8>>> {
        self.check_name()?;
        self.client
            .inner
            .backend
            .run_repeatable(&self.name, Policy::Retried, |c| {
                redis::cmd("GET").arg(&*self.name).query(c)
            })
    }

    /// The newest token that has written here, `None` if none has.
    ///
    /// # Errors
    ///
    /// [`Error::WrongType`] if the fence is not a hash of integers; connection errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let newest = client.fenced_resource("report:body").newest_token()?;
    /// # Ok(()) }
    /// ```
    pub fn newest_token(&self) -> Result<Option<u64>> {
        self.check_name()?;
        let backend = &self.client.inner.backend;
        let seen: Option<String> = backend.run_repeatable(&self.fence, Policy::Retried, |c| {
            redis::cmd("HGET")
                .arg(&*self.fence)
                .arg(keys::RESOURCE_TOKEN_FIELD)
                .query(c)
        })?;
        parse_token(seen, &self.fence)
    }

    fn check_name(&self) -> Result<()> {
        crate::names::check_name("fenced resource", &self.name)
    }

    fn token_of<O: Ownership>(&self, guard: &LockGuard<O>) -> Result<u64> {
        guard.token().ok_or_else(|| {
            Error::invalid(format!(
                "the guard of `{}` carries no fencing token: only a fenced lock's guard does",
                guard.lock().key()
            ))
        })
    }

    /// Checks a fenced call's name, token and holder before anything is sent.
    fn check_call(&self, token: u64, holder: &str) -> Result<()> {
        self.check_name()?;
        if token == 0 || token >= MAX_TOKEN {
            return Err(Error::invalid(format!(
                "fencing token {token} out of range (1 to 2^53 - 2)"
            )));
        }
        if holder.is_empty() {
            return Err(Error::invalid("empty holder id"));
        }
        Ok(())
    }

    /// The error of a fenced `op` the fence refused.
    fn stale(&self, op: &str, token: u64, holder: &str, newest: i64) -> Error {
        log::debug!(
            "fenced {op} of `{}` refused: token {token} of {holder}, newest {newest}",
            self.name
        );
        Error::StaleToken {
            name: self.name.to_string(),
            token,
            newest: newest as u64,
        }
    }

    fn fenced(&self, op: &str, token: u64, holder: &str, value: &[u8]) -> Result<()> {
        self.check_call(token, holder)?;
        // Sent again after an interrupted read, with the same receipt: the first call's
        // verdict, even if a newer token was used since it was written.
        let receipts = &self.receipts;
        let reply: Vec<i64> =
            (self.client).receipted(&self.name, Policy::Retried, receipts, |c, receipt, ttl| {
                scripts::FENCED_WRITE
                    .key(&self.name)
                    .key(&self.fence)
                    .key(receipt)
                    .arg(token)
                    .arg(holder)
                    .arg(op)
                    .arg(value)
                    .arg(ttl)
                    .invoke(c)
            })?;
        match reply[..] {
            [1, _] => Ok(()),
            [0, newest] => Err(self.stale(op, token, holder, newest)),
            _ => Err(Error::Protocol(format!(
                "fenced write script replied {reply:?}"
            ))),
        }
    }
}

impl std::fmt::Debug for FencedResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedResource")
            .field("name", &self.name)
            .finish()
    }
}
