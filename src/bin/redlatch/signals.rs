//! The signals `run` handles: blocked in every thread, and taken one at a time by one thread
//! with `sigwait` (no handler runs, so nothing is async-signal-unsafe). The command would
//! inherit the mask: `run` clears it in the child before `exec`.

use std::io;
use std::mem::MaybeUninit;

/// The signals passed on to the command (and that end a wait for the lock).
pub const PASSED_ON: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// One signal taken.
#[derive(Debug, Clone, Copy)]
pub struct Signal {
    pub number: i32,
    /// Sent by the kernel, not by a process: on Linux, a terminal's Ctrl-C or hang-up, which
    /// the terminal sends to its whole foreground process group. Always false elsewhere.
    pub from_kernel: bool,
}

/// [`PASSED_ON`] and SIGCHLD, blocked (see [`block`](Self::block)).
pub struct Blocked(libc::sigset_t);

impl Blocked {
    /// Blocks [`PASSED_ON`] and SIGCHLD in the calling thread and in every thread it starts
    /// from now on: call it before any other thread starts, so that only [`next`](Self::next)
    /// takes them.
    pub fn block() -> io::Result<Blocked> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `sigemptyset` initializes the set; `sigaddset` and `pthread_sigmask` get a
        // valid set and valid signal numbers.
        unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            for signal in PASSED_ON.into_iter().chain([libc::SIGCHLD]) {
                libc::sigaddset(set.as_mut_ptr(), signal);
            }
            let set = set.assume_init();
            match libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) {
                0 => Ok(Blocked(set)),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        }
    }

    /// Waits for the next of the blocked signals.
    pub fn next(&self) -> io::Result<Signal> {
        loop {
            match self.wait() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn wait(&self) -> io::Result<Signal> {
        let mut info = MaybeUninit::<libc::siginfo_t>::uninit();
        // SAFETY: a valid set, and room for the info that `sigwaitinfo` fills in when it
        // returns a signal.
        let number = unsafe { libc::sigwaitinfo(&self.0, info.as_mut_ptr()) };
        if number == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: filled in, as a signal was returned.
        let info = unsafe { info.assume_init() };
        Ok(Signal {
            number,
            from_kernel: info.si_code == libc::SI_KERNEL,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn wait(&self) -> io::Result<Signal> {
        let mut number = 0;
        // SAFETY: a valid set and a valid place for the number.
        match unsafe { libc::sigwait(&self.0, &mut number) } {
            0 => Ok(Signal {
                number,
                from_kernel: false,
            }),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// Sends `signal` to process `pid`; errors are ignored (it may have exited: a child not yet
/// waited for stays a zombie, so its pid is not reused meanwhile).
pub fn send(pid: u32, signal: i32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Whether process `pid` is in the caller's process group (and so gets what a terminal
/// sends to the caller's group).
pub fn in_my_group(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: neither call has memory-safety preconditions.
    unsafe { libc::getpgid(pid) == libc::getpgrp() }
}

/// The name of a signal for messages: `SIGTERM`, or `signal 40`.
pub fn name(signal: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
    ];
    match known.iter().find(|(n, _)| *n == signal) {
        Some((_, name)) => (*name).to_owned(),
        None => format!("signal {signal}"),
    }
}
