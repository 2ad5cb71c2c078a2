//! Where a trade-off map's labels go. Markers on one spot share one block of labels; each
//! block takes the nearest free place beside its spot (a line leads to it when it had to move);
//! a block that finds no free place is listed in a key under the chart, wrapped between names.
//! So no label covers another or a marker, however many targets a run has or however many of
//! them land on one spot (a dozen peers in the best corner is the common case).

use super::style::text_width;

/// The labels' font size, in px.
pub(super) const LABEL_PX: f64 = 13.0;
/// One line of a label block.
pub(super) const LABEL_ROW: i32 = 17;
/// Markers whose centres are this close (px, on both axes) are drawn as nested rings on one
/// spot and labelled together.
const SAME_SPOT_PX: i32 = 8;
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

fn overlaps(a: Rect, b: Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// The radius of a marker with `above` other markers drawn over it on its spot.
fn ring_radius(above: usize) -> i32 {
    6 + 3 * above.min(3) as i32
}

/// A marker's ring: its centre and radius.
pub(super) type Ring = ((i32, i32), i32);

/// The box a ring covers, which no label may cover.
pub(super) fn ring_box(((x, y), r): Ring) -> Rect {
    (x - r, y - r, x + r, y + r)
}

/// Markers on (nearly) one spot: the indices of their points, in the order drawn.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Spot {
    pub(super) at: (i32, i32),
    pub(super) members: Vec<usize>,
    /// How far from `at` its members' rings reach, on either axis.
    pub(super) reach: i32,
}

fn near(a: (i32, i32), b: (i32, i32)) -> bool {
    (a.0 - b.0).abs() <= SAME_SPOT_PX && (a.1 - b.1).abs() <= SAME_SPOT_PX
}

/// The rings of markers centred at `at`, in the order drawn: a marker with others drawn over
/// it on its spot is larger, so markers on one spot show as nested rings instead of the last
/// one hiding the others.
pub(super) fn rings(at: &[(i32, i32)]) -> Vec<Ring> {
    at.iter()
        .enumerate()
        .map(|(i, px)| {
            let above = at[i + 1..].iter().filter(|q| near(*px, **q)).count();
            (*px, ring_radius(above))
        })
        .collect()
}

/// The markers' `rings` grouped by spot: each joins the first spot near its centre.
pub(super) fn spots(rings: &[Ring]) -> Vec<Spot> {
    let mut out: Vec<Spot> = Vec::new();
    for (i, &(px, r)) in rings.iter().enumerate() {
        let reach_from = |at: (i32, i32)| (px.0 - at.0).abs().max((px.1 - at.1).abs()) + r;
        match out.iter_mut().find(|s| near(s.at, px)) {
            Some(spot) => {
                spot.reach = spot.reach.max(reach_from(spot.at));
                spot.members.push(i);
            }
            None => out.push(Spot {
                at: px,
                members: vec![i],
                reach: r,
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

/// The nearest free place for a block of `(w, h)` beside `spot`, inside `chart` and
/// overlapping nothing in `taken`: the place that moves it least, counting a half row up or
/// down as its px, a step further out as twice its px, and the spot's left side as a few px
/// more than its right. None when there is no such place.
pub(super) fn place(
    (w, h): (i32, i32),
    spot: &Spot,
    chart: Rect,
    taken: &[Rect],
) -> Option<Placed> {
    let (x, y) = spot.at;
    let reach = spot.reach + GAP_PX;
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

/// `entries` (each its parts, the first saying where) laid out in rows of at most `width`
/// px: entries separated by "; ", an entry's parts by ", ", a row broken only between parts
/// (so a spot of two dozen names takes several rows, never one row wider than the picture).
pub(super) fn key_rows(entries: &[Vec<String>], width: f64) -> Vec<String> {
    let mut rows: Vec<String> = Vec::new();
    for entry in entries {
        for (i, part) in entry.iter().enumerate() {
            let sep = if i == 0 { "; " } else { ", " };
            match rows.last_mut() {
                Some(row) if text_width(&format!("{row}{sep}{part}"), LABEL_PX) <= width => {
                    row.push_str(sep);
                    row.push_str(part);
                }
                // A part carried onto a new row starts with an ellipsis: the entry goes on.
                _ if i > 0 => rows.push(format!("… {part}")),
                _ => rows.push(part.clone()),
            }
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
            reach: ring_radius(n - 1),
        }
    }

    #[test]
    fn markers_within_a_few_pixels_share_a_spot_and_others_do_not() {
        let at = [(100, 100), (104, 97), (100, 120), (92, 108)];
        let r = rings(&at);
        // The first has two near it drawn over it; the last, none.
        assert_eq!(r[0].1, ring_radius(2));
        assert_eq!(r[3].1, ring_radius(0));
        let s = spots(&r);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].members, vec![0, 1, 3]);
        assert_eq!(s[1].members, vec![2]);
        // Its reach covers the ring 8 px away, not only the first one's.
        assert_eq!(s[0].reach, 8 + ring_radius(0));
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
        assert!(p.rect.0 > 100 + s.reach);
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
        let at: Vec<(i32, i32)> = (0..30)
            .map(|i| (20 + i % 3 * 20, 380 - i % 4 * 20))
            .collect();
        let r = rings(&at);
        let mut taken: Vec<Rect> = r.iter().copied().map(ring_box).collect();
        let mut placed = 0;
        for s in &spots(&r) {
            if let Some(p) = place((180, LABEL_ROW * s.members.len() as i32), s, CHART, &taken) {
                assert!(!taken.iter().any(|t| overlaps(p.rect, *t)));
                taken.push(p.rect);
                placed += 1;
            }
        }
        assert!(placed >= 8, "{placed} placed");
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
        let entries: Vec<Vec<String>> = (0..6).map(|i| vec![format!("entry number {i}")]).collect();
        let rows = key_rows(
            &entries,
            text_width("entry number 0; entry number 1", LABEL_PX),
        );
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[0], "entry number 0; entry number 1");
        assert!(key_rows(&[], 100.0).is_empty());
    }

    #[test]
    fn a_spot_of_two_dozen_names_wraps_between_names_never_wider_than_the_row() {
        let mut entry = vec!["at 0.0 %, 0.0 %: first-target · p99 1.0 ms".to_owned()];
        entry.extend((1..25).map(|i| format!("target-number-{i} · p99 1{i}.0 ms")));
        let width = 800.0;
        let rows = key_rows(&[entry], width);
        assert!(rows.len() > 3, "{rows:?}");
        for row in &rows {
            assert!(text_width(row, LABEL_PX) <= width, "{row}");
        }
        assert!(rows[0].starts_with("at 0.0 %, 0.0 %: first-target"));
        assert!(rows[1].starts_with("… target-number-"), "{rows:?}");
        let names = rows.join(" ").matches(" · p99 ").count();
        assert_eq!(names, 25, "every name listed once");
    }
}
