//! Following a lock or synchronizer live: [`Client::watch`].
//!
//! Redis says little by itself: an acquire publishes nothing, an unlock publishes `0` on the
//! lock channel, a fair unlock only on the next waiter's own channel. So a [`Watch`] does
//! both: it observes the object's channels through the client's own pub/sub dispatcher (the
//! same connection its waiters use, SSUBSCRIBE on the slot's node of a cluster; an observer
//! hears every message and takes no wake-up from a waiter) and re-inspects at once when a
//! message comes, and it re-inspects every poll interval anyway. Events are the differences
//! between consecutive inspections.

mod diff;
mod feed;

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use crate::client::Client;
use crate::error::Result;
use crate::hold::LockKind;
use crate::hold::Owner;
use crate::inspect::Inspection;
use crate::keys::{Layout, WATCH_CHANNEL};

use diff::diff;
use feed::{Feed, Signal};

/// How often a watch re-inspects without a message, unless told otherwise.
const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);
/// The shortest poll interval accepted.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest poll interval accepted (longer ones would overflow an `Instant`).
const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// How long after a poll saw a release its message may still arrive.
const MESSAGE_LAG: Duration = Duration::from_secs(1);

/// What a [`Watch`] saw happen.
///
/// # Examples
///
/// ```
/// assert_eq!(redlatch::watch::EventKind::Acquired.as_str(), "acquired");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A hold was taken (a new holder, or a re-entry: see [`Event::holds`]), or permits of a
    /// semaphore were taken.
    Acquired,
    /// A hold was released (unlocked, or expired), or permits were given back. The owner is
    /// `None` when the lock channel announced a release that happened between two
    /// inspections (a hold shorter than the poll interval).
    Released,
    /// A hold was broken by a force-unlock ([`Lock::force_unlock`](crate::Lock::force_unlock),
    /// `redlatch force-unlock`), which tells watchers before it deletes the lock. A
    /// force-unlock by another client (Redisson's `forceUnlock`) tells nothing, and shows
    /// as [`Released`](Self::Released).
    ForceReleased,
    /// An owner joined a fair lock's queue ([`Event::position`]), or another client started
    /// waiting on the object's channel ([`Event::subscribers`]; owner unknown).
    Waiting,
    /// An owner left a fair lock's queue without taking the lock (it gave up, or was
    /// presumed dead and skipped). One that left from the head of the queue while the lock
    /// changed hands took its turn between two inspections: it shows as acquired, then
    /// released, not as left.
    Left,
    /// A count changed otherwise: a latch's count set or counted down (to 0 when it opens),
    /// a semaphore created or deleted.
    Changed,
}

