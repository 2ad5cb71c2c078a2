//! What every request of a target × tenant is built from, checked once before the load
//! starts: the path, and how the request names its tenant (a caller key in a header, the
//! tenant's address in `X-Forwarded-For`, or nothing: the connection's bound source address).
//! Building a request from it clones reference-counted values; it allocates nothing per
//! tenant, so the header path's hot loop costs what it did before identities were added.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::header::{HOST, HeaderName, HeaderValue};
use hyper::{Request, Uri};

use super::error::LoadError;
use super::{Caller, LoadPlan};
use crate::identity::{self, CallerIdentity};

impl LoadPlan {
    /// Checks what [`try_run`] would refuse: names, header values, paths and rates.
    pub fn validate(&self) -> Result<(), LoadError> {
        Prepared::new(self).map(drop)
    }
}

/// How a target's requests say which tenant sent them.
#[derive(Debug)]
enum Naming {
    /// This header, carrying the tenant's caller key.
    Key(HeaderName),
    /// This header (`X-Forwarded-For`), carrying the tenant's address.
    Address(HeaderName),
    /// Nothing in the request: the connection's source address says it.
    Source,
}

/// What every request of a target × tenant is built from, checked once: building a request
/// clones these (reference counts), it allocates nothing per tenant.
#[derive(Debug)]
pub(super) struct Prepared {
    /// Per target: the path in origin form, as HTTP/1 sends it.
    paths: Vec<Uri>,
    naming: Vec<Naming>,
    /// Per tenant, its caller key, or each of its drawn keys.
    callers: Vec<Vec<HeaderValue>>,
    /// Per tenant, its loopback address as a header carries it; empty unless a target tells
    /// callers by address.
    forwarded: Vec<HeaderValue>,
    /// Per tenant, the address its connections to a source-address target are bound to;
    /// empty unless a target tells callers by source address.
    sources: Vec<IpAddr>,
}

impl Prepared {
    pub(super) fn new(plan: &LoadPlan) -> Result<Self, LoadError> {
        let mut paths = Vec::with_capacity(plan.targets.len());
        let mut naming = Vec::with_capacity(plan.targets.len());
        for t in &plan.targets {
            if t.instances.is_empty() {
                return Err(LoadError::NoInstances {
                    target: t.name.clone(),
                });
            }
            let path = t
                .path
                .parse::<Uri>()
                .ok()
                .filter(|u| t.path.starts_with('/') && u.authority().is_none())
                .ok_or_else(|| LoadError::Path {
                    target: t.name.clone(),
                    path: t.path.clone(),
                })?;
            paths.push(path);
            naming.push(match &t.caller {
                CallerIdentity::Header { header } => {
                    Naming::Key(HeaderName::try_from(header.as_str()).map_err(|_| {
                        LoadError::CallerHeader {
                            target: t.name.clone(),
                            header: header.clone(),
                        }
                    })?)
                }
                CallerIdentity::XForwardedFor => {
                    Naming::Address(HeaderName::from_static(identity::FORWARDED_FOR))
                }
                CallerIdentity::SourceAddress => {
                    // Bound to 127.0.0.N, a socket can only reach a loopback IPv4 address.
                    let members = t.instances.members();
                    if let Some(m) = members
                        .iter()
                        .find(|m| !(m.addr.is_ipv4() && m.addr.ip().is_loopback()))
                    {
                        return Err(LoadError::SourceAddress {
                            target: t.name.clone(),
                            addr: m.addr,
                        });
                    }
                    Naming::Source
                }
            });
        }
        let mut callers = Vec::with_capacity(plan.tenants.len());
        for t in &plan.tenants {
            if !(t.rate_per_s.is_finite() && t.rate_per_s >= 0.0) {
                return Err(LoadError::Rate {
                    tenant: t.name.clone(),
                    rate_per_s: t.rate_per_s,
                });
            }
            let value = |key: String| {
                HeaderValue::try_from(key.as_str()).map_err(|_| LoadError::Caller {
                    tenant: t.name.clone(),
                    caller: key,
                })
            };
            // Built once: a request clones one (a reference count), whichever key it draws.
            callers.push(match &t.caller {
                Caller::Key(key) => vec![value(key.clone())?],
                Caller::Drawn(keys) => (0..keys.count())
                    .map(|i| value(keys.key(i)))
                    .collect::<Result<_, _>>()?,
            });
        }
        let by_address = |want: fn(&Naming) -> bool| naming.iter().any(want);
        // An address per key would need thousands of loopback addresses per tenant.
        if let Some(target) = plan
            .targets
            .iter()
            .zip(&naming)
            .find_map(|(t, n)| (!matches!(n, Naming::Key(_))).then_some(&t.name))
            && let Some(t) = plan
                .tenants
                .iter()
                .find(|t| matches!(t.caller, Caller::Drawn(_)))
        {
            return Err(LoadError::DrawnKeysByAddress {
                target: target.clone(),
                tenant: t.name.clone(),
            });
        }
        let addresses = if by_address(|n| !matches!(n, Naming::Key(_))) {
            (0..plan.tenants.len())
                .map(identity::tenant_address)
                .collect::<Option<Vec<_>>>()
                .ok_or(LoadError::TooManyTenants {
                    tenants: plan.tenants.len(),
                })?
        } else {
            Vec::new()
        };
        let forwarded = if by_address(|n| matches!(n, Naming::Address(_))) {
            addresses
                .iter()
                .map(|a| {
                    // An address's text is always a valid header value.
                    HeaderValue::try_from(a.to_string())
                        .unwrap_or_else(|_| HeaderValue::from_static("127.0.0.2"))
                })
                .collect()
        } else {
            Vec::new()
        };
        let sources = if by_address(|n| matches!(n, Naming::Source)) {
            addresses.into_iter().map(IpAddr::V4).collect()
        } else {
            Vec::new()
        };
        Ok(Self {
            paths,
            naming,
            callers,
            forwarded,
            sources,
        })
    }

    /// The local addresses a target's connections are bound to, one pool each per instance:
    /// the tenants' for a source-address target, else one unbound pool.
    pub(super) fn sources_of(&self, target: usize) -> Arc<[Option<IpAddr>]> {
        match self.naming[target] {
            Naming::Source => self.sources.iter().copied().map(Some).collect(),
            Naming::Key(_) | Naming::Address(_) => Arc::new([None]),
        }
    }

    /// The request of `tenant` to `target`, for the instance whose Host header is `host`,
    /// naming the tenant's caller key `key` (0 for a tenant of one key).
    pub(super) fn request(
        &self,
        target: usize,
        host: &HeaderValue,
        tenant: usize,
        key: usize,
    ) -> Request<Empty<Bytes>> {
        let mut request = Request::new(Empty::<Bytes>::new());
        *request.uri_mut() = self.paths[target].clone();
        let headers = request.headers_mut();
        headers.insert(HOST, host.clone());
        match &self.naming[target] {
            Naming::Key(name) => {
                headers.insert(name.clone(), self.callers[tenant][key].clone());
            }
            Naming::Address(name) => {
                headers.insert(name.clone(), self.forwarded[tenant].clone());
            }
            Naming::Source => {}
        }
        request
    }
}
