//! The checks across a scenario's fields that serde cannot make: a whole-number limit, unique
//! tenant, target and phase names, each target named one way, faults a phase can hold, phases
//! that do not overlap. Each error names the key and the line it is about.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::invalid::{Invalid, line_of};
use super::raw::{RawLoad, RawPhase, RawPolicy, RawPopulation, RawTarget, RawTenant};
use super::{ManifestRef, Phase, ScenarioError, TargetRef, Tenant};
use crate::faults::Fault;
use crate::load::{Arrival, Caller, Connections, KeepAlive, Spread};
use crate::names::is_plain_name;

/// What makes a client behaviour unusable, if anything.
fn client_problem(client: &crate::load::Client) -> Option<String> {
    use crate::load::Client;
    match *client {
        Client::Retry5xx { attempts }
        | Client::RetryBackoff { attempts, .. }
        | Client::HonourRetryAfter { attempts, .. }
            if attempts == 0 =>
        {
            Some("attempts must be at least 1 (the first one)".into())
        }
        Client::RetryBackoff { base, cap, .. } if base.is_zero() || cap < base => Some(format!(
            "a backoff's base ({base:?}) must be more than zero and its cap ({cap:?}) no less"
        )),
        Client::AdaptiveThrottling { k, window }
            if !(k > 0.0 && k.is_finite()) || window.is_zero() =>
        {
            Some(format!(
                "adaptive throttling needs k > 0 ({k}) and a window ({window:?})"
            ))
        }
        _ => None,
    }
}

/// The limit is a whole number of requests and the window is not empty.
pub(super) fn policy(policy: &Spanned<RawPolicy>, invalid: &Invalid) -> Result<(), ScenarioError> {
    let whole = policy.span();
    let policy = policy.get_ref();
    let window = policy.window.0;
    if policy.limit.0.fract() != 0.0 {
        return Err(invalid.at(
            "policy.limit",
            whole.clone(),
            format!("{} must be a whole number of requests", policy.limit.0),
        ));
    }
    if window.is_zero() {
        return Err(invalid.at("policy.window", whole, "must be greater than zero".into()));
    }
    Ok(())
}

/// The tenants, each with the load's defaults where it gives none: the named ones, then each
/// population's (`super::population`), for a limit of `limit_per_s` per caller.
pub(super) fn tenants(
    raw: Vec<Spanned<RawTenant>>,
    populations: Vec<Spanned<RawPopulation>>,
    load: &RawLoad,
    limit_per_s: f64,
    invalid: &Invalid,
) -> Result<Vec<Tenant>, ScenarioError> {
    let defaults = (
        load.arrival.unwrap_or(Arrival::Uniform),
        load.spread.unwrap_or(Spread::RoundRobin),
    );
    if raw.is_empty() && populations.is_empty() {
        return Err(invalid.at(
            "tenants",
            0..0,
            "needs at least one [[tenants]] or [[populations]] entry".into(),
        ));
    }
    let mut tenants: Vec<Tenant> = Vec::new();
    for t in raw {
        let span = t.span();
        let tenant = tenant(t.into_inner(), defaults);
        distinct(&tenant, &tenants, "tenants", span, invalid)?;
        tenants.push(tenant);
    }
    for p in populations {
        let span = p.span();
        for tenant in super::population::tenants(p, defaults, limit_per_s, invalid)? {
            distinct(&tenant, &tenants, "populations", span.clone(), invalid)?;
            tenants.push(tenant);
        }
    }
    Ok(tenants)
}

/// One named tenant.
fn tenant(t: RawTenant, (default_arrival, default_spread): (Arrival, Spread)) -> Tenant {
    Tenant {
        caller: Caller::Key(t.caller.clone().unwrap_or_else(|| t.name.clone())),
        name: t.name,
        rate_per_s: t.rate.0,
        arrival: t.arrival.unwrap_or(default_arrival),
        spread: t.spread.unwrap_or(default_spread),
        client: t.client,
    }
}

