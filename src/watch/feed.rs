//! A watch's subscriptions: the object's channels on a dedicated connection per node, read
//! by a thread that forwards confirmations and messages.

use std::io::Write;
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};
use redis::Value;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::inspect::{text, Layout};
use crate::net::Stream;

/// What a subscription's reader thread reports.
pub(super) enum Signal {
    /// A subscription was confirmed.
    Confirmed,
    /// A message came on this channel.
    Message(String),
    /// The connection failed or the server dropped the subscription.
    Lost(String),
}

/// The watch's subscriptions: a connection and a reader thread per node. Dropping it closes
/// the connections, which ends the threads.
pub(super) struct Feed {
    streams: Vec<Stream>,
    pub(super) rx: Receiver<Signal>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        for stream in &self.streams {
            stream.shutdown();
        }
    }
}

impl Feed {
    /// Subscribes every channel of `layout` and waits for the confirmations.
    pub(super) fn open(client: &Client, layout: &Layout) -> Result<Feed> {
        let config = &client.inner.config;
        let nodes = client.inner.pool.servers_of(&layout.channels())?;
        let command = client.inner.pool.subscribe_command();
        let (tx, rx) = unbounded();
        let mut feed = Feed {
            streams: Vec::new(),
            rx,
        };
        let io = |e: std::io::Error| Error::Connection(e.into());
        let dial = config.dial(&client.inner.metrics);
        for (info, channels) in &nodes {
            let stream = dial.open(info)?;
            stream
                .set_write_timeout(Some(config.response_timeout))
                .map_err(io)?;
            let reader = stream.try_clone().map_err(io)?;
            feed.streams.push(stream);
            let mut packed = Vec::new();
            for channel in channels {
                // One command per channel: SSUBSCRIBE takes channels of one slot only.
                packed.extend(redis::cmd(command).arg(*channel).get_packed_command());
            }
            (&feed.streams[feed.streams.len() - 1])
                .write_all(&packed)
                .map_err(io)?;
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("redlatch-watch".into())
                .spawn(move || read(reader, tx))
                .map_err(|e| Error::invalid(format!("cannot spawn the watch reader: {e}")))?;
        }
        let expected: usize = nodes.iter().map(|(_, c)| c.len()).sum();
        let deadline = Instant::now() + config.response_timeout;
        let mut confirmed = 0;
        while confirmed < expected {
            match feed.rx.recv_deadline(deadline) {
                Ok(Signal::Confirmed) => confirmed += 1,
                Ok(Signal::Message(_)) => {}
                Ok(Signal::Lost(why)) => {
                    return Err(Error::Connection(
                        std::io::Error::new(
                            std::io::ErrorKind::ConnectionAborted,
                            format!("subscribing the channels of `{}`: {why}", layout.name),
                        )
                        .into(),
                    ))
                }
                Err(_) => {
                    return Err(Error::Timeout(format!(
                        "{confirmed} of {expected} subscriptions for `{}` confirmed within {:?}",
                        layout.name, config.response_timeout
                    )))
                }
            }
        }
        Ok(feed)
    }
}

/// A reader thread: forwards confirmations and messages until the connection ends or the
/// feed is gone.
fn read(reader: Stream, tx: Sender<Signal>) {
    let mut parser = redis::Parser::new();
    loop {
        let signal = match parser.parse_value(&reader) {
            Ok(value) => match signal(value) {
                Some(signal) => signal,
                None => continue,
            },
            Err(e) => Signal::Lost(e.to_string()),
        };
        let lost = matches!(signal, Signal::Lost(_));
        if tx.send(signal).is_err() || lost {
            return;
        }
    }
}

fn signal(value: Value) -> Option<Signal> {
    let parts = match value {
        Value::Array(parts) => parts,
        Value::Push { data, .. } => data,
        Value::ServerError(e) => return Some(Signal::Lost(format!("{e:?}"))),
        _ => return None,
    };
    let kind = parts.first().and_then(text)?;
    match kind.as_str() {
        "subscribe" | "ssubscribe" => Some(Signal::Confirmed),
        "message" | "smessage" => Some(Signal::Message(parts.get(1).and_then(text)?)),
        // The server dropped a sharded subscription: the slot moved.
        "unsubscribe" | "sunsubscribe" => Some(Signal::Lost(format!("server sent {kind}"))),
        _ => None,
    }
}
