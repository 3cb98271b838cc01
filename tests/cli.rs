//! The `redlatch` binary against real servers: `inspect` of every kind (human and `--json`,
//! parsed back), `list` on one server and on a 3-master cluster, `force-unlock` (waking a
//! blocked waiter; refusing without a terminal; refusing non-locks), `watch --json` events,
//! Sentinel addresses, and the exit codes and messages of bad URLs, unreachable servers and
//! unknown names.

mod support;

use support::forget::ForgetAll;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use support::cluster::RedisCluster;
use support::sentinel::{SentinelConfig, SentinelGroup};
use support::{client, free_port, wait_until, RedisServer};

/// What a run of the binary gave.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlatch"));
    cmd.args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs the binary to completion (killed after 30 s: a hang fails the test).
fn run_cmd(mut cmd: Command) -> Run {
    let mut child = cmd.spawn().expect("run redlatch");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("redlatch did not exit within 30 s");
        }
        thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn run(args: &[&str]) -> Run {
    run_cmd(command(args))
}

/// `redlatch --url <server> <args>`, which must succeed.
fn ok(server: &RedisServer, args: &[&str]) -> String {
    let url = server.url();
    let mut all = vec!["--url", url.as_str()];
    all.extend_from_slice(args);
    let r = run(&all);
    assert_eq!(r.code, 0, "redlatch {all:?} failed: {}", r.stderr);
    r.stdout
}

/// `(client id, thread number)` of the calling thread in `client`.
fn me(client: &Client) -> (String, u64) {
    let owner = client.owner_id();
    let (id, thread) = owner.rsplit_once(':').unwrap();
    (id.to_owned(), thread.parse().unwrap())
}

/// A minimal JSON reader, enough to check the tool's output parses and holds what it says.
mod json {
    #[derive(Debug, Clone, PartialEq)]
    pub enum J {
        Null,
        Bool(bool),
        Num(f64),
        Str(String),
        Arr(Vec<J>),
        Obj(Vec<(String, J)>),
    }

    impl J {
        pub fn get(&self, key: &str) -> &J {
            match self {
                J::Obj(fields) => fields
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v)
                    .unwrap_or_else(|| panic!("no key {key} in {self:?}")),
                _ => panic!("not an object: {self:?}"),
            }
        }
        pub fn at(&self, i: usize) -> &J {
            match self {
                J::Arr(items) => &items[i],
                _ => panic!("not an array: {self:?}"),
            }
        }
        pub fn len(&self) -> usize {
            match self {
                J::Arr(items) => items.len(),
                _ => panic!("not an array: {self:?}"),
            }
        }
        pub fn str(&self) -> &str {
            match self {
                J::Str(s) => s,
                _ => panic!("not a string: {self:?}"),
            }
        }
        pub fn num(&self) -> f64 {
            match self {
                J::Num(n) => *n,
                _ => panic!("not a number: {self:?}"),
            }
        }
    }

    pub fn parse(text: &str) -> J {
        let chars: Vec<char> = text.trim().chars().collect();
        let mut pos = 0;
        let value = value(&chars, &mut pos);
        assert_eq!(pos, chars.len(), "trailing text in {text}");
        value
    }

    fn skip(c: &[char], p: &mut usize) {
        while *p < c.len() && c[*p].is_whitespace() {
            *p += 1;
        }
    }

    fn expect(c: &[char], p: &mut usize, s: &str) {
        for ch in s.chars() {
            assert_eq!(c.get(*p), Some(&ch), "bad JSON at {p}");
            *p += 1;
        }
    }

    fn value(c: &[char], p: &mut usize) -> J {
        skip(c, p);
        let v = match c[*p] {
            'n' => {
                expect(c, p, "null");
                J::Null
            }
            't' => {
                expect(c, p, "true");
                J::Bool(true)
            }
            'f' => {
                expect(c, p, "false");
                J::Bool(false)
            }
            '"' => J::Str(string(c, p)),
            '[' => {
                *p += 1;
                let mut items = Vec::new();
                skip(c, p);
                if c[*p] == ']' {
                    *p += 1;
                } else {
                    loop {
                        items.push(value(c, p));
                        skip(c, p);
                        *p += 1;
                        match c[*p - 1] {
                            ',' => continue,
                            ']' => break,
                            other => panic!("bad JSON array: {other}"),
                        }
                    }
                }
                J::Arr(items)
            }
            '{' => {
                *p += 1;
                let mut fields = Vec::new();
                skip(c, p);
                if c[*p] == '}' {
                    *p += 1;
                } else {
                    loop {
                        skip(c, p);
                        let key = string(c, p);
                        skip(c, p);
                        expect(c, p, ":");
                        fields.push((key, value(c, p)));
                        skip(c, p);
                        *p += 1;
                        match c[*p - 1] {
                            ',' => continue,
                            '}' => break,
                            other => panic!("bad JSON object: {other}"),
                        }
                    }
                }
                J::Obj(fields)
            }
            _ => {
                let start = *p;
                while *p < c.len() && matches!(c[*p], '-' | '+' | '.' | 'e' | 'E' | '0'..='9') {
                    *p += 1;
                }
                let text: String = c[start..*p].iter().collect();
                J::Num(
                    text.parse()
                        .unwrap_or_else(|_| panic!("bad JSON number {text}")),
                )
            }
        };
        skip(c, p);
        v
    }

    fn string(c: &[char], p: &mut usize) -> String {
        expect(c, p, "\"");
        let mut out = String::new();
        loop {
            let ch = c[*p];
            *p += 1;
            match ch {
                '"' => return out,
                '\\' => {
                    let esc = c[*p];
                    *p += 1;
                    match esc {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'u' => {
                            let hex: String = c[*p..*p + 4].iter().collect();
                            *p += 4;
                            out.push(
                                char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap(),
                            );
                        }
                        other => panic!("bad JSON escape \\{other}"),
                    }
                }
                ch if (ch as u32) < 0x20 => panic!("unescaped control character in a JSON string"),
                ch => out.push(ch),
            }
        }
    }
}

#[test]
fn inspect_reentrant_shows_owner_thread_hold_count_and_lease() {
    let server = RedisServer::new();
    let client = client(&server);
    let lock = client.lock("cli:reentrant");
    let _g1 = lock.lock().unwrap();
    let _g2 = lock.lock().unwrap();
    let (id, thread) = me(&client);

    let text = ok(&server, &["inspect", "cli:reentrant"]);
    assert!(text.contains("kind:    reentrant"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("no holder row for {id}:\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..3],
        [id.as_str(), &thread.to_string(), "2"],
        "{text}"
    );
    // Traced to its client's connections: named `redlatch:<client id>`, from this host.
    let name = format!("redlatch:{id}");
    assert_eq!(&cells[3..5], [name.as_str(), "at"], "{text}");
    assert!(cells[5].starts_with("127.0.0.1:"), "{text}");
    // Aligned: the header's columns start where the row's do.
    let header = text.lines().find(|l| l.starts_with("CLIENT ID")).unwrap();
    assert_eq!(
        header.find("THREAD"),
        row.find(&format!(" {thread} ")).map(|i| i + 1)
    );
    let lease = text.lines().find(|l| l.starts_with("lease:")).unwrap();
    assert!(
        lease.ends_with('s') && (lease.contains(" 29.") || lease.contains(" 30.0s")),
        "{lease}"
    );

    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:reentrant"]));
    assert_eq!(j.get("kind").str(), "reentrant");
    assert_eq!(j.get("name").str(), "cli:reentrant");
    let holder = j.get("holders").at(0);
    assert_eq!(holder.get("client_id").str(), id);
    assert_eq!(holder.get("thread").num(), thread as f64);
    assert_eq!(holder.get("holds").num(), 2.0);
    assert_eq!(holder.get("owner").str(), client.owner_id());
    let connections = holder.get("connections");
    assert!(connections.len() >= 1, "{connections:?}");
    for i in 0..connections.len() {
        assert_eq!(connections.at(i).get("name").str(), name);
        assert!(connections
            .at(i)
            .get("addr")
            .str()
            .starts_with("127.0.0.1:"));
    }
    let lease_ms = j.get("lease_ms").num();
    assert!((28_000.0..=30_000.0).contains(&lease_ms), "{lease_ms}");
}

#[test]
fn inspect_fair_lists_the_queue_in_order() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "cli:fair";
    let holder = client.fair_lock(name).lock().unwrap();
    let (owners, waiters) = support::queue_fair_waiters(&client, name, 2);

    let j = json::parse(&ok(&server, &["inspect", name, "--json"]));
    assert_eq!(j.get("kind").str(), "fair");
    let queue = j.get("queue");
    assert_eq!(queue.len(), 2);
    for (i, owner) in owners.iter().enumerate() {
        assert_eq!(queue.at(i).get("owner").str(), owner);
        // The position is the place in the array (the JSON is the library's serialization).
        assert!(queue.at(i).get("deadline_ms").num() > 60_000.0);
    }
    let text = ok(&server, &["inspect", name]);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "queue:")
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for (i, owner) in owners.iter().enumerate() {
        let (id, thread) = owner.rsplit_once(':').unwrap();
        let cells: Vec<&str> = rows[i].split_whitespace().collect();
        assert_eq!(&cells[..3], [&(i + 1).to_string(), id, thread], "{text}");
        // Each waiter traced to its client (their deadline column comes before).
        assert!(
            rows[i].contains(&format!("redlatch:{id} at 127.0.0.1:")),
            "{text}"
        );
    }
    holder.unlock().unwrap();
    support::join_within(waiters, Duration::from_secs(10), "fair waiters");
}

