//! `failmode list`: the scenarios and targets a run can use, and where each comes from
//! (project, checkout, built-in).

use std::fmt::Write as _;

use crate::project::{FOLDER, Project, Source};

/// The listing, ready to print.
pub fn render(project: &Project) -> anyhow::Result<String> {
    let mut out = String::new();
    let root = project.root().display();
    match (project.folder(), project.checkout()) {
        (Some(folder), _) => writeln!(out, "project: {root} ({})", folder.display())?,
        (None, Some(checkout)) if checkout == project.root() => {
            writeln!(out, "project: failmode's checkout, {root}")?;
        }
        (None, _) => writeln!(
            out,
            "project: none (no {FOLDER}/ folder here or above; `failmode init` writes one)"
        )?,
    }
    if let Some(checkout) = project.checkout() {
        writeln!(
            out,
            "checkout: {} (its scenarios/ and targets/, the peers among them)",
            checkout.display()
        )?;
    }
    writeln!(out, "results: {}", project.results_dir().display())?;

    writeln!(out, "\nscenarios:")?;
    let scenarios = project.scenarios();
    let width = scenarios.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for entry in &scenarios {
        let description = entry
            .load()
            .map(|s| s.description)
            .unwrap_or_else(|e| format!("INVALID: {e}"));
        writeln!(
            out,
            "  {:<width$}  {:<8}  {description}",
            entry.name,
            entry.source.to_string()
        )?;
    }

    writeln!(out, "\ntargets:")?;
    let targets = project.targets()?;
    let width = targets.iter().map(|e| e.def.name.len()).max().unwrap_or(0);
    for entry in &targets {
        writeln!(
            out,
            "  {:<width$}  {:<8}  {}",
            entry.def.name,
            entry.source.to_string(),
            entry.def.description
        )?;
    }

    let templates: Vec<String> = project
        .templates()?
        .into_iter()
        .filter(|t| !targets.iter().any(|e| e.def.name == t.def.name))
        .map(|t| t.def.name)
        .collect();
    if !templates.is_empty() {
        writeln!(
            out,
            "\nalso for `failmode init --template` (peers, run only inside failmode's checkout): {}",
            templates.join(", ")
        )?;
    }
    let sources = [Source::Project, Source::Checkout, Source::BuiltIn];
    writeln!(
        out,
        "\n(a name is looked up in the order {}; the first found is listed and run)",
        sources.map(|s| s.to_string()).join(", ")
    )?;
    Ok(out)
}
