//! The span builder's tests: hand-made events and the spans they make.

use super::*;

/// An owner of the hand-made events.
struct Who {
    owner: &'static str,
    thread: &'static str,
    host: &'static str,
}

const A: Who = Who {
    owner: "aaaaaaaa-1111-4111-8111-111111111111:1",
    thread: "worker-1",
    host: "h1",
};
const B: Who = Who {
    owner: "bbbbbbbb-2222-4222-8222-222222222222:7",
    thread: "worker-2",
    host: "h2",
};
const ACCTS: &str = "accts";
/// The events' times are µs after this.
const T0: u64 = 1_800_000_000_000_000;
/// When the spans are read, µs after [`T0`].
const NOW: u64 = T0 + 20_000;

use HistoryKind::{Acquire, Deadlock, GaveUp, Lost, Release, Wait};

/// An event of `who` at `at` µs after [`T0`], with what its call waited or its hold lasted.
fn ev(who: &Who, at: u64, kind: HistoryKind, (lock, mode): (&str, &str)) -> HistoryEvent {
    HistoryEvent {
        at_us: T0 + at,
        kind,
        lock: lock.to_owned(),
        mode: LockKind::parse(mode),
        owner: Owner::parse(who.owner).unwrap(),
        client_name: "billing".to_owned(),
        host: who.host.to_owned(),
        pid: 100,
        thread: who.thread.to_owned(),
        waited: None,
        held: None,
        contended: false,
    }
}

impl HistoryEvent {
    fn waited(mut self, us: u64) -> Self {
        self.waited = Some(Duration::from_micros(us));
        self
    }

    fn held(mut self, us: u64) -> Self {
        self.held = Some(Duration::from_micros(us));
        self
    }

    fn contended(mut self) -> Self {
        self.contended = true;
        self
    }
}

/// The span expected of `who`, from `start` to `end` µs after [`T0`].
fn expect(
    who: &Who,
    kind: SpanKind,
    (lock, mode): (&str, &str),
    (start, end): (u64, u64),
    outcome: &'static str,
) -> Span {
    let event = ev(who, 0, Wait, (lock, mode));
    span(&event, kind, T0 + start, T0 + end, outcome)
}

#[test]
fn spans_of_turns_waits_reentry_loss_and_deadlock() {
    use SpanKind::Hold;
    let ledger = ("ledger", "plain");
    let accts = (ACCTS, "fair");
    // Two owners take `ledger` in turn (B waits, A re-enters, B's hold is lost, A waited
    // without a wait event), then a deadlock over `accts`, a timeout, a wait too short to
    // count, and a hold and a wait still open.
    let events = [
        ev(&A, 0, Acquire, ledger).waited(0),
        ev(&B, 1000, Wait, ledger),
        ev(&A, 2000, Acquire, ledger).waited(0),
        ev(&A, 3000, Release, ledger).held(1000),
        ev(&A, 5000, Release, ledger).held(5000),
        ev(&B, 5200, Acquire, ledger).waited(4200),
        ev(&B, 9000, Lost, ledger).held(3800),
        ev(&A, 9500, Acquire, ledger).waited(2000).contended(),
        // A slow call that found the lock free is no wait.
        ev(&B, 9600, Acquire, ("slow", "plain")).waited(3000),
        ev(&B, 9700, Release, ("slow", "plain")).held(100),
        ev(&B, 10_000, Acquire, accts).waited(0),
        ev(&B, 11_000, Wait, ledger),
        ev(&A, 12_000, Wait, accts),
        ev(&A, 14_000, Deadlock, accts).waited(2000),
        ev(&B, 15_000, GaveUp, ledger).waited(4000),
        ev(&B, 16_000, Release, accts).held(6000),
        ev(&B, 16_500, GaveUp, ("cache", "spin")).waited(500),
        ev(&B, 17_000, Wait, ledger),
    ];
    let built = timeline(&events, NOW);
    assert_eq!(
        built.spans,
        vec![
            expect(&A, Hold, ledger, (0, 5000), "released"),
            expect(&B, SpanKind::Wait, ledger, (1000, 5200), "acquired"),
            expect(&B, Hold, ledger, (5200, 9000), "lost"),
            expect(&A, SpanKind::Wait, ledger, (7500, 9500), "acquired"),
            expect(&A, Hold, ledger, (9500, 20_000), "held"),
            expect(&B, Hold, ("slow", "plain"), (9600, 9700), "released"),
            expect(&B, Hold, accts, (10_000, 16_000), "released"),
            expect(&B, SpanKind::Wait, ledger, (11_000, 15_000), "gave_up"),
            expect(&A, SpanKind::Wait, accts, (12_000, 14_000), "deadlock"),
            expect(&B, SpanKind::Wait, ledger, (17_000, 20_000), "waiting"),
        ]
    );
    let open: Vec<bool> = built.spans.iter().map(Span::is_open).collect();
    assert_eq!(open.iter().filter(|o| **o).count(), 2);
    let marks: Vec<_> = built
        .marks
        .iter()
        .map(|m| (m.at_us - T0, m.what, m.owner.to_string(), m.lock.as_str()))
        .collect();
    assert_eq!(
        marks,
        vec![
            (9000, "lost", B.owner.to_owned(), "ledger"),
            (14_000, "deadlock", A.owner.to_owned(), ACCTS),
        ]
    );
}

