//! The bootstrap the latency verdicts rest on: a seeded percentile bootstrap of the ratio of
//! medians (candidate ÷ baseline), resampling in two stages, runs and then seconds.
//!
//! Written here rather than taken from a crate: no Rust crate we could find does a clustered
//! (two-stage) bootstrap, and the whole of it is a median, a quantile and two nested resampling
//! loops. Owning it lets the seed, the generator (ChaCha8, whose output rand_chacha keeps stable
//! across versions) and the resampling scheme be fixed and tested, so that the same two result
//! sets always get the same verdict.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How to bootstrap: resample count, CI level (0.95 = 95 %), seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    pub resamples: usize,
    pub confidence: f64,
    pub seed: u64,
}

/// Candidate median ÷ baseline median, with its bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioCi {
    pub baseline_median: f64,
    pub candidate_median: f64,
    /// `candidate_median / baseline_median`: the point estimate.
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

/// The median (the mean of the two middle values for an even count); `None` when empty.
/// Reorders `values`.
pub fn median(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let (lower, upper, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return Some(upper);
    }
    // The other middle value is the largest of the lower half.
    let below = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((below + upper) / 2.0)
}

/// The `q` quantile of sorted values, interpolating linearly between ranks (Hyndman & Fan
/// type 7, R's and NumPy's default). `sorted` must not be empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let below = h.floor() as usize;
    let above = h.ceil() as usize;
    sorted[below] + (h - below as f64) * (sorted[above] - sorted[below])
}

/// Draws one bootstrap replicate of a side into `out`: as many runs as it has, with
/// replacement, and within each drawn run as many seconds as it has, with replacement. The
/// first stage is what makes run-to-run noise (a machine busy for a whole run) widen the CI;
/// with a single run it reduces to the ordinary bootstrap of seconds.
fn resample_into(runs: &[&[f64]], rng: &mut ChaCha8Rng, out: &mut Vec<f64>) {
    out.clear();
    for _ in 0..runs.len() {
        let run = runs[rng.random_range(0..runs.len())];
        out.extend((0..run.len()).map(|_| run[rng.random_range(0..run.len())]));
    }
}

/// The runs that have samples.
fn non_empty(side: &[Vec<f64>]) -> Vec<&[f64]> {
    side.iter()
        .filter(|r| !r.is_empty())
        .map(Vec::as_slice)
        .collect()
}

