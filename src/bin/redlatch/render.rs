//! Output: library values as aligned human-readable tables (JSON is their serde
//! serialization: see `main.rs`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlatch::{
    deadlock::BrokenDeadlock, deadlock::WaitRecord, history::HistoryEvent, history::HistoryKind,
    inspect::ClientConnection, inspect::Holder, inspect::Inspection, inspect::Kind,
    inspect::RateInspection, order::LockOrderWarning, top::Activity, top::Who, watch::Event, Owner,
    RateType, RevokeEvent,
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

/// `text` fit for a terminal: what anyone who may name a lock (or write a lock's keys) could
/// put there to move the cursor, recolour the screen or forge a line (control characters,
/// bidirectional overrides, zero-width and other unprintable characters) written as Rust's
/// `escape_debug` writes it (`\n`, `\u{1b}`, `\u{202e}`), and a backslash doubled, so that
/// what is shown names one string only; quotes are left as they are. The one escape of
/// every human-readable output (JSON is exact: serde escapes it its own way).
pub fn escaped(text: &str) -> Cow<'_, str> {
    let needs = |c: char| c == '\\' || c.escape_debug().nth(1).is_some() && c != '"' && c != '\'';
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    // `str::escape_debug` (grapheme extenders escaped only at the start, as it does), with
    // the escapes of quotes taken back out.
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.escape_debug();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(quote @ ('"' | '\'')) => out.push(quote),
            Some(next) => {
                out.push('\\');
                out.push(next);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// Bytes (a value, a name from outside that may not be UTF-8) as [`escaped`] text: each
/// byte that is not part of UTF-8 as `\xff`.
pub fn escaped_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escaped(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The widest a name (or an owner) is shown in a table: longer ones are cut, with [`CUT`].
pub const NAME_WIDTH: usize = 48;

/// What ends a cut cell.
pub const CUT: char = '…';

/// `text` at most `max` characters wide: a longer one cut to `max - 1` and [`CUT`].
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let keep = max.saturating_sub(1);
            let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
            Cow::Owned(format!("{}{CUT}", &text[..end]))
        }
    }
}

/// Rows under a header, each column as wide as its widest cell (the last one unpadded); every
/// cell [`escaped`], then those of column `i` [`cut`] to `widest[i]` characters (`0`, or a
/// column past `widest`: not cut), so that a 10 kB name does not make every row 10 kB wide.
pub fn table(header: &[&str], rows: &[Vec<String>], widest: &[usize]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(i, cell)| {
                    let cell = escaped(cell);
                    match widest.get(i) {
                        Some(&max) if max > 0 => cut(&cell, max).into_owned(),
                        _ => cell.into_owned(),
                    }
                })
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
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
    for row in &rows {
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
/// from <where>, lease ends in 29.8s`, the fair queue ahead, or the permits taken
/// ([`escaped`]).
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
    escaped(&parts.join(", ")).into_owned()
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

/// A one-line state for `list`: who holds it (each owner cut to [`NAME_WIDTH`]), or its
/// permits or count; not escaped yet.
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
                    .map(|h| cut(&h.owner.to_string(), NAME_WIDTH).into_owned())
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
        Kind::RateLimiter => {
            if let Some(r) = &i.rate {
                parts.push(rate_text(r));
                match r.available {
                    Some(left) => {
                        parts.push(format!("{left} left"));
                        if let Some(back) = r.next_back_in {
                            parts.push(format!("next in {}", duration(back)));
                        }
                    }
                    None => parts.push(format!("{} client(s)", r.clients.len())),
                }
            }
        }
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

/// A rate limiter's rate: `10 per 1.0s`, and ` per client` for a per-client one.
fn rate_text(r: &RateInspection) -> String {
    let per = match r.config.rate_type {
        RateType::PerClient => " per client",
        _ => "",
    };
    format!("{} per {}{per}", r.config.rate, duration(r.config.interval))
}

/// `inspect`'s fields of a rate limiter: its rate and type, what it has left and when the
/// next permit comes back, its keep-alive.
fn rate_fields(r: &RateInspection, field: &mut impl FnMut(&str, String)) {
    let per_client = r.config.rate_type == RateType::PerClient;
    field(
        "rate",
        format!("{} per {}", r.config.rate, duration(r.config.interval)),
    );
    field(
        "type",
        if per_client {
            "per client: each client counts its own permits".to_owned()
        } else {
            "overall: one count for every client".to_owned()
        },
    );
    match r.available {
        Some(left) => field("left", format!("{left} permits")),
        None if r.clients.is_empty() => field("left", "no client's permits found".to_owned()),
        None => field(
            "left",
            format!("per client: {} client(s) found, below", r.clients.len()),
        ),
    }
    if !per_client {
        field("next", next_back(r.next_back_in));
    }
    if let Some(keep) = r.config.keep_alive {
        field(
            "expiry",
            format!("{} after its last acquire", duration(keep)),
        );
    }
}

/// When the next permit comes back: `in 0.4s`, or `none taken`.
fn next_back(d: Option<Duration>) -> String {
    d.map_or_else(
        || "none taken".to_owned(),
        |d| format!("in {}", duration(d)),
    )
}

/// `list`'s table, names cut to [`NAME_WIDTH`].
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
    table(
        &["NAME", "KIND", "LEASE", "STATE", "CLIENTS"],
        &rows,
        &[NAME_WIDTH],
    )
}

