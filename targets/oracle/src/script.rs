//! The script (`FAILMODE_ORACLE_SCRIPT`): what the oracle does when, as seconds since t0.
//!
//! ```text
//! script  := segment (";" segment)*          empty segments are skipped
//! segment := FROM ".." [TO] ":" action ("," action)*
//! action  := "limit" N "/" W                 N whole requests per caller per window W (humantime)
//!          | "open"                          admit everything
//!          | "status" CODE                   answer CODE (200..=599) to everything
//!          | "drop"                          close the connection without answering
//!          | "delay" MS                      answer (or drop) MS whole milliseconds later
//! ```
//!
//! FROM and TO are seconds, decimals allowed (`2`, `2.5`), read exactly (no float rounding),
//! so a boundary written `2.3` is 2.3 s to the nanosecond. A segment holds over [FROM, TO);
//! without TO it holds forever. A segment has at most one of limit, open, status, drop (its
//! verdict) and at most one delay; what it leaves out comes from the defaults (see
//! `decide`). Segments may be written in any order but may not overlap: a script whose
//! segments overlapped would need a precedence rule the reader has to remember.
//!
//! Parsed by hand: the grammar is one line long, and a hand parser names the bad segment and
//! the bad word, which is what someone editing a manifest needs.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// `limit N/W`: admit N requests per caller in each window of W, windows aligned to t0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub admits: u32,
    pub window: Duration,
}

/// What a request is answered, apart from when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Limit(Limit),
    Open,
    Status(u16),
    Drop,
}

/// A segment's actions; `None` falls back to the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Actions {
    pub verdict: Option<Verdict>,
    pub delay: Option<Duration>,
}

/// `FROM..TO: actions`, holding over [from, to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub from: Duration,
    /// `None`: forever.
    pub to: Option<Duration>,
    pub actions: Actions,
}

impl Segment {
    fn contains(&self, t: Duration) -> bool {
        self.from <= t && self.to.is_none_or(|to| t < to)
    }

    fn overlaps(&self, other: &Segment) -> bool {
        let starts_before_other_ends = other.to.is_none_or(|to| self.from < to);
        let ends_after_other_starts = self.to.is_none_or(|to| other.from < to);
        starts_before_other_ends && ends_after_other_starts
    }
}

/// The parsed script: non-overlapping segments sorted by start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    segments: Vec<Segment>,
}

/// A segment that cannot be read, named by its position (1-based, counting every `;`-separated
/// piece) and its text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("segment {number} ({text:?}): {message}")]
pub struct ScriptError {
    pub number: usize,
    pub text: String,
    pub message: String,
}

impl Script {
    /// The segment holding at `t` seconds since t0, if any.
    pub fn at(&self, t: Duration) -> Option<&Segment> {
        // Sorted and disjoint: the last segment starting at or before t is the only candidate.
        let after = self.segments.partition_point(|s| s.from <= t);
        after
            .checked_sub(1)
            .map(|i| &self.segments[i])
            .filter(|s| s.contains(t))
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }
}

impl FromStr for Script {
    type Err = ScriptError;

    fn from_str(text: &str) -> Result<Self, ScriptError> {
        let mut parsed: Vec<(usize, &str, Segment)> = Vec::new();
        for (i, piece) in text.split(';').enumerate() {
            let piece = piece.trim();
            if piece.is_empty() {
                continue;
            }
            let error = |message: String| ScriptError {
                number: i + 1,
                text: piece.to_owned(),
                message,
            };
            let segment = parse_segment(piece).map_err(error)?;
            if let Some((n, other, _)) = parsed.iter().find(|(_, _, s)| s.overlaps(&segment)) {
                return Err(error(format!(
                    "overlaps segment {n} ({other:?}); segments may not overlap"
                )));
            }
            parsed.push((i + 1, piece, segment));
        }
        let mut segments: Vec<Segment> = parsed.into_iter().map(|(_, _, s)| s).collect();
        segments.sort_by_key(|s| s.from);
        Ok(Self { segments })
    }
}

