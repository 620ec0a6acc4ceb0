//! The WORKER pane (SPEC W5–W10, U2): the current generation, the queue against its limits,
//! the four phase timers against their ceilings, RSS against the 1 GiB limit with its history,
//! launches in the rolling minute and the last retirements. It has no keys.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, LineGauge, Sparkline};

use super::view::View;
use crate::console::limits::{
    GENERATION_MAX_AGE_MS, Level, MAX_LAUNCHES_PER_MINUTE, OLD_SPACE_BYTES, Phase,
    QUEUE_ACTIVE_MAX, QUEUE_WAITING_MAX,
};
use crate::console::state::WorkerState;
use crate::console::theme::{MIB, Theme, hms, secs, squares};

/// ` (last: lock holder, ceiling 0.25 s)` when the last completed span ran under another
/// ceiling than the one on the label (W7's lock-holder admission); empty otherwise.
fn lock_holder_note(t: &crate::console::state::PhaseTimer, live: bool) -> String {
    if live || t.last_ms.is_none() || t.last_ceiling_ms == t.ceiling_ms {
        return String::new();
    }
    format!(
        " (last: lock holder, ceiling {})",
        secs(Some(t.last_ceiling_ms))
    )
}

/// The WORKER pane (W5–W10), drawn row by row into `area`: the generation line, the queue with
/// a `Sparkline` of its depth, a `LineGauge` per phase timer against its ceiling (below 9 rows
/// the four timers share one line, each keeping its word), RSS with a `LineGauge` against the
/// limit and a `Sparkline` of its history, launches and retirements; on a pane with
/// [`RSS_CHART_ROWS`] rows to spare, a `Chart` of RSS over the samples kept.
pub fn draw(frame: &mut Frame, view: &View, area: Rect) {
    let theme = &view.theme;
    // Row `i` of the pane (empty below its bottom: nothing is drawn there).
    let row =
        |i: u16| Rect::new(area.x, area.y.saturating_add(i), area.width, 1).intersection(area);
    frame.render_widget(worker_generation(view, theme), row(0));
    draw_worker_queue(frame, view.monitor, theme, row(1));
    let phase_rows = if area.height < WORKER_TEXT_ROWS {
        frame.render_widget(worker_phases_line(view, theme), row(2));
        1
    } else {
        for (i, phase) in (2..).zip(Phase::ALL) {
            draw_worker_phase(frame, view, theme, phase, area.width, row(i));
        }
        4
    };
    draw_worker_rss(frame, view, theme, row(2 + phase_rows));
    frame.render_widget(worker_launches(view, theme), row(3 + phase_rows));
    frame.render_widget(worker_retirements(view.monitor, theme), row(4 + phase_rows));
    let used = 5 + phase_rows;
    if area.height >= used + RSS_CHART_ROWS {
        let chart = Rect::new(area.x, area.y + used, area.width, area.height - used);
        draw_rss_chart(frame, view.monitor, theme, chart);
    }
}

/// Rows a worker pane needs beyond its text rows to show the RSS chart.
pub const RSS_CHART_ROWS: u16 = 6;
/// Text rows of a worker pane tall enough for one row per phase timer.
pub const WORKER_TEXT_ROWS: u16 = 9;

/// Renders `before`, then `widget` in the next `width` cells, then `after`, on the one-row
/// `area` (each part cut where the row ends).
fn render_in_row(
    frame: &mut Frame,
    area: Rect,
    before: Line,
    widget: impl ratatui::widgets::Widget,
    width: u16,
    after: Line,
) {
    let (first, rest) = split_row(area, before.width() as u16);
    let (middle, last) = split_row(rest, width);
    frame.render_widget(before, first);
    frame.render_widget(widget, middle);
    frame.render_widget(after, last);
}

/// `area` cut after `width` cells (at most all of it): the part before and the rest.
fn split_row(area: Rect, width: u16) -> (Rect, Rect) {
    let width = width.min(area.width);
    let rest = Rect {
        x: area.x + width,
        width: area.width - width,
        ..area
    };
    (Rect { width, ..area }, rest)
}

/// Bars for the one-row sparklines: a zero is the lowest bar, not a blank, so an idle queue
/// still shows its history.
const SPARK_BARS: symbols::bar::Set = symbols::bar::Set {
    empty: symbols::bar::ONE_EIGHTH,
    ..symbols::bar::NINE_LEVELS
};

