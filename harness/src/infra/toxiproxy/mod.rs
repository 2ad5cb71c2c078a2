//! A typed async client for Toxiproxy's HTTP API (proxies, toxics, reset). Every failure is
//! a [`ToxiproxyError`] naming the operation and carrying the API's own status and message;
//! nothing here panics.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde_json::{Value, json};

mod toxic;

pub use toxic::{Stream, Toxic, ToxicKind};

/// A single API call that hangs longer than this is a failure, not a wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A proxy as the API reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Proxy {
    pub name: String,
    /// The address it listens on, as Toxiproxy reports it: after creation with port 0, the
    /// port it actually bound.
    pub listen: String,
    /// Where it forwards to, as given at creation (a `host:port`, not necessarily an IP).
    pub upstream: String,
    /// False while the proxy is down (`set_enabled(false)`): nothing listens, and the
    /// connections it had are closed.
    pub enabled: bool,
    pub toxics: Vec<Toxic>,
}

impl Proxy {
    /// `listen` as a socket address, if it is one.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        self.listen.parse().ok()
    }

    /// Where a proxy just created on port 0 listens (Toxiproxy bound a free port itself and
    /// reports it); an error if what it reports is not an address.
    pub fn listening(&self) -> Result<SocketAddr, ToxiproxyError> {
        self.listen_addr().ok_or_else(|| ToxiproxyError::Invalid {
            op: format!("create proxy {}", self.name),
            reason: format!("it listens on {:?}, not an address", self.listen),
        })
    }

    fn from_api(value: &Value) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Raw {
            name: String,
            listen: String,
            upstream: String,
            enabled: bool,
            #[serde(default)]
            toxics: Vec<Value>,
        }
        let raw = Raw::deserialize(value).map_err(|e| format!("not a proxy ({e}): {value}"))?;
        let toxics = raw
            .toxics
            .iter()
            .map(Toxic::from_api_json)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: raw.name,
            listen: raw.listen,
            upstream: raw.upstream,
            enabled: raw.enabled,
            toxics,
        })
    }
}

/// A failed Toxiproxy operation. `op` says which, naming the proxy and toxic.
#[derive(Debug, thiserror::Error)]
pub enum ToxiproxyError {
    #[error("toxiproxy at {api}: {op}: the API answered {status}: {message}")]
    Api {
        api: SocketAddr,
        op: String,
        status: u16,
        /// The API's `error` field, or its whole body if it sent no JSON error.
        message: String,
    },

    #[error("toxiproxy at {api}: {op}: {detail}")]
    Transport {
        api: SocketAddr,
        op: String,
        detail: String,
    },

    #[error("toxiproxy at {api}: {op}: unexpected answer: {detail}")]
    Decode {
        api: SocketAddr,
        op: String,
        detail: String,
    },

    #[error("toxiproxy: {op}: {reason}")]
    Invalid { op: String, reason: String },

    #[error("cannot build an HTTP client for toxiproxy at {api}: {detail}")]
    Client { api: SocketAddr, detail: String },
}

