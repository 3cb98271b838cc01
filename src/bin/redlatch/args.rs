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

Exit status: 0 success, 1 error, 2 no lock or synchronizer of that name.
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

fn help_of(command: Option<&str>) -> Result<&'static str, String> {
    Ok(match command {
        None => HELP,
        Some("inspect") => INSPECT_HELP,
        Some("list") => LIST_HELP,
        Some("force-unlock") => FORCE_UNLOCK_HELP,
        Some("watch") => WATCH_HELP,
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
pub fn parse(argv: &[String], env_url: Option<String>) -> Result<Parsed, String> {
    let mut positional: Vec<String> = Vec::new();
    let (mut url, mut cluster, mut sentinel, mut master, mut password) =
        (None, None, None, None, None);
    let (mut json, mut yes, mut help, mut interval) = (false, false, false, None);
    let mut name_prefix = None;
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            positional.extend(args.by_ref().cloned());
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            positional.push(arg.clone());
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone().or_else(|| args.next().cloned()) {
                Some(v) => Ok(v),
                None => Err(format!("{flag} needs {what}")),
            }
        };
        match flag {
            "-h" | "--help" => help = true,
            "--json" => json = true,
            "-y" | "--yes" => yes = true,
            "--url" => url = Some(value("a URL")?),
            "--cluster" => cluster = Some(list(&value("a list of URLs")?)),
            "--sentinel" => sentinel = Some(list(&value("a list of URLs")?)),
            "--master" => master = Some(value("a name")?),
            "--password" => password = Some(value("a password")?),
            "--name-prefix" => name_prefix = Some(value("a prefix")?),
            "--interval" => {
                let v = value("a number of milliseconds")?;
                let ms: u64 =
                    v.parse().ok().filter(|&ms| ms > 0).ok_or_else(|| {
                        format!("--interval: `{v}` is not a positive number of ms")
                    })?;
                interval = Some(Duration::from_millis(ms));
            }
            _ => return Err(format!("unknown option `{flag}`")),
        }
        if inline.is_some() && matches!(flag, "-h" | "--help" | "--json" | "-y" | "--yes") {
            return Err(format!("{flag} takes no value"));
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
    if yes && !matches!(command, Command::ForceUnlock(_)) {
        return Err("--yes is for force-unlock only".to_owned());
    }
    if interval.is_some() && !matches!(command, Command::Watch(_)) {
        return Err("--interval is for watch only".to_owned());
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
        parse(&argv, env.map(str::to_owned))
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
}
