//! Output: library values as aligned human-readable tables (JSON is their serde
//! serialization: see `main.rs`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlatch::{
    Activity, ClientConnection, Event, HistoryEvent, HistoryKind, Holder, Inspection, Kind,
    LockOrderWarning, Owner, WaitRecord,
};

/// `29.8s`, `4m05s`, `2h03m`; `never` for a key without expiry.
pub fn duration(d: Duration) -> String {
    if d == Duration::MAX {
        return "never".to_owned();
    }
    let ms = d.as_millis();
    if ms < 60_000 {
        format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

/// `2024-05-01T12:00:01.234Z` (UTC, RFC 3339; a time before 1970 as 1970).
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t.max(UNIX_EPOCH)).to_string()
}

/// Rows under a header, each column as wide as its widest cell (the last one unpadded).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths[i] + 2 - cell.chars().count();
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Where a holder's or waiter's client connects from: each connection's address after the
/// connections' name (`billing:<uuid> at 10.0.0.5:51234 10.0.0.5:51240`); `gone` when it has
/// none, with how long its hold (`left`: its lease, or a waiter's deadline) lasts; `untraced`
/// when it could not be traced (no connection names it, but some are not redlatch's: a
/// Redisson client's, for one).
pub fn clients(
    connections: Option<&[ClientConnection]>,
    left: Option<Duration>,
    what: &str,
) -> String {
    match connections {
        None => "untraced".to_owned(),
        Some([]) => match left {
            Some(d) if d == Duration::MAX => "gone (no expiry)".to_owned(),
            Some(d) => format!("gone ({what} in {})", duration(d)),
            None => "gone".to_owned(),
        },
        Some(all) => {
            let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
            names.dedup();
            let addrs: Vec<&str> = all.iter().map(|c| c.addr.as_str()).collect();
            format!("{} at {}", names.join(","), addrs.join(" "))
        }
    }
}

/// A holder's time left: the lock's lease, or a reader's longest hold lease.
fn hold_left(i: &Inspection, h: &Holder) -> Option<Duration> {
    if h.read_leases.is_empty() {
        i.lease
    } else {
        h.read_leases.iter().flatten().max().copied()
    }
}

/// For `list`: where each holder's and then each waiter's client connects from
/// (`name@address`, `+N` more connections), `gone` for those whose client has no connection
/// left, `untraced` for those that could not be traced; `-` when there is nobody. The owners are in the same order in the state column.
fn whereabouts(i: &Inspection) -> String {
    let at = |conns: Option<&[ClientConnection]>, left, what| match conns {
        Some([first]) => format!("{}@{}", first.name, first.addr),
        Some([first, rest @ ..]) => format!("{}@{} (+{})", first.name, first.addr, rest.len()),
        other => clients(other, left, what),
    };
    let holders: Vec<String> = i
        .holders
        .iter()
        .chain(&i.readers)
        .map(|h| at(h.connections.as_deref(), hold_left(i, h), "lease ends"))
        .collect();
    let queue: Vec<String> = i
        .queue
        .iter()
        .map(|q| at(q.connections.as_deref(), q.deadline, "skipped"))
        .collect();
    match (holders.is_empty(), queue.is_empty()) {
        (true, true) => "-".to_owned(),
        (_, true) => holders.join(", "),
        (true, false) => format!("queue: {}", queue.join(", ")),
        (false, false) => format!("{}; queue: {}", holders.join(", "), queue.join(", ")),
    }
}