/// A one-row sparkline of the last `width` of `values`, a full bar at `max`.
fn sparkline<'a>(values: &[u64], max: u64, width: u16, style: Style) -> Sparkline<'a> {
    let start = values.len().saturating_sub(width as usize);
    Sparkline::default()
        .data(values[start..].to_vec())
        .max(max.max(1))
        .bar_set(SPARK_BARS)
        .style(style)
}

/// A gauge of `ratio` (clamped to 0..=1) after `label`: thick where filled, thin where not, so
/// it reads the same without colour.
fn line_gauge<'a>(label: Line<'a>, ratio: f64, theme: &Theme, level: Level) -> LineGauge<'a> {
    let ratio = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    LineGauge::default()
        .label(label)
        .ratio(ratio)
        .filled_symbol(symbols::line::THICK_HORIZONTAL)
        .unfilled_symbol(symbols::line::HORIZONTAL)
        .filled_style(theme.level(level))
        .unfilled_style(theme.dim())
}

/// `gen G · pid P · state · age A / 60 min · ready in R` (W10).
fn worker_generation<'a>(view: &View, theme: &Theme) -> Line<'a> {
    let now = view.now_ms;
    let w = &view.monitor.worker;
    // The process table decides: a worker whose pid is gone is gone, whatever the last event
    // said (a SIGKILL writes no retirement), and its age stops.
    let vanished = vanished(view);
    let age = w.age_ms(now).filter(|_| vanished.is_none());
    let age_level = age.map_or(Level::Ok, |a| Level::of(a, GENERATION_MAX_AGE_MS));
    let state = vanished.unwrap_or_else(|| w.state.word().to_owned());
    Line::from(vec![
        Span::raw(format!(
            "gen {} · worker pid {} · {state} · age ",
            w.generation.map_or("-".into(), |g| g.to_string()),
            w.pid.map_or("-".into(), |p| p.to_string()),
        )),
        Span::styled(
            format!(
                "{} / {}",
                age.map_or("--:--".into(), hms),
                hms(GENERATION_MAX_AGE_MS)
            ),
            theme.level(age_level),
        ),
        Span::raw(
            w.ready_after_ms
                .map_or(String::new(), |r| format!(" · ready in {}", secs(Some(r)))),
        ),
    ])
}

/// `gone (…)` when the current generation's pid has left the process table although no
/// retirement was recorded for it (killed with its MCP process, say), with how it ended when
/// the sample saw its exit; `None` while it runs or after a recorded retirement.
pub fn vanished(view: &View) -> Option<String> {
    let w = &view.monitor.worker;
    if matches!(w.state, WorkerState::Retired(_) | WorkerState::None) {
        return None;
    }
    let pid = w.pid.filter(|p| view.procs.gone(*p))?;
    Some(
        match view
            .procs
            .state
            .get(&pid)
            .and_then(|s| s.strip_prefix("Z "))
        {
            Some(how) => format!("gone ({how}, no retirement recorded)"),
            None => "gone (its process ended without a retirement)".to_owned(),
        },
    )
}

/// Cells of the queue-depth sparkline.
const QUEUE_SPARK_WIDTH: u16 = 12;

/// The queue row: active/waiting squares, saturation remembered (peak, full, expired) and a
/// sparkline of the waiting depth against the 8 allowed (W5).
fn draw_worker_queue(
    frame: &mut Frame,
    m: &crate::console::state::Monitor,
    theme: &Theme,
    row: Rect,
) {
    let waiting_level = Level::of(m.queue_waiting as f64, QUEUE_WAITING_MAX as f64);
    let saturated = if m.queue_full + m.queue_expired > 0 {
        theme.level(Level::High)
    } else {
        theme.level(Level::Ok)
    };
    let before = Line::from(vec![
        Span::raw(format!(
            "queue   active {} {}/{}   waiting {} {}/{} ",
            squares(m.queue_active, QUEUE_ACTIVE_MAX),
            m.queue_active,
            QUEUE_ACTIVE_MAX,
            squares(m.queue_waiting, QUEUE_WAITING_MAX),
            m.queue_waiting,
            QUEUE_WAITING_MAX
        )),
        Span::styled(waiting_level.word(), theme.level(waiting_level)),
        // Saturation is remembered after the queue drains.
        Span::styled(
            format!(
                "  peak {}/{QUEUE_WAITING_MAX} · full {} · expired {} ",
                m.queue_peak_waiting, m.queue_full, m.queue_expired,
            ),
            saturated,
        ),
    ]);
    let depths: Vec<u64> = m.queue_depths.iter().copied().collect();
    let spark = sparkline(&depths, QUEUE_WAITING_MAX, QUEUE_SPARK_WIDTH, saturated);
    render_in_row(
        frame,
        row,
        before,
        spark,
        QUEUE_SPARK_WIDTH,
        Line::default(),
    );
}

