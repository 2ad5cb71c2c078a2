//! A gate's verdict for people (a terminal table, Markdown for a CI page) and for machines
//! (JUnit XML: one testcase per check, so any CI lists them).

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::Check;

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
            phase: c.phase.clone(),
            check: c.subject(),
            threshold: c.threshold(),
            actual: c.actual_text(),
            verdict: if c.passed { "pass" } else { "FAIL" },
        })
        .collect()
}

pub fn table(checks: &[Check]) -> String {
    Table::new(rows(checks)).with(Style::rounded()).to_string()
}

/// A Markdown summary: the verdict first, then every check.
pub fn markdown(scenario: &str, checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.passed).count();
    let mut out = if failed == 0 {
        format!(
            "### failmode gate: {scenario} ✅ all {} checks pass\n\n",
            checks.len()
        )
    } else {
        format!(
            "### failmode gate: {scenario} ❌ {failed} of {} checks fail\n\n",
            checks.len()
        )
    };
    out.push_str("| target | phase | check | threshold | actual | |\n|---|---|---|---|---|---|\n");
    for c in checks {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.target,
            c.phase,
            c.subject(),
            c.threshold(),
            c.actual_text(),
            if c.passed { "✅" } else { "❌" }
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

pub fn junit_xml(scenario: &str, checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.passed).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"failmode gate\" tests=\"{}\" failures=\"{failed}\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">\n",
        checks.len(),
        xml(scenario),
        checks.len()
    );
    for c in checks {
        let name = xml(&format!("{} {}", c.subject(), c.threshold()));
        let class = xml(&format!("{}.{}", c.target, c.phase));
        if c.passed {
            out.push_str(&format!(
                "    <testcase classname=\"{class}\" name=\"{name}\"/>\n"
            ));
        } else {
            out.push_str(&format!(
                "    <testcase classname=\"{class}\" name=\"{name}\">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(&format!("actual {}", c.actual_text())),
                xml(&c.to_string())
            ));
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
