//! A metric's value in one cell (a tenant, or all tenants together, in one phase or window):
//! the figure the results hold, or why it was not measured.

use super::{Actual, Metric};
use crate::results::TenantResult;

/// Why a cell's figures are not measured.
const NOTHING_SENT: &str = "no request of this cell reached the target (no traffic, or every \
                            request dropped or throttled)";

pub(super) fn tenant_value(metric: Metric, t: &TenantResult) -> Actual {
    let ms = |p: Option<crate::results::Percentiles>,
              q: fn(&crate::results::Percentiles) -> u64| {
        Actual::of(p.map(|p| q(&p) as f64 / 1000.0), NOTHING_SENT)
    };
    let c = &t.counts;
    match metric {
        Metric::P50Ms => ms(t.latency_us, |p| p.p50),
        Metric::P99Ms => ms(t.latency_us, |p| p.p99),
        Metric::P999Ms => ms(t.latency_us, |p| p.p999),
        Metric::Rate2xx => Actual::of(t.share_of_offered(c.admitted), NOTHING_SENT),
        Metric::Rate429 => Actual::of(t.share_of_offered(c.limited), NOTHING_SENT),
        Metric::Rate503 => Actual::of(t.share_of_offered(c.unavailable), NOTHING_SENT),
        Metric::Rate5xx => Actual::of(t.share_of_offered(c.errors_5xx()), NOTHING_SENT),
        Metric::TransportErrors => Actual::of(
            t.measured().then_some(c.transport_error as f64),
            NOTHING_SENT,
        ),
        Metric::Count5xx => Actual::of(t.measured().then_some(c.errors_5xx() as f64), NOTHING_SENT),
        // Known whether or not anything was sent: a cell all of whose requests were dropped
        // has its count.
        Metric::CountDropped => Actual::Value(c.dropped as f64),
        Metric::OverAdmission => Actual::of(t.over_admission, NOTHING_SENT),
        Metric::OverAdmissionBeyondWindow => {
            Actual::of(t.over_admission_beyond_window, NOTHING_SENT)
        }
        Metric::WrongfulDenial => Actual::of(
            t.wrongful_denial,
            if t.measured() {
                "nothing was entitled: every request was refused by the client itself"
            } else {
                NOTHING_SENT
            },
        ),
        Metric::ClientAmplification => {
            Actual::of(c.client_amplification(), "no request was offered")
        }
        Metric::RecoveryS
        | Metric::StoreAmplification
        | Metric::StoreAmplificationPerAttempt
        | Metric::SendLagP99Ms => Actual::NotMeasured(format!("{} is per target", metric.name())),
    }
}
