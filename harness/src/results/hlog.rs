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

/// Every tagged interval of the log at `path`, histograms decoded.
pub fn read(path: &Path) -> Result<Vec<Interval>, HlogError> {
    let bytes = std::fs::read(path).map_err(|source| HlogError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut intervals = Vec::new();
    for entry in IntervalLogIterator::new(&bytes) {
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
}
