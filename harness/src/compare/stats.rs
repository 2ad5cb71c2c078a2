//! The bootstrap the latency verdicts rest on: a seeded percentile bootstrap of candidate ÷
//! baseline of a phase's own percentiles. A replicate draws the phase's seconds in two stages,
//! runs with replacement and then seconds within each drawn run, adds the drawn seconds'
//! latency histograms and takes the percentiles of the sum.
//!
//! Written here rather than taken from a crate: no Rust crate we could find does a clustered
//! (two-stage) bootstrap, and the whole of it is a sum of counts, a quantile and two nested
//! resampling loops. Owning it lets the seed, the generator (ChaCha8, whose output rand_chacha
//! keeps stable across versions) and the resampling scheme be fixed and tested, so that the
//! same two result sets always get the same verdict.
//!
//! Cost: every second's histogram is first turned into its non-empty buckets, indexed on one
//! grid of bucket values shared by both sides; a replicate then adds a few dozen counts per
//! drawn second into one reused array and scans it once for all the percentiles.

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How to bootstrap: resample count, CI level (0.95 = 95 %), seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    pub resamples: usize,
    pub confidence: f64,
    pub seed: u64,
}

/// Candidate ÷ baseline of one percentile of the phase, with its bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioCi {
    /// The percentile of all the side's seconds added (every run's), µs.
    pub baseline: f64,
    pub candidate: f64,
    /// `candidate / baseline`: the point estimate.
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

/// One second's histogram as its non-empty buckets: (index on the grid, count).
type Buckets = Vec<(u32, u64)>;

/// Histograms added up on a grid of bucket values: one array, reset between replicates.
struct Sum {
    counts: Vec<u64>,
    total: u64,
}

impl Sum {
    fn new(len: usize) -> Self {
        Self {
            counts: vec![0; len],
            total: 0,
        }
    }

    fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }

    fn add(&mut self, second: &[(u32, u64)]) {
        for &(i, count) in second {
            self.counts[i as usize] += count;
            self.total += count;
        }
    }

    /// The value at each of `quantiles` (ascending) into `out`, exactly as HdrHistogram's
    /// `value_at_quantile` reads the added histograms: the highest value equivalent to the
    /// bucket where the count reaches ⌈q × total⌉ (at least 1). The sum must not be empty.
    fn quantiles(&self, grid: &[u64], quantiles: &[f64], out: &mut [f64]) {
        let (mut reached, mut next) = (0u64, 0usize);
        for (q, value) in quantiles.iter().zip(out) {
            let rank = ((q.min(1.0) * self.total as f64).ceil() as u64).max(1);
            while reached < rank && next < self.counts.len() {
                reached += self.counts[next];
                next += 1;
            }
            *value = grid[next.saturating_sub(1)] as f64;
        }
    }
}

/// Draws one replicate of a side into `sum`: as many runs as it has, with replacement, and
/// within each drawn run as many seconds as it has, with replacement. The first stage is what
/// makes run-to-run noise (a machine busy for a whole run) widen the CI; with a single run it
/// reduces to the ordinary bootstrap of seconds.
fn resample_into(runs: &[Vec<Buckets>], rng: &mut ChaCha8Rng, sum: &mut Sum) {
    sum.clear();
    for _ in 0..runs.len() {
        let run = &runs[rng.random_range(0..runs.len())];
        for _ in 0..run.len() {
            sum.add(&run[rng.random_range(0..run.len())]);
        }
    }
}

/// The bucket values every second of both sides reaches, ascending: HdrHistogram's highest
/// equivalent value of each non-empty bucket.
fn grid_of(sides: [&[Vec<&Histogram<u64>>]; 2]) -> Vec<u64> {
    let mut grid: Vec<u64> = sides
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|h| h.iter_recorded().map(|v| v.value_iterated_to()))
        .collect();
    grid.sort_unstable();
    grid.dedup();
    grid
}

/// A side's runs as buckets on the grid; empty seconds and runs without a second are left out.
fn on_grid(side: &[Vec<&Histogram<u64>>], grid: &[u64]) -> Vec<Vec<Buckets>> {
    side.iter()
        .map(|run| {
            run.iter()
                .filter(|h| !h.is_empty())
                .map(|h| {
                    h.iter_recorded()
                        .map(|v| {
                            let at = grid.partition_point(|&g| g < v.value_iterated_to());
                            (at as u32, v.count_at_value())
                        })
                        .collect()
                })
                .collect::<Vec<Buckets>>()
        })
        .filter(|run| !run.is_empty())
        .collect()
}

