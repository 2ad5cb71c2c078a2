//! Text as the report's files need it: escaped for HTML, and a target's name made safe for a
//! file name or an HTML id. A leaf, shared by the report's page, its overview and the compare
//! page.

/// A target's name as a file name and an HTML id: nothing a shell or a URL would mangle.
pub(crate) fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_keep_safe_characters_only() {
        assert_eq!(file_stem("fail-open"), "fail-open");
        assert_eq!(file_stem("node/express rl"), "node_express_rl");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