impl EventKind {
    /// `acquired`, `released`, `force_released`, `waiting`, `left` or `changed`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlatch::watch::EventKind::Left.as_str(), "left");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::Released => "released",
            EventKind::ForceReleased => "force_released",
            EventKind::Waiting => "waiting",
            EventKind::Left => "left",
            EventKind::Changed => "changed",
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for EventKind {
    /// As [`as_str`](Self::as_str).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change seen by a [`Watch`]. Fields that do not apply are `None`.
///
/// # Examples
///
/// ```no_run
/// # fn main() -> redlatch::Result<()> {
/// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// for event in client.watch("orders")? {
///     let event = event?;
///     match &event.owner {
///         Some(owner) => println!("{} by {}", event.kind, owner),
///         None => println!("{}", event.kind),
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// When the watch saw it (this machine's clock): at most one poll interval after the
    /// change, at once for changes announced on a channel.
    pub at: SystemTime,
    /// What happened.
    pub kind: EventKind,
    /// Who acquired, released, started or stopped waiting, when known.
    pub owner: Option<Owner>,
    /// The side of a read-write lock the hold is on.
    pub mode: Option<LockKind>,
    /// The owner's hold count after the event (0: it holds no more).
    pub holds: Option<u32>,
    /// A new fair-queue waiter's place (1: next in line).
    pub position: Option<usize>,
    /// A semaphore's available permits after the event.
    pub permits: Option<i64>,
    /// A latch's count after the event.
    pub count: Option<i64>,
    /// A fenced lock's latest fencing token, on acquire.
    pub token: Option<u64>,
    /// Connections waiting on the object's channel after the event (see
    /// [`Inspection::subscribers`]).
    pub subscribers: Option<u64>,
}

impl Event {
    fn new(at: SystemTime, kind: EventKind) -> Event {
        Event {
            at,
            kind,
            owner: None,
            mode: None,
            holds: None,
            position: None,
            permits: None,
            count: None,
            token: None,
            subscribers: None,
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Event {
    /// One object: `at` (RFC 3339, UTC), `at_ms` (milliseconds since 1970), `event` (the
    /// [kind](EventKind::as_str)), `owner` (`"<client id>:<thread>"` or null) with
    /// `client_id` and `thread` when known, then only the fields that apply (`mode`,
    /// `holds`, `position`, `permits`, `count`, `token`, `subscribers`).
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("at", &crate::ser::timestamp(self.at))?;
        map.serialize_entry("at_ms", &crate::ser::epoch_millis(self.at))?;
        map.serialize_entry("event", &self.kind)?;
        match &self.owner {
            Some(owner) => {
                map.serialize_entry("owner", &owner.to_string())?;
                map.serialize_entry("client_id", &owner.client_id)?;
                map.serialize_entry("thread", &owner.thread)?;
            }
            None => map.serialize_entry("owner", &None::<String>)?,
        }
        if let Some(mode) = self.mode {
            map.serialize_entry("mode", &mode)?;
        }
        let numbers = [
            ("holds", self.holds.map(u64::from)),
            ("position", self.position.map(|p| p as u64)),
            ("token", self.token),
            ("subscribers", self.subscribers),
        ];
        for (key, value) in numbers {
            if let Some(value) = value {
                map.serialize_entry(key, &value)?;
            }
        }
        for (key, value) in [("permits", self.permits), ("count", self.count)] {
            if let Some(value) = value {
                map.serialize_entry(key, &value)?;
            }
        }
        map.end()
    }
}

/// A live view of one lock or synchronizer: an iterator of [`Event`]s that blocks until the
/// next one. Made by [`Client::watch`].
///
/// Acquires and queue changes are seen by polling (every 250 ms by default: see
/// [`poll_interval`](Self::poll_interval)), releases also at once through the object's
/// channel. A hold taken and released within one interval shows as its release only (with
/// no owner), or not at all for a fair lock, whose release is announced on the next
/// waiter's channel only; so do not count events to count holds. Each poll is one
/// [`inspect`](Client::inspect). The watch holds one pub/sub connection (per node, on a
/// cluster), re-opened every few seconds if it is lost, while polling goes on.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redlatch::Result<()> {
/// let client = redlatch::Client::open("redis://127.0.0.1/")?;
/// let mut watch = client.watch("orders")?.poll_interval(Duration::from_millis(100));
/// while let Some(event) = watch.next_timeout(Duration::from_secs(10))? {
///     println!("{:?} {} {:?}", event.at, event.kind, event.owner);
/// }
/// # Ok(()) }
/// ```
pub struct Watch {
    client: Client,
    /// The name as the caller gave it; `layout` is made from the mapped name.
    name: String,
    layout: Layout,
    every: Duration,
    state: Option<Inspection>,
    pending: VecDeque<Event>,
    feed: Feed,
    next_poll: Instant,
    /// When polls saw releases whose channel message has not come yet: a message that comes
    /// later announces one of them, not a release the polls missed.
    unannounced: VecDeque<Instant>,
    /// When a force-unlock was announced (on a watch channel) and its release not yet seen.
    forced: Option<Instant>,
}

impl Client {
    /// Starts watching the lock or synchronizer `name` (which need not exist yet): subscribes
    /// its channels, then takes a first [`inspect`](Self::inspect)ion, which
    /// [`Watch::current`] shows and from which changes are reported. `name` is mapped by the
    /// client's [`NameMapper`](crate::NameMapper), as an object's name is.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; connection errors and
    /// [`Error::Timeout`](crate::Error::Timeout) if the subscription is not confirmed in time.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for event in client.watch("orders")? {
    ///     println!("{:?}", event?);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, name: &str) -> Result<Watch> {
        crate::names::check_name("object", name)?;
        let named = self.named(name);
        let layout = Layout::new(&named.key);
        let feed = Feed::open(self, &layout)?;
        let state = self.inspect_excluding(&named.key, true)?;
        let now = Instant::now();
        Ok(Watch {
            client: self.clone(),
            state: state.map(|i| i.named(name)),
            name: name.to_owned(),
            layout,
            every: DEFAULT_INTERVAL,
            pending: VecDeque::new(),
            feed,
            next_poll: now + DEFAULT_INTERVAL,
            unannounced: VecDeque::new(),
            forced: None,
        })
    }
}

impl Watch {
    /// Sets how often the object is re-inspected when no message comes. Defaults to 250 ms;
    /// values under 10 ms count as 10 ms, values over a day as a day.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let watch = client.watch("orders")?.poll_interval(Duration::from_secs(1));
    /// # Ok(()) }
    /// ```
    pub fn poll_interval(mut self, every: Duration) -> Watch {
        self.every = every.clamp(MIN_INTERVAL, MAX_INTERVAL);
        self.next_poll = Instant::now() + self.every;
        self
    }

