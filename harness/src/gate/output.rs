//! A gate's verdict for people (a terminal table, Markdown for a CI page) and for machines
//! (JUnit XML: one testcase per check, so any CI lists them; `gate.json`, every check with its
//! threshold and actual value, by `harness/schema/gate.schema.json`).

use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::{Actual, Bound, Check, Level, Outcome, Verdict};
use crate::results::RunResult;

#[derive(Tabled)]
struct Row {
    target: String,
    phase: String,
    check: String,
    threshold: String,
    actual: String,
    verdict: &'static str,
}

fn rows(checks: &[Check]) -> Vec<Row> {
    checks
        .iter()
        .map(|c| Row {
            target: c.target.clone(),
            phase: c.phase_name().to_owned(),
            check: c.subject(),
            threshold: c.threshold(),
            actual: c.actual_text(),
            verdict: match c.verdict() {
                Verdict::Pass => "pass",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            },
        })
        .collect()
}

pub fn table(checks: &[Check]) -> String {
    Table::new(rows(checks)).with(Style::rounded()).to_string()
}

fn count(checks: &[Check], verdict: Verdict) -> usize {
    checks.iter().filter(|c| c.verdict() == verdict).count()
}

/// A Markdown summary: the verdict first, then every check.
pub fn markdown(scenario: &str, checks: &[Check]) -> String {
    let (failed, warned) = (count(checks, Verdict::Fail), count(checks, Verdict::Warn));
    let total = checks.len();
    let warnings = match warned {
        0 => String::new(),
        1 => ", ⚠️ 1 warning".to_owned(),
        n => format!(", ⚠️ {n} warnings"),
    };
    let mut out = match (failed, warned) {
        (0, 0) => format!("### failmode gate: {scenario} ✅ all {total} checks pass\n\n"),
        (0, _) => format!(
            "### failmode gate: {scenario} ✅ {} of {total} checks pass{warnings}\n\n",
            total - warned
        ),
        _ => format!(
            "### failmode gate: {scenario} ❌ {failed} of {total} checks fail{warnings}\n\n"
        ),
    };
    out.push_str("| target | phase | check | threshold | actual | |\n|---|---|---|---|---|---|\n");
    for c in checks {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.target,
            c.phase_name(),
            c.subject(),
            c.threshold(),
            c.actual_text(),
            match c.verdict() {
                Verdict::Pass => "✅",
                Verdict::Warn => "⚠️ warn",
                Verdict::Fail => "❌",
            }
        ));
    }
    out
}

/// Escapes text for an XML attribute or element. Hand-written: four elements of JUnit's
/// format do not warrant an XML crate.
fn xml(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&apos;".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// JUnit XML: a check that fails fails its testcase; a warning passes it, with the warning in
/// its output and properties, since JUnit has no warning state that CI systems agree on.
pub fn junit_xml(scenario: &str, checks: &[Check]) -> String {
    let failed = count(checks, Verdict::Fail);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"failmode gate\" tests=\"{}\" failures=\"{failed}\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">\n",
        checks.len(),
        xml(scenario),
        checks.len()
    );
    for c in checks {
        let name = xml(&format!("{} {}", c.subject(), c.threshold()));
        let class = xml(&format!("{}.{}", c.target, c.phase_name()));
        match c.verdict() {
            Verdict::Pass => out.push_str(&format!(
                "    <testcase classname=\"{class}\" name=\"{name}\"/>\n"
            )),
            Verdict::Warn => out.push_str(&format!(
                "    <testcase classname=\"{class}\" name=\"{name}\">\n      <properties>\n        <property name=\"level\" value=\"warn\"/>\n        <property name=\"actual\" value=\"{}\"/>\n      </properties>\n      <system-out>warning: {}</system-out>\n    </testcase>\n",
                xml(&c.actual_text()),
                xml(&c.to_string())
            )),
            Verdict::Fail => out.push_str(&format!(
                "    <testcase classname=\"{class}\" name=\"{name}\">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(&format!("actual {}", c.actual_text())),
                xml(&c.to_string())
            )),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// `gate.json`: the outcome and every check, for machines.
#[derive(Serialize)]
struct GateJson<'a> {
    schema_version: u32,
    scenario: &'a str,
    outcome: Outcome,
    exit_code: u8,
    untrusted_because: Vec<String>,
    checks: Vec<CheckJson<'a>>,
}

#[derive(Serialize)]
struct CheckJson<'a> {
    target: &'a str,
    /// `null`: the whole run.
    phase: Option<&'a str>,
    /// `null`: all tenants together.
    tenant: Option<&'a str>,
    metric: &'static str,
    window_s: Option<u32>,
    level: Level,
    bound: &'static str,
    threshold: f64,
    /// The value judged; `null` when there is none (`actual_kind` says why).
    actual: Option<f64>,
    actual_kind: &'static str,
    /// For `at_least`: what the value is known to be at least (a recovery the run's end cut
    /// short); else `null`.
    at_least: Option<f64>,
    /// What `actual` reads as, or why it was not measured.
    actual_text: String,
    verdict: Verdict,
}

pub fn gate_json(run: &RunResult, checks: &[Check]) -> Result<String, serde_json::Error> {
    let outcome = Outcome::of(run, checks);
    let json = GateJson {
        schema_version: 1,
        scenario: &run.scenario,
        outcome,
        exit_code: outcome.exit_code(),
        untrusted_because: run.untrusted(),
        checks: checks
            .iter()
            .map(|c| {
                let (bound, threshold) = match c.bound {
                    Bound::Max(v) => ("max", v),
                    Bound::Min(v) => ("min", v),
                };
                CheckJson {
                    target: &c.target,
                    phase: c.phase.as_deref(),
                    tenant: c.tenant.as_deref(),
                    metric: c.metric.name(),
                    window_s: c.window.map(|w| w.get()),
                    level: c.level,
                    bound,
                    threshold,
                    actual: c.actual.value(),
                    actual_kind: match c.actual {
                        Actual::Value(_) => "value",
                        Actual::Unbounded => "never",
                        Actual::NotMeasured(_) => "not_measured",
                        Actual::AtLeast { .. } => "at_least",
                    },
                    at_least: match c.actual {
                        Actual::AtLeast { value, .. } => Some(value),
                        _ => None,
                    },
                    actual_text: c.actual_text(),
                    verdict: c.verdict(),
                }
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&json)?;
    text.push('\n');
    Ok(text)
}
