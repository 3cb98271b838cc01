//! The fleet's contention at a glance: [`Client::top`], what `redlatch top` shows. Each lock
//! and synchronizer's live state as the server holds it (holders, queue, subscribers: Java
//! peers' too), joined with the last window of the history that clients record (opt-in:
//! rates, time spent waiting, hold ages, and blame: which owners made others wait, and for
//! how long, as Go's mutex profile charges the holder).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::client::Client;
use crate::deadlock::{BrokenDeadlock, WaitRecord};
use crate::error::Result;
use crate::glob::glob_matches;
use crate::history::{self, HistoryEvent, HistoryKind, Span, SpanKind};
use crate::hold::Owner;
pub use crate::hold::Who;
use crate::inspect::{Holder, Inspection, Kind};

/// One lock or synchronizer's contention over a window ([`Client::top`]).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Activity {
    /// Its name.
    pub name: String,
    /// Its kind, as [`Client::inspect`] tells it; `None` when only the history knows it (no
    /// key now: free, or gone).
    pub kind: Option<Kind>,
    /// Who holds it now, with how long each has held it where a history tells.
    pub holders: Vec<TopHolder>,
    /// Threads (or, for clients that record no history, subscribed clients) waiting for it
    /// now: the most of its fair queue, its waits in the histories, its wait records and its
    /// channel's subscribers.
    pub waiters: usize,
    /// The longest wait going on now, however long ago it began: from the histories, or from
    /// the wait records of waits longer than their client's `deadlock_check_after`; `None`
    /// when neither knows of one (a wait may still go on: see [`waiters`](Self::waiters)).
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "longest_wait_ms",
            serialize_with = "crate::ser::opt_duration"
        )
    )]
    pub longest_wait: Option<Duration>,
    /// Acquisitions per second over the window (from histories).
    pub acquisitions_per_s: f64,
    /// Of those, acquisitions that found it busy and waited.
    pub contended_per_s: f64,
    /// Seconds spent waiting for it per second of the window, by all owners together: 2.0
    /// is two threads waiting all the time.
    pub waiting_per_s: f64,
    /// The owners that made others wait, most first.
    pub blame: Vec<Blame>,
    /// The deadlocks broken over the window whose cycle waited for it (see
    /// [`Client::deadlocks`]).
    pub deadlocks: usize,
}

/// A holder in [`Activity::holders`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TopHolder {
    /// Who holds it.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub owner: Owner,
    /// How long it has held, however long ago it took the lock, where its client records a
    /// history; `None`: not known.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "held_ms", serialize_with = "crate::ser::opt_duration")
    )]
    pub held_for: Option<Duration>,
    /// Who it is, as far as known: everything where its client records a history, else its
    /// client's name and host from the server's client list; `None` where neither tells (a
    /// Java peer's connections carry no owner).
    pub who: Option<Who>,
}

/// How long an owner made others wait for a lock over the window ([`Activity::blame`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Blame {
    /// Who held the lock.
    #[cfg_attr(feature = "serde", serde(serialize_with = "crate::ser::owner_id"))]
    pub owner: Owner,
    /// Who it is.
    pub who: Who,
    /// Others' time waiting while it held the lock, summed over the waiters (two threads
    /// waiting one second for it count two seconds).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "caused_wait_ms", serialize_with = "crate::ser::duration")
    )]
    pub caused_wait: Duration,
    /// How many waits it held up.
    pub waits: usize,
}

