//! The checked [`Args`] the commands run with, made from the command line that `cli.rs`
//! defines, and the checks clap cannot make.

mod cli;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use cli::{Cli, CliCommand, ElectArgs, LockArgs, RunArgs, ServerArgs};
pub use cli::{OnLost, TopSort};

pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

// The exit statuses of the commands that answer or report (all but `run`, `lock` and
// `elect`, whose statuses are `timeout`'s and their command's: see `RUN_*` below), as grep's
// are: 0 yes, 1 no, 2 usage; then doctor's findings and the failures to get an answer. Told in
// `redlatch --help` (cli.rs's AFTER_HELP), the README and the guide's operating chapter.

/// The answer is yes, or it is done.
pub const OK: u8 = 0;
/// The answer is no: nothing is named NAME (`inspect`, `force-unlock`), nobody leads
/// (`leader`), nothing was broken (`force-unlock` of a free lock, or not confirmed).
pub const NO: u8 = 1;
/// The command line makes no sense (clap's status for what it refuses, and ours), nor does
/// what it asks of NAME (`force-unlock` of a semaphore; without a terminal or `--yes`).
pub const USAGE: u8 = 2;
/// `doctor` found something that threatens locks.
pub const FOUND: u8 = 3;
/// No answer could be had: Redis unreachable, a login refused, the servers or redlatch
/// failed (an error reply, output that cannot be written). A number of its own above the
/// answers (and below `run`'s 122..127), so that `1` always means "no": a script never takes
/// an unreachable server for a free lock or an empty election.
pub const FAILED: u8 = 4;

/// `run`'s exit status when the lock was lost while the command ran.
pub const RUN_LOST: u8 = 122;
/// `lock`'s and `run`'s exit status when the hold's `--lease` ended as asked (released by
/// its expiry, not lost).
pub const RUN_LEASE_ENDED: u8 = 123;
/// `run`'s exit status when the lock was not had within `--wait`.
pub const RUN_TIMED_OUT: u8 = 124;
/// `run`'s exit status when redlatch itself failed (usage included), as `env` and `timeout`.
pub const RUN_FAILED: u8 = 125;
/// `run`'s exit status when the command could not be run, as shells.
pub const RUN_CANNOT_EXECUTE: u8 = 126;
/// `run`'s exit status when the command was not found, as shells.
pub const RUN_NOT_FOUND: u8 = 127;
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
    /// `list [--all] PATTERN`.
    List {
        pattern: String,
        all: bool,
    },
    /// `waits [--dot | --deadlocks]`.
    Waits {
        dot: bool,
        /// The deadlocks broken, not the waits going on.
        deadlocks: bool,
    },
    ForceUnlock(String),
    /// `revoke NAME [--grace D | --steal] [--reason TEXT] [--max-deferral D]`.
    Revoke {
        name: String,
        how: Revoke,
    },
    /// `top [PATTERN]` and its options.
    Top(Top),
    /// `history NAME [--trace FILE] [--svg FILE]`.
    History {
        name: String,
        trace: Option<PathBuf>,
        svg: Option<PathBuf>,
    },
    Watch(String),
    Doctor,
    Run(Box<Run>),
    /// `lock NAME`: a [`Run`] without a command.
    Lock(Box<Run>),
    /// `elect NAME -- CMD`: a [`Run`] while leading.
    Elect(Box<Run>),
    /// `leader NAME [--watch]`.
    Leader {
        name: String,
        watch: bool,
    },
}

/// `revoke`'s options: neither `grace` nor `steal` asks only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Revoke {
    pub grace: Option<Duration>,
    pub steal: bool,
    pub reason: Option<String>,
    pub max_deferral: Option<Duration>,
}

/// `top`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Top {
    pub pattern: String,
    pub once: bool,
    pub sort: TopSort,
    pub window: Duration,
    pub interval: Duration,
    /// 0: all.
    pub rows: usize,
}

/// What `run` holds while its command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    Lock,
    Fair,
    Fenced,
    /// One of this many permits of a permit-expirable semaphore.
    Permits(u32),
    /// Leadership of the election NAME.
    Leader,
}