/// `inspect`'s text: a block of fields (the whole name, escaped), then a table per list of
/// holders, waiters, permits.
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
    if let Some(r) = &i.rate {
        rate_fields(r, &mut field);
    }
    if let Some(n) = i.subscribers {
        field("waiting", format!("{n} client(s) subscribed"));
    }
    field("keys", i.keys.join(" "));
    let mut out = String::new();
    for row in &fields {
        out.push_str(&format!(
            "{:<9}{}\n",
            format!("{}:", row[0]),
            escaped(&row[1])
        ));
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
            &[NAME_WIDTH, NAME_WIDTH],
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
            &[NAME_WIDTH],
        ));
    }
    if !i.readers.is_empty() {
        out.push_str("\nreaders:\n");
        out.push_str(&table(
            &["CLIENT ID", "THREAD", "HOLDS", "LEASES", "CONNECTIONS"],
            &holder_rows(i, &i.readers),
            &[NAME_WIDTH],
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
            &[0, NAME_WIDTH],
        ));
    }
    if !i.priorities.is_empty() {
        let rows: Vec<Vec<String>> = i
            .priorities
            .iter()
            .enumerate()
            .map(|(place, w)| {
                vec![
                    (place + 1).to_string(),
                    w.id.clone(),
                    format!("{:.1}", w.effective),
                    w.place_ends_in.map_or_else(|| "-".to_owned(), duration),
                ]
            })
            .collect();
        out.push_str("\nwaiters with a priority (highest effective priority first):\n");
        out.push_str(&table(
            &["#", "WAITER", "EFFECTIVE PRIORITY", "PLACE ENDS IN"],
            &rows,
            &[0, NAME_WIDTH],
        ));
    }
    if let Some(r) = i.rate.as_ref().filter(|r| !r.clients.is_empty()) {
        let rows: Vec<Vec<String>> = r
            .clients
            .iter()
            .map(|b| {
                vec![
                    b.client_id.clone(),
                    b.available.to_string(),
                    next_back(b.next_back_in),
                ]
            })
            .collect();
        out.push_str("\nclients:\n");
        out.push_str(&table(&["CLIENT ID", "LEFT", "NEXT"], &rows, &[NAME_WIDTH]));
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
        out.push_str(&table(&["PERMIT", "EXPIRES IN"], &rows, &[NAME_WIDTH]));
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

/// A watch event as one line: time, event, owner ([`escaped`]), details.
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
        .map_or_else(|| "-".to_owned(), |o| escaped(&o.to_string()).into_owned());
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
                w.owner.to_string(),
                w.mode.to_string(),
                duration(w.waited),
                w.blocked_by
                    .iter()
                    .map(Owner::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    table(
        &["", "LOCK", "WAITER", "MODE", "WAITED", "BLOCKED BY"],
        &rows,
        &[0, NAME_WIDTH, NAME_WIDTH],
    )
}

/// `redlatch waits --deadlocks`: per broken deadlock, when and its victim, then a line per
/// step: the owner, who it is, the lock it waited for, the owner in its way.
pub fn deadlocks_text(broken: &[BrokenDeadlock]) -> String {
    let mut text = String::new();
    for d in broken {
        let at = UNIX_EPOCH + Duration::from_micros(d.at_us);
        let _ = writeln!(
            text,
            "{}  deadlock of {} broken: {} waited no more",
            timestamp(at),
            d.cycle.len(),
            escaped(&d.victim.to_string())
        );
        for s in &d.cycle {
            let _ = writeln!(
                text,
                "    {} ({}) waited for {} held by {}",
                escaped(&s.owner.to_string()),
                who_text(&s.who),
                escaped(&s.lock),
                escaped(&s.blocked_by.to_string())
            );
        }
    }
    text
}

/// An owner shortened for a table or a picture: the client id's first 8 characters and
/// the thread.
pub fn short_owner(owner: &Owner) -> String {
    let client: String = owner.client_id.chars().take(8).collect();
    format!("{client}:{}", owner.thread)
}

/// `client, pid P on HOST, thread T` (`?` where not known), escaped for a terminal.
fn who_text(who: &Who) -> String {
    escaped(&who.to_string()).into_owned()
}

/// `redlatch top`: the table, then who holds the first locks waited for, and the blame of
/// the first locks that have any.
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
                // Threads wait, for how long nothing tells: unknown, not none.
                match (a.longest_wait, a.waiters) {
                    (Some(w), _) => duration(w),
                    (None, 0) => "-".to_owned(),
                    (None, _) => "?".to_owned(),
                },
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
        &[NAME_WIDTH],
    );
    // Who holds the first locks that others wait for: what an operator opens top to find.
    for a in rows
        .iter()
        .filter(|a| a.waiters > 0 && !a.holders.is_empty())
        .take(3)
    {
        out.push_str(&format!("\n{}: held by\n", escaped(&a.name)));
        for h in &a.holders {
            out.push_str(&format!(
                "  {:>8}  {} ({})\n",
                h.held_for.map_or("?".to_owned(), duration),
                escaped(&short_owner(&h.owner)),
                h.who.as_ref().map_or("not known".to_owned(), who_text)
            ));
        }
    }
    for a in rows.iter().filter(|a| !a.blame.is_empty()).take(3) {
        out.push_str(&format!(
            "\n{}: who made others wait over the last {}\n",
            escaped(&a.name),
            duration(window)
        ));
        for b in a.blame.iter().take(5) {
            out.push_str(&format!(
                "  {:>8}  {} waits  {} ({})\n",
                duration(b.caused_wait),
                b.waits,
                escaped(&short_owner(&b.owner)),
                who_text(&b.who)
            ));
        }
    }
    let broken: Vec<String> = rows
        .iter()
        .filter(|a| a.deadlocks > 0)
        .map(|a| format!("{} {}", escaped(&a.name), a.deadlocks))
        .collect();
    if !broken.is_empty() {
        out.push_str(&format!(
            "
deadlocks broken over the last {}: {} (redlatch waits --deadlocks)
",
            duration(window),
            broken.join(", ")
        ));
    }
    out
}

