//! The files `failmode init` writes, as text: the target manifest (the user's service, or a
//! peer's settings to adapt), the scenario with its gates, and the project's README. Kept apart
//! from the writing so each reads as the file it makes.

use std::time::Duration;

use crate::identity::CallerIdentity;
use crate::targets::TargetDef;
use crate::targets::warm_up::WarmUp;

/// A TOML string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A TOML array of strings.
fn strings(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| quoted(s)).collect();
    format!("[{}]", items.join(", "))
}

/// A TOML key: bare when it can be.
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { name.to_owned() } else { quoted(name) }
}

const PLACEHOLDERS_EXPLAINED: &str = "\
# Placeholders, filled for each instance in start.command and start.env:
#   {port}            the port this instance must listen on, on 127.0.0.1
#   {redis_url}       redis://127.0.0.1:PORT: the Toxiproxy proxy in front of this target's own
#                     redis-server. Your service must use this Redis, or no fault reaches it.
#   {instance_id}     NAME-0, NAME-1, …: unique per instance
#   {instance_index}  0, 1, …
#   {instance_count}  how many instances run together (for a limit divided per instance)
#   {limit}           the scenario's limit: requests per window per caller ([policy] limit)
#   {window_ms}       the scenario's window in milliseconds ({window_s}: in seconds)
# failmode measures over-admission and wrongful denial against {limit} per window per caller,
# unless this manifest declares the limit your service reads from its own configuration in a
# [limit] table (below): then against that one. {limit} and {window_ms} stay the scenario's
# either way, so a manifest with a [limit] of its own normally does not use them.";

/// The target manifest: the user's service, or a peer's settings to adapt.
pub(super) fn manifest_text(name: &str, template: Option<&TargetDef>) -> String {
    let mut text = format!(
        "# failmode target `{name}`: your service, as failmode starts it.\n\
         #\n\
         # failmode starts `default_instances` instances of it (a scenario's [[targets]] may say\n\
         # `instances`), each on a free loopback port, all pointed at one redis-server of their\n\
         # own through a Toxiproxy proxy; it spreads every tenant's requests over them as a load\n\
         # balancer would, and breaks that Redis on the scenario's timeline. Commands run from the\n\
         # project's root (the directory holding failmode/): relative paths are relative to it.\n\
         #\n\
         {}\n",
        PLACEHOLDERS_EXPLAINED.replace("NAME", name)
    );
    match template {
        None => text += &own_service(name),
        Some(def) => text += &from_peer(name, def),
    }
    text += &format!(
        "\n# One target per [[variants]]: its name is the one scenarios and --targets use. Add a\n\
         # variant per configuration to compare side by side (each may add to [start.env]).\n\
         [[variants]]\n\
         name = {}\n\
         # env = {{ RATE_LIMIT_FAIL_OPEN = \"false\" }}\n",
        quoted(name)
    );
    text
}

