//! What the check's measurements mean, in plain words, each failure with its fix. Pure: the
//! tests feed it counts, not a target.
//!
//! The accepted band for the limit, per window, is the limit ± a slack made of:
//! - **window boundaries**: over [`WINDOWS_MEASURED`] (K) windows of the check's own clock, a
//!   fixed-window limiter whose windows start elsewhere admits between (K − 1) and (K + 1)
//!   full windows' worth (the cut windows at both ends), a token bucket its burst on top of K
//!   windows' refill, a sliding window about K: ± limit / K per window;
//! - **instances dividing the limit**: a limiter that gives each of N instances limit / N
//!   rounds each share to a whole request, up to one per instance per window: ± N (none with
//!   one instance);
//! - the schedule's own granularity: ± one request over the K windows.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use super::probe::{Measured, Plan, Tally, WINDOWS_MEASURED};
use crate::targets::{ReadyProbe, TargetDef, TargetError};

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    /// Not judged: an earlier failure leaves nothing to judge it on.
    Skipped,
}

/// One line of the check's output, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub status: Status,
    pub line: String,
    /// Indented under the line: counts, a log's tail.
    pub detail: Vec<String>,
    pub fix: Option<String>,
}

impl Finding {
    fn pass(line: String) -> Self {
        Self {
            status: Status::Pass,
            line,
            detail: Vec::new(),
            fix: None,
        }
    }

    fn fail(line: String, fix: String) -> Self {
        Self {
            status: Status::Fail,
            line,
            detail: Vec::new(),
            fix: Some(fix),
        }
    }

    fn skipped(line: String) -> Self {
        Self {
            status: Status::Skipped,
            line,
            detail: Vec::new(),
            fix: None,
        }
    }

    fn with_detail(mut self, detail: impl IntoIterator<Item = String>) -> Self {
        self.detail.extend(detail);
        self
    }

    /// The finding as printed: a mark, the line, the detail and the fix indented under it.
    pub fn render(&self) -> String {
        let mark = match self.status {
            Status::Pass => "✔",
            Status::Fail => "✘",
            Status::Skipped => "–",
        };
        let mut out = format!("{mark} {}\n", self.line);
        for d in &self.detail {
            let _ = writeln!(out, "    {d}");
        }
        if let Some(fix) = &self.fix {
            let _ = writeln!(out, "    fix: {fix}");
        }
        out
    }
}

/// Admissions per window the check accepts as "limits at the limit".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub low: f64,
    pub high: f64,
}

impl Band {
    /// A limiter counting in a healthy Redis is exact, whatever the instances; what moves the
    /// count is where its windows fall: over [`WINDOWS_MEASURED`] windows a fixed window may
    /// admit one window's limit more (a token bucket its burst), and never less than the limit
    /// per window. Below, a tenth of the limit for timing at the windows' edges.
    pub fn of(plan: &Plan) -> Self {
        let limit = f64::from(plan.limit);
        let k = f64::from(WINDOWS_MEASURED);
        Self {
            low: (0.9 * limit - 1.0 / k).max(0.0),
            high: limit + (limit + 1.0) / k,
        }
    }

    fn contains(&self, x: f64) -> bool {
        (self.low..=self.high).contains(&x)
    }
}

/// Lines quoting the last lines of an instance's log.
fn log_lines(log: &Path, tail: &str) -> Vec<String> {
    let mut lines = vec![format!("its log ({}), last lines:", log.display())];
    if tail.trim().is_empty() {
        lines.push("  (empty)".to_owned());
    }
    lines.extend(tail.lines().map(|l| format!("  | {l}")));
    lines
}

pub fn ready(def: &TargetDef, instances: u32, waited: std::time::Duration) -> Finding {
    Finding::pass(format!(
        "ready: {instances} instance{} answered {} on {{port}} within {} ms",
        plural(instances),
        def.ready_path,
        waited.as_millis()
    ))
}

/// Why the instances did not start: a finding when the target misbehaves, `None` for what
/// is not the target's doing (a program that cannot be started is bad input, reported as an
/// error).
pub fn not_ready(def: &TargetDef, error: &TargetError) -> Option<Finding> {
    let manifest = def.manifest.display();
    match error {
        TargetError::Exited {
            index,
            status,
            log,
            tail,
            ..
        } => Some(
            Finding::fail(
                format!("not ready: instance {index} exited ({status}) before it was ready"),
                format!(
                    "the log says why; start.command ({}) must start the service and keep it \
                     running, from {} (fix it in {manifest})",
                    def.command.join(" "),
                    def.dir
                        .as_deref()
                        .map_or("the project".into(), |d| d.display().to_string()),
                ),
            )
            .with_detail(log_lines(log, tail)),
        ),
        TargetError::NotReady {
            index,
            addr,
            path,
            timeout,
            probe,
            listening,
            log,
            tail,
            ..
        } => Some(
            not_answering(def, *index, *addr, path, *timeout, probe, listening)
                .with_detail(log_lines(log, tail)),
        ),
        TargetError::Build { .. } | TargetError::Infra { .. } => None,
    }
}

