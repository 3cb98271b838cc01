//! Events as the differences between two inspections.

use std::time::SystemTime;

use super::{Event, EventKind};
use crate::hold::LockKind;
use crate::hold::Owner;
use crate::inspect::{Inspection, Kind};

/// A hold as events key it: the owner and the side of a read-write lock.
type HoldKey = (Owner, Option<LockKind>);

fn holds(i: Option<&Inspection>) -> Vec<(HoldKey, u32)> {
    let Some(i) = i else { return Vec::new() };
    let side = (i.kind == Kind::ReadWrite).then_some(LockKind::Write);
    let exclusive = i.holders.iter().map(|h| ((h.owner.clone(), side), h.holds));
    let shared = i
        .readers
        .iter()
        .map(|h| ((h.owner.clone(), Some(LockKind::Read)), h.holds));
    exclusive.chain(shared).collect()
}

fn hold_event(at: SystemTime, kind: EventKind, key: &HoldKey, holds: u32) -> Event {
    Event {
        owner: Some(key.0.clone()),
        mode: key.1,
        holds: Some(holds),
        ..Event::new(at, kind)
    }
}

/// The events that lead from `old` to `new`: releases first, then the turns of fair-queue
/// waiters served in between, acquires, queue changes, counts and new waiting clients.
pub(super) fn diff(
    old: Option<&Inspection>,
    new: Option<&Inspection>,
    at: SystemTime,
) -> Vec<Event> {
    let mut events = Vec::new();
    let (before, after) = (holds(old), holds(new));
    let count_in = |list: &[(HoldKey, u32)], key: &HoldKey| {
        list.iter().find(|(k, _)| k == key).map_or(0, |(_, n)| *n)
    };
    for (key, n) in &before {
        let left = count_in(&after, key);
        if left < *n {
            events.push(hold_event(at, EventKind::Released, key, left));
        }
    }
    let queue = |i: Option<&Inspection>| -> Vec<Owner> {
        i.map(|i| i.queue.iter().map(|q| q.owner.clone()).collect())
            .unwrap_or_default()
    };
    let (was_queued, queued) = (queue(old), queue(new));
    let mut gave_up = Vec::new();
    let holding = |o: &Owner| after.iter().any(|((h, _), _)| h == o);
    // Only the head of a fair queue takes the lock. Owners gone from the front of the queue,
    // with nobody who stays or holds now ahead of them, took their turns between the two
    // inspections if the lock changed hands meanwhile (every old hold went): acquired and
    // released, not left. (One that gave up there instead shows as served: the keys keep no
    // trace that tells them apart.)
    let changed_hands =
        !before.is_empty() && before.iter().all(|(key, _)| count_in(&after, key) == 0);
    let served = if changed_hands || before.is_empty() {
        was_queued
            .iter()
            .take_while(|o| !queued.contains(o) && !holding(o))
            .count()
    } else {
        0
    };
    for (place, owner) in was_queued.iter().enumerate() {
        if queued.contains(owner) || holding(owner) {
            continue;
        }
        if place < served {
            let key = (owner.clone(), None);
            events.push(hold_event(at, EventKind::Acquired, &key, 1));
            events.push(hold_event(at, EventKind::Released, &key, 0));
        } else {
            gave_up.push(Event {
                owner: Some(owner.clone()),
                ..Event::new(at, EventKind::Left)
            });
        }
    }
    let token = new.filter(|i| i.kind == Kind::Fenced).and_then(|i| i.token);
    for (key, n) in &after {
        if *n > count_in(&before, key) {
            events.push(Event {
                token,
                ..hold_event(at, EventKind::Acquired, key, *n)
            });
        }
    }

    events.append(&mut gave_up);
    for (place, owner) in queued.iter().enumerate() {
        if !was_queued.contains(owner) {
            events.push(Event {
                owner: Some(owner.clone()),
                position: Some(place + 1),
                ..Event::new(at, EventKind::Waiting)
            });
        }
    }

    events.extend(count_event(old, new, at));
    if let (Some(a), Some(b)) = (
        old.and_then(|i| i.subscribers),
        new.and_then(|i| i.subscribers),
    ) {
        if b > a {
            events.push(Event {
                subscribers: Some(b),
                ..Event::new(at, EventKind::Waiting)
            });
        }
    }
    events
}

