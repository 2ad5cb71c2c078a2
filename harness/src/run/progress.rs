//! The live view while a run goes: phase, elapsed, and per target req/s, 429 % and 5xx %,
//! and the requests dropped since the start when there are any.
//! On a terminal, indicatif bars redrawn in place; elsewhere (CI logs), a plain line every
//! few seconds and at every phase change.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::metrics::Collector;
use crate::scenario::Scenario;

const TICK: Duration = Duration::from_millis(250);
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Prints a line above the bars (or plainly).
#[derive(Debug, Clone)]
pub struct Say {
    bars: Option<MultiProgress>,
}

impl Say {
    pub fn new() -> Self {
        let bars = std::io::stderr()
            .is_terminal()
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Self { bars }
    }

    pub fn line(&self, text: &str) {
        match &self.bars {
            Some(bars) => {
                let _ = bars.println(text);
            }
            None => eprintln!("{text}"),
        }
    }
}

impl Default for Say {
    fn default() -> Self {
        Self::new()
    }
}

/// Redraws until `stop` is cancelled.
pub async fn show(
    say: &Say,
    scenario: &Scenario,
    names: &[String],
    collector: &Collector,
    start: Instant,
    stop: tokio_util::sync::CancellationToken,
) {
    let (header, lines) = bars(say, scenario, names);
    let mut previous: Vec<(u64, u64, u64)> = vec![(0, 0, 0); names.len()];
    let mut last_tick = Instant::now();
    let mut last_plain = Instant::now();
    let mut last_phase = None;
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let elapsed = start.elapsed();
        let phase = scenario.phase_at(elapsed);
        let phase_name = phase.map_or("-", |p| scenario.phases[p].name.as_str());
        if phase != last_phase && phase.is_some() {
            say.line(&format!(
                "{:>7.1}s  phase {phase_name}",
                elapsed.as_secs_f64()
            ));
            last_phase = phase;
        }
        // Plain lines report the rate since the previous line, not since the last tick.
        if header.is_none() && last_plain.elapsed() < PLAIN_EVERY {
            continue;
        }
        let dt = last_tick.elapsed().as_secs_f64().max(1e-3);
        last_tick = Instant::now();
        let mut plain = Vec::new();
        for (t, name) in names.iter().enumerate() {
            let r = Rates::since(collector, t, &mut previous[t], dt);
            let msg = format!(
                "{:>7.0} req/s  429 {:>5.1} %  5xx {:>5.1} %{}",
                r.per_s,
                r.limited,
                r.errors,
                r.dropped_as("  ")
            );
            if let Some(line) = lines.get(t) {
                line.set_message(msg);
                line.tick();
            } else {
                plain.push(format!(
                    "{name} {:.0}/s 429 {:.0}% 5xx {:.0}%{}",
                    r.per_s,
                    r.limited,
                    r.errors,
                    r.dropped_as(" ")
                ));
            }
        }
        if let Some(h) = &header {
            h.set_position(elapsed.as_millis() as u64);
            h.set_message(format!(
                "{:.0}/{:.0} s  {phase_name}",
                elapsed.as_secs_f64(),
                scenario.duration.as_secs_f64()
            ));
        } else {
            last_plain = Instant::now();
            say.line(&format!(
                "{:>7.1}s  {phase_name}: {}",
                elapsed.as_secs_f64(),
                plain.join(" | ")
            ));
        }
    }
    for line in lines {
        line.finish_and_clear();
    }
    if let Some(h) = header {
        h.finish_and_clear();
    }
}

/// On a terminal, a bar for the run and a line per target; elsewhere none.
fn bars(
    say: &Say,
    scenario: &Scenario,
    names: &[String],
) -> (Option<ProgressBar>, Vec<ProgressBar>) {
    let style = ProgressStyle::with_template("{prefix:>16} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    match &say.bars {
        Some(bars) => {
            let header = bars.add(
                ProgressBar::new(scenario.duration.as_millis() as u64).with_style(
                    ProgressStyle::with_template("{prefix:>16} [{bar:40}] {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                ),
            );
            header.set_prefix(scenario.name.clone());
            let lines = names
                .iter()
                .map(|n| {
                    let bar = bars.add(ProgressBar::new_spinner().with_style(style.clone()));
                    bar.set_prefix(n.clone());
                    bar
                })
                .collect();
            (Some(header), lines)
        }
        None => (None, Vec::new()),
    }
}

/// One target's figures since the previous report (`previous`, `dt` seconds ago): req/s, 429 %
/// and 5xx %; its drops since the start.
struct Rates {
    per_s: f64,
    limited: f64,
    errors: f64,
    dropped: u64,
}

impl Rates {
    fn since(collector: &Collector, t: usize, previous: &mut (u64, u64, u64), dt: f64) -> Self {
        let live = collector.live(t);
        let now = (
            live.done.load(Ordering::Relaxed),
            live.limited.load(Ordering::Relaxed),
            live.errors_5xx.load(Ordering::Relaxed),
        );
        let (done, limited, errors) = (now.0 - previous.0, now.1 - previous.1, now.2 - previous.2);
        *previous = now;
        let share = |x: u64| {
            if done == 0 {
                0.0
            } else {
                x as f64 * 100.0 / done as f64
            }
        };
        Self {
            per_s: done as f64 / dt,
            limited: share(limited),
            errors: share(errors),
            // Since the start, not per tick: a single drop matters, and must not flicker away.
            dropped: live.dropped.load(Ordering::Relaxed),
        }
    }

    fn dropped_as(&self, gap: &str) -> String {
        match self.dropped {
            0 => String::new(),
            n => format!("{gap}dropped {n}"),
        }
    }
}