/// All four phase timers on one line, each with its word (a short pane, W6, W7).
fn worker_phases_line<'a>(view: &View, theme: &Theme) -> Line<'a> {
    let (m, now) = (view.monitor, view.now_ms);
    let mut spans = vec![Span::raw("phases ")];
    for phase in Phase::ALL {
        let t = m.phase(phase);
        let (shown, live) = t.shown_ms(now);
        let level = t.level(now);
        spans.push(Span::raw(format!(
            "{} {}{} ",
            phase.label(),
            if live { "▶" } else { "" },
            secs(shown)
        )));
        spans.push(Span::styled(
            format!("{} ", level.symbol()),
            theme.level(level),
        ));
    }
    Line::from(spans)
}

/// One phase timer's row: its time, a gauge against its ceiling, the ceiling and its word
/// (W6, W7). The gauge is 12 cells wide on a pane of 70 or more, else 6.
fn draw_worker_phase(
    frame: &mut Frame,
    view: &View,
    theme: &Theme,
    phase: Phase,
    width: u16,
    row: Rect,
) {
    let (m, now) = (view.monitor, view.now_ms);
    let gauge_w = if width >= 70 { 12 } else { 6 };
    let t = m.phase(phase);
    let (shown, live) = t.shown_ms(now);
    let level = t.level(now);
    let failed = !live && shown.is_some() && !t.last_ok;
    let label = Line::raw(format!(
        "{}{:<10} {} {:>8}",
        if phase == Phase::Admission {
            "phases  "
        } else {
            "        "
        },
        phase.label(),
        if live { "▶" } else { "·" },
        secs(shown),
    ));
    let label_w = label.width() as u16;
    let gauge = line_gauge(label, shown.unwrap_or(0.0) / t.ceiling_ms, theme, level);
    let after = Line::from(vec![
        Span::raw(format!(" {:>5} ", secs(Some(t.ceiling_ms)))),
        Span::styled(level.word(), theme.level(level)),
        Span::styled(
            if failed { " (last failed)" } else { "" },
            theme.level(Level::High),
        ),
        Span::styled(lock_holder_note(t, live), theme.dim()),
    ]);
    render_in_row(
        frame,
        row,
        Line::default(),
        gauge,
        label_w + 1 + gauge_w,
        after,
    );
}

/// Why the worker is gone (a retirement, or its process exited), or `None` while it runs.
fn worker_gone(view: &View) -> Option<String> {
    let m = view.monitor;
    match &m.worker.state {
        WorkerState::Retired(r) => Some(format!("worker gone ({r})")),
        _ => m
            .worker
            .pid
            .filter(|p| view.procs.gone(*p))
            .map(|_| "worker gone (process exited)".to_owned()),
    }
}

/// Cells of the RSS gauge.
const RSS_GAUGE_WIDTH: u16 = 12;

/// The RSS row: current value with a gauge against the 1 GiB limit (high from 768 MiB, 75 %),
/// a sparkline of the samples kept, the limits and the level word, or that the worker is gone
/// (after `stop` or a retirement: said rather than a frozen value, W9).
fn draw_worker_rss(frame: &mut Frame, view: &View, theme: &Theme, row: Rect) {
    let m = view.monitor;
    let gone = worker_gone(view);
    let rss = if gone.is_some() { None } else { m.rss_now() };
    let rss_level = rss.map_or(Level::Ok, |r| Level::of(r as f64, m.rss_limit as f64));
    let label = Line::raw(format!(
        "RSS {:>8}",
        rss.map_or("—".into(), |r| format!("{:.0} MiB", r as f64 / MIB))
    ));
    let gauge_w = label.width() as u16 + 1 + RSS_GAUGE_WIDTH;
    let gauge = line_gauge(
        label,
        rss.map_or(0.0, |r| r as f64 / m.rss_limit.max(1) as f64),
        theme,
        rss_level,
    );
    let after = Line::from(vec![
        Span::raw(format!(
            " limit {:.0} · old space {:.0} MiB ",
            m.rss_limit as f64 / MIB,
            OLD_SPACE_BYTES as f64 / MIB
        )),
        Span::styled(
            gone.clone().unwrap_or_else(|| rss_level.word().to_owned()),
            theme.level(if gone.is_some() {
                Level::High
            } else {
                rss_level
            }),
        ),
    ]);
    // The sparkline takes what the row has left, 4 to 40 cells, and no more than the samples.
    let values: Vec<u64> = m.rss.iter().map(|&(_, b)| b).collect();
    let room = row.width.saturating_sub(gauge_w + 1 + after.width() as u16);
    let spark_w = room.clamp(4, 40).min(values.len() as u16);
    let spark = sparkline(&values, m.rss_limit, spark_w, theme.level(rss_level));
    render_in_row(frame, row, Line::default(), gauge, gauge_w, Line::default());
    let (_, rest) = split_row(row, gauge_w);
    render_in_row(frame, rest, Line::raw(" "), spark, spark_w, after);
}

