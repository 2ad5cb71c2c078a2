//! HdrHistogram interval logs, the format a results folder keeps its histograms in: one
//! tagged interval per histogram, readable by HdrHistogram's own tools, and read back here
//! exactly for `failmode merge`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

#[derive(Debug, thiserror::Error)]
pub enum HlogError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an HdrHistogram interval log (at byte {offset})")]
    Parse { path: PathBuf, offset: usize },
    #[error("{path}: the histogram tagged {tag:?} cannot be decoded: {message}")]
    Histogram {
        path: PathBuf,
        tag: String,
        message: String,
    },
}

/// One interval of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub tag: String,
    /// Since the run's start.
    pub start: Duration,
    pub length: Duration,
    pub histogram: Histogram<u64>,
}

/// Writes `intervals` (values in µs) to `path`, after the comment lines. A tag HdrHistogram
/// cannot hold (a space or a comma, which target and tenant names never have) is skipped.
pub fn write(path: &Path, comments: &[String], intervals: &[Interval]) -> std::io::Result<()> {
    super::atomic::write_with(path, |file| write_log(file, comments, intervals))
}

fn write_log(
    mut file: &mut dyn Write,
    comments: &[String],
    intervals: &[Interval],
) -> std::io::Result<()> {
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    for comment in comments {
        builder.add_comment(comment);
    }
    let mut writer = builder
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut file, &mut serializer)
        .map_err(std::io::Error::other)?;
    for i in intervals {
        let Some(tag) = Tag::new(&i.tag) else {
            continue;
        };
        writer
            .write_histogram(&i.histogram, i.start, i.length, Some(tag))
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    }
    Ok(())
}

/// One interval as a line of a log (newline included), for a log kept up to date line by line:
/// appended to as the run goes, or rewritten from lines encoded once.
pub fn encode_line(interval: &Interval) -> std::io::Result<Vec<u8>> {
    let mut log = Vec::new();
    write_log(&mut log, &[], std::slice::from_ref(interval))?;
    // What `write_log` puts before the interval are comment lines (`#[MaxValueDivisor…]`).
    let text = String::from_utf8_lossy(&log);
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| [l, "\n"])
        .collect::<String>()
        .into_bytes())
}

/// Writes a log of lines made by [`encode_line`], whole or not at all (lasting through a kill
/// of the writer, not a power cut: a journal's).
pub fn write_lines<'a>(
    path: &Path,
    comments: &[String],
    lines: impl IntoIterator<Item = &'a [u8]>,
) -> std::io::Result<()> {
    super::atomic::write_lasting(path, super::atomic::Lasting::Kills, |file| {
        write_log(file, comments, &[])?;
        for line in lines {
            file.write_all(line)?;
        }
        Ok(())
    })
}

/// Every tagged interval of the log at `path`, histograms decoded.
pub fn read(path: &Path) -> Result<Vec<Interval>, HlogError> {
    let bytes = std::fs::read(path).map_err(|source| HlogError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &bytes)
}

/// As [`read`], for a log that was being appended to when its writer was killed: a last line
/// cut short is left out.
pub fn read_complete_lines(path: &Path) -> Result<Vec<Interval>, HlogError> {
    let mut bytes = std::fs::read(path).map_err(|source| HlogError::Io {
        path: path.to_owned(),
        source,
    })?;
    bytes.truncate(bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
    parse(path, &bytes)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<Interval>, HlogError> {
    let mut intervals = Vec::new();
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| HlogError::Parse {
            path: path.to_owned(),
            offset: match e {
                hdrhistogram::serialization::interval_log::LogIteratorError::ParseError {
                    offset,
                } => offset,
            },
        })?;
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        let Some(tag) = interval.tag() else { continue };
        let bad = |message: String| HlogError::Histogram {
            path: path.to_owned(),
            tag: tag.as_str().to_owned(),
            message,
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(interval.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let histogram: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &raw[..])
            .map_err(|e| bad(format!("{e:?}")))?;
        intervals.push(Interval {
            tag: tag.as_str().to_owned(),
            start: interval.start_timestamp(),
            length: interval.duration(),
            histogram,
        });
    }
    Ok(intervals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_written_to_a_log_read_back_equal() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("x.hlog");
        let mut h =
            Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap_or_else(|e| panic!("{e}"));
        for v in [1, 250, 999, 12_345, 59_000_000] {
            h.record(v).unwrap_or_else(|e| panic!("{e}"));
        }
        let intervals = vec![
            Interval {
                tag: "reference/acme/steady".into(),
                start: Duration::from_secs(3),
                length: Duration::from_secs(1),
                histogram: h.clone(),
            },
            Interval {
                tag: "has space".into(),
                start: Duration::ZERO,
                length: Duration::from_secs(1),
                histogram: h,
            },
        ];
        write(&path, &["a comment".to_owned()], &intervals).unwrap_or_else(|e| panic!("{e}"));
        let back = read(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, intervals[..1]);
    }

    #[test]
    fn a_log_of_encoded_lines_reads_back_and_a_line_cut_short_is_left_out() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("x.hlog");
        let interval = |second: u64, value: u64| {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 2)
                .unwrap_or_else(|e| panic!("{e}"));
            h.record(value).unwrap_or_else(|e| panic!("{e}"));
            Interval {
                tag: "reference/all".into(),
                start: Duration::from_secs(second),
                length: Duration::from_secs(1),
                histogram: h,
            }
        };
        let (a, b) = (interval(1, 900), interval(2, 45_000));
        let lines = [encode_line(&a).unwrap(), encode_line(&b).unwrap()];
        write_lines(&path, &["journal".into()], lines.iter().map(Vec::as_slice)).unwrap();
        assert_eq!(read(&path).unwrap(), [a.clone(), b]);

        let mut cut = std::fs::read(&path).unwrap();
        cut.truncate(cut.len() - 5);
        std::fs::write(&path, &cut).unwrap();
        assert!(read(&path).is_err(), "a plain read refuses a cut log");
        assert_eq!(read_complete_lines(&path).unwrap(), [a]);
    }
}
