//! Time to recover: seconds from the end of the fault until the target's per-second p99 and
//! wrongful denial are back within the steady phase's band and stay there until the run ends.
//!
//! The band, from the steady phase's seconds (all tenants together):
//! - p99: at most 2 × the 90th percentile of the steady seconds' p99, plus 5 ms. A healthy
//!   limiter's per-second p99 wanders by a few milliseconds on a busy machine (measured here:
//!   a single 2.9 ms second after a 1 ms steady phase), while a fault that matters costs a
//!   timeout (20 ms and up): the margin keeps noise from counting as a relapse;
//! - wrongful denial: at most the steady phase's worst second plus 5 percentage points (one
//!   window's boundary moves a few requests between seconds).
//!
//! A second is judged by the requests scheduled in it; seconds with no traffic are skipped.

use crate::metrics::Counts;

/// One second of one target, all tenants, with what the band needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondSample {
    /// Start of the second, s since the run's start.
    pub at_s: f64,
    pub p99_us: u64,
    /// max(0, entitled − admitted) summed over tenants, and the entitlement, this second.
    pub shortfall: f64,
    pub entitled: f64,
    pub offered: u64,
}

impl SecondSample {
    pub fn wrongful_denial(&self) -> f64 {
        if self.entitled > 0.0 {
            self.shortfall / self.entitled
        } else {
            0.0
        }
    }
}

/// Builds a second's sample from its per-tenant counts and the allowance per second.
pub fn second_sample(
    at_s: f64,
    p99_us: u64,
    tenants: &[Counts],
    allowance_per_s: f64,
) -> SecondSample {
    let mut shortfall = 0.0;
    let mut entitled = 0.0;
    for c in tenants {
        let e = (c.asked() as f64).min(allowance_per_s);
        entitled += e;
        shortfall += (e - c.admitted as f64).max(0.0);
    }
    SecondSample {
        at_s,
        p99_us,
        shortfall,
        entitled,
        offered: tenants.iter().map(|c| c.offered).sum(),
    }
}

/// The steady phase's band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub p99_max_us: f64,
    pub wrongful_denial_max: f64,
}

impl Band {
    /// `None` if the steady phase had no traffic to learn from.
    pub fn from_steady(steady: &[SecondSample]) -> Option<Self> {
        let mut p99: Vec<u64> = steady
            .iter()
            .filter(|s| s.offered > 0)
            .map(|s| s.p99_us)
            .collect();
        if p99.is_empty() {
            return None;
        }
        p99.sort_unstable();
        let p90 = p99[((p99.len() - 1) as f64 * 0.9).round() as usize] as f64;
        let worst_denial = steady
            .iter()
            .filter(|s| s.offered > 0)
            .map(SecondSample::wrongful_denial)
            .fold(0.0, f64::max);
        Some(Self {
            p99_max_us: p90 * 2.0 + 5_000.0,
            wrongful_denial_max: worst_denial + 0.05,
        })
    }

    fn holds(&self, s: &SecondSample) -> bool {
        s.p99_us as f64 <= self.p99_max_us && s.wrongful_denial() <= self.wrongful_denial_max
    }
}

