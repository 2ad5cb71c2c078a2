//! How a plot looks: its size, the palette and its fonts. Every plot of a report uses the same
//! ones, so plots placed one under the other line up and read alike.

use plotters::prelude::*;

/// The fill of a fault window in every plot (and of fault phases' rows in the tables), so a
/// reader, or a tool, can tell a fault window from the rest.
pub const FAULT_FILL_RGB: (u8, u8, u8) = (0xFD, 0xE2, 0xDC);

/// Fits a 900 px column without scaling, so the text stays at its drawn size.
pub(super) const WIDTH: u32 = 900;
pub(super) const PLOT_HEIGHT: u32 = 300;
pub(super) const TITLE_ROW: u32 = 48;
pub(super) const LEGEND_ROW: u32 = 22;
pub(super) const FONT: &str = "sans-serif";

// Okabe–Ito colours: told apart by readers with colour-vision deficiencies too.
pub(super) const BLUE: RGBColor = RGBColor(0, 114, 178);
pub(super) const VERMILLION: RGBColor = RGBColor(213, 94, 0);
pub(super) const ORANGE: RGBColor = RGBColor(230, 159, 0);
pub(super) const GREEN: RGBColor = RGBColor(0, 158, 115);
pub(super) const PURPLE: RGBColor = RGBColor(204, 121, 167);
pub(super) const SKY: RGBColor = RGBColor(86, 180, 233);
/// The tenants of a target's plots, and the targets of the overview (a target keeps its colour
/// in every overview plot).
pub(super) const PALETTE: [RGBColor; 6] = [BLUE, ORANGE, GREEN, PURPLE, SKY, VERMILLION];
pub(super) const GRID: RGBColor = RGBColor(225, 225, 225);
pub(super) const MUTED: RGBColor = RGBColor(110, 110, 110);
pub(super) const FAULT_TEXT: RGBColor = RGBColor(165, 40, 20);

pub(super) fn fault_fill() -> RGBColor {
    let (r, g, b) = FAULT_FILL_RGB;
    RGBColor(r, g, b)
}

/// Rough width of `text` in px at `size`: plotters cannot measure text without a font
/// library, and an over-estimate only drops a label that would have fitted.
pub(super) fn text_width(text: &str, px: f64) -> f64 {
    text.chars().count() as f64 * px * 0.6
}

/// Rough width of `text` in bold: about a tenth wider than [`text_width`].
pub(super) fn bold_width(text: &str, px: f64) -> f64 {
    text_width(text, px) * 1.1
}

/// A font of `px` pixels as drawn: plotters writes the SVG font-size as the size asked ÷ 1.24.
pub(super) fn font(px: f64) -> FontDesc<'static> {
    (FONT, px * 1.24).into_font()
}