/// `redlatch history NAME`: one event a line.
pub fn history_text(events: &[HistoryEvent], revocations: &[RevokeEvent]) -> String {
    // Each line with its time, hold events and revocations merged in time order (a sort
    // that keeps each list's own order for equal times).
    let mut lines: Vec<(u64, String)> = Vec::with_capacity(events.len() + revocations.len());
    for e in events {
        let at = UNIX_EPOCH + Duration::from_micros(e.at_us);
        let mut line = format!(
            "{}  {:<9} {}  ({}, pid {} on {}, thread {})",
            timestamp(at),
            e.kind.to_string(),
            escaped(&e.owner.to_string()),
            escaped(&e.client_name),
            e.pid,
            escaped(&e.host),
            escaped(&e.thread)
        );
        let waited = e.contended || e.kind != HistoryKind::Acquire;
        if let Some(w) = e.waited.filter(|_| waited) {
            line.push_str(&format!(" waited {}", duration(w)));
        }
        if let Some(h) = e.held {
            line.push_str(&format!(" held {}", duration(h)));
        }
        lines.push((e.at_us, line));
    }
    for r in revocations {
        let at = UNIX_EPOCH + Duration::from_millis(r.at_ms);
        let mut line = format!(
            "{}  {:<9} {}  by {}",
            timestamp(at),
            r.event,
            escaped(&r.whom),
            escaped(&r.by)
        );
        if let Some(token) = r.token {
            line.push_str(&format!(", token {token}"));
        }
        if !r.reason.is_empty() {
            line.push_str(&format!(": {}", escaped(&r.reason)));
        }
        lines.push((r.at_ms.saturating_mul(1000), line));
    }
    lines.sort_by_key(|(at, _)| *at);
    let mut out = String::new();
    for (_, line) in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A lock's revocations for `history --json`.
pub fn revocations_json(revocations: &[RevokeEvent]) -> serde_json::Value {
    revocations
        .iter()
        .map(|r| {
            serde_json::json!({
                "at": timestamp(UNIX_EPOCH + Duration::from_millis(r.at_ms)),
                "at_ms": r.at_ms,
                "event": r.event,
                "by": r.by,
                "whom": r.whom,
                "token": r.token,
                "reason": r.reason,
            })
        })
        .collect()
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
            escaped(&w.one.held),
            escaped(&w.one.taken),
            escaped(&w.one.to_string()),
            escaped(&w.other.to_string())
        ));
    }
    out
}

