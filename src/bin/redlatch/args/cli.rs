//! The command line as clap (derive) sees it: the commands, their options and help texts, and
//! the value parsers clap runs on each option.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::NonEmptyStringValueParser;
use clap::{Parser, Subcommand, ValueEnum};

/// Subcommands' help: the usage line first.
const SUBCOMMAND_HELP: &str = "\
{usage-heading} {usage}

{about-with-newline}
{all-args}{after-help}";

const AFTER_HELP: &str = "\
The URL comes from --url, else $REDIS_URL, else redis://127.0.0.1:6379/: it reads
redis://[[user]:password@]host[:port][/db], or rediss://... for TLS, with --tls-ca for a
private CA and --tls-cert/--tls-key for a client certificate.

The password comes from --askpass (asked on the terminal), else --password, else the URL,
else $REDISCLI_AUTH (as redis-cli).

DURATIONs are as humantime writes them (250ms, 30s, 1m30s, 2h), a decimal number and one
unit (1.5s), or a bare number of seconds (30, 1.5): everywhere, --wait, --window and
--interval alike.

Names and values are shown with control characters escaped (\\n, \\u{1b}, a backslash as
\\\\; bytes that are not UTF-8 as \\xff), and cut in tables (…); --json shows them exactly.

Exit status (all commands but run, lock and elect):
  0  yes, or done: found, someone leads, broken; a listing (list, top, waits, history),
     a watch ended, doctor found nothing
  1  no: nothing named NAME (inspect, force-unlock), nobody leads (leader), nothing
     broken (force-unlock of a free lock, or not confirmed)
  2  usage: a bad command line or URL, a file that cannot be read, force-unlock of a
     non-lock or without --yes and a terminal
  3  doctor found something that threatens locks
  4  no answer: Redis unreachable, the password or user refused, an error from the servers
     or the output (watch and leader --watch wait out lost connections instead)
run, lock and elect exit with their command's status, or 122 (lost), 123 (--lease ended),
124 (not had within --wait), 125 (redlatch failed, usage included), 126, 127 (CMD cannot run,
not found), 128+N (signal N): see 'redlatch help run'.";

const INSPECT_HELP: &str = "\
Shows what NAME is, as told by its keys: its kind (reentrant, fair, fenced, read-write,
semaphore, expirable-semaphore, latch, semaphore-or-latch, fenced-resource, group,
rate-limiter, unknown), each holder with its client id, thread number and hold count, the
remaining lease, a fair lock's queue (in order, with each waiter's deadline), read holders,
permits, a latch's count, the latest fencing token, and how many clients wait on its channel.

