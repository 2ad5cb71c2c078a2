//! The thresholds a comparison decides by and the bootstrap's settings, with the documented
//! defaults and their validation.

use serde::Serialize;

use super::CompareError;

/// Thresholds and the bootstrap's settings; [`Default`] gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CompareOptions {
    /// Latency: the relative change the whole CI must clear (0.10 = 10 %).
    pub rel_threshold: f64,
    /// Latency: the change in ms the percentiles must also differ by.
    pub abs_floor_ms: f64,
    /// Latency: the CI's level (0.95 = 95 %).
    pub confidence: f64,
    pub resamples: usize,
    pub seed: u64,
    /// 429 %, 503 %, 5xx % and transport errors %: percentage points.
    pub status_threshold_pp: f64,
    /// Over-admission and wrongful denial: percentage points.
    pub admission_threshold_pp: f64,
    /// Amplification: the relative growth that counts (0.10 = 10 %)…
    pub amplification_rel: f64,
    /// …and the absolute one, in attempts or Redis commands per request offered.
    pub amplification_abs: f64,
    /// Recovery: the growth in seconds that counts.
    pub recovery_threshold_s: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            rel_threshold: 0.10,
            abs_floor_ms: 1.0,
            confidence: 0.95,
            resamples: 2_000,
            seed: 0xfa11_c0de,
            status_threshold_pp: 1.0,
            admission_threshold_pp: 2.0,
            amplification_rel: 0.10,
            amplification_abs: 0.1,
            recovery_threshold_s: 1.0,
        }
    }
}

impl CompareOptions {
    pub fn validate(&self) -> Result<(), CompareError> {
        let bad = |what: &str| Err(CompareError::Options(what.to_owned()));
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !non_negative(self.rel_threshold) {
            return bad("the relative threshold must be 0 or more");
        }
        if !non_negative(self.abs_floor_ms) {
            return bad("the absolute floor must be 0 ms or more");
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return bad("the confidence level must be between 0 and 1 (0.95 = 95 %)");
        }
        if self.resamples < 100 {
            return bad("at least 100 bootstrap resamples are needed");
        }
        if !non_negative(self.status_threshold_pp) || !non_negative(self.admission_threshold_pp) {
            return bad("rate thresholds must be 0 pp or more");
        }
        if !non_negative(self.amplification_rel) || !non_negative(self.amplification_abs) {
            return bad("amplification thresholds must be 0 or more");
        }
        if !non_negative(self.recovery_threshold_s) {
            return bad("the recovery threshold must be 0 s or more");
        }
        Ok(())
    }
}
