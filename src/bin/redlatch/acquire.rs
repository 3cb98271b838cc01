//! Waiting for a lock or a permit and holding it, for `run` (a command under it) and `lock`
//! (until a signal): the signal thread, the one attempt then the wait (said on stderr, with
//! who holds it), and what a hold lost or a release that failed is told as.

use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use redlatch::inspect::Kind;
use redlatch::{Client, Interrupter, Leadership, LockGuard, LostReason, PermitGuard};

use crate::args::{Hold, Run};
use crate::explain::failure;
use crate::render::escaped;
use crate::signals::{self, Blocked, Signal};
use crate::{Args, Failure};
use std::process::ExitCode;

/// What the main thread reacts to.
pub enum Event {
    Signal(Signal),
    Lost(LostReason),
}

/// What is held while the command runs.
pub enum Held {
    Lock(LockGuard),
    Permit(Box<PermitGuard>),
    Leader(Box<Leadership>),
}

/// How the wait for the hold ended.
pub enum Waited {
    Held(Held),
    GaveUp,
    /// Ended by this signal.
    Interrupted(i32),
}

/// Starts the thread that takes the blocked signals: each is sent as an [`Event`], and one
/// passed on also interrupts the main thread's wait for the lock.
pub fn listen(blocked: Blocked, events: Sender<Event>, main: Interrupter) -> Result<(), Failure> {
    std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || {
            while let Ok(signal) = blocked.next() {
                let passed_on = signals::PASSED_ON.contains(&signal.number);
                if events.send(Event::Signal(signal)).is_err() {
                    return;
                }
                if passed_on {
                    main.interrupt();
                }
            }
        })
        .map(drop)
        .map_err(|e| Failure::new(format!("cannot start the signal thread: {e}")))
}

/// How `run` and `lock` begin: the signals blocked (before the client starts its threads, so
/// that they inherit the mask) and listened to, the client, and the wait for the hold. Also
/// the sender of the events (for a lost-hold callback) and their receiver.
pub fn start(
    args: &Args,
    run: &Run,
) -> Result<(Client, Waited, Sender<Event>, Receiver<Event>), Failure> {
    let blocked =
        Blocked::block().map_err(|e| Failure::new(format!("cannot block signals: {e}")))?;
    let (events, rx) = std::sync::mpsc::channel();
    listen(blocked, events.clone(), Interrupter::current())?;
    let client = crate::connect(args)?;
    let waited = acquire(&client, args, run, &rx)?;
    Ok((client, waited, events, rx))
}

/// The first signal to pass on that is waiting in `rx`, if any.
pub fn passed_on_signal(rx: &Receiver<Event>) -> Option<i32> {
    rx.try_iter().find_map(|event| match event {
        Event::Signal(s) if signals::PASSED_ON.contains(&s.number) => Some(s.number),
        _ => None,
    })
}

/// Whether the lock `run` names (without `--fair`) is a fair lock, as far as its keys tell (a
/// queue: threads wait for it in order): it is then taken in its queue, never with the plain
/// protocol, which would take it ahead of every waiter. A held fair lock with nobody queued
/// looks like a plain one, and is taken as one: nobody is there to pass.
fn is_fair(client: &Client, args: &Args, run: &Run) -> Result<bool, Failure> {
    let found = client.inspect(&run.name).map_err(|e| failure(e, args))?;
    let fair = found.is_some_and(|i| i.kind == Kind::Fair);
    if fair && !run.quiet {
        eprintln!(
            "redlatch: {} is a fair lock: waiting in its queue (as --fair)",
            escaped(&run.name)
        );
    }
    Ok(fair)
}

/// Waits for the lock or permit as `run` says.
pub fn acquire(
    client: &Client,
    args: &Args,
    run: &Run,
    rx: &Receiver<Event>,
) -> Result<Waited, Failure> {
    let deadline = run.wait.map(|wait| Instant::now() + wait);
    let held = match run.hold {
        Hold::Permits(permits) => {
            let semaphore = client.permit_expirable_semaphore(&run.name);
            if !semaphore
                .try_set_permits(permits)
                .map_err(|e| failure(e, args))?
            {
                let has = semaphore.permits().map_err(|e| failure(e, args))?;
                if has != i64::from(permits) {
                    return Err(Failure::new(format!(
                        "semaphore {} has {has} permits, not {permits}: run with --permits \
                         {has}, or change its number in Redis first",
                        run.name
                    )));
                }
            }
            // One try first: only a wait is announced.
            match semaphore.try_acquire_renewed() {
                Ok(None) if run.wait != Some(Duration::ZERO) => {
                    announce_wait(client, run);
                    match deadline {
                        None => semaphore.acquire_renewed().map(Some),
                        Some(deadline) => semaphore.try_acquire_renewed_until(deadline),
                    }
                }
                tried => tried,
            }
            .map(|permit| permit.map(|p| Held::Permit(Box::new(p))))
        }
        Hold::Leader => {
            let election = client.election(&run.name);
            let value = run.value.clone().unwrap_or_else(default_value);
            // One try first: only a wait is announced.
            match election.try_campaign_until(Instant::now(), &value) {
                Ok(None) if run.wait != Some(Duration::ZERO) => {
                    announce_wait(client, run);
                    match deadline {
                        None => election.campaign(&value).map(Some),
                        Some(deadline) => election.try_campaign_until(deadline, &value),
                    }
                }
                tried => tried,
            }
            .map(|leadership| leadership.map(|l| Held::Leader(Box::new(l))))
        }
        kind => {
            let lock = match kind {
                Hold::Fair => client.fair_lock(&run.name),
                Hold::Fenced => client.fenced_lock(&run.name),
                _ if is_fair(client, args, run)? => client.fair_lock(&run.name),
                _ => client.lock(&run.name),
            };
            let lock = match run.lease {
                Some(lease) => lock.with_lease(lease),
                None => lock,
            };
            match lock.try_lock() {
                Ok(None) if run.wait != Some(Duration::ZERO) => {
                    announce_wait(client, run);
                    match deadline {
                        None => lock.lock().map(Some),
                        Some(deadline) => lock.try_lock_until(deadline),
                    }
                }
                tried => tried,
            }
            .map(|guard| guard.map(Held::Lock))
        }
    };
    match held {
        Ok(Some(held)) => Ok(Waited::Held(held)),
        Ok(None) => Ok(Waited::GaveUp),
        Err(e) if e.is_interrupted() => {
            // The signal thread sends the signal before it interrupts.
            let signal = passed_on_signal(rx).unwrap_or(libc::SIGTERM);
            Ok(Waited::Interrupted(signal))
        }
        Err(e) => Err(failure(e, args)),
    }
}

