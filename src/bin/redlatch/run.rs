//! `redlatch run NAME -- CMD ARGS...`: a command under a lock, or under one of N permits of
//! a permit-expirable semaphore, as `etcdctl lock` and `consul lock` do; and `redlatch elect
//! NAME -- CMD`, a command while leading an election (again and again with `--again`).
//!
//! One thread takes the signals ([`signals::Blocked`]); the main thread does the rest. It
//! waits for the lock (a signal interrupts that wait through its [`Interrupter`]), starts the
//! command, then handles one [`Event`] at a time until the command has exited: a signal
//! (passed on; SIGCHLD: the command may have exited), or the hold lost (SIGTERM to the
//! command, SIGKILL after the grace period). Then it releases the hold.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Instant;

use redlatch::{Interrupter, LostReason};

use crate::acquire::{
    acquire, lease_ended, passed_on_signal, report_release, seconds, signal_status, start, what,
    why, Event, Held, Waited,
};
use crate::args::{
    Args, OnLost, Run, RUN_CANNOT_EXECUTE, RUN_FAILED, RUN_LEASE_ENDED, RUN_LOST, RUN_NOT_FOUND,
    RUN_TIMED_OUT,
};
use crate::render::escaped;
use crate::signals::{self};
use crate::Failure;

/// Runs `run`, and says with what status redlatch exits.
pub fn run(args: &Args, run: &Run) -> ExitCode {
    match run_under_hold(args, run) {
        Ok(code) => code,
        Err(failure) => {
            failure.report();
            ExitCode::from(RUN_FAILED)
        }
    }
}

fn run_under_hold(args: &Args, run: &Run) -> Result<ExitCode, Failure> {
    let (client, mut waited, events, rx) = start(args, run)?;
    loop {
        let (code, again) = one_round(waited, run, &events, &rx)?;
        // `elect --again`: once more, unless a signal ended this round (or came since).
        if !(run.again && again) {
            return Ok(code);
        }
        waited = loop {
            // A command that ends at once does not make a new term in a tight loop.
            std::thread::sleep(AGAIN_PAUSE);
            if let Some(signal) = passed_on_signal(&rx) {
                return Ok(signal_status(signal));
            }
            match acquire(&client, args, run, &rx) {
                Ok(waited) => break waited,
                // Redis away for a while: said, and tried again until a signal.
                Err(failure) => eprintln!("redlatch: {}; campaigning again", escaped(&failure.msg)),
            }
        };
    }
}

/// `elect --again`: the pause between a round's end and the next campaign.
const AGAIN_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// One wait's outcome turned into a run of the command: its status, and whether another
/// round may follow (no signal ended this one).
fn one_round(
    waited: Waited,
    run: &Run,
    events: &Sender<Event>,
    rx: &Receiver<Event>,
) -> Result<(ExitCode, bool), Failure> {
    let held = match waited {
        Waited::Held(held) => held,
        Waited::GaveUp => {
            eprintln!(
                "redlatch: {} not had within {}: `{}` not run",
                what(run),
                seconds(run.wait.unwrap_or_default()),
                escaped(&run.command[0])
            );
            return Ok((ExitCode::from(RUN_TIMED_OUT), false));
        }
        Waited::Interrupted(signal) => {
            eprintln!(
                "redlatch: {}: stopped waiting for {}",
                signals::name(signal),
                what(run)
            );
            return Ok((signal_status(signal), false));
        }
    };
    // The wait is over: a signal from now on is the command's (it is in `rx` too).
    Interrupter::current().clear();
    // A signal that came as the wait ended, before the command could get it.
    if let Some(signal) = passed_on_signal(rx) {
        eprintln!(
            "redlatch: {}: `{}` not run",
            signals::name(signal),
            escaped(&run.command[0])
        );
        report_release(held.release(), run, false);
        return Ok((signal_status(signal), false));
    }
    let lost_events = events.clone();
    held.on_lost(move |reason| {
        let _ = lost_events.send(Event::Lost(reason));
    });
    let mut child = match command(run, &held).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("redlatch: cannot run `{}`: {e}", escaped(&run.command[0]));
            report_release(held.release(), run, false);
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => RUN_NOT_FOUND,
                _ => RUN_CANNOT_EXECUTE,
            };
            return Ok((ExitCode::from(code), false));
        }
    };
    let (status, lost, signalled) = supervise(&mut child, rx, run)?;
    let lost_at_release = report_release(held.release(), run, lost.is_some());
    let stop = run.on_lost == OnLost::Stop;
    if stop && (lost.is_some() || lost_at_release) {
        eprintln!("redlatch: `{}` {}", escaped(&run.command[0]), ended(status));
        let code = match lost {
            Some(reason) if lease_ended(run, reason) => RUN_LEASE_ENDED,
            _ => RUN_LOST,
        };
        return Ok((ExitCode::from(code), !signalled));
    }
    Ok((exit_status(status), !signalled))
}