/// `tenant` is told apart from the `known` ones by its name and its caller keys; an error is
/// about `table`'s entry at `span`.
fn distinct(
    tenant: &Tenant,
    known: &[Tenant],
    table: &str,
    span: Range<usize>,
    invalid: &Invalid,
) -> Result<(), ScenarioError> {
    // "all" names every tenant together in run.json, series.csv and the logs.
    let t = &tenant.name;
    if known.iter().any(|o| &o.name == t) {
        return Err(invalid.at(
            &format!("{table}.name"),
            span,
            format!(
                "{t:?} names two tenants (a population's are named NAME-1, NAME-2, … and \
                 NAME-rest)"
            ),
        ));
    }
    if !is_plain_name(t) || t == "all" {
        return Err(invalid.at(
            &format!("{table}.name"),
            span,
            format!(
                "{t:?} must not be \"all\" (every tenant together) and must be made of \
                 letters, digits, '-', '_' or '.'"
            ),
        ));
    }
    if let Some((other, key)) = known
        .iter()
        .find_map(|o| Some((o, o.caller.shared_key(&tenant.caller)?)))
    {
        return Err(invalid.at(
            &format!("{table}.caller"),
            span,
            format!(
                "{key:?} is a caller key of both {t:?} and {:?}: two tenants sharing a key \
                 share one quota",
                other.name
            ),
        ));
    }
    if let Some(problem) = client_problem(&tenant.client) {
        return Err(invalid.at(
            &format!("{table}.client"),
            span,
            format!("of tenant {t:?}: {problem}"),
        ));
    }
    Ok(())
}

/// The targets, each named once and one way.
pub(super) fn targets(
    raw: Vec<Spanned<RawTarget>>,
    invalid: &Invalid,
) -> Result<Vec<TargetRef>, ScenarioError> {
    let whole = 0..0;
    if raw.is_empty() {
        return Err(invalid.at(
            "targets",
            whole,
            "needs at least one [[targets]] entry".into(),
        ));
    }
    let mut targets: Vec<TargetRef> = Vec::new();
    for spanned in raw {
        let span = spanned.span();
        let t = spanned.into_inner();
        let (name, manifest) =
            name_or_manifest(t.name, t.manifest, t.variant, span.clone(), invalid)?;
        if targets.iter().any(|o| o.name == name) {
            return Err(invalid.at(
                if manifest.is_some() {
                    "targets.manifest"
                } else {
                    "targets.name"
                },
                span,
                format!("{name:?} is listed twice"),
            ));
        }
        if t.instances == Some(0) {
            return Err(invalid.at("targets.instances", span, "must be at least 1".into()));
        }
        let max = match t.max_connections.map(NonZeroUsize::new) {
            Some(None) => {
                return Err(invalid.at(
                    "targets.max_connections",
                    span,
                    "must be at least 1 (leave it out for no cap beyond \
                     load.max_in_flight_per_target)"
                        .into(),
                ));
            }
            Some(max) => max,
            None => None,
        };
        let max_idle = match t.max_idle_connections {
            None => None,
            Some(0) => {
                return Err(invalid.at(
                    "targets.max_idle_connections",
                    span,
                    "must be at least 1 (`keep_alive = false` keeps none)".into(),
                ));
            }
            Some(n) => NonZeroUsize::new(n),
        };
        let Some(keep_alive) = KeepAlive::new(t.keep_alive.unwrap_or(true), max_idle) else {
            return Err(invalid.at(
                "targets.max_idle_connections",
                span,
                "caps the connections kept alive, and `keep_alive = false` keeps none: leave \
                 one of them out"
                    .into(),
            ));
        };
        targets.push(TargetRef {
            name,
            instances: t.instances,
            manifest,
            connections: Connections { max, keep_alive },
        });
    }
    Ok(targets)
}

/// A target's name and, for one named by a manifest's path, that manifest: exactly one of
/// `name` and `manifest`, `variant` only with `manifest`.
fn name_or_manifest(
    name: Option<String>,
    manifest: Option<String>,
    variant: Option<String>,
    span: Range<usize>,
    invalid: &Invalid,
) -> Result<(String, Option<ManifestRef>), ScenarioError> {
    let named = match (name, manifest, variant) {
        (Some(name), None, None) => (name, None),
        (Some(_), None, Some(_)) => {
            return Err(invalid.at(
                "targets.variant",
                span,
                "only goes with `manifest`: a target found by `name` is one variant \
                 already"
                    .into(),
            ));
        }
        (None, Some(path), variant) => {
            if path.trim().is_empty() {
                return Err(invalid.at(
                    "targets.manifest",
                    span,
                    "is empty: give a target.toml, relative to this scenario file".into(),
                ));
            }
            if let Some(v) = variant.as_ref().filter(|v| !is_plain_name(v)) {
                return Err(invalid.at(
                    "targets.variant",
                    span,
                    format!("{v:?} must be made of letters, digits, '-', '_' or '.'"),
                ));
            }
            let name = variant.clone().unwrap_or_else(|| path.clone());
            let line = line_of(invalid.text, span.start);
            let path = PathBuf::from(path);
            (
                name,
                Some(ManifestRef {
                    path,
                    variant,
                    line,
                }),
            )
        }
        (Some(_), Some(_), _) => {
            return Err(invalid.at(
                "targets.manifest",
                span,
                "and `name` cannot both be given: `name` picks a target found in the \
                 project, failmode's checkout or the built-ins, `manifest` reads one \
                 file (and `variant` picks among its variants)"
                    .into(),
            ));
        }
        (None, None, _) => {
            return Err(invalid.at(
                "targets.name",
                span,
                "is missing: give `name` (a target `failmode list` shows) or `manifest` \
                 (a target.toml, relative to this scenario file)"
                    .into(),
            ));
        }
    };
    Ok(named)
}

