//! The timeline as a self-contained SVG picture.

use super::*;
use crate::render::short_owner;

/// The SVG's width, px.
const WIDTH: f64 = 1200.0;
/// The width of the row labels' column, and the margin right of the plot, px.
const LABELS: f64 = 250.0;
const RIGHT: f64 = 32.0;
/// The height of a lane, px.
const LANE: f64 = 28.0;
/// Where the first row begins (below the title and the axis), px.
const TOP: f64 = 56.0;
/// The locks' colours (Tableau 10), in the order of their first events, then again.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
/// Legend entries per line, and the width of each, px.
const LEGEND_COLUMNS: usize = 4;
const LEGEND_WIDTH: f64 = 290.0;

/// [`svg`] of `events`, whose spans and marks are `timeline`.
pub(super) fn svg_of(events: &[HistoryEvent], timeline: &Timeline) -> String {
    let layout = layout(events, timeline);
    // Each owner's first lane's row (the rows' lanes one under another).
    let mut first_row = Vec::new();
    let mut rows = 0;
    for lanes in &layout.lanes {
        first_row.push(rows);
        rows += lanes;
    }
    let bottom = TOP + rows as f64 * LANE;
    let legend_lines = layout.locks.len().div_ceil(LEGEND_COLUMNS) + 1;
    let height = bottom + 24.0 + legend_lines as f64 * 20.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{WIDTH}\" height=\"{height}\" fill=\"white\"/>\n"
    );
    let title = if events.is_empty() {
        "No lock history recorded".to_owned()
    } else {
        format!(
            "Lock history: {} events, times from {}",
            events.len(),
            rfc3339(layout.from_us)
        )
    };
    out.push_str(&format!(
        "<text x=\"10\" y=\"18\" font-weight=\"bold\">{}</text>\n",
        escape(&title)
    ));
    let x = |t: u64| {
        let span = (layout.to_us - layout.from_us) as f64;
        LABELS + (t.saturating_sub(layout.from_us)) as f64 / span * (WIDTH - LABELS - RIGHT)
    };
    for (i, o) in layout.owners.iter().enumerate() {
        out.push_str(&row(o, first_row[i], layout.lanes[i], i));
    }
    if !events.is_empty() {
        out.push_str(&axis(&layout, &x, bottom));
    }
    for (s, &(owner, lane)) in timeline.spans.iter().zip(&layout.place) {
        let y = TOP + (first_row[owner] + lane) as f64 * LANE;
        let colour = colour(&layout, &s.lock);
        out.push_str(&bar(s, x(s.start_us), x(s.end_us), y, colour));
    }
    for m in &timeline.marks {
        if let Some((owner, lane)) = layout.mark_place(timeline, m) {
            let y = TOP + (first_row[owner] + lane) as f64 * LANE + LANE / 2.0;
            out.push_str(&marker(m, x(m.at_us), y));
        }
    }
    out.push_str(&legend(&layout, bottom + 24.0));
    out.push_str("</svg>\n");
    out
}

/// The time axis above the rows: ticks at round times from the start, with labels, and grid
/// lines down to `bottom`.
fn axis(layout: &Layout<'_>, x: &dyn Fn(u64) -> f64, bottom: f64) -> String {
    let range = layout.to_us - layout.from_us;
    let step = tick_step(range);
    let y = TOP - 6.0;
    let mut out = format!(
        "<line x1=\"{LABELS}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{y}\" stroke=\"#333\"/>\n",
        WIDTH - RIGHT
    );
    for t in (0..=range).step_by(step as usize) {
        let tx = x(layout.from_us + t);
        out.push_str(&format!(
            "<line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/>\n\
             <line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{y}\" stroke=\"#333\"/>\n\
             <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
            y,
            y - 5.0,
            y - 9.0,
            tick_label(t, step)
        ));
    }
    out
}

/// A round step between ticks (1, 2 or 5 times a power of ten, µs): at most 10 over `range`.
pub(super) fn tick_step(range_us: u64) -> u64 {
    let mut power = 1;
    loop {
        for m in [1, 2, 5] {
            if range_us / (power * m) <= 10 {
                return power * m;
            }
        }
        power *= 10;
    }
}

/// A tick's label, `t_us` from the start: whole seconds or milliseconds when the step is,
/// else milliseconds with as many decimals as the step needs.
pub(super) fn tick_label(t_us: u64, step_us: u64) -> String {
    if step_us >= 1_000_000 {
        format!("{} s", t_us / 1_000_000)
    } else if step_us >= 1000 {
        format!("{} ms", t_us / 1000)
    } else {
        let decimals = if step_us >= 100 {
            1
        } else if step_us >= 10 {
            2
        } else {
            3
        };
        format!("{:.*} ms", decimals, t_us as f64 / 1000.0)
    }
}