/// RSS over the samples kept (seconds since the oldest, MiB) on a 0 to 1 GiB scale (the limit,
/// W9), with the 768 MiB old-space flag as a dim line, on the rows a tall worker pane has to
/// spare.
fn draw_rss_chart(
    frame: &mut Frame,
    m: &crate::console::state::Monitor,
    theme: &Theme,
    area: Rect,
) {
    let first = m.rss.iter().next().map_or(0.0, |&(t, _)| t);
    let points: Vec<(f64, f64)> = m
        .rss
        .iter()
        .map(|&(t, b)| ((t - first) / 1000.0, b as f64 / MIB))
        .collect();
    let span = points.last().map_or(1.0, |p| p.0.max(1.0));
    let limit = m.rss_limit as f64 / MIB;
    let old_space = OLD_SPACE_BYTES as f64 / MIB;
    let old_space_line = [(0.0, old_space), (span, old_space)];
    let level = m
        .rss_now()
        .map_or(Level::Ok, |r| Level::of(r as f64, m.rss_limit as f64));
    let chart = Chart::new(vec![
        Dataset::default()
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.dim())
            .data(&old_space_line),
        Dataset::default()
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.level(level))
            .data(&points),
    ])
    .legend_position(None)
    .x_axis(
        Axis::default()
            .bounds([0.0, span])
            .labels([Line::raw("0 s"), Line::raw(format!("{span:.0} s"))]),
    )
    // Labels are spaced evenly: 0, half the limit, the limit.
    .y_axis(Axis::default().bounds([0.0, limit]).labels([
        Line::raw("0 MiB"),
        Line::raw(format!("{:.0}", limit / 2.0)),
        Line::raw(format!("{limit:.0} MiB")),
    ]));
    frame.render_widget(chart, area);
}

/// Launches in the rolling minute against the three allowed (W10).
fn worker_launches<'a>(view: &View, theme: &Theme) -> Line<'a> {
    let (m, now) = (view.monitor, view.now_ms);
    let launches = m.launches_in_window(now);
    let l_level = Level::of(launches as f64, MAX_LAUNCHES_PER_MINUTE as f64);
    Line::from(vec![
        Span::raw(format!(
            "launches this minute {launches}/{MAX_LAUNCHES_PER_MINUTE} "
        )),
        Span::styled(l_level.word(), theme.level(l_level)),
    ])
}

/// The last three retirements, with pid and generation, unexpected ones marked.
fn worker_retirements<'a>(m: &crate::console::state::Monitor, theme: &Theme) -> Line<'a> {
    let retired: Vec<String> = m
        .retirements
        .iter()
        .rev()
        .take(3)
        .map(|r| {
            // Whose pid is whose: the worker's own, then the MCP process that recorded it.
            format!(
                "{}{}gen {} {}{}{}",
                if r.expected { "" } else { "✖ " },
                r.worker_pid
                    .map_or(String::new(), |p| format!("worker pid {p} ")),
                r.generation.map_or("?".into(), |g| g.to_string()),
                r.reason,
                r.requests.map_or(String::new(), |n| format!(" ({n} req)")),
                r.pid.map_or(String::new(), |p| format!(" of mcp pid {p}")),
            )
        })
        .collect();
    let any_bad = m.retirements.iter().rev().take(3).any(|r| !r.expected);
    Line::from(vec![
        Span::raw("retired "),
        Span::styled(
            if retired.is_empty() {
                "none".to_owned()
            } else {
                retired.join(" · ")
            },
            theme.level(if any_bad { Level::Limit } else { Level::Ok }),
        ),
    ])
}
