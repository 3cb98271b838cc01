//! The command line: a small hand-written parser (no dependencies) and the help texts.

use std::time::Duration;

pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

pub const HELP: &str = "\
redlatch: inspect and operate Redisson-compatible locks and synchronizers in Redis

Usage: redlatch [OPTIONS] <COMMAND> [ARGS]

Commands:
  inspect NAME        what NAME is (reentrant, fair, fenced, read-write lock, semaphore,
                      latch, ...), its holders, lease, queue, permits, count, token
  list [PATTERN]      the locks and synchronizers with a key matching PATTERN (SCAN glob,
                      default *), one line each
  force-unlock NAME   break the lock NAME whoever holds it, and wake its waiters
  watch NAME          print events (acquired, released, waiting, ...) until Ctrl-C
  run NAME -- CMD..   run a command while holding the lock NAME (or one of N permits)
  help [COMMAND]      this text, or a command's

Options:
  --url URL                    a single server (default: $REDIS_URL, else redis://127.0.0.1:6379/)
  --cluster URL[,URL..]        a Redis Cluster, through any of its nodes
  --sentinel URL[,URL..]       Redis Sentinel, with --master NAME
  --master NAME                the master's name at the sentinels
  --password PASSWORD          the servers' password (or put it in the URL)
  --name-prefix PREFIX         the applications' name prefix (Redisson's PrefixNameMapper):
                               NAME and PATTERN are given and shown without it
  --json                       machine-readable output (JSON; one object per line for watch)
  -h, --help                   help

Exit status: 0 success, 1 error, 2 no lock or synchronizer of that name (run: see
'redlatch help run').
";

pub const INSPECT_HELP: &str = "\
Usage: redlatch inspect [OPTIONS] NAME

