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
mod revoke;
#[cfg(unix)]
mod run;
#[cfg(unix)]
mod signals;
mod timeline;

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use redlatch::{inspect::Inspection, inspect::Kind, Client, Config, LockKind};
use serde::Serialize;

use args::{Args, Command, Parsed, Servers, TopSort, FAILED, NO, USAGE};
use explain::failure;
use render::{escaped, escaped_bytes};

/// `watch` and `leader --watch`: the first wait after a lost connection, doubled after each
/// further one up to the most ([`Retry`]).
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(10);

/// What went wrong, as one line for stderr, and the exit status it gives the commands that
/// answer (`run`, `lock` and `elect` exit with [`args::RUN_FAILED`] whatever it is).
pub struct Failure {
    /// As it is: [`report`](Self::report) escapes it.
    pub msg: String,
    /// [`FAILED`], or [`USAGE`].
    pub status: u8,
}

impl Failure {
    /// No answer could be had: Redis unreachable, a login refused, an error reply, output
    /// that cannot be written ([`FAILED`]).
    pub fn new(msg: impl Into<String>) -> Failure {
        Failure {
            msg: msg.into(),
            status: FAILED,
        }
    }

    /// The request makes no sense: a bad URL, a file that cannot be read, NAME not a lock
    /// ([`USAGE`]).
    pub fn usage(msg: impl Into<String>) -> Failure {
        Failure {
            msg: msg.into(),
            status: USAGE,
        }
    }

    /// Says it on stderr, [`escaped`] (it may quote names, values and servers' replies).
    pub fn report(&self) {
        eprintln!("redlatch: {}", escaped(&self.msg));
    }
}

type Outcome = Result<ExitCode, Failure>;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut args = match args::parse_os(&argv, std::env::var("REDIS_URL").ok()) {
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(args)) => *args,
        Err(usage) => {
            eprint!("{}", usage.message);
            if !usage.from_clap || usage.status == args::RUN_FAILED {
                eprintln!("Try '{}'.", usage.help);
            }
            return ExitCode::from(usage.status);
        }
    };
    // Asked before `run` blocks the signals, so that Ctrl-C still ends the question.
    match password::password(&args, std::env::var(password::ENV).ok()) {
        Ok(password) => args.password = password,
        Err(failure) => {
            failure.report();
            return ExitCode::from(match args.command {
                Command::Run(_) | Command::Lock(_) | Command::Elect(_) => args::RUN_FAILED,
                _ => failure.status,
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
        Command::List { pattern, all } => list(&client, &args, pattern, *all),
        Command::Waits {
            deadlocks: true, ..
        } => broken_deadlocks(&client, &args),
        Command::Waits { dot, .. } => waits(&client, &args, *dot),
        Command::ForceUnlock(name) => force_unlock(&client, &args, name),
        Command::Revoke { name, how } => revoke::revoke(&client, &args, name, how),
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
        Err(failure) => {
            failure.report();
            ExitCode::from(failure.status)
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
        .map_err(|e| Failure::usage(e.to_string()))?;
    Client::new(config).map_err(|e| failure(e, args))
}

/// `builder` with the CA and client certificate files of `tls`, read.
#[cfg(feature = "tls")]
fn with_tls(
    builder: redlatch::ConfigBuilder,
    tls: &args::TlsFiles,
) -> Result<redlatch::ConfigBuilder, Failure> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))
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
        return Err(Failure::usage(
            "--tls-ca, --tls-cert and --tls-key need redlatch built with its `tls` feature",
        ));
    }
    Ok(builder)
}

/// `value` as one line of JSON.
fn json_line(value: &impl Serialize) -> Result<String, Failure> {
    serde_json::to_string(value)
        .map(|line| line + "\n")
        .map_err(|e| Failure::new(format!("cannot write JSON: {e}")))
}

/// Prints `text` to stdout; a closed pipe (`| head`) ends quietly.
fn out(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => other.map_err(|e| Failure::new(format!("cannot write the output: {e}"))),
    }
}

/// "No" to a question about NAME: said on stderr ([`escaped`]), exit status [`NO`].
fn no(msg: &str) -> Outcome {
    eprintln!("redlatch: {}", escaped(msg));
    Ok(ExitCode::from(NO))
}