/// Seconds from `fault_end_s` until every later second with traffic, up to `until_s` (the
/// next fault, or the end of the run), is within `band`; `None` ("never") if the last such
/// second is outside it, or none comes after the fault.
pub fn recovery_s(
    after: &[SecondSample],
    fault_end_s: f64,
    until_s: Option<f64>,
    band: &Band,
) -> Option<f64> {
    let later: Vec<&SecondSample> = after
        .iter()
        .filter(|s| s.at_s + 1.0 > fault_end_s && s.offered > 0)
        .filter(|s| until_s.is_none_or(|until| s.at_s < until))
        .collect();
    let last_bad = later.iter().rposition(|s| !band.holds(s));
    let first_good = match last_bad {
        None => later.first()?,
        Some(i) => later.get(i + 1)?,
    };
    Some((first_good.at_s - fault_end_s).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_s: f64, p99_ms: f64, denial: f64) -> SecondSample {
        SecondSample {
            at_s,
            p99_us: (p99_ms * 1000.0) as u64,
            shortfall: denial * 100.0,
            entitled: 100.0,
            offered: 145,
        }
    }

    fn steady() -> Vec<SecondSample> {
        (0..10).map(|i| s(f64::from(i), 1.0, 0.0)).collect()
    }

    #[test]
    fn the_band_comes_from_the_steady_phase() {
        let band = Band::from_steady(&steady()).unwrap();
        assert_eq!(band.p99_max_us, 7_000.0, "2 × 1 ms + 5 ms");
        assert!((band.wrongful_denial_max - 0.05).abs() < 1e-12);
    }

    #[test]
    fn recovery_is_the_first_second_after_which_everything_stays_in_band() {
        let band = Band::from_steady(&steady()).unwrap();
        let after = [
            s(40.0, 30.0, 0.5),
            s(41.0, 9.0, 0.0),
            s(42.0, 1.0, 0.0),
            s(43.0, 1.2, 0.01),
        ];
        assert_eq!(recovery_s(&after, 40.0, None, &band), Some(2.0));
    }

    #[test]
    fn a_target_in_band_at_once_recovers_in_zero_seconds() {
        let band = Band::from_steady(&steady()).unwrap();
        let after = [s(40.0, 1.0, 0.0), s(41.0, 1.0, 0.0)];
        assert_eq!(recovery_s(&after, 40.0, None, &band), Some(0.0));
    }

    #[test]
    fn recovery_then_relapse_counts_from_after_the_relapse() {
        let band = Band::from_steady(&steady()).unwrap();
        let after = [
            s(40.0, 1.0, 0.0),
            s(41.0, 1.0, 0.0),
            s(42.0, 1.0, 0.9),
            s(43.0, 1.0, 0.0),
        ];
        assert_eq!(recovery_s(&after, 40.0, None, &band), Some(3.0));
    }

    #[test]
    fn recovery_from_one_fault_is_judged_before_the_next_fault_begins() {
        let band = Band::from_steady(&steady()).unwrap();
        let after = [
            s(40.0, 30.0, 0.5),
            s(41.0, 1.0, 0.0),
            s(42.0, 1.0, 0.0),
            // The next fault, from 43 s: not a relapse of the first.
            s(43.0, 50.0, 1.0),
        ];
        assert_eq!(recovery_s(&after, 40.0, Some(43.0), &band), Some(1.0));
        assert_eq!(recovery_s(&after, 40.0, None, &band), None);
    }

    #[test]
    fn never_if_the_run_ends_out_of_band_or_nothing_follows() {
        let band = Band::from_steady(&steady()).unwrap();
        assert_eq!(
            recovery_s(&[s(40.0, 1.0, 0.0), s(41.0, 50.0, 0.0)], 40.0, None, &band),
            None
        );
        assert_eq!(recovery_s(&[], 40.0, None, &band), None);
    }

    #[test]
    fn seconds_without_traffic_are_skipped_and_a_silent_steady_phase_has_no_band() {
        let band = Band::from_steady(&steady()).unwrap();
        let mut quiet = s(41.0, 99.0, 1.0);
        quiet.offered = 0;
        assert_eq!(
            recovery_s(&[s(40.0, 1.0, 0.0), quiet], 40.0, None, &band),
            Some(0.0)
        );
        let silent: Vec<SecondSample> = steady()
            .into_iter()
            .map(|mut x| {
                x.offered = 0;
                x
            })
            .collect();
        assert_eq!(Band::from_steady(&silent), None);
    }

    #[test]
    fn a_seconds_wrongful_denial_sums_over_tenants_against_the_per_second_allowance() {
        let acme = Counts {
            offered: 120,
            admitted: 12,
            ..Counts::default()
        };
        let globex = Counts {
            offered: 20,
            admitted: 20,
            ..Counts::default()
        };
        let sample = second_sample(0.0, 1, &[acme, globex], 50.0);
        assert_eq!(sample.entitled, 70.0);
        assert_eq!(sample.shortfall, 38.0);
    }
}
