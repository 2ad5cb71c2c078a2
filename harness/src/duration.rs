//! Durations as humantime strings (`"250ms"`, `"30s"`) in scenario files.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| {
        format!("{text:?} is not a duration ({e}); write e.g. \"250ms\", \"30s\" or \"1m\"")
    })
}

/// For `#[serde(with = "crate::duration")]`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
}

/// For `#[serde(default, with = "crate::duration::optional")]`: an optional duration.
pub(crate) mod optional {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        super::parse(&String::deserialize(d)?)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}
