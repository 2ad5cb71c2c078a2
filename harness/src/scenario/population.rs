//! `[[populations]]`: many caller keys with Zipf-skewed rates, made into tenants the results
//! can hold: each of the `top` busiest keys a tenant of its own (`crowd-1`, `crowd-2`, …,
//! sending one key), and the rest one tenant (`crowd-rest`) whose requests each draw a key by
//! its weight. `run.json` stays as small as a scenario of `top` + 1 tenants, whatever the
//! number of keys.
//!
//! The rest is judged as one tenant whose allowance is its keys' together. `top` must cover
//! every key whose average rate is above the limit, so that no key's excess hides behind the
//! others' room; what the rest's wrongful denial still counts (right refusals in windows where
//! a key's random draws bunched) is said in docs/load-engine.md.

use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;

use super::invalid::Invalid;
use super::raw::RawPopulation;
use super::{ScenarioError, Tenant};
use crate::load::{Arrival, Caller, Keys, Spread};
use crate::names::is_plain_name;

/// At most this many keys: each is a header value built once and held for the run.
pub(super) const MAX_KEYS: u64 = 1_000_000;
/// At most this many keys judged on their own: each is a tenant in every table and file.
pub(super) const MAX_TOP: usize = 100;
/// Keys judged on their own when the population does not say and none is above the limit.
const DEFAULT_TOP: usize = 5;
/// Above it, every key but the first sends almost nothing.
const MAX_ZIPF: f64 = 10.0;

/// The tenants of one population, for a limit of `limit_per_s` requests a second per caller.
pub(super) fn tenants(
    raw: Spanned<RawPopulation>,
    (default_arrival, default_spread): (Arrival, Spread),
    limit_per_s: f64,
    invalid: &Invalid,
) -> Result<Vec<Tenant>, ScenarioError> {
    let span = raw.span();
    let p = raw.into_inner();
    let at = |key: &str, message: String| invalid.at(key, span.clone(), message);
    if !is_plain_name(&p.name) || p.name == "all" {
        return Err(at(
            "populations.name",
            format!(
                "{:?} must not be \"all\" and must be made of letters, digits, '-', '_' or '.'",
                p.name
            ),
        ));
    }
    if !(1..=MAX_KEYS).contains(&p.keys) {
        return Err(at(
            "populations.keys",
            format!(
                "of population {:?} must be from 1 to {MAX_KEYS}, got {}",
                p.name, p.keys
            ),
        ));
    }
    if !(p.zipf.is_finite() && (0.0..=MAX_ZIPF).contains(&p.zipf)) {
        return Err(at(
            "populations.zipf",
            format!(
                "of population {:?} must be from 0 (every key alike) to {MAX_ZIPF}, got {}",
                p.name, p.zipf
            ),
        ));
    }
    let rates = zipf_rates(p.rate.0, p.keys, p.zipf);
    let above = rates.iter().take_while(|&&r| r > limit_per_s).count();
    let top = top(&p, &rates, above, limit_per_s, &span, invalid)?;
    let prefix = p.caller_prefix.unwrap_or_else(|| format!("{}-", p.name));
    // Sent in a header: visible ASCII and spaces only.
    if let Some(bad) = prefix
        .chars()
        .find(|c| !(c.is_ascii_graphic() || *c == ' '))
    {
        return Err(at(
            "populations.caller_prefix",
            format!(
                "of population {:?} holds {bad:?}: a caller key is sent in a header, so only \
                 visible ASCII characters and spaces",
                p.name
            ),
        ));
    }
    let tenant = |name: String, caller: Caller, rate_per_s: f64| Tenant {
        name,
        caller,
        rate_per_s,
        arrival: p.arrival.unwrap_or(default_arrival),
        spread: p.spread.unwrap_or(default_spread),
        client: p.client,
    };
    let mut out: Vec<Tenant> = (0..top)
        .map(|i| {
            let rank = i + 1;
            tenant(
                format!("{}-{rank}", p.name),
                Caller::Key(format!("{prefix}{rank}")),
                rates[i],
            )
        })
        .collect();
    if top + 1 == rates.len() {
        // One key left: a tenant of one key, not a draw.
        out.push(tenant(
            format!("{}-rest", p.name),
            Caller::Key(format!("{prefix}{}", top + 1)),
            rates[top],
        ));
    } else if top < rates.len() {
        let rest = &rates[top..];
        let keys = Keys::new(prefix, top as u64 + 1, rest.to_vec())
            .map_err(|e| at("populations.rate", e.to_string()))?;
        out.push(tenant(
            format!("{}-rest", p.name),
            Caller::Drawn(Arc::new(keys)),
            rest.iter().sum(),
        ));
    }
    Ok(out)
}

/// How many keys are tenants of their own: as written, at least every key above the limit.
fn top(
    p: &RawPopulation,
    rates: &[f64],
    above: usize,
    limit_per_s: f64,
    span: &Range<usize>,
    invalid: &Invalid,
) -> Result<usize, ScenarioError> {
    let keys = rates.len();
    if above > MAX_TOP {
        return Err(invalid.at(
            "populations.rate",
            span.clone(),
            format!(
                "of population {:?} gives {above} keys a rate above the limit ({limit_per_s}/s \
                 per caller), and each must be judged on its own: at most {MAX_TOP} can be; \
                 lower the rate or the zipf exponent, or raise the limit",
                p.name
            ),
        ));
    }
    if let Some(top) = p.top.filter(|&t| t > keys) {
        return Err(invalid.at(
            "populations.top",
            span.clone(),
            format!(
                "of population {:?} is {top}, more than its {keys} keys",
                p.name
            ),
        ));
    }
    let top = p.top.unwrap_or(above.max(DEFAULT_TOP)).min(keys);
    if top < above {
        return Err(invalid.at(
            "populations.top",
            span.clone(),
            format!(
                "of population {:?} is {top}, but key {} sends {:.2}/s, above the limit of \
                 {limit_per_s}/s per caller: `top` must be at least {above}, so that every key \
                 above the limit is judged on its own (the rest are judged together)",
                p.name,
                top + 1,
                rates[top]
            ),
        ));
    }
    if top > MAX_TOP {
        return Err(invalid.at(
            "populations.top",
            span.clone(),
            format!(
                "of population {:?} is {top}: at most {MAX_TOP} keys are judged on their own",
                p.name
            ),
        ));
    }
    Ok(top)
}

/// Key k's rate (from 1): `total` × k^−s ÷ Σ j^−s.
fn zipf_rates(total: f64, keys: u64, s: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=keys).map(|k| (k as f64).powf(-s)).collect();
    let sum: f64 = weights.iter().sum();
    weights.into_iter().map(|w| total * w / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_rates_add_up_to_the_total_and_fall_as_the_exponent_says() {
        let r = zipf_rates(1000.0, 4, 1.0);
        // 1 + 1/2 + 1/3 + 1/4 = 25/12.
        let h = 25.0 / 12.0;
        for (k, rate) in r.iter().enumerate() {
            let expected = 1000.0 / (k as f64 + 1.0) / h;
            assert!((rate - expected).abs() < 1e-9, "key {}: {rate}", k + 1);
        }
        assert!((r.iter().sum::<f64>() - 1000.0).abs() < 1e-9);
        let flat = zipf_rates(90.0, 3, 0.0);
        assert!(flat.iter().all(|&r| (r - 30.0).abs() < 1e-12), "{flat:?}");
    }
}