fn parse_segment(text: &str) -> Result<Segment, String> {
    let Some((range, actions)) = text.split_once(':') else {
        return Err("expected FROM..TO: ACTION[, ACTION…], e.g. 2..4: open".into());
    };
    let Some((from, to)) = range.split_once("..") else {
        return Err(format!(
            "expected a time range FROM..TO or FROM.. before ':', got {:?}",
            range.trim()
        ));
    };
    let from = parse_seconds(from.trim())?;
    let to = match to.trim() {
        "" => None,
        to => Some(parse_seconds(to)?),
    };
    if let Some(to) = to
        && to <= from
    {
        return Err(format!(
            "ends at {} s, not after its start at {} s",
            Seconds(to),
            Seconds(from)
        ));
    }
    Ok(Segment {
        from,
        to,
        actions: parse_actions(actions)?,
    })
}

/// Seconds as written: digits, optionally a point and up to 9 more digits.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let bad = || format!("time {text:?} is not a number of seconds (e.g. 2 or 2.5)");
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) || fraction.len() > 9 {
        return Err(bad());
    }
    if text.ends_with('.') {
        return Err(bad());
    }
    let secs: u64 = whole.parse().map_err(|_| bad())?;
    // "25" after the point is 250,000,000 ns: pad to nine digits.
    let nanos: u32 = format!("{fraction:0<9}").parse().map_err(|_| bad())?;
    Ok(Duration::new(secs, nanos))
}

fn parse_actions(text: &str) -> Result<Actions, String> {
    let mut actions = Actions::default();
    if text.trim().is_empty() {
        return Err(
            "no action after ':'; expected limit N/W, open, status CODE, drop or delay MS".into(),
        );
    }
    for action in text.split(',') {
        let words: Vec<&str> = action.split_whitespace().collect();
        match words.as_slice() {
            [] => return Err("an empty action between commas".into()),
            ["delay", rest @ ..] => {
                let delay = parse_delay(rest)?;
                if actions.delay.replace(delay).is_some() {
                    return Err("two delays; a segment takes at most one".into());
                }
            }
            [keyword, rest @ ..] => {
                let verdict = parse_verdict(keyword, rest)?;
                if let Some(before) = actions.verdict.replace(verdict) {
                    return Err(format!(
                        "both {before} and {verdict}; a segment takes at most one of limit, \
                         open, status, drop (and a delay beside it)"
                    ));
                }
            }
        }
    }
    Ok(actions)
}

fn parse_delay(args: &[&str]) -> Result<Duration, String> {
    match args {
        [ms] => ms
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("delay {ms:?}: expected whole milliseconds, e.g. delay 2000")),
        _ => Err(format!(
            "delay takes one number of milliseconds, got {:?}",
            args.join(" ")
        )),
    }
}

fn parse_verdict(keyword: &str, args: &[&str]) -> Result<Verdict, String> {
    match (keyword, args) {
        ("open", []) => Ok(Verdict::Open),
        ("drop", []) => Ok(Verdict::Drop),
        ("limit", [rate]) => parse_limit(rate).map(Verdict::Limit),
        ("status", [code]) => match code.parse::<u16>() {
            Ok(code @ 200..=599) => Ok(Verdict::Status(code)),
            _ => Err(format!(
                "status {code:?}: expected a final HTTP status, 200 to 599"
            )),
        },
        ("open" | "drop", _) => Err(format!("{keyword} takes no argument")),
        ("limit", _) => Err("limit takes one argument N/W, e.g. limit 10/1s".into()),
        ("status", _) => Err("status takes one code, e.g. status 503".into()),
        _ => Err(format!(
            "unknown action {keyword:?}; expected limit N/W, open, status CODE, drop or delay MS"
        )),
    }
}