#[test]
fn spans_of_holds_begun_before_the_events_and_lost_reentrant_holds() {
    use SpanKind::Hold;
    let (ledger, x, y) = (("ledger", "plain"), ("x", "plain"), ("y", "read"));
    let events = [
        // A nested hold whose acquires are older than the events: one hold.
        ev(&A, 4000, Release, ledger).held(3000),
        ev(&A, 5000, Release, ledger).held(5000),
        // A re-entrant hold lost: both guards learn it, one loss.
        ev(&A, 6000, Acquire, x).waited(0),
        ev(&A, 7000, Acquire, x).waited(0),
        ev(&A, 8000, Lost, x).held(1000),
        ev(&A, 8001, Lost, x).held(2001),
        // Read holds are shared.
        ev(&A, 9000, Acquire, y).waited(0),
        ev(&B, 9100, Acquire, y).waited(0),
        ev(&A, 9500, Release, y).held(500),
        ev(&B, 9700, Release, y).held(600),
    ];
    let built = timeline(&events, NOW);
    assert_eq!(
        built.spans,
        vec![
            expect(&A, Hold, ledger, (0, 5000), "released"),
            expect(&A, Hold, x, (6000, 8000), "lost"),
            expect(&A, Hold, y, (9000, 9500), "released"),
            expect(&B, Hold, y, (9100, 9700), "released"),
        ]
    );
    assert_eq!(built.marks.len(), 1);
    assert_eq!(built.marks[0].at_us, T0 + 8000);
}

#[test]
fn rate_limiter_admissions_end_their_waits_and_leave_no_hold_open() {
    use SpanKind::Hold;
    let api = ("api", "rate limiter");
    // As the history writes an admission: an acquire and a release of no length, at once.
    let events = [
        ev(&A, 1000, Wait, api),
        ev(&A, 3000, Acquire, api).waited(2000).contended(),
        ev(&A, 3000, Release, api).held(0),
        ev(&B, 3500, Wait, api),
        ev(&A, 4000, Acquire, api).waited(0),
        ev(&A, 4000, Release, api).held(0),
        ev(&B, 6000, GaveUp, api).waited(2500),
    ];
    let built = timeline(&events, NOW);
    assert_eq!(
        built.spans,
        vec![
            expect(&A, SpanKind::Wait, api, (1000, 3000), "acquired"),
            expect(&A, Hold, api, (3000, 3000), "released"),
            expect(&B, SpanKind::Wait, api, (3500, 6000), "gave_up"),
            expect(&A, Hold, api, (4000, 4000), "released"),
        ]
    );
    assert!(!built.spans.iter().any(Span::is_open));
    assert_eq!(LockKind::parse("rate limiter"), LockKind::RateLimiter);
}
