//! The results folder: `results/<scenario>/<timestamp>/` with `run.json`, the per-second
//! series as CSV, the HdrHistograms in interval-log format (see [`super::hlog`]), the scenario
//! as given and every child's log; `results/latest` points at the newest.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use super::RunResult;
use super::atomic;
use super::hlog::{self, Interval};
use super::measured_files::slot_names;
use super::read::SeriesRow;
use crate::metrics::{Cell, Measured, Second, unpack};
use crate::scenario::Scenario;

/// A run's folder, created before anything starts so that child logs land in it.
#[derive(Debug, Clone)]
pub struct RunFolder {
    pub path: PathBuf,
}

/// Refuses, creating nothing, a results folder that could not be made at `path`: its nearest
/// existing ancestor must be a folder a file can be created in. Checked before anything starts,
/// so that a run does not start Redis and the targets only to fail writing what it measured.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    for dir in path.ancestors() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        match std::fs::metadata(dir) {
            // An unnamed file where the kernel offers one: a probe that cannot be left behind.
            Ok(m) if m.is_dir() => {
                return tempfile::tempfile_in(dir).map(drop).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot create a file in {}: {e}", dir.display()),
                    )
                });
            }
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    format!("{} is a file, not a folder", dir.display()),
                ));
            }
            // Under a file (ENOTDIR): the file itself is named by the next step up.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "no part of the path exists",
    ))
}

/// One second of one target × tenant slot as a row of `series.csv`.
pub(crate) fn series_row(
    scenario: &Scenario,
    target: &str,
    slot: &str,
    second: usize,
    cell: &Second,
) -> SeriesRow {
    SeriesRow {
        target: target.to_owned(),
        tenant: slot.to_owned(),
        second: second as u64,
        phase: scenario
            .phase_at(Duration::from_secs(second as u64))
            .map_or("", |p| scenario.phases[p].name.as_str())
            .to_owned(),
        counts: cell.counts,
        p50_us: cell.p50_us,
        p99_us: cell.p99_us,
        max_us: cell.max_us,
    }
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
    /// Where a run's results go unless told otherwise: `<root>/<scenario>/<timestamp>`.
    pub fn default_path(root: &Path, scenario: &str, at: SystemTime) -> PathBuf {
        root.join(scenario).join(timestamp(at))
    }

    /// Creates `path` and its `logs/`.
    pub fn create(path: PathBuf) -> std::io::Result<Self> {
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
        atomic::write(&self.path.join("scenario.toml"), &scenario.source)?;
        self.write_series(run, scenario, measured)?;
        self.write_histograms(run, scenario, measured)?;
        // Last: a folder with a run.json is whole (a kill before this leaves the journal).
        let json = serde_json::to_string_pretty(run).map_err(std::io::Error::other)?;
        atomic::write(&self.path.join("run.json"), json + "\n")
    }

    fn write_series(
        &self,
        run: &RunResult,
        scenario: &Scenario,
        measured: &Measured,
    ) -> std::io::Result<()> {
        atomic::write_with(&self.path.join("series.csv"), |out| {
            Self::write_series_rows(out, run, scenario, measured)
        })
    }

    fn write_series_rows(
        out: &mut dyn Write,
        run: &RunResult,
        scenario: &Scenario,
        measured: &Measured,
    ) -> std::io::Result<()> {
        writeln!(out, "{}", super::read::SERIES_HEADER)?;
        for (t, target) in run.targets.iter().enumerate() {
            for (n, slot) in slot_names(scenario).enumerate() {
                for (second, cell) in measured.seconds[t][n].iter().enumerate() {
                    let row = series_row(scenario, &target.name, slot, second, cell);
                    writeln!(out, "{}", row.csv_line())?;
                }
            }
        }
        Ok(())
    }

    /// The histograms, in interval logs tagged by what they cover, µs: `latency.hlog` (from
    /// the schedule) and `service_time.hlog` (from the actual send), one interval per target ×
    /// tenant × phase tagged `target/tenant/phase`; `seconds.hlog`, each second's latency per
    /// target × tenant (or `all`) tagged `target/tenant`; `send_lag.hlog`, per target. With
    /// `series.csv` and `run.json` they are everything `failmode merge` adds up.
    fn write_histograms(
        &self,
        run: &RunResult,
        scenario: &Scenario,
        measured: &Measured,
    ) -> std::io::Result<()> {
        let header = |what: &str| {
            vec![
                format!("failmode: {what}, microseconds"),
                format!("scenario {} seed {}", run.scenario, run.seed),
            ]
        };
        let cells = |histogram: fn(&Cell) -> &Histogram<u64>| -> Vec<Interval> {
            let mut intervals = Vec::new();
            for (t, target) in run.targets.iter().enumerate() {
                for (n, tenant) in scenario.tenants.iter().enumerate() {
                    for (p, phase) in scenario.phases.iter().enumerate() {
                        intervals.push(Interval {
                            tag: format!("{}/{}/{}", target.name, tenant.name, phase.name),
                            start: phase.start,
                            length: phase.length(),
                            histogram: histogram(&measured.cells[t][n][p]).clone(),
                        });
                    }
                }
            }
            intervals
        };
        hlog::write(
            &self.path.join("latency.hlog"),
            &header("latency from the scheduled send"),
            &cells(|c| &c.latency),
        )?;
        hlog::write(
            &self.path.join("service_time.hlog"),
            &header("service time from the actual send"),
            &cells(|c| &c.service_time),
        )?;
        let mut seconds = Vec::new();
        for (t, target) in run.targets.iter().enumerate() {
            for (n, slot) in slot_names(scenario).enumerate() {
                for (&second, packed) in &measured.second_latency[t][n] {
                    seconds.push(Interval {
                        tag: format!("{}/{slot}", target.name),
                        start: Duration::from_secs(second as u64),
                        length: Duration::from_secs(1),
                        histogram: unpack(packed).map_err(std::io::Error::other)?,
                    });
                }
            }
        }
        hlog::write(
            &self.path.join("seconds.hlog"),
            &header("latency from the scheduled send per second (two significant figures)"),
            &seconds,
        )?;
        let lag: Vec<Interval> = run
            .targets
            .iter()
            .zip(&measured.send_lag)
            .map(|(target, histogram)| Interval {
                tag: target.name.clone(),
                start: Duration::ZERO,
                length: scenario.duration,
                histogram: histogram.clone(),
            })
            .collect();
        hlog::write(
            &self.path.join("send_lag.hlog"),
            &header("the load generator's send lag (actual - scheduled send)"),
            &lag,
        )
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
    fn a_folder_under_a_file_is_refused_naming_the_file_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file.txt");
        std::fs::write(&file, "").unwrap();
        let e = check_writable(&file.join("out/deeper")).unwrap_err();
        assert!(e.to_string().contains("file.txt is a file"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_folder_yet_to_be_made_in_a_writable_one_passes_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("a/b/c")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn timestamps_sort_and_fit_in_a_path() {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_024_147);
        assert_eq!(timestamp(at), "20261130T073547Z");
    }
}
