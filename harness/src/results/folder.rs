//! The results folder: `results/<scenario>/<timestamp>/` with `run.json`, the per-second
//! series as CSV, the HdrHistograms in interval-log format, the scenario as given and every
//! child's log; `results/latest` points at the newest.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use super::RunResult;
use crate::metrics::Measured;
use crate::scenario::Scenario;

/// A run's folder, created before anything starts so that child logs land in it.
#[derive(Debug, Clone)]
pub struct RunFolder {
    pub path: PathBuf,
}

/// `2026-11-30T07:35:47Z` → `20261130T073547Z`: sortable and safe in a path.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at)
        .to_string()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect()
}

impl RunFolder {
    /// Creates `<root>/<scenario>/<timestamp>/logs/` (or uses `out` as given).
    pub fn create(
        root: &Path,
        scenario: &str,
        at: SystemTime,
        out: Option<&Path>,
    ) -> std::io::Result<Self> {
        let path = match out {
            Some(p) => p.to_owned(),
            None => root.join(scenario).join(timestamp(at)),
        };
        std::fs::create_dir_all(path.join("logs"))?;
        Ok(Self { path })
    }

    pub fn logs(&self) -> PathBuf {
        self.path.join("logs")
    }

    /// Writes everything measured so far; safe to call on a partial run.
    pub fn write(
        &self,
        run: &RunResult,
        scenario: &Scenario,
        measured: &Measured,
    ) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(run).map_err(std::io::Error::other)?;
        std::fs::write(self.path.join("run.json"), json + "\n")?;
        std::fs::write(self.path.join("scenario.toml"), &scenario.source)?;
        self.write_series(run, scenario, measured)?;
        self.write_histograms(run, scenario, measured)?;
        Ok(())
    }

    fn write_series(
        &self,
        run: &RunResult,
        scenario: &Scenario,
        measured: &Measured,
    ) -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(self.path.join("series.csv"))?);
        writeln!(out, "{}", super::read::SERIES_HEADER)?;
        for (t, target) in run.targets.iter().enumerate() {
            let tenants = scenario
                .tenants
                .iter()
                .map(|t| t.name.as_str())
                .chain(["all"]);
            for (n, tenant) in tenants.enumerate() {
                for (second, cell) in measured.seconds[t][n].iter().enumerate() {
                    let c = &cell.counts;
                    let phase = scenario
                        .phase_at(std::time::Duration::from_secs(second as u64))
                        .map_or("", |p| scenario.phases[p].name.as_str());
                    let (p50, p99, max) = (cell.p50_us, cell.p99_us, cell.max_us);
                    writeln!(
                        out,
                        "{},{},{second},{phase},{},{},{},{},{},{},{},{},{p50},{p99},{max},{},{}",
                        target.name,
                        tenant,
                        c.offered,
                        c.admitted,
                        c.limited,
                        c.unavailable,
                        c.server_error,
                        c.transport_error,
                        c.other_status,
                        c.dropped,
                        c.throttled,
                        c.retries
                    )?;
                }
            }
        }
        out.flush()
    }

    /// One interval per target × tenant × phase, tagged `target/tenant/phase`, latency from
    /// the schedule in µs: readable by HdrHistogram's log tools and mergeable exactly.
    fn write_histograms(
        &self,
        run: &RunResult,
        scenario: &Scenario,
        measured: &Measured,
    ) -> std::io::Result<()> {
        let mut file =
            std::io::BufWriter::new(std::fs::File::create(self.path.join("latency.hlog"))?);
        let mut serializer = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .add_comment("failmode: latency from the scheduled send, microseconds")
            .add_comment(&format!("scenario {} seed {}", run.scenario, run.seed))
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut file, &mut serializer)
            .map_err(std::io::Error::other)?;
        for (t, target) in run.targets.iter().enumerate() {
            for (n, tenant) in scenario.tenants.iter().enumerate() {
                for (p, phase) in scenario.phases.iter().enumerate() {
                    let tag = format!("{}/{}/{}", target.name, tenant.name, phase.name);
                    let Some(tag) = Tag::new(&tag) else { continue };
                    writer
                        .write_histogram(
                            &measured.cells[t][n][p].latency,
                            phase.start,
                            phase.length(),
                            Some(tag),
                        )
                        .map_err(std::io::Error::other)?;
                }
            }
        }
        drop(writer);
        file.flush()
    }

    /// Points `<root>/latest` at this folder (a relative symlink).
    pub fn mark_latest(&self, root: &Path) -> std::io::Result<()> {
        let link = root.join("latest");
        let target = self.path.strip_prefix(root).unwrap_or(&self.path);
        match std::fs::symlink_metadata(&link) {
            Ok(_) => std::fs::remove_file(&link)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::os::unix::fs::symlink(target, link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_sort_and_fit_in_a_path() {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_024_147);
        assert_eq!(timestamp(at), "20261130T073547Z");
    }
}
