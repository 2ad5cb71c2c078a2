//! A scenario's errors, made where its checks find them: named by the file's origin, at the
//! line of the entry they are about.

use std::ops::Range;

use super::ScenarioError;

pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Makes the errors of one scenario's text: named by its origin, at the line of a span.
pub(super) struct Invalid<'a> {
    pub(super) origin: &'a str,
    pub(super) text: &'a str,
}

impl Invalid<'_> {
    /// `key` is invalid: `message`, at the line `span` starts on: the entry or table the key
    /// is in (the first line when there is no such entry: "needs at least one").
    pub(super) fn at(&self, key: &str, span: Range<usize>, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            origin: self.origin.to_owned(),
            key: key.to_owned(),
            line: line_of(self.text, span.start),
            message,
        }
    }
}
