//! `redlatch`: inspect, list, force-unlock and watch locks and synchronizers from the shell,
//! and run commands under them. A thin front end over [`redlatch::Client::inspect`],
//! [`redlatch::Client::list`], [`redlatch::Lock::force_unlock`], [`redlatch::Client::watch`],
//! and (`run`) the locks' and the permit-expirable semaphore's guards.

#[cfg(unix)]
mod acquire;
mod args;
mod doctor;
mod explain;
#[cfg(unix)]
mod lock;
mod password;
mod render;
#[cfg(unix)]
mod run;
#[cfg(unix)]
mod signals;
mod timeline;

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use redlatch::{Client, Config, Inspection, Kind, Mode};
use serde::Serialize;

use args::{Args, Command, Parsed, Servers, TopSort};
use explain::failure;

/// Exit status when the name does not exist.
const NOT_FOUND: u8 = 2;
/// `watch`: the first wait after an error, doubled after each further one up to the most.
const WATCH_RETRY: Duration = Duration::from_secs(1);
const WATCH_RETRY_MAX: Duration = Duration::from_secs(10);
/// `watch` gives up after this many errors in a row.
const WATCH_MAX_ERRORS: u32 = 10;

/// What went wrong, as one line for stderr.
struct Failure(String);

type Outcome = Result<ExitCode, Failure>;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut args = match args::parse(&argv, std::env::var("REDIS_URL").ok()) {
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(args)) => *args,
        Err(usage) => {
            let help = match usage.status {
                args::RUN_FAILED if argv.iter().any(|a| a == "lock") => "redlatch help lock",
                args::RUN_FAILED => "redlatch help run",
                _ => "redlatch --help",
            };
            eprint!("{}", usage.message);
            if !usage.from_clap || usage.status == args::RUN_FAILED {
                eprintln!("Try '{help}'.");
            }
            return ExitCode::from(usage.status);
        }
    };
    // Asked before `run` blocks the signals, so that Ctrl-C still ends the question.
    match password::password(&args, std::env::var(password::ENV).ok()) {
        Ok(password) => args.password = password,
        Err(Failure(msg)) => {
            eprintln!("redlatch: {msg}");
            return ExitCode::from(match args.command {
                Command::Run(_) | Command::Lock(_) | Command::Elect(_) => args::RUN_FAILED,
                _ => 1,
            });
        }
    }
    if let Command::Run(hold) | Command::Lock(hold) | Command::Elect(hold) = &args.command {
        // Before anything else: it blocks signals in every thread the client starts.
        #[cfg(unix)]
        return match args.command {
            Command::Run(_) | Command::Elect(_) => run::run(&args, hold),
            _ => lock::lock(&args, hold),
        };
        #[cfg(not(unix))]
        {
            let _ = hold;
            eprintln!("redlatch: run and lock are for Unix only (they wait for Unix signals)");
            return ExitCode::from(args::RUN_FAILED);
        }
    }
    let outcome = connect(&args).and_then(|client| match &args.command {
        Command::Inspect(name) => inspect(&client, &args, name),
        Command::List(pattern) => list(&client, &args, pattern),
        Command::Waits { dot } => waits(&client, &args, *dot),
        Command::ForceUnlock(name) => force_unlock(&client, &args, name),
        Command::Watch(name) => watch(&client, &args, name),
        Command::Top(top_args) => top(&client, &args, top_args),
        Command::History { name, trace, svg } => {
            history(&client, &args, name, trace.as_deref(), svg.as_deref())
        }
        Command::Doctor => doctor::doctor(&client, &args),
        Command::Leader { name, watch } => leader(&client, &args, name, *watch),
        Command::Run(_) | Command::Lock(_) | Command::Elect(_) => {
            unreachable!("run, lock and elect returned above")
        }
    });
    match outcome {
        Ok(code) => code,
        Err(Failure(msg)) => {
            eprintln!("redlatch: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn connect(args: &Args) -> Result<Client, Failure> {
    let urls = match &args.servers {
        Servers::Url(url) => std::slice::from_ref(url),
        Servers::Cluster(urls) | Servers::Sentinel { urls, .. } => urls.as_slice(),
    };
    // Check each URL alone, so that the message names the bad one.
    for url in urls {
        if let Err(e) = Config::builder(url.as_str()).build() {
            return Err(explain::bad_url(url, &e.to_string()));
        }
    }
    let builder = match &args.servers {
        Servers::Url(url) => Config::builder(url.as_str()),
        Servers::Cluster(urls) => Config::cluster(urls.iter().map(String::as_str)),
        Servers::Sentinel { urls, master } => {
            Config::sentinel(urls.iter().map(String::as_str), master)
        }
    };
    let builder = match &args.username {
        Some(u) => builder.username(u),
        None => builder,
    };
    let builder = match &args.password {
        Some(p) => builder.password(p),
        None => builder,
    };
    let builder = with_tls(builder, &args.tls)?;
    let builder = match &args.name_prefix {
        Some(prefix) => builder.name_prefix(prefix),
        None => builder,
    };
    let builder = match &args.command {
        Command::Run(run) | Command::Lock(run) | Command::Elect(run) => {
            match run.watchdog_timeout {
                Some(timeout) => builder.watchdog_timeout(timeout),
                None => builder,
            }
        }
        _ => builder,
    };
    // An operator's tool: fail fast rather than retry for seconds.
    let config = builder
        .pool_size(4)
        .connect_timeout(Duration::from_secs(2))
        .retry_attempts(1)
        .retry_delay(Duration::from_millis(200))
        .build()
        .map_err(|e| Failure(e.to_string()))?;
    Client::new(config).map_err(|e| failure(e, args))
}

/// `builder` with the CA and client certificate files of `tls`, read.
#[cfg(feature = "tls")]
fn with_tls(
    builder: redlatch::ConfigBuilder,
    tls: &args::TlsFiles,
) -> Result<redlatch::ConfigBuilder, Failure> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))
    };
    let builder = match &tls.ca {
        Some(ca) => builder.tls_root_certificates(read(ca)?),
        None => builder,
    };
    Ok(match &tls.client {
        Some((cert, key)) => builder.tls_client_certificate(read(cert)?, read(key)?),
        None => builder,
    })
}

