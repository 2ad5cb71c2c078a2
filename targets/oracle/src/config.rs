//! Flags and `FAILMODE_*` environment variables → a validated [`Config`].
//!
//! The harness starts targets with environment variables only; the flags are there for a
//! person at a terminal. A bad value is reported naming the variable (and the bad script
//! segment), and the binary exits with 64.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use hyper::header::HeaderName;

use crate::decide::Defaults;
use crate::script::{Limit, Script};

/// The caller failmode's warm-up requests use (`harness/src/targets/warm_up.rs`): they come before
/// the load, so they must not start the oracle's clock.
pub const HARNESS_WARM_UP_CALLER: &str = "failmode-warm-up";

#[derive(Debug, Parser)]
#[command(
    name = "failmode-oracle",
    version,
    about = "A scripted test target whose every answer is known in advance, to prove failmode's \
             own verdicts. Not a rate limiter anyone deploys.",
    after_help = "Script: 'FROM..TO: ACTION[, ACTION…]; …', times in seconds since the first \
                  /api request, ACTION one of 'limit N/W', 'open', 'status CODE', 'drop', \
                  'delay MS'. Outside every segment: limit LIMIT/WINDOW, delay DELAY_MS. \
                  See targets/oracle/README.md."
)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "FAILMODE_BIND", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on; 0 picks a free one (the address is printed on stdout).
    #[arg(long, env = "FAILMODE_PORT", default_value_t = 8080)]
    port: u16,
    /// Requests per caller per window outside the script's segments (a whole number).
    #[arg(long, env = "FAILMODE_LIMIT", default_value = "50")]
    limit: String,
    /// The default limit's window (humantime: 1s, 1000ms).
    #[arg(long, env = "FAILMODE_WINDOW", default_value = "1s")]
    window: String,
    /// The header naming the caller; a request without it gets 400.
    #[arg(long, env = "FAILMODE_CALLER_HEADER", default_value = "x-caller")]
    caller_header: String,
    /// What to do when (see below); empty: the default limit throughout.
    #[arg(long, env = "FAILMODE_ORACLE_SCRIPT", default_value = "")]
    script: String,
    /// Milliseconds every answer waits unless a segment's `delay` says otherwise.
    #[arg(long, env = "FAILMODE_ORACLE_DELAY_MS", default_value_t = 0)]
    delay_ms: u64,
    /// How far before the first request t0 is set, in milliseconds: an arrival scheduled on
    /// a whole second of the run then lands inside that second despite the jitter of its
    /// delivery, which may be later or earlier than the first request's by a fraction of a
    /// millisecond.
    #[arg(long, env = "FAILMODE_ORACLE_LEAD_MS", default_value_t = 0)]
    lead_ms: u64,
    /// What a caller's count is kept under: header (the caller header's value),
    /// source-address (the connection's source address), x-forwarded-for (the first address in
    /// X-Forwarded-For) or global (every caller counted together: a limiter that ignores the
    /// caller).
    #[arg(long, env = "FAILMODE_ORACLE_KEY", default_value = "header")]
    key: String,
    /// A caller answered 200 at once, uncounted, without starting the clock (failmode's
    /// warm-up requests); empty: none.
    #[arg(long, env = "FAILMODE_ORACLE_WARM_UP_CALLER", default_value = HARNESS_WARM_UP_CALLER)]
    warm_up_caller: String,
    /// How many of the first warm-up requests answer after `--cold-delay-ms`: a service whose
    /// first answers are slow (a JVM still compiling), for failmode's warm-up until settled.
    #[arg(long, env = "FAILMODE_ORACLE_COLD_WARM_UPS", default_value_t = 0)]
    cold_warm_ups: u64,
    /// Milliseconds each of those first warm-up requests waits.
    #[arg(long, env = "FAILMODE_ORACLE_COLD_DELAY_MS", default_value_t = 0)]
    cold_delay_ms: u64,
    /// The status a `limit` refuses with: 429, or another 4xx/5xx to play a limiter that
    /// answers something else over the limit (503: NGINX's `limit_req` default).
    #[arg(long, env = "FAILMODE_ORACLE_REFUSE_STATUS", default_value_t = 429)]
    refuse_status: u16,
}

