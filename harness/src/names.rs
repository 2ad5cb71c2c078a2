//! What a name may be, and how one is matched or looked up: scenarios, targets, tenants, phases
//! and metrics are named by the user, and their names end up in paths, CSV columns, toxic
//! names and histogram tags. A leaf: it imports nothing of the crate, so `scenario`, `targets`,
//! `compare`, gates and abort guards all treat names the same way.

/// Names end up in paths, CSV columns, toxic names and histogram tags.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Matches `*` (any run) and `?` (one character): a gate's or an abort guard's target.
/// Hand-written: glob crates match paths, and target names are plain words.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

/// The name `value` goes by in `known`: its first (a value may have an older name after it).
pub fn name_of<T: PartialEq>(known: &[(&'static str, T)], value: &T) -> &'static str {
    known
        .iter()
        .find(|(_, v)| v == value)
        .map_or("?", |(n, _)| n)
}

/// The value `name` stands for in `known` (a gate's or an abort guard's metrics), or an error
/// that lists the known names.
pub fn known<T: Copy>(known: &[(&str, T)], what: &str, name: &str) -> Result<T, String> {
    known
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
            format!("unknown {what} {name:?}; known: {}", names.join(", "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_matches("*", "fail-open"));
        assert!(glob_matches("fail-*", "fail-open"));
        assert!(glob_matches("fail-?pen", "fail-open"));
        assert!(!glob_matches("fail", "fail-open"));
        assert!(!glob_matches("*-closed", "fail-open"));
    }
}