#[test]
fn inspect_lists_waiters_with_a_priority_highest_first() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "cli:priority";
    let holder = client.lock(name).lock().unwrap();
    let mut raw = server.conn();
    let mut waiters = Vec::new();
    for (i, p) in [1u32, 4].into_iter().enumerate() {
        let lock = client.lock(name).with_priority(p);
        waiters.push(std::thread::spawn(move || drop(lock.lock().unwrap())));
        assert!(support::wait_until(Duration::from_secs(5), || {
            redis::cmd("ZCARD")
                .arg("redlatch_priority:{cli:priority}")
                .query::<usize>(&mut raw)
                .unwrap()
                == i + 1
        }));
    }
    let j = json::parse(&ok(&server, &["inspect", name, "--json"]));
    let priorities = j.get("priorities");
    assert_eq!(priorities.len(), 2);
    let (first, second) = (priorities.at(0), priorities.at(1));
    assert!(first.get("effective").num() >= 4.0, "{first:?}");
    assert!(
        (1.0..4.0).contains(&second.get("effective").num()),
        "{second:?}"
    );
    assert!(first.get("place_ends_in_ms").num() <= 15_000.0);
    assert!(first.get("id").str().starts_with(client.id()));
    let text = ok(&server, &["inspect", name]);
    assert!(
        text.contains("waiters with a priority (highest effective priority first):"),
        "{text}"
    );
    holder.unlock().unwrap();
    support::join_within(waiters, Duration::from_secs(10), "waiters with a priority");
}

#[test]
fn inspect_read_write_semaphore_latch_and_fenced() {
    let server = RedisServer::new();
    let (a, b) = (client(&server), client(&server));
    let _ra = a.read_write_lock("cli:rw").read().lock().unwrap();
    let _rb = b.read_write_lock("cli:rw").read().lock().unwrap();
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:rw"]));
    assert_eq!(
        (j.get("kind").str(), j.get("mode").str()),
        ("read-write", "read")
    );
    assert_eq!(j.get("readers").len(), 2);
    let mut readers: Vec<String> = (0..2)
        .map(|i| j.get("readers").at(i).get("owner").str().to_owned())
        .collect();
    readers.sort();
    let mut expected = vec![a.owner_id(), b.owner_id()];
    expected.sort();
    assert_eq!(readers, expected);
    let text = ok(&server, &["inspect", "cli:rw"]);
    assert!(
        text.contains("mode:    read") && text.contains("readers:"),
        "{text}"
    );

    let sem = a.semaphore("cli:sem");
    sem.try_set_permits(4).unwrap();
    sem.acquire(1).forget_all().unwrap();
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:sem"]));
    assert_eq!(j.get("permits").num(), 3.0);
    // Ours: told by the generation beside the count.
    assert_eq!(j.get("kind").str(), "semaphore");
    // Redisson's (the count alone): told by its waiters.
    let _: () = redis::cmd("DEL")
        .arg("redlatch_semaphore:{cli:sem}")
        .query(&mut server.conn())
        .unwrap();
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:sem"]));
    assert_eq!(j.get("kind").str(), "semaphore-or-latch");
    let waiter = {
        let a = a.clone();
        thread::spawn(move || {
            a.semaphore("cli:sem")
                .try_acquire_for(5, Duration::from_secs(20))
                .forget_all()
        })
    };
    assert!(wait_until(Duration::from_secs(10), || {
        a.inspect("cli:sem").unwrap().unwrap().kind == redlatch::inspect::Kind::Semaphore
    }));
    let text = ok(&server, &["inspect", "cli:sem"]);
    assert!(
        text.contains("kind:    semaphore\n") && text.contains("permits: 3"),
        "{text}"
    );
    sem.add_permits(2).unwrap();
    assert!(waiter.join().unwrap().unwrap());

    let latch = a.count_down_latch("cli:latch");
    latch.try_set_count(5).unwrap();
    latch.count_down().unwrap();
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:latch"]));
    assert_eq!(j.get("count").num(), 4.0);

    let fenced = a.fenced_lock("cli:fenced");
    drop(fenced.lock().unwrap());
    let guard = fenced.lock().unwrap();
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:fenced"]));
    assert_eq!(j.get("kind").str(), "fenced");
    assert_eq!(j.get("token").num(), guard.token().unwrap() as f64);
    let text = ok(&server, &["inspect", "cli:fenced"]);
    assert!(
        text.contains(&format!("token:   {}", guard.token().unwrap())),
        "{text}"
    );
}