/// `N/W`, as in `limit 10/1s`; public for the default limit from the environment.
pub fn parse_limit(text: &str) -> Result<Limit, String> {
    let Some((admits, window)) = text.split_once('/') else {
        return Err(format!("limit {text:?}: expected N/W, e.g. limit 10/1s"));
    };
    let admits = admits
        .parse::<u32>()
        .map_err(|_| format!("limit {text:?}: {admits:?} is not a whole number of requests"))?;
    let window = humantime::parse_duration(window)
        .map_err(|e| format!("limit {text:?}: window {window:?}: {e}"))?;
    if window.is_zero() {
        return Err(format!(
            "limit {text:?}: the window must be longer than zero"
        ));
    }
    Ok(Limit { admits, window })
}

/// A duration written as seconds, as few digits as it takes.
struct Seconds(Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs())?;
        let nanos = self.0.subsec_nanos();
        if nanos > 0 {
            let fraction = format!("{nanos:09}");
            write!(f, ".{}", fraction.trim_end_matches('0'))?;
        }
        Ok(())
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.admits,
            humantime::format_duration(self.window)
        )
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limit(limit) => write!(f, "limit {limit}"),
            Self::Open => f.write_str("open"),
            Self::Status(code) => write!(f, "status {code}"),
            Self::Drop => f.write_str("drop"),
        }
    }
}