fn own_service(name: &str) -> String {
    format!(
        r#"
description = {description}

# Optional: run once before the instances start, from the project's root (e.g. ["npm", "ci"]
# or ["cargo", "build", "--release"]); `failmode run --no-build` skips it.
# build = ["npm", "ci"]

# How many instances start, unless the scenario says otherwise.
default_instances = 4

[start]
# CHANGE ME: the command that starts ONE instance of your service, in the foreground.
command = ["node", "server.js"]

[start.env]
# Each instance's environment: point your service's own settings at the placeholders.
PORT = "{{port}}"
REDIS_URL = "{{redis_url}}"
RATE_LIMIT = "{{limit}}"
RATE_LIMIT_WINDOW_MS = "{{window_ms}}"
INSTANCE_COUNT = "{{instance_count}}"

[ready]
# failmode polls GET http://127.0.0.1:{{port}}<path> until it answers 2xx, for at most `timeout`.
path = "/healthz"
timeout = "15s"

[request]
# Every request failmode sends is GET http://127.0.0.1:{{port}}<path>…
path = "/api"
# …and tells your limiter which caller sent it (your limiter must count each on its own) by
# `caller`:
#   "header" (the default)  the tenant's caller key (its `caller`, by default its name) in
#                           caller_header
#   "source-address"        each tenant connects from a loopback address of its own:
#                           127.0.0.2 for the scenario's first tenant, 127.0.0.3 for the
#                           second, … (failmode's own requests come from 127.0.0.1); for a
#                           limiter keyed on the client's IP (express-rate-limit's default)
#   "x-forwarded-for"       the same addresses in an X-Forwarded-For header, as a proxy in
#                           front of your service would send (then no caller_header)
caller = "header"
caller_header = "x-caller"
# The status your limiter answers over the limit: 429 (the default) or 503.
# refuses_with = 429

# Optional: unmeasured requests each instance answers before the load starts (from caller
# "failmode-warm-up", or from 127.0.0.1), so that the first phase does not measure JIT
# compilation or lazy loading. By default one round of 20 per instance. For a service slow to
# warm (a JVM), settled_below: rounds go on until each instance's median answer in a round is
# under it, for at most `timeout` (a run whose target never settled says so in its notes).
{warm_up_example}
# Optional: the limit your service enforces from its own configuration, when it does not take
# {{limit}} from failmode. Over-admission, wrongful denial, the allowance and the recovery band
# of this target are then judged against it (run.json records which limit each target was
# judged against), so targets with different limits compare honestly in one run.
# [limit]
# requests = 40             # per caller per window
# window = "1s"

# Optional: Prometheus text failmode reads at every phase boundary. fallback_counter: a
# counter your limiter increments each time it decides without Redis (summed over its labels).
# [metrics]
# path = "/metrics"
# fallback_counter = "ratelimit_fallback_total"
"#,
        description = quoted(&format!("{name}: my service's rate limiter")),
        warm_up_example = WARM_UP_EXAMPLE,
    )
}

fn from_peer(name: &str, def: &TargetDef) -> String {
    let build = match &def.build {
        Some(build) => format!(
            "# The peer's build step, in failmode's checkout: {}\n\
             # Yours, if any (run once from the project's root before the instances start):\n\
             # build = [\"npm\", \"ci\"]\n",
            strings(build)
        ),
        None => "# build = [\"npm\", \"ci\"]\n".to_owned(),
    };
    let env: String = def
        .env
        .iter()
        .map(|(k, v)| format!("{} = {}\n", key(k), quoted(v)))
        .collect();
    let refuses = if def.refuses_with == 429 {
        "# refuses_with = 429\n".to_owned()
    } else {
        format!("refuses_with = {}\n", def.refuses_with)
    };
    let metrics = match (&def.metrics_path, &def.fallback_counter) {
        (Some(path), counter) => format!(
            "[metrics]\npath = {}\n{}",
            quoted(path),
            counter
                .as_ref()
                .map(|c| format!("fallback_counter = {}\n", quoted(c)))
                .unwrap_or_default()
        ),
        (None, _) => "# [metrics]\n# path = \"/metrics\"\n\
                      # fallback_counter = \"ratelimit_fallback_total\"\n"
            .to_owned(),
    };
    format!(
        r#"#
# Started from failmode's `{peer}` manifest, {manifest}:
#   {peer_description}
# Its settings are the ones failmode measures {peer} with. Its start command runs failmode's
# own small server for that library, which exists only in failmode's checkout: replace it with
# the command that starts your service, and adapt the settings below to its options.

description = {description}

{build}
default_instances = {instances}

[start]
# CHANGE ME: the command that starts ONE instance of your service, in the foreground.
command = {command}

[start.env]
{env}
[ready]
# failmode polls GET http://127.0.0.1:{{port}}<path> until it answers 2xx, for at most `timeout`.
path = {ready_path}
timeout = {ready_timeout}

[request]
# Every request failmode sends is GET http://127.0.0.1:{{port}}<path>, naming its tenant by
# `caller`: "header" (its caller key in caller_header), "source-address" (it connects from
# 127.0.0.2, 127.0.0.3, … one address per tenant) or "x-forwarded-for" (those addresses in
# X-Forwarded-For); refuses_with: the status over the limit, 429 or 503.
path = {request_path}
{caller}{refuses}
# Optional: unmeasured requests per instance before the load (one round of 20 by default; with
# settled_below, rounds until each instance's median answer is under it, for at most timeout).
{warm_up}
# Optional: the limit your service enforces from its own configuration, when it does not take
# {{limit}} from failmode; this target is then judged against it.
{limit}
# Optional: Prometheus text read at every phase boundary, and a counter of fallbacks.
{metrics}"#,
        peer = def.name,
        manifest = def
            .manifest
            .strip_prefix("(built in)")
            .unwrap_or(&def.manifest)
            .display(),
        peer_description = def.description,
        description = quoted(&format!("{name}: my service, started from {}", def.name)),
        instances = def.default_instances,
        command = strings(&def.command),
        ready_path = quoted(&def.ready_path),
        ready_timeout = quoted(&humantime::format_duration(def.ready_timeout).to_string()),
        request_path = quoted(&def.request_path),
        caller = match &def.caller {
            CallerIdentity::Header { header } =>
                format!("caller = \"header\"\ncaller_header = {}\n", quoted(header)),
            other => format!("caller = {}\n", quoted(other.mode())),
        },
        warm_up = warm_up_text(&def.warm_up),
        limit = match def.limit {
            Some(own) => format!(
                "[limit]\nrequests = {}\nwindow = {}\n",
                own.requests,
                quoted(&humantime::format_duration(own.window).to_string())
            ),
            None => "# [limit]\n# requests = 40\n# window = \"1s\"\n".to_owned(),
        },
    )
}

