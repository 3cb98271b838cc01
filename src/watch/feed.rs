//! A watch's ears: observers of the object's channels on the client's own dispatcher (its
//! pub/sub connection, or the cluster node connections), which hear every message without
//! taking a wake-up from the client's waiters, and follow reconnects and slot moves.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::{self, Layout};
use crate::pubsub::{Alarms, Heard, Observer, Wake};

/// Messages a feed keeps for its next read.
const HEARD_CAPACITY: usize = 1024;

/// What a feed reports after a wait.
pub(super) enum Signal {
    /// Messages came on these channels.
    Messages(Vec<String>),
    /// A subscription was confirmed again (after a reconnect or a move): messages may have
    /// been missed meanwhile.
    Resubscribed,
    /// Nothing before the deadline.
    Quiet,
}

/// The observers of one object's channels; dropping it unsubscribes them (the client's
/// waiters keep theirs).
pub(super) struct Feed {
    observers: Vec<Observer>,
    heard: Receiver<Heard>,
    /// The client's close flag (the alarms are the calling thread's at each call: a watch
    /// may move between threads).
    closed_flag: Arc<AtomicBool>,
    /// Disconnected when the client closes.
    closed: Receiver<()>,
    /// The slot an interrupt wakes while the feed blocks on `heard`.
    poke: (Sender<()>, Receiver<()>),
}

impl Feed {
    /// Observes every channel of `layout` and waits (up to the response timeout) until each
    /// subscription is confirmed, so that an inspection taken next misses no message.
    pub(super) fn open(client: &Client, layout: &Layout) -> Result<Feed> {
        let dispatcher = &client.inner.pubsub;
        // Bounded: a watch not read for a while keeps at most this many messages (the next
        // read inspects anyway).
        let (tx, heard) = bounded(HEARD_CAPACITY);
        // Each channel with the wake mode its waiters use (one per channel).
        let observed = [
            (&layout.lock_channel, Wake::Lock),
            (&layout.rw_channel, Wake::Lock),
            (&layout.semaphore_channel, Wake::Permits),
            (&layout.latch_channel, Wake::All),
        ];
        // And beside each, its watch channel: what tells `inspect` that this connection
        // watches, not waits (see `keys::watch_channel`), and where a force-unlock is told.
        let watch_channels = observed.map(|(channel, _)| keys::watch_channel(channel));
        let channels: Vec<(&String, Wake)> = observed
            .into_iter()
            .chain(watch_channels.iter().map(|c| (c, Wake::All)))
            .collect();
        let mut observers = Vec::with_capacity(channels.len());
        for &(channel, wake) in &channels {
            let observer = dispatcher
                .observe(channel, wake, tx.clone())
                .ok_or(Error::Closed)?;
            observers.push(observer);
        }
        let alarms = dispatcher.alarms();
        let timeout = client.inner.config.response_timeout;
        let deadline = Instant::now() + timeout;
        for (confirmed, observer) in observers.iter_mut().enumerate() {
            if !observer.block_until(deadline, &alarms).outcome(&alarms)? {
                return Err(Error::Timeout(format!(
                    "{confirmed} of {} subscriptions for `{}` confirmed within {timeout:?}",
                    channels.len(),
                    layout.name
                )));
            }
        }
        Ok(Feed {
            observers,
            heard,
            closed_flag: dispatcher.closed_flag(),
            closed: dispatcher.closed_channel(),
            poke: bounded(1),
        })
    }

    /// Waits until a message comes or `until`, then looks at every observer without blocking
    /// (following a reconnect or a slot move it was told of).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the client is closed, [`Error::Interrupted`] when the thread is
    /// interrupted.
    pub(super) fn next(&mut self, until: Instant) -> Result<Signal> {
        let alarms = Alarms::of_this_thread(&self.closed_flag);
        let first = alarms.recv(&self.heard, &self.poke, &self.closed, until)?;
        let messages: Vec<String> = first
            .into_iter()
            .chain(self.heard.try_iter())
            .map(|h| h.channel)
            .collect();
        let mut resubscribed = false;
        let now = Instant::now();
        for observer in &mut self.observers {
            resubscribed |= observer.block_until(now, &alarms).outcome(&alarms)?;
        }
        Ok(if !messages.is_empty() {
            Signal::Messages(messages)
        } else if resubscribed {
            Signal::Resubscribed
        } else {
            Signal::Quiet
        })
    }
}