Shows what NAME is, as told by its keys: its kind (reentrant, fair, fenced, read-write,
semaphore, expirable-semaphore, latch, semaphore-or-latch, fenced-resource, unknown), each
holder with its client id, thread number and hold count, the remaining lease, a fair lock's
queue (in order, with each waiter's deadline), read holders, permits, a latch's count, the
latest fencing token, and how many clients wait on its channel.

Some kinds look alike in Redis: a semaphore and a latch (unless threads wait on it, such a
key is shown as semaphore-or-latch), and a fair lock nobody waits for and a reentrant lock
(shown as reentrant: a fair lock's queue keys exist only while threads wait).

With --json: one object; durations are in milliseconds (lease_ms is -1 for a key without
expiry, null for none).

Exit status: 0 found, 1 error, 2 nothing named NAME.
";

pub const LIST_HELP: &str = "\
Usage: redlatch list [OPTIONS] [PATTERN]

Lists the locks and synchronizers with a key matching PATTERN (Redis glob syntax: *, ?,
[abc], \\ escapes; default *), found with SCAN on every master (never KEYS): one line each
with its kind, state and lease. Helper keys (fair queues, token counters, read-hold leases,
permit expiries) are shown under their lock, not on their own. A free fenced lock exists only
as redisson_lock_token:{NAME}: a pattern like *orders* finds it, orders* does not.

With --json: an array of the objects `inspect --json` prints.
";

pub const FORCE_UNLOCK_HELP: &str = "\
Usage: redlatch force-unlock [OPTIONS] [--yes] NAME

Breaks the lock NAME whoever holds it (reentrant, fair, fenced, or read-write in its current
mode) and wakes its waiters, as Lock::force_unlock does. The evicted holders find out at their
next lease renewal. Semaphores and latches are not locks: they are refused.

Asks \"Break lock NAME held by ...? [y/N]\" on the terminal first; with --yes it does not ask.
Without a terminal on stdin and without --yes it refuses.

Options:
  -y, --yes   do not ask

Exit status: 0 broken (or not held), 1 error or refused, 2 nothing named NAME.
";

pub const WATCH_HELP: &str = "\
Usage: redlatch watch [OPTIONS] [--interval MS] NAME

Prints what happens to NAME until interrupted (Ctrl-C): acquired, released (with the owner
and its hold count), waiting (a fair-queue waiter with its place, or a client subscribing to
the lock's channel), left (a waiter that gave up), changed (a latch's count, ...).

Releases are announced on the lock's channel and show at once; acquires and queue changes
are seen by re-inspecting NAME every --interval milliseconds (default 250). A hold shorter
than that may show only as its release (without owner).

With --json: a first line {\"event\":\"watching\",...} once subscribed, then one object per
event: {\"at\":\"<UTC time>\",\"at_ms\":<ms since 1970>,\"event\":\"acquired\",\"name\":...,
\"owner\":\"<client id>:<thread>\" or null, ...}.

Options:
  --interval MS   how often to re-inspect (default 250)
";

pub const RUN_HELP: &str = "\
Usage: redlatch run [OPTIONS] NAME [--] CMD [ARGS...]

Waits for the lock NAME, runs CMD with ARGS while it holds it, releases it when CMD has
exited, and exits with CMD's status. The watchdog renews the lock's lease while CMD runs,
every third of the watchdog timeout. Options go before CMD: from CMD on, every argument is
the command's.

  redlatch run nightly-report -- ./report.sh --full
  redlatch run --permits 3 --wait 10m render -- render-frame 42

Options:
  --fair                 a fair lock: waiters get it in the order they came
  --fenced               a fenced lock: each hold has a fencing token ($REDLATCH_TOKEN)
  --permits N            one of the N permits of the permit-expirable semaphore NAME instead
                         of a lock: at most N commands at once, on all machines. The first
                         run sets the semaphore to N permits (it keeps them); a semaphore
                         with another number of permits is refused (exit 125). The permit's
                         lease is the watchdog timeout, renewed while CMD runs
  --wait DURATION        give up if the lock is not had within DURATION (0: try once);
                         by default, wait as long as it takes
  --lease DURATION       hold the lock for DURATION at most, not renewed: CMD is stopped
                         when it runs out (locks only)
  --watchdog-timeout DURATION
                         the lease that the watchdog renews every third of (default 30s)
  --grace DURATION       from SIGTERM to SIGKILL when the lock is lost (default 5s)
  --on-lost stop|ignore  when the lock is lost: stop CMD (the default), or let it run on
                         without the lock

DURATION is a whole number and a unit: ms, s, m or h (500ms, 30s, 10m); a bare number is
seconds.

CMD's environment (as inherited, plus):
  REDLATCH_NAME     NAME, as given
  REDLATCH_OWNER    the owner id of the hold, <client uuid>:<number> (locks)
  REDLATCH_TOKEN    the fencing token of the hold (--fenced): send it with each write, so
                    that what CMD writes to can refuse a stale holder's writes
  REDLATCH_PERMIT   the permit id (--permits)

When the lock is lost while CMD runs (a renewal finds it force-unlocked, deleted or taken;
no renewal was confirmed for a whole lease; or the --lease ran out), redlatch says why on
stderr, sends CMD SIGTERM at once and SIGKILL after the grace period, and exits with 122.
A force-unlock is noticed within a third of the watchdog timeout (with --lease, only when
the lease ends). With --on-lost ignore, it says so and lets CMD run: its status is then
redlatch's.

Signals: SIGINT, SIGTERM and SIGHUP sent to redlatch are passed to CMD (on Linux, except
those the terminal sent to the whole process group, CMD included, as Ctrl-C does); the lock
is released when CMD has exited. While redlatch waits for the lock, they end the wait and
leave nothing behind (no place in a fair queue): it exits with 128 + the signal's number.
If redlatch is killed with SIGKILL, nothing releases the lock: it expires with its lease,
at most the watchdog timeout (30 s by default) after the last renewal, or when the --lease
ends. On Linux, CMD is killed (SIGKILL) when redlatch dies.

Exit status:
  CMD's status  CMD exited; 128+N if it was killed by signal N
  122           the lock was lost while CMD ran (CMD was stopped, or it had ended)
  124           the lock was not had within --wait (CMD did not run)
  125           redlatch failed: bad usage, Redis unreachable, NAME is not a lock, ...
  126, 127      CMD could not be run; CMD was not found
  128+N         signal N ended the wait for the lock (130: SIGINT, 143: SIGTERM)
";

/// `run`'s exit status when the lock was lost while the command ran.
pub const RUN_LOST: u8 = 122;
/// `run`'s exit status when the lock was not had within `--wait`.
pub const RUN_TIMED_OUT: u8 = 124;
/// `run`'s exit status when redlatch itself failed (usage included), as `env` and `timeout`.
pub const RUN_FAILED: u8 = 125;
/// `run`'s exit status when the command could not be run, as shells.
pub const RUN_CANNOT_EXECUTE: u8 = 126;
/// `run`'s exit status when the command was not found, as shells.
pub const RUN_NOT_FOUND: u8 = 127;
/// The longest duration the library takes.
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// `run --grace` by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Where the servers are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Servers {
    Url(String),
    Cluster(Vec<String>),
    Sentinel { urls: Vec<String>, master: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Inspect(String),
    List(String),
    ForceUnlock(String),
    Watch(String),
    Run(Box<Run>),
}

/// What `run` holds while its command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Lock,
    Fair,
    Fenced,
    /// One of this many permits of a permit-expirable semaphore.
    Permits(u32),
}

/// What `run` does with its command when the lock is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLost {
    /// SIGTERM, then SIGKILL after the grace period.
    Stop,
    /// Nothing: it runs on, and redlatch says so.
    Ignore,
}

/// `run NAME -- CMD ARGS...` and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub name: String,
    /// The program and its arguments: never empty.
    pub command: Vec<String>,
    pub hold: Hold,
    /// `None`: wait as long as it takes.
    pub wait: Option<Duration>,
    /// An explicit lease, not renewed.
    pub lease: Option<Duration>,
    /// The client's watchdog timeout, if not the default.
    pub watchdog_timeout: Option<Duration>,
    pub grace: Duration,
    pub on_lost: OnLost,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub command: Command,
    pub servers: Servers,
    pub password: Option<String>,
    /// Put before every name (and pattern) given, taken off every name shown.
    pub name_prefix: Option<String>,
    pub json: bool,
    pub yes: bool,
    pub interval: Option<Duration>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Args),
    Help(&'static str),
}

/// A command line that makes no sense: the message, and the exit status to give.
#[derive(Debug, PartialEq, Eq)]
pub struct Usage {
    pub message: String,
    /// 1, or [`RUN_FAILED`] for `run` (whose command's statuses are its own).
    pub status: u8,
}

/// Every option: its spellings, the value it takes (`None`: a switch, which takes none), and
/// the one command it is for (`None`: any).
const OPTIONS: &[(&[&str], Option<&str>, Option<&str>)] = &[
    (&["-h", "--help"], None, None),
    (&["--json"], None, None),
    (&["--url"], Some("a URL"), None),
    (&["--cluster"], Some("a list of URLs"), None),
    (&["--sentinel"], Some("a list of URLs"), None),
    (&["--master"], Some("a name"), None),
    (&["--password"], Some("a password"), None),
    (&["--name-prefix"], Some("a prefix"), None),
    (&["-y", "--yes"], None, Some("force-unlock")),
    (
        &["--interval"],
        Some("a number of milliseconds"),
        Some("watch"),
    ),
    (&["--fair"], None, Some("run")),
    (&["--fenced"], None, Some("run")),
    (&["--permits"], Some("a number"), Some("run")),
    (&["--wait"], Some("a duration"), Some("run")),
    (&["--lease"], Some("a duration"), Some("run")),
    (&["--watchdog-timeout"], Some("a duration"), Some("run")),
    (&["--grace"], Some("a duration"), Some("run")),
    (&["--on-lost"], Some("stop or ignore"), Some("run")),
];

/// The entry of `flag` in [`OPTIONS`]: what value it takes and what command it is for.
fn option(flag: &str) -> Option<(Option<&'static str>, Option<&'static str>)> {
    OPTIONS
        .iter()
        .find(|(names, _, _)| names.contains(&flag))
        .map(|&(_, value, only)| (value, only))
}

/// The command word of a command line (the first argument that is neither an option nor an
/// option's value), to pick the exit status of a usage error.
fn command_word(argv: &[String]) -> Option<&str> {
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            return args.next().map(String::as_str);
        }
        if !arg.starts_with('-') || arg == "-" {
            return Some(arg);
        }
        if let Some((Some(_), _)) = option(arg) {
            args.next();
        }
    }
    None
}