/// `[warm_up]` commented out, as a JVM service would write it.
const WARM_UP_EXAMPLE: &str =
    "# [warm_up]\n# requests = 50\n# settled_below = \"10ms\"\n# timeout = \"60s\"\n";

/// A peer's `[warm_up]`, or the example commented out when it keeps the default.
fn warm_up_text(w: &WarmUp) -> String {
    if *w == WarmUp::default() {
        return WARM_UP_EXAMPLE.to_owned();
    }
    let duration = |d: Duration| quoted(&humantime::format_duration(d).to_string());
    let mut text = format!("[warm_up]\nrequests = {}\n", w.requests);
    if let Some(below) = w.settled_below {
        text.push_str(&format!("settled_below = {}\n", duration(below)));
    }
    text.push_str(&format!("timeout = {}\n", duration(w.timeout)));
    text
}

/// The scenario: the user's target beside the reference and fail-open, through a slow and a
/// cut Redis, with gates for CI.
pub(super) fn scenario_text(name: &str) -> String {
    let gates: String = ["slow", "cut"]
        .iter()
        .map(|phase| phase_gates(name, phase))
        .collect();
    format!(
        r#"# `{name}` beside failmode's reference limiter and fail-open, through a slow and then a cut
# Redis. Run it from anywhere in this project:
#   failmode run {name} --duration-scale 0.2   a quick look (24 s)
#   failmode run {name} --gate                 the whole run (2 min), then the gates below
# Every key of this file: scenarios/README.md in failmode's repository;
# `failmode scenario show NAME` prints a shipped scenario to start another from.
name = "{name}"
description = "{name} beside the reference and fail-open: Redis 40 ms slower for 30 s, then cut for 30 s"
seed = 1

# The limit every target is started with ({{limit}} per {{window_ms}}, per caller), which
# over-admission and wrongful denial are measured against.
[policy]
limit = 50
window = "1s"

[load]
request_timeout = "2s"      # an unanswered request becomes a transport error
arrival = "uniform"         # or "poisson"
spread = "round-robin"      # each tenant's requests spread evenly over the instances

# Callers, each at a fixed rate whatever the latency (an open model); `name` is sent in the
# manifest's caller header.
[[tenants]]
name = "heavy"              # well over the limit: a stuck sync job
rate = 120

[[tenants]]
name = "steady"
rate = 20

[[tenants]]
name = "light"
rate = 5

[[targets]]
name = "{name}"             # failmode/targets/{name}/target.toml
# or by path, relative to this file (`variant` picks one of its [[variants]]):
# manifest = "../targets/{name}/target.toml"

[[targets]]
name = "reference"          # failmode's reference limiter: a local share while Redis fails

[[targets]]
name = "fail-open"          # the same, admitting everything while Redis fails

[[phases]]
name = "steady"
start = "0s"
end = "10s"

[[phases]]
name = "slow"
start = "10s"
end = "40s"
faults = [{{ type = "latency", latency_ms = 40, jitter_ms = 10 }}]

# 25 s after each fault: at --duration-scale 0.2 still the 5 s that `recovery_s` needs to see
# 3 s in a row back in the steady band.
[[phases]]
name = "between"
start = "40s"
end = "65s"

[[phases]]
name = "cut"
start = "65s"
end = "95s"
faults = [{{ type = "down" }}]

[[phases]]
name = "recovery"
start = "95s"
end = "120s"

# Gates for CI: `failmode run {name} --gate`, or `failmode gate results/latest` after a run,
# exit 1 when one fails (and write JUnit XML, gate.json and a Markdown summary); a gate with
# level = "warn" reports without failing, one with window = "5s" judges the phase's worst five
# seconds instead of its average. They ask of {name} what the
# reference promises during each fault: no 5xx, steady and light callers served (at most 1 %
# wrongly refused), heavy held to its limit (over-admission beyond one window at most 5 %),
# p99 within 30 ms, back to the steady phase's band within 5 s. Change them to what your service
# promises; `target = "*"` asks every target (fail-open then fails, as it should). Metrics:
# docs/verdicts.md in failmode's repository.{gates}"#
    )
}

