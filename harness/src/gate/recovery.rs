//! Time to recover: seconds from the end of a fault until the target's per-second p99 and
//! wrongful denial are back within the steady phase's band, and stay there long enough to
//! count.
//!
//! The band, from the steady phase's seconds (all tenants together):
//! - p99: at most 2 × the 90th percentile of the steady seconds' p99, plus 5 ms. A healthy
//!   limiter's per-second p99 wanders by a few milliseconds on a busy machine (measured here:
//!   a single 2.9 ms second after a 1 ms steady phase), while a fault that matters costs a
//!   timeout (20 ms and up): the margin keeps noise from counting as a relapse;
//! - wrongful denial: at most the steady phase's worst second plus 5 percentage points (one
//!   window's boundary moves a few requests between seconds).
//!
//! A second is judged by the requests scheduled in it, its entitlement weighed by the part of
//! it the run covered (a run that ends at 27.5 s has a last second of half a second: judged
//! against a whole second's allowance it would look like wrongful denial). Seconds with no
//! traffic are skipped. The span judged runs from the fault's end to the next fault's start,
//! or to the end of the run.
//!
//! The rule: **recovered at the start of the first run of K consecutive seconds in band**,
//! K = max(3 s, 2 windows). One second in band proves little (a breaker's probe can land in
//! it), and one noisy second at the very end must not turn a recovered target into "never";
//! K seconds is long enough for a half-open breaker or a reconnect to show, and two windows
//! let a window-long burst pass. Later seconds out of band are counted as relapses, not a
//! later recovery. If fewer than K seconds with traffic follow the fault, or the span ends in a
//! stretch in band shorter than K, the recovery was **not measured**, but it is known to be at
//! least the time to that last stretch (so a `min` gate it exceeds passes, and any `max` gate
//! fails); if the span ends out of band with no K-second stretch in band, it **never**
//! recovered (unbounded: it satisfies a `min` gate and fails a `max`).

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

/// Builds a second's sample from its per-tenant counts and allowances per second (one caller's
/// times the tenant's caller keys) and the part of the second the run covered (1.0 but for a
/// last second cut short).
pub fn second_sample(
    at_s: f64,
    covered_s: f64,
    p99_us: u64,
    tenants: &[(Counts, f64)],
) -> SecondSample {
    let covered = covered_s.clamp(0.0, 1.0);
    let mut shortfall = 0.0;
    let mut entitled = 0.0;
    for (c, allowance_per_s) in tenants {
        let e = (c.asked() as f64).min(allowance_per_s * covered);
        entitled += e;
        shortfall += (e - c.admitted as f64).max(0.0);
    }
    SecondSample {
        at_s,
        p99_us,
        shortfall,
        entitled,
        offered: tenants.iter().map(|(c, _)| c.offered).sum(),
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

/// How long recovery took, by the rule of the module header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Recovery {
    /// Back in band `after_s` seconds after the fault's end, for K seconds in a row at least;
    /// `relapses`: stretches out of band after that, before the span ended.
    Recovered { after_s: f64, relapses: u32 },
    /// The span ended out of band, with no K seconds in a row in band before.
    Never,
    /// Too little traffic after the fault to tell: fewer than K seconds, or a stretch in band
    /// that the span's end cut short of K. It took `at_least_s` at least: the time to that
    /// last stretch in band (or to the span's end, when it ended out of band).
    NotMeasured {
        seconds: usize,
        needed: usize,
        at_least_s: f64,
    },
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Recovered {
                after_s,
                relapses: 0,
            } => write!(f, "{after_s:.1} s"),
            Self::Recovered { after_s, relapses } => write!(
                f,
                "{after_s:.1} s ({relapses} relapse{})",
                if *relapses == 1 { "" } else { "s" }
            ),
            Self::Never => f.write_str("never"),
            Self::NotMeasured {
                seconds,
                needed,
                at_least_s,
            } => write!(
                f,
                "not measured ({seconds} s to judge, {needed} s in band needed; at least \
                 {at_least_s:.1} s)"
            ),
        }
    }
}

