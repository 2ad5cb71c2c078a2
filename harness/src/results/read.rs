//! Reading a results folder back: `run.json` and `series.csv`, for `gate`, `compare` and
//! `report`, which work from the files alone.

use std::path::{Path, PathBuf};

use super::unfinished::{Unfinished, unfinished};
use super::{RunResult, SCHEMA_VERSION};
use crate::metrics::Counts;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{0} holds no run.json, only the journal of a run that was killed before it wrote its \
         results: `failmode report {0}` rebuilds a partial run.json from it"
    )]
    Killed(PathBuf),
    #[error("{0} holds no run.json yet: its run is still going")]
    Running(PathBuf),
    #[error("{path} is not a failmode run.json: {message}")]
    Json { path: PathBuf, message: String },
    #[error("{path} has schema version {found}; this failmode reads version {SCHEMA_VERSION}")]
    Version { path: PathBuf, found: u64 },
    #[error("{path}, line {line}: {message}")]
    Csv {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// `run.json` inside `folder` (or `folder` itself if it is the file).
pub fn run_json_path(folder: &Path) -> PathBuf {
    if folder.is_dir() {
        folder.join("run.json")
    } else {
        folder.to_owned()
    }
}

impl RunResult {
    /// Reads a results folder's `run.json`, refusing another schema version.
    pub fn read(folder: &Path) -> Result<Self, ReadError> {
        let path = run_json_path(folder);
        if folder.is_dir() {
            match unfinished(folder) {
                Some(Unfinished::Killed) => return Err(ReadError::Killed(folder.to_owned())),
                Some(Unfinished::Running) => return Err(ReadError::Running(folder.to_owned())),
                None => {}
            }
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
            path: path.clone(),
            source,
        })?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| ReadError::Json {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let found = value["schema_version"].as_u64().unwrap_or(0);
        if found != u64::from(SCHEMA_VERSION) {
            return Err(ReadError::Version { path, found });
        }
        serde_json::from_value(value).map_err(|e| ReadError::Json {
            path,
            message: e.to_string(),
        })
    }
}

/// One line of `series.csv`: one second of one target × tenant (`"all"`: every tenant).
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRow {
    pub target: String,
    pub tenant: String,
    pub second: u64,
    /// Empty outside every phase.
    pub phase: String,
    pub counts: Counts,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl SeriesRow {
    /// The row as a line of `series.csv` under [`SERIES_HEADER`], without the newline: what
    /// [`parse_series`] reads back (a baseline file keeps its runs' series so).
    pub fn csv_line(&self) -> String {
        let c = &self.counts;
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.target,
            self.tenant,
            self.second,
            self.phase,
            c.offered,
            c.admitted,
            c.limited,
            c.unavailable,
            c.server_error,
            c.transport_error,
            c.other_status,
            c.dropped,
            self.p50_us,
            self.p99_us,
            self.max_us,
            c.throttled,
            c.retries,
            c.new_connections
        )
    }
}

/// The header `series.csv` is written with.
pub const SERIES_HEADER: &str = "target,tenant,second,phase,offered,admitted,limited,unavailable,server_error,transport_error,other_status,dropped,p50_us,p99_us,max_us,throttled,retries,new_connections";

/// The header before connection churn (no `new_connections`): saved baselines have it.
const SERIES_HEADER_BEFORE_CHURN: &str = "target,tenant,second,phase,offered,admitted,limited,unavailable,server_error,transport_error,other_status,dropped,p50_us,p99_us,max_us,throttled,retries";

/// The header before client behaviours (no `throttled`, `retries`): saved baselines have it.
const SERIES_HEADER_BEFORE_CLIENTS: &str = "target,tenant,second,phase,offered,admitted,limited,unavailable,server_error,transport_error,other_status,dropped,p50_us,p99_us,max_us";

/// Reads `series.csv` from a results folder.
pub fn read_series(folder: &Path) -> Result<Vec<SeriesRow>, ReadError> {
    let path = folder.join("series.csv");
    let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    parse_series(&path, &text)
}

/// Parses the text of a `series.csv` (`path` names it in errors). Names never contain commas
/// (scenario and manifest names are checked), so a plain split is exact.
pub fn parse_series(path: &Path, text: &str) -> Result<Vec<SeriesRow>, ReadError> {
    let mut lines = text.lines().enumerate();
    let bad = |line: usize, message: String| ReadError::Csv {
        path: path.to_owned(),
        line: line + 1,
        message,
    };
    let fields = match lines.next() {
        Some((_, SERIES_HEADER)) => 18,
        Some((_, SERIES_HEADER_BEFORE_CHURN)) => 17,
        Some((_, SERIES_HEADER_BEFORE_CLIENTS)) => 15,
        _ => return Err(bad(0, format!("expected the header {SERIES_HEADER}"))),
    };
    lines
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, line)| {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() != fields {
                return Err(bad(i, format!("{} fields, expected {fields}", f.len())));
            }
            let n = |k: usize| {
                f[k].parse::<u64>()
                    .map_err(|e| bad(i, format!("field {}: {e}", k + 1)))
            };
            Ok(SeriesRow {
                target: f[0].to_owned(),
                tenant: f[1].to_owned(),
                second: n(2)?,
                phase: f[3].to_owned(),
                counts: Counts {
                    offered: n(4)?,
                    admitted: n(5)?,
                    limited: n(6)?,
                    unavailable: n(7)?,
                    server_error: n(8)?,
                    transport_error: n(9)?,
                    other_status: n(10)?,
                    dropped: n(11)?,
                    throttled: if fields > 15 { n(15)? } else { 0 },
                    retries: if fields > 15 { n(16)? } else { 0 },
                    new_connections: if fields > 17 { n(17)? } else { 0 },
                },
                p50_us: n(12)?,
                p99_us: n(13)?,
                max_us: n(14)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_written_before_client_behaviours_reads_with_no_retries() {
        let dir = tempfile::tempdir().unwrap();
        let old = format!(
            "{SERIES_HEADER_BEFORE_CLIENTS}\nreference,acme,3,fault,120,50,70,0,0,0,0,0,900,2000,3000\n"
        );
        std::fs::write(dir.path().join("series.csv"), old).unwrap();
        let rows = read_series(dir.path()).unwrap();
        assert_eq!(rows[0].counts.admitted, 50);
        assert_eq!((rows[0].counts.retries, rows[0].counts.throttled), (0, 0));

        let before_churn = format!(
            "{SERIES_HEADER_BEFORE_CHURN}\nreference,acme,3,fault,120,50,70,0,0,0,0,0,900,2000,3000,4,240\n"
        );
        std::fs::write(dir.path().join("series.csv"), before_churn).unwrap();
        let rows = read_series(dir.path()).unwrap();
        assert_eq!((rows[0].counts.throttled, rows[0].counts.retries), (4, 240));
        assert_eq!(rows[0].max_us, 3000);
        assert_eq!(rows[0].counts.new_connections, 0);

        let new = format!(
            "{SERIES_HEADER}\nreference,acme,3,fault,120,50,70,0,0,0,0,0,900,2000,3000,4,240,7\n"
        );
        std::fs::write(dir.path().join("series.csv"), new).unwrap();
        let rows = read_series(dir.path()).unwrap();
        assert_eq!(rows[0].counts.new_connections, 7);
    }

    #[test]
    fn a_row_written_as_a_line_parses_back_equal() {
        let line = "reference,acme,3,fault,120,50,60,1,2,3,4,5,900,2000,3000,6,240,7";
        let text = format!("{SERIES_HEADER}\n{line}\n");
        let rows = parse_series(Path::new("series.csv"), &text).unwrap();
        assert_eq!(rows[0].csv_line(), line);
    }
}