fn not_found(name: &str) -> Outcome {
    no(&format!("no lock or synchronizer named {name}"))
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
            "redlatch: cannot list the clients' connections ({}): holders are not traced",
            escaped(&e.to_string())
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

fn list(client: &Client, args: &Args, pattern: &str, all: bool) -> Outcome {
    let mut found = client.list(pattern).map_err(|e| failure(e, args))?;
    let before = found.len();
    if !all {
        found.retain(|i| !i.is_idle());
    }
    let hidden = before - found.len();
    trace(client, &mut found);
    if args.json {
        out(&json_line(&found)?)?;
    } else if found.is_empty() && hidden == 0 {
        eprintln!("redlatch: nothing matches {}", escaped(pattern));
    } else {
        if !found.is_empty() {
            out(&render::list_text(&found))?;
        }
        if hidden > 0 {
            let names = if hidden == 1 { "name" } else { "names" };
            eprintln!(
                "redlatch: {hidden} {names} holding nothing but a fencing token or an \
                 election's log not shown (--all shows them)"
            );
        }
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
            eprintln!(
                "redlatch: no wait is recorded (only threads that wait holding another lock \
                 are, after deadlock_check_after; `redlatch top` counts every waiter)"
            );
        } else {
            out(&render::waits_text(&found))?;
        }
        out(&render::orders_text(&orders))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn broken_deadlocks(client: &Client, args: &Args) -> Outcome {
    let broken = client.deadlocks().map_err(|e| failure(e, args))?;
    if args.json {
        out(&json_line(&serde_json::json!({ "deadlocks": broken }))?)?;
    } else if broken.is_empty() {
        eprintln!("redlatch: no deadlock broken in the last week is kept");
    } else {
        out(&render::deadlocks_text(&broken))?;
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
                // On a terminal: home and clear, as top does, then the screen. Into a pipe or
                // a file: one screen after another, no escapes.
                let at = render::timestamp(std::time::SystemTime::now());
                let clear = if std::io::stdout().is_terminal() {
                    "\x1b[H\x1b[2J"
                } else {
                    "\n"
                };
                out(&format!(
                    "{clear}redlatch top  {at}  (Ctrl-C to stop)\n\n{screen}"
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
    // A plain or fenced lock's requests, notices and forced releases, from its own log.
    let revocations = client
        .lock(name)
        .revocations(1000)
        .map_err(|e| failure(e, args))?;
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros() as u64;
    let write = |path: &std::path::Path, text: String| {
        std::fs::write(path, text)
            .map_err(|e| Failure::new(format!("cannot write {}: {e}", path.display())))
    };
    if let Some(path) = trace {
        write(path, timeline::trace_json(&events, now_us).to_string())?;
    }
    if let Some(path) = svg {
        write(path, timeline::svg(&events, now_us))?;
    }
    if args.json {
        out(&json_line(&events)?)?;
        if !revocations.is_empty() {
            out(&json_line(&serde_json::json!({
                "revocations": render::revocations_json(&revocations)
            }))?)?;
        }
    } else if events.is_empty() && revocations.is_empty() {
        eprintln!(
            "redlatch: no event of {} is recorded (clients record with history on)",
            escaped(name)
        );
    } else {
        out(&render::history_text(&events, &revocations))?;
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
        (Kind::ReadWrite, Some(LockKind::Write)) => {
            client.read_write_lock(name).write().force_unlock()
        }
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
        .map_err(|e| Failure::new(format!("cannot read the answer: {e}")))?;
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
        return Err(Failure::usage(format!(
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
            out(&format!(
                "broke lock {} (was held by {})\n",
                escaped(name),
                escaped(holders)
            ))?;
        } else {
            out(&format!(
                "lock {} is not held: nothing to break\n",
                escaped(name)
            ))?;
        }
        Ok(ExitCode::from(if unlocked { args::OK } else { NO }))
    };
    let holders = render::holders_text(&found);
    if holders.is_empty() {
        return report(false, "");
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(format!(
                "refusing to break lock {name} without confirmation: stdin is not a terminal \
                 (use --yes)"
            )));
        }
        let question = format!("Break lock {name} held by {holders}?");
        if !confirm(&escaped(&question))? {
            return no("aborted: nothing changed");
        }
        // It may have changed hands while the question waited: break only what was confirmed.
        let now = client.inspect(name).map_err(|e| failure(e, args))?;
        let state = now.as_ref().map(|i| (i.kind, render::holders_text(i)));
        let state = state.as_ref().map(|(k, h)| (*k, h.as_str()));
        if let Some(why) = changed(kind, &holders, state) {
            return no(&format!(
                "aborted: lock {name} {why} since the question; nothing changed (run again \
                 to break it as it is now)"
            ));
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

/// How `watch` and `leader --watch` ride out connection trouble (a Redis restart, a
/// failover, a cut network): each error is said on stderr and waited out, [`RETRY_FIRST`]
/// after the first, doubling up to [`RETRY_MAX`], for as long as it lasts (an observer may
/// run for days: Ctrl-C ends it). Any other error ends them.
struct Retry {
    wait: Duration,
}

impl Retry {
    fn new() -> Retry {
        Retry { wait: RETRY_FIRST }
    }

    /// Waits `e` out if it is connection trouble (said on stderr first); else the failure
    /// that ends the command.
    fn ride_out(&mut self, e: redlatch::Error, args: &Args) -> Result<(), Failure> {
        if !(e.is_connection() || e.is_timeout()) {
            return Err(failure(e, args));
        }
        eprintln!(
            "redlatch: {} (retrying in {} s)",
            escaped(&failure(e, args).msg),
            self.wait.as_secs()
        );
        std::thread::sleep(self.wait);
        self.wait = (self.wait * 2).min(RETRY_MAX);
        Ok(())
    }

    /// An answer came: the next trouble waits [`RETRY_FIRST`] again.
    fn reset(&mut self) {
        self.wait = RETRY_FIRST;
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
                "{}: term {}, value {}, owner {}, since {}\n",
                escaped(name),
                l.term,
                escaped_bytes(&l.value),
                escaped(&l.owner),
                render::timestamp(l.since)
            ),
            None => format!("{}: nobody leads\n", escaped(name)),
        })
    };
    if !watch {
        let leader = election.leader().map_err(|e| failure(e, args))?;
        show(leader.as_ref())?;
        return Ok(ExitCode::from(if leader.is_some() { args::OK } else { NO }));
    }
    let mut observer = election.observe();
    // The first look (the leader now, if any) without waiting: a failure there ends it.
    let now = observer
        .next_timeout(Duration::ZERO)
        .map_err(|e| failure(e, args))?;
    show(now.as_ref())?;
    // The last leader shown, by term.
    let mut shown = now.map(|l| l.term);
    let mut retry = Retry::new();
    loop {
        let leader = match observer.next().unwrap_or(Err(redlatch::Error::Closed)) {
            Ok(leader) => leader,
            Err(e) => {
                retry.ride_out(e, args)?;
                // Back (or not yet: the observer's next look says), the observer reads on in
                // the election's log: the leaders that came and went meanwhile come too. A
                // leader below the last one shown means the servers lost their data and a
                // token counter started over (Redisson's from 1; ours from the clock), which
                // the observer, past those terms, would skip: a new observer then, whose
                // first look is that leader.
                if let Ok(Some(now)) = election.leader() {
                    if shown.is_some_and(|term| now.term < term) {
                        observer = election.observe();
                    }
                }
                continue;
            }
        };
        retry.reset();
        if shown.is_some_and(|term| leader.term == term) {
            continue;
        }
        shown = Some(leader.term);
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
            Some(i) => format!("{}: {}", i.kind, escaped(&render::state(i))),
            None => "nothing of that name yet".to_owned(),
        };
        out(&format!(
            "watching {} ({now}); Ctrl-C to stop\n",
            escaped(name)
        ))?;
    }
    // Connection trouble is reported and waited out (the watch resumes by itself); other
    // errors end the watch.
    let mut retry = Retry::new();
    for event in watch.by_ref() {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                retry.ride_out(e, args)?;
                continue;
            }
        };
        retry.reset();
        if args.json {
            /// An event as the library serializes it, and the name watched.
            #[derive(Serialize)]
            struct Named<'a> {
                #[serde(flatten)]
                event: &'a redlatch::watch::Event,
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