impl Client {
    /// The locks and synchronizers whose names match the glob `pattern` (every one with
    /// `*`), each with its holders, waiters, and its activity over the last `window`, stuck
    /// first (by the longest wait going on, then time spent waiting, then acquisitions): what
    /// `redlatch top` shows. Live state comes from the server (every master of a cluster), so
    /// locks that only Java peers use show their holders and queue too. Hold ages and the
    /// longest wait are those going on, however old: from the histories that clients with
    /// [`history`](crate::ConfigBuilder::history) on record (read back as far as a start
    /// needs), else from what the server knows (a holder's client from the client list, a
    /// long wait from its wait record); what nothing tells is `None`. Rates and blame come
    /// from the histories of the window, and are zero without. A
    /// [`RateLimiter`](crate::RateLimiter) has no holder: its blocked acquires are waits as
    /// a lock's are, and each call it admits an acquisition.
    ///
    /// It costs a [`list`](Self::list), a [`connections`](Self::connections), a
    /// [`waits`](Self::waits) and a [`recent_history`](Self::recent_history) (the whole kept
    /// history when a hold or wait began before the window): a tool for operators, not for
    /// hot paths.
    ///
    /// # Errors
    ///
    /// As [`list`](Self::list) and [`recent_history`](Self::recent_history).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn main() -> redlatch::Result<()> {
    /// let client = redlatch::Client::open("redis://127.0.0.1/")?;
    /// for a in client.top("*", Duration::from_secs(10))?.iter().take(5) {
    ///     println!("{}: {} waiting, {:.1} acquisitions/s", a.name, a.waiters, a.acquisitions_per_s);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn top(&self, pattern: &str, window: Duration) -> Result<Vec<Activity>> {
        crate::time::check_duration("window", window)?;
        let mut live = self.list(pattern)?;
        let backend = &self.inner.backend;
        let mapper = &self.inner.config.name_mapper;
        let now_us = history::server_time_us(backend)?;
        let since_us = now_us.saturating_sub(window.as_micros() as u64);
        let matching = |events: Vec<HistoryEvent>| -> Vec<HistoryEvent> {
            // Locks free now match by their recorded name.
            let keep = |e: &HistoryEvent| glob_matches(pattern, &e.lock);
            events.into_iter().filter(keep).collect()
        };
        let mut events = matching(history::read(backend, mapper, None, since_us)?);
        // A hold or a wait going on since before the window: its start is read back, from as
        // far as the histories keep.
        if began_before(&live, &events, now_us) {
            events = matching(history::read(backend, mapper, None, 0)?);
        }
        // Who holds, as the server knows it, for holders no history names.
        let connections = self.connections()?;
        for found in &mut live {
            found.trace(&connections);
        }
        let waits = self.waits()?;
        // The deadlocks broken: counted where they can be read (an operator's ACL may not
        // give their key).
        let mut broken = self.deadlocks_since(since_us / 1000).unwrap_or_else(|e| {
            log::debug!("top: the deadlocks broken could not be read: {e}");
            Vec::new()
        });
        for step in broken.iter_mut().flat_map(|d| d.cycle.iter_mut()) {
            if let Some(name) = mapper.name_of(&step.lock) {
                step.lock = name;
            }
        }
        broken.retain(|d| d.cycle.iter().any(|s| glob_matches(pattern, &s.lock)));
        let server = Server {
            waits: &waits,
            broken: &broken,
        };
        Ok(activities(&live, &events, &server, now_us, window))
    }
}

/// A span of time, µs on the server's clock.
#[derive(Clone, Copy)]
struct Interval {
    start: u64,
    end: u64,
}

impl Interval {
    fn of(span: &Span) -> Interval {
        Interval {
            start: span.start_us,
            end: span.end_us,
        }
    }

    fn overlap(self, other: Interval) -> u64 {
        self.end
            .min(other.end)
            .saturating_sub(self.start.max(other.start))
    }

    /// The part of it within `other`, if any.
    fn within(self, other: Interval) -> Option<Interval> {
        let part = Interval {
            start: self.start.max(other.start),
            end: self.end.min(other.end),
        };
        (part.start < part.end).then_some(part)
    }
}

/// How long `parts` cover, overlaps counted once.
fn covered(parts: &mut [Interval]) -> u64 {
    parts.sort_by_key(|p| p.start);
    let mut total = 0;
    let mut reached = 0;
    for p in parts.iter() {
        let start = p.start.max(reached);
        if p.end > start {
            total += p.end - start;
            reached = p.end;
        }
    }
    total
}

fn who(e: &HistoryEvent) -> Who {
    Who {
        client_name: Some(e.client_name.clone()),
        host: Some(e.host.clone()),
        pid: Some(e.pid),
        thread: Some(e.thread.clone()),
    }
}

fn who_of(s: &Span) -> Who {
    Who {
        client_name: Some(s.client_name.clone()),
        host: Some(s.host.clone()),
        pid: Some(s.pid),
        thread: Some(s.thread.clone()),
    }
}

/// Who a holder is as the server's client list tells: its client's name (the prefix of its
/// connections' name) and host, of its first connection; `None` when untraced or gone.
fn who_connected(holder: &Holder) -> Option<Who> {
    let c = holder.connections.as_ref()?.first()?;
    let (prefix, _) = c.name.rsplit_once(':')?;
    let host = c.addr.rsplit_once(':').map_or(c.addr.as_str(), |(h, _)| h);
    Some(Who {
        client_name: Some(prefix.to_owned()),
        host: Some(host.to_owned()),
        pid: None,
        thread: None,
    })
}

