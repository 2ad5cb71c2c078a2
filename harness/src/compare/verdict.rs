//! What a row of a comparison judges and concludes: the metric compared, the verdict on it and
//! how sure that verdict is.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    P50,
    P99,
    P999,
    Limited,
    Unavailable,
    Errors5xx,
    TransportErrors,
    OverAdmission,
    WrongfulDenial,
    ClientAmplification,
    StoreAmplification,
    Recovery,
}

impl Metric {
    /// In the order of a phase's rows; [`Metric::Recovery`] only for a phase with faults.
    pub const ALL: [Metric; 12] = [
        Metric::P50,
        Metric::P99,
        Metric::P999,
        Metric::Limited,
        Metric::Unavailable,
        Metric::Errors5xx,
        Metric::TransportErrors,
        Metric::OverAdmission,
        Metric::WrongfulDenial,
        Metric::ClientAmplification,
        Metric::StoreAmplification,
        Metric::Recovery,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::P999 => "p99.9",
            Metric::Limited => "429 %",
            Metric::Unavailable => "503 %",
            Metric::Errors5xx => "5xx %",
            Metric::TransportErrors => "transport errors %",
            Metric::OverAdmission => "over-admission",
            Metric::WrongfulDenial => "wrongful denial",
            Metric::ClientAmplification => "client amplification",
            Metric::StoreAmplification => "store amplification",
            Metric::Recovery => "recovery",
        }
    }

    /// The quantile a latency row is decided on.
    pub fn quantile(self) -> Option<f64> {
        match self {
            Metric::P50 => Some(0.5),
            Metric::P99 => Some(0.99),
            Metric::P999 => Some(0.999),
            _ => None,
        }
    }

    pub fn is_latency(self) -> bool {
        self.quantile().is_some()
    }

    /// A share of the requests offered (or of the allowance, the entitlement), shown in %.
    pub fn is_share(self) -> bool {
        matches!(
            self,
            Metric::Limited
                | Metric::Unavailable
                | Metric::Errors5xx
                | Metric::TransportErrors
                | Metric::OverAdmission
                | Metric::WrongfulDenial
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Better,
    Same,
    Worse,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Same => "same",
            Verdict::Worse => "worse",
        }
    }
}

/// How sure a row's verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Certainty {
    /// A latency CI clear of the thresholds, or a mean over runs beyond or within its threshold.
    Clear,
    /// "same", but the CI reaches a region that would have been worse or better: the noise
    /// is too wide to tell; more repeats would.
    Inconclusive,
    /// No verdict: one side did not measure the value. On a judged row this fails the
    /// comparison: a check on a value that was not measured fails.
    NotMeasured,
    /// Neither side measured the value (a store-less target's store amplification, say):
    /// nothing to compare, no failure.
    NeitherMeasured,
    /// Over-admission or wrongful denial of targets judged against different limits (a
    /// manifest's `[limit]` on one side, say): the figures answer different rules, so no
    /// verdict, and on a judged row a failure, as a value not measured.
    NotComparable,
}
