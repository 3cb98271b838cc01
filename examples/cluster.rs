//! Ticket sales on a Redis Cluster: three events, each with its own fenced lock and stock,
//! whose names hash to slots on different masters; four threads per event sell its 50
//! tickets. Each sale reads the stock, works a little, and writes it back minus one through a
//! `FencedResource`, so the lock's fencing token guards every write.
//!
//! ```text
//! cargo run --example cluster                                    # starts its own cluster
//! REDLATCH_CLUSTER=redis://10.0.0.1:7000,redis://10.0.0.2:7000 cargo run --example cluster
//! ```
//!
//! Without `REDLATCH_CLUSTER`, it starts three `redis-server --cluster-enabled yes` processes on
//! free loopback ports (the binary from `REDIS_SERVER_BIN` or `PATH`; `redis-cli` from `PATH`),
//! joins them with `redis-cli --cluster create`, and kills them at the end.

use std::error::Error;
use std::net::TcpListener;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use std::{env, fs, thread};

type Res<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const EVENTS: usize = 3;
const TICKETS: u32 = 50;
const THREADS: usize = 4;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cluster: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Res<()> {
    let (urls, _servers) = match env::var("REDLATCH_CLUSTER") {
        Ok(list) => (
            list.split(',').map(str::to_owned).collect(),
            Servers(Vec::new()),
        ),
        Err(_) => start_cluster()?,
    };
    println!("cluster nodes: {}", urls.join(", "));
    let client = redlatch::Client::new(redlatch::Config::cluster(urls).build()?)?;
    let run_id = std::process::id();
    let events: Vec<String> = (0..EVENTS).map(|i| format!("event-{run_id}-{i}")).collect();
    for event in &events {
        let lock = client.fenced_lock(event);
        let guard = lock.lock()?;
        client
            .fenced_resource(format!("{event}:stock"))
            .write(&guard, TICKETS.to_string())?;
    }
    let started = Instant::now();
    let sold: Vec<u32> = thread::scope(|scope| {
        let handles: Vec<_> = events
            .iter()
            .flat_map(|event| (0..THREADS).map(move |_| event))
            .map(|event| {
                let client = client.clone();
                scope.spawn(move || sell(&client, event))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("seller panicked"))
            .collect::<Res<Vec<u32>>>()
    })?;
    let total: u32 = sold.iter().sum();
    println!(
        "sold {total} tickets ({} events x {TICKETS}) in {:?}",
        EVENTS,
        started.elapsed()
    );
    for event in &events {
        let left = client.fenced_resource(format!("{event}:stock")).read()?;
        let left = String::from_utf8(left.unwrap_or_default())?;
        println!("  {event}: {left} left");
        let lock = client.fenced_lock(event);
        let guard = lock.lock()?;
        client
            .fenced_resource(format!("{event}:stock"))
            .delete(&guard)?;
        drop(guard);
    }
    if total != EVENTS as u32 * TICKETS {
        return Err(format!("sold {total}, expected {}", EVENTS as u32 * TICKETS).into());
    }
    println!("OK: every ticket sold exactly once");
    Ok(())
}

/// Sells tickets of `event` until none is left; returns how many this thread sold.
fn sell(client: &redlatch::Client, event: &str) -> Res<u32> {
    let lock = client.fenced_lock(event);
    let stock = client.fenced_resource(format!("{event}:stock"));
    let mut sold = 0;
    loop {
        let guard = lock.lock()?;
        let left: u32 = String::from_utf8(stock.read()?.unwrap_or_default())?.parse()?;
        if left == 0 {
            return Ok(sold);
        }
        thread::sleep(Duration::from_micros(200)); // the work of a sale
        stock.write(&guard, (left - 1).to_string())?;
        sold += 1;
    }
}

/// The throwaway cluster's processes, killed on drop.
struct Servers(Vec<(Child, std::path::PathBuf)>);

impl Drop for Servers {
    fn drop(&mut self) {
        for (child, dir) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
            let _ = fs::remove_dir_all(dir);
        }
    }
}

fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts three cluster-enabled servers and joins them into a cluster.
fn start_cluster() -> Res<(Vec<String>, Servers)> {
    let bin = env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
    let mut servers = Servers(Vec::new());
    let mut addrs = Vec::new();
    for _ in 0..3 {
        let (port, bus) = (free_port()?, free_port()?);
        let dir = env::temp_dir().join(format!(
            "redlatch-cluster-example-{}-{port}",
            std::process::id()
        ));
        fs::create_dir_all(&dir)?;
        let child = Command::new(&bin)
            .args([
                "--port",
                &port.to_string(),
                "--cluster-port",
                &bus.to_string(),
            ])
            .args([
                "--cluster-enabled",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--bind", "127.0.0.1", "--cluster-config-file", "nodes.conf"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start {bin} ({e}): install redis-server or set REDLATCH_CLUSTER")
            })?;
        servers.0.push((child, dir));
        addrs.push(format!("127.0.0.1:{port}"));
    }
    for addr in &addrs {
        wait_for(addr, "PING", "PONG")?;
    }
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .arg("--cluster-yes")
        .output()
        .map_err(|e| format!("cannot run redis-cli ({e}): install redis-tools"))?;
    if !String::from_utf8_lossy(&out.stdout).contains("All 16384 slots covered") {
        return Err(format!(
            "redis-cli --cluster create failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
        .into());
    }
    for addr in &addrs {
        wait_for(addr, "CLUSTER INFO", "cluster_state:ok")?;
    }
    Ok((
        addrs.iter().map(|a| format!("redis://{a}/")).collect(),
        servers,
    ))
}

/// Polls `command` on `addr` (via redis-cli) until its output contains `expect`.
fn wait_for(addr: &str, command: &str, expect: &str) -> Res<()> {
    let (host, port) = addr.split_once(':').ok_or("bad address")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let out = Command::new("redis-cli")
            .args(["-h", host, "-p", port])
            .args(command.split(' '))
            .output();
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(expect)) {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{addr} did not answer {command} with {expect} in time").into())
}