fn not_answering(
    def: &TargetDef,
    index: usize,
    addr: SocketAddr,
    path: &str,
    timeout: std::time::Duration,
    probe: &ReadyProbe,
    listening: &[SocketAddr],
) -> Finding {
    let manifest = def.manifest.display();
    let seen = probe.describe(addr, listening);
    match probe {
        ReadyProbe::Refused => Finding::fail(
            format!(
                "not listening on {{port}}: instance {index} was given port {}, but after \
                 {timeout:?} nothing listens there{}",
                addr.port(),
                match listening
                    .iter()
                    .filter(|a| a.port() != addr.port())
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                {
                    v if v.is_empty() => String::new(),
                    v => format!("; the process listens on {}", v.join(", ")),
                }
            ),
            format!(
                "make the service listen on the port failmode gives it: put {{port}} in \
                 start.command or start.env of {manifest} (for example PORT = \"{{port}}\"), \
                 in place of a fixed port"
            ),
        ),
        ReadyProbe::Status(code) => Finding::fail(
            format!("not ready: http://{addr}{path} answered {code} for {timeout:?}, never 2xx"),
            format!(
                "ready.path in {manifest} must name a route that answers 2xx once the service \
                 serves requests"
            ),
        ),
        ReadyProbe::Silent | ReadyProbe::Failed(_) => Finding::fail(
            format!("not ready: http://{addr}{path} did not answer within {timeout:?}: {seen}"),
            format!(
                "the log may say why; if the service only starts slowly, raise ready.timeout \
                 in {manifest}"
            ),
        ),
    }
}

/// Did caller A's traffic show the limit, in admissions per window?
pub fn limit(def: &TargetDef, plan: &Plan, over: &Tally) -> Finding {
    let per_window = f64::from(over.admitted) / f64::from(WINDOWS_MEASURED);
    let offered = plan.over_per_window();
    let band = Band::of(plan);
    let window = humantime::format_duration(plan.window);
    let counts = counts(over);
    let placeholders = if def.limit.is_some() {
        format!(
            "[limit] in {} must be the limit the service enforces per caller (requests per \
             window), as its own configuration sets it",
            def.manifest.display()
        )
    } else {
        format!(
            "start the service with the limit failmode gives it: {{limit}} requests per caller \
             per {{window_ms}} ms (or {{window_s}} s), in start.command or start.env of {}; or, \
             if it reads its limit from its own configuration, declare that limit in [limit]",
            def.manifest.display()
        )
    };
    if over.admitted == 0 {
        let why = match (over.main_refusal(), def.caller_header()) {
            (Some(400), Some(header)) => {
                format!("; 400 usually means the caller header ({header}) is not the one it reads")
            }
            (Some(404), _) => format!("; 404: is {} its route?", def.request_path),
            _ => String::new(),
        };
        return Finding::fail(
            format!("admits nothing: no request of caller A was answered 2xx{why}"),
            format!(
                "request.path ({}) in {} must be a route the service limits, and request.caller \
                 ({}) how it tells callers apart",
                def.request_path,
                def.manifest.display(),
                def.caller
            ),
        )
        .with_detail([counts]);
    }
    if over.refusals() == 0 && over.transport > 0 {
        return Finding::fail(
            format!(
                "never refused: caller A sent {offered} requests per {window} window and none \
                 was answered 429 or 503; {} got no answer (timed out, refused or reset)",
                over.transport
            ),
            format!(
                "answer requests over the limit at once with {} (a limiter that holds or drops \
                 them is not limiting, and its callers time out)",
                def.refuses_with
            ),
        )
        .with_detail([counts]);
    }
    if over.refusals() == 0 {
        return Finding::fail(
            format!(
                "not limiting: caller A sent {offered} requests per {window} window \
                 ({}× the limit of {}) and none was refused",
                offered / plan.limit,
                plan.limit
            ),
            format!(
                "make the service limit {}; {placeholders}",
                def.request_path
            ),
        )
        .with_detail([counts]);
    }
    let seen = format!(
        "≈{per_window:.1} per {window} window (expected {}; accepted {:.1}–{:.1})",
        plan.limit, band.low, band.high
    );
    if band.contains(per_window) {
        let whose = if def.limit.is_some() {
            "its [limit]"
        } else {
            "{limit}"
        };
        return Finding::pass(format!("limits at {whose}: caller A admitted {seen}"));
    }
    let mut fix = placeholders;
    let shared = f64::from(plan.limit * plan.instances);
    if plan.instances > 1 && (per_window - shared).abs() <= band.high - f64::from(plan.limit) {
        let _ = write!(
            fix,
            "; ≈{} instances × the limit: each instance seems to count on its own, so count in \
             the Redis at {{redis_url}} or give each {{limit}} / {{instance_count}}",
            plan.instances
        );
    }
    Finding::fail(
        format!("not limiting at the configured limit: caller A admitted {seen}"),
        fix,
    )
    .with_detail([counts])
}