/// Why a lock or semaphore is busy, for `run`'s and `lock`'s wait: `held by <owner> (1 hold)
/// from <where>, lease ends in 29.8s`, the fair queue ahead, or the permits taken.
pub fn busy_text(i: &Inspection) -> String {
    let mut parts = Vec::new();
    let holders = holders_text(i);
    if !holders.is_empty() {
        parts.push(format!(
            "held by {holders} from {}",
            whereabouts_of_holders(i)
        ));
        if let Some(lease) = i.lease {
            parts.push(format!("lease ends in {}", duration(lease)));
        }
    }
    if !i.queue.is_empty() {
        parts.push(format!("{} in the queue", i.queue.len()));
    }
    if !i.permit_leases.is_empty() || i.permits.is_some() {
        let taken = i.permit_leases.len();
        let free = i.permits.unwrap_or(0);
        parts.push(format!("{free} permits free, {taken} taken"));
    }
    if parts.is_empty() {
        return "just released".to_owned();
    }
    parts.join(", ")
}

/// Where the holders' clients connect from (see [`whereabouts`]), holders only.
fn whereabouts_of_holders(i: &Inspection) -> String {
    let mut holders_only = i.clone();
    holders_only.queue.clear();
    whereabouts(&holders_only)
}

/// The owners holding it, for prompts and messages: `<client id>:<thread> (2 holds), ...`.
pub fn holders_text(i: &Inspection) -> String {
    let describe = |h: &Holder, what: &str| {
        let holds = if h.holds == 1 { "hold" } else { "holds" };
        format!("{} ({what}{} {holds})", h.owner, h.holds)
    };
    let writer = if i.kind == Kind::ReadWrite {
        "writing, "
    } else {
        ""
    };
    let mut all: Vec<String> = i.holders.iter().map(|h| describe(h, writer)).collect();
    all.extend(i.readers.iter().map(|h| describe(h, "reading, ")));
    all.join(", ")
}

/// A one-line state for `list`: who holds it, or its permits or count.
pub fn state(i: &Inspection) -> String {
    let mut parts = Vec::new();
    match i.kind {
        Kind::Reentrant | Kind::Fair | Kind::Fenced | Kind::ReadWrite => {
            let holds = |hs: &[Holder]| match hs.iter().map(|h| u64::from(h.holds)).sum::<u64>() {
                1 => "1 hold".to_owned(),
                n => format!("{n} holds"),
            };
            if !i.holders.is_empty() {
                let who = i
                    .holders
                    .iter()
                    .map(|h| h.owner.to_string())
                    .collect::<Vec<_>>();
                let by = if i.kind == Kind::ReadWrite {
                    "written"
                } else {
                    "held"
                };
                parts.push(format!(
                    "{by} by {} ({})",
                    who.join(", "),
                    holds(&i.holders)
                ));
            }
            if !i.readers.is_empty() {
                parts.push(format!(
                    "read by {} ({})",
                    i.readers.len(),
                    holds(&i.readers)
                ));
            }
            if parts.is_empty() {
                parts.push("free".to_owned());
            }
            if !i.queue.is_empty() {
                parts.push(format!("{} queued", i.queue.len()));
            }
            if let Some(token) = i.token {
                parts.push(format!("token {token}"));
            }
        }
        Kind::Semaphore | Kind::PermitExpirableSemaphore => {
            parts.push(format!("{} permits", i.permits.unwrap_or(0)));
            if !i.permit_leases.is_empty() {
                parts.push(format!("{} leased", i.permit_leases.len()));
            }
        }
        Kind::CountDownLatch => parts.push(format!("count {}", i.count.unwrap_or(0))),
        Kind::SemaphoreOrLatch => parts.push(format!("value {}", i.permits.unwrap_or(0))),
        Kind::FencedResource => parts.push(format!("token {}", i.token.unwrap_or(0))),
        Kind::Group if i.values.is_empty() => parts.push("free".to_owned()),
        Kind::Group => {
            let who: Vec<String> = i.holders.iter().map(|h| h.owner.to_string()).collect();
            parts.push(format!(
                "{} value(s) held by {}",
                i.values.len(),
                who.join(", ")
            ));
        }
        _ => parts.push(format!("a {} key", i.key_type)),
    }
    if let Some(n) = i.subscribers.filter(|&n| n > 0) {
        parts.push(format!("{n} client(s) waiting"));
    }
    parts.join(", ")
}

