//! A deployment that already runs, as `--attach DEPLOYMENT.toml` describes it: the Toxiproxy
//! API in front of its Redis servers and, per target, the instance URLs, the proxy's name and
//! optionally a Redis admin URL. failmode starts nothing there; it sends the load and the
//! faults and writes the same results.
//!
//! Every address is resolved when the file is read, and one that is not loopback is refused
//! unless the caller allows remote ones: a chaos tool pointed at the wrong host by a typo
//! must fail before it sends anything.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::abort::{AbortRule, parse_rules};
use crate::identity::CallerIdentity;
use crate::targets::TargetDef;
use crate::targets::manifest::{OwnLimit, RawLimit, caller_identity, own_limit};

#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error("cannot read the deployment file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("deployment file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "deployment file {path}: {what} {url} is {addr}, not on this machine's loopback; \
         pass --allow-remote to send load and faults there"
    )]
    Remote {
        path: PathBuf,
        what: String,
        url: String,
        addr: SocketAddr,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeployment {
    toxiproxy: String,
    targets: Vec<RawTarget>,
    /// Safety limits for runs attached here (`crate::abort`), beside the scenario's.
    #[serde(default)]
    abort: Vec<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    name: String,
    instances: Vec<String>,
    proxy: String,
    redis_admin: Option<String>,
    /// The limit the deployed service enforces, as a manifest's `[limit]` says it.
    limit: Option<RawLimit>,
    /// Who the caller is, as a manifest's `[request] caller` and `caller_header` say it.
    caller: Option<String>,
    caller_header: Option<String>,
}

/// One target of the deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachedTarget {
    /// A target manifest's name: its request path, caller header and metrics come from it.
    pub name: String,
    pub instances: Vec<SocketAddr>,
    /// The Toxiproxy proxy in front of its Redis.
    pub proxy: String,
    /// Its Redis, for `INFO` and the faults that talk to Redis itself.
    pub redis_admin: Option<SocketAddr>,
    /// The limit the deployed service enforces, over its manifest's (`[limit]`).
    pub limit: Option<OwnLimit>,
    /// How the deployed service tells callers apart, over its manifest's.
    pub caller: Option<CallerIdentity>,
}

impl AttachedTarget {
    /// Its manifest's target with what the deployment file says of it on top.
    pub fn over(&self, def: &TargetDef) -> TargetDef {
        let mut def = def.clone();
        if let Some(limit) = self.limit {
            def.limit = Some(limit);
        }
        if let Some(caller) = &self.caller {
            def.caller = caller.clone();
        }
        def
    }
}

/// The whole file, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    pub path: PathBuf,
    pub toxiproxy: SocketAddr,
    pub targets: Vec<AttachedTarget>,
    /// Its safety limits: a run attached here stops when one is crossed.
    pub abort: Vec<AbortRule>,
}

impl Deployment {
    /// Reads and resolves `path`; a non-loopback address is refused unless `allow_remote`.
    pub fn read(path: &Path, allow_remote: bool) -> Result<Self, DeploymentError> {
        let text = std::fs::read_to_string(path).map_err(|source| DeploymentError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path, allow_remote)
    }

    pub fn parse(text: &str, path: &Path, allow_remote: bool) -> Result<Self, DeploymentError> {
        let invalid = |message: String| DeploymentError::Invalid {
            path: path.to_owned(),
            message,
        };
        let raw: RawDeployment =
            toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_owned()))?;
        let resolve = |what: &str, url: &str, schemes: &[&str]| {
            let addr =
                address(url, schemes).map_err(|e| invalid(format!("{what} {url:?}: {e}")))?;
            if !allow_remote && !addr.ip().is_loopback() {
                return Err(DeploymentError::Remote {
                    path: path.to_owned(),
                    what: what.to_owned(),
                    url: url.to_owned(),
                    addr,
                });
            }
            Ok(addr)
        };
        let toxiproxy = resolve("toxiproxy", &raw.toxiproxy, &["http"])?;
        if raw.targets.is_empty() {
            return Err(invalid("needs at least one [[targets]] entry".into()));
        }
        let mut targets: Vec<AttachedTarget> = Vec::new();
        for t in raw.targets {
            if targets.iter().any(|o| o.name == t.name) {
                return Err(invalid(format!("target {:?} is listed twice", t.name)));
            }
            if t.instances.is_empty() {
                return Err(invalid(format!("target {:?} has no instances", t.name)));
            }
            let instances = t
                .instances
                .iter()
                .map(|u| resolve(&format!("{} instance", t.name), u, &["http"]))
                .collect::<Result<Vec<_>, _>>()?;
            let redis_admin = t
                .redis_admin
                .as_deref()
                .map(|u| resolve(&format!("{} redis_admin", t.name), u, &["redis"]))
                .transpose()?;
            let name = t.name.clone();
            let for_target = |message: String| invalid(format!("target {name:?}: {message}"));
            let limit = t
                .limit
                .as_ref()
                .map(|raw| own_limit(raw, crate::limits::LimitSource::Deployment))
                .transpose()
                .map_err(for_target)?;
            let caller = match (&t.caller, &t.caller_header) {
                (None, None) => None,
                (mode, header) => {
                    Some(caller_identity(mode.as_deref(), header.as_deref()).map_err(for_target)?)
                }
            };
            targets.push(AttachedTarget {
                name: t.name,
                instances,
                proxy: t.proxy,
                redis_admin,
                limit,
                caller,
            });
        }
        let abort = parse_rules(&raw.abort).map_err(invalid)?;
        Ok(Self {
            path: path.to_owned(),
            toxiproxy,
            targets,
            abort,
        })
    }

    /// What a run will touch, one line each, printed before any traffic or fault.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "Toxiproxy API at http://{} (its proxies named below: toxics named failmode-*, \
             enabled and disabled)",
            self.toxiproxy
        )];
        for t in &self.targets {
            let instances: Vec<String> = t.instances.iter().map(ToString::to_string).collect();
            lines.push(format!(
                "{}: load to {}; faults on proxy {:?}{}",
                t.name,
                instances.join(", "),
                t.proxy,
                t.redis_admin
                    .map(|a| format!("; INFO and CLIENT PAUSE on Redis {a}"))
                    .unwrap_or_default()
            ));
        }
        lines
    }
}

