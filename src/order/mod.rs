//! Lock-order warnings (opt-in, [`ConfigBuilder::lock_order_checks`]): each thread keeps
//! the locks it holds; a thread that takes one more (in a call that may wait) records each
//! pair "held, then taken" on the server, once per process; when the opposite order of a
//! pair is on record from anywhere, both orders are reported before they deadlock.
//!
//! A pair's records are one HASH (`keys::lock_order`, `lua/lock_order.lua`): a field per
//! direction and modes, `<d><held><taken>`, valued `<ms> <who and where>`. Two orders
//! conflict when each one's held mode blocks the other's taken mode: reads block no reads.
//!
//! - `report.rs`: the records as read back ([`LockOrder`], [`LockOrderWarning`]), and
//!   [`Client::lock_order_warnings`](crate::Client::lock_order_warnings).
//!
//! [`ConfigBuilder::lock_order_checks`]: crate::ConfigBuilder::lock_order_checks

mod report;

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::backend::Policy;
use crate::client::Client;
use crate::error::Result;
use crate::hold::{HoldEvent, Subject};
use crate::keys;
use crate::scripts;
use crate::time::millis;
use crate::whoami::process;
use report::{conflict, parse};
pub use report::{LockOrder, LockOrderWarning};

/// How long a pair's records stay on the server unless recorded again.
const TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a process goes without recording a pair again while it recurs.
const AGAIN: Duration = Duration::from_secs(4 * 3600);
/// How long a pair whose record failed waits before it is tried again.
const RETRY_FAILED: Duration = Duration::from_secs(60);
/// The most pairs a client remembers having recorded; past it, it forgets them all (and
/// records each again once).
const MAX_REMEMBERED: usize = 10_000;

