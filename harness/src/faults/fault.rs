//! A fault as a scenario writes it: `{ type = "down" }`, `{ type = "flap", period = "4s",
//! down = "1s" }`, or any Toxiproxy toxic (`{ type = "latency", latency_ms = 40 }`).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::toxiproxy::ToxicKind;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The proxy is disabled: open connections are cut and new ones refused.
    Down {},
    /// Redis holds every connection open and nothing passes either way: commands do not
    /// reach it and no reply comes back (Toxiproxy `timeout` 0 on both directions).
    Hang {},
    /// Redis itself stops (SIGSTOP to the target's own redis-server, SIGCONT at the end):
    /// connections stay open, commands wait in the socket buffers and all run when it
    /// resumes — a Redis blocked by a slow script, a fork or a pause. Not through the proxy.
    Stall {},
    /// Down for `down` at the start of every `period`, up for the rest, for the whole phase.
    Flap {
        #[serde(with = "crate::duration")]
        period: Duration,
        #[serde(with = "crate::duration")]
        down: Duration,
    },
    /// A Toxiproxy toxic on the replies (downstream).
    #[serde(untagged)]
    Toxic(ToxicKind),
}

impl Fault {
    /// Stretches the fault's own times with the timeline (`--duration-scale`).
    pub fn scale(&mut self, factor: f64) {
        if let Self::Flap { period, down } = self {
            *period = period.mul_f64(factor);
            *down = down.mul_f64(factor);
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Down {} => f.write_str("down"),
            Self::Hang {} => f.write_str("hang"),
            Self::Stall {} => f.write_str("stall (redis-server stopped)"),
            Self::Flap { period, down } => write!(
                f,
                "flap: down {} every {}",
                humantime::format_duration(*down),
                humantime::format_duration(*period)
            ),
            Self::Toxic(kind) => {
                f.write_str(kind.api_type())?;
                if let serde_json::Value::Object(attributes) = kind.api_attributes() {
                    for (k, v) in attributes {
                        write!(f, " {k}={v}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        faults: Vec<Fault>,
    }

    fn parse(text: &str) -> Result<Vec<Fault>, String> {
        toml::from_str::<Holder>(text)
            .map(|h| h.faults)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_fault_form_of_a_scenario_parses() {
        let faults = parse(
            r#"faults = [
                { type = "down" },
                { type = "hang" },
                { type = "flap", period = "4s", down = "1s" },
                { type = "latency", latency_ms = 40, jitter_ms = 10 },
                { type = "timeout", timeout_ms = 0 },
                { type = "stall" },
            ]"#,
        )
        .unwrap();
        assert_eq!(faults[0], Fault::Down {});
        assert_eq!(faults[1], Fault::Hang {});
        assert_eq!(
            faults[2],
            Fault::Flap {
                period: Duration::from_secs(4),
                down: Duration::from_secs(1)
            }
        );
        assert_eq!(
            faults[3],
            Fault::Toxic(ToxicKind::Latency {
                latency_ms: 40,
                jitter_ms: 10
            })
        );
        assert_eq!(faults[3].to_string(), "latency jitter=10 latency=40");
        assert_eq!(faults[5], Fault::Stall {});
    }

    #[test]
    fn unknown_types_and_keys_are_refused() {
        assert!(parse(r#"faults = [{ type = "gremlins" }]"#).is_err());
        assert!(parse(r#"faults = [{ type = "down", for = "3s" }]"#).is_err());
        assert!(parse(r#"faults = [{ type = "latency", latency_ms = 40, colour = 1 }]"#).is_err());
    }

    #[test]
    fn scaling_a_flap_scales_its_period_and_cut() {
        let mut f = Fault::Flap {
            period: Duration::from_secs(4),
            down: Duration::from_secs(1),
        };
        f.scale(0.5);
        assert_eq!(
            f,
            Fault::Flap {
                period: Duration::from_secs(2),
                down: Duration::from_millis(500)
            }
        );
    }
}