/// The segment as the grammar writes it: parsing the output gives the segment back.
impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..", Seconds(self.from))?;
        if let Some(to) = self.to {
            write!(f, "{}", Seconds(to))?;
        }
        f.write_str(":")?;
        let verdict = self.actions.verdict.map(|v| v.to_string());
        let delay = self
            .actions
            .delay
            .map(|d| format!("delay {}", d.as_millis()));
        let words: Vec<String> = verdict.into_iter().chain(delay).collect();
        write!(f, " {}", words.join(", "))
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let segments: Vec<String> = self.segments.iter().map(Segment::to_string).collect();
        f.write_str(&segments.join("; "))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(text: &str) -> Script {
        text.parse().unwrap()
    }

    fn error(text: &str) -> ScriptError {
        text.parse::<Script>().unwrap_err()
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn an_empty_script_has_no_segment() {
        for text in ["", "  ", ";", " ; ;"] {
            assert_eq!(parse(text), Script::default(), "{text:?}");
        }
    }

    #[test]
    fn every_action_parses() {
        let script =
            parse("0..1: limit 10/1s; 1..2: open; 2..3: status 503; 3..4: drop; 4..5: delay 2000");
        let verdicts: Vec<Option<Verdict>> = script
            .segments()
            .iter()
            .map(|s| s.actions.verdict)
            .collect();
        assert_eq!(
            verdicts,
            [
                Some(Verdict::Limit(Limit {
                    admits: 10,
                    window: Duration::from_secs(1)
                })),
                Some(Verdict::Open),
                Some(Verdict::Status(503)),
                Some(Verdict::Drop),
                None,
            ]
        );
        assert_eq!(
            script.segments()[4].actions.delay,
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn a_delay_combines_with_a_verdict_in_either_order() {
        let a = parse("3..4: delay 2000, limit 10/1s");
        let b = parse("3..4: limit 10/1s,delay 2000");
        assert_eq!(a, b);
        let actions = a.segments()[0].actions;
        assert_eq!(actions.delay, Some(Duration::from_millis(2000)));
        assert!(matches!(actions.verdict, Some(Verdict::Limit(_))));
    }

    #[test]
    fn times_are_exact_decimals_and_to_may_be_omitted() {
        let script = parse("2.3..2.300000001: open; 10..: status 500");
        let first = &script.segments()[0];
        assert_eq!(first.from, Duration::new(2, 300_000_000));
        assert_eq!(first.to, Some(Duration::new(2, 300_000_001)));
        assert_eq!(script.segments()[1].to, None);
    }

    #[test]
    fn at_finds_the_segment_over_a_half_open_interval() {
        let script = parse("4..6: status 500; 2..4: open; 8..: drop");
        let verdict = |t: f64| script.at(secs(t)).and_then(|s| s.actions.verdict);
        assert_eq!(verdict(0.0), None);
        assert_eq!(verdict(1.999), None);
        assert_eq!(verdict(2.0), Some(Verdict::Open));
        assert_eq!(verdict(3.999), Some(Verdict::Open));
        assert_eq!(verdict(4.0), Some(Verdict::Status(500)));
        assert_eq!(verdict(6.0), None);
        assert_eq!(verdict(8.0), Some(Verdict::Drop));
        assert_eq!(verdict(1e6), Some(Verdict::Drop));
    }

    #[test]
    fn segments_that_touch_are_fine_and_overlapping_ones_are_named() {
        parse("2..4: open; 4..6: open; 0..2: open");
        let err = error("2..4: open; 3..5: status 500");
        assert_eq!(err.number, 2);
        assert_eq!(
            err.to_string(),
            r#"segment 2 ("3..5: status 500"): overlaps segment 1 ("2..4: open"); segments may not overlap"#
        );
        assert_eq!(error("5..: open; 1..6: drop").number, 2);
        assert_eq!(error("1..2: open; 0..: drop").number, 2);
    }

    #[test]
    fn the_bad_segment_and_word_are_named() {
        let cases = [
            ("1..2: open; 2..3: opne", 2, "unknown action \"opne\""),
            ("2..1: open", 1, "ends at 1 s, not after its start at 2 s"),
            ("2..2: open", 1, "not after its start"),
            ("2s..3: open", 1, "time \"2s\" is not a number of seconds"),
            ("-1..3: open", 1, "time \"-1\""),
            ("1..2.: open", 1, "time \"2.\""),
            ("1...2: open", 1, "time \".2\""),
            ("1.0000000001..2: open", 1, "is not a number of seconds"),
            ("2-4: open", 1, "expected a time range"),
            ("2..4 open", 1, "expected FROM..TO: ACTION"),
            ("2..4:", 1, "no action after ':'"),
            ("2..4: open,, delay 5", 1, "empty action"),
            ("2..4: open, drop", 1, "both open and drop"),
            ("2..4: delay 1, delay 2", 1, "two delays"),
            ("2..4: delay 2s", 1, "expected whole milliseconds"),
            ("2..4: delay", 1, "delay takes one number"),
            ("2..4: status 99", 1, "200 to 599"),
            ("2..4: status 600", 1, "200 to 599"),
            ("2..4: status", 1, "status takes one code"),
            ("2..4: open now", 1, "open takes no argument"),
            ("2..4: limit 10", 1, "expected N/W"),
            ("2..4: limit ten/1s", 1, "\"ten\" is not a whole number"),
            ("2..4: limit 10/1 s", 1, "limit takes one argument"),
            ("2..4: limit 10/soon", 1, "window \"soon\""),
            ("2..4: limit 10/0s", 1, "longer than zero"),
            (";;1..2: open; 2..: nope", 4, "unknown action \"nope\""),
        ];
        for (text, number, message) in cases {
            let err = error(text);
            assert_eq!(err.number, number, "{text:?}: {err}");
            assert!(err.to_string().contains(message), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_limit_of_zero_refuses_everything_and_is_allowed() {
        let script = parse("0..: limit 0/1s");
        assert_eq!(
            script.segments()[0].actions.verdict,
            Some(Verdict::Limit(Limit {
                admits: 0,
                window: Duration::from_secs(1)
            }))
        );
    }

    #[test]
    fn a_script_displays_as_it_parses() {
        let text = "0.25..2: limit 10/500ms; 2..4: open, delay 5; 4..6.5: status 503; 6.5..: drop";
        let script = parse(text);
        assert_eq!(script.to_string(), text);
        assert_eq!(parse(&script.to_string()), script);
        assert_eq!(parse("7..8: delay 2000").to_string(), "7..8: delay 2000");
    }
}
