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
    /// `waits [--dot]`.
    Waits {
        dot: bool,
    },
    ForceUnlock(String),
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
    /// 1, or [`RUN_FAILED`] for `run` (whose command's statuses are its own).
    pub status: u8,
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

/// Whether the command line is `run`'s, `lock`'s or `elect`'s: their usage errors exit with
/// [`RUN_FAILED`].
fn is_run(argv: &[String]) -> bool {
    let cli = Cli::command();
    let takes_value = |flag: &str| {
        let long = flag.strip_prefix("--").filter(|f| !f.contains('='));
        cli.get_arguments()
            .any(|a| long.is_some() && a.get_long() == long && a.get_action().takes_values())
    };
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            return args.next().is_some_and(|a| RUN_LIKE.contains(&a.as_str()));
        }
        if !arg.starts_with('-') || arg == "-" {
            return RUN_LIKE.contains(&arg.as_str());
        }
        if takes_value(arg) {
            args.next();
        }
    }
    false
}

/// Parses the arguments (without the program name); `env_url` is `$REDIS_URL`.
pub fn parse(argv: &[String], env_url: Option<String>) -> Result<Parsed, Usage> {
    let status = if is_run(argv) { RUN_FAILED } else { 1 };
    let words = std::iter::once(OsString::from("redlatch")).chain(argv.iter().map(OsString::from));
    let cli = match Cli::try_parse_from(words) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => return Ok(Parsed::Help(e.render().to_string())),
        Err(e) => {
            return Err(Usage {
                message: e.render().to_string(),
                status,
                from_clap: true,
            })
        }
    };
    check(cli, argv, env_url)
        .map(|args| Parsed::Run(Box::new(args)))
        .map_err(|message| Usage {
            message: format!("redlatch: {message}\n"),
            status,
            from_clap: false,
        })
}

/// What clap cannot check: the servers' options together, and `run`'s command.
fn check(cli: Cli, argv: &[String], env_url: Option<String>) -> Result<Args, String> {
    let (mut yes, mut interval) = (false, None);
    let command = match cli.command {
        CliCommand::Inspect { name } => Command::Inspect(name),
        CliCommand::List { pattern } => Command::List(pattern),
        CliCommand::Waits { dot } => Command::Waits { dot },
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
                Err(u) => assert_eq!(u.status, 1, "{line:?}: {}", u.message),
                Ok(p) => panic!("{line:?} was accepted: {p:?}"),
            }
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
            ("0", Duration::ZERO),
        ] {
            assert_eq!(
                run_of(&format!("run j --wait {text} x")).wait,
                Some(want),
                "{text}"
            );
        }
        // `watch --interval`: a bare number stays milliseconds.
        assert_eq!(run("watch x --interval 100").interval, Some(ms(100)));
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
            "run --wait 1.5 job -- x",
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
