//! What a person reads: the terminal tables at the end of a run.

pub mod html;
mod overview;
mod plots;
pub(crate) mod text;

pub use plots::FAULT_FILL_RGB;
pub(crate) use plots::{SecondsP99, SidesPlot, p99_sides};

use tabled::settings::Style;
use tabled::{Table, Tabled};

use crate::results::{Percentiles, RunResult, TenantResult};

/// How a figure that was not measured reads (`null` in run.json): never a zero.
const NOT_MEASURED: &str = "n/m";

/// A percentile in ms, or "n/m" when the cell had no latency to measure.
fn ms(p: Option<Percentiles>, q: fn(&Percentiles) -> u64) -> String {
    p.map_or_else(
        || NOT_MEASURED.to_owned(),
        |p| format!("{:.1}", q(&p) as f64 / 1000.0),
    )
}

fn pct(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// `part` as a share of what the cell offered, or "n/m" when nothing reached the target.
fn rate(cell: &TenantResult, part: u64) -> String {
    cell.share_of_offered(part)
        .map_or_else(|| NOT_MEASURED.to_owned(), pct)
}

/// The worst tenant by `key`, as "140.0 % acme", or "0.0 %"; tenants whose figure was not
/// measured are named after it ("0.0 % (n/m: initech)"), and "n/m" when none was.
fn worst(tenants: &[TenantResult], key: fn(&TenantResult) -> Option<f64>) -> String {
    let measured = tenants
        .iter()
        .filter_map(|t| Some((t, key(t)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let unmeasured: Vec<&str> = tenants
        .iter()
        .filter(|t| key(t).is_none())
        .map(|t| t.name.as_str())
        .collect();
    let shown = match measured {
        None => return NOT_MEASURED.to_owned(),
        Some((t, v)) if v > 0.0 => format!("{} {}", pct(v), t.name),
        Some(_) => pct(0.0),
    };
    if unmeasured.is_empty() {
        shown
    } else {
        format!("{shown} ({NOT_MEASURED}: {})", unmeasured.join(", "))
    }
}

#[derive(Tabled)]
struct Row {
    target: String,
    phase: String,
    #[tabled(rename = "p50 ms")]
    p50: String,
    #[tabled(rename = "p99 ms")]
    p99: String,
    #[tabled(rename = "p99.9 ms")]
    p999: String,
    #[tabled(rename = "admitted/s")]
    admitted: String,
    #[tabled(rename = "429")]
    limited: String,
    #[tabled(rename = "5xx")]
    errors: String,
    #[tabled(rename = "transport err")]
    transport: u64,
    /// Not sent by the generator: counted in latency as having waited the request timeout.
    dropped: u64,
    #[tabled(rename = "over-admission (worst)")]
    over: String,
    #[tabled(rename = "wrongful denial (worst)")]
    denied: String,
}

/// Whether a target of the run was judged against a limit other than the scenario's (its
/// manifest's own).
pub fn own_limits(run: &RunResult) -> bool {
    run.targets
        .iter()
        .any(|t| run.limit_of(t) != run.limit_of_run())
}

/// The limit every figure was judged against, as one line: the scenario's, and each target
/// that declared its own.
pub fn limits_line(run: &RunResult) -> String {
    let scenario = run.limit_of_run();
    let mut line = format!(
        "{} requests per {} s per tenant (the scenario's)",
        scenario.limit, scenario.window_s
    );
    for t in &run.targets {
        let own = run.limit_of(t);
        if own != scenario {
            line += &format!("; {}: {}", t.name, own.describe());
        }
    }
    line
}

/// Per target × phase: latency from the schedule, outcomes and the two outage measures. When a
/// target was judged against a limit of its own, a line under the table says which.
pub fn summary_table(run: &RunResult) -> String {
    let mut table = rows_table(run);
    if own_limits(run) {
        table += &format!(
            "\nover-admission and wrongful denial judged against: {}",
            limits_line(run)
        );
    }
    table
}

fn rows_table(run: &RunResult) -> String {
    let rows = run.targets.iter().flat_map(|t| {
        t.phases.iter().map(move |p| {
            let a = &p.all;
            Row {
                target: t.name.clone(),
                phase: p.name.clone(),
                p50: ms(a.latency_us, |p| p.p50),
                p99: ms(a.latency_us, |p| p.p99),
                p999: ms(a.latency_us, |p| p.p999),
                admitted: format!("{:.1}", a.admitted_per_s),
                limited: rate(a, a.counts.limited),
                errors: rate(a, a.counts.errors_5xx()),
                transport: a.counts.transport_error,
                dropped: a.counts.dropped,
                over: worst(&p.tenants, |t| t.over_admission),
                denied: worst(&p.tenants, |t| t.wrongful_denial),
            }
        })
    });
    Table::new(rows).with(Style::rounded()).to_string()
}

/// Whether any client retried or throttled itself: only then is there client amplification
/// to show.
pub fn clients_acted(run: &RunResult) -> bool {
    run.targets
        .iter()
        .flat_map(|t| &t.phases)
        .any(|p| p.all.counts.retries + p.all.counts.throttled > 0)
}

#[derive(Tabled)]
struct AmplificationRow {
    target: String,
    phase: String,
    tenant: String,
    offered: u64,
    #[tabled(rename = "attempts sent")]
    attempts: u64,
    retries: u64,
    #[tabled(rename = "throttled by client")]
    throttled: u64,
    #[tabled(rename = "client ×")]
    client: String,
    /// All tenants only: the store's commands are not told apart by tenant.
    #[tabled(rename = "Redis cmds / attempt")]
    per_attempt: String,
    #[tabled(rename = "Redis cmds / offered")]
    total: String,
}

/// Per target × phase × tenant: requests offered, attempts sent (retries apart), what the
/// clients refused themselves, and the amplifications: attempts per request offered (client),
/// Redis commands per attempt and per request offered (store, all tenants).
pub fn amplification_table(run: &RunResult) -> String {
    let times = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"));
    let rows = run.targets.iter().flat_map(|t| {
        t.phases.iter().flat_map(move |p| {
            p.tenants.iter().chain([&p.all]).map(move |n| {
                let client = n.counts.client_amplification();
                AmplificationRow {
                    target: t.name.clone(),
                    phase: p.name.clone(),
                    tenant: n.name.clone(),
                    offered: n.counts.offered,
                    attempts: n.counts.attempts(),
                    retries: n.counts.retries,
                    throttled: n.counts.throttled,
                    client: times(client),
                    per_attempt: if n.name == "all" {
                        times(p.store_amplification_per_attempt)
                    } else {
                        "-".to_owned()
                    },
                    total: if n.name == "all" {
                        times(p.store_amplification)
                    } else {
                        "-".to_owned()
                    },
                }
            })
        })
    });
    Table::new(rows).with(Style::rounded()).to_string()
}

/// Admitted requests per second per tenant in each phase: the BRIEF's table, measured.
pub fn admitted_table(run: &RunResult) -> String {
    let tenants: Vec<String> = run
        .targets
        .first()
        .and_then(|t| t.phases.first())
        .map(|p| p.tenants.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    let mut builder = tabled::builder::Builder::default();
    let mut header = vec!["target".to_owned(), "phase".to_owned()];
    header.extend(tenants.iter().map(|t| format!("{t} admitted/s")));
    builder.push_record(header);
    for t in &run.targets {
        for p in &t.phases {
            let mut row = vec![t.name.clone(), p.name.clone()];
            row.extend(p.tenants.iter().map(|n| format!("{:.1}", n.admitted_per_s)));
            builder.push_record(row);
        }
    }
    builder.build().with(Style::rounded()).to_string()
}