/// `list`'s table.
pub fn list_text(found: &[Inspection]) -> String {
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                i.kind.to_string(),
                i.lease.map_or_else(|| "-".to_owned(), duration),
                state(i),
                whereabouts(i),
            ]
        })
        .collect();
    table(&["NAME", "KIND", "LEASE", "STATE", "CLIENTS"], &rows)
}

/// `inspect`'s text: a block of fields, then a table per list of holders, waiters, permits.
pub fn inspection_text(i: &Inspection) -> String {
    let mut fields: Vec<Vec<String>> = vec![
        vec!["name".into(), i.name.clone()],
        vec!["kind".into(), i.kind.to_string()],
    ];
    let mut field = |k: &str, v: String| fields.push(vec![k.to_owned(), v]);
    if i.kind == Kind::Unknown {
        field("type", i.key_type.clone());
    }
    if let Some(mode) = i.mode {
        field("mode", mode.to_string());
    }
    field("lease", i.lease.map_or_else(|| "-".to_owned(), duration));
    if (i.kind.is_lock() || i.kind == Kind::Group) && i.holders.is_empty() && i.readers.is_empty() {
        field("holders", "none (free)".to_owned());
    }
    if let Some(p) = i.permits {
        field("permits", p.to_string());
    }
    if let Some(c) = i.count {
        field("count", c.to_string());
    }
    if let Some(t) = i.token {
        field("token", t.to_string());
    }
    if let Some(n) = i.subscribers {
        field("waiting", format!("{n} client(s) subscribed"));
    }
    field("keys", i.keys.join(" "));
    let mut out = String::new();
    for row in &fields {
        out.push_str(&format!("{:<9}{}\n", format!("{}:", row[0]), row[1]));
    }
    if !i.values.is_empty() {
        let rows: Vec<Vec<String>> = i
            .values
            .iter()
            .map(|v| {
                vec![
                    v.field.clone(),
                    v.owner.client_id.clone(),
                    v.owner.thread.to_string(),
                    v.holds.to_string(),
                    duration(v.lease),
                ]
            })
            .collect();
        out.push_str("\nvalues:\n");
        out.push_str(&table(
            &["VALUE FIELD", "CLIENT ID", "THREAD", "HOLDS", "LEASE"],
            &rows,
        ));
    }
    if !i.holders.is_empty() {
        let title = if i.kind == Kind::ReadWrite {
            "writer"
        } else {
            "holders"
        };
        out.push_str(&format!("\n{title}:\n"));
        out.push_str(&table(
            &["CLIENT ID", "THREAD", "HOLDS", "CONNECTIONS"],
            &holder_rows(i, &i.holders),
        ));
    }
    if !i.readers.is_empty() {
        out.push_str("\nreaders:\n");
        out.push_str(&table(
            &["CLIENT ID", "THREAD", "HOLDS", "LEASES", "CONNECTIONS"],
            &holder_rows(i, &i.readers),
        ));
    }
    if !i.queue.is_empty() {
        let rows: Vec<Vec<String>> = i
            .queue
            .iter()
            .enumerate()
            .map(|(place, q)| {
                vec![
                    (place + 1).to_string(),
                    q.owner.client_id.clone(),
                    q.owner.thread.to_string(),
                    q.deadline.map_or_else(|| "none".to_owned(), duration),
                    clients(q.connections.as_deref(), q.deadline, "skipped"),
                ]
            })
            .collect();
        out.push_str("\nqueue:\n");
        out.push_str(&table(
            &["#", "CLIENT ID", "THREAD", "DEADLINE", "CONNECTIONS"],
            &rows,
        ));
    }
    if !i.permit_leases.is_empty() {
        let rows: Vec<Vec<String>> = i
            .permit_leases
            .iter()
            .map(|p| {
                vec![
                    p.id.clone(),
                    p.expires_in.map_or_else(|| "never".to_owned(), duration),
                ]
            })
            .collect();
        out.push_str("\nleased permits:\n");
        out.push_str(&table(&["PERMIT", "EXPIRES IN"], &rows));
    }
    out
}