/// Says on stderr (unless `--quiet`) who holds what `run` waits for: once, as the wait
/// starts. A failure to inspect is no reason not to wait: it is only said.
pub fn announce_wait(client: &Client, run: &Run) {
    if run.quiet {
        return;
    }
    let busy = match client.inspect(&run.name) {
        Ok(Some(mut found)) => {
            crate::trace(client, std::slice::from_mut(&mut found));
            crate::render::busy_text(&found)
        }
        Ok(None) => "just released".to_owned(),
        Err(e) => format!("cannot tell who holds it: {}", escaped(&e.to_string())),
    };
    let until = match run.wait {
        Some(wait) => format!("up to {}", seconds(wait)),
        None => "Ctrl-C to give up".to_owned(),
    };
    eprintln!("redlatch: waiting for {}, {busy} ({until})", what(run));
}

/// What a leader proclaims by default: `<host name>:<pid>`.
fn default_value() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

impl Held {
    pub fn on_lost(&self, f: impl FnOnce(LostReason) + Send + 'static) {
        match self {
            Held::Lock(guard) => guard.on_lost(f),
            Held::Permit(permit) => permit.on_lost(f),
            Held::Leader(leadership) => leadership.on_lost(f),
        }
    }

    pub fn release(self) -> redlatch::Result<()> {
        match self {
            Held::Lock(guard) => guard.unlock(),
            Held::Permit(permit) => permit.release(),
            Held::Leader(leadership) => leadership.resign(),
        }
    }
}

/// Reports a release that failed; true if it found the hold lost (and not `known_lost`).
pub fn report_release(released: redlatch::Result<()>, run: &Run, known_lost: bool) -> bool {
    match released {
        Ok(()) => false,
        Err(e) if e.is_lock_lost() || e.is_unknown_permit() => {
            if !known_lost {
                let before = match run.command.first() {
                    Some(program) => format!("`{}` ended", escaped(program)),
                    None => "the signal".to_owned(),
                };
                eprintln!(
                    "redlatch: {} was lost before {before} (found when releasing it)",
                    what(run)
                );
            }
            !known_lost
        }
        Err(e) => {
            eprintln!(
                "redlatch: releasing {} failed: {}; it expires with its lease",
                what(run),
                escaped(&e.to_string())
            );
            false
        }
    }
}

/// `lock NAME`, or `a permit of semaphore NAME`, the name [`escaped`] (for stdout and stderr;
/// not for a [`Failure`], which is escaped as it is reported).
pub fn what(run: &Run) -> String {
    let name = escaped(&run.name);
    match run.hold {
        Hold::Permits(_) => format!("a permit of semaphore {name}"),
        Hold::Leader => format!("leadership of election {name}"),
        _ => format!("lock {name}"),
    }
}

/// Why a hold was lost, for stderr.
/// Whether a hold's end is the `--lease` it was taken with running out, as asked: an
/// explicit lease is not renewed, so its expiry is no loss.
pub fn lease_ended(run: &Run, reason: LostReason) -> bool {
    run.lease.is_some() && reason == LostReason::LeaseExpired
}

pub fn why(reason: LostReason) -> &'static str {
    match reason {
        LostReason::NotHeld => "a renewal found it gone: force-unlocked, deleted or taken",
        LostReason::LeaseExpired => {
            "its lease ran out: no renewal was confirmed for a whole lease, or --lease ended"
        }
        LostReason::ClientClosed => "the client was closed",
        LostReason::MaxHoldReached => "it reached its maximum hold time",
        LostReason::Preempted => "a preemptor released it by force",
        _ => "lost",
    }
}

/// `500ms`, `5s`, `1.5s`.
pub fn seconds(d: Duration) -> String {
    match d.as_millis() {
        ms if ms < 1000 => format!("{ms}ms"),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{}s", ms as f64 / 1000.0),
    }
}

pub fn signal_status(signal: i32) -> ExitCode {
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(255))
}