/// Bootstraps candidate median ÷ baseline median over samples grouped by run (`baseline[r]` is
/// run r's per-second values; a run with none is ignored). `None` when a side has no sample,
/// its median is not positive, or no resample is asked for.
pub fn ratio_of_medians(
    baseline: &[Vec<f64>],
    candidate: &[Vec<f64>],
    boot: &Bootstrap,
) -> Option<RatioCi> {
    let (base, cand) = (non_empty(baseline), non_empty(candidate));
    if base.is_empty() || cand.is_empty() || boot.resamples == 0 {
        return None;
    }
    let baseline_median = median(&mut base.concat())?;
    let candidate_median = median(&mut cand.concat())?;
    if baseline_median <= 0.0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(boot.seed);
    let (mut b, mut c) = (Vec::new(), Vec::new());
    let mut ratios = Vec::with_capacity(boot.resamples);
    for _ in 0..boot.resamples {
        resample_into(&base, &mut rng, &mut b);
        resample_into(&cand, &mut rng, &mut c);
        if let (Some(mb), Some(mc)) = (median(&mut b), median(&mut c)) {
            // A zero baseline median (only with zero samples) would give ∞; total_cmp sorts
            // it last, where it widens the interval as it should.
            ratios.push(mc / mb);
        }
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - boot.confidence.clamp(0.0, 1.0)) / 2.0;
    Some(RatioCi {
        baseline_median,
        candidate_median,
        ratio: candidate_median / baseline_median,
        low: quantile_sorted(&ratios, tail),
        high: quantile_sorted(&ratios, 1.0 - tail),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const BOOT: Bootstrap = Bootstrap {
        resamples: 2_000,
        confidence: 0.95,
        seed: 7,
    };

    /// Deterministic "noise": a spread of values around `centre` (±`spread`), shuffled.
    fn noisy(centre: f64, spread: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| centre + rng.random_range(-spread..=spread))
            .collect()
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut [5.0]), Some(5.0));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_sorted(&sorted, 0.0), 1.0);
        assert_eq!(quantile_sorted(&sorted, 1.0), 5.0);
        assert_eq!(quantile_sorted(&sorted, 0.5), 3.0);
        assert_eq!(quantile_sorted(&sorted, 0.125), 1.5);
        assert_eq!(quantile_sorted(&[9.0], 0.975), 9.0);
    }

    #[test]
    fn the_same_inputs_and_seed_give_the_same_interval() {
        let base = vec![noisy(1000.0, 100.0, 30, 1)];
        let cand = vec![noisy(1100.0, 100.0, 30, 2)];
        let a = ratio_of_medians(&base, &cand, &BOOT).unwrap();
        let b = ratio_of_medians(&base, &cand, &BOOT).unwrap();
        assert_eq!(a, b);
        let other = Bootstrap { seed: 8, ..BOOT };
        let c = ratio_of_medians(&base, &cand, &other).unwrap();
        // Another seed moves the bounds a little, never the point estimate.
        assert_eq!(a.ratio, c.ratio);
        assert_ne!((a.low, a.high), (c.low, c.high));
        assert!((a.low - c.low).abs() < 0.03 && (a.high - c.high).abs() < 0.03);
    }

    #[test]
    fn a_known_shift_is_inside_a_narrow_interval() {
        let base: Vec<Vec<f64>> = (0..3).map(|r| noisy(1000.0, 50.0, 30, r)).collect();
        let cand: Vec<Vec<f64>> = base
            .iter()
            .map(|run| run.iter().map(|v| v * 1.5).collect())
            .collect();
        let ci = ratio_of_medians(&base, &cand, &BOOT).unwrap();
        assert!((ci.ratio - 1.5).abs() < 1e-9, "{ci:?}");
        assert!(ci.low > 1.35 && ci.high < 1.65, "{ci:?}");
    }

    #[test]
    fn identical_sides_straddle_one() {
        let side = vec![noisy(500.0, 200.0, 40, 3)];
        let ci = ratio_of_medians(&side, &side, &BOOT).unwrap();
        assert_eq!(ci.ratio, 1.0);
        assert!(ci.low < 1.0 && ci.high > 1.0, "{ci:?}");
    }

    #[test]
    fn run_to_run_noise_widens_the_interval() {
        // Three runs each side, one of them on a busy machine (everything 40 % slower). Pooled
        // as if independent, the seconds look precise; resampling runs first says how much one
        // more busy run would move the median.
        let busy = |seed| -> Vec<f64> { noisy(1400.0, 30.0, 30, seed) };
        let quiet = |seed| noisy(1000.0, 20.0, 30, seed);
        let base = vec![quiet(4), quiet(5), busy(6)];
        let cand = vec![quiet(7), quiet(8), busy(9)];
        let two_stage = ratio_of_medians(&base, &cand, &BOOT).unwrap();
        let pooled = ratio_of_medians(&[base.concat()], &[cand.concat()], &BOOT).unwrap();
        assert!(
            two_stage.high - two_stage.low > 2.0 * (pooled.high - pooled.low),
            "two-stage {two_stage:?} pooled {pooled:?}"
        );
    }

    #[test]
    fn no_samples_no_interval() {
        let some = vec![vec![1.0, 2.0]];
        assert_eq!(ratio_of_medians(&[], &some, &BOOT), None);
        assert_eq!(ratio_of_medians(&some, &[vec![]], &BOOT), None);
        let none = Bootstrap {
            resamples: 0,
            ..BOOT
        };
        assert_eq!(ratio_of_medians(&some, &some, &none), None);
    }
}