thread_local! {
    /// The locks this thread holds, of clients that check lock order, in the order taken.
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// One hold of this thread's.
struct Held {
    /// The client's number ([`Recorded`]).
    client: u64,
    lock: Arc<str>,
    read: bool,
}

/// A pair's record as a client remembers it: the first and second key, and the field.
type Pair = (Arc<str>, Arc<str>, [u8; 3]);

/// The pairs a client has recorded, and when.
struct Recorded {
    /// The client's number in this process (a thread's holds name their client by it).
    id: u64,
    pairs: Mutex<HashMap<Pair, Instant>>,
}

impl Default for Recorded {
    fn default() -> Recorded {
        static CLIENTS: AtomicU64 = AtomicU64::new(0);
        Recorded {
            id: CLIENTS.fetch_add(1, Ordering::Relaxed),
            pairs: Mutex::new(HashMap::new()),
        }
    }
}

/// Records a thread's acquire (an acquire event with its order part): see [`took`].
pub(crate) fn on_hold(client: &Client, s: &Subject<'_>, event: &HoldEvent) {
    if let HoldEvent::Acquired { order: Some(o), .. } = *event {
        took(
            client,
            s.owner,
            std::slice::from_ref(s.lock),
            o.read,
            o.waits,
            o.at,
        );
    }
}

/// The thread took `locks` (their keys; `read` for read holds) in one call (one lock, or a
/// lock set's, taken all at once): counted among its holds, and, when the call may have
/// waited (`waits`), each pair of a lock it held already with each of them recorded (none
/// between the locks of one call, which never waits holding some of them). Nothing unless
/// the client checks lock order.
pub(crate) fn took(
    client: &Client,
    owner: &str,
    locks: &[Arc<str>],
    read: bool,
    waits: bool,
    at: &'static Location<'static>,
) {
    if !client.inner.config.lock_order_checks {
        return;
    }
    let me = identity(client);
    let mut held: Vec<(Arc<str>, bool)> = Vec::new();
    let _ = HELD.try_with(|h| {
        let mut h = h.borrow_mut();
        for e in h
            .iter()
            .filter(|e| e.client == me && !locks.contains(&e.lock))
        {
            if !held.iter().any(|(l, r)| *l == e.lock && *r == e.read) {
                held.push((Arc::clone(&e.lock), e.read));
            }
        }
        h.extend(locks.iter().map(|lock| Held {
            client: me,
            lock: Arc::clone(lock),
            read,
        }));
    });
    if waits {
        for (before, before_read) in held {
            for lock in locks {
                record(client, owner, &before, before_read, lock, read, at);
            }
        }
    }
}

/// The thread still holds `lock` (a guard leaked): counted again among its holds.
pub(crate) fn kept(client: &Client, lock: &Arc<str>, read: bool) {
    if !client.inner.config.lock_order_checks {
        return;
    }
    let me = identity(client);
    let _ = HELD.try_with(|h| {
        h.borrow_mut().push(Held {
            client: me,
            lock: Arc::clone(lock),
            read,
        })
    });
}

/// The thread no longer holds `lock` through this guard.
pub(crate) fn released(client: &Client, lock: &Arc<str>) {
    if !client.inner.config.lock_order_checks {
        return;
    }
    let me = identity(client);
    let _ = HELD.try_with(|h| {
        let mut h = h.borrow_mut();
        if let Some(i) = h.iter().rposition(|e| e.client == me && e.lock == *lock) {
            h.remove(i);
        }
    });
}

fn identity(client: &Client) -> u64 {
    client.inner.extensions.get::<Recorded>().id
}

/// Records "`before`, then `lock`" unless recorded lately, and reports the opposite orders
/// on record that conflict with it.
fn record(
    client: &Client,
    owner: &str,
    before: &Arc<str>,
    before_read: bool,
    lock: &Arc<str>,
    read: bool,
    at: &'static Location<'static>,
) {
    let letter = |r: bool| if r { b'r' } else { b'x' };
    let (first, second, d) = if before < lock {
        (before, lock, b'1')
    } else {
        (lock, before, b'2')
    };
    let field = [d, letter(before_read), letter(read)];
    let remembered = (Arc::clone(first), Arc::clone(second), field);
    {
        let recorded = client.inner.extensions.get::<Recorded>();
        let mut pairs = recorded.pairs.lock();
        if pairs.get(&remembered).is_some_and(|t| t.elapsed() < AGAIN) {
            return;
        }
        if pairs.len() >= MAX_REMEMBERED {
            pairs.clear();
        }
        pairs.insert(remembered.clone(), Instant::now());
    }
    let field = std::str::from_utf8(&field).unwrap_or_default();
    let by = format!(
        "{owner} ({}, {}, thread {}) at {}:{}",
        client.inner.config.client_name,
        process(),
        std::thread::current().name().unwrap_or("unnamed"),
        at.file(),
        at.line()
    );
    let opposite = match send(client, first, second, field, &by) {
        Ok(opposite) => opposite,
        Err(e) => {
            log::debug!("recording the lock order `{before}` then `{lock}` failed: {e}");
            // Tried again in a minute, not at every acquire meanwhile.
            let retry = Instant::now().checked_sub(AGAIN - RETRY_FAILED);
            if let Some(at) = retry {
                client
                    .inner
                    .extensions
                    .get::<Recorded>()
                    .pairs
                    .lock()
                    .insert(remembered, at);
            }
            return;
        }
    };
    let mapper = &client.inner.config.name_mapper;
    let shown = |key: &str| mapper.name_of(key).unwrap_or_else(|| key.to_owned());
    let (first, second) = (shown(first), shown(second));
    let Some(mine) = parse(&first, &second, field, "0 ") else {
        return;
    };
    let mine = LockOrder { by, ..mine };
    for (f, v) in opposite {
        let Some(theirs) = parse(&first, &second, &f, &v) else {
            continue;
        };
        if conflict(&mine, &theirs) {
            client.inner.metrics.order_inverted();
            log::warn!(
                "{}",
                LockOrderWarning {
                    one: mine.clone(),
                    other: theirs,
                }
            );
        }
    }
}

/// Runs `lua/lock_order.lua`: the opposite order's records.
fn send(
    client: &Client,
    first: &str,
    second: &str,
    field: &str,
    by: &str,
) -> Result<Vec<(String, String)>> {
    let key = keys::lock_order(first, second);
    // Once: the acquire that records it holds locks meanwhile.
    client.inner.backend.run_with(&key, Policy::Once, |c| {
        scripts::LOCK_ORDER
            .key(&key)
            .arg(first)
            .arg(second)
            .arg(field)
            .arg(by)
            .arg(millis(TTL))
            .invoke(c)
    })
}