/// K: the seconds in a row in band that count as recovered, for a limiter's window.
pub fn seconds_needed(window_s: f64) -> usize {
    (3.0f64).max(2.0 * window_s).ceil() as usize
}

/// Judges the seconds after `fault_end_s` (up to `until_s`, the next fault, if any) against
/// `band` by the rule of the module header, needing `needed` seconds in a row in band.
pub fn recovery(
    after: &[SecondSample],
    fault_end_s: f64,
    until_s: Option<f64>,
    band: &Band,
    needed: usize,
) -> Recovery {
    let later: Vec<&SecondSample> = after
        .iter()
        .filter(|s| s.at_s + 1.0 > fault_end_s && s.offered > 0)
        .filter(|s| until_s.is_none_or(|until| s.at_s < until))
        .collect();
    // The stretch in band the span ends in, if it does: recovery took at least until then.
    let last_stretch = later
        .iter()
        .rposition(|s| !band.holds(s))
        .map_or(0, |i| i + 1);
    let at_least_s = later
        .get(last_stretch)
        .map_or_else(|| later.last().map_or(0.0, |s| s.at_s + 1.0), |s| s.at_s)
        - fault_end_s;
    let not_measured = Recovery::NotMeasured {
        seconds: later.len(),
        needed,
        at_least_s: at_least_s.max(0.0),
    };
    if later.len() < needed {
        return not_measured;
    }
    let mut run_start = None;
    let mut recovered_at = None;
    for (i, s) in later.iter().enumerate() {
        if band.holds(s) {
            let start = *run_start.get_or_insert(i);
            if i + 1 - start >= needed {
                recovered_at = Some(start);
                break;
            }
        } else {
            run_start = None;
        }
    }
    let Some(at) = recovered_at else {
        let ends_in_band = later.last().is_some_and(|s| band.holds(s));
        return if ends_in_band {
            not_measured
        } else {
            Recovery::Never
        };
    };
    let mut relapses = 0;
    let mut was_in_band = true;
    for s in &later[at..] {
        let holds = band.holds(s);
        if was_in_band && !holds {
            relapses += 1;
        }
        was_in_band = holds;
    }
    Recovery::Recovered {
        after_s: (later[at].at_s - fault_end_s).max(0.0),
        relapses,
    }
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

    fn band() -> Band {
        Band::from_steady(&steady()).unwrap()
    }

    /// Seconds from 40 s on, each in band (`true`) or out of it.
    fn seconds(shape: &[bool]) -> Vec<SecondSample> {
        shape
            .iter()
            .enumerate()
            .map(|(i, &good)| {
                let at = 40.0 + i as f64;
                if good {
                    s(at, 1.0, 0.0)
                } else {
                    s(at, 30.0, 0.5)
                }
            })
            .collect()
    }

    #[test]
    fn the_band_comes_from_the_steady_phase() {
        assert_eq!(band().p99_max_us, 7_000.0, "2 × 1 ms + 5 ms");
        assert!((band().wrongful_denial_max - 0.05).abs() < 1e-12);
    }

    #[test]
    fn k_is_three_seconds_or_two_windows() {
        assert_eq!(seconds_needed(1.0), 3);
        assert_eq!(seconds_needed(0.25), 3);
        assert_eq!(seconds_needed(2.0), 4);
        assert_eq!(seconds_needed(2.2), 5);
    }

    #[test]
    fn recovered_at_the_start_of_the_first_k_seconds_in_band() {
        let after = seconds(&[false, false, true, true, true, true]);
        assert_eq!(
            recovery(&after, 40.0, None, &band(), 3),
            Recovery::Recovered {
                after_s: 2.0,
                relapses: 0
            }
        );
    }

    #[test]
    fn a_target_in_band_at_once_recovers_in_zero_seconds() {
        let after = seconds(&[true, true, true]);
        assert_eq!(
            recovery(&after, 40.0, None, &band(), 3),
            Recovery::Recovered {
                after_s: 0.0,
                relapses: 0
            }
        );
    }

    #[test]
    fn a_single_good_second_is_not_a_recovery_and_later_excursions_are_relapses() {
        // One good second (a probe that got through), then out again, then K in band, then a
        // one-second excursion and a last second out: recovered at 3 s with two relapses.
        let after = seconds(&[false, true, false, true, true, true, false, true, false]);
        assert_eq!(
            recovery(&after, 40.0, None, &band(), 3),
            Recovery::Recovered {
                after_s: 3.0,
                relapses: 2
            }
        );
    }

    #[test]
    fn a_single_noisy_second_at_the_end_does_not_make_a_recovered_target_never() {
        let after = seconds(&[true, true, true, true, false]);
        assert_eq!(
            recovery(&after, 40.0, None, &band(), 3),
            Recovery::Recovered {
                after_s: 0.0,
                relapses: 1
            }
        );
    }

    #[test]
    fn never_when_the_span_ends_out_of_band_without_k_seconds_in_band() {
        let after = seconds(&[false, true, true, false, false]);
        assert_eq!(recovery(&after, 40.0, None, &band(), 3), Recovery::Never);
    }

    #[test]
    fn too_little_time_after_the_fault_is_not_measured() {
        let short = seconds(&[true, true]);
        assert_eq!(
            recovery(&short, 40.0, None, &band(), 3),
            Recovery::NotMeasured {
                seconds: 2,
                needed: 3,
                at_least_s: 0.0
            }
        );
        assert_eq!(
            recovery(&[], 40.0, None, &band(), 3),
            Recovery::NotMeasured {
                seconds: 0,
                needed: 3,
                at_least_s: 0.0
            }
        );
        // Out of band, then in band until the end, but for fewer than K seconds: the run
        // ended before a recovery could be told from a passing lull; it took at least 2 s.
        let cut_short = seconds(&[false, false, true, true]);
        assert_eq!(
            recovery(&cut_short, 40.0, None, &band(), 3),
            Recovery::NotMeasured {
                seconds: 4,
                needed: 3,
                at_least_s: 2.0
            }
        );
    }

    #[test]
    fn recovery_from_one_fault_is_judged_before_the_next_fault_begins() {
        let mut after = seconds(&[false, true, true, true]);
        // The next fault, from 44 s: not a relapse of the first.
        after.push(s(44.0, 50.0, 1.0));
        assert_eq!(
            recovery(&after, 40.0, Some(44.0), &band(), 3),
            Recovery::Recovered {
                after_s: 1.0,
                relapses: 0
            }
        );
        assert_eq!(
            recovery(&after, 40.0, None, &band(), 3),
            Recovery::Recovered {
                after_s: 1.0,
                relapses: 1
            }
        );
    }

    #[test]
    fn seconds_without_traffic_are_skipped_and_a_silent_steady_phase_has_no_band() {
        let mut after = seconds(&[true, true, true]);
        let mut quiet = s(43.0, 99.0, 1.0);
        quiet.offered = 0;
        after.insert(1, quiet);
        assert_eq!(
            recovery(&after, 40.0, None, &band(), 3),
            Recovery::Recovered {
                after_s: 0.0,
                relapses: 0
            }
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
        let sample = second_sample(0.0, 1.0, 1, &[(acme, 50.0), (globex, 50.0)]);
        assert_eq!(sample.entitled, 70.0);
        assert_eq!(sample.shortfall, 38.0);
    }

    #[test]
    fn a_last_second_cut_short_is_judged_against_the_part_of_it_that_ran() {
        // The run ends at 27.5 s: the last second offers half a second of acme's traffic and
        // the limiter admits the half-second's allowance, 25. Against a whole second's 50 it
        // would look like 50 % wrongful denial.
        let acme = Counts {
            offered: 60,
            admitted: 25,
            limited: 35,
            ..Counts::default()
        };
        let half = second_sample(27.0, 0.5, 1, &[(acme, 50.0)]);
        assert_eq!(half.entitled, 25.0);
        assert_eq!(half.wrongful_denial(), 0.0);
        let whole = second_sample(27.0, 1.0, 1, &[(acme, 50.0)]);
        assert!(whole.wrongful_denial() > 0.4);
    }
}
