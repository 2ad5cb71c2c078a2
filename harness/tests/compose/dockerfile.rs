//! A Dockerfile read into its stages, and the image references of its FROM lines.

use std::collections::BTreeMap;

use crate::read;

/// One stage of a Dockerfile: its base image, its name, its instructions (keyword, rest).
pub(crate) struct Stage {
    pub(crate) from: String,
    pub(crate) name: Option<String>,
    pub(crate) instructions: Vec<(String, String)>,
}

impl Stage {
    pub(crate) fn all(&self, keyword: &str) -> Vec<&str> {
        self.instructions
            .iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, rest)| rest.as_str())
            .collect()
    }

    /// The stage's working directory (the last WORKDIR).
    pub(crate) fn workdir(&self) -> &str {
        self.all("WORKDIR").last().copied().unwrap_or("/")
    }

    /// The exec form of its last `keyword` (ENTRYPOINT or CMD), if it has one.
    pub(crate) fn exec_form(&self, keyword: &str) -> Option<Vec<String>> {
        self.all(keyword).last().map(|rest| {
            serde_json::from_str(rest).unwrap_or_else(|e| {
                panic!("{keyword} {rest}: write the exec form (a JSON list): {e}")
            })
        })
    }

    /// Its `ENV` settings.
    pub(crate) fn env(&self) -> BTreeMap<String, String> {
        self.all("ENV")
            .iter()
            .flat_map(|rest| {
                rest.split_whitespace()
                    .map(|kv| {
                        let (k, v) = kv
                            .split_once('=')
                            .unwrap_or_else(|| panic!("ENV {rest}: write KEY=VALUE"));
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// A Dockerfile's stages, continuation lines joined and comments left out.
pub(crate) fn dockerfile_stages(relative: &str) -> Vec<Stage> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in read(relative).lines() {
        let line = line.trim();
        if line.starts_with('#') || (current.is_empty() && line.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                let (keyword, rest) = current.split_once(' ').unwrap_or((&current, ""));
                instructions.push((keyword.to_ascii_uppercase(), rest.trim().to_owned()));
                current.clear();
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for (keyword, rest) in instructions {
        if keyword == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let (from, name) = match words[..] {
                [from] => (from, None),
                [from, as_, name] if as_.eq_ignore_ascii_case("as") => {
                    (from, Some(name.to_owned()))
                }
                _ => panic!("{relative}: FROM {rest}"),
            };
            stages.push(Stage {
                from: from.to_owned(),
                name,
                instructions: Vec::new(),
            });
        } else {
            stages
                .last_mut()
                .unwrap_or_else(|| panic!("{relative}: {keyword} before any FROM"))
                .instructions
                .push((keyword, rest));
        }
    }
    assert!(!stages.is_empty(), "{relative} has no FROM");
    stages
}

/// The stage an image ends with, the one a container runs.
pub(crate) fn runtime(stages: &[Stage]) -> &Stage {
    stages.last().unwrap()
}

/// A `COPY`'s options, sources and destination.
pub(crate) struct Copy {
    pub(crate) from: Option<String>,
    pub(crate) sources: Vec<String>,
    pub(crate) destination: String,
}

pub(crate) fn copies(stage: &Stage) -> Vec<Copy> {
    stage
        .all("COPY")
        .iter()
        .map(|rest| {
            let mut from = None;
            let mut paths = Vec::new();
            for word in rest.split_whitespace() {
                if let Some(stage) = word.strip_prefix("--from=") {
                    from = Some(stage.to_owned());
                } else if word.starts_with("--") {
                    // --chown, --chmod, --link: the paths are what matter here.
                } else {
                    paths.push(word.to_owned());
                }
            }
            let destination = paths.pop().unwrap_or_else(|| panic!("COPY {rest}"));
            assert!(!paths.is_empty(), "COPY {rest} has no source");
            Copy {
                from,
                sources: paths,
                destination,
            }
        })
        .collect()
}

/// `path` as seen from `workdir`: absolute paths stay, relative ones are joined.
pub(crate) fn absolute(workdir: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", workdir.trim_end_matches('/'))
    }
}

/// The workspace paths a command or environment names (a word or a `-X...=` value starting
/// with targets/, target/ or .tools/).
pub(crate) fn workspace_paths<'a>(words: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    words
        .into_iter()
        .map(|w| w.rsplit('=').next().unwrap_or(w))
        .filter(|w| {
            ["targets/", "target/", ".tools/"]
                .iter()
                .any(|p| w.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// A base image's name and tag.
pub(crate) fn split_image(reference: &str) -> (&str, &str) {
    reference
        .rsplit_once(':')
        .filter(|(_, tag)| !tag.contains('/'))
        .unwrap_or_else(|| panic!("image {reference:?} has no tag: pin one"))
}

/// The leading `X.Y[.Z]` of an image tag (`1.26.7-bookworm` → 1.26.7).
pub(crate) fn tag_version(tag: &str) -> &str {
    let end = tag
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(tag.len());
    tag[..end].trim_end_matches('.')
}

/// The Debian release a tag names (`golang:1.26.7-bookworm`, `debian:bookworm-slim`).
pub(crate) fn debian_release(tag: &str) -> Option<&'static str> {
    ["bullseye", "bookworm", "trixie"]
        .into_iter()
        .find(|r| tag.split('-').any(|part| part == *r))
}