/// Was caller B, under its limit, left alone while caller A was over it?
pub fn per_caller(def: &TargetDef, m: &Measured) -> Finding {
    let b = &m.beside;
    if m.over.admitted == 0 || m.over.refusals() == 0 {
        return Finding::skipped(
            "per caller: not checked (caller A was not limited, so it could not crowd out B)"
                .to_owned(),
        );
    }
    let refused = b.refusals();
    if refused == 0 && b.transport > 0 {
        return Finding::fail(
            format!(
                "caller B, under its limit, got no answer to {} of {} requests while caller A \
                 was over the limit (timed out, refused or reset): not a refusal, but the \
                 service did not serve it",
                b.transport, b.sent
            ),
            "read the instances' logs: a service that stops answering one caller while \
             another is limited is overloaded or blocked, not limiting per caller"
                .to_owned(),
        )
        .with_detail([counts(b)]);
    }
    if refused == 0 {
        return Finding::pass(format!(
            "limits per caller: caller B was admitted {} of {} while caller A was over the limit",
            b.admitted, b.sent
        ));
    }
    let (ignored, fix) = match def.caller_header() {
        Some(header) => (
            format!("the caller header `{header}`"),
            format!(
                "make the limiter key on the caller named in the `{header}` header (or set \
                 request.caller_header in {} to the header it keys on, or request.caller to \
                 \"source-address\" or \"x-forwarded-for\" if it keys on the client's address)",
                def.manifest.display()
            ),
        ),
        None => (
            format!("the caller's address ({})", def.caller),
            format!(
                "make the limiter key on the client's address{} (or set request.caller in {} \
                 to how it tells callers apart)",
                if def.caller.mode() == "x-forwarded-for" {
                    " as X-Forwarded-For gives it (trust the proxy)"
                } else {
                    ""
                },
                def.manifest.display()
            ),
        ),
    };
    Finding::fail(
        format!(
            "tenants limited together: caller B, under its limit, was refused {refused} of {} \
             while caller A was over the limit: {ignored} seems to be ignored",
            b.sent
        ),
        fix,
    )
    .with_detail([counts(b)])
}

/// Did the refusals come with the status the manifest declares?
pub fn refusal_status(def: &TargetDef, over: &Tally) -> Finding {
    let Some(status) = over.main_refusal() else {
        return Finding::skipped("refusal status: not checked (nothing was refused)".to_owned());
    };
    let manifest = def.manifest.display();
    let declared = def.refuses_with;
    let others: Vec<String> = over
        .refused
        .iter()
        .filter(|(s, _)| **s != status)
        .map(|(s, n)| format!("{s} ×{n}"))
        .collect();
    let others = (!others.is_empty()).then(|| format!("also answered {}", others.join(", ")));
    let finding = if status == declared {
        Finding::pass(format!("refuses with {status}"))
    } else if status == 503 {
        Finding::fail(
            format!("refuses with 503, which {manifest} does not declare (it expects {declared})"),
            format!(
                "add `refuses_with = 503` under [request] in {manifest}, so that failmode counts \
                 these as refusals and not as an outage; or configure the limiter to answer 429"
            ),
        )
    } else if status == 429 {
        Finding::fail(
            format!("refuses with 429, but {manifest} declares refuses_with = {declared}"),
            format!("remove `refuses_with` from [request] in {manifest}"),
        )
    } else {
        Finding::fail(
            format!("refuses with {status}, not {declared}"),
            format!(
                "configure the limiter to answer 429 Too Many Requests over the limit: failmode \
                 counts {status} as {}, not as a refusal",
                if status >= 500 {
                    "a server error"
                } else {
                    "a failure"
                }
            ),
        )
    };
    finding.with_detail(others)
}

/// Did the target's Redis see its traffic? `commands`: its Redis's commands during the
/// traffic, failmode's own INFO left out.
pub fn redis(def: &TargetDef, commands: Result<u64, String>, requests: u32) -> Finding {
    match commands {
        Err(why) => Finding::skipped(format!("uses {{redis_url}}: not checked ({why})")),
        Ok(0) => Finding::fail(
            format!(
                "not using {{redis_url}}: its Redis saw no commands during {requests} requests"
            ),
            format!(
                "connect the limiter to the Redis failmode gives it: {{redis_url}} in \
                 start.env or start.command of {} (for example REDIS_URL = \"{{redis_url}}\"); \
                 a limit kept in memory is not shared by instances, and no Redis fault reaches it",
                def.manifest.display()
            ),
        ),
        Ok(n) => Finding::pass(format!(
            "uses {{redis_url}}: its Redis saw {n} commands during {requests} requests"
        )),
    }
}

/// The answers of one caller, in one line.
fn counts(t: &Tally) -> String {
    let mut parts = vec![
        format!("{} sent", t.sent),
        format!("{} admitted (2xx)", t.admitted),
    ];
    parts.extend(t.refused.iter().map(|(s, n)| format!("{n} answered {s}")));
    if t.transport > 0 {
        parts.push(format!(
            "{} unanswered ({})",
            t.transport,
            t.transport_example.as_deref().unwrap_or("transport error")
        ));
    }
    parts.join(", ")
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
