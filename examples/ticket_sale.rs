//! Ticket sale: several processes, each with several threads, sell 100 tickets kept in one
//! Redis counter. Every sale is a read-modify-write (GET the count, work a little, SET it
//! minus one), so it is only correct under a lock that spans threads *and* processes.
//!
//! ```text
//! cargo run --example ticket_sale                      # 3 processes x 4 threads, locked: OK
//! cargo run --example ticket_sale -- --no-lock         # same without the lock: oversold
//! cargo run --example ticket_sale -- --fair            # a fair lock: sales spread evenly
//! cargo run --example ticket_sale -- --processes 5 --threads 8
//! REDIS_URL=redis://host:6379/ cargo run --example ticket_sale
//! ```
//!
//! Redis: `REDIS_URL`, else `redis://127.0.0.1:6379/`. When nothing answers there, a throwaway
//! `redis-server` (from `REDIS_SERVER_BIN` or `PATH`) is started on a free port and stopped at
//! the end. Keys carry the parent's pid, so runs never interfere, and are deleted at the end.
//!
//! The parent process sets the counter to 100 and re-runs its own executable with a hidden
//! `--worker` argument N times. Each worker opens one `redlatch::Client` and runs M threads;
//! each sale records `process:thread:ticket` (ticket = count read) in a Redis list. The parent
//! then checks: 100 sales, counter at 0, every ticket number 1..=100 sold exactly once.

use std::collections::BTreeMap;
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};
use std::{env, thread};

use common::Res;
use redis::Commands;

mod common;

const TICKETS: i64 = 100;
const USAGE: &str = "usage: ticket_sale [--processes N] [--threads N] [--no-lock | --fair] [--help]
  --processes N  worker processes (default 3)
  --threads N    threads per process (default 4)
  --no-lock      sell without the lock, to show the oversell it prevents
  --fair         sell under a fair lock: threads take turns in arrival order
env: REDIS_URL (default redis://127.0.0.1:6379/), REDIS_SERVER_BIN (default: redis-server on PATH)";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = if args.first().map(String::as_str) == Some("--worker") {
        worker(&args[1..]).map(|()| ExitCode::SUCCESS)
    } else {
        parent(&args)
    };
    result.unwrap_or_else(|e| {
        eprintln!("ticket_sale: {e}");
        ExitCode::FAILURE
    })
}

