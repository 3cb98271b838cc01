//! The guide: what the README leaves out, chapter by chapter. It holds no code, only pages
//! (as clap's `_tutorial`); the API reference is the rest of this crate's documentation.
//!
//! - [`locks`]: the fair lock, the read-write lock, both semaphores and the count-down
//!   latch, and what each is for.
//! - [`conditions`]: waiting on a held lock until another process notifies, as Java's
//!   `Condition`: what it promises, how it differs, the bounded buffer.
//! - [`deadlocks`]: cycles of waits across processes, found and broken: what is promised,
//!   the victim rule, the cost.
//! - [`rate_limits`]: at most a rate of permits per interval across processes, Redisson's
//!   `RRateLimiter` kept true: the guarantee, the waits, and what breaks it.
//! - [`revocation`]: taking a lock back (a request, a preemption with grace, a steal) and
//!   waiters with a priority: the semantics in a table, the aging bound, what Redisson sees.
//! - [`election`]: one leader at a time, with terms, observers, and what a paused leader
//!   does; compared with etcd's and Curator's recipes.
//! - [`safety`]: what is guaranteed and what is not: leases, fencing tokens, lost-lock
//!   callbacks, replica-synced writes, and the tests that show each.
//! - [`java`]: sharing locks with Java services on Redisson: the settings both sides must
//!   share, and what a mixed fair queue promises.
//! - [`topologies`]: one server, Sentinel, Redis Cluster, TLS, `MultiLock` and `RedLock`.
//! - [`operating`]: the `redlatch` command-line tool, tracing a holder to its host, metrics
//!   (the snapshot and the `metrics` facade) and logging.
//! - [`internals`]: how it works, the key layout shared with Redisson, and what it does not
//!   (yet) do.
//!
//! How it is measured and tested under faults: `docs/benchmarks.md` and `docs/torture.md`
//! in the repository; the map of the code: `ARCHITECTURE.md`.

pub mod locks {
    #![doc = include_str!("locks.md")]
}

pub mod conditions {
    #![doc = include_str!("conditions.md")]
}

pub mod deadlocks {
    #![doc = include_str!("deadlocks.md")]
}

pub mod rate_limits {
    #![doc = include_str!("rate_limits.md")]
}

pub mod revocation {
    #![doc = include_str!("revocation.md")]
}

pub mod election {
    #![doc = include_str!("election.md")]
}

pub mod safety {
    #![doc = include_str!("safety.md")]
}

pub mod java {
    #![doc = include_str!("java.md")]
}

pub mod topologies {
    #![doc = include_str!("topologies.md")]
}

pub mod operating {
    #![doc = include_str!("operating.md")]
}

pub mod internals {
    #![doc = include_str!("internals.md")]
}