/// `500ms`, `30s`, `10m`, `2h`, or a bare number of seconds; at most a year.
pub fn duration(flag: &str, text: &str) -> Result<Duration, String> {
    let bad = || format!("{flag}: `{text}` is not a duration (such as 500ms, 30s, 10m, 2h)");
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_ms = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    match number.checked_mul(unit_ms).map(Duration::from_millis) {
        Some(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!("{flag}: `{text}` is more than a year")),
    }
}

/// `run`'s options as given, checked once the command is known.
#[derive(Default)]
struct RunFlags {
    fair: bool,
    fenced: bool,
    permits: Option<u32>,
    wait: Option<Duration>,
    lease: Option<Duration>,
    watchdog_timeout: Option<Duration>,
    grace: Option<Duration>,
    on_lost: Option<OnLost>,
}

impl RunFlags {
    /// Takes `flag` with its `value` if it is one of `run`'s; false if it is not.
    fn take(&mut self, flag: &str, value: &str) -> Result<bool, String> {
        let positive = |what: &str| -> Result<Duration, String> {
            match duration(flag, value)? {
                d if d.is_zero() => Err(format!("{flag}: {what} must not be zero")),
                d => Ok(d),
            }
        };
        match flag {
            "--fair" => self.fair = true,
            "--fenced" => self.fenced = true,
            "--permits" => {
                let n = value.parse().ok().filter(|&n: &u32| n > 0);
                let n =
                    n.ok_or_else(|| format!("--permits: `{value}` is not a positive number"))?;
                self.permits = Some(n);
            }
            "--wait" => self.wait = Some(duration(flag, value)?),
            "--lease" => self.lease = Some(positive("a lease")?),
            "--watchdog-timeout" => self.watchdog_timeout = Some(positive("a lease")?),
            "--grace" => self.grace = Some(duration(flag, value)?),
            "--on-lost" => {
                self.on_lost = Some(match value {
                    "stop" => OnLost::Stop,
                    "ignore" => OnLost::Ignore,
                    _ => return Err(format!("--on-lost: `{value}` is not stop or ignore")),
                })
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The `run` of `name` and `command` with these options, if they go together.
    fn into_run(self, name: String, command: Vec<String>) -> Result<Run, String> {
        let hold = match (self.fair, self.fenced, self.permits) {
            (false, false, None) => Hold::Lock,
            (true, false, None) => Hold::Fair,
            (false, true, None) => Hold::Fenced,
            (false, false, Some(n)) => Hold::Permits(n),
            _ => return Err("give one of --fair, --fenced and --permits".to_owned()),
        };
        if self.lease.is_some() && matches!(hold, Hold::Permits(_)) {
            return Err(
                "--lease is for locks: a permit's lease is the watchdog timeout, \
                        renewed (see --watchdog-timeout)"
                    .to_owned(),
            );
        }
        if self.lease.is_some() && self.watchdog_timeout.is_some() {
            return Err("give one of --lease (not renewed) and --watchdog-timeout".to_owned());
        }
        Ok(Run {
            name,
            command,
            hold,
            wait: self.wait,
            lease: self.lease,
            watchdog_timeout: self.watchdog_timeout,
            grace: self.grace.unwrap_or(DEFAULT_GRACE),
            on_lost: self.on_lost.unwrap_or(OnLost::Stop),
        })
    }
}

fn help_of(command: Option<&str>) -> Result<&'static str, String> {
    Ok(match command {
        None => HELP,
        Some("inspect") => INSPECT_HELP,
        Some("list") => LIST_HELP,
        Some("force-unlock") => FORCE_UNLOCK_HELP,
        Some("watch") => WATCH_HELP,
        Some("run") => RUN_HELP,
        Some("help") => HELP,
        Some(other) => return Err(format!("unknown command `{other}`")),
    })
}

/// Splits `a,b,,c` into the non-empty parts.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses the arguments (without the program name); `env_url` is `$REDIS_URL`.
pub fn parse(argv: &[String], env_url: Option<String>) -> Result<Parsed, Usage> {
    parse_args(argv, env_url).map_err(|message| Usage {
        message,
        status: if command_word(argv) == Some("run") {
            RUN_FAILED
        } else {
            1
        },
    })
}

fn parse_args(argv: &[String], env_url: Option<String>) -> Result<Parsed, String> {
    let mut positional: Vec<String> = Vec::new();
    // `run`'s command: from the first argument after its NAME that is `--` or no option.
    let mut tail: Option<Vec<String>> = None;
    let (mut url, mut cluster, mut sentinel, mut master, mut password) =
        (None, None, None, None, None);
    let (mut json, mut yes, mut help, mut interval) = (false, false, false, None);
    let mut name_prefix = None;
    let mut run = RunFlags::default();
    // The options given that are for one command only, with that command.
    let mut only: Vec<(String, &str)> = Vec::new();
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        let is_option = arg.starts_with('-') && arg != "-";
        if positional.len() == 2 && positional[0] == "run" && (arg == "--" || !is_option) {
            let first = (arg != "--").then(|| arg.clone());
            tail = Some(first.into_iter().chain(args.by_ref().cloned()).collect());
            break;
        }
        if arg == "--" {
            if positional == ["run"] {
                // `run -- -NAME ...`: a name that looks like an option.
                positional.extend(args.next().cloned());
                continue;
            }
            positional.extend(args.by_ref().cloned());
            break;
        }
        if !is_option {
            positional.push(arg.clone());
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let Some((takes, for_command)) = option(flag) else {
            return Err(format!("unknown option `{flag}`"));
        };
        let value = match (takes, inline) {
            (None, Some(_)) => return Err(format!("{flag} takes no value")),
            (None, None) => String::new(),
            (Some(_), Some(v)) => v,
            (Some(what), None) => match args.next() {
                Some(v) => v.clone(),
                None => return Err(format!("{flag} needs {what}")),
            },
        };
        if let Some(command) = for_command {
            only.push((flag.to_owned(), command));
        }
        match flag {
            "-h" | "--help" => help = true,
            "--json" => json = true,
            "-y" | "--yes" => yes = true,
            "--url" => url = Some(value),
            "--cluster" => cluster = Some(list(&value)),
            "--sentinel" => sentinel = Some(list(&value)),
            "--master" => master = Some(value),
            "--password" => password = Some(value),
            "--name-prefix" => name_prefix = Some(value),
            "--interval" => {
                let ms: u64 = value.parse().ok().filter(|&ms| ms > 0).ok_or_else(|| {
                    format!("--interval: `{value}` is not a positive number of ms")
                })?;
                interval = Some(Duration::from_millis(ms));
            }
            _ => {
                if !run.take(flag, &value)? {
                    unreachable!("{flag} is in OPTIONS but not parsed");
                }
            }
        }
    }

    let mut positional = positional.into_iter();
    let command = positional.next();
    if help || command.as_deref() == Some("help") {
        let about = if command.as_deref() == Some("help") {
            positional.next()
        } else {
            command
        };
        return help_of(about.as_deref()).map(Parsed::Help);
    }
    let Some(command) = command else {
        return Err("no command given".to_owned());
    };
    if let Some((flag, for_command)) = only.iter().find(|(_, c)| *c != command) {
        return Err(format!("{flag} is for {for_command} only"));
    }
    let mut name = |what: &str| -> Result<String, String> {
        match positional.next() {
            Some(n) if !n.is_empty() => Ok(n),
            Some(_) => Err(format!("{what} must not be empty")),
            None => Err(format!("`{command}` needs {what}")),
        }
    };
    let command = match command.as_str() {
        "inspect" => Command::Inspect(name("a NAME")?),
        "force-unlock" => Command::ForceUnlock(name("a NAME")?),
        "watch" => Command::Watch(name("a NAME")?),
        "list" => Command::List(positional.next().unwrap_or_else(|| "*".to_owned())),
        "run" => {
            let name = name("a NAME and a command (run NAME -- CMD [ARGS...])")?;
            match tail {
                Some(cmd) if !cmd.is_empty() && !cmd[0].is_empty() => {
                    Command::Run(Box::new(run.into_run(name, cmd)?))
                }
                Some(cmd) if !cmd.is_empty() => return Err("CMD must not be empty".to_owned()),
                _ => {
                    return Err(format!(
                        "`run` needs a command after NAME (run {name} -- CMD [ARGS...])"
                    ))
                }
            }
        }
        other => return Err(format!("unknown command `{other}`")),
    };
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument `{extra}`"));
    }
    if let Command::List(pattern) = &command {
        if pattern.is_empty() {
            return Err("PATTERN must not be empty (`*` matches all)".to_owned());
        }
    }
    if json && matches!(command, Command::Run(_)) {
        return Err("--json is not for run (the command's output is its own)".to_owned());
    }

    let servers = match (url, cluster, sentinel, master) {
        (Some(_), Some(_), _, _) | (Some(_), _, Some(_), _) | (_, Some(_), Some(_), _) => {
            return Err("give one of --url, --cluster and --sentinel".to_owned())
        }
        (_, _, None, Some(_)) => return Err("--master is for --sentinel only".to_owned()),
        (_, _, Some(_), None) => return Err("--sentinel needs --master NAME".to_owned()),
        (_, _, Some(urls), Some(master)) => {
            if urls.is_empty() {
                return Err("--sentinel needs at least one URL".to_owned());
            }
            Servers::Sentinel { urls, master }
        }
        (_, Some(urls), None, None) => {
            if urls.is_empty() {
                return Err("--cluster needs at least one URL".to_owned());
            }
            Servers::Cluster(urls)
        }
        (url, None, None, None) => Servers::Url(
            url.or(env_url.filter(|u| !u.is_empty()))
                .unwrap_or_else(|| DEFAULT_URL.to_owned()),
        ),
    };
    Ok(Parsed::Run(Args {
        command,
        servers,
        password,
        name_prefix,
        json,
        yes,
        interval,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str, env: Option<&str>) -> Result<Parsed, String> {
        let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&argv, env.map(str::to_owned)).map_err(|u| u.message)
    }

    fn run(line: &str) -> Args {
        match parse_line(line, None) {
            Ok(Parsed::Run(args)) => args,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn name_prefix_is_kept() {
        assert_eq!(
            run("list --name-prefix app1:").name_prefix.as_deref(),
            Some("app1:")
        );
        assert_eq!(
            run("inspect --name-prefix=a: x").name_prefix.as_deref(),
            Some("a:")
        );
        assert_eq!(run("inspect x").name_prefix, None);
        assert!(parse_line("inspect x --name-prefix", None).is_err());
    }

    #[test]
    fn commands_and_options_in_any_order() {
        let a = run("inspect orders --json --url redis://h:1/");
        assert_eq!(a.command, Command::Inspect("orders".into()));
        assert_eq!(a.servers, Servers::Url("redis://h:1/".into()));
        assert!(a.json);
        let a = run("--cluster=redis://a:1,redis://b:2 list");
        assert_eq!(a.command, Command::List("*".into()));
        assert_eq!(
            a.servers,
            Servers::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        let a = run("force-unlock -y --sentinel redis://s:26379 --master m -- -odd-name");
        assert_eq!(a.command, Command::ForceUnlock("-odd-name".into()));
        assert!(a.yes);
        let a = run("watch x --interval 100");
        assert_eq!(a.interval, Some(Duration::from_millis(100)));
    }

    #[test]
    fn the_url_comes_from_the_flag_then_the_environment_then_the_default() {
        let url = |line: &str, env| match parse_line(line, env) {
            Ok(Parsed::Run(a)) => a.servers,
            other => panic!("{other:?}"),
        };
        assert_eq!(url("list", None), Servers::Url(DEFAULT_URL.into()));
        assert_eq!(
            url("list", Some("redis://e/")),
            Servers::Url("redis://e/".into())
        );
        assert_eq!(
            url("list --url redis://f/", Some("redis://e/")),
            Servers::Url("redis://f/".into())
        );
    }

    #[test]
    fn help_for_the_tool_and_each_command() {
        assert_eq!(parse_line("--help", None), Ok(Parsed::Help(HELP)));
        assert_eq!(parse_line("help watch", None), Ok(Parsed::Help(WATCH_HELP)));
        assert_eq!(
            parse_line("inspect -h", None),
            Ok(Parsed::Help(INSPECT_HELP))
        );
        assert_eq!(
            parse_line("force-unlock --help", None),
            Ok(Parsed::Help(FORCE_UNLOCK_HELP))
        );
    }

    #[test]
    fn mistakes_are_reported() {
        for line in [
            "",
            "inspect",
            "frobnicate x",
            "inspect a b",
            "inspect x --bogus",
            "inspect x --url",
            "list --yes",
            "inspect x --sentinel redis://s",
            "inspect x --master m",
            "inspect x --url redis://a --cluster redis://b",
            "watch x --interval 0",
            "inspect x --json=1",
        ] {
            assert!(parse_line(line, None).is_err(), "{line:?} was accepted");
        }
    }

    fn run_of(line: &str) -> Run {
        match run(line).command {
            Command::Run(r) => *r,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn run_takes_its_options_before_the_command_and_the_command_verbatim() {
        let r = run_of("run job -- sh -c true --fair");
        assert_eq!((r.name.as_str(), r.hold), ("job", Hold::Lock));
        assert_eq!(r.command, ["sh", "-c", "true", "--fair"]);
        assert_eq!((r.wait, r.lease, r.watchdog_timeout), (None, None, None));
        assert_eq!((r.grace, r.on_lost), (DEFAULT_GRACE, OnLost::Stop));
        // Without `--`, the command starts at the first argument after NAME.
        let r = run_of("--url redis://h/ run --fenced job --wait=500ms ./x -- --y");
        assert_eq!(r.hold, Hold::Fenced);
        assert_eq!(r.wait, Some(Duration::from_millis(500)));
        assert_eq!(r.command, ["./x", "--", "--y"]);
        let r = run_of("run job --fair --grace 0 --on-lost ignore --lease 2m -- x");
        assert_eq!((r.hold, r.grace), (Hold::Fair, Duration::ZERO));
        assert_eq!(
            (r.lease, r.on_lost),
            (Some(Duration::from_secs(120)), OnLost::Ignore)
        );
        let r = run_of("run --permits 3 --watchdog-timeout 1500ms -- -odd-name -- x");
        assert_eq!((r.name.as_str(), r.hold), ("-odd-name", Hold::Permits(3)));
        assert_eq!(r.watchdog_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(r.command, ["x"]);
        assert_eq!(run_of("run j --wait 0 x").wait, Some(Duration::ZERO));
        assert_eq!(
            run_of("run j --wait 7 x").wait,
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            run_of("run j --wait 1h x").wait,
            Some(Duration::from_secs(3600))
        );
    }

    #[test]
    fn run_mistakes_are_reported_with_its_own_status() {
        for line in [
            "run",
            "run job",
            "run job --",
            "run job --fair",
            "run --fair --fenced job -- x",
            "run --fair --permits 2 job -- x",
            "run --permits 0 job -- x",
            "run --permits -1 job -- x",
            "run --permits two job -- x",
            "run --wait soon job -- x",
            "run --wait 5d job -- x",
            "run --wait 1.5s job -- x",
            "run --wait 18446744073709551615h job -- x",
            "run --wait 9000h job -- x",
            "run --lease 0 job -- x",
            "run --watchdog-timeout 0s job -- x",
            "run --lease 1s --watchdog-timeout 3s job -- x",
            "run --lease 1s --permits 2 job -- x",
            "run --on-lost later job -- x",
            "run --fair=1 job -- x",
            "run --json job -- x",
            "run --interval 5 job -- x",
            "run -y job -- x",
            "--bogus run job -- x",
            "--url redis://h/ run --wait",
        ] {
            let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            match parse(&argv, None) {
                Err(u) => assert_eq!(u.status, RUN_FAILED, "{line:?}: {}", u.message),
                Ok(p) => panic!("{line:?} was accepted: {p:?}"),
            }
        }
        for line in [
            "inspect --fair x",
            "watch x --permits 2",
            "list --on-lost stop",
        ] {
            let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            let u = parse(&argv, None).unwrap_err();
            assert_eq!(u.status, 1, "{line:?}");
            assert!(u.message.ends_with("is for run only"), "{}", u.message);
        }
        let argv = ["run".to_owned(), "job".to_owned(), String::new()];
        assert!(parse(&argv, None).is_err(), "an empty CMD was accepted");
    }

    #[test]
    fn every_option_in_the_table_is_parsed_and_documented() {
        for (names, takes, only) in OPTIONS {
            let command = match only {
                Some("run") => "run job",
                Some(other) => other,
                None => "list",
            };
            let value = match (names[0], takes) {
                ("--permits" | "--interval", _) => " 2",
                ("--on-lost", _) => " stop",
                ("--cluster", _) => " redis://h/",
                ("--sentinel", _) => " redis://h/ --master m",
                ("--master", _) => " m --sentinel redis://h/",
                (_, Some(_)) => " 2s",
                (_, None) => "",
            };
            let tail = match *only {
                Some("run") => " -- x",
                Some(_) => " job",
                None => "",
            };
            for name in *names {
                let line = format!("{command} {name}{value}{tail}");
                let parsed = parse_line(&line, None);
                assert!(
                    matches!(parsed, Ok(Parsed::Run(_)) | Ok(Parsed::Help(_))),
                    "{line}: {parsed:?}"
                );
                let help = [HELP, RUN_HELP, WATCH_HELP, FORCE_UNLOCK_HELP];
                assert!(help.iter().any(|h| h.contains(name)), "{name} undocumented");
            }
        }
    }

    #[test]
    fn run_help_names_every_exit_status() {
        assert_eq!(parse_line("help run", None), Ok(Parsed::Help(RUN_HELP)));
        assert_eq!(parse_line("run -h", None), Ok(Parsed::Help(RUN_HELP)));
        for status in [
            RUN_LOST,
            RUN_TIMED_OUT,
            RUN_FAILED,
            RUN_CANNOT_EXECUTE,
            RUN_NOT_FOUND,
        ] {
            let statuses = RUN_HELP.split("Exit status:").nth(1).unwrap();
            assert!(statuses.contains(&status.to_string()), "{status}");
        }
    }
}