/// `run NAME -- CMD ARGS...` and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub name: String,
    /// The program and its arguments: never empty for `run`, empty for `lock`.
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
    /// `-q`: nothing on stderr about the wait.
    pub quiet: bool,
    /// `elect`: what the leader proclaims.
    pub value: Option<String>,
    /// `elect --again`: campaign again when CMD ends.
    pub again: bool,
}

/// TLS files given on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    /// A client certificate and its key.
    pub client: Option<(PathBuf, PathBuf)>,
}

/// A checked command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub command: Command,
    pub servers: Servers,
    pub username: Option<String>,
    pub password: Option<String>,
    /// `--askpass`: ask for the password on the terminal.
    pub askpass: bool,
    pub tls: TlsFiles,
    /// Put before every name (and pattern) given, taken off every name shown.
    pub name_prefix: Option<String>,
    pub json: bool,
    pub yes: bool,
    pub interval: Option<Duration>,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Args>),
    /// Help or the version, to print on stdout.
    Help(String),
}

/// A command line that makes no sense: the message, and the exit status to give.
#[derive(Debug)]
pub struct Usage {
    /// The whole message (clap's, or ours after `redlatch: `).
    pub message: String,
    /// Clap's message, which ends by saying where help is.
    pub from_clap: bool,
    /// [`USAGE`], or [`RUN_FAILED`] for `run`, `lock` and `elect` (whose commands' statuses
    /// are their own).
    pub status: u8,
    /// Where help is: `redlatch help <command>` for the command the line names, else
    /// `redlatch --help`.
    pub help: String,
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

/// The help text of the tool (`None`) or of one command.
#[cfg(test)]
fn help(command: Option<&str>) -> String {
    let mut cli = Cli::command();
    match command {
        None => cli.render_help().to_string(),
        Some(name) => cli
            .find_subcommand_mut(name)
            .map(|c| c.render_help().to_string())
            .unwrap_or_default(),
    }
}

/// The commands whose usage errors exit with [`RUN_FAILED`] (their commands' statuses are
/// their own).
const RUN_LIKE: [&str; 3] = ["run", "lock", "elect"];

/// The command the command line names (its first word that is not an option nor an option's
/// value), if it is one of the tool's.
fn command_named(argv: &[String]) -> Option<String> {
    let cli = Cli::command();
    let takes_value = |flag: &str| {
        let long = flag.strip_prefix("--").filter(|f| !f.contains('='));
        cli.get_arguments()
            .any(|a| long.is_some() && a.get_long() == long && a.get_action().takes_values())
    };
    let known = |word: &str| {
        cli.get_subcommands()
            .any(|c| c.get_name() == word)
            .then(|| word.to_owned())
    };
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            return args.next().and_then(|a| known(a));
        }
        if !arg.starts_with('-') || arg == "-" {
            return known(arg);
        }
        if takes_value(arg) {
            args.next();
        }
    }
    None
}

/// The status and the help to point to for a usage error in `argv`: [`RUN_FAILED`] for
/// `run`'s, `lock`'s and `elect`'s, else [`USAGE`]; `redlatch help <command>` for the command
/// named, else `redlatch --help`.
fn usage_of(argv: &[String]) -> (u8, String) {
    match command_named(argv) {
        Some(command) => {
            let status = if RUN_LIKE.contains(&command.as_str()) {
                RUN_FAILED
            } else {
                USAGE
            };
            (status, format!("redlatch help {command}"))
        }
        None => (USAGE, "redlatch --help".to_owned()),
    }
}