/// The `quantiles` (ascending) of all of a side's runs' seconds added.
fn whole(side: &[Vec<Buckets>], grid: &[u64], quantiles: &[f64], sum: &mut Sum) -> Vec<f64> {
    sum.clear();
    side.iter().flatten().for_each(|s| sum.add(s));
    let mut out = vec![0.0; quantiles.len()];
    sum.quantiles(grid, quantiles, &mut out);
    out
}

/// The `quantiles` (ascending) of a side's seconds added up, every run's together: what
/// HdrHistogram says of their sum. `None` when no second has a recorded value.
pub fn percentiles(side: &[Vec<&Histogram<u64>>], quantiles: &[f64]) -> Option<Vec<f64>> {
    let grid = grid_of([side, &[]]);
    let runs = on_grid(side, &grid);
    (!runs.is_empty()).then(|| whole(&runs, &grid, quantiles, &mut Sum::new(grid.len())))
}

/// Bootstraps candidate ÷ baseline of each of `quantiles` (ascending, e.g. 0.5, 0.99, 0.999)
/// of the phase, from each side's seconds grouped by run (`baseline[r]` is run r's per-second
/// histograms). One resampling serves every quantile. `None` when a side has no recorded
/// second, a baseline percentile is not positive, or no resample is asked for.
pub fn ratio_of_percentiles(
    baseline: &[Vec<&Histogram<u64>>],
    candidate: &[Vec<&Histogram<u64>>],
    quantiles: &[f64],
    boot: &Bootstrap,
) -> Option<Vec<RatioCi>> {
    let grid = grid_of([baseline, candidate]);
    let (base, cand) = (on_grid(baseline, &grid), on_grid(candidate, &grid));
    if base.is_empty() || cand.is_empty() || boot.resamples == 0 || quantiles.is_empty() {
        return None;
    }
    let mut sum = Sum::new(grid.len());
    let n = quantiles.len();
    let b_point = whole(&base, &grid, quantiles, &mut sum);
    let c_point = whole(&cand, &grid, quantiles, &mut sum);
    if b_point.iter().any(|&v| v <= 0.0) {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(boot.seed);
    let (mut b, mut c) = (vec![0.0; n], vec![0.0; n]);
    let mut ratios = vec![Vec::with_capacity(boot.resamples); n];
    for _ in 0..boot.resamples {
        resample_into(&base, &mut rng, &mut sum);
        sum.quantiles(&grid, quantiles, &mut b);
        resample_into(&cand, &mut rng, &mut sum);
        sum.quantiles(&grid, quantiles, &mut c);
        for k in 0..n {
            // A replicate's baseline percentile is a recorded value, so positive but for a
            // recorded 0 µs; then the ∞ sorts last, where it widens the interval as it should.
            ratios[k].push(c[k] / b[k]);
        }
    }
    let tail = (1.0 - boot.confidence.clamp(0.0, 1.0)) / 2.0;
    Some(
        ratios
            .iter_mut()
            .enumerate()
            .map(|(k, r)| {
                r.sort_by(f64::total_cmp);
                RatioCi {
                    baseline: b_point[k],
                    candidate: c_point[k],
                    ratio: c_point[k] / b_point[k],
                    low: quantile_sorted(r, tail),
                    high: quantile_sorted(r, 1.0 - tail),
                }
            })
            .collect(),
    )
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
    const P50_P99: [f64; 2] = [0.5, 0.99];

    /// A second as a run records it: two significant figures, µs.
    fn second(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000, 2).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    /// `n` seconds of 100 requests each, spread over ±`spread` around `centre` µs.
    fn noisy(centre: f64, spread: f64, n: usize, seed: u64) -> Vec<Histogram<u64>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| second((0..100).map(|_| (centre + rng.random_range(-spread..=spread)) as u64)))
            .collect()
    }

    fn refs(runs: &[Vec<Histogram<u64>>]) -> Vec<Vec<&Histogram<u64>>> {
        runs.iter().map(|r| r.iter().collect()).collect()
    }

    fn cis(base: &[Vec<Histogram<u64>>], cand: &[Vec<Histogram<u64>>]) -> Vec<RatioCi> {
        ratio_of_percentiles(&refs(base), &refs(cand), &P50_P99, &BOOT).unwrap()
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
    fn the_point_estimate_is_the_percentile_of_the_seconds_added() {
        // What HdrHistogram itself says of the seconds added into one histogram.
        let runs = vec![
            noisy(5_000.0, 4_000.0, 20, 1),
            noisy(90_000.0, 80_000.0, 3, 2),
        ];
        let mut added = second([]);
        for h in runs.iter().flatten() {
            added.add(h).unwrap();
        }
        let quantiles = [0.5, 0.9, 0.99, 0.999, 1.0];
        let ci = ratio_of_percentiles(&refs(&runs), &refs(&runs), &quantiles, &BOOT).unwrap();
        for (q, ci) in quantiles.iter().zip(&ci) {
            assert_eq!(ci.baseline, added.value_at_quantile(*q) as f64, "q {q}");
            assert_eq!(ci.ratio, 1.0);
        }
    }

    #[test]
    fn the_same_inputs_and_seed_give_the_same_interval() {
        let base = vec![noisy(1000.0, 300.0, 30, 1)];
        let cand = vec![noisy(1100.0, 300.0, 30, 2)];
        let a = cis(&base, &cand);
        assert_eq!(a, cis(&base, &cand));
        let other = Bootstrap { seed: 8, ..BOOT };
        let c = ratio_of_percentiles(&refs(&base), &refs(&cand), &P50_P99, &other).unwrap();
        // Another seed may move the bounds a little (by whole buckets of two significant
        // figures: often not at all), never the point estimate.
        for (a, c) in a.iter().zip(&c) {
            assert_eq!(a.ratio, c.ratio);
            assert!((a.low - c.low).abs() < 0.03 && (a.high - c.high).abs() < 0.03);
        }
    }

    #[test]
    fn a_known_shift_is_inside_a_narrow_interval() {
        let base: Vec<Vec<Histogram<u64>>> =
            (0..3).map(|r| noisy(10_000.0, 3_000.0, 30, r)).collect();
        let cand: Vec<Vec<Histogram<u64>>> =
            (0..3).map(|r| noisy(15_000.0, 4_500.0, 30, r)).collect();
        for ci in cis(&base, &cand) {
            // Two significant figures: buckets of 1 % at most.
            assert!((ci.ratio - 1.5).abs() < 0.03, "{ci:?}");
            assert!(ci.low > 1.4 && ci.high < 1.6, "{ci:?}");
        }
    }

    #[test]
    fn identical_sides_straddle_one() {
        let side = vec![noisy(500.0, 200.0, 40, 3)];
        for ci in cis(&side, &side) {
            assert_eq!(ci.ratio, 1.0);
            assert!(ci.low < 1.0 && ci.high > 1.0, "{ci:?}");
        }
    }

    #[test]
    fn a_tail_confined_to_a_minority_of_seconds_moves_the_p99_not_the_p50() {
        // 22 seconds at 5 ms, then 8 at 1.5-2 s: the median of per-second p99s stays 5 ms, the
        // phase's p99 is the slow seconds'.
        let base = vec![noisy(5_000.0, 500.0, 30, 4)];
        let mut cand = noisy(5_000.0, 500.0, 22, 5);
        cand.extend(noisy(1_750_000.0, 250_000.0, 8, 6));
        let [p50, p99] = cis(&base, &[cand])[..] else {
            unreachable!()
        };
        assert!(p99.ratio > 300.0 && p99.low > 100.0, "{p99:?}");
        assert!(p50.high < 1.1, "{p50:?}");
    }

    #[test]
    fn run_to_run_noise_widens_the_interval() {
        // Three runs each side, one of them on a busy machine (everything 40 % slower). Pooled
        // as if independent, the seconds look precise; resampling runs first says how much one
        // more busy run would move the percentile.
        let busy = |seed| noisy(1400.0, 100.0, 30, seed);
        let quiet = |seed| noisy(1000.0, 70.0, 30, seed);
        let base = vec![quiet(4), quiet(5), busy(6)];
        let cand = vec![quiet(7), quiet(8), busy(9)];
        let two_stage = cis(&base, &cand)[0];
        let pooled = cis(&[base.concat()], &[cand.concat()])[0];
        assert!(
            two_stage.high - two_stage.low > 2.0 * (pooled.high - pooled.low),
            "two-stage {two_stage:?} pooled {pooled:?}"
        );
    }

    #[test]
    fn no_recorded_second_no_interval() {
        let some = vec![noisy(1000.0, 10.0, 2, 1)];
        let nothing = vec![vec![second([])]];
        assert_eq!(
            ratio_of_percentiles(&[], &refs(&some), &P50_P99, &BOOT),
            None
        );
        assert_eq!(
            ratio_of_percentiles(&refs(&some), &refs(&nothing), &P50_P99, &BOOT),
            None
        );
        let none = Bootstrap {
            resamples: 0,
            ..BOOT
        };
        assert_eq!(
            ratio_of_percentiles(&refs(&some), &refs(&some), &P50_P99, &none),
            None
        );
    }
}