/// What the oracle keys a caller's counts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The caller header's value; a request without it gets 400.
    Header,
    /// The connection's source address (`127.0.0.5`), as a limiter keyed on the client's IP.
    SourceAddress,
    /// The first address of `X-Forwarded-For`, else (no such header) the source address, as a
    /// server behind a trusted proxy.
    XForwardedFor,
    /// One count for every caller: a limiter that ignores who is calling. The caller header,
    /// when present, only tells the warm-up caller apart.
    Global,
}

impl std::str::FromStr for Key {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "header" => Ok(Self::Header),
            "source-address" => Ok(Self::SourceAddress),
            "x-forwarded-for" => Ok(Self::XForwardedFor),
            "global" => Ok(Self::Global),
            other => Err(format!(
                "{other:?}: expected header, source-address, x-forwarded-for or global"
            )),
        }
    }
}

/// The warm-up answers of a service that starts slow: the first `warm_ups` wait `delay`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cold {
    pub warm_ups: u64,
    pub delay: Duration,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub key: Key,
    pub caller_header: HeaderName,
    pub script: Script,
    pub defaults: Defaults,
    pub warm_up_caller: Option<String>,
    /// How slow its first warm-up answers are.
    pub cold: Cold,
    /// t0 is this long before the first request.
    pub lead: std::time::Duration,
    /// What a `limit` answers over the limit.
    pub refuse_status: hyper::StatusCode,
}

/// Why the configuration could not be read.
#[derive(Debug)]
pub enum ParseOutcome {
    /// `--help` or `--version`: print it and exit 0.
    Display(clap::Error),
    /// Exit 64 with this message.
    Invalid(String),
}

impl Config {
    /// Parses flags, with the environment as fallback, into a checked configuration.
    pub fn parse_from<I, T>(args: I) -> Result<Self, ParseOutcome>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args = Args::try_parse_from(args).map_err(|e| match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                ParseOutcome::Display(e)
            }
            _ => ParseOutcome::Invalid(e.to_string()),
        })?;
        Self::try_from(args).map_err(ParseOutcome::Invalid)
    }
}

fn invalid(variable: &str, message: impl std::fmt::Display) -> String {
    format!("invalid {variable}: {message}")
}

impl TryFrom<Args> for Config {
    type Error = String;

