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