/// The rows of `inspect`'s table of holders (or readers) `hs` of `i`.
fn holder_rows(i: &Inspection, hs: &[Holder]) -> Vec<Vec<String>> {
    hs.iter()
        .map(|h| {
            let mut row = vec![
                h.owner.client_id.clone(),
                h.owner.thread.to_string(),
                h.holds.to_string(),
            ];
            if !h.read_leases.is_empty() {
                let leases: Vec<String> = h
                    .read_leases
                    .iter()
                    .map(|l| l.map_or_else(|| "expired".to_owned(), duration))
                    .collect();
                row.push(leases.join(" "));
            }
            row.push(clients(
                h.connections.as_deref(),
                hold_left(i, h),
                "lease ends",
            ));
            row
        })
        .collect()
}

/// A watch event as one line: time, event, owner, details.
pub fn event_text(e: &Event) -> String {
    let mut details = Vec::new();
    if let Some(m) = e.mode {
        details.push(m.to_string());
    }
    if let Some(h) = e.holds {
        details.push(format!("holds {h}"));
    }
    if let Some(p) = e.position {
        details.push(format!("place {p}"));
    }
    if let Some(p) = e.permits {
        details.push(format!("permits {p}"));
    }
    if let Some(c) = e.count {
        details.push(format!("count {c}"));
    }
    if let Some(t) = e.token {
        details.push(format!("token {t}"));
    }
    if let Some(s) = e.subscribers {
        details.push(format!("{s} client(s) waiting"));
    }
    let owner = e
        .owner
        .as_ref()
        .map_or_else(|| "-".to_owned(), Owner::to_string);
    format!(
        "{}  {:<8}  {owner}  {}",
        timestamp(e.at),
        e.kind.as_str(),
        details.join(", ")
    )
    .trim_end()
    .to_owned()
}

/// `redlatch waits`: one row per recorded wait, a cycle's marked.
pub fn waits_text(waits: &[WaitRecord]) -> String {
    let rows: Vec<Vec<String>> = waits
        .iter()
        .map(|w| {
            vec![
                if w.in_cycle { "CYCLE" } else { "" }.to_owned(),
                w.lock.clone(),
                w.owner.clone(),
                w.mode.to_owned(),
                duration(w.waited),
                w.blocked_by.join(", "),
            ]
        })
        .collect();
    table(
        &["", "LOCK", "WAITER", "MODE", "WAITED", "BLOCKED BY"],
        &rows,
    )
}

/// An owner id shortened for a table or a picture: the client id's first 8 characters and
/// the thread (an id of another shape: its first 15 characters and an ellipsis).
pub fn short_owner(owner: &str) -> String {
    match owner.rsplit_once(':') {
        Some((client, thread)) => {
            format!("{}:{thread}", client.chars().take(8).collect::<String>())
        }
        None if owner.chars().count() > 16 => {
            format!("{}…", owner.chars().take(15).collect::<String>())
        }
        None => owner.to_owned(),
    }
}

