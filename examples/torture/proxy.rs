//! A TCP fault proxy on plain threads: it forwards every connection to one upstream address
//! and, on command, delays every chunk, blackholes (holds every byte, keeping the connections
//! open), resets every live connection (RST to both sides), or loses the request or the reply
//! of the next few requests that contain given bytes (a script's hash: see `acquires.rs`),
//! resetting that connection, as one that dies with the command in flight.
//!
//! One accept thread, and two pump threads per connection (one per direction). No async
//! runtime: the pumps block in `read`, and a mode change wakes the ones held in a blackhole.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// What the proxy does to the bytes it forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward at once.
    Pass,
    /// Forward each chunk after this delay (in both directions).
    Delay(Duration),
    /// Forward nothing (the bytes wait in the proxy and the kernel's buffers) until the mode
    /// changes; connections stay open and new ones are accepted.
    Blackhole,
}

/// What a matching request loses (see [`Proxy::lose_requests_containing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lose {
    /// The request itself: the server never sees it.
    Request,
    /// Its reply: the server runs it, the client never hears.
    Reply,
}

/// A running proxy; dropping it closes the listener and resets every connection.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    mode: Mutex<Mode>,
    changed: Condvar,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    shutdown: AtomicBool,
    /// Connections reset so far.
    resets: AtomicUsize,
    losses: Mutex<Losses>,
}

/// What the proxy is armed to lose, and what it lost since it was armed.
#[derive(Default)]
struct Losses {
    /// A request (one chunk read from a client) containing any of these matches.
    patterns: Vec<Vec<u8>>,
    /// What each next match loses, in order; disarmed when empty.
    plan: VecDeque<Lose>,
    requests: usize,
    replies: usize,
}

