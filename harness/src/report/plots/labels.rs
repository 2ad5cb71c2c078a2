//! Where a trade-off map's labels go. Markers on one spot share one block of labels; each
//! block takes the nearest free place beside its spot (a line leads to it when it had to move);
//! a block that finds no free place is listed in a key under the chart. So no label covers
//! another, however many targets a run has or however many of them land on one spot (a dozen
//! peers in the best corner is the common case).

use super::style::text_width;

/// The labels' font size, in px.
pub(super) const LABEL_PX: f64 = 13.0;
/// One line of a label block.
pub(super) const LABEL_ROW: i32 = 17;
/// Markers whose centres are this close (px, on both axes) are drawn as nested rings on one
/// spot and labelled together.
pub(super) const SAME_SPOT_PX: i32 = 8;
/// Room for the coloured square before each name in a block of several.
pub(super) const SWATCH_PX: i32 = 14;
/// Gap between a spot's outer ring and its block.
const GAP_PX: i32 = 6;
/// Horizontal steps a block may move away from its spot, and how far each is.
const STEP_PX: i32 = 40;
const STEPS: i32 = 16;
/// A place on the other side of the spot counts as this many px further away.
const LEFT_PENALTY_PX: i32 = 12;

/// A box in px: left, top, right, bottom.
pub(super) type Rect = (i32, i32, i32, i32);

pub(super) fn overlaps(a: Rect, b: Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// The radius of a marker with `above` other markers drawn over it on its spot: larger, so
/// markers on one spot show as nested rings instead of the last one hiding the others.
pub(super) fn ring_radius(above: usize) -> i32 {
    6 + 3 * above.min(3) as i32
}

/// Markers on (nearly) one spot: the indices of their points, in the order drawn.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Spot {
    pub(super) at: (i32, i32),
    pub(super) members: Vec<usize>,
}

impl Spot {
    /// Its outermost ring's radius.
    pub(super) fn radius(&self) -> i32 {
        ring_radius(self.members.len() - 1)
    }

    /// The box its rings cover, which no label may cover.
    pub(super) fn rings(&self) -> Rect {
        let (x, y, r) = (self.at.0, self.at.1, self.radius());
        (x - r, y - r, x + r, y + r)
    }
}

fn near(a: (i32, i32), b: (i32, i32)) -> bool {
    (a.0 - b.0).abs() <= SAME_SPOT_PX && (a.1 - b.1).abs() <= SAME_SPOT_PX
}

/// Whether another marker drawn later covers the one at `i` (so its ring is drawn larger).
pub(super) fn markers_above(at: &[(i32, i32)], i: usize) -> usize {
    at[i + 1..].iter().filter(|q| near(at[i], **q)).count()
}

/// The markers at `at` grouped by spot: each joins the first spot near its centre.
pub(super) fn spots(at: &[(i32, i32)]) -> Vec<Spot> {
    let mut out: Vec<Spot> = Vec::new();
    for (i, px) in at.iter().enumerate() {
        match out.iter_mut().find(|s| near(s.at, *px)) {
            Some(spot) => spot.members.push(i),
            None => out.push(Spot {
                at: *px,
                members: vec![i],
            }),
        }
    }
    out
}

/// The size in px of a block of `lines`: a coloured square before each when there are several.
pub(super) fn block_size(lines: &[String]) -> (i32, i32) {
    let swatch = if lines.len() > 1 { SWATCH_PX } else { 0 };
    let widest = lines
        .iter()
        .map(|l| text_width(l, LABEL_PX).ceil() as i32)
        .max()
        .unwrap_or(0);
    (swatch + widest, LABEL_ROW * lines.len() as i32)
}

/// Where a block goes: its box, and whether it moved off its spot's row (and needs a line).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Placed {
    pub(super) rect: Rect,
    pub(super) moved: bool,
}

/// The nearest free place for a block of `(w, h)` beside `spot`: centred on its row right of
/// it, else left of it, else a half row up or down at a time and a step further out at a
/// time; inside `chart`, overlapping nothing in `taken`. None when there is no such place.
pub(super) fn place(
    (w, h): (i32, i32),
    spot: &Spot,
    chart: Rect,
    taken: &[Rect],
) -> Option<Placed> {
    let (x, y) = spot.at;
    let reach = spot.radius() + GAP_PX;
    let half_rows = (chart.3 - chart.1) / (LABEL_ROW / 2) + 1;
    let mut best: Option<(i32, Placed)> = None;
    for step in 0..STEPS {
        for left in [false, true] {
            let x0 = if left {
                x - reach - w - step * STEP_PX
            } else {
                x + reach + step * STEP_PX
            };
            for half in -half_rows..=half_rows {
                let dy = half * (LABEL_ROW / 2);
                let top = y + dy - h / 2;
                let rect = (x0, top, x0 + w, top + h);
                let inside = rect.0 >= chart.0
                    && rect.2 <= chart.2
                    && rect.1 >= chart.1
                    && rect.3 <= chart.3;
                if !inside || taken.iter().any(|t| overlaps(rect, *t)) {
                    continue;
                }
                let cost = dy.abs() + 2 * step * STEP_PX + if left { LEFT_PENALTY_PX } else { 0 };
                if best.is_none_or(|(c, _)| cost < c) {
                    let moved = step > 0 || dy != 0;
                    best = Some((cost, Placed { rect, moved }));
                }
            }
        }
    }
    best.map(|(_, p)| p)
}

