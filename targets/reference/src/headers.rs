//! The rate-limit response fields of draft-ietf-httpapi-ratelimit-headers-11, as seed 000
//! shows them, and `Retry-After`.
//!
//! `RateLimit-Policy: "api";q=50;w=1` names the quota and its window; `RateLimit:
//! "api";r=0;t=1` gives what remains and `t`, the seconds until more quota is available.

use std::time::Duration;

/// Whole seconds, rounded up, at least one: header values and `Retry-After` are integers, and
/// "retry in 0 s" invites a retry storm.
pub(crate) fn whole_seconds(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

/// An RFC 9651 string: quoted, with `"` and `\` escaped and non-printable ASCII dropped.
fn sf_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

pub(crate) fn policy(name: &str, limit: u32, window: Duration) -> String {
    format!("{};q={limit};w={}", sf_string(name), whole_seconds(window))
}

pub(crate) fn ratelimit(name: &str, remaining: u64, until_more: Duration) -> String {
    format!(
        "{};r={remaining};t={}",
        sf_string(name),
        whole_seconds(until_more)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_the_fields_as_seed_000_shows_them() {
        assert_eq!(
            policy("per-second", 50, Duration::from_secs(1)),
            r#""per-second";q=50;w=1"#
        );
        assert_eq!(
            ratelimit("per-second", 0, Duration::from_millis(300)),
            r#""per-second";r=0;t=1"#
        );
    }

    #[test]
    fn seconds_round_up_and_never_say_zero() {
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1001)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(60)), 60);
    }

    #[test]
    fn policy_names_are_escaped_structured_field_strings() {
        assert_eq!(
            policy("a\"b\\c\u{7}", 1, Duration::from_secs(86_400)),
            r#""a\"b\\c";q=1;w=86400"#
        );
    }
}
