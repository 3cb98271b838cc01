//! Where the servers' password comes from, as redis-cli takes it: `--askpass` (asked on the
//! terminal, without echo), else `--password` (which other users see in `ps`), else the URL's,
//! else `$REDISCLI_AUTH`.

use crate::args::{Args, Servers};
use crate::Failure;

/// The environment variable redis-cli reads the password from.
pub const ENV: &str = "REDISCLI_AUTH";

/// The password to log in with, if any: asked for with `--askpass`, else `--password`, else
/// none when a URL carries one, else `$REDISCLI_AUTH` (`env`).
pub fn password(args: &Args, env: Option<String>) -> Result<Option<String>, Failure> {
    if args.askpass {
        return ask("Password: ").map(Some);
    }
    if args.password.is_some() {
        return Ok(args.password.clone());
    }
    let urls = match &args.servers {
        Servers::Url(url) => std::slice::from_ref(url),
        Servers::Cluster(urls) | Servers::Sentinel { urls, .. } => urls.as_slice(),
    };
    if urls.iter().any(|u| has_password(u)) {
        return Ok(None);
    }
    Ok(env.filter(|p| !p.is_empty()))
}

/// Whether `url` has a password (`scheme://[user]:password@...`).
fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// Asks `question` on the terminal (`/dev/tty`, whatever stdin is) and reads one line with
/// echo off; echo is restored before it returns.
#[cfg(unix)]
fn ask(question: &str) -> Result<String, Failure> {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsRawFd;

    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|e| Failure::new(format!("--askpass needs a terminal to ask on: {e}")))?;
    let fd = tty.as_raw_fd();
    let mut saved = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: `fd` is open for the call; tcgetattr fills `saved` when it returns 0.
    if unsafe { libc::tcgetattr(fd, saved.as_mut_ptr()) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Failure::new(format!(
            "cannot read the terminal's settings: {e}"
        )));
    }
    // SAFETY: initialized by tcgetattr above.
    let saved = unsafe { saved.assume_init() };
    let mut quiet = saved;
    quiet.c_lflag &= !libc::ECHO;
    quiet.c_lflag |= libc::ECHONL;
    // SAFETY: a valid fd and a valid termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &quiet) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Failure::new(format!(
            "cannot turn the terminal's echo off: {e}"
        )));
    }
    let mut line = String::new();
    let read = (&tty)
        .write_all(question.as_bytes())
        .and_then(|()| (&tty).flush())
        .and_then(|()| BufReader::new(&tty).read_line(&mut line));
    // SAFETY: as above; the settings read first are put back whatever the read gave.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &saved) };
    match read {
        Ok(0) => Err(Failure::new("no password given (end of input)".to_owned())),
        Ok(_) => Ok(line.trim_end_matches(['\r', '\n']).to_owned()),
        Err(e) => Err(Failure::new(format!("cannot read the password: {e}"))),
    }
}

#[cfg(not(unix))]
fn ask(_: &str) -> Result<String, Failure> {
    Err(Failure::new(
        "--askpass is for Unix terminals only".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_password_is_told_from_a_user_alone() {
        assert!(has_password("redis://:pw@h:1/"));
        assert!(has_password("rediss://u:pw@h/0"));
        assert!(!has_password("redis://u@h:1/"));
        assert!(!has_password("redis://h:1/"));
        assert!(!has_password("redis://h:1/?x=a:b@c"));
    }
}
