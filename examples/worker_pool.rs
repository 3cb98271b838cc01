//! A worker pool: 8 threads take jobs from a queue. Each job runs under its own lock (a job
//! that two pools both picked up runs once), the slow "encode" step of at most 3 jobs at a
//! time across every process (a 3-permit semaphore), and each finished job appends a line to a
//! shared report under a fair lock (writers take turns in arrival order).
//!
//! ```text
//! cargo run --example worker_pool                    # 8 threads, 40 jobs
//! cargo run --example worker_pool -- --jobs 100
//! REDIS_URL=redis://host:6379/ cargo run --example worker_pool
//! ```
//!
//! Redis: `REDIS_URL`, else `redis://127.0.0.1:6379/`, else a throwaway `redis-server`. Keys
//! carry the process id and are deleted at the end. At the end the pool checks what the locks
//! promise: every job done once, never more than 3 encodes at once, all 3 permits back.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::Res;
use redis::Commands;

mod common;

const WORKERS: usize = 8;
const PERMITS: u32 = 3;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("worker_pool: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Res<bool> {
    let jobs: u32 = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => 40,
        [flag, n] if flag == "--jobs" => n.parse()?,
        _ => return Err("usage: worker_pool [--jobs N]".into()),
    };
    let Some((url, _server)) = common::redis("worker_pool") else {
        return Ok(false);
    };
    let prefix = format!("worker_pool:{}", std::process::id());

    // One client per process, shared by every thread (it is cheap to clone).
    let client = redlatch::Client::open(&url)?;
    let encoders = client.semaphore(format!("{prefix}:encoders"));
    encoders.try_set_permits(PERMITS)?; // only the first process sets the count
    let report = client.fair_lock(format!("{prefix}:report"));

    let (tx, rx) = mpsc::channel::<u32>();
    let rx = Arc::new(Mutex::new(rx));
    for job in 0..jobs {
        tx.send(job)?;
    }
    drop(tx); // the workers stop when the queue is empty

    // The most encodes seen at once (each reads the count across all processes).
    let most = Arc::new(AtomicI64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (client, encoders, report, rx) = (
                client.clone(),
                encoders.clone(),
                report.clone(),
                Arc::clone(&rx),
            );
            let (url, prefix, most) = (url.clone(), prefix.clone(), Arc::clone(&most));
            thread::spawn(move || -> Res<u32> {
                let mut redis = redis::Client::open(url.as_str())?.get_connection()?;
                let mut done = 0;
                loop {
                    let Ok(job) = rx.lock().unwrap().recv() else {
                        return Ok(done); // the queue is empty
                    };
                    // The job's own lock: another pool that picked up the same job waits
                    // up to 5 s for it, then skips it.
                    let ran = client.lock(format!("{prefix}:job:{job}")).try_with_for(
                        Duration::from_secs(5),
                        || -> Res<()> {
                            // The slow step: at most 3 at once, across every process. The
                            // permit goes back when `_permit` drops, also on an error.
                            {
                                let _permit = encoders.acquire(1)?;
                                let now: i64 = redis.incr(format!("{prefix}:encoding"), 1)?;
                                let _: i64 = redis.incr(format!("{prefix}:ran:{job}"), 1)?;
                                most.fetch_max(now, Ordering::Relaxed);
                                thread::sleep(Duration::from_millis(20)); // "encode"
                                let _: i64 = redis.decr(format!("{prefix}:encoding"), 1)?;
                            }
                            // The report: one writer at a time, in arrival order.
                            report.with(|| -> Res<()> {
                                let line = format!("job {job:>3} by worker {w}");
                                let _: i64 = redis.rpush(format!("{prefix}:lines"), line)?;
                                Ok(())
                            })
                        },
                    )?;
                    if ran.is_some() {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    let mut done = 0;
    for (w, worker) in workers.into_iter().enumerate() {
        let n = worker.join().map_err(|_| "a worker panicked")??;
        println!("  worker {w}: {n:>3} jobs");
        done += n;
    }

    // What the locks promise, checked in Redis.
    let mut redis = redis::Client::open(url.as_str())?.get_connection()?;
    let most = most.load(Ordering::Relaxed);
    let lines: Vec<String> = redis.lrange(format!("{prefix}:lines"), 0, -1)?;
    let mut once = true;
    for job in 0..jobs {
        let ran: i64 = redis.get(format!("{prefix}:ran:{job}")).unwrap_or(0);
        once &= ran == 1;
    }
    let permits = encoders.available_permits()?;
    println!(
        "  {done} jobs in {:.2?}; at most {most} encoding at once; {} report lines; {permits} \
         permits free",
        started.elapsed(),
        lines.len()
    );
    encoders.delete()?; // the count and what the library keeps beside it
    let keys: Vec<String> = redis.keys(format!("{prefix}:*"))?;
    if !keys.is_empty() {
        let _: i64 = redis.del(keys)?;
    }
    let ok = done == jobs
        && once
        && most <= i64::from(PERMITS)
        && lines.len() == jobs as usize
        && permits == i64::from(PERMITS);
    if ok {
        println!("OK: every job once, at most {PERMITS} encodes at a time, every permit back");
    } else {
        println!("FAILED: a lock did not keep its promise");
    }
    Ok(ok)
}
