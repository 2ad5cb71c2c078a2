//! What a gate can measure, its name in a gates file and how its value reads.

/// What a gate measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    P50Ms,
    P99Ms,
    P999Ms,
    /// 2xx ÷ offered: how much was served at all.
    Rate2xx,
    /// 429s ÷ offered (0.05 = 5 %).
    Rate429,
    /// 503s ÷ offered (a deliberate "unavailable", e.g. NGINX's limit_req default).
    Rate503,
    /// 5xx ÷ offered.
    Rate5xx,
    /// A count of refused, reset and timed-out requests.
    TransportErrors,
    /// A count of 5xx answers (503 included): a share hides a burst in a busy phase.
    Count5xx,
    /// A count of requests the generator did not send (they count as waiting the timeout).
    CountDropped,
    /// The generator's lateness, p99 over the whole run: a measurement that fell behind.
    SendLagP99Ms,
    OverAdmission,
    /// Over-admission beyond one window's limit: 0 for a correct limiter at any phase length.
    OverAdmissionBeyondWindow,
    WrongfulDenial,
    /// Seconds from the end of the gate's phase (the fault) until back in the steady band.
    RecoveryS,
    /// Redis commands per request offered.
    StoreAmplification,
    /// Redis commands per attempt sent.
    StoreAmplificationPerAttempt,
    /// Attempts sent per request offered (retrying clients above 1).
    ClientAmplification,
}

/// Every name a gate may use; where two name one metric the first is its name in reports (a
/// gates file written before the `count_` names keeps working).
pub(super) const METRICS: [(&str, Metric); 19] = [
    ("p50_ms", Metric::P50Ms),
    ("p99_ms", Metric::P99Ms),
    ("p999_ms", Metric::P999Ms),
    ("rate_2xx", Metric::Rate2xx),
    ("rate_429", Metric::Rate429),
    ("rate_503", Metric::Rate503),
    ("rate_5xx", Metric::Rate5xx),
    ("count_5xx", Metric::Count5xx),
    ("count_transport_errors", Metric::TransportErrors),
    ("transport_errors", Metric::TransportErrors),
    ("count_dropped", Metric::CountDropped),
    ("send_lag_p99_ms", Metric::SendLagP99Ms),
    ("over_admission", Metric::OverAdmission),
    (
        "over_admission_beyond_window",
        Metric::OverAdmissionBeyondWindow,
    ),
    ("wrongful_denial", Metric::WrongfulDenial),
    ("recovery_s", Metric::RecoveryS),
    ("store_amplification", Metric::StoreAmplification),
    (
        "store_amplification_per_attempt",
        Metric::StoreAmplificationPerAttempt,
    ),
    ("client_amplification", Metric::ClientAmplification),
];

/// What one value of a metric describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// One tenant (or all tenants together) in one phase of one target.
    Cell,
    /// One phase of one target.
    Phase,
    /// One target over the whole run.
    Run,
}

impl Metric {
    pub fn name(self) -> &'static str {
        crate::names::name_of(&METRICS, &self)
    }

    pub(super) fn scope(self) -> Scope {
        match self {
            Self::RecoveryS | Self::StoreAmplification | Self::StoreAmplificationPerAttempt => {
                Scope::Phase
            }
            Self::SendLagP99Ms => Scope::Run,
            _ => Scope::Cell,
        }
    }

    /// Whether its value over a window follows from the window's summed counts: not a
    /// percentile (the seconds' p99s do not make the window's), not a per-phase figure.
    pub(super) fn windowed(self) -> bool {
        self.scope() == Scope::Cell && !matches!(self, Self::P50Ms | Self::P99Ms | Self::P999Ms)
    }

    /// How a value of this metric reads: shares as %, times with their unit.
    pub fn format(self, v: f64) -> String {
        match self {
            Self::P50Ms | Self::P99Ms | Self::P999Ms | Self::SendLagP99Ms => format!("{v:.1} ms"),
            Self::Rate2xx
            | Self::Rate429
            | Self::Rate503
            | Self::Rate5xx
            | Self::OverAdmission
            | Self::OverAdmissionBeyondWindow
            | Self::WrongfulDenial => {
                format!("{:.1} %", v * 100.0)
            }
            Self::TransportErrors | Self::Count5xx | Self::CountDropped => format!("{v:.0}"),
            Self::RecoveryS => format!("{v:.1} s"),
            Self::StoreAmplification
            | Self::StoreAmplificationPerAttempt
            | Self::ClientAmplification => format!("{v:.2}"),
        }
    }
}