/// What a window of one lock's events says: its acquisitions, and its holds and waits as
/// the span builder reads them (those still open end at the window's end).
#[derive(Default)]
struct Seen<'a> {
    acquisitions: usize,
    contended: usize,
    holds: Vec<&'a Span>,
    waits: Vec<&'a Span>,
}

/// Whether a holder of `live` holds, or a lock of it has waiters, with no hold or wait going
/// on in `events` to tell since when: its start lies before them.
fn began_before(live: &[Inspection], events: &[HistoryEvent], now_us: u64) -> bool {
    let timeline = history::timeline(events, now_us);
    let open = |lock: &str, kind: SpanKind| {
        let spans = timeline
            .spans
            .iter()
            .filter(|s| s.is_open() && s.lock == lock);
        spans.filter(|s| s.kind == kind).collect::<Vec<_>>()
    };
    live.iter().any(|i| {
        let holds = open(&i.name, SpanKind::Hold);
        let held = i.holders.iter().chain(&i.readers);
        let waited = !i.queue.is_empty() || i.subscribers.unwrap_or(0) > 0;
        held.clone()
            .any(|h| !holds.iter().any(|s| s.owner == h.owner))
            || (waited && open(&i.name, SpanKind::Wait).is_empty())
    })
}

/// The activities of the locks of `live` and `events` (sorted by time; a hold or wait
/// going on may have begun before the window), with the wait records `waits`, at `now_us`.
/// What the server keeps beside the live state and the histories: the waits recorded, and
/// the deadlocks broken over the window (their locks by name).
#[derive(Default)]
pub(crate) struct Server<'a> {
    pub(crate) waits: &'a [WaitRecord],
    pub(crate) broken: &'a [BrokenDeadlock],
}

pub(crate) fn activities(
    live: &[Inspection],
    events: &[HistoryEvent],
    server: &Server<'_>,
    now_us: u64,
    window: Duration,
) -> Vec<Activity> {
    let frame = Interval {
        start: now_us.saturating_sub(window.as_micros() as u64),
        end: now_us,
    };
    let timeline = history::timeline(events, now_us);
    let mut seen: BTreeMap<&str, Seen<'_>> = BTreeMap::new();
    let mut whos: HashMap<&Owner, Who> = HashMap::new();
    for e in events {
        whos.entry(&e.owner).or_insert_with(|| who(e));
        let s = seen.entry(&e.lock).or_default();
        if e.kind == HistoryKind::Acquire && e.at_us >= frame.start {
            s.acquisitions += 1;
            s.contended += usize::from(e.contended);
        }
    }
    for span in &timeline.spans {
        let s = seen.entry(&span.lock).or_default();
        match span.kind {
            SpanKind::Hold => s.holds.push(span),
            SpanKind::Wait => s.waits.push(span),
        }
    }
    let by_name: BTreeMap<&str, &Inspection> = live.iter().map(|i| (i.name.as_str(), i)).collect();
    let mut broken: BTreeMap<&str, usize> = BTreeMap::new();
    for d in server.broken {
        let mut locks: Vec<&str> = d.cycle.iter().map(|s| s.lock.as_str()).collect();
        locks.sort_unstable();
        locks.dedup();
        for lock in locks {
            *broken.entry(lock).or_default() += 1;
        }
    }
    let mut names: Vec<&str> = by_name.keys().copied().collect();
    names.extend(seen.keys().filter(|n| !by_name.contains_key(*n)));
    names.extend(
        broken
            .keys()
            .filter(|n| !by_name.contains_key(*n) && !seen.contains_key(*n)),
    );
    let empty = Seen::default();
    let mut out: Vec<Activity> = names
        .into_iter()
        .map(|name| {
            let s = seen.get(name).unwrap_or(&empty);
            let recorded: Vec<&WaitRecord> =
                server.waits.iter().filter(|w| w.lock == name).collect();
            let known = Known {
                inspection: by_name.get(name).copied(),
                whos: &whos,
                waits: &recorded,
                deadlocks: broken.get(name).copied().unwrap_or(0),
            };
            activity(name, s, &known, frame, window)
        })
        .collect();
    // A stuck lock first: the longest wait going on, then the time spent waiting.
    out.sort_by(|a, b| {
        b.longest_wait
            .cmp(&a.longest_wait)
            .then(b.waiting_per_s.total_cmp(&a.waiting_per_s))
            .then(b.acquisitions_per_s.total_cmp(&a.acquisitions_per_s))
            .then(b.waiters.cmp(&a.waiters))
            .then(a.name.cmp(&b.name))
    });
    out
}

