//! A test's other half in a process of its own: the same test binary run again with one
//! ignored test selected (`NAME --exact --ignored`), its environment set by the parent, and
//! its stdout read line by line. Killed when the handle drops.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A child test process, killed (and reaped) on drop.
pub struct ChildTest {
    pub child: Child,
    lines: mpsc::Receiver<String>,
}

impl ChildTest {
    /// Runs the ignored test `test` of this binary with `env`, stdin piped.
    pub fn start(test: &str, env: &[(&str, String)]) -> ChildTest {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                test,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ChildTest { child, lines }
    }

    /// What follows `tag` on the next line that has it (wherever in the line: libtest's
    /// `test NAME ... ` may start the child's first one), within `within`.
    pub fn next(&self, tag: &str, within: Duration) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(within)
                .unwrap_or_else(|_| panic!("the child said nothing with {tag}"));
            if let Some(at) = line.find(tag) {
                return line[at + tag.len()..].trim().to_owned();
            }
        }
    }

    /// Every line up to the first that has `tag` (that one included), within `within` each.
    pub fn until(&self, tag: &str, within: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(within)
                .unwrap_or_else(|_| panic!("the child said nothing with {tag}: {lines:?}"));
            let last = line.contains(tag);
            lines.push(line);
            if last {
                return lines;
            }
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status, once it exits within `within` (a panic if it does not).
    pub fn exit_within(&mut self, within: Duration) -> std::process::ExitStatus {
        let mut status = None;
        let exited = super::wait_until(within, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(exited, "the child did not exit within {within:?}");
        status.expect("exited")
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