/// Parses the arguments as the OS gives them (without the program name); `env_url` is
/// `$REDIS_URL`. An argument that is not UTF-8 is a usage error that shows it escaped
/// (`\xff`): names, patterns, URLs and `run`'s command are text.
pub fn parse_os(argv: &[OsString], env_url: Option<String>) -> Result<Parsed, Usage> {
    let text: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(bad) = argv.iter().find(|a| a.to_str().is_none()) {
        let (status, help) = usage_of(&text);
        #[cfg(unix)]
        let shown =
            crate::render::escaped_bytes(std::os::unix::ffi::OsStrExt::as_bytes(bad.as_os_str()));
        #[cfg(not(unix))]
        let shown = crate::render::escaped(&bad.to_string_lossy()).into_owned();
        return Err(Usage {
            message: format!(
                "redlatch: `{shown}` is not UTF-8: names, patterns, URLs and commands must be \
                 text\n"
            ),
            from_clap: false,
            status,
            help,
        });
    }
    parse(&text, env_url)
}

/// Parses the arguments (without the program name); `env_url` is `$REDIS_URL`.
pub fn parse(argv: &[String], env_url: Option<String>) -> Result<Parsed, Usage> {
    let (status, help) = usage_of(argv);
    let words = std::iter::once(OsString::from("redlatch")).chain(argv.iter().map(OsString::from));
    let cli = match Cli::try_parse_from(words) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => return Ok(Parsed::Help(e.render().to_string())),
        Err(e) => {
            // Clap's message quotes the arguments: escaped, line by line.
            let message = e.render().to_string();
            let message: String = message
                .split_inclusive('\n')
                .map(|line| match line.strip_suffix('\n') {
                    Some(line) => format!("{}\n", crate::render::escaped(line)),
                    None => crate::render::escaped(line).into_owned(),
                })
                .collect();
            return Err(Usage {
                message,
                status,
                from_clap: true,
                help,
            });
        }
    };
    check(cli, argv, env_url)
        .map(|args| Parsed::Run(Box::new(args)))
        .map_err(|message| Usage {
            message: format!("redlatch: {}\n", crate::render::escaped(&message)),
            status,
            from_clap: false,
            help,
        })
}

/// What clap cannot check: the servers' options together, and `run`'s command.
fn check(cli: Cli, argv: &[String], env_url: Option<String>) -> Result<Args, String> {
    let (mut yes, mut interval) = (false, None);
    let command = match cli.command {
        CliCommand::Inspect { name } => Command::Inspect(name),
        CliCommand::List { all, pattern } => Command::List { pattern, all },
        CliCommand::Waits { dot, deadlocks } => Command::Waits { dot, deadlocks },
        CliCommand::Top {
            once,
            sort,
            window,
            interval,
            rows,
            pattern,
        } => Command::Top(Top {
            pattern,
            once,
            sort,
            window: window.unwrap_or(Duration::from_secs(10)),
            interval: interval.unwrap_or(Duration::from_secs(2)),
            rows,
        }),
        CliCommand::History { trace, svg, name } => Command::History { name, trace, svg },
        CliCommand::ForceUnlock { yes: y, name } => {
            yes = y;
            Command::ForceUnlock(name)
        }
        CliCommand::Revoke {
            grace,
            steal,
            reason,
            max_deferral,
            name,
        } => {
            if max_deferral.is_some() && grace.is_none() && !steal {
                return Err("--max-deferral is for --grace and --steal".to_owned());
            }
            Command::Revoke {
                name,
                how: Revoke {
                    grace,
                    steal,
                    reason,
                    max_deferral,
                },
            }
        }
        CliCommand::Doctor => Command::Doctor,
        CliCommand::Watch { interval: i, name } => {
            interval = i;
            Command::Watch(name)
        }
        CliCommand::Run(run) => {
            if cli.json {
                return Err("--json is not for run (the command's output is its own)".to_owned());
            }
            Command::Run(Box::new(into_run(run, argv)?))
        }
        CliCommand::Lock(lock) => {
            if cli.json {
                return Err("--json is not for lock".to_owned());
            }
            Command::Lock(Box::new(into_lock(lock)))
        }
        CliCommand::Elect(elect) => {
            if cli.json {
                return Err("--json is not for elect".to_owned());
            }
            Command::Elect(Box::new(into_elect(elect)?))
        }
        CliCommand::Leader { name, watch } => Command::Leader { name, watch },
    };
    let ServerArgs {
        url,
        cluster,
        sentinel,
        master,
        username,
        password,
        askpass,
        tls_ca,
        tls_cert,
        tls_key,
        name_prefix,
    } = cli.servers;
    let (cluster, sentinel) = (cluster.as_deref().map(list), sentinel.as_deref().map(list));
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
    Ok(Args {
        command,
        servers,
        username,
        password,
        askpass,
        tls: TlsFiles {
            ca: tls_ca,
            client: tls_cert.zip(tls_key),
        },
        name_prefix,
        json: cli.json,
        yes,
        interval,
    })
}