/// The event of a semaphore's or latch's count changing from `old` to `new`, if it did: a
/// semaphore's permits taken or given back, a latch's (or an unknown kind's) count changed.
fn count_event(
    old: Option<&Inspection>,
    new: Option<&Inspection>,
    at: SystemTime,
) -> Option<Event> {
    let counted = |i: &Inspection| {
        matches!(
            i.kind,
            Kind::Semaphore
                | Kind::PermitExpirableSemaphore
                | Kind::CountDownLatch
                | Kind::SemaphoreOrLatch
        )
    };
    let kind = new.or(old).filter(|i| counted(i)).map(|i| i.kind)?;
    // An absent count is 0 (a latch is deleted when it opens).
    let value = |i: Option<&Inspection>| i.and_then(|i| i.permits.or(i.count)).unwrap_or(0);
    let (a, b) = (value(old), value(new));
    if a == b {
        return None;
    }
    let both = old.is_some_and(counted) && new.is_some_and(counted);
    let semaphore = matches!(kind, Kind::Semaphore | Kind::PermitExpirableSemaphore);
    let event_kind = match (semaphore && both, b < a) {
        (true, true) => EventKind::Acquired,
        (true, false) => EventKind::Released,
        (false, _) => EventKind::Changed,
    };
    let latch = matches!(kind, Kind::CountDownLatch | Kind::SemaphoreOrLatch);
    let permits = kind != Kind::CountDownLatch;
    Some(Event {
        permits: permits.then_some(b),
        count: latch.then_some(b),
        ..Event::new(at, event_kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::tests::inspection;

    fn at() -> SystemTime {
        SystemTime::UNIX_EPOCH
    }

    #[test]
    fn handoff_is_a_release_then_an_acquire() {
        let a = inspection(Kind::Reentrant, &[(1, 1)], &[]);
        let b = inspection(Kind::Reentrant, &[(2, 1)], &[]);
        let events = diff(Some(&a), Some(&b), at());
        let seen: Vec<_> = events
            .iter()
            .map(|e| (e.kind, e.owner.as_ref().map(|o| o.thread), e.holds))
            .collect();
        assert_eq!(
            seen,
            [
                (EventKind::Released, Some(1), Some(0)),
                (EventKind::Acquired, Some(2), Some(1))
            ]
        );
        assert!(diff(Some(&a), Some(&a), at()).is_empty());
    }

    #[test]
    fn reentry_and_first_sight() {
        let one = inspection(Kind::Fenced, &[(1, 1)], &[]);
        let mut two = inspection(Kind::Fenced, &[(1, 2)], &[]);
        two.token = Some(8);
        let events = diff(Some(&one), Some(&two), at());
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].kind, events[0].holds, events[0].token),
            (EventKind::Acquired, Some(2), Some(8))
        );
        let events = diff(None, Some(&one), at());
        assert_eq!(events[0].kind, EventKind::Acquired);
        let events = diff(Some(&one), None, at());
        assert_eq!(
            (events[0].kind, events[0].holds),
            (EventKind::Released, Some(0))
        );
    }

    #[test]
    fn fair_queue_joins_and_leaves() {
        let before = inspection(Kind::Fair, &[(1, 1)], &[2, 3]);
        // 2 gave up, 4 joined behind 3.
        let after = inspection(Kind::Fair, &[(1, 1)], &[3, 4]);
        let events = diff(Some(&before), Some(&after), at());
        let seen: Vec<_> = events
            .iter()
            .map(|e| (e.kind, e.owner.as_ref().unwrap().thread, e.position))
            .collect();
        assert_eq!(
            seen,
            [(EventKind::Left, 2, None), (EventKind::Waiting, 4, Some(2))]
        );
        // The head gave up while the holder kept the lock: left.
        let stays = inspection(Kind::Fair, &[(1, 1)], &[4]);
        let kinds: Vec<_> = diff(Some(&after), Some(&stays), at())
            .iter()
            .map(|e| (e.kind, e.owner.as_ref().unwrap().thread))
            .collect();
        assert_eq!(kinds, [(EventKind::Left, 3)]);
        // The head took the lock: no `left` for it.
        let granted = inspection(Kind::Fair, &[(3, 1)], &[4]);
        let kinds: Vec<_> = diff(Some(&after), Some(&granted), at())
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, [EventKind::Released, EventKind::Acquired]);
    }

    /// A waiter that got the lock and released it between two polls was reported as `left`
    /// (gave up).
    #[test]
    fn a_waiter_served_between_two_polls_is_acquired_and_released_not_left() {
        let before = inspection(Kind::Fair, &[(1, 1)], &[2, 3, 4]);
        // 1 released, 2 and 3 took their turns and released, 4 holds now.
        let after = inspection(Kind::Fair, &[(4, 1)], &[]);
        let seen: Vec<_> = diff(Some(&before), Some(&after), at())
            .iter()
            .map(|e| (e.kind, e.owner.as_ref().unwrap().thread, e.holds))
            .collect();
        assert_eq!(
            seen,
            [
                (EventKind::Released, 1, Some(0)),
                (EventKind::Acquired, 2, Some(1)),
                (EventKind::Released, 2, Some(0)),
                (EventKind::Acquired, 3, Some(1)),
                (EventKind::Released, 3, Some(0)),
                (EventKind::Acquired, 4, Some(1)),
            ]
        );
        // 2 took its turn and released; 4 gave up behind 3, who still waits: 4 left.
        let after = inspection(Kind::Fair, &[], &[3]);
        let seen: Vec<_> = diff(Some(&before), Some(&after), at())
            .iter()
            .map(|e| (e.kind, e.owner.as_ref().unwrap().thread))
            .collect();
        assert_eq!(
            seen,
            [
                (EventKind::Released, 1),
                (EventKind::Acquired, 2),
                (EventKind::Released, 2),
                (EventKind::Left, 4),
            ]
        );
    }

    #[test]
    fn semaphore_permits_and_latch_counts() {
        let mut three = inspection(Kind::Semaphore, &[], &[]);
        three.permits = Some(3);
        let mut two = three.clone();
        two.permits = Some(2);
        let e = &diff(Some(&three), Some(&two), at())[0];
        assert_eq!((e.kind, e.permits), (EventKind::Acquired, Some(2)));
        let e = &diff(Some(&two), Some(&three), at())[0];
        assert_eq!((e.kind, e.permits), (EventKind::Released, Some(3)));

        let mut latch = inspection(Kind::CountDownLatch, &[], &[]);
        latch.count = Some(1);
        let e = &diff(Some(&latch), None, at())[0];
        assert_eq!(
            (e.kind, e.count, e.permits),
            (EventKind::Changed, Some(0), None)
        );
    }

    #[test]
    fn a_new_waiting_client_is_waiting() {
        let mut idle = inspection(Kind::Reentrant, &[(1, 1)], &[]);
        idle.subscribers = Some(0);
        let mut waited = idle.clone();
        waited.subscribers = Some(1);
        let e = &diff(Some(&idle), Some(&waited), at())[0];
        assert_eq!(
            (e.kind, e.subscribers, &e.owner),
            (EventKind::Waiting, Some(1), &None)
        );
        assert!(diff(Some(&waited), Some(&idle), at()).is_empty());
    }
}