/// One proxied connection: both sockets, shared by its two pumps and the registry.
struct Conn {
    down: TcpStream,
    up: TcpStream,
    /// Set by a reset: the pumps exit without a half-close, so the last close sends RST.
    reset: AtomicBool,
    /// Pumps still running; the last one to exit unregisters the connection.
    pumps: AtomicUsize,
    /// The server's next bytes on this connection are lost (with the connection): a request
    /// whose reply is to be lost went through.
    lose_reply: AtomicBool,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            mode: Mutex::new(Mode::Pass),
            changed: Condvar::new(),
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            resets: AtomicUsize::new(0),
            losses: Mutex::new(Losses::default()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("torture-proxy-accept".into())
            .spawn(move || accept_shared.accept_loop(listener))?;
        Ok(Proxy {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Changes what happens to bytes from now on (held bytes move on when leaving a blackhole).
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
        self.shared.changed.notify_all();
    }

    /// Resets every live connection: both the client and the server see the connection end
    /// with RST, whatever was in flight is lost. Returns how many were reset.
    pub fn reset(&self) -> usize {
        let conns: Vec<Arc<Conn>> = self
            .shared
            .conns
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect();
        for c in &conns {
            c.cut();
        }
        self.shared.changed.notify_all();
        self.shared.resets.fetch_add(conns.len(), Ordering::Relaxed);
        conns.len()
    }

    /// Arms the proxy: each next request (a chunk read from a client, on any connection) that
    /// contains one of `patterns` loses what `plan` says in turn, and its connection is reset
    /// (RST to both sides): the request before it reaches the server, or the server's reply
    /// (the next bytes the server sends on that connection). Disarmed once the plan is spent,
    /// or by [`disarm`](Self::disarm).
    pub fn lose_requests_containing(&self, patterns: Vec<Vec<u8>>, plan: Vec<Lose>) {
        *self.shared.losses.lock().unwrap() = Losses {
            patterns,
            plan: plan.into(),
            requests: 0,
            replies: 0,
        };
    }

    /// Disarms the proxy; returns how many requests and replies it lost since it was armed.
    pub fn disarm(&self) -> (usize, usize) {
        let mut losses = self.shared.losses.lock().unwrap();
        let lost = (losses.requests, losses.replies);
        *losses = Losses::default();
        lost
    }

    /// Connections currently proxied.
    #[allow(dead_code)] // used by the proxy's tests
    pub fn connections(&self) -> usize {
        self.shared.conns.lock().unwrap().len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Wake the accept loop with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        self.reset();
    }
}

impl Shared {
    fn accept_loop(self: Arc<Self>, listener: TcpListener) {
        for down in listener.incoming() {
            if self.shutdown.load(Ordering::SeqCst) {
                return;
            }
            let Ok(down) = down else {
                // Out of descriptors, say: do not spin.
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            // Connecting upstream can take up to its timeout (a stopped server): not on the
            // accept thread.
            let shared = Arc::clone(&self);
            let _ = thread::Builder::new()
                .name("torture-proxy-open".into())
                .spawn(move || {
                    if shared.open(&down).is_err() {
                        // Upstream refused (a killed server): reset the client's connection,
                        // as the server itself would.
                        set_linger_zero(&down);
                    }
                });
        }
    }

    /// Connects upstream and starts the two pumps of a new connection. If upstream does not
    /// answer (a killed server), the client's connection is reset, as the server's would be.
    fn open(self: Arc<Self>, down: &TcpStream) -> io::Result<()> {
        let up = TcpStream::connect_timeout(&self.upstream, Duration::from_secs(1))?;
        let down = down.try_clone()?;
        // Writes wake up now and then to see a reset (a peer that reads nothing, such as a
        // stopped process, would block them for good).
        down.set_write_timeout(Some(Duration::from_millis(100)))?;
        up.set_write_timeout(Some(Duration::from_millis(100)))?;
        let _ = down.set_nodelay(true);
        let _ = up.set_nodelay(true);
        let conn = Arc::new(Conn {
            down,
            up,
            reset: AtomicBool::new(false),
            pumps: AtomicUsize::new(2),
            lose_reply: AtomicBool::new(false),
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.conns.lock().unwrap().insert(id, Arc::clone(&conn));
        for to_upstream in [true, false] {
            let (shared, pump_conn) = (Arc::clone(&self), Arc::clone(&conn));
            let spawned = thread::Builder::new()
                .name("torture-proxy-pump".into())
                .spawn(move || {
                    shared.pump(&pump_conn, to_upstream);
                    shared.pump_done(&pump_conn, id);
                });
            if let Err(e) = spawned {
                // This pump will not run: end the connection and count it done.
                conn.reset.store(true, Ordering::SeqCst);
                let _ = conn.down.shutdown(Shutdown::Both);
                let _ = conn.up.shutdown(Shutdown::Both);
                self.pump_done(&conn, id);
                if to_upstream {
                    self.pump_done(&conn, id);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// One pump of connection `id` is over; the last one unregisters it (closing it).
    fn pump_done(&self, conn: &Conn, id: u64) {
        if conn.pumps.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.conns.lock().unwrap().remove(&id);
        }
    }

    /// Copies one direction until EOF, an error or a reset.
    fn pump(&self, conn: &Conn, to_upstream: bool) {
        let (mut from, to) = if to_upstream {
            (&conn.down, &conn.up)
        } else {
            (&conn.up, &conn.down)
        };
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let lose = if to_upstream {
                self.lose(&buf[..n])
            } else if conn.lose_reply.swap(false, Ordering::SeqCst) {
                Some(Lose::Reply)
            } else {
                None
            };
            match lose {
                Some(Lose::Request) => {
                    conn.cut();
                    break;
                }
                // The request goes on: the reply, once it comes, is lost (flagged before the
                // request is forwarded, so before the reply can come).
                Some(Lose::Reply) if to_upstream => conn.lose_reply.store(true, Ordering::SeqCst),
                Some(Lose::Reply) => {
                    conn.cut();
                    break;
                }
                None => {}
            }
            if !self.hold(conn) || !write_all(to, &buf[..n], &conn.reset) {
                break;
            }
        }
        if conn.reset.load(Ordering::SeqCst) {
            // Make sure the other pump wakes too; the closes then send RST.
            let _ = conn.down.shutdown(Shutdown::Read);
            let _ = conn.up.shutdown(Shutdown::Read);
        } else {
            // An orderly end: pass the half-close on.
            let _ = to.shutdown(Shutdown::Write);
        }
    }

    /// What a request (a chunk from a client) loses, if the proxy is armed and it matches;
    /// counted as lost.
    fn lose(&self, request: &[u8]) -> Option<Lose> {
        let mut losses = self.losses.lock().unwrap();
        if losses.plan.is_empty() {
            return None;
        }
        let matches = losses
            .patterns
            .iter()
            .any(|p| !p.is_empty() && request.windows(p.len()).any(|w| w == &p[..]));
        if !matches {
            return None;
        }
        let lose = losses.plan.pop_front()?;
        match lose {
            Lose::Request => losses.requests += 1,
            Lose::Reply => losses.replies += 1,
        }
        Some(lose)
    }

    /// Applies the mode to one chunk: waits out a blackhole, sleeps a delay. False when the
    /// connection was reset meanwhile.
    fn hold(&self, conn: &Conn) -> bool {
        let mut mode = self.mode.lock().unwrap();
        loop {
            if conn.reset.load(Ordering::SeqCst) {
                return false;
            }
            match *mode {
                Mode::Pass => return true,
                Mode::Delay(d) => {
                    drop(mode);
                    thread::sleep(d);
                    return !conn.reset.load(Ordering::SeqCst);
                }
                Mode::Blackhole => {
                    mode = self
                        .changed
                        .wait_timeout(mode, Duration::from_millis(100))
                        .unwrap()
                        .0;
                }
            }
        }
    }
}

impl Conn {
    /// Resets the connection: both the client and the server see it end with RST.
    fn cut(&self) {
        self.reset.store(true, Ordering::SeqCst);
        set_linger_zero(&self.down);
        set_linger_zero(&self.up);
        // Wakes both pumps' reads (Linux returns 0 from a read after SHUT_RD) without
        // sending anything; the pumps then drop the sockets, and linger 0 makes that RST.
        let _ = self.down.shutdown(Shutdown::Read);
        let _ = self.up.shutdown(Shutdown::Read);
    }
}

/// Writes all of `bytes`, retrying after write timeouts until done, an error, or a reset.
fn write_all(mut to: &TcpStream, mut bytes: &[u8], reset: &AtomicBool) -> bool {
    while !bytes.is_empty() {
        if reset.load(Ordering::SeqCst) {
            return false;
        }
        match to.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// SO_LINGER {on, 0}: closing the socket sends RST instead of FIN.
fn set_linger_zero(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid open socket descriptor, and a pointer to a `linger` of the stated size
    // that outlives the call.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
