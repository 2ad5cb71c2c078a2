//! .dockerignore, and whether Docker sends a path of the workspace to a build.

use crate::read;

/// .dockerignore's patterns, in order: (re-included with `!`, the path's segments).
pub(crate) fn dockerignore() -> Vec<(bool, Vec<String>)> {
    read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (negated, pattern) = l.strip_prefix('!').map_or((false, l), |p| (true, p));
            let segments = pattern
                .trim_matches('/')
                .split('/')
                .map(str::to_owned)
                .collect();
            (negated, segments)
        })
        .collect()
}

/// A path segment against a pattern segment with `*` and `?`.
pub(crate) fn segment_matches(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            segment_matches(&pattern[1..], text)
                || (!text.is_empty() && segment_matches(pattern, &text[1..]))
        }
        (Some(b'?'), Some(_)) => segment_matches(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => segment_matches(&pattern[1..], &text[1..]),
        _ => false,
    }
}

/// A path against a pattern whose `**` spans any number of segments.
pub(crate) fn path_matches(pattern: &[String], path: &[&str]) -> bool {
    match pattern.first() {
        None => path.is_empty(),
        Some(p) if p == "**" => (0..=path.len()).any(|n| path_matches(&pattern[1..], &path[n..])),
        Some(p) => {
            !path.is_empty()
                && segment_matches(p.as_bytes(), path[0].as_bytes())
                && path_matches(&pattern[1..], &path[1..])
        }
    }
}

/// Whether Docker leaves `path` out of the build context: the last pattern that matches it or
/// one of its folders decides.
pub(crate) fn ignored(patterns: &[(bool, Vec<String>)], path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut out = false;
    for (negated, pattern) in patterns {
        if (1..=segments.len()).any(|n| path_matches(pattern, &segments[..n])) {
            out = !negated;
        }
    }
    out
}
