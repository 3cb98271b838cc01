//! The timeline as Chrome trace-event JSON.

use super::*;

/// [`trace_json`] of `events`, whose spans and marks are `timeline`.
pub(super) fn trace_of(events: &[HistoryEvent], timeline: &Timeline) -> Value {
    let layout = layout(events, timeline);
    let origin = layout.from_us;
    let mut out = Vec::new();
    // Processes: (host, pid) to 1, 2, ... (two hosts may have the same pid).
    let mut processes: Vec<(&str, u32)> = Vec::new();
    let mut owner_pid = Vec::new();
    for o in &layout.owners {
        let key = (o.host.as_str(), o.pid);
        let pid = match processes.iter().position(|&p| p == key) {
            Some(i) => i + 1,
            None => {
                processes.push(key);
                let pid = processes.len();
                let name = format!("{} pid {} on {}", o.client_name, o.pid, o.host);
                out.push(metadata(
                    "process_name",
                    pid,
                    0,
                    json!({ "name": name.trim() }),
                ));
                out.push(metadata(
                    "process_sort_index",
                    pid,
                    0,
                    json!({ "sort_index": pid }),
                ));
                pid
            }
        };
        owner_pid.push(pid);
    }
    // Threads: each owner's lanes to 1, 2, ... in the owners' order.
    let mut first_tid = Vec::new();
    let mut tid = 0;
    for (i, o) in layout.owners.iter().enumerate() {
        first_tid.push(tid + 1);
        for lane in 0..layout.lanes[i] {
            tid += 1;
            let mut name = format!("{} ({})", o.thread, o.owner);
            if lane > 0 {
                name.push_str(&format!(" lane {}", lane + 1));
            }
            let pid = owner_pid[i];
            out.push(metadata("thread_name", pid, tid, json!({ "name": name })));
            out.push(metadata(
                "thread_sort_index",
                pid,
                tid,
                json!({ "sort_index": tid }),
            ));
        }
    }
    for (s, &(owner, lane)) in timeline.spans.iter().zip(&layout.place) {
        out.push(json!({
            "ph": "X",
            "name": s.lock,
            "cat": if s.kind == SpanKind::Hold { "hold" } else { "wait" },
            "pid": owner_pid[owner],
            "tid": first_tid[owner] + lane,
            "ts": s.start_us - origin,
            "dur": s.end_us.saturating_sub(s.start_us),
            "args": { "lock": s.lock, "mode": s.mode, "owner": s.owner.to_string(), "outcome": s.outcome },
        }));
    }
    for m in &timeline.marks {
        let Some((owner, lane)) = layout.mark_place(timeline, m) else {
            continue;
        };
        out.push(json!({
            "ph": "i",
            "s": "t",
            "name": format!("{} {}", m.what, m.lock),
            "cat": m.what,
            "pid": owner_pid[owner],
            "tid": first_tid[owner] + lane,
            "ts": m.at_us - origin,
            "args": { "lock": m.lock, "mode": m.mode, "owner": m.owner.to_string() },
        }));
    }
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": { "origin": rfc3339(origin), "origin_unix_us": origin },
    })
}

/// A metadata event (`"ph": "M"`).
fn metadata(name: &str, pid: usize, tid: usize, args: Value) -> Value {
    json!({ "ph": "M", "name": name, "pid": pid, "tid": tid, "args": args })
}