    fn try_from(args: Args) -> Result<Self, String> {
        let admits = args.limit.trim().parse::<u32>().map_err(|_| {
            invalid(
                "FAILMODE_LIMIT (--limit)",
                format!(
                    "{:?}: the oracle admits whole requests, give a whole number",
                    args.limit
                ),
            )
        })?;
        let window = humantime::parse_duration(args.window.trim()).map_err(|e| {
            invalid(
                "FAILMODE_WINDOW (--window)",
                format!("{:?}: {e}", args.window),
            )
        })?;
        if window.is_zero() {
            return Err(invalid(
                "FAILMODE_WINDOW (--window)",
                "the window must be longer than zero",
            ));
        }
        let caller_header = HeaderName::try_from(args.caller_header.trim()).map_err(|e| {
            invalid(
                "FAILMODE_CALLER_HEADER (--caller-header)",
                format!("{:?}: {e}", args.caller_header),
            )
        })?;
        let key: Key = args
            .key
            .parse()
            .map_err(|e| invalid("FAILMODE_ORACLE_KEY (--key)", e))?;
        let script: Script = args
            .script
            .parse()
            .map_err(|e| invalid("FAILMODE_ORACLE_SCRIPT (--script)", e))?;
        let refuse_status = hyper::StatusCode::from_u16(args.refuse_status)
            .ok()
            .filter(|s| s.is_client_error() || s.is_server_error())
            .ok_or_else(|| {
                invalid(
                    "FAILMODE_ORACLE_REFUSE_STATUS (--refuse-status)",
                    format!("{}: a refusal is a 4xx or 5xx status", args.refuse_status),
                )
            })?;
        if (args.cold_warm_ups == 0) != (args.cold_delay_ms == 0) {
            return Err(invalid(
                "FAILMODE_ORACLE_COLD_WARM_UPS (--cold-warm-ups)",
                format!(
                    "{} with FAILMODE_ORACLE_COLD_DELAY_MS {}: set both, or neither",
                    args.cold_warm_ups, args.cold_delay_ms
                ),
            ));
        }
        Ok(Self {
            listen: SocketAddr::new(args.bind, args.port),
            key,
            caller_header,
            script,
            defaults: Defaults {
                limit: Limit { admits, window },
                delay: Duration::from_millis(args.delay_ms),
            },
            warm_up_caller: Some(args.warm_up_caller).filter(|c| !c.is_empty()),
            cold: Cold {
                warm_ups: args.cold_warm_ups,
                delay: Duration::from_millis(args.cold_delay_ms),
            },
            lead: std::time::Duration::from_millis(args.lead_ms),
            refuse_status,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let argv = std::iter::once("failmode-oracle").chain(args.iter().copied());
        Config::parse_from(argv).map_err(|e| match e {
            ParseOutcome::Display(e) => e.to_string(),
            ParseOutcome::Invalid(message) => message,
        })
    }

    #[test]
    fn flags_become_a_config() {
        let config = parse(&[
            "--port",
            "0",
            "--limit",
            "10",
            "--window",
            "500ms",
            "--script",
            "2..4: open",
            "--delay-ms",
            "5",
            "--caller-header",
            "x-api-key",
        ])
        .unwrap();
        assert_eq!(config.listen.port(), 0);
        assert_eq!(
            config.defaults,
            Defaults {
                limit: Limit {
                    admits: 10,
                    window: Duration::from_millis(500)
                },
                delay: Duration::from_millis(5),
            }
        );
        assert_eq!(config.script.to_string(), "2..4: open");
        assert_eq!(config.caller_header, "x-api-key");
        assert_eq!(config.key, Key::Header);
        assert_eq!(parse(&["--key", "global"]).unwrap().key, Key::Global);
        assert_eq!(
            parse(&["--key", "source-address"]).unwrap().key,
            Key::SourceAddress
        );
        assert_eq!(
            config.warm_up_caller.as_deref(),
            Some(HARNESS_WARM_UP_CALLER)
        );
        assert_eq!(config.refuse_status, 429);
        let config = parse(&["--refuse-status", "503"]).unwrap();
        assert_eq!(config.refuse_status, 503);
        assert_eq!(config.cold, Cold::default());
        let config = parse(&["--cold-warm-ups", "60", "--cold-delay-ms", "15"]).unwrap();
        assert_eq!(
            config.cold,
            Cold {
                warm_ups: 60,
                delay: Duration::from_millis(15)
            }
        );
    }

    #[test]
    fn an_empty_warm_up_caller_means_none() {
        assert_eq!(
            parse(&["--warm-up-caller", ""]).unwrap().warm_up_caller,
            None
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        let cases: [(&[&str], &str); 10] = [
            (&["--cold-warm-ups", "5"], "FAILMODE_ORACLE_COLD_WARM_UPS"),
            (&["--cold-delay-ms", "5"], "set both, or neither"),
            (&["--refuse-status", "200"], "FAILMODE_ORACLE_REFUSE_STATUS"),
            (
                &["--refuse-status", "1000"],
                "FAILMODE_ORACLE_REFUSE_STATUS",
            ),
            (&["--key", "ip"], "FAILMODE_ORACLE_KEY"),
            (&["--limit", "12.5"], "FAILMODE_LIMIT"),
            (&["--window", "soon"], "FAILMODE_WINDOW"),
            (&["--window", "0s"], "longer than zero"),
            (&["--caller-header", "x caller"], "FAILMODE_CALLER_HEADER"),
            (
                &["--script", "2..4: open; 4..5: nope"],
                r#"FAILMODE_ORACLE_SCRIPT (--script): segment 2 ("4..5: nope")"#,
            ),
        ];
        for (args, expected) in cases {
            let err = parse(args).unwrap_err();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }
}