/// `scheme://host:port[/…]` resolved to one address (the first the resolver gives).
fn address(url: &str, schemes: &[&str]) -> Result<SocketAddr, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("is not a URL (expected {}://host:port)", schemes[0]))?;
    if !schemes.contains(&scheme) {
        return Err(format!(
            "has scheme {scheme:?}, expected {}",
            schemes.join(" or ")
        ));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    host_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot be resolved ({e}); write host:port"))?
        .next()
        .ok_or_else(|| "resolves to no address".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
toxiproxy = "http://127.0.0.1:8474"

[[targets]]
name = "reference"
instances = ["http://127.0.0.1:8081", "http://localhost:8082/"]
proxy = "reference-redis"
redis_admin = "redis://127.0.0.1:6379/0"
"#;

    fn parse(text: &str, allow_remote: bool) -> Result<Deployment, DeploymentError> {
        Deployment::parse(text, Path::new("d.toml"), allow_remote)
    }

    #[test]
    fn a_loopback_deployment_resolves_every_address() {
        let d = parse(FILE, false).unwrap();
        assert_eq!(d.toxiproxy, "127.0.0.1:8474".parse().unwrap());
        let t = &d.targets[0];
        assert_eq!(t.instances.len(), 2);
        assert!(t.instances[1].ip().is_loopback());
        assert_eq!(t.redis_admin, Some("127.0.0.1:6379".parse().unwrap()));
        assert!(d.describe()[1].contains("reference-redis"));
    }

    #[test]
    fn a_remote_address_is_refused_unless_allowed() {
        let remote = FILE.replace("http://127.0.0.1:8081", "http://10.1.2.3:8081");
        let e = parse(&remote, false).unwrap_err().to_string();
        assert!(
            e.contains("10.1.2.3") && e.contains("--allow-remote"),
            "{e}"
        );
        assert!(parse(&remote, true).is_ok());
    }

    #[test]
    fn a_wrong_scheme_an_unknown_key_or_no_instance_is_named() {
        let e = parse(&FILE.replace("redis://127", "http://127"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("redis_admin") && e.contains("scheme"), "{e}");
        let e = parse(&FILE.replace("proxy = ", "proxi = "), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("proxi"), "{e}");
        let e = parse(
            &FILE.replace(
                r#"["http://127.0.0.1:8081", "http://localhost:8082/"]"#,
                "[]",
            ),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no instances"), "{e}");
    }

    #[test]
    fn a_deployed_target_may_declare_its_limit_and_caller_over_its_manifest() {
        let own = format!(
            "{FILE}limit = {{ requests = 40, window = \"1s\" }}\ncaller = \"source-address\"\n"
        );
        let t = &parse(&own, false).unwrap().targets[0];
        assert_eq!(
            t.limit,
            Some(OwnLimit {
                requests: 40,
                window: std::time::Duration::from_secs(1),
                declared_in: crate::limits::LimitSource::Deployment,
            })
        );
        assert_eq!(t.caller, Some(CallerIdentity::SourceAddress));
        assert_eq!(parse(FILE, false).unwrap().targets[0].limit, None);
        let e = parse(&format!("{FILE}caller = \"ip\"\n"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"reference\"") && e.contains("\"ip\""), "{e}");
        let e = parse(
            &format!("{FILE}limit = {{ requests = 0, window = \"1s\" }}\n"),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("limit.requests = 0"), "{e}");
    }
}
