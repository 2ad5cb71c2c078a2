//! What a name may be: scenarios, targets, tenants and phases are named by the user, and their
//! names end up in paths, CSV columns, toxic names and histogram tags. A leaf: it imports
//! nothing of the crate, so `scenario`, `targets` and `compare` all check names the same way.

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