#[cfg(not(feature = "tls"))]
fn with_tls(
    builder: redlatch::ConfigBuilder,
    tls: &args::TlsFiles,
) -> Result<redlatch::ConfigBuilder, Failure> {
    if tls.ca.is_some() || tls.client.is_some() {
        return Err(Failure(
            "--tls-ca, --tls-cert and --tls-key need redlatch built with its `tls` feature"
                .to_owned(),
        ));
    }
    Ok(builder)
}

/// `value` as one line of JSON.
fn json_line(value: &impl Serialize) -> Result<String, Failure> {
    serde_json::to_string(value)
        .map(|line| line + "\n")
        .map_err(|e| Failure(format!("cannot write JSON: {e}")))
}

/// Prints `text` to stdout; a closed pipe (`| head`) ends quietly.
fn out(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => other.map_err(|e| Failure(format!("cannot write the output: {e}"))),
    }
}

fn not_found(name: &str) -> Outcome {
    eprintln!("redlatch: no lock or synchronizer named {name}");
    Ok(ExitCode::from(NOT_FOUND))
}

/// Traces `found`'s holders and waiters to their clients' connections (one `CLIENT LIST`
/// per master). An ACL that refuses `CLIENT LIST` leaves them untraced, and says so.
fn trace(client: &Client, found: &mut [Inspection]) {
    let waited = found
        .iter()
        .any(|i| !i.holders.is_empty() || !i.readers.is_empty() || !i.queue.is_empty());
    if !waited {
        return;
    }
    match client.connections() {
        Ok(connections) => found.iter_mut().for_each(|i| i.trace(&connections)),
        Err(e) => eprintln!(
            "redlatch: cannot list the clients' connections ({e}): holders are not traced"
        ),
    }
}