/// What the server says of one lock beside its history: its live state (if it has a key
/// now), and its wait records; and who the histories' owners are.
struct Known<'a> {
    inspection: Option<&'a Inspection>,
    whos: &'a HashMap<&'a Owner, Who>,
    waits: &'a [&'a WaitRecord],
    /// The deadlocks broken over the window that went through it.
    deadlocks: usize,
}

/// The activity of the lock `name`: what the server knows of it now (`known`) and what its
/// history says (`s`), its rates over the window (`frame`).
fn activity(
    name: &str,
    s: &Seen<'_>,
    known: &Known<'_>,
    frame: Interval,
    window: Duration,
) -> Activity {
    let now_us = frame.end;
    let since = |start: u64| Duration::from_micros(now_us.saturating_sub(start));
    let inspection = known.inspection;
    let holders: Vec<TopHolder> = inspection
        .map(|i| i.holders.iter().chain(&i.readers).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|h| TopHolder {
            held_for: s
                .holds
                .iter()
                .filter(|span| span.is_open() && span.owner == h.owner)
                .map(|span| span.start_us)
                .min()
                .map(since),
            who: known
                .whos
                .get(&h.owner)
                .cloned()
                .or_else(|| who_connected(h)),
            owner: h.owner.clone(),
        })
        .collect();
    let ongoing: Vec<u64> = s
        .waits
        .iter()
        .filter(|w| w.is_open())
        .map(|w| w.start_us)
        .collect();
    let recorded = known.waits.iter().map(|w| w.waited);
    let longest_wait = ongoing
        .iter()
        .min()
        .map(|start| since(*start))
        .max(recorded.max());
    let waiting_us: u64 = s.waits.iter().map(|w| Interval::of(w).overlap(frame)).sum();
    let secs = window.as_secs_f64().max(1e-3);
    let queued = inspection.map_or(0, |i| i.queue.len());
    let subscribed = inspection.and_then(|i| i.subscribers).unwrap_or(0) as usize;
    Activity {
        name: name.to_owned(),
        kind: inspection.map(|i| i.kind),
        holders,
        waiters: queued
            .max(ongoing.len())
            .max(subscribed)
            .max(known.waits.len()),
        longest_wait,
        acquisitions_per_s: s.acquisitions as f64 / secs,
        contended_per_s: s.contended as f64 / secs,
        waiting_per_s: waiting_us as f64 / 1e6 / secs,
        blame: blame(s, frame),
        deadlocks: known.deadlocks,
    }
}