/// The command to run, with the hold in its environment.
fn command(run: &Run, held: &Held) -> Command {
    let mut command = Command::new(&run.command[0]);
    command.args(&run.command[1..]);
    for var in [
        "REDLATCH_OWNER",
        "REDLATCH_TOKEN",
        "REDLATCH_PERMIT",
        "REDLATCH_VALUE",
    ] {
        command.env_remove(var);
    }
    command.env("REDLATCH_NAME", &run.name);
    match held {
        Held::Lock(guard) => {
            command.env("REDLATCH_OWNER", guard.owner());
            if let Some(token) = guard.token() {
                command.env("REDLATCH_TOKEN", token.to_string());
            }
        }
        Held::Permit(permit) => {
            command.env("REDLATCH_PERMIT", permit.id().as_str());
        }
        Held::Leader(leadership) => {
            command.env("REDLATCH_OWNER", leadership.guard().owner());
            command.env("REDLATCH_TOKEN", leadership.term().to_string());
            command.env(
                "REDLATCH_VALUE",
                String::from_utf8_lossy(leadership.value()).into_owned(),
            );
        }
    }
    prepare_child(&mut command);
    command
}

/// Sets the child up between fork and exec: it gets the signals that redlatch blocks (it
/// would inherit the mask), and on Linux it is killed when redlatch dies (its death signal):
/// it must not run on without the lock that nothing renews any more.
fn prepare_child(command: &mut Command) {
    let parent = std::process::id();
    // SAFETY: between fork and exec, the closure calls only async-signal-safe functions
    // (sigemptyset, sigprocmask, prctl, getppid) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let mut none = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(none.as_mut_ptr());
            if libc::sigprocmask(libc::SIG_SETMASK, none.as_ptr(), std::ptr::null_mut()) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // redlatch died before the death signal was set: do not run.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = parent;
            Ok(())
        });
    }
}

/// Passes signals on to the child and stops it if the hold is lost, until it has exited:
/// its status, why the hold was lost if it was, and whether a signal was passed on.
fn supervise(
    child: &mut Child,
    rx: &Receiver<Event>,
    run: &Run,
) -> Result<(ExitStatus, Option<LostReason>, bool), Failure> {
    let pid = child.id();
    // For messages on stderr; failures (reported escaped) name it as it is.
    let program = escaped(&run.command[0]);
    let raw = &run.command[0];
    let mut lost = None;
    let mut signalled = false;
    let mut kill_at: Option<Instant> = None;
    loop {
        let event = match kill_at {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match event {
            Ok(Event::Signal(signal)) if signal.number == libc::SIGCHLD => {
                let exited = child
                    .try_wait()
                    .map_err(|e| Failure::new(format!("cannot wait for `{raw}`: {e}")))?;
                if let Some(status) = exited {
                    return Ok((status, lost, signalled));
                }
            }
            Ok(Event::Signal(signal)) => {
                signalled |= signals::PASSED_ON.contains(&signal.number);
                // A terminal's signal went to the whole group, the child included.
                if !(signal.from_kernel && signals::in_my_group(pid)) {
                    signals::send(pid, signal.number);
                }
            }
            Ok(Event::Lost(reason)) => {
                lost = Some(reason);
                if run.on_lost == OnLost::Ignore {
                    eprintln!(
                        "redlatch: lost {} ({}); --on-lost ignore: `{program}` runs on \
                         without it",
                        what(run),
                        why(reason)
                    );
                    continue;
                }
                eprintln!(
                    "redlatch: lost {} ({}): stopping `{program}` (SIGTERM now, SIGKILL in {})",
                    what(run),
                    why(reason),
                    seconds(run.grace)
                );
                signals::send(pid, libc::SIGTERM);
                kill_at = Some(Instant::now() + run.grace);
            }
            Err(RecvTimeoutError::Timeout) => {
                eprintln!(
                    "redlatch: `{program}` still runs {} after SIGTERM: SIGKILL",
                    seconds(run.grace)
                );
                signals::send(pid, libc::SIGKILL);
                kill_at = None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                // No signal thread any more: nothing to pass on, wait.
                let status = child
                    .wait()
                    .map_err(|e| Failure::new(format!("cannot wait for `{raw}`: {e}")))?;
                return Ok((status, lost, signalled));
            }
        }
    }
}

/// `exited with status 3`, `was killed by SIGTERM`.
fn ended(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by {}", signals::name(signal)),
        _ => "ended".to_owned(),
    }
}

/// The command's status, as shells give it: its exit code, or 128 + the signal that killed it.
fn exit_status(status: ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(signal)) => signal_status(signal),
        _ => ExitCode::FAILURE,
    }
}