#[test]
fn inspect_and_list_show_a_rate_limiters_rate_what_is_left_and_when_more_comes_back() {
    let server = RedisServer::new();
    let (a, b) = (client(&server), client(&server));
    let api = a.rate_limiter("cli:rate");
    assert!(api
        .try_set_rate(redlatch::RateType::Overall, 5, Duration::from_secs(60))
        .unwrap());
    api.acquire(2).unwrap();
    let text = ok(&server, &["inspect", "cli:rate"]);
    for line in [
        "kind:    rate-limiter\n",
        "rate:    5 per 1m00s\n",
        "type:    overall",
        "left:    3 permits\n",
        "next:    in 5",
        "keys:    cli:rate {cli:rate}:value {cli:rate}:permits\n",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:rate"]));
    assert_eq!(j.get("kind").str(), "rate-limiter");
    let rate = j.get("rate");
    assert_eq!(rate.get("config").get("type").str(), "overall");
    assert_eq!(rate.get("config").get("rate").num(), 5.0);
    assert_eq!(rate.get("config").get("interval_ms").num(), 60_000.0);
    assert_eq!(rate.get("available").num(), 3.0);
    let back = rate.get("next_back_in_ms").num();
    assert!(back > 55_000.0 && back <= 60_000.0, "{back}");

    // Per client: each client's count, in a table; list groups every bucket under it.
    let per = "cli:per";
    let type_ = redlatch::RateType::PerClient;
    assert!(a
        .rate_limiter(per)
        .try_set_rate(type_, 4, Duration::from_secs(60))
        .unwrap());
    a.rate_limiter(per).acquire(1).unwrap();
    b.rate_limiter(per).acquire(3).unwrap();
    let text = ok(&server, &["inspect", per]);
    assert!(
        text.contains("type:    per client") && text.contains("clients:\n"),
        "{text}"
    );
    for (id, left) in [(a.id(), 3), (b.id(), 1)] {
        assert!(
            text.lines().any(
                |l| l.starts_with(id) && l.split_whitespace().nth(1) == Some(&left.to_string())
            ),
            "{id} with {left} left:\n{text}"
        );
    }
    let list = ok(&server, &["list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "header and the two limiters:\n{list}");
    assert!(
        lines[1].contains("rate-limiter")
            && lines[1].contains("4 per 1m00s per client, 2 client(s)"),
        "{list}"
    );
    assert!(
        lines[2].contains("rate-limiter") && lines[2].contains("5 per 1m00s, 3 left, next in"),
        "{list}"
    );
    let j = json::parse(&ok(&server, &["list", "--json"]));
    assert_eq!(j.len(), 2);
    assert_eq!(j.at(0).get("rate").get("clients").len(), 2);
    assert_eq!(j.at(0).get("keys").len(), 5);
}

#[test]
fn json_output_escapes_odd_names() {
    let server = RedisServer::new();
    let client = client(&server);
    let name = "odd \"quoted\" back\\slash\ttab\u{1}ctl é";
    let _g = client.lock(name).lock().unwrap();
    let out = ok(&server, &["inspect", "--json", name]);
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    assert_eq!(json::parse(&out).get("name").str(), name);
    let all = json::parse(&ok(&server, &["list", "--json"]));
    assert_eq!(all.len(), 1);
    assert_eq!(all.at(0).get("name").str(), name);
}

#[test]
fn waits_shows_a_recorded_wait_and_who_is_in_its_way_as_a_table_json_and_dot() {
    let server = RedisServer::new();
    let holder = client(&server);
    let _held = holder.lock("cli:waits").lock().unwrap();
    let config = Config::builder(server.url().as_str())
        .deadlock_check_after(Duration::from_millis(100))
        .build()
        .unwrap();
    let waiting = Client::new(config).unwrap();
    let (tx, owner) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let _own = waiting.lock("cli:waits:own").lock().unwrap();
        tx.send(waiting.owner_id()).unwrap();
        waiting
            .lock("cli:waits")
            .try_lock_for(Duration::from_secs(20))
            .map(|g| g.is_some())
    });
    let owner: String = owner.recv().unwrap();
    assert!(wait_until(Duration::from_secs(20), || ok(
        &server,
        &["waits"]
    )
    .contains(&owner)));
    let text = ok(&server, &["waits"]);
    let row = text.lines().find(|l| l.contains(&owner)).unwrap();
    assert!(
        row.contains("cli:waits") && row.contains("exclusive"),
        "{text}"
    );
    assert!(
        row.contains(&holder.owner_id()),
        "the holder in its way: {text}"
    );
    assert!(!row.contains("CYCLE"), "{text}");
    let graph = json::parse(&ok(&server, &["waits", "--json"]));
    let all = graph.get("waits");
    assert_eq!(all.len(), 1);
    assert_eq!(all.at(0).get("owner").str(), owner);
    assert_eq!(all.at(0).get("lock").str(), "cli:waits");
    assert_eq!(all.at(0).get("blocked_by").at(0).str(), holder.owner_id());
    assert!(all.at(0).get("waited_ms").num() >= 100.0);
    let dot = ok(&server, &["waits", "--dot"]);
    assert!(dot.starts_with("digraph waits {"), "{dot}");
    assert!(
        dot.contains(&format!("\"{owner}\" -> \"{}\"", holder.owner_id())),
        "{dot}"
    );
    drop(_held);
    assert!(waiter.join().unwrap().unwrap());
    let none = json::parse(&ok(&server, &["waits", "--json"]));
    assert_eq!(none.get("waits").len(), 0);
    assert_eq!(none.get("lock_order_warnings").len(), 0);

    // Two locks taken in both orders: a lock-order warning in every form.
    let config = Config::builder(server.url().as_str())
        .lock_order_checks(true)
        .build()
        .unwrap();
    let ordered = Client::new(config).unwrap();
    for (first, second) in [("cli:o1", "cli:o2"), ("cli:o2", "cli:o1")] {
        let ordered = ordered.clone();
        thread::spawn(move || {
            let _first = ordered.lock(first).lock().unwrap();
            drop(ordered.lock(second).lock().unwrap());
        })
        .join()
        .unwrap();
    }
    let text = ok(&server, &["waits"]);
    assert!(
        text.contains("LOCK ORDER  `cli:o1` and `cli:o2` are taken in both orders"),
        "{text}"
    );
    let graph = json::parse(&ok(&server, &["waits", "--json"]));
    let warnings = graph.get("lock_order_warnings");
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings.at(0).get("one").get("held").str(), "cli:o1");
    assert_eq!(warnings.at(0).get("other").get("held").str(), "cli:o2");
    let dot = ok(&server, &["waits", "--dot"]);
    assert!(
        dot.contains("\"cli:o2\" -> \"cli:o1\" [style=dashed"),
        "{dot}"
    );

    // A deadlock broken: kept, listed with who took part, and counted by top.
    let config = Config::builder(server.url().as_str())
        .client_name("cycler")
        .deadlock_check_after(Duration::from_millis(100))
        .build()
        .unwrap();
    let cycler = Client::new(config).unwrap();
    let both = Arc::new(std::sync::Barrier::new(2));
    let members: Vec<_> = [("cli:d1", "cli:d2"), ("cli:d2", "cli:d1")]
        .into_iter()
        .map(|(hold, want)| {
            let (cycler, both) = (cycler.clone(), Arc::clone(&both));
            let named = thread::Builder::new().name(format!("cycle-{hold}"));
            named
                .spawn(move || {
                    let _held = cycler.lock(hold).lock().unwrap();
                    both.wait();
                    let got = cycler.lock(want).try_lock_for(Duration::from_secs(20));
                    got.map(|g| g.is_some()).map_err(|e| e.is_deadlock())
                })
                .unwrap()
        })
        .collect();
    let ends: Vec<_> = members.into_iter().map(|m| m.join().unwrap()).collect();
    assert!(
        ends.contains(&Ok(true)) && ends.contains(&Err(true)),
        "{ends:?}"
    );
    let text = ok(&server, &["waits", "--deadlocks"]);
    assert!(text.contains("deadlock of 2 broken"), "{text}");
    for part in [
        "(cycler, pid ",
        "thread cycle-cli:d1)",
        "thread cycle-cli:d2)",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
    let kept = json::parse(&ok(&server, &["waits", "--deadlocks", "--json"]));
    let cycle = kept.get("deadlocks").at(0).get("cycle");
    assert_eq!(cycle.len(), 2);
    assert_eq!(cycle.at(0).get("who").get("client_name").str(), "cycler");
    let top = ok(&server, &["top", "--once", "cli:d*"]);
    assert!(
        top.contains("deadlocks broken over the last 10.0s: cli:d1 1, cli:d2 1"),
        "{top}"
    );
}

#[test]
fn list_with_a_pattern_on_one_server() {
    let server = RedisServer::new();
    let client = client(&server);
    let _a = client.lock("jobs:1").lock().unwrap();
    let _b = client.fenced_lock("jobs:2").lock().unwrap();
    let _c = client.read_write_lock("jobs:3").read().lock().unwrap();
    let _other = client.lock("other").lock().unwrap();
    let text = ok(&server, &["list", "jobs:*"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "header and 3 rows:\n{text}");
    assert!(lines[0].starts_with("NAME") && lines[0].contains("KIND"));
    let names: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["jobs:1", "jobs:2", "jobs:3"]);
    assert!(
        lines[3].contains("read-write") && lines[3].contains("read by 1"),
        "{text}"
    );
    // Columns line up.
    let kind_at = lines[0].find("KIND").unwrap();
    for line in &lines[1..] {
        assert_ne!(line.as_bytes()[kind_at], b' ', "{text}");
        assert_eq!(line.as_bytes()[kind_at - 1], b' ', "{text}");
    }
    let j = json::parse(&ok(&server, &["list", "--json", "jobs:*"]));
    assert_eq!(j.len(), 3);
    assert_eq!(j.at(1).get("kind").str(), "fenced");
    let all = ok(&server, &["list"]);
    assert_eq!(all.lines().count(), 5, "{all}");
    assert!(!all.contains("redisson_"), "helper keys are grouped: {all}");
}

#[test]
fn list_on_a_cluster_finds_each_name_once() {
    let cluster = RedisCluster::new(3, 0);
    let config = Config::cluster(cluster.urls())
        .history(true)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let names: Vec<String> = (0..18).map(|i| format!("c:{i}")).collect();
    let _guards: Vec<_> = names
        .iter()
        .map(|n| client.fenced_lock(n).lock().unwrap())
        .collect();
    let masters: std::collections::BTreeSet<u16> = names
        .iter()
        .map(|n| cluster.node_for_key(n).port())
        .collect();
    assert_eq!(masters.len(), 3);
    let seeds = cluster.urls()[..1].join(",");
    let r = run(&["--cluster", &seeds, "list", "--json", "c:*"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = json::parse(&r.stdout);
    let mut found: Vec<String> = (0..j.len())
        .map(|i| j.at(i).get("name").str().to_owned())
        .collect();
    found.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(found, expected, "every name once");
    for i in 0..j.len() {
        assert_eq!(j.at(i).get("kind").str(), "fenced");
        assert_eq!(
            j.at(i).get("holders").at(0).get("owner").str(),
            client.owner_id()
        );
    }
    // Traced with CLIENT LIST on every master: the holder's connections to each of them.
    let connections = j.at(0).get("holders").at(0).get("connections");
    let servers: std::collections::BTreeSet<&str> = (0..connections.len())
        .map(|i| {
            let c = connections.at(i);
            assert_eq!(c.get("name").str(), format!("redlatch:{}", client.id()));
            c.get("server").str()
        })
        .collect();
    assert_eq!(servers.len(), 3, "{connections:?}");
    let r = run(&["--cluster", &seeds, "inspect", "c:5"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("kind:    fenced"), "{}", r.stdout);
    // top: every name, on every master, with its holder and (once the client's history is
    // written, on its own stream's node) its acquisition.
    let top = || {
        let r = run(&["--cluster", &seeds, "top", "--json", "--rows", "0", "c:*"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        json::parse(&r.stdout)
    };
    assert!(wait_until(Duration::from_secs(20), || {
        let j = top();
        j.len() == 18 && (0..18).all(|i| j.at(i).get("acquisitions_per_s").num() > 0.0)
    }));
    let j = top();
    for i in 0..j.len() {
        let holder = j.at(i).get("holders").at(0);
        assert_eq!(holder.get("owner").str(), client.owner_id());
        assert!(holder.get("held_ms").num() >= 0.0);
    }
}

#[test]
fn force_unlock_yes_wakes_a_blocked_waiter() {
    let server = RedisServer::new();
    let holder = client(&server);
    let name = "cli:stuck";
    let _guard = holder.lock(name).lock().unwrap(); // 30 s watchdog lease, never released here
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let url = server.url();
        thread::spawn(move || {
            let client = Client::open(&url).unwrap();
            let guard = client.lock(name).lock().unwrap();
            let lease = client.lock(name).remaining_lease().unwrap().unwrap();
            tx.send((Instant::now(), lease)).unwrap();
            drop(guard);
        })
    };
    assert!(wait_until(Duration::from_secs(10), || {
        holder.inspect(name).unwrap().unwrap().subscribers == Some(1)
    }));
    let out = ok(&server, &["force-unlock", "--yes", name]);
    let broke = Instant::now();
    assert!(
        out.contains(&format!("broke lock {name}")) && out.contains(&holder.owner_id()),
        "{out}"
    );
    let (got, lease) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiter was not woken");
    assert!(got.saturating_duration_since(broke) < Duration::from_secs(2));
    assert!(
        lease > Duration::from_secs(28),
        "the waiter holds it with its own 30 s lease: {lease:?}"
    );
    waiter.join().unwrap();
}

#[test]
fn revoke_asks_then_steal_takes_the_lock_and_the_holder_is_told_of_both() {
    let server = RedisServer::new();
    let holder = support::client_with(&server, |b| b.watchdog_timeout(Duration::from_millis(900)));
    let name = "cli:revoke";
    let guard = holder.fenced_lock(name).lock().unwrap();
    let old = guard.token().unwrap();
    let url = server.url();
    let out = ok(&server, &["revoke", name, "--reason", "maintenance"]);
    assert!(out.contains(&format!("asked {}", guard.owner())), "{out}");
    assert!(wait_until(Duration::from_secs(5), || guard.is_revoked()));
    let told = guard.revocation().unwrap();
    assert_eq!(told.reason, "maintenance");
    assert!(told.by.starts_with("redlatch revoke"), "{}", told.by);
    assert_eq!(told.grace, None);
    let r = run(&["--url", &url, "--json", "revoke", name, "--steal"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json::parse(r.stdout.trim());
    assert_eq!(v.get("forced"), &json::J::Bool(true), "{}", r.stdout);
    assert_eq!(v.get("from").str(), guard.owner(), "{}", r.stdout);
    assert!(v.get("token").num() > old as f64, "{}", r.stdout);
    // Lost first, then told who forced it (the record is read after the renewal's reply).
    assert!(wait_until(Duration::from_secs(5), || guard
        .revocation()
        .is_some_and(|r| r.forced)));
    assert!(guard.is_lost());
    // The history shows the lock's log: the request, the notice, the steal and the force.
    let history = ok(&server, &["history", name]);
    let events: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        events,
        ["request", "notice", "steal", "forced"],
        "{history}"
    );
    assert!(
        history.contains("maintenance") && history.contains(&format!("token {old}")),
        "{history}"
    );
    let r = run(&["--url", &url, "--json", "history", name]);
    let last = json::parse(r.stdout.lines().last().unwrap());
    assert_eq!(last.get("revocations").len(), 4, "{}", r.stdout);
    assert_eq!(last.get("revocations").at(3).get("event").str(), "forced");
    // Taken and released: free now, and nobody to ask (exit 1).
    assert!(!holder.fenced_lock(name).is_locked().unwrap());
    assert_eq!(run(&["--url", &url, "revoke", name]).code, 1);
    // Not a plain or fenced lock: usage.
    holder.semaphore("cli:sem").try_set_permits(1).unwrap();
    let r = run(&["--url", &url, "revoke", "cli:sem", "--steal"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = run(&["--url", &url, "revoke", name, "--max-deferral", "1s"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn force_unlock_without_a_terminal_or_yes_refuses() {
    let server = RedisServer::new();
    let client = client(&server);
    let _guard = client.lock("cli:keep").lock().unwrap();
    let url = server.url();
    let r = run(&["--url", &url, "force-unlock", "cli:keep"]);
    assert_eq!(r.code, 2, "usage: {}", r.stderr);
    assert!(
        r.stderr.contains("refusing") && r.stderr.contains("--yes"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
    assert!(client.lock("cli:keep").is_held_by_current_thread().unwrap());

    // Piped answers are not confirmations either.
    let mut cmd = command(&["--url", &url, "force-unlock", "cli:keep"]);
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"y\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(client.lock("cli:keep").is_held_by_current_thread().unwrap());

    client.semaphore("cli:sem").try_set_permits(1).unwrap();
    let r = run(&["--url", &url, "force-unlock", "--yes", "cli:sem"]);
    assert_eq!(r.code, 2, "usage: {}", r.stderr);
    assert!(r.stderr.contains("not a lock"), "{}", r.stderr);
    let r = run(&["--url", &url, "force-unlock", "--yes", "cli:none"]);
    assert_eq!(r.code, 1, "no: {}", r.stderr);
}

/// Reads `child`'s stdout lines on a thread.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The next line with `"event":"<event>"`, within `timeout`.
fn next_event(rx: &mpsc::Receiver<String>, event: &str, timeout: Duration) -> json::J {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {event} event within {timeout:?}"));
        let j = json::parse(&line);
        if j.get("event").str() == event {
            return j;
        }
    }
}

#[test]
fn watch_json_prints_acquired_and_released() {
    let server = RedisServer::new();
    let client = client(&server);
    let url = server.url();
    let mut child = command(&[
        "--url",
        &url,
        "watch",
        "--json",
        "--interval",
        "100ms",
        "cli:watched",
    ])
    .spawn()
    .unwrap();
    let rx = lines_of(&mut child);
    let first = next_event(&rx, "watching", Duration::from_secs(10));
    assert_eq!(first.get("name").str(), "cli:watched");
    assert_eq!(first.get("kind"), &json::J::Null);

    let guard = client.lock("cli:watched").lock().unwrap();
    let acquired = next_event(&rx, "acquired", Duration::from_secs(5));
    assert_eq!(acquired.get("owner").str(), client.owner_id());
    assert_eq!(acquired.get("holds").num(), 1.0);
    assert!(acquired.get("at").str().ends_with('Z'));
    drop(guard);
    let released = next_event(&rx, "released", Duration::from_secs(5));
    assert_eq!(released.get("owner").str(), client.owner_id());
    assert_eq!(released.get("holds").num(), 0.0);
    assert!(released.get("at_ms").num() >= acquired.get("at_ms").num());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn sentinel_addresses_reach_the_master() {
    let group = SentinelGroup::with_config(SentinelConfig {
        replicas: 0,
        sentinels: 1,
        ..SentinelConfig::default()
    });
    let client = Client::new(
        Config::sentinel(group.sentinel_urls(), group.master_name())
            .build()
            .unwrap(),
    )
    .unwrap();
    let _guard = client.lock("cli:sentinel").lock().unwrap();
    let sentinels = group.sentinel_urls().join(",");
    let r = run(&[
        "--sentinel",
        &sentinels,
        "--master",
        group.master_name(),
        "inspect",
        "--json",
        "cli:sentinel",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = json::parse(&r.stdout);
    assert_eq!(j.get("holders").at(0).get("owner").str(), client.owner_id());
    let r = run(&[
        "--sentinel",
        &sentinels,
        "--master",
        group.master_name(),
        "top",
        "--once",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = json::parse(&r.stdout);
    assert_eq!(j.at(0).get("name").str(), "cli:sentinel");
    assert_eq!(
        j.at(0).get("holders").at(0).get("owner").str(),
        client.owner_id()
    );
}

#[test]
fn bad_url_unreachable_server_and_unknown_name_fail_clearly() {
    let r = run(&["--url", "notaurl", "inspect", "x"]);
    assert_eq!(r.code, 2, "usage");
    assert!(
        r.stderr.starts_with("redlatch: bad URL `notaurl`"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    let r = run(&["--url", "redis://user:secret@127.0.0.1:1:2/", "list"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("bad URL") && !r.stderr.contains("secret"),
        "{}",
        r.stderr
    );

    let port = free_port(); // nothing listens there
    let r = run(&[
        "--url",
        &format!("redis://127.0.0.1:{port}/"),
        "inspect",
        "x",
    ]);
    assert_eq!(r.code, 4, "no answer");
    assert!(
        r.stderr
            .contains(&format!("cannot reach redis at 127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);

    let server = RedisServer::new();
    let mut cmd = command(&["inspect", "no:such:lock"]);
    cmd.env("REDIS_URL", server.url()); // the URL from the environment
    let r = run_cmd(cmd);
    assert_eq!(r.code, 1, "no: {}", r.stderr);
    assert_eq!(
        r.stderr.trim(),
        "redlatch: no lock or synchronizer named no:such:lock"
    );
    assert!(r.stdout.is_empty());
    let url = server.url();
    let r = run(&["--url", &url, "watch", ""]);
    assert_eq!(r.code, 2);
    let r = run(&["--url", &url, "frobnicate"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("unrecognized subcommand 'frobnicate'"),
        "{}",
        r.stderr
    );
}

#[test]
fn help_for_the_tool_and_each_command() {
    let r = run(&["--help"]);
    assert_eq!(r.code, 0);
    for word in [
        "inspect",
        "list",
        "force-unlock",
        "watch",
        "--url",
        "--cluster",
        "--sentinel",
        "--json",
    ] {
        assert!(r.stdout.contains(word), "{word} missing from --help");
    }
    for cmd in ["inspect", "list", "force-unlock", "watch", "doctor", "lock"] {
        let r = run(&[cmd, "--help"]);
        assert_eq!(r.code, 0);
        assert!(
            r.stdout.starts_with(&format!("Usage: redlatch {cmd}")),
            "{}",
            r.stdout
        );
    }
}

/// Huge hold counts (a damaged or foreign hash) must not crash the tool. Broke: `state()`
/// sums u32 hold counts (overflow panic in debug builds, a wrapped total in release).
#[test]
fn list_of_readers_with_huge_hold_counts_does_not_panic() {
    let server = RedisServer::new();
    let mut conn = server.conn();
    redis::cmd("HSET")
        .arg("rw:huge")
        .arg("mode")
        .arg("read")
        .arg("0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:1")
        .arg("4000000000")
        .arg("0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:2")
        .arg("4000000000")
        .exec(&mut conn)
        .unwrap();
    let url = server.url();
    let r = run(&["list", "rw:*", "--url", &url]);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("8000000000 holds"), "{}", r.stdout);
}

/// A holder whose process died (SIGKILL: nothing released) keeps the lock until its lease
/// runs out: `inspect` and `list` say its client is gone and how long the lease has left,
/// while a live holder in another client is traced to its connections.
#[test]
fn a_crashed_holder_shows_as_gone_with_its_lease_left() {
    let server = RedisServer::new();
    // A holder in another process: `redlatch run` holding the lock over a long sleep.
    let mut holder = command(&[
        "--url",
        &server.url(),
        "run",
        "cli:crashed",
        "--",
        "sleep",
        "60",
    ])
    .spawn()
    .unwrap();
    let watcher = client(&server);
    assert!(wait_until(Duration::from_secs(10), || {
        watcher
            .inspect("cli:crashed")
            .unwrap()
            .is_some_and(|i| !i.holders.is_empty())
    }));
    let alive = json::parse(&ok(&server, &["inspect", "--json", "cli:crashed"]));
    let held_by = alive.get("holders").at(0);
    let client_id = held_by.get("client_id").str().to_owned();
    assert!(held_by.get("connections").len() >= 1, "{alive:?}");

    holder.kill().unwrap(); // SIGKILL: its connections close, its lease stays
    holder.wait().unwrap();
    let mut conn = server.conn();
    assert!(wait_until(Duration::from_secs(10), || {
        !support::client_list(&mut conn)
            .iter()
            .any(|l| l.contains(&client_id))
    }));
    // Only when every connection of the server is a redlatch client's is a holder without one
    // gone (else it may be a Redisson client's, which names none): close this unnamed one.
    drop(conn);
    assert!(wait_until(Duration::from_secs(10), || {
        watcher
            .connections()
            .unwrap()
            .iter()
            .all(|c| c.name.starts_with("redlatch:"))
    }));
    // Another client holds a second lock: traced, side by side.
    let live = client(&server);
    let _g = live.lock("cli:live").lock().unwrap();

    // A connection the server lists before it is named (another command's, closing or
    // opening) makes the holder's connections unknown ("untraced", null) for that look: look
    // again.
    let mut text = String::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            text = ok(&server, &["inspect", "cli:crashed"]);
            text.lines()
                .find(|l| l.starts_with(&client_id))
                .is_some_and(|row| row.contains("gone (lease ends in "))
        }),
        "{text}"
    );
    let mut j = json::J::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            j = json::parse(&ok(&server, &["inspect", "--json", "cli:crashed"]));
            matches!(j.get("holders").at(0).get("connections"), json::J::Arr(_))
        }),
        "{j:?}"
    );
    let gone = j.get("holders").at(0);
    assert_eq!(gone.get("client_id").str(), client_id);
    assert_eq!(gone.get("connections").len(), 0, "{j:?}");
    assert!(j.get("lease_ms").num() > 0.0, "the lease remains: {j:?}");

    let listed = ok(&server, &["list", "cli:*"]);
    let crashed = listed
        .lines()
        .find(|l| l.starts_with("cli:crashed"))
        .unwrap();
    assert!(
        crashed.contains(&format!("{client_id}:")) && crashed.contains("gone (lease ends in "),
        "{listed}"
    );
    let live_row = listed.lines().find(|l| l.starts_with("cli:live")).unwrap();
    assert!(
        live_row.contains(&format!("redlatch:{}@127.0.0.1:", live.id())),
        "{listed}"
    );
    let all = json::parse(&ok(&server, &["list", "--json", "cli:*"]));
    assert_eq!(all.len(), 2);
}

/// A server that asks for a password, set after it started (the harness PINGs it first).
fn server_with_password(password: &str) -> RedisServer {
    let server = RedisServer::new();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(password)
        .exec(&mut server.conn())
        .unwrap();
    server
}

#[test]
fn the_password_comes_from_rediscli_auth() {
    let server = server_with_password("s3cret");
    let url = server.url();
    // Without it: refused, and said so.
    let r = run(&["--url", &url, "inspect", "cli:none"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("--askpass, $REDISCLI_AUTH"),
        "{}",
        r.stderr
    );
    // From the environment: logged in (the name is not found, exit 1, not an error).
    let mut cmd = command(&["--url", &url, "inspect", "cli:none"]);
    cmd.env("REDISCLI_AUTH", "s3cret");
    let r = run_cmd(cmd);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // --password wins over it.
    let mut cmd = command(&["--url", &url, "--password", "wrong", "inspect", "cli:none"]);
    cmd.env("REDISCLI_AUTH", "s3cret");
    let r = run_cmd(cmd);
    assert_eq!(r.code, 4, "{}", r.stderr);
    // A wrong password: which server refused it, and how to give one.
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    for word in [
        format!("redis at 127.0.0.1:{}", server.port()),
        "refused the password".to_owned(),
        "--askpass, $REDISCLI_AUTH, --password or the URL".to_owned(),
    ] {
        assert!(r.stderr.contains(&word), "{word}: {}", r.stderr);
    }
    let bad = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let r = run(&["--url", &bad, "leader", "x"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains("refused the password") && !r.stderr.contains("wrong@"),
        "{}",
        r.stderr
    );
    // --help says that --password shows in `ps`.
    let help = run(&["inspect", "--help"]).stdout;
    assert!(
        help.contains("ps") && help.contains("REDISCLI_AUTH"),
        "{help}"
    );
}

#[test]
fn askpass_reads_the_password_on_the_terminal_without_echo() {
    let server = server_with_password("s3cret");
    let url = server.url();
    let bin = env!("CARGO_BIN_EXE_redlatch");
    let args = ["--url", url.as_str(), "--askpass", "inspect", "cli:none"];
    // A wrong REDISCLI_AUTH is not used: --askpass asks.
    let Some(mut pty) = support::pty::Pty::spawn(bin, &args, &[("REDISCLI_AUTH", "wrong")]) else {
        return;
    };
    pty.await_shown("Password: ", Duration::from_secs(10));
    pty.type_in("s3cret\n");
    pty.await_shown(
        "no lock or synchronizer named cli:none",
        Duration::from_secs(10),
    );
    let shown = pty.shown();
    assert!(
        !shown.contains("s3cret"),
        "the password was echoed: {shown:?}"
    );
    assert_eq!(pty.finish(Duration::from_secs(10)), 1, "{shown:?}");

    // Without a terminal it refuses, and says why (no login: no answer).
    let r = run(&args);
    assert_eq!(r.code, 4);
    assert!(
        r.stderr.contains("--askpass needs a terminal"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bad_url_shows_what_a_url_looks_like() {
    for url in [
        "foo",
        "http://127.0.0.1:6379/",
        "redis://127.0.0.1:notaport/",
    ] {
        let r = run(&["--url", url, "inspect", "x"]);
        assert_eq!(r.code, 2, "{url}");
        assert!(
            r.stderr
                .contains("expected redis://[[user]:password@]host[:port][/db], or rediss://"),
            "{url}: {}",
            r.stderr
        );
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    }
}

/// A port that answers, but not in RESP (an HTTP server): exit code 4 and one line that says
/// the port does not speak the Redis protocol, not the parser's error over three lines.
#[test]
fn a_port_that_does_not_speak_resp_is_called_that() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            thread::spawn(move || {
                let mut buf = [0u8; 1024];
                let _ = std::io::Read::read(&mut stream, &mut buf);
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            });
        }
    });
    let url = format!("redis://127.0.0.1:{port}/");
    let r = run(&["--url", &url, "inspect", "x"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "redis at 127.0.0.1:{port} answered, but this port does not speak the Redis protocol"
        )),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}

/// Every event line up to and including the first that `last` accepts, within 10 s.
fn events_until(rx: &mpsc::Receiver<String>, last: impl Fn(&json::J) -> bool) -> Vec<json::J> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("not seen within 10 s; saw {seen:?}"));
        let j = json::parse(&line);
        let done = last(&j);
        seen.push(j);
        if done {
            return seen;
        }
    }
}

fn watch_json(url: &str, name: &str, interval: &str) -> (Child, mpsc::Receiver<String>) {
    let args = [
        "--url",
        url,
        "watch",
        "--json",
        "--interval",
        interval,
        name,
    ];
    let mut child = command(&args).spawn().unwrap();
    let rx = lines_of(&mut child);
    next_event(&rx, "watching", Duration::from_secs(10));
    (child, rx)
}

/// A force-unlock showed as `released`; a running watch counted as a waiting client in
/// `inspect` (it subscribes the lock's channel).
#[test]
fn watch_reports_a_force_unlock_as_forced_and_is_no_waiting_client() {
    let server = RedisServer::new();
    let client = client(&server);
    let url = server.url();
    let (mut watch, rx) = watch_json(&url, "cli:forced", "0.5s");
    let guard = client.lock("cli:forced").lock().unwrap();
    next_event(&rx, "acquired", Duration::from_secs(10));

    let channel = "redisson_lock__channel:{cli:forced}";
    assert!(
        support::numsub(&mut server.conn(), channel) >= 1,
        "the watch listens"
    );
    let found = json::parse(&ok(&server, &["inspect", "--json", "cli:forced"]));
    assert_eq!(
        found.get("subscribers").num(),
        0.0,
        "the watch counted as waiting"
    );
    // A real waiter still counts.
    let waiter_client = self::client(&server);
    let (got_tx, got) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let waiter = {
        let c = waiter_client.clone();
        thread::spawn(move || {
            let guard = c.lock("cli:forced").lock().unwrap();
            got_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            guard.unlock().unwrap();
        })
    };
    support::await_waiting(&waiter_client, 1);
    let found = json::parse(&ok(&server, &["inspect", "--json", "cli:forced"]));
    assert_eq!(found.get("subscribers").num(), 1.0);

    ok(&server, &["force-unlock", "--yes", "cli:forced"]);
    let seen = events_until(&rx, |j| j.get("event").str().contains("release"));
    let last = seen.last().unwrap();
    assert_eq!(last.get("event").str(), "force_released", "{seen:?}");
    assert_eq!(last.get("owner").str(), client.owner_id());
    // The waiter took the lock once it was broken; its release is a plain one.
    got.recv_timeout(Duration::from_secs(10)).unwrap();
    next_event(&rx, "acquired", Duration::from_secs(10));
    release.send(()).unwrap();
    waiter.join().unwrap();
    let seen = events_until(&rx, |j| j.get("event").str().contains("release"));
    assert_eq!(
        seen.last().unwrap().get("event").str(),
        "released",
        "{seen:?}"
    );
    assert!(guard.unlock().is_err(), "the broken hold is lost");
    watch.kill().unwrap();
    watch.wait().unwrap();
}

/// A fair-queue waiter that got the lock and released it between two polls showed as
/// `left` (gave up).
#[test]
fn watch_reports_a_waiter_served_between_polls_as_acquired_and_released() {
    let server = RedisServer::new();
    let holder = client(&server);
    let url = server.url();
    // Polls 1 s apart: the turn below is over well within one.
    let (mut watch, rx) = watch_json(&url, "cli:turn", "1s");
    let held = holder.fair_lock("cli:turn").lock().unwrap();
    next_event(&rx, "acquired", Duration::from_secs(10));
    let waiter_client = client(&server);
    let (tx, owner_rx) = mpsc::channel();
    let waiter = {
        let c = waiter_client.clone();
        thread::spawn(move || {
            let guard = c.fair_lock("cli:turn").lock().unwrap();
            tx.send(c.owner_id()).unwrap();
            guard.unlock().unwrap();
        })
    };
    next_event(&rx, "waiting", Duration::from_secs(10));
    held.unlock().unwrap();
    let owner = owner_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    waiter.join().unwrap();
    let by_waiter = |j: &json::J| j.get("owner") == &json::J::Str(owner.clone());
    let seen = events_until(&rx, |j| {
        by_waiter(j) && matches!(j.get("event").str(), "released" | "left")
    });
    let kinds: Vec<&str> = seen
        .iter()
        .filter(|j| by_waiter(j))
        .map(|j| j.get("event").str())
        .collect();
    assert_eq!(kinds, ["acquired", "released"], "{seen:?}");
    watch.kill().unwrap();
    watch.wait().unwrap();
}

/// `doctor`: what threatens locks, with what to do; status 3 when something is found, 0 when
/// not.
#[test]
fn doctor_reports_each_threat_with_what_to_do() {
    let bare = RedisServer::new(); // no persistence
    let url = bare.url();
    let r = run(&["doctor", "--url", &url]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stdout.contains("NoPersistence"), "{}", r.stdout);
    assert!(
        r.stdout.contains("what to do: A restart frees every lock"),
        "{}",
        r.stdout
    );
    let r = run(&["doctor", "--json", "--url", &url]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let line = json::parse(r.stdout.lines().next().unwrap());
    assert_eq!(line.get("risk").str(), "NoPersistence");
    assert_eq!(
        line.get("server").str(),
        format!("127.0.0.1:{}", bare.port())
    );

    let safe = RedisServer::with_args(&["--appendonly", "yes"]);
    let r = run(&["doctor", "--url", &safe.url()]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "no threat to locks found\n"),
        "{}",
        r.stderr
    );
}

/// One of `top_shows_holders_waiters_and_blame_of_three_processes`'s processes: a client named
/// `REDLATCH_TOP_ROLE` with history on, which on `take` waits for the fair lock
/// `REDLATCH_TOP_NAME` (saying `HELD <owner>` once it holds it) and on `release` releases it.
#[test]
#[ignore = "the child half of the top test"]
fn top_worker_child() {
    let Ok(url) = std::env::var("REDLATCH_TOP_URL") else {
        return;
    };
    let name = std::env::var("REDLATCH_TOP_NAME").unwrap();
    let role = std::env::var("REDLATCH_TOP_ROLE").unwrap();
    let config = Config::builder(url.as_str())
        .client_name(&role)
        .history(true)
        .build()
        .unwrap();
    let client = Client::new(config).unwrap();
    let lock = client.fair_lock(&name);
    let mut held = None;
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().as_str() {
            "take" => {
                held = Some(lock.lock().unwrap());
                println!("HELD {}", client.owner_id());
            }
            _ => {
                drop(held.take());
                println!("RELEASED");
            }
        }
    }
}

#[test]
fn top_shows_holders_waiters_and_blame_of_three_processes_and_history_draws_them() {
    use support::child::ChildTest;
    let server = RedisServer::new();
    let name = "cli:top";
    let worker = |role: &str| {
        ChildTest::start(
            "top_worker_child",
            &[
                ("REDLATCH_TOP_URL", server.url()),
                ("REDLATCH_TOP_NAME", name.to_owned()),
                ("REDLATCH_TOP_ROLE", role.to_owned()),
            ],
        )
    };
    let say = |child: &mut ChildTest, word: &str| {
        let stdin = child.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{word}").unwrap();
        stdin.flush().unwrap();
    };
    let generous = Duration::from_secs(20);
    let row = |text: &str| {
        let all = json::parse(text);
        assert_eq!(all.len(), 1, "{text}");
        all.at(0).clone()
    };
    let top = || {
        row(&ok(
            &server,
            &["top", "--once", "--json", "--window", "60s", name],
        ))
    };
    let (mut p1, mut p2, mut p3) = (worker("p1"), worker("p2"), worker("p3"));
    say(&mut p1, "take");
    let o1 = p1.next("HELD", generous);
    let p2_asked = Instant::now();
    say(&mut p2, "take");
    assert!(wait_until(generous, || top().get("waiters").num() == 1.0));
    let p3_asked = Instant::now();
    say(&mut p3, "take");
    // Both waits recorded (their clients write once a second), p1 holding all along.
    assert!(wait_until(generous, || {
        let t = top();
        t.get("waiters").num() == 2.0 && t.get("longest_wait_ms").clone() != json::J::Null
    }));
    let t = top();
    assert_eq!(t.get("kind").str(), "fair");
    assert_eq!(t.get("holders").len(), 1);
    assert_eq!(t.get("holders").at(0).get("owner").str(), o1);
    assert_eq!(
        t.get("holders").at(0).get("who").get("client_name").str(),
        "p1"
    );
    assert!(t.get("holders").at(0).get("held_ms").num() > 0.0);
    let released_1 = Instant::now();
    say(&mut p1, "release");
    let o2 = p2.next("HELD", generous);
    // p2 holds, p3 waits on: until top sees p2's hold.
    assert!(wait_until(generous, || {
        let t = top();
        t.get("holders").len() == 1
            && t.get("holders").at(0).get("owner").str() == o2
            && t.get("holders").at(0).get("held_ms").clone() != json::J::Null
    }));
    let released_2 = Instant::now();
    say(&mut p2, "release");
    let o3 = p3.next("HELD", generous);
    say(&mut p3, "release");
    p3.next("RELEASED", generous);
    // Blame: p1 held up both waits, p2 the last one; within generous bounds of what this
    // process saw (a loaded machine wakes a child late; each stamp is off by a round trip).
    let blamed = |t: &json::J| -> Vec<(String, f64, f64)> {
        let b = t.get("blame");
        (0..b.len())
            .map(|i| {
                let e = b.at(i);
                (
                    e.get("owner").str().to_owned(),
                    e.get("caused_wait_ms").num(),
                    e.get("waits").num(),
                )
            })
            .collect()
    };
    let mut t = top();
    assert!(
        wait_until(generous, || {
            t = top();
            t.get("acquisitions_per_s").num() * 60.0 > 2.5
        }),
        "three acquisitions in the window"
    );
    let b = blamed(&t);
    assert_eq!(b.len(), 2, "{b:?}");
    let expect_1 = (released_1 - p2_asked + (released_1 - p3_asked)).as_secs_f64() * 1e3;
    let expect_2 = (released_2 - released_1).as_secs_f64() * 1e3;
    assert_eq!((b[0].0.as_str(), b[0].2), (o1.as_str(), 2.0), "{b:?}");
    assert!(
        (b[0].1 - expect_1).abs() < 1000.0,
        "{b:?}, expected {expect_1} ms"
    );
    assert_eq!((b[1].0.as_str(), b[1].2), (o2.as_str(), 1.0), "{b:?}");
    assert!(
        (b[1].1 - expect_2).abs() < 1000.0,
        "{b:?}, expected {expect_2} ms"
    );
    assert!(!o3.is_empty());
    let text = ok(&server, &["top", "--once", name]);
    assert!(text.contains("who made others wait"), "{text}");

    // The timeline: three holds that never overlap, and two waits.
    let dir = std::env::temp_dir().join(format!("redlatch-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (trace, svg) = (dir.join("t.json"), dir.join("t.svg"));
    let listed = ok(
        &server,
        &[
            "history",
            name,
            "--trace",
            trace.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    assert_eq!(
        listed.lines().filter(|l| l.contains(" acquire ")).count(),
        3,
        "{listed}"
    );
    let trace = json::parse(&std::fs::read_to_string(&trace).unwrap());
    let all = trace.get("traceEvents");
    let mut holds: Vec<(f64, f64)> = (0..all.len())
        .map(|i| all.at(i))
        .filter(|e| {
            matches!(e.get("ph"), json::J::Str(p) if p == "X")
                && matches!(e.get("cat"), json::J::Str(c) if c == "hold")
        })
        .map(|e| (e.get("ts").num(), e.get("ts").num() + e.get("dur").num()))
        .collect();
    holds.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(holds.len(), 3, "{holds:?}");
    assert!(
        holds.windows(2).all(|w| w[0].1 <= w[1].0),
        "overlapping holds: {holds:?}"
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(
        picture.starts_with("<svg") || picture.starts_with("<?xml"),
        "{picture}"
    );
    match Command::new("rsvg-convert")
        .arg("-o")
        .arg(dir.join("t.png"))
        .arg(&svg)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(std::fs::metadata(dir.join("t.png")).unwrap().len() > 0);
        }
        Err(_) => eprintln!(
            "skipped the SVG render: rsvg-convert not found (apt-get install librsvg2-bin)"
        ),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `text` (shown on a terminal) holds a character that moves the cursor, recolours
/// the screen or starts a line: a control character other than the line ends it is made of.
fn paints(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n')
}

/// The character (not byte) index of `word` in `line`.
fn char_at(line: &str, word: &str) -> usize {
    line[..line.find(word).unwrap()].chars().count()
}

/// Names (and owners, values) that hold terminal escapes, newlines, 10 kB, or bytes that are
/// not UTF-8 reach the terminal escaped in every human-readable output; tables cut long
/// names with a mark and keep their columns; JSON keeps them exact.
#[test]
fn odd_names_reach_the_terminal_escaped_and_tables_cut_them() {
    let server = RedisServer::new();
    let client = client(&server);
    let url = server.url();
    let evil = "cli:evil\x1b[31mRED\x1b[0m\nforged: line";
    let shown = "cli:evil\\u{1b}[31mRED\\u{1b}[0m\\nforged: line";
    let long = format!("cli:{}", "n".repeat(10_000));
    let _evil = client.lock(evil).lock().unwrap();
    let _long = client.lock(&long).lock().unwrap();
    let _plain = client.lock("cli:plain").lock().unwrap();
    // Written as Redisson would: a lock hash whose name is not UTF-8, and one whose owner
    // paints (anyone who may write a lock's keys may name an owner).
    let mut conn = server.conn();
    let owner = "0b3c8a52-5d6e-4b7f-9a1c-2d3e4f5a6b7c:1";
    redis::cmd("HSET")
        .arg(&b"cli:bad\xffname"[..])
        .arg(owner)
        .arg(1)
        .exec(&mut conn)
        .unwrap();
    redis::cmd("HSET")
        .arg("cli:painted")
        .arg("own\x1b]0;title\x07er:1")
        .arg(1)
        .exec(&mut conn)
        .unwrap();

    // list: one line per name (the name that is not UTF-8 cannot be named: left out), the
    // escapes shown, the 10 kB name cut, the columns kept.
    let text = ok(&server, &["list", "cli:*"]);
    assert!(!paints(&text), "{text:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "a header and a line per name:\n{text}");
    assert!(lines[1].starts_with(shown), "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("own\\u{1b}]0;title\\u{7}er:1")),
        "{text}"
    );
    let cut = lines.iter().find(|l| l.starts_with("cli:nnn")).unwrap();
    assert!(cut.contains("n… "), "a visible mark: {cut}");
    let kind_at = char_at(lines[0], "KIND");
    let state_at = char_at(lines[0], "STATE");
    for line in &lines {
        assert!(line.chars().count() < 300, "{line}");
        let chars: Vec<char> = line.chars().collect();
        for at in [kind_at, state_at] {
            assert_ne!(chars[at], ' ', "columns kept:\n{text}");
            assert_eq!(chars[at - 1], ' ', "columns kept:\n{text}");
        }
    }
    // JSON: exact.
    let j = json::parse(&ok(&server, &["list", "--json", "cli:*"]));
    let names: Vec<&str> = (0..j.len()).map(|i| j.at(i).get("name").str()).collect();
    assert!(
        names.contains(&evil) && names.contains(&long.as_str()),
        "{names:?}"
    );

    // inspect: the whole name, escaped, on one line.
    let text = ok(&server, &["inspect", evil]);
    assert!(!paints(&text), "{text:?}");
    assert!(text.starts_with(&format!("name:    {shown}\n")), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("forged")), "{text}");
    let text = ok(&server, &["inspect", &long]);
    assert!(
        text.contains(&format!("name:    {long}\n")),
        "the whole name"
    );
    let text = ok(&server, &["inspect", "cli:painted"]);
    assert!(
        !paints(&text) && text.contains("own\\u{1b}]0;title\\u{7}er"),
        "{text}"
    );
    let j = json::parse(&ok(&server, &["inspect", "--json", evil]));
    assert_eq!(j.get("name").str(), evil);
    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:painted"]));
    assert_eq!(
        j.get("holders").at(0).get("owner").str(),
        "own\x1b]0;title\x07er:1"
    );
    // Not found, said escaped.
    let r = run(&["--url", &url, "inspect", "cli:none\x1b[2J"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        r.stderr.trim(),
        "redlatch: no lock or synchronizer named cli:none\\u{1b}[2J"
    );
    // A name that is not UTF-8 on the command line: a usage error that shows it.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let mut cmd = command(&["--url", &url, "inspect"]);
        cmd.arg(std::ffi::OsStr::from_bytes(b"cli:bad\xffname"));
        let r = run_cmd(cmd);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains("`cli:bad\\xffname` is not UTF-8")
                && r.stderr.contains("redlatch help inspect"),
            "{}",
            r.stderr
        );
    }

    // lock: its message on stderr.
    let r = run(&["--url", &url, "lock", "--wait", "0", evil]);
    assert_eq!(r.code, 124, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        !paints(&r.stderr) && r.stderr.contains(&format!("lock {shown} not had")),
        "{}",
        r.stderr
    );
    // top: cut and escaped.
    let text = ok(&server, &["top", "--once", "cli:*"]);
    assert!(!paints(&text), "{text:?}");
    assert!(text.lines().all(|l| l.chars().count() < 300), "{text}");
    assert!(text.contains(&shown[..20]), "{text}");
    // leader: the name, the value (bytes that are not UTF-8 too) and the owner escaped.
    let election = "cli:elect\nion";
    let _leading = client
        .election(election)
        .campaign(b"v\x1b[1m\xff".as_slice())
        .unwrap();
    let text = ok(&server, &["leader", election]);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        !paints(&text)
            && text.starts_with("cli:elect\\nion: term ")
            && text.contains("value v\\u{1b}[1m\\xff, owner"),
        "{text}"
    );
    // watch: its first line.
    let mut watch = command(&["--url", &url, "watch", evil]).spawn().unwrap();
    let first = lines_of(&mut watch)
        .recv_timeout(Duration::from_secs(10))
        .unwrap();
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert!(
        !paints(&first) && first.starts_with(&format!("watching {shown} (reentrant: held by ")),
        "{first}"
    );
    // force-unlock: what it broke.
    let text = ok(&server, &["force-unlock", "--yes", evil]);
    assert!(
        !paints(&text) && text.starts_with(&format!("broke lock {shown} (was held by ")),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
}

/// One exit-status scheme across the commands that answer: 0 yes, 1 no, 2 usage (with the
/// right help pointed to), 3 doctor's findings, 4 no answer; `run`, `lock` and `elect` keep
/// theirs (125 for usage).
#[test]
fn exit_statuses_tell_yes_no_usage_and_no_answer_apart() {
    let server = RedisServer::new();
    let client = client(&server);
    let url = server.url();
    let status = |args: &[&str]| {
        let mut all = vec!["--url", url.as_str()];
        all.extend_from_slice(args);
        let r = run(&all);
        (r.code, r.stderr)
    };
    let _held = client.lock("cli:held").lock().unwrap();
    // A free fenced lock: its token counter only.
    drop(client.fenced_lock("cli:free").lock().unwrap());
    // Yes, no.
    assert_eq!(status(&["inspect", "cli:held"]).0, 0);
    assert_eq!(status(&["inspect", "cli:none"]).0, 1);
    assert_eq!(status(&["leader", "cli:election"]).0, 1);
    let leading = client.election("cli:election").campaign("me").unwrap();
    assert_eq!(status(&["leader", "cli:election"]).0, 0);
    leading.resign().unwrap();
    assert_eq!(status(&["force-unlock", "--yes", "cli:none"]).0, 1);
    let (code, stderr) = status(&["force-unlock", "--yes", "cli:free"]);
    assert_eq!(code, 1, "nothing to break: {stderr}");
    // A listing is an answer, even an empty one.
    assert_eq!(status(&["list", "cli:nothing:*"]).0, 0);
    // Usage: 2, pointing to the command's help when one is named.
    for (args, help) in [
        (&["inspect"][..], "--help"),
        (&["list", "--bogus"], "--help"),
        (&["frobnicate"], "--help"),
        (
            &["inspect", "--master", "m", "x"],
            "Try 'redlatch help inspect'.",
        ),
        (
            &["leader", "--sentinel", "redis://s", "x"],
            "Try 'redlatch help leader'.",
        ),
    ] {
        let (code, stderr) = status(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(help), "{args:?}: {stderr}");
    }
    let r = run(&["--url", "notaurl", "leader", "x"]);
    assert_eq!(r.code, 2, "a bad URL: {}", r.stderr);
    // run, lock and elect: 125, and their own help.
    for (args, help) in [
        (&["run", "job"][..], "redlatch help run"),
        (&["lock", "--wait", "soon", "job"], "redlatch help lock"),
        (&["elect", "job"], "redlatch help elect"),
        (
            &["elect", "--wait", "soon", "job", "--", "true"],
            "redlatch help elect",
        ),
    ] {
        let (code, stderr) = status(args);
        assert_eq!(code, 125, "{args:?}: {stderr}");
        assert!(stderr.contains(help), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("help run") || help.ends_with("run"),
            "{stderr}"
        );
    }
    // No answer: 4, whatever the command.
    let nowhere = format!("redis://127.0.0.1:{}/", free_port());
    for args in [
        &["inspect", "x"][..],
        &["list"],
        &["waits"],
        &["top", "--once"],
        &["history", "x"],
        &["force-unlock", "--yes", "x"],
        &["watch", "x"],
        &["doctor"],
        &["leader", "x"],
        &["leader", "--watch", "x"],
    ] {
        let mut all = vec!["--url", nowhere.as_str()];
        all.extend_from_slice(args);
        let r = run(&all);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("cannot reach"), "{args:?}: {}", r.stderr);
    }
    // The table, in --help.
    let help = run(&["--help"]).stdout;
    for row in ["0  yes", "1  no", "2  usage", "3  doctor", "4  no answer"] {
        assert!(help.contains(row), "{row} missing from --help:\n{help}");
    }
}

/// `list` leaves out the names that hold nothing but what fenced locks and elections keep
/// for good (a token counter, an election's log and last leader), and says how many;
/// `--all` shows them.
#[test]
fn list_leaves_out_names_with_only_a_token_or_an_election_log_unless_all() {
    let server = RedisServer::new();
    let client = client(&server);
    drop(client.fenced_lock("cli:was-fenced").lock().unwrap());
    client
        .election("cli:was-elected")
        .campaign("v")
        .unwrap()
        .resign()
        .unwrap();
    let _held = client.fenced_lock("cli:held-fenced").lock().unwrap();
    let _plain = client.lock("cli:plain").lock().unwrap();
    let url = server.url();
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap().to_owned())
            .collect()
    };
    let r = run(&["--url", &url, "list", "*cli:*"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(names(&r.stdout), ["cli:held-fenced", "cli:plain"]);
    assert!(
        r.stderr
            .contains("2 names holding nothing but a fencing token")
            && r.stderr.contains("--all"),
        "{}",
        r.stderr
    );
    let all = ok(&server, &["list", "--all", "*cli:*"]);
    assert_eq!(
        names(&all),
        [
            "cli:held-fenced",
            "cli:plain",
            "cli:was-elected",
            "cli:was-fenced"
        ]
    );
    assert!(all.contains("free, token "), "{all}");
    assert_eq!(
        json::parse(&ok(&server, &["list", "--json", "*cli:*"])).len(),
        2
    );
    assert_eq!(
        json::parse(&ok(&server, &["list", "--json", "--all", "*cli:*"])).len(),
        4
    );
    // Only such names: nothing listed, and said.
    let r = run(&["--url", &url, "list", "*cli:was-*"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert!(r.stderr.contains("2 names"), "{}", r.stderr);
    // inspect still shows one.
    let text = ok(&server, &["inspect", "cli:was-fenced"]);
    assert!(text.contains("kind:    fenced"), "{text}");
}

#[test]
fn inspect_and_list_show_a_groups_values_and_owners() {
    let server = RedisServer::new();
    let client = client(&server);
    let values = ["a", "b"].map(|v| redlatch::ValueCodec::String.encode_str(v));
    let _guard = client.group_lock("cli:group", values).lock().unwrap();
    let (id, thread) = me(&client);
    // Redisson's field of StringCodec's "a".
    let field_a = "qwvAS12pR0CgRitaypEjUw";

    let text = ok(&server, &["inspect", "cli:group"]);
    assert!(text.contains("kind:    group"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(field_a))
        .unwrap_or_else(|| panic!("no value row:\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..4],
        [field_a, id.as_str(), &thread.to_string(), "1"],
        "{text}"
    );

    let j = json::parse(&ok(&server, &["inspect", "--json", "cli:group"]));
    assert_eq!(j.get("kind").str(), "group");
    let values = j.get("values");
    assert_eq!(values.len(), 2);
    assert_eq!(values.at(0).get("owner").str(), client.owner_id());
    let lease_ms = values.at(0).get("lease_ms").num();
    assert!((20_000.0..=30_000.0).contains(&lease_ms), "{lease_ms}");
    assert_eq!(j.get("holders").at(0).get("holds").num(), 2.0);

    let listed = ok(&server, &["list", "cli:*"]);
    assert!(
        listed.contains("group") && listed.contains("2 value(s) held by"),
        "{listed}"
    );
}