impl ToxiproxyError {
    /// The API's HTTP status, when it answered with an error (404: no such proxy or toxic,
    /// 409: it already exists).
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A client of one Toxiproxy server's API.
#[derive(Debug, Clone)]
pub struct Toxiproxy {
    api: SocketAddr,
    http: Result<reqwest::Client, String>,
}

impl Toxiproxy {
    /// A client of the API at `api`. Never fails: should the HTTP client not build, every
    /// call says why.
    pub fn new(api: SocketAddr) -> Self {
        let http = reqwest::Client::builder()
            // The API is on loopback (or an address the user gave): never via HTTP_PROXY.
            .no_proxy()
            // Toxiproxy refuses any User-Agent starting with "Mozilla/" (a CSRF guard).
            .user_agent(concat!("failmode/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| error_chain(&e));
        Self { api, http }
    }

    pub fn api_addr(&self) -> SocketAddr {
        self.api
    }

    /// The server's version, e.g. `2.12.0` (`git` for a build without a stamped version).
    pub async fn version(&self) -> Result<String, ToxiproxyError> {
        let op = "get the version".to_owned();
        let body = self.call(&op, Method::GET, &["version"], None).await?;
        body.get("version")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| self.decode_error(&op, format!("no \"version\" in {body}")))
    }

    /// Creates an enabled proxy. `listen` may have port 0: the returned proxy's
    /// [`listen_addr`](Proxy::listen_addr) is the port it bound.
    pub async fn create_proxy(
        &self,
        name: &str,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<Proxy, ToxiproxyError> {
        let op = format!("create proxy {name:?} ({listen} -> {upstream})");
        let body = json!({
            "name": name,
            "listen": listen.to_string(),
            "upstream": upstream.to_string(),
            "enabled": true,
        });
        let answer = self
            .call(&op, Method::POST, &["proxies"], Some(body))
            .await?;
        self.proxy_from(&op, &answer)
    }

    pub async fn proxy(&self, name: &str) -> Result<Proxy, ToxiproxyError> {
        let op = format!("get proxy {name:?}");
        let answer = self
            .call(&op, Method::GET, &["proxies", name], None)
            .await?;
        self.proxy_from(&op, &answer)
    }

    /// Every proxy, by name.
    pub async fn proxies(&self) -> Result<Vec<Proxy>, ToxiproxyError> {
        let op = "list proxies".to_owned();
        let answer = self.call(&op, Method::GET, &["proxies"], None).await?;
        let Some(by_name) = answer.as_object() else {
            return Err(self.decode_error(&op, format!("not an object: {answer}")));
        };
        let mut proxies = by_name
            .values()
            .map(|value| self.proxy_from(&op, value))
            .collect::<Result<Vec<_>, _>>()?;
        proxies.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(proxies)
    }

    /// Disabling is the `down` fault: the listener closes (new connections are refused) and
    /// every open connection through the proxy is closed. Enabling listens again on the
    /// same address.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<Proxy, ToxiproxyError> {
        let op = format!(
            "{} proxy {name:?}",
            if enabled { "enable" } else { "disable" }
        );
        let answer = self
            .call(
                &op,
                Method::PATCH,
                &["proxies", name],
                Some(json!({ "enabled": enabled })),
            )
            .await?;
        self.proxy_from(&op, &answer)
    }

    /// Adds `toxic`; it applies to the proxy's open connections too. A toxic of the same
    /// name on the proxy is an error (409).
    pub async fn add_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic, ToxiproxyError> {
        let op = format!(
            "add {} toxic {:?} to proxy {proxy:?}",
            toxic.kind.api_type(),
            toxic.name
        );
        if !(0.0..=1.0).contains(&toxic.toxicity) {
            return Err(ToxiproxyError::Invalid {
                op,
                reason: format!("toxicity {} is not between 0 and 1", toxic.toxicity),
            });
        }
        let answer = self
            .call(
                &op,
                Method::POST,
                &["proxies", proxy, "toxics"],
                Some(toxic.to_api_json()),
            )
            .await?;
        Toxic::from_api_json(&answer).map_err(|detail| self.decode_error(&op, detail))
    }

    pub async fn remove_toxic(&self, proxy: &str, toxic: &str) -> Result<(), ToxiproxyError> {
        let op = format!("remove toxic {toxic:?} from proxy {proxy:?}");
        self.call(
            &op,
            Method::DELETE,
            &["proxies", proxy, "toxics", toxic],
            None,
        )
        .await
        .map(drop)
    }

    pub async fn toxics(&self, proxy: &str) -> Result<Vec<Toxic>, ToxiproxyError> {
        let op = format!("list the toxics of proxy {proxy:?}");
        let answer = self
            .call(&op, Method::GET, &["proxies", proxy, "toxics"], None)
            .await?;
        let Some(list) = answer.as_array() else {
            return Err(self.decode_error(&op, format!("not an array: {answer}")));
        };
        list.iter()
            .map(Toxic::from_api_json)
            .collect::<Result<_, _>>()
            .map_err(|detail| self.decode_error(&op, detail))
    }

    /// Removes every toxic of every proxy and enables every proxy again.
    pub async fn reset(&self) -> Result<(), ToxiproxyError> {
        self.call("reset", Method::POST, &["reset"], None)
            .await
            .map(drop)
    }

    pub async fn delete_proxy(&self, name: &str) -> Result<(), ToxiproxyError> {
        let op = format!("delete proxy {name:?}");
        self.call(&op, Method::DELETE, &["proxies", name], None)
            .await
            .map(drop)
    }

    /// One API call: the JSON it answered (`null` for an empty body), or the error.
    async fn call(
        &self,
        op: &str,
        method: Method,
        path: &[&str],
        body: Option<Value>,
    ) -> Result<Value, ToxiproxyError> {
        let http = self
            .http
            .as_ref()
            .map_err(|detail| ToxiproxyError::Client {
                api: self.api,
                detail: detail.clone(),
            })?;
        let base = format!("http://{}/", self.api);
        let mut url =
            Url::parse(&base).map_err(|e| self.decode_error(op, format!("{base}: {e}")))?;
        url.path_segments_mut()
            .map_err(|()| self.decode_error(op, format!("{base} cannot take a path")))?
            .pop_if_empty()
            // Percent-encodes each segment, so a name cannot change the route.
            .extend(path);
        let mut request = http.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let transport = |e: reqwest::Error| ToxiproxyError::Transport {
            api: self.api,
            op: op.to_owned(),
            detail: error_chain(&e),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let text = response.text().await.map_err(transport)?;
        if !status.is_success() {
            return Err(ToxiproxyError::Api {
                api: self.api,
                op: op.to_owned(),
                status: status.as_u16(),
                message: api_message(status, &text),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|e| self.decode_error(op, format!("not JSON ({e}): {}", text.trim())))
    }

    fn proxy_from(&self, op: &str, value: &Value) -> Result<Proxy, ToxiproxyError> {
        Proxy::from_api(value).map_err(|detail| self.decode_error(op, detail))
    }

    fn decode_error(&self, op: &str, detail: String) -> ToxiproxyError {
        ToxiproxyError::Decode {
            api: self.api,
            op: op.to_owned(),
            detail,
        }
    }
}

/// The API's errors are `{"error": "...", "status": N}`; anything else is quoted whole.
fn api_message(status: StatusCode, body: &str) -> String {
    let body = body.trim();
    match serde_json::from_str::<Value>(body) {
        Ok(value) => match value.get("error").and_then(Value::as_str) {
            Some(message) => message.to_owned(),
            None => body.to_owned(),
        },
        Err(_) if body.is_empty() => status.canonical_reason().unwrap_or("no body").to_owned(),
        Err(_) => body.to_owned(),
    }
}

/// reqwest's own message hides the cause ("error sending request"); the chain names it
/// ("connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_quote_the_error_field_or_else_the_body() {
        assert_eq!(
            api_message(
                StatusCode::NOT_FOUND,
                "{\"error\":\"proxy not found\",\"status\":404}\n"
            ),
            "proxy not found"
        );
        assert_eq!(
            api_message(StatusCode::BAD_GATEWAY, "upstream down"),
            "upstream down"
        );
        assert_eq!(api_message(StatusCode::NOT_FOUND, ""), "Not Found");
    }
}
