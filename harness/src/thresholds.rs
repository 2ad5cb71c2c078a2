//! What `[[gates]]` and `[[abort]]` tables share as written: the target they apply to by
//! default, a duration in whole seconds, and naming the key of a value of the wrong type
//! (toml drops it from its message when a table is deserialized).

use std::num::NonZeroU32;

/// A threshold without `target` applies to every target.
pub(crate) fn every_target() -> String {
    "*".to_owned()
}

/// A duration as written (`"5s"`) as whole seconds, at least one: thresholds are judged over a
/// run's per-second counts.
pub(crate) fn whole_seconds(key: &str, text: &str) -> Result<NonZeroU32, String> {
    let d = crate::duration::parse(text).map_err(|e| format!("`{key}`: {e}"))?;
    u32::try_from(d.as_secs())
        .ok()
        .and_then(NonZeroU32::new)
        .filter(|_| d.subsec_nanos() == 0)
        .ok_or_else(|| {
            format!(
                "`{key}` = {text:?}: must be a whole number of seconds, at least 1 s (it is \
                 judged over the run's per-second counts)"
            )
        })
}

/// `error`, a table's deserialization error, with the key it is about put back: the first key
/// of `numbers` whose value is not a number, or of the other keys whose value is not a string.
pub(crate) fn naming_the_key(table: &toml::Table, numbers: &[&str], error: &str) -> String {
    let mistyped = table.iter().find_map(|(key, value)| {
        let fits = if numbers.contains(&key.as_str()) {
            value.is_integer() || value.is_float()
        } else {
            value.is_str()
        };
        (!fits).then_some(key.as_str())
    });
    match mistyped {
        Some(key) if error.starts_with("invalid type") => format!("`{key}`: {error}"),
        _ => error.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_value_is_named_by_its_key() {
        let table: toml::Table = toml::from_str("metric = \"p99_ms\"\nmax = \"1\"").unwrap();
        let said = naming_the_key(&table, &["max"], "invalid type: string \"1\", expected f64");
        assert_eq!(said, "`max`: invalid type: string \"1\", expected f64");
        let table: toml::Table = toml::from_str("metric = 5\nmax = 1").unwrap();
        let said = naming_the_key(&table, &["max"], "invalid type: integer `5`");
        assert!(said.starts_with("`metric`"), "{said}");
    }

    #[test]
    fn whole_seconds_refuses_parts_of_a_second_and_zero() {
        assert_eq!(whole_seconds("for", "5s").map(NonZeroU32::get), Ok(5));
        for text in ["1500ms", "0s", "soon"] {
            assert!(
                whole_seconds("for", text).unwrap_err().contains("`for`"),
                "{text}"
            );
        }
    }
}