A rate limiter (Redisson's RRateLimiter: a config hash of rate, interval and type) shows its
rate per interval, its type, the permits left now and when the next one comes back (counted
on the server's clock, as its acquires count them). A per-client limiter counts each
client's permits apart: its clients' counts are found with SCAN and shown in a table, one row
per client id.

Each holder and waiter is traced to its client's connections (CLIENT LIST, on every master):
the address and name of each, or `gone` when its client has no connection left (a crashed
holder keeps the lock until its lease runs out; the time left is shown). Only redlatch names
its connections with its client id: where some connections of the server are not named so
(Redisson's), an owner that no connection names is shown as `untraced`, not gone.

Some kinds look alike in Redis: a semaphore and a latch (an integer and no other key; told
apart when threads wait on one, or when it is zero or less, which a latch never is: else
shown as semaphore-or-latch; a permit-expirable semaphore with permits out, as `run
--permits` holds them, is told by its {NAME}:timeout key), and a fair lock nobody waits for
and a reentrant lock (shown as reentrant: a fair lock's queue keys exist only while threads
wait).

The name, keys and values are shown escaped (\\n, \\u{1b}, \\\\), the name whole.

With --json: one object; durations are in milliseconds (lease_ms is -1 for a key without
expiry, null for none).

Exit status: 0 found, 1 nothing named NAME, 2 usage, 4 no answer (unreachable, login
refused, ...).";

const LIST_HELP: &str = "\
Lists the locks and synchronizers with a key matching PATTERN (Redis glob syntax: *, ?,
[abc], \\ escapes; default *), found with SCAN on every master (never KEYS): one line each
with its kind, state and lease, and where each holder's client connects from. Helper keys
(fair queues, token counters, read-hold leases, permit expiries, a rate limiter's
{NAME}:value and {NAME}:permits and its clients' ones) are shown under their object, not on
their own; a rate limiter's state is its rate, the permits left and when the next comes back. A free fenced lock exists only as redisson_lock_token:{NAME}: a pattern
like *orders* finds it, orders* does not.

Names that hold nothing but what fenced locks and elections keep for good (their token
counter, and an election's log and last leader: no holder, waiter or lease) are left out
unless --all; how many were is said on stderr (not with --json). Names are escaped (\\n,
\\u{1b}) and cut to 48 characters (…); `inspect NAME` shows one whole.

With --json: an array of the objects `inspect --json` prints (the same names).

Exit status: 0 (even when nothing matches), 2 usage, 4 no answer.";

const WAITS_HELP: &str = "\
Shows the wait-for graph of the deployment, found with SCAN on every master: each thread
recorded as waiting for a lock, how long it has waited, and the owners in its way; waits in a
cycle (a deadlock not broken yet) are marked.

Not every waiting thread is here. A wait is recorded only where it can be part of a deadlock:
a thread that waits while it holds another lock, once it has waited its client's
deadlock_check_after (1 s unless set). A thread that holds nothing while it waits, and so is in
nobody's way, writes nothing (its wait costs the server nothing); waits of Java peers and of
clients with detection off are not recorded either. `redlatch top` counts every waiter.

Below the waits, the lock-order warnings: pairs of locks that some threads took in
one order and others in the opposite order, which can deadlock (recorded by clients with
lock_order_checks on).

A cycle is broken within seconds of forming, so this graph rarely shows one; every broken
one is kept on the server: --deadlocks prints them, each with when, its victim, and every
member's owner, client name, pid, host and thread, the lock it waited for and the owner in
its way (a Java member by its owner id alone).

With --json: an object {\"waits\": [...], \"lock_order_warnings\": [...]} (waited_ms in
milliseconds), or with --deadlocks {\"deadlocks\": [...]} (at_us: µs since the epoch on the
server's clock). With --dot: a Graphviz digraph, an edge from each waiter to each owner in its
way, labelled with the lock, cycles in red, and a dashed orange edge each way between two
locks taken in opposite orders (`redlatch waits --dot | dot -Tsvg > waits.svg`).";

/// `top --sort`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopSort {
    /// Time spent waiting per second (the default)
    Waiting,
    /// Acquisitions per second
    Acquisitions,
    /// Contended acquisitions per second
    Contended,
    /// Threads waiting now
    Waiters,
    /// Name
    Name,
}

const TOP_HELP: &str = "\
Shows the busiest locks and synchronizers whose names match PATTERN, on every master: who
holds each and for how long, how many wait and the longest wait, acquisitions and contended
acquisitions per second, and seconds spent waiting per second (2.0: two threads waiting all
the time) over --window; below the table, for the busiest locks, which owners made others
wait and for how long (blame). Holders and queues come from the server, so locks that only
Java peers use show them too; rates, hold ages and blame come from the histories of clients
with history on (ConfigBuilder::history), and are 0 or - without. A rate limiter's waits
count as a lock's, and each call it admits as an acquisition; it has no holder. Last, the
deadlocks broken over the window, counted per lock they went through (`redlatch waits
--deadlocks` tells who).

With --json (and --once): an array of objects, busiest first.";

const HISTORY_HELP: &str = "\
Prints the recorded events of the lock NAME, oldest first: waits, acquires, releases, losses,
timed-out waits and deadlocks, each with its owner, client, process, host, thread and the
server's time. Only clients with history on (ConfigBuilder::history) record them; each keeps
its last 10,000 (unless set) for a day.

With --trace FILE: the Chrome trace-event JSON, a track per owner and a slice per hold and per
wait, which https://ui.perfetto.dev and chrome://tracing open. With --svg FILE: the same
timeline as an SVG picture. With --json: an array of the events.";

const FORCE_UNLOCK_HELP: &str = "\
Breaks the lock NAME whoever holds it (reentrant, fair, fenced, or read-write in its current
mode) and wakes its waiters, as Lock::force_unlock does. The evicted holders find out at their
next lease renewal. Semaphores and latches are not locks: they are refused.

Asks \"Break lock NAME held by ...? [y/N]\" on the terminal first; with --yes it does not ask.
Without a terminal on stdin and without --yes it refuses.

Exit status: 0 broken; 1 nothing broken: nothing named NAME, the lock is free, the answer
was no, or it changed hands since the question; 2 usage: NAME is not a lock, or no --yes
without a terminal; 4 no answer (unreachable, login refused, ...).";

const REVOKE_HELP: &str = "\
Without --grace or --steal, asks the holder of the plain or fenced lock NAME to release it,
as Lock::request_release does: a holder on redlatch is told at its next renewal (a third of
its lease), a Redisson holder is not; nothing is enforced.

With --grace D, takes the lock as Lock::preempt does: the holder is told, and if the same
hold (same owner, and on a fenced lock the same token) is still there D after the notice
(or after the lock's TTL at the request, if no notice came), it is released by force and
the lock taken in the same step; then it is released. With --steal, the same at once.
Either way, the request, the notice and a forced release go to the lock's log.

Exit status: 0 asked, or taken and released; 1 nobody to ask (the lock is free) or nothing
named NAME; 2 usage: NAME is not a plain or fenced lock; 4 no answer (unreachable, login
refused, ...).";

const WATCH_HELP: &str = "\
Prints what happens to NAME until interrupted (Ctrl-C): acquired, released (with the owner
and its hold count), force_released (broken by a redlatch force-unlock), waiting (a
fair-queue waiter with its place, or a client subscribing to the lock's channel), left (a
waiter that gave up; one that took its turn between two polls shows as acquired and
released), changed (a latch's count, ...). A watch is not counted among the waiting clients
that inspect shows.

Releases are announced on the lock's channel and show at once; acquires and queue changes
are seen by re-inspecting NAME every --interval (default 250ms; 1s, 1.5s, a bare number is
seconds). A hold shorter
than that may show only as its release (without owner).

A lost connection (a Redis restart, a failover) is said on stderr and waited out, 1 s after
the first error, doubling up to 10 s between tries, for as long as it lasts; the watch goes
on when the servers answer again. Other errors end it (exit status 4).

With --json: a first line {\"event\":\"watching\",...} once subscribed, then one object per
event: {\"at\":\"<UTC time>\",\"at_ms\":<ms since 1970>,\"event\":\"acquired\",\"name\":...,
\"owner\":\"<client id>:<thread>\" or null, ...}.";

const DOCTOR_HELP: &str = "\
Exit status: 0 nothing found, 3 something found (each finding printed with what to do), 4
no answer (unreachable, login refused, ...).";

const RUN_ABOUT: &str = "\
Waits for the lock NAME, runs CMD with ARGS while it holds it, releases it when CMD has
exited, and exits with CMD's status. The watchdog renews the lock's lease while CMD runs,
every third of the watchdog timeout. Options go before CMD: from CMD on, every argument is
the command's.

  redlatch run nightly-report -- ./report.sh --full
  redlatch run --permits 3 --wait 10m render -- render-frame 42";

const RUN_HELP: &str = "\
DURATION is as humantime writes it: 250ms, 30s, 1m30s, 10m, 2h, 1d; or a decimal number and
one unit (1.5s, 0.5m); a bare number is seconds.

A lock that threads queue for (a fair lock: its queue keys exist) is waited for in its queue,
as with --fair, never taken ahead of it.

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
  123           the --lease ended while CMD ran (CMD was stopped): the lock expired as asked
  124           the lock was not had within --wait (CMD did not run)
  125           redlatch failed: bad usage, Redis unreachable, NAME is not a lock, ...
  126, 127      CMD could not be run; CMD was not found
  128+N         signal N ended the wait for the lock (130: SIGINT, 143: SIGTERM)";

const LOCK_HELP: &str = "\
Waits for the lock NAME, prints `holding lock NAME ...` on stdout once it has it, then holds
it (the watchdog renews its lease) until redlatch gets SIGINT (Ctrl-C), SIGTERM or SIGHUP:
it releases the lock, prints `released lock NAME` and exits with 0. As `etcdctl lock NAME`
without a command; to run a command under the lock, see `redlatch run`.

While it waits, it says on stderr who holds the lock (not with --quiet); a signal then ends
the wait and leaves nothing behind. A lock that threads queue for (a fair lock: its queue
keys exist) is waited for in its queue, as with --fair, never taken ahead of it.

Exit status:
  0     held, then released on a signal
  122   the lock was lost while held (force-unlocked, deleted, renewals failed)
  123   the --lease ended: the lock expired as asked (`released lock NAME (its --lease of
        D ended)` on stdout)
  124   the lock was not had within --wait
  125   redlatch failed: Redis unreachable, NAME is not a lock, ...
  128+N signal N ended the wait for the lock (130: SIGINT, 143: SIGTERM)";

const ELECT_HELP: &str = "\
Campaigns in the election NAME (a fenced lock NAME, with the leader's record beside it; see
the guide's election chapter) and runs CMD once this process leads, as `run` does under a
lock: CMD's environment has REDLATCH_NAME, REDLATCH_OWNER, REDLATCH_TOKEN (the term: a
fencing token, above every earlier leader's) and REDLATCH_VALUE; signals are passed on; when
leadership is lost CMD gets SIGTERM, then SIGKILL after the grace period; when CMD ends,
redlatch resigns at once (the next campaigner leads within a round trip) and exits with
CMD's status. With --again it campaigns again instead, until a signal.

Exit status: CMD's; 122 leadership lost while CMD ran; 124 not leading within --wait; 125
redlatch failed; 126 CMD cannot be run; 127 CMD not found; 128+N signal N ended the wait.";

const LEADER_HELP: &str = "\
Prints who leads the election NAME: its term, value, owner and since when (one JSON object
with --json), or that nobody does. With --watch, prints every new leader (once each, in term
order) as it comes, woken by pub/sub, until Ctrl-C; a lost connection is waited out as
`watch` waits it out (said on stderr; tries again after 1 s, doubling up to 10 s, for as long
as it lasts); the leaders that came meanwhile are printed once it is back (read from the
election's log; after servers that lost their data, the leader then).

Exit status: 0 someone leads, 1 nobody leads, 2 usage, 4 no answer (unreachable, login
refused, ...); with --watch it runs until Ctrl-C, or exits with 4 on an error that is not a
lost connection (a refused login).";

/// redlatch: inspect and operate Redisson-compatible locks and synchronizers in Redis
#[derive(Parser, Debug)]
#[command(name = "redlatch", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub servers: ServerArgs,
    /// Machine-readable output (JSON; one object per line for watch)
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: CliCommand,
}

/// Where the servers are and how to log in: for every command.
#[derive(clap::Args, Debug, Default)]
#[command(next_help_heading = "Servers")]
pub struct ServerArgs {
    /// A single server [default: $REDIS_URL, else redis://127.0.0.1:6379/]
    #[arg(long, global = true, value_name = "URL")]
    pub url: Option<String>,
    /// A Redis Cluster, through any of its nodes
    #[arg(long, global = true, value_name = "URL[,URL..]")]
    pub cluster: Option<String>,
    /// Redis Sentinel, with --master NAME
    #[arg(long, global = true, value_name = "URL[,URL..]")]
    pub sentinel: Option<String>,
    /// The master's name at the sentinels
    #[arg(long, global = true, value_name = "NAME")]
    pub master: Option<String>,
    /// The servers' ACL username (or put it in the URL)
    #[arg(long, global = true, value_name = "USER")]
    pub username: Option<String>,
    /// The servers' password. Other users see it in `ps`: prefer $REDISCLI_AUTH or --askpass
    #[arg(long, global = true, value_name = "PASSWORD")]
    pub password: Option<String>,
    /// Ask for the password on the terminal, without echo (over --password and $REDISCLI_AUTH)
    #[arg(long, global = true, conflicts_with = "password")]
    pub askpass: bool,
    /// PEM file of the CA that signed the servers' certificates (rediss:// URLs)
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// PEM file of a client certificate, for servers that check clients (with --tls-key)
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key (with --tls-cert)
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The applications' name prefix (Redisson's PrefixNameMapper): NAME and PATTERN are
    /// given and shown without it
    #[arg(long, global = true, value_name = "PREFIX")]
    pub name_prefix: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum CliCommand {
    /// What NAME is (reentrant, fair, fenced, read-write lock, semaphore, latch, ...), its
    /// holders and where they connect from, lease, queue, permits, count, token
    #[command(help_template = SUBCOMMAND_HELP, after_help = INSPECT_HELP)]
    Inspect {
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        name: String,
    },
    /// The locks and synchronizers with a key matching PATTERN (SCAN glob, default *), one
    /// line each
    #[command(help_template = SUBCOMMAND_HELP, after_help = LIST_HELP)]
    List {
        /// Also the names that hold nothing but a fencing token or an election's log
        #[arg(long)]
        all: bool,
        #[arg(default_value = "*", value_parser = non_empty_pattern)]
        pattern: String,
    },
    /// Who waits for whom: the recorded waits, the owners in their way, cycles marked
    #[command(help_template = SUBCOMMAND_HELP, after_help = WAITS_HELP)]
    Waits {
        /// A Graphviz digraph instead of a table
        #[arg(long, conflicts_with_all = ["json", "deadlocks"])]
        dot: bool,
        /// The deadlocks broken (kept a week, about the last 1,000), oldest first, instead
        /// of the waits going on
        #[arg(long)]
        deadlocks: bool,
    },
    /// The busiest locks and synchronizers across every client: holders, waiters, rates,
    /// time spent waiting, blame; refreshed until Ctrl-C
    #[command(help_template = SUBCOMMAND_HELP, after_help = TOP_HELP)]
    Top {
        /// Print once and exit (with --json, one JSON array)
        #[arg(long)]
        once: bool,
        /// The order of the rows
        #[arg(long, value_enum, default_value_t = TopSort::Waiting)]
        sort: TopSort,
        /// The window the rates and blame cover (10s, 1m; a bare number is seconds)
        /// [default: 10s]
        #[arg(long, value_name = "DURATION", value_parser = positive_interval)]
        window: Option<Duration>,
        /// How often to refresh [default: 2s]
        #[arg(long, value_name = "DURATION", value_parser = positive_interval)]
        interval: Option<Duration>,
        /// How many locks to show (0: all)
        #[arg(long, default_value_t = 20)]
        rows: usize,
        #[arg(default_value = "*", value_parser = non_empty_pattern)]
        pattern: String,
    },
    /// The recorded history of the lock NAME (from clients with history on), one event a
    /// line; --trace and --svg write it as a timeline
    #[command(help_template = SUBCOMMAND_HELP, after_help = HISTORY_HELP)]
    History {
        /// Write the Chrome trace-event JSON that Perfetto and chrome://tracing open
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Draw the timeline as an SVG picture
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        name: String,
    },
    /// Break the lock NAME whoever holds it, and wake its waiters
    #[command(help_template = SUBCOMMAND_HELP, after_help = FORCE_UNLOCK_HELP)]
    ForceUnlock {
        /// Do not ask
        #[arg(short, long)]
        yes: bool,
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        name: String,
    },
    /// Ask the holder of the lock NAME to release it; with --grace, take it by force once
    /// its holder was told and the grace ran out; with --steal, at once
    #[command(help_template = SUBCOMMAND_HELP, after_help = REVOKE_HELP)]
    Revoke {
        /// Take the lock, by force if its holder has not released it this long after it was
        /// told (250ms, 5s, 1m)
        #[arg(long, value_name = "DURATION", value_parser = positive_interval, conflicts_with = "steal")]
        grace: Option<Duration>,
        /// Take the lock at once, by force (unsafe without fencing)
        #[arg(long)]
        steal: bool,
        /// Why: the holder and the lock's log are told
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// How long an unpreemptible section of the holder may put the force off
        #[arg(long, value_name = "DURATION", value_parser = duration)]
        max_deferral: Option<Duration>,
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        name: String,
    },
    /// Check what in the deployment threatens locks (eviction, no persistence, replicas
    /// without sync, clocks), each finding with what to do; exit status 3 when something is
    /// found
    #[command(help_template = SUBCOMMAND_HELP, after_help = DOCTOR_HELP)]
    Doctor,
    /// Print events (acquired, released, waiting, ...) until Ctrl-C
    #[command(help_template = SUBCOMMAND_HELP, after_help = WATCH_HELP)]
    Watch {
        /// How often to re-inspect (250ms, 1s; a bare number is seconds) [default: 250ms]
        #[arg(long, value_name = "DURATION", value_parser = positive_interval)]
        interval: Option<Duration>,
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        name: String,
    },
    /// Run a command while holding the lock NAME (or one of N permits)
    #[command(
        help_template = SUBCOMMAND_HELP,
        about = "Run a command while holding the lock NAME (or one of N permits)",
        long_about = RUN_ABOUT,
        after_help = RUN_HELP
    )]
    Run(RunArgs),
    /// Take the lock NAME and hold it until Ctrl-C (SIGINT, SIGTERM or SIGHUP)
    #[command(help_template = SUBCOMMAND_HELP, after_help = LOCK_HELP)]
    Lock(LockArgs),
    /// Run a command while this process leads the election NAME
    #[command(help_template = SUBCOMMAND_HELP, after_help = ELECT_HELP)]
    Elect(ElectArgs),
    /// Who leads the election NAME; with --watch, every new leader until Ctrl-C
    #[command(help_template = SUBCOMMAND_HELP, after_help = LEADER_HELP)]
    Leader {
        /// Print every new leader as it comes, until Ctrl-C
        #[arg(long)]
        watch: bool,
        /// The election's name
        #[arg(value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
        name: String,
    },
}

/// `elect`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ElectArgs {
    /// What this leader tells the others (`redlatch leader NAME` prints it) [default: the
    /// host name and process id]
    #[arg(long, value_name = "V")]
    pub value: Option<String>,
    /// When CMD ends (or leadership is lost and CMD stopped), campaign again and run it
    /// again, until a signal
    #[arg(long)]
    pub again: bool,
    /// Give up if not leading within DURATION (0: try once); by default, wait as long as it
    /// takes
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,
    /// The lease that the watchdog renews every third of [default: 30s]: a leader that
    /// dies is replaced within it
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub watchdog_timeout: Option<Duration>,
    /// From SIGTERM to SIGKILL when leadership is lost [default: 5s]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub grace: Option<Duration>,
    /// When leadership is lost: stop CMD, or let it run on
    #[arg(long, value_name = "stop|ignore", default_value = "stop")]
    pub on_lost: OnLost,
    /// Do not say on stderr who leads while waiting
    #[arg(short, long)]
    pub quiet: bool,
    /// The election's name
    #[arg(value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    pub name: String,
    /// The command and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

/// `lock`'s arguments: `run`'s, without a command.
#[derive(clap::Args, Debug)]
pub struct LockArgs {
    /// A fair lock: waiters get it in the order they came
    #[arg(long, conflicts_with = "fenced")]
    pub fair: bool,
    /// A fenced lock: the hold's fencing token is printed
    #[arg(long)]
    pub fenced: bool,
    /// Give up if the lock is not had within DURATION (0: try once); by default, wait as
    /// long as it takes
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,
    /// Hold the lock for DURATION at most, not renewed: redlatch exits (123) when it runs out
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = positive_duration,
        conflicts_with = "watchdog_timeout"
    )]
    pub lease: Option<Duration>,
    /// The lease that the watchdog renews every third of [default: 30s]
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub watchdog_timeout: Option<Duration>,
    /// Do not say on stderr who holds the lock while waiting for it
    #[arg(short, long)]
    pub quiet: bool,
    /// The lock's name
    #[arg(value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    pub name: String,
}

/// `run`'s arguments, one-to-one with the table the hand-written parser had.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// A fair lock: waiters get it in the order they came
    #[arg(long, conflicts_with_all = ["fenced", "permits"])]
    pub fair: bool,
    /// A fenced lock: each hold has a fencing token ($REDLATCH_TOKEN)
    #[arg(long, conflicts_with = "permits")]
    pub fenced: bool,
    /// One of the N permits of the permit-expirable semaphore NAME instead of a lock: at
    /// most N commands at once, on all machines. The first run sets the semaphore to N
    /// permits (it keeps them); a semaphore with another number of permits is refused (exit
    /// 125). The permit's lease is the watchdog timeout, renewed while CMD runs
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub permits: Option<u32>,
    /// Give up if the lock is not had within DURATION (0: try once); by default, wait as
    /// long as it takes
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,
    /// Hold the lock for DURATION at most, not renewed: CMD is stopped when it runs out
    /// (locks only)
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = positive_duration,
        conflicts_with_all = ["permits", "watchdog_timeout"]
    )]
    pub lease: Option<Duration>,
    /// The lease that the watchdog renews every third of [default: 30s]
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub watchdog_timeout: Option<Duration>,
    /// From SIGTERM to SIGKILL when the lock is lost [default: 5s]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub grace: Option<Duration>,
    /// When the lock is lost: stop CMD, or let it run on without the lock
    #[arg(long, value_name = "stop|ignore", default_value = "stop")]
    pub on_lost: OnLost,
    /// Do not say on stderr who holds the lock while waiting for it
    #[arg(short, long)]
    pub quiet: bool,
    /// The lock's (or the semaphore's) name
    #[arg(value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    pub name: String,
    /// The command and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

