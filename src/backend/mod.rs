//! Where commands go: one server, the master Sentinel names, or a Redis Cluster.

pub(crate) mod cluster;
pub(crate) mod pool;
pub(crate) mod sentinel;
