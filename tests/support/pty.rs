//! A command in a real pseudo-terminal, through `script` (util-linux): what is written to its
//! stdin is typed at the terminal (`\x03` is Ctrl-C, sent by the terminal as SIGINT to the
//! foreground process group), and what the terminal shows is read back.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A command running in a pseudo-terminal.
pub struct Pty {
    child: Child,
    stdin: Option<ChildStdin>,
    shown: Arc<(Mutex<String>, Condvar)>,
}

/// `'text'` for `sh`.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Pty {
    /// Starts `program args` in a pseudo-terminal with `env` set; `None` (saying why on
    /// stderr, for the test to skip) where `script` cannot run.
    pub fn spawn(program: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Pty> {
        let line: Vec<String> = std::iter::once(program)
            .chain(args.iter().copied())
            .map(quote)
            .collect();
        // `exec`: no shell stays in the terminal's foreground group, where Ctrl-C would end it
        // with SIGINT (130) whatever the command does; `script` runs the line with `$SHELL -c`.
        let line = format!("exec {}", line.join(" "));
        let mut cmd = Command::new("script");
        // -q: no banner; -e: script exits with the command's status; -c: the command line.
        cmd.args(["-qec", &line, "/dev/null"])
            .env("SHELL", "/bin/sh")
            .env_remove("REDIS_URL")
            .env_remove("REDISCLI_AUTH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                eprintln!("skipped: cannot run `script` (util-linux) for a pseudo-terminal: {e}");
                return None;
            }
        };
        let shown = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let mut stdout = child.stdout.take().unwrap();
        let sink = Arc::clone(&shown);
        thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let (text, changed) = &*sink;
                text.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
                changed.notify_all();
            }
        });
        let stdin = child.stdin.take();
        Some(Pty {
            child,
            stdin,
            shown,
        })
    }

    /// Types `text` at the terminal.
    pub fn type_in(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Everything the terminal showed so far.
    pub fn shown(&self) -> String {
        self.shown.0.lock().unwrap().clone()
    }

    /// Waits until the terminal shows `text`; panics with what it showed after `timeout`.
    pub fn await_shown(&self, text: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let (shown, changed) = &*self.shown;
        let mut now = shown.lock().unwrap();
        while !now.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the terminal never showed {text:?}: {now:?}"
            );
            now = changed.wait_timeout(now, left).unwrap().0;
        }
    }

    /// Waits for the command to exit (killed after `timeout`): its status.
    pub fn finish(mut self, timeout: Duration) -> i32 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                drop(self.stdin.take());
                return status.code().expect("script exited");
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "no exit within {timeout:?}; the terminal showed {:?}",
                    self.shown()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
