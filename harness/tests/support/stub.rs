//! A project outside the checkout whose one target is a Python stub (`stub_workspace`), so a
//! test can make an instance fail readiness, die mid-run or serve for as long as a run lasts;
//! and what a test needs to find the processes a run started and to prove they are gone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::{fixture_path, workspace};

/// How long a run under test may take to get its instances up and serve a tenant.
const STARTUP: Duration = Duration::from_secs(20);

/// Whether any instance log under `results` (`<scenario>/<run>/logs/*.log`) contains `text`.
pub(crate) fn instance_logs_contain(results: &Path, text: &str) -> bool {
    let Ok(scenarios) = std::fs::read_dir(results) else {
        return false;
    };
    scenarios
        .flatten()
        .filter_map(|s| std::fs::read_dir(s.path()).ok())
        .flatten()
        .flatten()
        .filter_map(|run| std::fs::read_dir(run.path().join("logs")).ok())
        .flatten()
        .flatten()
        .any(|log| {
            std::fs::read_to_string(log.path())
                .map(|t| t.contains(text))
                .unwrap_or(false)
        })
}

/// Processes started for a test folder: every child the harness starts writes its stdout to
/// a log inside the folder (redis-server rewrites its command line, so that cannot be used).
pub(crate) fn children_logging_under(needle: &str) -> Vec<String> {
    logging_under(needle)
        .into_iter()
        .map(|(_, _, text)| text)
        .collect()
}

/// [`children_logging_under`]'s processes: pid, log and command line.
pub(crate) fn logging_under(needle: &str) -> Vec<(i32, PathBuf, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<i32>().ok()?, e.path())))
        .filter_map(|(pid, path)| {
            let stdout = std::fs::read_link(path.join("fd/1")).ok()?;
            let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (stdout.to_string_lossy().contains(needle) && !text.contains("cargo"))
                .then_some((pid, stdout, text))
        })
        .collect()
}

/// A project (a `failmode/` folder) outside the checkout whose one target is a Python stub.
pub(crate) fn stub_workspace(behaviour: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let stub = dir.path().join("failmode/targets/stub");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(
        stub.join("stub.py"),
        r#"import http.server, os, subprocess, threading
port = int(os.environ["PORT"])
mode = os.environ["MODE"]
if mode == "crash":
    print("stub: cannot start, on purpose", flush=True)
    raise SystemExit(3)
if mode == "serve":
    # A grandchild in the instance's process group, as gunicorn's workers or a JVM's are.
    subprocess.Popen(["sleep", "300"])
served = False
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global served
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        self.wfile.flush()
        if not served and self.headers.get("x-caller") not in (None, "failmode-warm-up"):
            served = True
            print("stub: served a tenant", flush=True)
    def log_message(self, *a):
        pass
if mode == "die" and os.environ["INDEX"] == "1":
    threading.Timer(1.5, lambda: os._exit(9)).start()
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"#,
    )
    .unwrap();
    std::fs::write(
        stub.join("target.toml"),
        format!(
            r#"default_instances = 2
start = {{ command = ["python3", "{}"], env = {{ PORT = "{{port}}", MODE = "{behaviour}", INDEX = "{{instance_index}}" }} }}
ready = {{ path = "/", timeout = "3s" }}
request = {{ path = "/", caller_header = "x-caller" }}
[[variants]]
name = "stub"
"#,
            stub.join("stub.py").display()
        ),
    )
    .unwrap();
    dir
}

/// The outage scenario's population against the stub target, with these phases.
pub(crate) fn stub_scenario_text(phases: &str) -> String {
    std::fs::read_to_string(fixture_path("outage.toml"))
        .unwrap()
        .split("[[targets]]")
        .next()
        .unwrap()
        .to_owned()
        + "[[targets]]\nname = \"stub\"\n"
        + phases
}

/// A `failmode` process under test, SIGKILLed if the test ends (a failure, say) while it
/// still runs: its children's watchers then stop them, so a failing test leaves nothing.
pub(crate) struct Running(pub(crate) Child);

impl std::ops::Deref for Running {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `failmode run` of a 30-second steady phase against the stub, from the stub's project, its
/// output piped.
pub(crate) fn start_long_stub_run(ws: &Path) -> Running {
    std::fs::create_dir_all(ws.join("failmode/scenarios")).unwrap();
    let text = stub_scenario_text("[[phases]]\nname = \"steady\"\nstart = \"0s\"\nend = \"30s\"\n");
    std::fs::write(ws.join("failmode/scenarios/long.toml"), text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_failmode"))
        .args(["run", "long", "--no-build"])
        .current_dir(ws)
        // The stub workspace has no .tools of its own.
        .env("FAILMODE_TOOLS", workspace().join(".tools"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(Running)
        .unwrap()
}

/// Returns once a stub instance has answered a tenant: the instances are up and the run has
/// counts to keep. (Polls the logs: a child's log is the only event the test can see.)
pub(crate) fn wait_until_a_tenant_is_served(ws: &Path) {
    let deadline = Instant::now() + STARTUP;
    while !instance_logs_contain(&ws.join("results"), "stub: served a tenant") {
        assert!(Instant::now() < deadline, "no tenant was served");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: i32,
    pub(crate) parent: i32,
    pub(crate) group: i32,
    /// `Z` for a zombie: dead, waiting for a parent (or init) to reap it.
    pub(crate) state: char,
    pub(crate) name: String,
}

/// Every process on the machine.
pub(crate) fn processes() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The name is in parentheses and may hold spaces and parentheses itself.
            let open = stat.find('(')?;
            let close = stat.rfind(')')?;
            let mut rest = stat[close + 1..].split_whitespace();
            let state = rest.next()?.chars().next()?;
            let parent = rest.next()?.parse().ok()?;
            let group = rest.next()?.parse().ok()?;
            Some(Proc {
                pid,
                parent,
                group,
                state,
                name: stat[open + 1..close].to_owned(),
            })
        })
        .collect()
}

/// `root`'s children, their children and so on.
pub(crate) fn descendants(root: i32) -> Vec<Proc> {
    let all = processes();
    let mut found: Vec<Proc> = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for p in all.iter().filter(|p| p.parent == parent) {
            parents.push(p.pid);
            found.push(p.clone());
        }
    }
    found
}

/// The processes still running (not zombies) that are among `pids` or in one of `groups`.
pub(crate) fn survivors(pids: &[i32], groups: &[i32]) -> Vec<Proc> {
    processes()
        .into_iter()
        .filter(|p| p.state != 'Z' && (pids.contains(&p.pid) || groups.contains(&p.group)))
        .collect()
}