/// `redlatch waits --dot`: a Graphviz digraph, waiter -> owner in its way, labelled with the
/// lock; the edges of cycles red; a dashed orange edge each way between two locks taken in
/// opposite orders.
pub fn waits_dot(waits: &[WaitRecord], warnings: &[LockOrderWarning]) -> String {
    let quote = |s: &str| {
        let s = escaped(s);
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    };
    let mut out = String::from("digraph waits {\n  rankdir=LR;\n  node [shape=box];\n");
    for w in waits {
        for by in &w.blocked_by {
            let cycle = w.in_cycle && waits.iter().any(|o| o.owner == *by && o.in_cycle);
            out.push_str(&format!(
                "  {} -> {} [label={}{}];\n",
                quote(&w.owner.to_string()),
                quote(&by.to_string()),
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
    fn escapes_what_paints_a_terminal_and_nothing_else() {
        assert!(matches!(escaped("orders:1001"), Cow::Borrowed(_)));
        assert_eq!(escaped("café, 東京 \"q\" 'q'"), "café, 東京 \"q\" 'q'");
        assert_eq!(
            escaped("evil\x1b[31mRED\x1b[0m\nforged\r\t\x07\x7f\u{9b}"),
            "evil\\u{1b}[31mRED\\u{1b}[0m\\nforged\\r\\t\\u{7}\\u{7f}\\u{9b}"
        );
        // Bidirectional overrides and zero-width characters reorder or hide text.
        assert_eq!(
            escaped("a\u{202e}b\u{200b}c\u{feff}"),
            "a\\u{202e}b\\u{200b}c\\u{feff}"
        );
        // A backslash is doubled: what is shown names one string only.
        assert_eq!(escaped("a\\nb"), "a\\\\nb");
        assert_ne!(escaped("a\\nb"), escaped("a\nb"));
        // A combining mark after its letter is text (decomposed é).
        assert_eq!(escaped("cafe\u{301}"), "cafe\u{301}");
        assert_eq!(escaped_bytes(b"ok:\xff\xfe\x1b"), "ok:\\xff\\xfe\\u{1b}");
        assert_eq!(escaped_bytes("é".as_bytes()), "é");
    }

    #[test]
    fn long_cells_are_cut_with_a_mark() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("0123456789", 10), "0123456789");
        assert_eq!(cut("0123456789x", 10), "012345678…");
        assert_eq!(cut("ééééé", 3), "éé…");
        let long = "n".repeat(10_000);
        let t = table(
            &["NAME", "KIND"],
            &[
                vec![long.clone(), "reentrant".into()],
                vec!["a\nb".into(), "fair".into()],
            ],
            &[NAME_WIDTH],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        let kind_at = lines[0].find("KIND").unwrap();
        assert_eq!(kind_at, NAME_WIDTH + 2);
        assert!(lines[1].starts_with(&format!("{}…  reentrant", &long[..NAME_WIDTH - 1])));
        assert!(lines[2].starts_with("a\\nb "), "{t}");
        for line in &lines {
            assert_eq!(line.chars().nth(kind_at - 1), Some(' '), "{t}");
            assert_ne!(line.chars().nth(kind_at), Some(' '), "{t}");
        }
    }

    #[test]
    fn tables_align_columns() {
        let t = table(
            &["A", "LONG HEADER", "C"],
            &[
                vec!["wide cell".into(), "x".into(), "1".into()],
                vec!["y".into(), "z".into(), "22".into()],
            ],
            &[],
        );
        assert_eq!(
            t,
            "A          LONG HEADER  C\nwide cell  x            1\ny          z            22\n"
        );
    }
}
