//! Who the caller is: how a target tells the scenario's tenants apart, chosen per target in
//! its manifest's `[request] caller`.
//!
//! - `header` (the default): the tenant's caller key in a header the manifest names.
//! - `source-address`: each tenant connects from a loopback address of its own. The whole of
//!   127.0.0.0/8 is local on Linux, so a socket may bind any of them before it connects.
//! - `x-forwarded-for`: each tenant's requests carry `X-Forwarded-For` with that same address,
//!   as a proxy in front of the limiter would add.
//!
//! The address of tenant *i* (0-based, in the scenario's order) is 127.0.0.2 + *i*, counted as
//! a 32-bit number: 127.0.0.2, 127.0.0.3, …, 127.0.0.255, 127.0.1.0, … It depends on the
//! scenario alone, so every worker (`--worker K/N`) gives a tenant the same one. It is never
//! 127.0.0.1: failmode's own readiness probes, metrics reads and warm-up requests come from
//! there, and a limiter must not count them against a tenant.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// The header a proxy names the client in.
pub const FORWARDED_FOR: &str = "x-forwarded-for";

/// The address failmode's own requests (readiness, metrics, warm-up) come from.
pub const OWN_ADDRESS: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The first tenant's address; the others follow it.
const FIRST_TENANT: u32 = u32::from_be_bytes([127, 0, 0, 2]);
/// The last address of 127/8 a tenant may have: 127.255.255.255 is its broadcast address.
const LAST_TENANT: u32 = u32::from_be_bytes([127, 255, 255, 254]);

/// How many tenants can each have an address of their own.
pub const MAX_TENANTS: usize = (LAST_TENANT - FIRST_TENANT + 1) as usize;

/// How a target tells callers apart. Only a header identity names a header: the other two
/// cannot carry one by mistake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum CallerIdentity {
    /// The tenant's caller key in this header.
    Header { header: String },
    /// The tenant's own loopback address, as the connection's source.
    SourceAddress,
    /// The tenant's own loopback address, in `X-Forwarded-For`.
    XForwardedFor,
}

impl CallerIdentity {
    /// As a manifest writes it: `header`, `source-address` or `x-forwarded-for`.
    pub fn mode(&self) -> &'static str {
        match self {
            Self::Header { .. } => "header",
            Self::SourceAddress => "source-address",
            Self::XForwardedFor => "x-forwarded-for",
        }
    }

    /// The header naming a caller to the target, for a client that sends few requests (the
    /// warm-up, `check`): its key in the caller header, or its address in `X-Forwarded-For`;
    /// none for a source-address target, where the connection's source names it. The load
    /// engine builds the same headers once per tenant instead.
    pub fn naming_header<'a>(&'a self, key: &str, address: Ipv4Addr) -> Option<(&'a str, String)> {
        match self {
            Self::Header { header } => Some((header.as_str(), key.to_owned())),
            Self::XForwardedFor => Some((FORWARDED_FOR, address.to_string())),
            Self::SourceAddress => None,
        }
    }

    /// Whether the tenants' addresses are what the target sees (not a header key).
    pub fn by_address(&self) -> bool {
        !matches!(self, Self::Header { .. })
    }
}

impl std::fmt::Display for CallerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Header { header } => write!(f, "header {header}"),
            other => f.write_str(other.mode()),
        }
    }
}

/// The loopback address of tenant `index` (0-based, in the scenario's order); `None` past
/// [`MAX_TENANTS`].
pub fn tenant_address(index: usize) -> Option<Ipv4Addr> {
    let index = u32::try_from(index).ok()?;
    let n = FIRST_TENANT.checked_add(index)?;
    (n <= LAST_TENANT).then(|| Ipv4Addr::from(n))
}

/// How one tenant is named to the targets, as run.json records it (`tenants`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantIdentity {
    pub name: String,
    /// Its caller key, sent in a header-identity target's caller header; for a population's
    /// rest, the range its keys are drawn from (`crowd-6…crowd-10000`).
    pub caller: String,
    /// How many caller keys it draws from, when more than one (a population's rest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
    /// The loopback address it connects from (source-address targets) or sends in
    /// `X-Forwarded-For`: 127.0.0.2 + its index, the same in every worker.
    pub address: std::net::Ipv4Addr,
}

impl TenantIdentity {
    /// Every tenant, as (name, caller key, how many keys) in the scenario's order; a tenant past
    /// [`MAX_TENANTS`] has no address of its own and is left out (the load engine refuses such
    /// a run when a target tells callers by address).
    pub fn of<'a>(tenants: impl IntoIterator<Item = (&'a str, String, u64)>) -> Vec<Self> {
        tenants
            .into_iter()
            .enumerate()
            .filter_map(|(i, (name, caller, keys))| {
                Some(Self {
                    name: name.to_owned(),
                    caller,
                    keys: (keys > 1).then_some(keys),
                    address: tenant_address(i)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_addresses_are_distinct_loopback_addresses_never_failmodes_own() {
        assert_eq!(tenant_address(0), Some(Ipv4Addr::new(127, 0, 0, 2)));
        assert_eq!(tenant_address(253), Some(Ipv4Addr::new(127, 0, 0, 255)));
        assert_eq!(tenant_address(254), Some(Ipv4Addr::new(127, 0, 1, 0)));
        assert_eq!(
            tenant_address(MAX_TENANTS - 1),
            Some(Ipv4Addr::new(127, 255, 255, 254))
        );
        assert_eq!(tenant_address(MAX_TENANTS), None);
        let some: Vec<Ipv4Addr> = (0..1000).filter_map(tenant_address).collect();
        let mut distinct = some.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 1000);
        assert!(some.iter().all(|a| a.is_loopback() && *a != OWN_ADDRESS));
    }

    #[test]
    fn an_identity_is_recorded_with_its_mode() {
        let header = CallerIdentity::Header {
            header: "x-caller".into(),
        };
        assert_eq!(
            serde_json::to_string(&header).unwrap(),
            r#"{"mode":"header","header":"x-caller"}"#
        );
        assert_eq!(
            serde_json::to_string(&CallerIdentity::XForwardedFor).unwrap(),
            r#"{"mode":"x-forwarded-for"}"#
        );
        assert_eq!(header.to_string(), "header x-caller");
        assert_eq!(CallerIdentity::SourceAddress.to_string(), "source-address");
    }
}
