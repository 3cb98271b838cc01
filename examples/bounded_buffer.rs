//! Bounded buffer across processes: producers and consumers, in processes of their own, share
//! a Redis list of at most 4 items under one lock, with two conditions of that lock:
//! `not_full` (producers wait on it) and `not_empty` (consumers wait on it). Nobody polls:
//! a producer that finds the buffer full waits until a consumer notifies it, and the other
//! way round, as `java.util.concurrent`'s bounded buffer example does inside one JVM.
//!
//! ```text
//! cargo run --example bounded_buffer                            # 2 producers, 2 consumers
//! cargo run --example bounded_buffer -- --producers 3 --consumers 1 --items 90
//! REDIS_URL=redis://host:6379/ cargo run --example bounded_buffer
//! ```
//!
//! Redis: `REDIS_URL`, else `redis://127.0.0.1:6379/`, else a throwaway `redis-server` (as in
//! `ticket_sale`). The parent re-runs its own executable with a hidden `--producer` or
//! `--consumer` argument per process, then checks that every item was consumed exactly once
//! and that the buffer never held more than its capacity.

use std::collections::BTreeMap;
use std::env;
use std::process::{Child, Command, ExitCode};
use std::time::Instant;

use common::Res;
use redis::Commands;

mod common;

const CAPACITY: usize = 4;
const USAGE: &str = "usage: bounded_buffer [--producers N] [--consumers N] [--items N] [--help]
  --producers N  producer processes (default 2)
  --consumers N  consumer processes (default 2)
  --items N      items each producer makes (default 40)
env: REDIS_URL (default redis://127.0.0.1:6379/), REDIS_SERVER_BIN (default: redis-server on PATH)";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--producer") => producer(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some("--consumer") => consumer(&args[1..]).map(|()| ExitCode::SUCCESS),
        _ => parent(&args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("bounded_buffer: {e}");
        ExitCode::FAILURE
    })
}

/// `--producer <url> <prefix> <process no> <items>`: puts `items` items into the buffer.
fn producer(args: &[String]) -> Res<()> {
    let [url, prefix, process, items] = args else {
        return Err("bad --producer arguments".into());
    };
    let mut con = redis::Client::open(url.as_str())?.get_connection()?;
    let client = redlatch::Client::open(url)?;
    let lock = client.lock(format!("{prefix}:lock"));
    let (not_full, not_empty) = (lock.condition("not_full"), lock.condition("not_empty"));
    let buffer = format!("{prefix}:buffer");
    for i in 0..items.parse::<usize>()? {
        let mut guard = lock.lock()?;
        while con.llen::<_, usize>(&buffer)? >= CAPACITY {
            not_full.wait(&mut guard)?; // releases the lock while it waits
        }
        let len: usize = con.rpush(&buffer, format!("{process}:{i}"))?;
        let _: () = con.rpush(format!("{prefix}:lengths"), len)?;
        not_empty.notify_one()?;
    }
    Ok(())
}

/// `--consumer <url> <prefix> <total>`: takes items until `total` have been taken by all.
fn consumer(args: &[String]) -> Res<()> {
    let [url, prefix, total] = args else {
        return Err("bad --consumer arguments".into());
    };
    let total: usize = total.parse()?;
    let mut con = redis::Client::open(url.as_str())?.get_connection()?;
    let client = redlatch::Client::open(url)?;
    let lock = client.lock(format!("{prefix}:lock"));
    let (not_full, not_empty) = (lock.condition("not_full"), lock.condition("not_empty"));
    let (buffer, taken) = (format!("{prefix}:buffer"), format!("{prefix}:taken"));
    loop {
        let mut guard = lock.lock()?;
        let item: String = loop {
            if let Some(item) = con.lpop(&buffer, None)? {
                break item;
            }
            if con.llen::<_, usize>(&taken)? >= total {
                return Ok(()); // all taken: done
            }
            not_empty.wait(&mut guard)?;
        };
        let n: usize = con.rpush(&taken, item)?;
        not_full.notify_one()?;
        if n == total {
            // The last item: wake the other consumers to see that they are done.
            not_empty.notify_all()?;
        }
    }
}

fn parent(args: &[String]) -> Res<ExitCode> {
    let (mut producers, mut consumers, mut items) = (2usize, 2usize, 40usize);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut count = |name: &str| -> Res<usize> {
            match it.next().and_then(|v| v.parse().ok()) {
                Some(n) if n > 0 => Ok(n),
                _ => Err(format!("{name} needs a positive number\n{USAGE}").into()),
            }
        };
        match arg.as_str() {
            "--producers" => producers = count("--producers")?,
            "--consumers" => consumers = count("--consumers")?,
            "--items" => items = count("--items")?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    let Some((url, _server)) = common::redis("bounded_buffer") else {
        return Ok(ExitCode::FAILURE);
    };
    let prefix = format!("bounded_buffer:{}", std::process::id());
    let total = producers * items;
    println!(
        "{producers} producer and {consumers} consumer processes, {total} items through a \
         buffer of {CAPACITY}, Redis {url}"
    );
    let start = Instant::now();
    let exe = env::current_exe()?;
    let mut children: Vec<Child> = Vec::new();
    for _ in 0..consumers {
        let args = ["--consumer", &url, &prefix, &total.to_string()];
        children.push(Command::new(&exe).args(args).spawn()?);
    }
    for p in 1..=producers {
        let args = [
            "--producer",
            &url,
            &prefix,
            &p.to_string(),
            &items.to_string(),
        ];
        children.push(Command::new(&exe).args(args).spawn()?);
    }
    let mut failed = 0;
    for mut child in children {
        failed += usize::from(!child.wait()?.success());
    }
    let elapsed = start.elapsed();

    let mut con = redis::Client::open(url.as_str())?.get_connection()?;
    let taken: Vec<String> = con.lrange(format!("{prefix}:taken"), 0, -1)?;
    let lengths: Vec<usize> = con.lrange(format!("{prefix}:lengths"), 0, -1)?;
    let keys = ["buffer", "taken", "lengths", "lock"].map(|k| format!("{prefix}:{k}"));
    let _: () = con.del(&keys)?;
    if failed > 0 {
        return Err(format!("{failed} process(es) failed").into());
    }
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for item in &taken {
        *times.entry(item.as_str()).or_default() += 1;
    }
    let twice = times.values().filter(|&&n| n > 1).count();
    let fullest = lengths.iter().copied().max().unwrap_or(0);
    println!(
        "  {} items taken in {elapsed:.2?} ({} distinct, {twice} taken twice); the buffer \
         held at most {fullest}",
        taken.len(),
        times.len()
    );
    if taken.len() == total && times.len() == total && fullest <= CAPACITY {
        println!("OK: every item delivered once, the buffer never over {CAPACITY}");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("FAILED: items lost, doubled, or the buffer overflowed");
        Ok(ExitCode::FAILURE)
    }
}