/// An owner's row: a band (every other one shaded) over its lanes, and its label (its thread
/// and short owner id; the whole as a tooltip).
fn row(owner: &HistoryEvent, first: usize, lanes: usize, index: usize) -> String {
    let y = TOP + first as f64 * LANE;
    let h = lanes as f64 * LANE;
    let fill = if index.is_multiple_of(2) {
        "#f4f4f4"
    } else {
        "#ffffff"
    };
    let label = format!(
        "{} ({})",
        clip(&owner.thread, 22),
        short_owner(&owner.owner)
    );
    let full = format!(
        "{} ({}) of {} pid {} on {}",
        owner.thread, owner.owner, owner.client_name, owner.pid, owner.host
    );
    format!(
        "<rect x=\"0\" y=\"{y}\" width=\"{WIDTH}\" height=\"{h}\" fill=\"{fill}\"/>\n\
         <text x=\"8\" y=\"{:.1}\"><title>{}</title>{}</text>\n",
        y + LANE / 2.0 + 4.0,
        escape(&full),
        escape(&label)
    )
}

/// A span's bar in its lane at `y`: a hold filled with its lock's colour, a wait thinner,
/// light and outlined; the span as a tooltip. At least a pixel wide.
fn bar(s: &Span, x0: f64, x1: f64, y: f64, colour: &str) -> String {
    let w = (x1 - x0).max(1.0);
    let (what, shape) = match s.kind {
        SpanKind::Hold => (
            "held",
            format!(
                "y=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"",
                y + 5.0,
                LANE - 10.0
            ),
        ),
        SpanKind::Wait => (
            "waited for",
            format!(
                "y=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\" fill-opacity=\"0.25\" \
                 stroke=\"{colour}\" stroke-dasharray=\"3 2\"",
                y + 9.0,
                LANE - 18.0
            ),
        ),
    };
    let tip = format!(
        "{} {what} {} ({}): {}, {}",
        s.thread,
        s.lock,
        s.mode,
        duration(s.end_us.saturating_sub(s.start_us)),
        s.outcome
    );
    format!(
        "<rect x=\"{x0:.1}\" width=\"{w:.1}\" {shape}><title>{}</title></rect>\n",
        escape(&tip)
    )
}

/// A mark centred at (`x`, `y`): a cross for a hold lost, a diamond for a deadlock.
fn marker(m: &Mark, x: f64, y: f64) -> String {
    let tip = escape(&format!("{} {} ({})", m.what, m.lock, m.owner));
    shape(m.what, &tip, x, y)
}

/// The shape of a mark of `what` (`lost` or `deadlock`) centred at (`x`, `y`), with the
/// (escaped) tooltip `tip`.
fn shape(what: &str, tip: &str, x: f64, y: f64) -> String {
    if what == "lost" {
        format!(
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"#111\" \
             stroke-width=\"2.5\"><title>{tip}</title></path>\n",
            x - 5.0,
            y - 5.0,
            x + 5.0,
            y + 5.0,
            x - 5.0,
            y + 5.0,
            x + 5.0,
            y - 5.0
        )
    } else {
        format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" fill=\"#111\" \
             stroke=\"white\"><title>{tip}</title></path>\n",
            y - 6.0,
            x + 6.0,
            y + 6.0,
            x - 6.0
        )
    }
}

/// The legend from `y` down: each lock's colour, then what the shapes mean.
fn legend(layout: &Layout<'_>, y: f64) -> String {
    let mut out = String::new();
    for (i, lock) in layout.locks.iter().enumerate() {
        let lx = 10.0 + (i % LEGEND_COLUMNS) as f64 * LEGEND_WIDTH;
        let ly = y + (i / LEGEND_COLUMNS) as f64 * 20.0;
        out.push_str(&format!(
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n\
             <text x=\"{}\" y=\"{ly}\"><title>{}</title>{}</text>\n",
            ly - 10.0,
            colour(layout, lock),
            lx + 18.0,
            escape(lock),
            escape(&clip(lock, 40))
        ));
    }
    let ly = y + layout.locks.len().div_ceil(LEGEND_COLUMNS) as f64 * 20.0;
    let cross = shape("lost", "lost", 186.0, ly - 4.0);
    let diamond = shape("deadlock", "deadlock", 246.0, ly - 4.0);
    out.push_str(&format!(
        "<rect x=\"10\" y=\"{:.1}\" width=\"24\" height=\"12\" fill=\"#888\"/>\n\
         <text x=\"40\" y=\"{ly}\">hold</text>\n\
         <rect x=\"90\" y=\"{:.1}\" width=\"24\" height=\"8\" fill=\"#888\" fill-opacity=\"0.25\" \
         stroke=\"#888\" stroke-dasharray=\"3 2\"/>\n\
         <text x=\"120\" y=\"{ly}\">wait</text>\n\
         {cross}<text x=\"198\" y=\"{ly}\">lost</text>\n\
         {diamond}<text x=\"258\" y=\"{ly}\">deadlock</text>\n",
        ly - 10.0,
        ly - 8.0
    ));
    out
}

/// The colour of `lock`: the palette's, in the order of the locks' first events.
fn colour(layout: &Layout<'_>, lock: &str) -> &'static str {
    let i = layout.locks.iter().position(|l| *l == lock).unwrap_or(0);
    PALETTE[i % PALETTE.len()]
}

/// `s`, cut to `max` characters with an ellipsis when longer.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        format!("{}…", clip_plain(s, max - 1))
    }
}

/// The first `max` characters of `s`.
fn clip_plain(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// `850 µs`, `12.3 ms`, `4.56 s`.
fn duration(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{:.2} s", us as f64 / 1_000_000.0)
    }
}

/// `s` as XML text or attribute value.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 (tab and line ends are).
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}