    /// The name watched, as given to [`Client::watch`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// assert_eq!(client.watch("orders")?.name(), "orders");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The latest inspection: what the events so far have led to (`None` while nothing of
    /// that name exists).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let watch = client.watch("orders")?;
    /// if let Some(now) = watch.current() {
    ///     println!("orders: {} holder(s)", now.holders.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn current(&self) -> Option<&Inspection> {
        self.state.as_ref()
    }

    /// Waits up to `timeout` for the next event; `Ok(None)` if none came.
    ///
    /// # Errors
    ///
    /// Errors of the inspection (connection errors): the watch stays usable, and the next
    /// call tries again.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// # let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// let mut watch = client.watch("orders")?;
    /// if let Some(event) = watch.next_timeout(Duration::from_secs(5))? {
    ///     println!("{event:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Event>> {
        let start = Instant::now();
        let deadline = start
            .checked_add(timeout)
            .unwrap_or(start + DEFAULT_INTERVAL * 4);
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            let now = Instant::now();
            if now >= self.next_poll {
                self.poll(false)?;
                continue;
            }
            if now >= deadline {
                return Ok(None);
            }
            let until = self.next_poll.min(deadline);
            match self.feed.next(until)? {
                Signal::Quiet => {}
                // Messages may have been missed while the subscription was down.
                Signal::Resubscribed => self.poll(false)?,
                Signal::Messages(channels) => {
                    let released = channels
                        .iter()
                        .any(|c| *c == self.layout.lock_channel || *c == self.layout.rw_channel);
                    // Only a force-unlock publishes on a watch channel.
                    if channels.iter().any(|c| c.starts_with(WATCH_CHANNEL)) {
                        self.forced = Some(Instant::now());
                    }
                    self.poll(released)?;
                }
            }
        }
    }

    /// Re-inspects and queues the differences; `released`: a release was announced.
    fn poll(&mut self, released: bool) -> Result<()> {
        let now = Instant::now();
        self.next_poll = now + self.every;
        // The client's own connection, subscribed for this watch, is not another waiter.
        let state = self
            .client
            .inspect_excluding(&self.layout.name, true)?
            .map(|i| i.named(&self.name));
        let at = SystemTime::now();
        let mut events = diff(self.state.as_ref(), state.as_ref(), at);
        let releases = |last: bool| {
            events
                .iter()
                .any(|e| e.kind == EventKind::Released && (!last || e.holds == Some(0)))
        };
        self.unannounced
            .retain(|t| now.duration_since(*t) < MESSAGE_LAG);
        // The releases a force-unlock announced: each last hold that went (or the release
        // the channel announced) is forced. An announcement without a release (nothing was
        // held) is forgotten after the lag.
        self.forced = self.forced.filter(|t| now.duration_since(*t) < MESSAGE_LAG);
        if released {
            // A release announced but not seen: it happened between two polls.
            if !releases(false) && self.unannounced.pop_front().is_none() {
                events.insert(0, Event::new(at, EventKind::Released));
            }
        } else if releases(true) {
            // A last hold went: its message (if any: an expiry has none) may come later.
            self.unannounced.push_back(now);
        }
        if self.forced.is_some() {
            let mut broke = false;
            for e in &mut events {
                if e.kind == EventKind::Released && e.holds.is_none_or(|h| h == 0) {
                    e.kind = EventKind::ForceReleased;
                    broke = true;
                }
            }
            if broke {
                self.forced = None;
            }
        }
        self.pending.extend(events);
        self.state = state;
        Ok(())
    }
}

impl Iterator for Watch {
    type Item = Result<Event>;

    /// Blocks until the next event; `None` once the client is closed.
    fn next(&mut self) -> Option<Result<Event>> {
        loop {
            match self.next_timeout(Duration::from_secs(3600)) {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) => {}
                Err(e) if e.is_closed() => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("name", &self.name)
            .field("key", &self.layout.name)
            .field("poll_interval", &self.every)
            .finish()
    }
}
