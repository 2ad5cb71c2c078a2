//! Why a fault table does not parse, in words: serde's message for the untagged fallback to
//! the toxics ("did not match any variant") names neither the type nor the key.

use serde::Deserialize;

use crate::infra::toxiproxy::ToxicKind;

/// The `type`s of the faults failmode acts out itself.
const NATIVE_TYPES: &[&str] = &[
    "down",
    "hang",
    "stall",
    "flap",
    "redis-restart",
    "client-pause",
    "noisy-neighbour",
    "eviction",
    "oom",
    "readonly",
    "busy",
    "script-flush",
    "scale",
    "kill-instance",
    "failover",
];

/// The `type`s that are Toxiproxy toxics.
const TOXIC_TYPES: &[&str] = &[
    "latency",
    "timeout",
    "reset_peer",
    "bandwidth",
    "slicer",
    "limit_data",
    "slow_close",
];

/// Why a fault table does not parse, in place of serde's "did not match any variant of
/// untagged enum" (the toxics are an untagged fallback, which swallows the real reason).
pub fn explain(table: &toml::Value) -> String {
    let types = [NATIVE_TYPES, TOXIC_TYPES].concat().join(", ");
    let Some(kind) = table.get("type").and_then(toml::Value::as_str) else {
        return format!("a fault needs a `type`, one of: {types}");
    };
    if TOXIC_TYPES.contains(&kind)
        && let Err(e) = ToxicKind::deserialize(table.clone())
    {
        return format!("fault {kind:?}: {}", e.message());
    }
    if !NATIVE_TYPES.contains(&kind) {
        return format!("unknown fault type {kind:?}; the types are: {types}");
    }
    let keys: Vec<&str> = table
        .as_table()
        .map(|t| {
            t.keys()
                .map(String::as_str)
                .filter(|k| *k != "type")
                .collect()
        })
        .unwrap_or_default();
    format!(
        "fault {kind:?}: a key is missing, unknown or of the wrong type (given: {}); its keys \
         are in the fault table of scenarios/README.md",
        if keys.is_empty() {
            "none".to_owned()
        } else {
            keys.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_that_does_not_parse_is_explained_by_its_type_and_keys() {
        let explain_text = |text: &str| explain(&toml::from_str::<toml::Value>(text).unwrap());
        let e = explain_text(r#"type = "scale""#);
        assert!(e.contains("\"scale\"") && e.contains("given: none"), "{e}");
        let e = explain_text(r#"type = "scale-up""#);
        assert!(
            e.contains("unknown fault type") && e.contains("kill-instance"),
            "{e}"
        );
        let e = explain_text(r#"type = "latency""#);
        assert!(e.contains("latency_ms"), "{e}");
        assert!(explain_text("to = 3").contains("needs a `type`"));
    }
}