/// `entries` laid out in rows of at most `width` px, separated by "; ".
pub(super) fn key_rows(entries: &[String], width: f64) -> Vec<String> {
    let mut rows: Vec<String> = Vec::new();
    for entry in entries {
        match rows.last_mut() {
            Some(row) if text_width(&format!("{row}; {entry}"), LABEL_PX) <= width => {
                row.push_str("; ");
                row.push_str(entry);
            }
            _ => rows.push(entry.clone()),
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHART: Rect = (0, 0, 900, 400);

    fn spot(at: (i32, i32), n: usize) -> Spot {
        Spot {
            at,
            members: (0..n).collect(),
        }
    }

    #[test]
    fn markers_within_a_few_pixels_share_a_spot_and_others_do_not() {
        let at = [(100, 100), (104, 97), (100, 120), (92, 108)];
        let s = spots(&at);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].members, vec![0, 1, 3]);
        assert_eq!(s[1].members, vec![2]);
        assert_eq!(markers_above(&at, 0), 2);
        assert_eq!(s[0].radius(), ring_radius(2));
    }

    #[test]
    fn a_label_stays_on_its_markers_row_right_of_it_when_free() {
        let s = spot((100, 200), 1);
        let p = place((120, LABEL_ROW), &s, CHART, &[]).unwrap();
        assert!(!p.moved);
        assert!(
            (p.rect.1 + p.rect.3 - 400).abs() <= 1,
            "centred on the marker's row"
        );
        assert!(p.rect.0 > 100 + s.radius());
    }

    #[test]
    fn a_label_moves_off_a_label_already_on_its_row() {
        let s = spot((100, 200), 1);
        let first = place((120, LABEL_ROW), &s, CHART, &[]).unwrap();
        let second = place((120, LABEL_ROW), &s, CHART, &[first.rect]).unwrap();
        assert!(second.moved);
        assert!(!overlaps(first.rect, second.rect));
    }

    #[test]
    fn a_label_near_the_right_edge_goes_left_of_its_marker() {
        let p = place((150, LABEL_ROW), &spot((880, 200), 1), CHART, &[]).unwrap();
        assert!(p.rect.2 < 880);
    }

    #[test]
    fn a_block_with_no_free_place_is_not_placed() {
        let everything = [CHART];
        assert_eq!(
            place((50, LABEL_ROW), &spot((100, 200), 1), CHART, &everything),
            None
        );
        let tall = place((50, 500), &spot((100, 200), 1), CHART, &[]);
        assert_eq!(tall, None, "taller than the chart");
    }

    #[test]
    fn many_blocks_on_one_crowded_corner_never_overlap_each_other_or_the_rings() {
        let spots: Vec<Spot> = (0..30)
            .map(|i| spot((20 + i % 3, 380 - i % 4), 1))
            .collect();
        let mut taken: Vec<Rect> = spots.iter().map(Spot::rings).collect();
        let mut placed = 0;
        for s in &spots {
            if let Some(p) = place((180, LABEL_ROW), s, CHART, &taken) {
                assert!(!taken.iter().any(|t| overlaps(p.rect, *t)));
                taken.push(p.rect);
                placed += 1;
            }
        }
        assert!(placed >= 20, "{placed} placed");
    }

    #[test]
    fn a_block_of_several_names_is_as_wide_as_its_widest_and_has_room_for_swatches() {
        let lines = vec![
            "a · p99 1.0 ms".to_owned(),
            "longer-name · p99 1.0 ms".to_owned(),
        ];
        let (w, h) = block_size(&lines);
        assert_eq!(h, 2 * LABEL_ROW);
        assert_eq!(w, SWATCH_PX + text_width(&lines[1], LABEL_PX).ceil() as i32);
        assert_eq!(
            block_size(&lines[..1]).0,
            text_width(&lines[0], LABEL_PX).ceil() as i32
        );
    }

    #[test]
    fn key_entries_wrap_into_rows_of_the_width_given() {
        let entries: Vec<String> = (0..6).map(|i| format!("entry number {i}")).collect();
        let rows = key_rows(
            &entries,
            text_width("entry number 0; entry number 1", LABEL_PX),
        );
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[0], "entry number 0; entry number 1");
        assert!(key_rows(&[], 100.0).is_empty());
    }
}
