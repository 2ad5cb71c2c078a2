//! A typed async client for Toxiproxy's HTTP API (proxies, toxics, reset) and the toxic
//! types scenario files name. Every failure is a [`ToxiproxyError`] naming the operation
//! and carrying the API's own status and message; nothing here panics.
//!
//! Two shapes of a toxic exist on purpose: scenario TOML is flat and says its units
//! (`{ type = "latency", latency_ms = 40, jitter_ms = 10 }`), the API nests unit-less
//! attributes (`{"type":"latency","attributes":{"latency":40,"jitter":10},...}`).
//! [`ToxicKind`]'s serde is the first; [`Toxic::to_api_json`] produces the second.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A single API call that hangs longer than this is a failure, not a wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Which direction of a proxied connection a toxic acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Client → Redis: the commands.
    Upstream,
    /// Redis → client: the replies. Toxiproxy's default.
    #[default]
    Downstream,
}

impl Stream {
    fn as_api(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Downstream => "downstream",
        }
    }
}

/// What a toxic does, with its parameters in the units their names say. Deserializes from
/// the flat scenario form, `{ type = "latency", latency_ms = 40, jitter_ms = 10 }`, and
/// refuses unknown keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToxicKind {
    /// Delays each chunk of data by `latency_ms` ± `jitter_ms`.
    Latency {
        latency_ms: u64,
        #[serde(default)]
        jitter_ms: u64,
    },
    /// Lets no data through; closes the connection after `timeout_ms`, or never if 0 (a
    /// hung server that still holds the connection open).
    Timeout { timeout_ms: u64 },
    /// Resets the connection (TCP RST) after `timeout_ms`, at once if 0.
    ResetPeer { timeout_ms: u64 },
    /// Caps the throughput at `rate_kb` KB/s.
    Bandwidth { rate_kb: u64 },
    /// Cuts data into chunks of `average_size` ± `size_variation` bytes, `delay_us` apart.
    Slicer {
        average_size: u64,
        #[serde(default)]
        size_variation: u64,
        #[serde(default)]
        delay_us: u64,
    },
    /// Closes the connection once `bytes` bytes have passed.
    LimitData { bytes: u64 },
    /// Delays the close of the connection by `delay_ms`.
    SlowClose { delay_ms: u64 },
}

impl ToxicKind {
    /// The API's `type`.
    pub fn api_type(&self) -> &'static str {
        match self {
            Self::Latency { .. } => "latency",
            Self::Timeout { .. } => "timeout",
            Self::ResetPeer { .. } => "reset_peer",
            Self::Bandwidth { .. } => "bandwidth",
            Self::Slicer { .. } => "slicer",
            Self::LimitData { .. } => "limit_data",
            Self::SlowClose { .. } => "slow_close",
        }
    }

    /// The API's `attributes` object.
    pub fn api_attributes(&self) -> Value {
        match *self {
            Self::Latency {
                latency_ms,
                jitter_ms,
            } => json!({ "latency": latency_ms, "jitter": jitter_ms }),
            Self::Timeout { timeout_ms } | Self::ResetPeer { timeout_ms } => {
                json!({ "timeout": timeout_ms })
            }
            Self::Bandwidth { rate_kb } => json!({ "rate": rate_kb }),
            Self::Slicer {
                average_size,
                size_variation,
                delay_us,
            } => json!({
                "average_size": average_size,
                "size_variation": size_variation,
                "delay": delay_us,
            }),
            Self::LimitData { bytes } => json!({ "bytes": bytes }),
            Self::SlowClose { delay_ms } => json!({ "delay": delay_ms }),
        }
    }

    /// Reads the API's `type` and `attributes` back.
    fn from_api(kind: &str, attributes: &Map<String, Value>) -> Result<Self, String> {
        let attr = |key: &str| {
            attributes
                .get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("{kind} toxic without a non-negative integer {key:?}"))
        };
        Ok(match kind {
            "latency" => Self::Latency {
                latency_ms: attr("latency")?,
                jitter_ms: attr("jitter")?,
            },
            "timeout" => Self::Timeout {
                timeout_ms: attr("timeout")?,
            },
            "reset_peer" => Self::ResetPeer {
                timeout_ms: attr("timeout")?,
            },
            "bandwidth" => Self::Bandwidth {
                rate_kb: attr("rate")?,
            },
            "slicer" => Self::Slicer {
                average_size: attr("average_size")?,
                size_variation: attr("size_variation")?,
                delay_us: attr("delay")?,
            },
            "limit_data" => Self::LimitData {
                bytes: attr("bytes")?,
            },
            "slow_close" => Self::SlowClose {
                delay_ms: attr("delay")?,
            },
            other => return Err(format!("unknown toxic type {other:?}")),
        })
    }
}