/// The owners that made others wait for one lock within `frame`, most first: each charged
/// the part of every wait (within the frame) that its holds cover (a reader waits only for
/// writers), and each wait counted once per holder. One owner's holds that overlap (the
/// lock held both alone and as a member of a lock set) are charged once.
fn blame(s: &Seen<'_>, frame: Interval) -> Vec<Blame> {
    let read = |span: &Span| span.mode.is_read();
    let mut blame: BTreeMap<&Owner, Blame> = BTreeMap::new();
    for wait in &s.waits {
        let Some(clip) = Interval::of(wait).within(frame) else {
            continue;
        };
        let mut in_the_way: BTreeMap<&Owner, (&Span, Vec<Interval>)> = BTreeMap::new();
        for hold in &s.holds {
            if hold.owner == wait.owner || (read(wait) && read(hold)) {
                continue;
            }
            if let Some(part) = Interval::of(hold).within(clip) {
                let (_, parts) = in_the_way.entry(&hold.owner).or_insert((hold, Vec::new()));
                parts.push(part);
            }
        }
        for (owner, (hold, mut parts)) in in_the_way {
            let b = blame.entry(owner).or_insert_with(|| Blame {
                owner: owner.clone(),
                who: who_of(hold),
                caused_wait: Duration::ZERO,
                waits: 0,
            });
            b.caused_wait += Duration::from_micros(covered(&mut parts));
            b.waits += 1;
        }
    }
    let mut blame: Vec<Blame> = blame.into_values().collect();
    blame.sort_by_key(|b| std::cmp::Reverse(b.caused_wait));
    blame
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The activities of `events` over the second before `now`, the server knowing nothing
    /// more.
    fn second(events: &[HistoryEvent], now: u64) -> Vec<Activity> {
        activities(&[], events, &Server::default(), now, Duration::from_secs(1))
    }
    use crate::hold::LockKind;

    const MS: u64 = 1000;

    fn event(kind: HistoryKind, owner: &str, at_ms: u64) -> HistoryEvent {
        HistoryEvent {
            at_us: 1_000_000_000 + at_ms * MS,
            kind,
            lock: "l".into(),
            mode: LockKind::Plain,
            owner: Owner::from_id(owner),
            client_name: "app".into(),
            host: "h".into(),
            pid: 7,
            thread: format!("t-{owner}"),
            waited: None,
            held: None,
            contended: false,
        }
    }

    /// Each blamed owner's client id, the ms it made others wait, and how many waits.
    fn blamed(a: &Activity) -> Vec<(&str, u64, usize)> {
        let ms = |d: Duration| d.as_millis() as u64;
        a.blame
            .iter()
            .map(|b| (b.owner.client_id.as_str(), ms(b.caused_wait), b.waits))
            .collect()
    }

    #[test]
    fn holders_are_charged_the_waits_they_caused_within_the_window() {
        use HistoryKind::*;
        let waited = |mut e: HistoryEvent, ms: u64| {
            e.waited = Some(Duration::from_millis(ms));
            e.contended = true;
            e
        };
        // a holds 0..100 ms; b waits 10..100 then holds 100..; c waits from 50 on.
        let events = [
            event(Acquire, "a", 0),
            event(Wait, "b", 10),
            event(Wait, "c", 50),
            event(Release, "a", 100),
            waited(event(Acquire, "b", 100), 90),
        ];
        let now = 1_000_000_000 + 150 * MS;
        let top = second(&events, now);
        assert_eq!(top.len(), 1);
        let l = &top[0];
        assert_eq!((l.acquisitions_per_s, l.contended_per_s), (2.0, 1.0));
        // b waited 90 ms, c 100 ms so far.
        assert!((l.waiting_per_s - 0.19).abs() < 1e-9, "{}", l.waiting_per_s);
        assert_eq!(l.longest_wait, Some(Duration::from_millis(100)));
        assert_eq!(l.waiters, 1);
        let blamed = blamed(l);
        // a: b's 90 ms and c's 50 ms; b: c's 50 ms since it took the lock.
        assert_eq!(blamed, [("a", 140, 2), ("b", 50, 1)]);
        assert_eq!(l.blame[0].who.thread.as_deref(), Some("t-a"));
    }

    #[test]
    fn readers_are_not_charged_for_readers_and_the_window_cuts_old_waits() {
        use HistoryKind::*;
        let read = |mut e: HistoryEvent| {
            e.mode = LockKind::Read;
            e
        };
        let events = [
            read(event(Acquire, "r1", 0)),
            read(event(Wait, "r2", 10)),
            event(Wait, "w", 20),
        ];
        let now = 1_000_000_000 + 2_000 * MS;
        let top = second(&events, now);
        let blamed: Vec<(&str, u64)> = top[0]
            .blame
            .iter()
            .map(|b| (b.owner.client_id.as_str(), b.caused_wait.as_millis() as u64))
            .collect();
        // Only the writer's wait counts against the reader, and only its last second.
        assert_eq!(blamed, [("r1", 1000)]);
        assert_eq!(top[0].holders, []);
    }

    #[test]
    fn an_owner_holding_a_lock_alone_and_in_a_set_is_charged_once() {
        use HistoryKind::*;
        let in_set = |mut e: HistoryEvent| {
            e.mode = LockKind::LockSet;
            e
        };
        let events = [
            event(Acquire, "a", 0),
            in_set(event(Acquire, "a", 10)),
            event(Wait, "b", 20),
            event(Release, "a", 100),
            in_set(event(Release, "a", 100)),
        ];
        let now = 1_000_000_000 + 150 * MS;
        let top = second(&events, now);
        let blamed = blamed(&top[0]);
        // b waited 20..100 ms behind both of a's holds: 80 ms, one wait.
        assert_eq!(blamed, [("a", 80, 1)]);
    }
}
