//! The toxic types scenario files name, in their two shapes: scenario TOML is flat and says
//! its units (`{ type = "latency", latency_ms = 40, jitter_ms = 10 }`), Toxiproxy's API nests
//! unit-less attributes (`{"type":"latency","attributes":{"latency":40,"jitter":10},...}`).
//! [`ToxicKind`]'s serde is the first; [`Toxic::to_api_json`] produces the second.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

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
}
