//! The batcher's own tests: a lane whose thread unwinds, the hook run as a command is
//! written, and the order of wakes.

use std::sync::Arc;

use parking_lot::Mutex;
use redis::Value;

use super::answers::{Answers, Entry, Job, Outcome, Slot, Target, Wakes};
use super::{Batcher, Lane};
use crate::backend::Policy;

fn job() -> Arc<Job> {
    Arc::new(Job {
        slot: Mutex::new(Slot::Waiting),
        thread: std::thread::current(),
    })
}

/// What `job`'s slot holds: "waiting", "replies", "broken", "not sent" or "lead".
fn slot_of(job: &Job) -> &'static str {
    match &*job.slot.lock() {
        Slot::Waiting => "waiting",
        Slot::Lead(_) => "lead",
        Slot::Done(Outcome::Replies(_), _) => "replies",
        Slot::Done(Outcome::Broken(_), _) => "broken",
        Slot::Done(Outcome::NotSent(..), _) => "not sent",
    }
}

fn queued(job: &Arc<Job>) -> Entry {
    Entry {
        replies: 1,
        target: Target::Job(Arc::clone(job)),
        bytes: 0,
        op: None,
    }
}

#[test]
fn a_lane_thread_that_unwinds_leaves_no_caller_asleep() {
    // One lane, taken; one call read into `answers`, one written and not read yet, one
    // queued for the next write. The lane's thread panics.
    let batcher = Batcher::new(1, false);
    let (answered, unread, waiting) = (job(), job(), job());
    batcher.queue.lock().leading = 1;
    batcher.queue.lock().entries.push(queued(&waiting));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _lane = Lane::held(&batcher);
        let mut answers = Answers::default();
        answers.answer(queued(&answered), Outcome::Replies(vec![Value::Okay]));
        let _entries = [queued(&unread)];
        panic!("a bug in the lane's thread");
    }));
    assert!(unwound.is_err());
    assert_eq!(slot_of(&answered), "replies", "its reply still reaches it");
    assert_eq!(
        slot_of(&unread),
        "broken",
        "may have run: as a broken connection"
    );
    assert_eq!(
        slot_of(&waiting),
        "not sent",
        "no lane is left to send it: retried"
    );
    let queue = batcher.queue.lock();
    assert_eq!(queue.leading, 0, "the lane is free again");
    assert!(queue.entries.is_empty() && queue.bytes.is_empty());
}

#[test]
fn a_lane_given_back_leaves_the_queue_to_the_lanes_still_taken() {
    let batcher = Batcher::new(2, false);
    let waiting = job();
    batcher.queue.lock().leading = 2;
    batcher.queue.lock().entries.push(queued(&waiting));
    drop(Lane::held(&batcher));
    assert_eq!(
        slot_of(&waiting),
        "waiting",
        "the other lane's thread sends it"
    );
    assert_eq!(batcher.queue.lock().leading, 1);
    // A lane passed on by the normal path changes nothing.
    Lane::held(&batcher).pass();
    assert_eq!(batcher.queue.lock().leading, 1);
    assert_eq!(batcher.queue.lock().entries.len(), 1);
}

#[test]
fn calls_left_queued_by_an_unwound_lane_go_with_the_next_lane_taken() {
    use crate::testing::Server;
    let server = Server::start();
    let endpoint = super::super::endpoint::Fixed(server.info());
    let pool = super::super::pool::testing_pool(&server, endpoint, |b| b.batch_lanes(2));
    let batcher = pool.batcher.as_ref().expect("batching");
    // As a lane's thread leaves things when it unwinds while another lane is taken: one
    // lane counted, and a caller queued (this thread: its slot is read below).
    let stranded = job();
    {
        let mut queue = batcher.queue.lock();
        queue.leading = 1;
        redis::cmd("ECHO")
            .arg("stranded")
            .write_packed_command(&mut queue.bytes);
        queue.entries.push(queued(&stranded));
    }
    let mine: String = pool
        .run("k", Policy::Retried, |c| {
            redis::cmd("ECHO").arg("mine").query(c)
        })
        .expect("a call on the free lane");
    assert_eq!(mine, "mine");
    match &*stranded.slot.lock() {
        Slot::Done(Outcome::Replies(replies), _) => {
            assert_eq!(replies, &[Value::BulkString(b"stranded".to_vec())]);
        }
        _ => panic!("the queued call was not sent with the next write"),
    }
    let queue = batcher.queue.lock();
    assert_eq!(queue.leading, 1, "the lane taken is given back");
    assert!(queue.entries.is_empty() && queue.bytes.is_empty());
}

#[test]
fn the_hook_runs_once_the_command_is_written_before_the_reply() {
    use crate::testing::Server;
    use std::cell::Cell;
    use std::time::{Duration, Instant};
    let server = Server::start();
    let endpoint = super::super::endpoint::Fixed(server.info());
    let pool = super::super::pool::testing_pool(&server, endpoint, |b| b);
    let runs: Cell<Vec<Instant>> = Cell::new(Vec::new());
    let hook = || {
        let mut at = runs.take();
        at.push(Instant::now());
        runs.set(at);
    };
    // A reply that takes a second to come.
    let reply: Option<(String, String)> = pool
        .run_written("k", Policy::Retried, Some(&hook), |c| {
            redis::cmd("BLPOP").arg("nothing").arg(1.0).query(c)
        })
        .expect("BLPOP");
    let returned = Instant::now();
    assert_eq!(reply, None);
    let runs = runs.take();
    assert_eq!(runs.len(), 1, "run once");
    assert!(
        returned - runs[0] >= Duration::from_millis(500),
        "run {:?} before the reply: as the command was written",
        returned - runs[0]
    );
}

#[test]
fn wakes_wake_nobody_until_every_slot_is_filled() {
    // Guards against a caller that found its outcome early waking one whose slot was
    // not filled yet: that one parked again, and nobody was left to wake it.
    let wakes = Wakes::closed(vec![job(), job(), job()]);
    assert!(!wakes.wake_one());
    assert!(!wakes.wake_one());
    wakes.open();
    // The early attempts took no turn: each of the three is woken once.
    assert!(wakes.wake_one());
    assert!(wakes.wake_one());
    assert!(wakes.wake_one());
    assert!(!wakes.wake_one());
}
