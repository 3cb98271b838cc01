//! A TCP proxy in front of a test server that can lose a reply (the server's bytes are
//! dropped and both sockets closed, as a connection that dies after the server ran the
//! commands) or a request (the client's bytes dropped likewise: the server never runs it).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

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

pub struct Proxy {
    port: u16,
    lose: Losses,
    lose_request: Losses,
    cuts: Arc<AtomicUsize>,
}

impl Proxy {
    /// Listens on a free loopback port; each connection is relayed to `target`.
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let lose = Arc::new(Mutex::new(VecDeque::new()));
        let lose_request = Arc::new(Mutex::new(VecDeque::new()));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (armed, cut) = (Arc::clone(&lose), Arc::clone(&cuts));
        let requests = Arc::clone(&lose_request);
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let lost = (Arc::clone(&requests), Arc::clone(&cut));
                thread::spawn(move || pump(c2, s2, Some(lost)));
                let (armed, cut) = (Arc::clone(&armed), Arc::clone(&cut));
                thread::spawn(move || pump(server, client, Some((armed, cut))));
            }
        });
        Proxy {
            port,
            lose,
            lose_request,
            cuts,
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
}

/// Copies `from` to `to` until either closes; with `lose`, a read that its first entry names
/// is dropped (the entry with it) and both sockets are closed.
fn pump(mut from: TcpStream, mut to: TcpStream, lose: Option<(Losses, Arc<AtomicUsize>)>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((lose, cuts)) = &lose {
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