fn full_toxicity() -> f32 {
    1.0
}

/// A named toxic on one direction of a proxy. Its serde form is flat, like [`ToxicKind`]'s,
/// with `stream` (default downstream) and `toxicity` (default 1) beside `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toxic {
    pub name: String,
    #[serde(default)]
    pub stream: Stream,
    /// The probability, 0 to 1, that the toxic applies to a given connection.
    #[serde(default = "full_toxicity")]
    pub toxicity: f32,
    #[serde(flatten)]
    pub kind: ToxicKind,
}

impl Toxic {
    /// A toxic on the downstream (replies) with toxicity 1, as Toxiproxy defaults.
    pub fn new(name: impl Into<String>, kind: ToxicKind) -> Self {
        Self {
            name: name.into(),
            stream: Stream::Downstream,
            toxicity: 1.0,
            kind,
        }
    }

    pub fn with_stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }

    pub fn with_toxicity(mut self, toxicity: f32) -> Self {
        self.toxicity = toxicity;
        self
    }

    /// The body of `POST /proxies/{proxy}/toxics`.
    pub fn to_api_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind.api_type(),
            "stream": self.stream.as_api(),
            "toxicity": self.toxicity,
            "attributes": self.kind.api_attributes(),
        })
    }

    /// Reads a toxic as the API lists it.
    pub fn from_api_json(value: &Value) -> Result<Self, String> {
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("toxic without a string {key:?}: {value}"))
        };
        let name = text("name")?;
        let stream = match text("stream")? {
            "upstream" => Stream::Upstream,
            "downstream" => Stream::Downstream,
            other => return Err(format!("toxic {name:?} has unknown stream {other:?}")),
        };
        let toxicity = value
            .get("toxicity")
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("toxic {name:?} without a numeric toxicity"))?;
        let empty = Map::new();
        let attributes = value
            .get("attributes")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let kind = ToxicKind::from_api(text("type")?, attributes)
            .map_err(|e| format!("toxic {name:?}: {e}"))?;
        Ok(Self {
            name: name.to_owned(),
            stream,
            // Toxiproxy holds it as a float32: nothing is lost.
            toxicity: toxicity as f32,
            kind,
        })
    }
}

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

    fn kind(toml_text: &str) -> Result<ToxicKind, toml::de::Error> {
        #[derive(Deserialize)]
        struct Wrapper {
            fault: ToxicKind,
        }
        toml::from_str::<Wrapper>(&format!("fault = {toml_text}")).map(|w| w.fault)
    }

    #[test]
    fn every_toxic_kind_deserializes_from_its_flat_toml_form() {
        let cases = [
            (
                "{ type = \"latency\", latency_ms = 40, jitter_ms = 10 }",
                ToxicKind::Latency {
                    latency_ms: 40,
                    jitter_ms: 10,
                },
            ),
            (
                "{ type = \"latency\", latency_ms = 40 }",
                ToxicKind::Latency {
                    latency_ms: 40,
                    jitter_ms: 0,
                },
            ),
            (
                "{ type = \"timeout\", timeout_ms = 0 }",
                ToxicKind::Timeout { timeout_ms: 0 },
            ),
            (
                "{ type = \"reset_peer\", timeout_ms = 5 }",
                ToxicKind::ResetPeer { timeout_ms: 5 },
            ),
            (
                "{ type = \"bandwidth\", rate_kb = 64 }",
                ToxicKind::Bandwidth { rate_kb: 64 },
            ),
            (
                "{ type = \"slicer\", average_size = 8, size_variation = 2, delay_us = 100 }",
                ToxicKind::Slicer {
                    average_size: 8,
                    size_variation: 2,
                    delay_us: 100,
                },
            ),
            (
                "{ type = \"limit_data\", bytes = 1024 }",
                ToxicKind::LimitData { bytes: 1024 },
            ),
            (
                "{ type = \"slow_close\", delay_ms = 250 }",
                ToxicKind::SlowClose { delay_ms: 250 },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(kind(text).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn toml_with_an_unknown_key_is_refused_and_the_key_named() {
        let error = kind("{ type = \"latency\", latency_ms = 40, jiter_ms = 10 }").unwrap_err();
        assert!(error.to_string().contains("jiter_ms"), "{error}");
    }

    #[test]
    fn toml_with_a_missing_required_key_or_unknown_type_is_refused() {
        assert!(kind("{ type = \"latency\", jitter_ms = 10 }").is_err());
        assert!(kind("{ type = \"latncy\", latency_ms = 10 }").is_err());
        assert!(kind("{ type = \"latency\", latency_ms = -1 }").is_err());
    }

    #[test]
    fn a_toxic_in_toml_defaults_to_downstream_with_full_toxicity() {
        let toxic: Toxic =
            toml::from_str("name = \"slow\"\ntype = \"latency\"\nlatency_ms = 40").unwrap();
        assert_eq!(
            toxic,
            Toxic::new(
                "slow",
                ToxicKind::Latency {
                    latency_ms: 40,
                    jitter_ms: 0
                }
            )
        );
        let upstream: Toxic = toml::from_str(
            "name = \"cut\"\nstream = \"upstream\"\ntoxicity = 0.5\ntype = \"timeout\"\ntimeout_ms = 0",
        )
        .unwrap();
        assert_eq!(upstream.stream, Stream::Upstream);
        assert_eq!(upstream.toxicity, 0.5);
        assert!(
            toml::from_str::<Toxic>("name = \"x\"\ntype = \"timeout\"\ntimeout_ms = 0\nbogus = 1")
                .is_err()
        );
    }

    #[test]
    fn api_json_nests_unit_less_attributes_under_the_api_type() {
        let toxic = Toxic::new(
            "slow",
            ToxicKind::Latency {
                latency_ms: 40,
                jitter_ms: 10,
            },
        )
        .with_stream(Stream::Upstream)
        .with_toxicity(0.5);
        assert_eq!(
            toxic.to_api_json(),
            json!({
                "name": "slow",
                "type": "latency",
                "stream": "upstream",
                "toxicity": 0.5,
                "attributes": { "latency": 40, "jitter": 10 },
            })
        );
        let slicer = ToxicKind::Slicer {
            average_size: 8,
            size_variation: 2,
            delay_us: 100,
        };
        assert_eq!(
            slicer.api_attributes(),
            json!({ "average_size": 8, "size_variation": 2, "delay": 100 })
        );
        assert_eq!(
            ToxicKind::ResetPeer { timeout_ms: 5 }.api_type(),
            "reset_peer"
        );
        assert_eq!(
            ToxicKind::SlowClose { delay_ms: 7 }.api_attributes(),
            json!({ "delay": 7 })
        );
    }

    #[test]
    fn every_toxic_kind_survives_the_api_round_trip() {
        let kinds = [
            ToxicKind::Latency {
                latency_ms: 40,
                jitter_ms: 10,
            },
            ToxicKind::Timeout { timeout_ms: 0 },
            ToxicKind::ResetPeer { timeout_ms: 5 },
            ToxicKind::Bandwidth { rate_kb: 64 },
            ToxicKind::Slicer {
                average_size: 8,
                size_variation: 2,
                delay_us: 100,
            },
            ToxicKind::LimitData { bytes: 1024 },
            ToxicKind::SlowClose { delay_ms: 250 },
        ];
        for kind in kinds {
            let toxic = Toxic::new("t", kind).with_toxicity(0.25);
            assert_eq!(Toxic::from_api_json(&toxic.to_api_json()), Ok(toxic));
        }
    }

    #[test]
    fn an_api_toxic_of_an_unknown_type_is_an_error_naming_it() {
        let value = json!({
            "name": "x", "type": "bogus", "stream": "downstream", "toxicity": 1.0,
            "attributes": {},
        });
        let error = Toxic::from_api_json(&value).unwrap_err();
        assert!(error.contains("bogus"), "{error}");
    }

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
