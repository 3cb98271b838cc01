//! The pub/sub dispatcher: how waiting threads learn that a lock, semaphore or latch changed.
//!
//! A [`PubSub`] is one dedicated connection and one reader thread. The thread owns the read
//! side of the socket and blocks on it; SUBSCRIBE and UNSUBSCRIBE are written by the
//! registering thread on a cloned write side, under the registry mutex, so that the order of
//! commands on the wire is the order of registry changes. The reader routes confirmations and
//! messages to waiters through `crossbeam_channel` slots of capacity one: a token in the slot
//! means "re-check now".
//!
//! A waiter re-checks only after the server confirmed its channel (`Chan::subscribed`), so an
//! unlock published between its failed attempt and its subscription cannot be missed. Every
//! command written is counted in `Chan::pending` until its reply arrives; the channel is
//! confirmed when no command is pending and the last one written was a subscribe.
//!
//! A connection speaks one of two [`Mode`]s. On a single node or behind Sentinel it is
//! [`Mode::Plain`] (SUBSCRIBE, for PUBLISH). On a Redis Cluster with sharded pub/sub, unlock
//! messages are SPUBLISHed and reach only SSUBSCRIBErs on the node that owns the channel's
//! hash slot, so the connection is [`Mode::Sharded`] and goes to that node, and the slot may
//! leave it: see [`sharded`] for the cluster dispatcher, which keeps one connection per node
//! that got waiters (sharded, or plain on a cluster without sharded pub/sub), and moves
//! waiters when their channel moves or their node fails. [`Dispatcher`] is the one type the
//! client holds, over either.
//!
//! - `wait.rs`: the wait every blocking call goes through.
//! - `vocabulary.rs`: what the others share (addresses, modes, wake kinds, interests, alarms).
//! - `dispatcher.rs`: the client's handle, over the [`Subscriptions`] the topology picked.
//! - `connection.rs`, `registry.rs`, `node_waiter.rs`: one connection and its reader thread,
//!   its channels and waiters, and a thread registered on it.
//! - `liveness.rs`: the check that a connection anything is registered on is alive (a
//!   `PING` per interval; one unanswered for an interval drops the connection).
//! - `sharded.rs`, `sharded_waiter.rs`: the cluster dispatcher and a waiter that follows its
//!   channel.

mod connection;
mod dispatcher;
mod liveness;
#[cfg(test)]
mod liveness_tests;
mod node_waiter;
mod registry;
mod sharded;
#[cfg(test)]
mod sharded_tests;
mod sharded_waiter;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
mod vocabulary;
mod wait;

pub(crate) use connection::PubSub;
pub(crate) use dispatcher::{Active, Dispatcher, Observer, Subscriptions};
pub(crate) use sharded::{Locator, Sharded};
pub(crate) use vocabulary::{Address, Alarms, Heard, Mode, Wake};
pub(crate) use wait::{wait, Channel, Tried};
