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
    let (quota, seconds) = over_whole_seconds(limit, window);
    format!("{};q={quota};w={seconds}", sf_string(name))
}

/// The longest `w` advertised for a window that is not a whole number of seconds: a client
/// reads `w` as the span to spread `q` over, and `q=1000;w=333` for a 333 ms window says
/// nothing a person can check at a glance.
const LONGEST_W: u128 = 60;

/// The quota over a whole number of seconds at the route's rate: draft 11's `w` is whole
/// seconds ("sub-second precision is not supported"), so a window that is not a whole number
/// of them is advertised over the fewest whole seconds that hold a whole number of its windows
/// (500 ms: 1 s and twice the limit; 1.5 s: 3 s and twice), or, when that would be longer
/// than a minute, over its seconds rounded up with the quota rounded down: never more than
/// the route admits.
fn over_whole_seconds(limit: u32, window: Duration) -> (u128, u128) {
    const SECOND: u128 = 1_000_000_000;
    let nanos = window.as_nanos().max(1);
    let common = nanos / gcd(nanos, SECOND) * SECOND;
    if common / SECOND <= LONGEST_W {
        (u128::from(limit) * (common / nanos), common / SECOND)
    } else {
        let seconds = nanos.div_ceil(SECOND);
        (u128::from(limit) * seconds * SECOND / nanos, seconds)
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
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
    fn a_window_of_no_whole_seconds_is_advertised_at_its_rate_over_whole_seconds() {
        let ms = Duration::from_millis;
        assert_eq!(policy("api", 50, ms(500)), r#""api";q=100;w=1"#);
        assert_eq!(policy("api", 50, ms(1500)), r#""api";q=100;w=3"#);
        assert_eq!(policy("api", 7, ms(250)), r#""api";q=28;w=1"#);
        assert_eq!(
            policy("api", 5, Duration::from_secs(60)),
            r#""api";q=5;w=60"#
        );
        // 1 h + 1 ms: 3601 s, the quota rounded down.
        assert_eq!(
            policy("api", 1000, Duration::from_secs(3600) + ms(1)),
            r#""api";q=1000;w=3601"#
        );
        // 333 ms: only 333 s hold a whole number of windows; 1 s at 3.003 a second, rounded down.
        assert_eq!(policy("api", 1, ms(333)), r#""api";q=3;w=1"#);
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