/// `lock`'s [`Run`]: the hold it asks for, without a command.
fn into_lock(lock: LockArgs) -> Run {
    let hold = match (lock.fair, lock.fenced) {
        (true, _) => Hold::Fair,
        (_, true) => Hold::Fenced,
        _ => Hold::Lock,
    };
    Run {
        name: lock.name,
        command: Vec::new(),
        hold,
        wait: lock.wait,
        lease: lock.lease,
        watchdog_timeout: lock.watchdog_timeout,
        grace: DEFAULT_GRACE,
        on_lost: OnLost::Stop,
        quiet: lock.quiet,
        value: None,
        again: false,
    }
}

/// `run`'s [`Run`]: the hold it asks for, and its command.
fn into_run(run: RunArgs, argv: &[String]) -> Result<Run, String> {
    let hold = match (run.fair, run.fenced, run.permits) {
        (true, _, _) => Hold::Fair,
        (_, true, _) => Hold::Fenced,
        (_, _, Some(n)) => Hold::Permits(n),
        _ => Hold::Lock,
    };
    let mut command = run.command;
    // `run -- -NAME -- CMD`: the second `--` ends the options too (a name that looks like
    // an option comes after a first `--`).
    let after_dashes = argv
        .windows(3)
        .any(|w| w[0] == "--" && w[1] == run.name && w[2] == "--");
    if after_dashes && command.first().is_some_and(|c| c == "--") {
        command.remove(0);
    }
    match command.first() {
        None => {
            return Err(format!(
                "`run` needs a command after NAME (run {} -- CMD [ARGS...])",
                run.name
            ))
        }
        Some(program) if program.is_empty() => return Err("CMD must not be empty".to_owned()),
        Some(_) => {}
    }
    Ok(Run {
        name: run.name,
        command,
        hold,
        wait: run.wait,
        lease: run.lease,
        watchdog_timeout: run.watchdog_timeout,
        grace: run.grace.unwrap_or(DEFAULT_GRACE),
        on_lost: run.on_lost,
        quiet: run.quiet,
        value: None,
        again: false,
    })
}

