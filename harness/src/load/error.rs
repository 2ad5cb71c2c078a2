//! Why the load generator could not start or carry out a run. A failed request is not one of
//! these: it is an [`super::Outcome`], data.

use std::io;
use std::net::SocketAddr;

use crate::identity;

/// Why a run could not be started or carried out. Failed requests are not errors: they are
/// [`Outcome`]s.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("target {target:?} has no instances")]
    NoInstances { target: String },
    #[error("target {target:?}: caller header {header:?} is not a valid HTTP header name")]
    CallerHeader { target: String, header: String },
    #[error("tenant {tenant:?}: caller {caller:?} cannot be sent as an HTTP header value")]
    Caller { tenant: String, caller: String },
    #[error(
        "target {target:?} tells callers by source address, so its instances must listen on an \
         IPv4 loopback address (the tenants connect from 127.0.0.N), but {addr} is not one"
    )]
    SourceAddress { target: String, addr: SocketAddr },
    #[error(
        "{tenants} tenants: at most {} can each have a loopback address of their own",
        identity::MAX_TENANTS
    )]
    TooManyTenants { tenants: usize },
    #[error(
        "target {target:?} tells callers by their address, and tenant {tenant:?} draws its \
         caller key from a population: a population's keys can only be sent in a header \
         (request.caller_header in the target's manifest)"
    )]
    DrawnKeysByAddress { target: String, tenant: String },
    #[error("target {target:?}: path {path:?} does not make a request URI (it must start with /)")]
    Path { target: String, path: String },
    #[error("tenant {tenant:?}: rate {rate_per_s} is not a finite number of requests/s ≥ 0")]
    Rate { tenant: String, rate_per_s: f64 },
    #[error("the load generator could not start")]
    Start(#[source] io::Error),
    #[error("the load generator's timer failed")]
    Timer(#[source] io::Error),
    #[error("the load generator's thread panicked")]
    Panicked,
}