/// What `run` does with its command when the lock is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// SIGTERM, then SIGKILL after the grace period.
    Stop,
    /// Nothing: it runs on, and redlatch says so.
    Ignore,
}

/// Every DURATION of the command line: as humantime writes it (`250ms`, `30s`, `1m30s`,
/// `2h`, `1d`), a decimal number of one unit (`1.5s`, `0.5m`: humantime takes whole numbers
/// only), or a bare number of seconds, decimals too (`30`, `1.5`); at most a year.
fn duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| {
        format!("`{text}` is not a duration ({why}; such as 250ms, 1.5s, 30s, 1m30s, 10m, 2h)")
    };
    let text = text.trim();
    let bare = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let parsed = if bare {
        Some(decimal(&format!("{text}s")).ok_or_else(|| bad("a number of seconds"))?)
    } else if text.contains('.') {
        Some(decimal(text).ok_or_else(|| bad("a decimal takes one unit: ms, s, m or h"))?)
    } else {
        match humantime::parse_duration(text) {
            Ok(d) => Some(d),
            Err(humantime::DurationError::NumberOverflow) => None,
            Err(e) => return Err(bad(&e.to_string())),
        }
    };
    match parsed {
        Some(d) if d <= redlatch::MAX_DURATION => Ok(d),
        _ => Err(format!("`{text}` is more than a year")),
    }
}

/// `1.5s`, `0.25m`, `2.5h`, `0.5ms`: a decimal number and one unit.
fn decimal(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let unit_secs = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let number: f64 = number.parse().ok()?;
    // More than a year comes out as one, for the caller's check to refuse.
    let secs = (number * unit_secs).min(redlatch::MAX_DURATION.as_secs_f64() * 2.0);
    Duration::try_from_secs_f64(secs).ok()
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        d if d.is_zero() => Err("a lease must not be zero".to_owned()),
        d => Ok(d),
    }
}

fn positive_interval(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        d if d.is_zero() => Err("the interval must not be zero".to_owned()),
        d => Ok(d),
    }
}

fn non_empty_pattern(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("PATTERN must not be empty (`*` matches all)".to_owned());
    }
    Ok(text.to_owned())
}
