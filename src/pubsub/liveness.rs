//! Whether a pub/sub connection is alive, checked while anything is registered on it: a
//! `PING` once per interval, and a connection whose `PING` is not answered within the next
//! interval counts as silent (dropped by the reader, which reconnects and wakes every
//! waiter). Nothing is sent while nothing is registered. Also the connection's read side,
//! which looks after the connection between reads ([`Tended`]).
//!
//! A connection can fall silent without an error: a NAT or firewall that forgot it, a
//! half-open socket, a proxy that stalls. Without this, its waiters hear no release until
//! their bound (a lock's lease) runs out, and a re-check then may find the lock taken again.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use crate::net::Stream;

/// The shortest read timeout the reader sets (a zero one is refused by the socket).
const MIN_WAIT: Duration = Duration::from_millis(1);

/// One connection's check: when its last `PING` went out, and whether it is still owed an
/// answer.
#[derive(Debug)]
pub(super) struct Liveness {
    interval: Duration,
    /// The next `PING` is due one interval after this: when the last one was sent, the
    /// connection made, the first thing registered on it after nothing was, or the reader
    /// last saw nothing registered.
    since: Instant,
    /// When the `PING` that awaits its answer was sent.
    unanswered: Option<Instant>,
}

/// What the reader does next (see [`Liveness::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Due {
    /// Nothing to do for this long.
    Wait(Duration),
    /// Send a `PING` now (it is counted as sent), then wait an interval.
    Ping,
    /// The `PING` sent this long ago is unanswered: the connection is silent.
    Silent(Duration),
}

impl Liveness {
    pub(super) fn new(interval: Duration, now: Instant) -> Liveness {
        Liveness {
            interval,
            since: now,
            unanswered: None,
        }
    }

    pub(super) fn interval(&self) -> Duration {
        self.interval
    }

    /// A new connection: nothing is owed, and the next `PING` is due an interval from now.
    pub(super) fn restart(&mut self, now: Instant) {
        self.since = now;
        self.unanswered = None;
    }

    /// Something registered on a connection that had nothing registered: the next `PING` is
    /// due an interval from now (a wait shorter than that sends none).
    pub(super) fn busy(&mut self, now: Instant) {
        if self.unanswered.is_none() {
            self.since = now;
        }
    }

    /// The answer to the `PING` (or any reply that can only come after it) arrived.
    pub(super) fn answered(&mut self) {
        self.unanswered = None;
    }

    /// Whether a `PING` awaits its answer.
    pub(super) fn is_owed(&self) -> bool {
        self.unanswered.is_some()
    }

    /// What is due at `now`; `active` when anything is registered on the connection. A
    /// `PING` already sent is held to its interval even when nothing is registered any more
    /// (a connection that does not answer is dead either way), but none is sent then.
    pub(super) fn check(&mut self, now: Instant, active: bool) -> Due {
        if let Some(sent) = self.unanswered {
            let waited = now.saturating_duration_since(sent);
            return match self.interval.checked_sub(waited) {
                Some(left) if !left.is_zero() => Due::Wait(left),
                _ => Due::Silent(waited),
            };
        }
        if !active {
            // The clock starts again when something registers.
            self.since = now;
            return Due::Wait(self.interval);
        }
        let due = self.since + self.interval;
        if now < due {
            return Due::Wait(due - now);
        }
        self.since = now;
        self.unanswered = Some(now);
        Due::Ping
    }
}

/// A connection's read side whose reads call `tend` first: it sends what is due (a `PING`)
/// and says how long the read may block before it is called again, or fails the read (the
/// connection is silent). A read that times out is made again after `tend`, so that the
/// parser above never sees a timeout, even in the middle of a reply.
pub(super) struct Tended<'a, F> {
    pub(super) stream: &'a Stream,
    pub(super) tend: F,
}

impl<F: FnMut() -> io::Result<Duration>> Read for Tended<'_, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let wait = (self.tend)()?;
            self.stream.set_read_timeout(Some(wait.max(MIN_WAIT)))?;
            let mut stream = self.stream;
            match stream.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Duration = Duration::from_secs(2);

    #[test]
    fn nothing_is_due_while_nothing_is_registered() {
        let t0 = Instant::now();
        let mut l = Liveness::new(I, t0);
        for n in 1..10 {
            assert_eq!(l.check(t0 + I * n, false), Due::Wait(I));
        }
        assert!(!l.is_owed());
    }

    #[test]
    fn a_ping_goes_out_an_interval_after_the_last_one_and_is_owed_an_interval() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut l = Liveness::new(I, t0);
        assert_eq!(l.check(t0 + ms(500), true), Due::Wait(ms(1500)));
        assert_eq!(l.check(t0 + I, true), Due::Ping);
        assert!(l.is_owed());
        assert_eq!(l.check(t0 + I + ms(500), true), Due::Wait(ms(1500)));
        l.answered();
        // Every interval from the last PING, however soon it was answered.
        assert_eq!(l.check(t0 + I + ms(600), true), Due::Wait(ms(1400)));
        assert_eq!(l.check(t0 + I * 2, true), Due::Ping);
        assert_eq!(l.check(t0 + I * 3, true), Due::Silent(I));
        assert_eq!(l.check(t0 + I * 3 + ms(1), false), Due::Silent(I + ms(1)));
    }

    #[test]
    fn the_clock_starts_when_something_registers_and_on_a_new_connection() {
        let t0 = Instant::now();
        let mut l = Liveness::new(I, t0);
        assert_eq!(l.check(t0 + I * 10, false), Due::Wait(I));
        assert_eq!(
            l.check(t0 + I * 10 + Duration::from_secs(1), true),
            Due::Wait(Duration::from_secs(1))
        );
        assert_eq!(l.check(t0 + I * 11, true), Due::Ping);
        l.restart(t0 + I * 11 + Duration::from_secs(1));
        assert!(!l.is_owed());
        assert_eq!(
            l.check(t0 + I * 12, true),
            Due::Wait(Duration::from_secs(1))
        );
    }

    #[test]
    fn the_first_ping_of_a_wait_is_an_interval_after_its_registration() {
        let t0 = Instant::now();
        let mut l = Liveness::new(I, t0);
        assert_eq!(l.check(t0 + I, false), Due::Wait(I));
        // Registered just before the reader's next look: that look is not the start.
        let registered = t0 + I * 2 - Duration::from_millis(1);
        l.busy(registered);
        assert_eq!(
            l.check(t0 + I * 2, true),
            Due::Wait(I - Duration::from_millis(1))
        );
        assert_eq!(l.check(registered + I, true), Due::Ping);
        l.busy(registered + I); // owed: nothing changes
        assert_eq!(l.check(registered + I * 2, true), Due::Silent(I));
    }

    #[test]
    fn a_silent_connection_is_found_within_two_intervals_of_its_last_answer() {
        // Whenever the silence starts, the PING that goes unanswered was sent at most an
        // interval after the last answer, and is given up an interval after that.
        let t0 = Instant::now();
        let step = Duration::from_millis(10);
        let mut l = Liveness::new(I, t0);
        let mut now = t0;
        let mut last_answer = t0;
        let silence_from = t0 + Duration::from_millis(4_321);
        loop {
            now += step;
            match l.check(now, true) {
                Due::Ping if now < silence_from => {
                    l.answered();
                    last_answer = now;
                }
                Due::Silent(_) => break,
                _ => {}
            }
        }
        assert!(now - last_answer <= I * 2 + step, "{:?}", now - last_answer);
        assert!(now >= silence_from + I);
    }
}
