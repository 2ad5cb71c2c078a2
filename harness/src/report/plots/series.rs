//! What a plot draws: its lines, each cut where a second has no data, under a title and
//! against one y axis.

use plotters::prelude::*;

use super::axes::YAxis;

/// One line of a plot, cut where there is no data, so a gap is not drawn as a slope.
pub(super) struct Line {
    pub(super) label: String,
    pub(super) colour: RGBColor,
    pub(super) dashed: bool,
    /// px. Lines drawn earlier are wider, so lines on the same values (every tenant refused,
    /// at 0) show as nested bands instead of the last one hiding the others.
    pub(super) width: u32,
    pub(super) segments: Vec<Vec<(f64, f64)>>,
}

impl Line {
    /// Points at the middle of each second (second s covers [s, s + 1)); `None` is a gap.
    pub(super) fn from_seconds(
        label: impl Into<String>,
        colour: RGBColor,
        points: impl IntoIterator<Item = (u64, Option<f64>)>,
    ) -> Self {
        let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut last: Option<u64> = None;
        for (second, value) in points {
            let Some(value) = value else {
                last = None;
                continue;
            };
            let x = second as f64 + 0.5;
            match (segments.last_mut(), last) {
                (Some(seg), Some(prev)) if second == prev + 1 => seg.push((x, value)),
                _ => segments.push(vec![(x, value)]),
            }
            last = Some(second);
        }
        Self {
            label: label.into(),
            colour,
            dashed: false,
            width: 2,
            segments,
        }
    }
}

/// One plot, as its drawing needs it.
pub(super) struct Plot<'a> {
    pub(super) title: String,
    pub(super) y_desc: String,
    pub(super) y: &'a YAxis,
    pub(super) lines: Vec<Line>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::style::BLUE;

    #[test]
    fn gaps_split_a_line() {
        let line = Line::from_seconds(
            "x",
            BLUE,
            [
                (0, Some(1.0)),
                (1, Some(2.0)),
                (2, None),
                (3, Some(3.0)),
                (5, Some(4.0)),
            ],
        );
        assert_eq!(line.segments.len(), 3);
        assert_eq!(line.segments[0], vec![(0.5, 1.0), (1.5, 2.0)]);
    }
}