/// `redlatch top`: the table, then the blame of the first locks that have any.
pub fn top_text(rows: &[Activity], window: Duration) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            let holders = a
                .holders
                .iter()
                .map(|h| match h.held_for {
                    Some(d) => format!("{} ({})", short_owner(&h.owner), duration(d)),
                    None => short_owner(&h.owner),
                })
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                a.name.clone(),
                a.kind.map_or("-".to_owned(), |k| k.to_string()),
                if holders.is_empty() {
                    "-".to_owned()
                } else {
                    holders
                },
                a.waiters.to_string(),
                a.longest_wait.map_or("-".to_owned(), duration),
                format!("{:.1}", a.acquisitions_per_s),
                format!("{:.1}", a.contended_per_s),
                format!("{:.2}", a.waiting_per_s),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "NAME", "KIND", "HELD BY", "WAITERS", "LONGEST", "ACQ/S", "CONT/S", "WAIT S/S",
        ],
        &cells,
    );
    for a in rows.iter().filter(|a| !a.blame.is_empty()).take(3) {
        out.push_str(&format!(
            "\n{}: who made others wait over the last {}\n",
            a.name,
            duration(window)
        ));
        for b in a.blame.iter().take(5) {
            out.push_str(&format!(
                "  {:>8}  {} waits  {} ({}, pid {} on {}, thread {})\n",
                duration(b.caused_wait),
                b.waits,
                short_owner(&b.owner),
                b.who.client_name,
                b.who.pid,
                b.who.host,
                b.who.thread
            ));
        }
    }
    out
}

/// `redlatch history NAME`: one event a line.
pub fn history_text(events: &[HistoryEvent]) -> String {
    let mut out = String::new();
    for e in events {
        let at = UNIX_EPOCH + Duration::from_micros(e.at_us);
        let mut line = format!(
            "{}  {:<9} {}  ({}, pid {} on {}, thread {})",
            timestamp(at),
            e.kind.to_string(),
            e.owner,
            e.client_name,
            e.pid,
            e.host,
            e.thread
        );
        let waited = e.contended || e.kind != HistoryKind::Acquire;
        if let Some(w) = e.waited_us.filter(|_| waited) {
            line.push_str(&format!(" waited {}", duration(Duration::from_micros(w))));
        }
        if let Some(h) = e.held_us {
            line.push_str(&format!(" held {}", duration(Duration::from_micros(h))));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `redlatch waits`, below the table: one paragraph per lock-order warning.
pub fn orders_text(warnings: &[LockOrderWarning]) -> String {
    let mut out = String::new();
    for w in warnings {
        out.push_str(&format!(
            "LOCK ORDER  `{}` and `{}` are taken in both orders, which can deadlock:
  {}
  {}
",
            w.one.held, w.one.taken, w.one, w.other
        ));
    }
    out
}

/// `redlatch waits --dot`: a Graphviz digraph, waiter -> owner in its way, labelled with the
/// lock; the edges of cycles red; a dashed orange edge each way between two locks taken in
/// opposite orders.
pub fn waits_dot(waits: &[WaitRecord], warnings: &[LockOrderWarning]) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut out = String::from("digraph waits {\n  rankdir=LR;\n  node [shape=box];\n");
    for w in waits {
        for by in &w.blocked_by {
            let cycle = w.in_cycle && waits.iter().any(|o| o.owner == *by && o.in_cycle);
            out.push_str(&format!(
                "  {} -> {} [label={}{}];\n",
                quote(&w.owner),
                quote(by),
                quote(&format!("{} ({}, {})", w.lock, w.mode, duration(w.waited))),
                if cycle { ", color=red" } else { "" }
            ));
        }
    }
    for w in warnings {
        for o in [&w.one, &w.other] {
            out.push_str(&format!(
                "  {} -> {} [style=dashed, color=orange, label={}];\n",
                quote(&o.held),
                quote(&o.taken),
                quote(&format!("then ({})", o.by)),
            ));
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(Duration::from_millis(29_812)), "29.8s");
        assert_eq!(duration(Duration::from_millis(250)), "0.2s");
        assert_eq!(duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(duration(Duration::from_secs(7380)), "2h03m");
        assert_eq!(duration(Duration::MAX), "never");
    }

    #[test]
    fn tables_align_columns() {
        let t = table(
            &["A", "LONG HEADER", "C"],
            &[
                vec!["wide cell".into(), "x".into(), "1".into()],
                vec!["y".into(), "z".into(), "22".into()],
            ],
        );
        assert_eq!(
            t,
            "A          LONG HEADER  C\nwide cell  x            1\ny          z            22\n"
        );
    }
}