/// The gates of one fault phase for the user's target: what the reference promises there.
fn phase_gates(name: &str, phase: &str) -> String {
    format!(
        r#"
[[gates]]
target = "{name}"
phase = "{phase}"
metric = "rate_5xx"
max = 0.0

[[gates]]
target = "{name}"
phase = "{phase}"
metric = "wrongful_denial"
tenant = "steady"
max = 0.01

[[gates]]
target = "{name}"
phase = "{phase}"
metric = "wrongful_denial"
tenant = "light"
max = 0.01

[[gates]]
target = "{name}"
phase = "{phase}"
metric = "over_admission_beyond_window"
tenant = "heavy"
max = 0.05

[[gates]]
target = "{name}"
phase = "{phase}"
metric = "p99_ms"
max = 30

[[gates]]
target = "{name}"
phase = "{phase}"
metric = "recovery_s"
max = 5
"#
    )
}

pub(super) fn readme_text(name: &str) -> String {
    format!(
        r#"# failmode

failmode runs your rate limiter beside its reference limiter while it breaks the Redis they
use, and reports per target the tail latency, the 429 and 5xx rates, the traffic let through
above the limit (over-admission) and the traffic refused wrongly (wrongful denial).

    failmode/
      targets/{name}/target.toml   how failmode starts your service: edit its start command first
      scenarios/{name}.toml        {name} beside the reference and fail-open, Redis slow then cut;
                                   gates for CI
      README.md                    this file

From this directory or any below it:

    failmode setup                          # redis-server and toxiproxy-server, when missing
    failmode list                           # scenarios and targets, and where each comes from
    failmode check {name}                   # step 2, after the manifest: what is wrong before
                                            # any chaos (not ready, wrong port, limit, caller
                                            # header, refusal status, Redis), each with its fix
    failmode run {name} --duration-scale 0.2   # a quick look
    failmode run {name} --gate              # the whole run, then the gates (exit 1 if one fails)
    failmode scenario show redis-down       # a shipped scenario, to copy into scenarios/

Results go to `results/` beside this folder (add it to `.gitignore`); `results/latest` is the
last run. `failmode --project DIR` runs a project from elsewhere. The walkthrough:
docs/your-limiter.md in failmode's repository.
"#
    )
}