fn inspect(client: &Client, args: &Args, name: &str) -> Outcome {
    let Some(mut found) = client.inspect(name).map_err(|e| failure(e, args))? else {
        return not_found(name);
    };
    trace(client, std::slice::from_mut(&mut found));
    if args.json {
        out(&json_line(&found)?)?;
    } else {
        out(&render::inspection_text(&found))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn list(client: &Client, args: &Args, pattern: &str) -> Outcome {
    let mut found = client.list(pattern).map_err(|e| failure(e, args))?;
    trace(client, &mut found);
    if args.json {
        out(&json_line(&found)?)?;
    } else if found.is_empty() {
        eprintln!("redlatch: nothing matches {pattern}");
    } else {
        out(&render::list_text(&found))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn waits(client: &Client, args: &Args, dot: bool) -> Outcome {
    let found = client.waits().map_err(|e| failure(e, args))?;
    let orders = client.lock_order_warnings().map_err(|e| failure(e, args))?;
    if args.json {
        out(&json_line(&serde_json::json!({
            "waits": found,
            "lock_order_warnings": orders,
        }))?)?;
    } else if dot {
        out(&render::waits_dot(&found, &orders))?;
    } else {
        if found.is_empty() {
            eprintln!("redlatch: no wait is recorded");
        } else {
            out(&render::waits_text(&found))?;
        }
        out(&render::orders_text(&orders))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn top(client: &Client, args: &Args, top: &args::Top) -> Outcome {
    let once = top.once || args.json;
    loop {
        let mut rows = client
            .top(&top.pattern, top.window)
            .map_err(|e| failure(e, args))?;
        match top.sort {
            TopSort::Waiting => {}
            TopSort::Acquisitions => {
                rows.sort_by(|a, b| b.acquisitions_per_s.total_cmp(&a.acquisitions_per_s))
            }
            TopSort::Contended => {
                rows.sort_by(|a, b| b.contended_per_s.total_cmp(&a.contended_per_s))
            }
            TopSort::Waiters => rows.sort_by_key(|a| std::cmp::Reverse(a.waiters)),
            TopSort::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        if top.rows > 0 {
            rows.truncate(top.rows);
        }
        if args.json {
            out(&json_line(&rows)?)?;
        } else {
            let screen = render::top_text(&rows, top.window);
            if once {
                out(&screen)?;
            } else {
                // Home and clear, as top does, then the screen.
                let at = render::timestamp(std::time::SystemTime::now());
                out(&format!(
                    "\x1b[H\x1b[2Jredlatch top  {at}  (Ctrl-C to stop)\n\n{screen}"
                ))?;
            }
        }
        if once {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(top.interval);
    }
}

fn history(
    client: &Client,
    args: &Args,
    name: &str,
    trace: Option<&std::path::Path>,
    svg: Option<&std::path::Path>,
) -> Outcome {
    let events = client.history(name).map_err(|e| failure(e, args))?;
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros() as u64;
    let write = |path: &std::path::Path, text: String| {
        std::fs::write(path, text)
            .map_err(|e| Failure(format!("cannot write {}: {e}", path.display())))
    };
    if let Some(path) = trace {
        write(path, timeline::trace_json(&events, now_us).to_string())?;
    }
    if let Some(path) = svg {
        write(path, timeline::svg(&events, now_us))?;
    }
    if args.json {
        out(&json_line(&events)?)?;
    } else if events.is_empty() {
        eprintln!("redlatch: no event of {name} is recorded (clients record with history on)");
    } else {
        out(&render::history_text(&events))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Breaks the lock with the constructor of its kind; whether it was held in that form.
fn break_lock(client: &Client, found: &Inspection) -> redlatch::Result<bool> {
    let name = found.name.as_str();
    match (found.kind, found.mode) {
        (Kind::Reentrant, _) => client.lock(name).force_unlock(),
        (Kind::Fair, _) => client.fair_lock(name).force_unlock(),
        (Kind::Fenced, _) => client.fenced_lock(name).force_unlock(),
        (Kind::ReadWrite, Some(Mode::Write)) => client.read_write_lock(name).write().force_unlock(),
        (Kind::ReadWrite, _) => client.read_write_lock(name).read().force_unlock(),
        _ => Ok(false),
    }
}

/// Asks on stderr and reads the answer from stdin: true for `y` or `yes`.
fn confirm(question: &str) -> Result<bool, Failure> {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

fn force_unlock(client: &Client, args: &Args, name: &str) -> Outcome {
    let Some(mut found) = client.inspect(name).map_err(|e| failure(e, args))? else {
        return not_found(name);
    };
    if !found.kind.is_lock() {
        return Err(Failure(format!(
            "{name} is a {}, not a lock: force-unlock breaks reentrant, fair, fenced and \
             read-write locks only",
            found.kind
        )));
    }
    let kind = found.kind;
    let report = |unlocked: bool, holders: &str| -> Outcome {
        if args.json {
            out(&json_line(&serde_json::json!({
                "name": name,
                "kind": kind,
                "unlocked": unlocked,
                "holders": holders,
            }))?)?;
        } else if unlocked {
            out(&format!("broke lock {name} (was held by {holders})\n"))?;
        } else {
            out(&format!("lock {name} is not held: nothing to break\n"))?;
        }
        Ok(ExitCode::SUCCESS)
    };
    let holders = render::holders_text(&found);
    if holders.is_empty() {
        return report(false, "");
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure(format!(
                "refusing to break lock {name} without confirmation: stdin is not a terminal \
                 (use --yes)"
            )));
        }
        if !confirm(&format!("Break lock {name} held by {holders}?"))? {
            return Err(Failure("aborted: nothing changed".to_owned()));
        }
        // It may have changed hands while the question waited: break only what was confirmed.
        let now = client.inspect(name).map_err(|e| failure(e, args))?;
        let state = now.as_ref().map(|i| (i.kind, render::holders_text(i)));
        let state = state.as_ref().map(|(k, h)| (*k, h.as_str()));
        if let Some(why) = changed(kind, &holders, state) {
            return Err(Failure(format!(
                "aborted: lock {name} {why} since the question; nothing changed (run again \
                 to break it as it is now)"
            )));
        }
        if let Some(now) = now {
            found = now;
        }
    }
    let unlocked = break_lock(client, &found).map_err(|e| failure(e, args))?;
    report(unlocked, &holders)
}

/// How a lock confirmed as a `kind` held by `holders` ([`render::holders_text`]) differs
/// from what it is `now` (kind and holders, `None` if gone); `None` if it does not.
fn changed(kind: Kind, holders: &str, now: Option<(Kind, &str)>) -> Option<String> {
    match now {
        None => Some("was deleted".to_owned()),
        Some((_, "")) => Some("was released".to_owned()),
        Some((k, _)) if k != kind => Some(format!("is now of kind {k}")),
        Some((_, h)) if h != holders => Some(format!("is now held by {h}")),
        Some(_) => None,
    }
}

/// `leader NAME [--watch]`: who leads, or every new leader as it comes.
fn leader(client: &Client, args: &Args, name: &str, watch: bool) -> Outcome {
    let election = client.election(name);
    let show = |leader: Option<&redlatch::Leader>| -> Result<(), Failure> {
        if args.json {
            let value = match leader {
                Some(l) => serde_json::json!({
                    "name": name,
                    "term": l.term,
                    "value": l.value_str(),
                    "owner": l.owner,
                    "since": render::timestamp(l.since),
                }),
                None => serde_json::json!({ "name": name, "term": null }),
            };
            return out(&json_line(&value)?);
        }
        out(&match leader {
            Some(l) => format!(
                "{name}: term {}, value {}, owner {}, since {}\n",
                l.term,
                l.value_str(),
                l.owner,
                render::timestamp(l.since)
            ),
            None => format!("{name}: nobody leads\n"),
        })
    };
    if !watch {
        let leader = election.leader().map_err(|e| failure(e, args))?;
        show(leader.as_ref())?;
        return Ok(if leader.is_some() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let mut observer = election.observe();
    // The first look (the leader now, if any) without waiting.
    let now = observer
        .next_timeout(std::time::Duration::ZERO)
        .map_err(|e| failure(e, args))?;
    show(now.as_ref())?;
    loop {
        let leader = observer
            .next()
            .unwrap_or_else(|| Err(redlatch::Error::Closed))
            .map_err(|e| failure(e, args))?;
        show(Some(&leader))?;
    }
}

fn watch(client: &Client, args: &Args, name: &str) -> Outcome {
    let mut watch = client.watch(name).map_err(|e| failure(e, args))?;
    if let Some(every) = args.interval {
        watch = watch.poll_interval(every);
    }
    let kind = watch.current().map(|i| i.kind);
    if args.json {
        let at = std::time::SystemTime::now();
        out(&json_line(&serde_json::json!({
            "at": render::timestamp(at),
            "event": "watching",
            "name": name,
            "kind": kind,
        }))?)?;
    } else {
        let now = match watch.current() {
            Some(i) => format!("{}: {}", i.kind, render::state(i)),
            None => "nothing of that name yet".to_owned(),
        };
        out(&format!("watching {name} ({now}); Ctrl-C to stop\n"))?;
    }
    // Connection trouble is reported and waited out (the watch resumes by itself); other
    // errors, or too many in a row, end the watch.
    let mut errors = 0;
    let mut retry = WATCH_RETRY;
    for event in watch.by_ref() {
        let event = match event {
            Ok(event) => event,
            Err(e) if (e.is_connection() || e.is_timeout()) && errors + 1 < WATCH_MAX_ERRORS => {
                errors += 1;
                eprintln!(
                    "redlatch: {} (retrying in {} s)",
                    failure(e, args).0,
                    retry.as_secs()
                );
                std::thread::sleep(retry);
                retry = (retry * 2).min(WATCH_RETRY_MAX);
                continue;
            }
            Err(e) => return Err(failure(e, args)),
        };
        errors = 0;
        retry = WATCH_RETRY;
        if args.json {
            /// An event as the library serializes it, and the name watched.
            #[derive(Serialize)]
            struct Named<'a> {
                #[serde(flatten)]
                event: &'a redlatch::Event,
                name: &'a str,
            }
            out(&json_line(&Named {
                event: &event,
                name,
            })?)?;
        } else {
            out(&(render::event_text(&event) + "\n"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_unlock_breaks_only_the_holds_it_confirmed() {
        let held = "c:1 (1 hold)";
        assert_eq!(
            changed(Kind::Reentrant, held, Some((Kind::Reentrant, held))),
            None
        );
        let why = |now| changed(Kind::Reentrant, held, now).unwrap();
        assert_eq!(why(None), "was deleted");
        assert_eq!(why(Some((Kind::Reentrant, ""))), "was released");
        assert_eq!(why(Some((Kind::Fair, held))), "is now of kind fair");
        assert_eq!(
            why(Some((Kind::Reentrant, "d:7 (1 hold)"))),
            "is now held by d:7 (1 hold)"
        );
    }
}