/// `elect`'s [`Run`]: leadership, a value, and the command.
fn into_elect(elect: ElectArgs) -> Result<Run, String> {
    match elect.command.first() {
        Some(program) if program.is_empty() => return Err("CMD must not be empty".to_owned()),
        Some(_) => {}
        None => {
            return Err(format!(
                "`elect` needs a command after NAME (elect {} -- CMD)",
                elect.name
            ))
        }
    }
    Ok(Run {
        name: elect.name,
        command: elect.command,
        hold: Hold::Leader,
        wait: elect.wait,
        lease: None,
        watchdog_timeout: elect.watchdog_timeout,
        grace: elect.grace.unwrap_or(DEFAULT_GRACE),
        on_lost: elect.on_lost,
        quiet: elect.quiet,
        value: elect.value,
        again: elect.again,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str, env: Option<&str>) -> Result<Parsed, Usage> {
        let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&argv, env.map(str::to_owned))
    }

    fn run(line: &str) -> Args {
        match parse_line(line, None) {
            Ok(Parsed::Run(args)) => *args,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn the_clap_definition_is_consistent() {
        Cli::command().debug_assert();
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
        assert_eq!(
            a.command,
            Command::List {
                pattern: "*".into(),
                all: false
            }
        );
        assert_eq!(
            a.servers,
            Servers::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        let a = run("force-unlock -y --sentinel redis://s:26379 --master m -- -odd-name");
        assert_eq!(a.command, Command::ForceUnlock("-odd-name".into()));
        assert!(a.yes);
        let a = run("watch x --interval 0.1");
        assert_eq!(a.interval, Some(Duration::from_millis(100)));
    }

    #[test]
    fn credentials_and_tls_files() {
        let a = run(
            "inspect x --username app --password pw --tls-ca ca.pem --tls-cert c.pem --tls-key k.pem",
        );
        assert_eq!(
            (a.username.as_deref(), a.password.as_deref()),
            (Some("app"), Some("pw"))
        );
        assert_eq!(a.tls.ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(
            a.tls.client,
            Some((PathBuf::from("c.pem"), PathBuf::from("k.pem")))
        );
        // A certificate without its key, or a key without its certificate.
        assert!(parse_line("inspect x --tls-cert c.pem", None).is_err());
        assert!(parse_line("inspect x --tls-key k.pem", None).is_err());
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
        let help_of = |line: &str| match parse_line(line, None) {
            Ok(Parsed::Help(text)) => text,
            other => panic!("{line}: {other:?}"),
        };
        let top = help_of("--help");
        for word in [
            "inspect",
            "list",
            "force-unlock",
            "watch",
            "run",
            "--url",
            "--tls-ca",
        ] {
            assert!(top.contains(word), "{word} missing from --help");
        }
        for command in ["inspect", "list", "force-unlock", "watch", "run"] {
            for line in [
                format!("help {command}"),
                format!("{command} -h"),
                format!("{command} --help"),
            ] {
                let text = help_of(&line);
                assert!(
                    text.starts_with(&format!("Usage: redlatch {command}")),
                    "{line}: {text}"
                );
                assert!(
                    text.contains("--password") && text.contains("--tls-key"),
                    "{text}"
                );
            }
        }
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
            "inspect --fair x",
            "watch x --permits 2",
        ] {
            match parse_line(line, None) {
                Err(u) => assert_eq!(u.status, USAGE, "{line:?}: {}", u.message),
                Ok(p) => panic!("{line:?} was accepted: {p:?}"),
            }
        }
    }

    #[test]
    fn usage_errors_point_to_the_help_of_the_command_named() {
        let usage = |line: &str| match parse_line(line, None) {
            Err(u) => (u.status, u.help),
            Ok(p) => panic!("{line:?} was accepted: {p:?}"),
        };
        let at = |status, help: &str| (status, help.to_owned());
        assert_eq!(usage("inspect"), at(USAGE, "redlatch help inspect"));
        assert_eq!(
            usage("--url redis://h/ leader --master m x"),
            at(USAGE, "redlatch help leader")
        );
        assert_eq!(usage("frobnicate x"), at(USAGE, "redlatch --help"));
        assert_eq!(usage(""), at(USAGE, "redlatch --help"));
        assert_eq!(usage("run job"), at(RUN_FAILED, "redlatch help run"));
        assert_eq!(
            usage("lock --wait soon x"),
            at(RUN_FAILED, "redlatch help lock")
        );
        assert_eq!(usage("elect job"), at(RUN_FAILED, "redlatch help elect"));
        assert_eq!(
            usage("--url redis://h/ elect --wait soon job -- true"),
            at(RUN_FAILED, "redlatch help elect")
        );
        // A command's name as another command's argument is not that command.
        assert_eq!(
            usage("inspect lock extra"),
            at(USAGE, "redlatch help inspect")
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_argument_that_is_not_utf8_is_a_usage_error_shown_escaped() {
        use std::os::unix::ffi::OsStringExt;
        let argv = |words: &[&[u8]]| -> Vec<OsString> {
            words
                .iter()
                .map(|w| OsString::from_vec(w.to_vec()))
                .collect()
        };
        let Err(u) = parse_os(&argv(&[b"inspect", b"a\xff\x1b"]), None) else {
            panic!("accepted");
        };
        assert_eq!(
            (u.status, u.help.as_str()),
            (USAGE, "redlatch help inspect")
        );
        assert!(
            u.message.contains("`a\\xff\\u{1b}` is not UTF-8"),
            "{}",
            u.message
        );
        let Err(u) = parse_os(&argv(&[b"run", b"job", b"--", b"cat", b"\xff"]), None) else {
            panic!("accepted");
        };
        assert_eq!(u.status, RUN_FAILED);
        assert!(matches!(
            parse_os(&argv(&[b"inspect", "é".as_bytes()]), None),
            Ok(Parsed::Run(_))
        ));
    }

    #[test]
    fn list_all() {
        let all = |line: &str| match run(line).command {
            Command::List { all, .. } => all,
            other => panic!("{other:?}"),
        };
        assert!(!all("list"));
        assert!(all("list --all"));
        assert!(all("list orders:* --all"));
    }

    #[test]
    fn help_tells_the_exit_statuses() {
        let text = help(None);
        let statuses = text.split("Exit status").nth(1).unwrap();
        for status in [OK, NO, USAGE, FOUND, FAILED] {
            assert!(
                statuses.contains(&format!("  {status}  ")),
                "{status}: {text}"
            );
        }
        for command in ["inspect", "force-unlock", "leader", "doctor", "list"] {
            let text = help(Some(command));
            assert!(text.contains("Exit status"), "{command}: {text}");
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
        assert_eq!(run_of("run job -- -- x").command, ["--", "x"]);
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
    fn durations_are_humantime_decimals_or_bare_numbers() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("250ms", ms(250)),
            ("1.5s", ms(1500)),
            ("0.5m", ms(30_000)),
            ("1m30s", ms(90_000)),
            ("2h", ms(7_200_000)),
            ("1d", ms(86_400_000)),
            ("7", ms(7000)),
            ("1.5", ms(1500)),
            ("0", Duration::ZERO),
        ] {
            assert_eq!(
                run_of(&format!("run j --wait {text} x")).wait,
                Some(want),
                "{text}"
            );
        }
        // One syntax everywhere: a bare number is seconds for an interval and a window too.
        assert_eq!(run("watch x --interval 2").interval, Some(ms(2000)));
        assert_eq!(run("watch x --interval 0.1").interval, Some(ms(100)));
        let window = |line: &str| match run(line).command {
            Command::Top(top) => top.window,
            other => panic!("{other:?}"),
        };
        assert_eq!(window("top --window 30"), ms(30_000));
        assert_eq!(window("top --window 1.5"), ms(1500));
        assert_eq!(run("watch x --interval 1.5s").interval, Some(ms(1500)));
        assert_eq!(run("watch x --interval 2s").interval, Some(ms(2000)));
        match parse_line("run --wait soon j -- x", None) {
            Err(u) => assert!(u.message.contains("1m30s"), "{}", u.message),
            Ok(p) => panic!("accepted: {p:?}"),
        }
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
            "run --wait 400d job -- x",
            "run --wait 1.5x job -- x",
            "run --wait 1.5.5s job -- x",
            "run --wait 9000.5h job -- x",
            "run --wait -1s job -- x",
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
            match parse_line(line, None) {
                Err(u) => assert_eq!(u.status, RUN_FAILED, "{line:?}: {}", u.message),
                Ok(p) => panic!("{line:?} was accepted: {p:?}"),
            }
        }
        let argv = ["run".to_owned(), "job".to_owned(), String::new()];
        assert!(parse(&argv, None).is_err(), "an empty CMD was accepted");
    }

    #[test]
    fn run_help_names_every_exit_status() {
        let text = help(Some("run"));
        let statuses = text.split("Exit status:").nth(1).unwrap();
        for status in [
            RUN_LOST,
            RUN_TIMED_OUT,
            RUN_FAILED,
            RUN_CANNOT_EXECUTE,
            RUN_NOT_FOUND,
        ] {
            assert!(statuses.contains(&status.to_string()), "{status}");
        }
        for option in [
            "--fair",
            "--fenced",
            "--permits",
            "--wait",
            "--lease",
            "--watchdog-timeout",
            "--grace",
            "--on-lost",
        ] {
            assert!(text.contains(option), "{option} undocumented");
        }
    }
}
