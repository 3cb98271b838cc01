//! `redlatch lock NAME`: takes the lock and holds it until a signal, as `etcdctl lock NAME`
//! does without a command.
//!
//! As `run`, one thread takes the signals ([`Blocked`]) and the main thread waits for the lock
//! (a signal ends that wait). Held, the main thread says so on stdout and waits for the next
//! [`Event`]: SIGINT, SIGTERM or SIGHUP release the lock (exit 0), a hold lost exits with 122,
//! and the end of a `--lease` with 123.

use std::io::Write;
use std::process::ExitCode;

use redlatch::Interrupter;

use crate::acquire::{
    lease_ended, report_release, seconds, signal_status, start, what, why, Event, Held, Waited,
};
use crate::args::{Args, Run, RUN_FAILED, RUN_LEASE_ENDED, RUN_LOST, RUN_TIMED_OUT};
use crate::signals::{self};
use crate::Failure;

/// Holds the lock `run` names until a signal, and says with what status redlatch exits.
pub fn lock(args: &Args, run: &Run) -> ExitCode {
    match hold_until_signal(args, run) {
        Ok(code) => code,
        Err(failure) => {
            failure.report();
            ExitCode::from(RUN_FAILED)
        }
    }
}

fn hold_until_signal(args: &Args, run: &Run) -> Result<ExitCode, Failure> {
    let (_client, waited, events, rx) = start(args, run)?;
    let held = match waited {
        Waited::Held(held) => held,
        Waited::GaveUp => {
            eprintln!(
                "redlatch: {} not had within {}",
                what(run),
                seconds(run.wait.unwrap_or_default())
            );
            return Ok(ExitCode::from(RUN_TIMED_OUT));
        }
        Waited::Interrupted(signal) => {
            eprintln!(
                "redlatch: {}: stopped waiting for {}",
                signals::name(signal),
                what(run)
            );
            return Ok(signal_status(signal));
        }
    };
    Interrupter::current().clear();
    held.on_lost(move |reason| {
        let _ = events.send(Event::Lost(reason));
    });
    let mut line = format!("holding {}", what(run));
    if let Held::Lock(guard) = &held {
        line += &format!(" as {}", guard.owner());
        if let Some(token) = guard.token() {
            line += &format!(", fencing token {token}");
        }
    }
    line += "; Ctrl-C to release\n";
    // A closed stdout is no reason to let go of the lock: the signal still ends the hold.
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(line.as_bytes())
        .and_then(|()| stdout.flush());
    // A signal that came as the wait ended is in `rx` already: the loop takes it first.
    let signal = loop {
        match rx.recv() {
            Ok(Event::Signal(s)) if signals::PASSED_ON.contains(&s.number) => break s.number,
            Ok(Event::Signal(_)) => {}
            Ok(Event::Lost(reason)) if lease_ended(run, reason) => {
                let _ = held.release();
                let lease = seconds(run.lease.unwrap_or_default());
                let _ = writeln!(
                    stdout,
                    "released {} (its --lease of {lease} ended)",
                    what(run)
                );
                let _ = stdout.flush();
                return Ok(ExitCode::from(RUN_LEASE_ENDED));
            }
            Ok(Event::Lost(reason)) => {
                eprintln!("redlatch: lost {} ({})", what(run), why(reason));
                let _ = held.release();
                return Ok(ExitCode::from(RUN_LOST));
            }
            // No signal thread any more: nothing can end the hold but this.
            Err(_) => return Err(Failure::new("the signal thread ended".to_owned())),
        }
    };
    if report_release(held.release(), run, false) {
        return Ok(ExitCode::from(RUN_LOST));
    }
    let _ = writeln!(stdout, "released {} ({})", what(run), signals::name(signal));
    let _ = stdout.flush();
    Ok(ExitCode::SUCCESS)
}
