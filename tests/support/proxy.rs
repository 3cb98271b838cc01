//! A TCP proxy in front of a test server that can lose a reply (the server's bytes are
//! dropped and both sockets closed, as a connection that dies after the server ran the
//! commands) or a request (the client's bytes dropped likewise: the server never runs it),
//! or stall the pub/sub connection: its bytes are held, in both directions, and
//! the connection is left open, as a NAT or firewall that forgot it, or a stalled proxy,
//! would; every other connection flows.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;

/// A reply to lose.
enum Lose {
    /// The next read from the server, on any connection.
    Next,
    /// The next read from the server that is exactly these bytes (one whole reply).
    EqualTo(Vec<u8>),
    /// The next read (from a client: a request) that contains these bytes.
    Containing(Vec<u8>),
}

/// The replies to lose, in order: each is armed once the one before it was lost.
type Losses = Arc<Mutex<VecDeque<Lose>>>;

/// One relayed connection, as both its pumps see it.
#[derive(Default)]
struct Conn {
    /// Its client sent `SUBSCRIBE` or `SSUBSCRIBE`: a pub/sub connection.
    subscriber: AtomicBool,
    /// Nothing more is relayed either way; the sockets stay open.
    stalled: AtomicBool,
}

/// Every connection relayed, in the order they were accepted.
type Conns = Arc<Mutex<Vec<Arc<Conn>>>>;

pub struct Proxy {
    port: u16,
    lose: Losses,
    lose_request: Losses,
    cuts: Arc<AtomicUsize>,
    conns: Conns,
    /// Set on drop: stalled pumps close their sockets and end.
    dropped: Arc<AtomicBool>,
}

impl Proxy {
    /// Listens on a free loopback port; each connection is relayed to `target`.
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let lose = Arc::new(Mutex::new(VecDeque::new()));
        let lose_request = Arc::new(Mutex::new(VecDeque::new()));
        let requests = Arc::clone(&lose_request);
        let cuts = Arc::new(AtomicUsize::new(0));
        let conns: Conns = Arc::default();
        let dropped = Arc::new(AtomicBool::new(false));
        let (armed, cut) = (Arc::clone(&lose), Arc::clone(&cuts));
        let (all, gone) = (Arc::clone(&conns), Arc::clone(&dropped));
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let conn = Arc::new(Conn::default());
                all.lock().push(Arc::clone(&conn));
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let up = Pump {
                    conn: Arc::clone(&conn),
                    dropped: Arc::clone(&gone),
                    lose: Some((Arc::clone(&requests), Arc::clone(&cut))),
                    upstream: true,
                };
                thread::spawn(move || up.run(c2, s2));
                let down = Pump {
                    conn,
                    dropped: Arc::clone(&gone),
                    lose: Some((Arc::clone(&armed), Arc::clone(&cut))),
                    upstream: false,
                };
                thread::spawn(move || down.run(server, client));
            }
        });
        Proxy {
            port,
            lose,
            lose_request,
            cuts,
            conns,
            dropped,
        }
    }

    /// `redis://127.0.0.1:<proxy port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The next read from the server, on any connection, is lost (and its connection cut).
    pub fn lose_next_reply(&self) {
        self.lose.lock().push_back(Lose::Next);
    }

    /// The next read from the server that is exactly `reply` is lost (and its connection
    /// cut), after the losses armed before it.
    pub fn lose_next_reply_equal_to(&self, reply: &[u8]) {
        self.lose.lock().push_back(Lose::EqualTo(reply.to_vec()));
    }

    /// The next request that contains `bytes`, on any connection, is lost (and its connection
    /// cut) before it reaches the server.
    pub fn lose_next_request_containing(&self, bytes: &[u8]) {
        self.lose_request
            .lock()
            .push_back(Lose::Containing(bytes.to_vec()));
    }

    /// How many replies and requests were lost.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }

    /// Stalls, for good, the first connection (in the order they were made) whose client
    /// sent `SUBSCRIBE` or `SSUBSCRIBE` and that is not stalled yet: what either side writes
    /// from now on is held (read and not relayed), and neither socket is closed. Connections
    /// made later flow. False if no connection subscribed yet.
    pub fn stall_subscriber(&self) -> bool {
        let conns = self.conns.lock();
        let found = conns
            .iter()
            .find(|c| c.subscriber.load(Ordering::SeqCst) && !c.stalled.load(Ordering::SeqCst));
        found.is_some_and(|c| {
            c.stalled.store(true, Ordering::SeqCst);
            true
        })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// Whether `bytes` hold a `SUBSCRIBE` or `SSUBSCRIBE` command (as RESP writes its name).
fn subscribes(bytes: &[u8]) -> bool {
    let names: [&[u8]; 2] = [b"$9\r\nSUBSCRIBE\r\n", b"$10\r\nSSUBSCRIBE\r\n"];
    names.iter().any(|name| {
        bytes
            .windows(name.len())
            .any(|w| w.eq_ignore_ascii_case(name))
    })
}

/// One direction of a connection.
struct Pump {
    conn: Arc<Conn>,
    dropped: Arc<AtomicBool>,
    /// The replies (server to client) or requests (client to server) to lose.
    lose: Option<(Losses, Arc<AtomicUsize>)>,
    /// Client to server: where `SUBSCRIBE` is seen.
    upstream: bool,
}

impl Pump {
    /// Copies `from` to `to` until either closes; a read that the first loss armed names is
    /// dropped (the loss with it) and both sockets are closed. Once the connection is
    /// stalled, what is read is held, and the sockets stay open until the proxy is dropped.
    fn run(self, mut from: TcpStream, mut to: TcpStream) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if self.conn.stalled.load(Ordering::SeqCst) {
                while !self.dropped.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(20));
                }
                break;
            }
            if self.upstream && subscribes(&buf[..n]) {
                self.conn.subscriber.store(true, Ordering::SeqCst);
            }
            if let Some((lose, cuts)) = &self.lose {
                let mut armed = lose.lock();
                let hit = match armed.front() {
                    None => false,
                    Some(Lose::Next) => true,
                    Some(Lose::EqualTo(reply)) => reply[..] == buf[..n],
                    Some(Lose::Containing(part)) => buf[..n].windows(part.len()).any(|w| w == part),
                };
                if hit {
                    armed.pop_front();
                    cuts.fetch_add(1, Ordering::SeqCst);
                    break;
                }
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}