/// The phases, sorted by start, each named once, none overlapping the next.
pub(super) fn phases(
    raw: Vec<Spanned<RawPhase>>,
    invalid: &Invalid,
) -> Result<Vec<Phase>, ScenarioError> {
    let whole = 0..0;
    if raw.is_empty() {
        return Err(invalid.at(
            "phases",
            whole,
            "needs at least one [[phases]] entry".into(),
        ));
    }
    let mut phases: Vec<(Range<usize>, Phase)> = Vec::new();
    for spanned in raw {
        let span = spanned.span();
        let p = spanned.into_inner();
        let phase = phase(p, span.clone(), &phases, invalid)?;
        phases.push((span, phase));
    }
    phases.sort_by_key(|(_, p)| p.start);
    for pair in phases.windows(2) {
        let ((_, a), (span, b)) = (&pair[0], &pair[1]);
        if b.start < a.end {
            return Err(invalid.at(
                "phases.start",
                span.clone(),
                format!(
                    "phase {:?} starts at {:?}, before phase {:?} ends at {:?}: phases must not overlap",
                    b.name, b.start, a.name, a.end
                ),
            ));
        }
    }
    Ok(phases.into_iter().map(|(_, p)| p).collect())
}

/// One phase: it ends after it starts, holds faults a phase can hold, and has a name of its own
/// among the `known` ones.
fn phase(
    p: RawPhase,
    span: Range<usize>,
    known: &[(Range<usize>, Phase)],
    invalid: &Invalid,
) -> Result<Phase, ScenarioError> {
    if p.end.0 <= p.start.0 {
        return Err(invalid.at(
            "phases.end",
            span.clone(),
            format!("of phase {:?} must be after its start", p.name),
        ));
    }
    faults(&p, span.clone(), invalid)?;
    if !is_plain_name(&p.name) {
        return Err(invalid.at(
            "phases.name",
            span.clone(),
            format!(
                "{:?} must be made of letters, digits, '-', '_' or '.'",
                p.name
            ),
        ));
    }
    if known.iter().any(|(_, o)| o.name == p.name) {
        return Err(invalid.at(
            "phases.name",
            span.clone(),
            format!("{:?} is used twice", p.name),
        ));
    }
    Ok(Phase {
        name: p.name,
        start: p.start.0,
        end: p.end.0,
        faults: p.faults,
    })
}

/// At most one flap (down for less than its period) and one scale (to at least 1 instance).
fn faults(p: &RawPhase, span: Range<usize>, invalid: &Invalid) -> Result<(), ScenarioError> {
    let flaps: Vec<(Duration, Duration)> = p
        .faults
        .iter()
        .filter_map(|f| match f {
            Fault::Flap { period, down } => Some((*period, *down)),
            _ => None,
        })
        .collect();
    if flaps.len() > 1 {
        return Err(invalid.at(
            "phases.faults",
            span.clone(),
            "at most one flap per phase".into(),
        ));
    }
    if let Some(&(period, down)) = flaps.first()
        && (down.is_zero() || down >= period)
    {
        return Err(invalid.at(
            "phases.faults",
            span.clone(),
            format!(
                "a flap's down ({down:?}) must be more than zero and less than its period ({period:?})"
            ),
        ));
    }
    let scales: Vec<u32> = p
        .faults
        .iter()
        .filter_map(|f| match f {
            Fault::Scale { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    if scales.len() > 1 || scales.contains(&0) {
        return Err(invalid.at(
            "phases.faults",
            span.clone(),
            "at most one scale per phase, to at least 1 instance".into(),
        ));
    }
    Ok(())
}