/// One worker process: `--worker <url> <key prefix> <process no> <threads> <lock|fair|no-lock>`.
fn worker(args: &[String]) -> Res<()> {
    let [url, prefix, process, threads, mode] = args else {
        return Err("bad --worker arguments".into());
    };
    let threads: usize = threads.parse()?;
    let use_lock = mode != "no-lock";
    let redis = redis::Client::open(url.as_str())?;
    let locks = redlatch::Client::open(url)?; // one client per process, shared by its threads
    let lock = if mode == "fair" {
        locks.fair_lock(format!("{prefix}:lock"))
    } else {
        locks.lock(format!("{prefix}:lock"))
    };
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (redis, lock, prefix, process) =
                (redis.clone(), lock.clone(), prefix.clone(), process.clone());
            thread::spawn(move || -> Res<()> {
                let mut con = redis.get_connection()?;
                loop {
                    let guard = if use_lock { Some(lock.lock()?) } else { None };
                    let remaining: i64 = con.get(format!("{prefix}:tickets"))?;
                    if remaining <= 0 {
                        break; // sold out (the guard drops here and releases the lock)
                    }
                    thread::sleep(Duration::from_millis(1)); // "payment": widens the race
                    let _: () = con.set(format!("{prefix}:tickets"), remaining - 1)?;
                    let _: () = con.rpush(
                        format!("{prefix}:sold"),
                        format!("{process}:{t}:{remaining}"),
                    )?;
                    drop(guard); // release before the next customer
                    thread::sleep(Duration::from_micros(500)); // print the ticket, unlocked
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "worker thread panicked")??;
    }
    Ok(())
}

fn parent(args: &[String]) -> Res<ExitCode> {
    let (mut processes, mut threads, mut mode) = (3usize, 4usize, "lock");
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut count = |name: &str| -> Res<usize> {
            match it.next().and_then(|v| v.parse().ok()) {
                Some(n) if n > 0 => Ok(n),
                _ => Err(format!("{name} needs a positive number\n{USAGE}").into()),
            }
        };
        match arg.as_str() {
            "--processes" => processes = count("--processes")?,
            "--threads" => threads = count("--threads")?,
            "--no-lock" => mode = "no-lock",
            "--fair" => mode = "fair",
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }

    let Some((url, _server)) = common::redis("ticket_sale") else {
        return Ok(ExitCode::FAILURE);
    }; // `_server` (a throwaway one, if started) is stopped at the end of this function

    let prefix = format!("ticket_sale:{}", std::process::id());
    let (tickets, sold) = (format!("{prefix}:tickets"), format!("{prefix}:sold"));
    let mut con = redis::Client::open(url.as_str())?.get_connection()?;
    let _: () = con.set(&tickets, TICKETS)?;
    let _: () = con.del(&sold)?;
    println!(
        "selling {TICKETS} tickets: {processes} processes x {threads} threads, {mode}, Redis {url}"
    );

    let start = Instant::now();
    let exe = env::current_exe()?;
    let children: Vec<Child> = (1..=processes)
        .map(|p| {
            Command::new(&exe)
                .args([
                    "--worker",
                    &url,
                    &prefix,
                    &p.to_string(),
                    &threads.to_string(),
                    mode,
                ])
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut failed = 0;
    for mut child in children {
        failed += usize::from(!child.wait()?.success());
    }
    let elapsed = start.elapsed();

    let records: Vec<String> = con.lrange(&sold, 0, -1)?;
    let remaining: i64 = con.get(&tickets)?;
    // Clean up: our keys, plus the lock's short-lived unlock markers (they would expire anyway).
    let mut keys = con
        .scan_match::<_, String>(format!("redisson_unlock_latch:{{{prefix}:lock}}:*"))?
        .collect::<Result<Vec<String>, _>>()?;
    keys.extend([tickets, sold, format!("{prefix}:lock")]);
    let _: () = con.del(&keys)?;
    if failed > 0 {
        return Err(format!("{failed} worker process(es) failed").into());
    }

    // Records are "process:thread:ticket"; count sales per process and per ticket number.
    let (mut per_process, mut per_ticket) = (BTreeMap::new(), BTreeMap::new());
    for record in &records {
        let mut parts = record.split(':');
        *per_process.entry(parts.next().unwrap_or("?")).or_insert(0) += 1;
        let ticket = parts
            .nth(1)
            .and_then(|n| n.parse::<i64>().ok())
            .unwrap_or(-1);
        *per_ticket.entry(ticket).or_insert(0) += 1;
    }
    for (process, n) in &per_process {
        println!("  process {process}: {n:>3} sales");
    }
    let total = records.len();
    let sold_twice = per_ticket.values().filter(|&&n| n > 1).count();
    println!("  total:     {total:>3} sales in {elapsed:.2?}, {remaining} left");

    let correct =
        total == TICKETS as usize && remaining == 0 && per_ticket.keys().copied().eq(1..=TICKETS);
    if correct {
        println!("OK: {TICKETS} tickets sold, none oversold");
    } else {
        let twice = format!("{sold_twice} seats sold more than once");
        println!("OVERSOLD: sold {total} tickets for {TICKETS} seats ({twice})");
    }
    Ok(match (mode != "no-lock", correct) {
        (true, true) => ExitCode::SUCCESS,
        (true, false) => ExitCode::FAILURE,
        (false, false) => {
            println!("(expected: without the lock, concurrent GET/SET sell the same seat twice)");
            ExitCode::SUCCESS
        }
        (false, true) => {
            println!("no oversell this time: the race was not hit; try more --threads");
            ExitCode::FAILURE
        }
    })
}
