//! `failmode setup`: installs what every run needs and is missing, and says what it does:
//! `redis-server` (Debian's package, as `just setup` does in failmode's checkout) and
//! `toxiproxy-server` (built with `go install` at the pinned version into failmode's tools
//! folder, [`tools_bin`]). Both are then found there or on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::infra::programs::{TOXIPROXY_MODULE, TOXIPROXY_VERSION};
use crate::infra::{install_hint, is_executable, locate, tools_bin};

#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// Only say what is found and what is missing (exit 1 when something is); install
    /// nothing.
    #[arg(long)]
    pub check: bool,
}

/// Installs what is missing; `Ok(false)` when `--check` found something missing.
pub fn setup(args: &SetupArgs) -> anyhow::Result<bool> {
    let mut complete = true;
    for program in ["redis-server", "toxiproxy-server"] {
        if let Some(found) = locate(program) {
            say(&format!(
                "{program} found: {} ({})",
                found.display(),
                version_of(&found)
            ));
            continue;
        }
        if args.check {
            say(&format!("{program} is missing; {}", install_hint(program)));
            complete = false;
            continue;
        }
        let installed = match program {
            "redis-server" => install_redis()?,
            _ => install_toxiproxy()?,
        };
        say(&format!(
            "installed {} ({})",
            installed.display(),
            version_of(&installed)
        ));
    }
    Ok(complete)
}

fn say(line: &str) {
    println!("setup: {line}");
}

/// The first line a program prints for `--version` (`-version` for Toxiproxy).
fn version_of(program: &Path) -> String {
    let flag = if program.ends_with("toxiproxy-server") {
        "-version"
    } else {
        "--version"
    };
    Command::new(program)
        .arg(flag)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "version unknown".to_owned())
}

/// Runs a command with its output on the terminal; an error names it.
fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> anyhow::Result<()> {
    let line = std::iter::once(program)
        .chain(args.iter().copied())
        .map(|a| {
            if a.contains(' ') {
                format!("\"{a}\"")
            } else {
                a.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    say(&format!("running: {line}"));
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {line}: {e}"))?;
    if !status.success() {
        anyhow::bail!("{line} failed ({status})");
    }
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Debian's redis-server package; its system-wide server on 6379 is stopped (failmode starts
/// its own on free ports).
fn install_redis() -> anyhow::Result<PathBuf> {
    if locate("apt-get").is_none() {
        anyhow::bail!(
            "redis-server is missing and this system has no apt-get: install Redis 7 with its \
             package manager (brew install redis, dnf install redis, …) so that redis-server is \
             on PATH, then run `failmode setup` again"
        );
    }
    say("redis-server is missing; installing Debian's redis-server package");
    let sudo = !is_root();
    let apt = |args: &[&str]| -> anyhow::Result<()> {
        let env = [("DEBIAN_FRONTEND", "noninteractive")];
        if sudo {
            let mut with = vec!["DEBIAN_FRONTEND=noninteractive", "apt-get"];
            with.extend_from_slice(args);
            run("sudo", &with, &[])
        } else {
            run("apt-get", args, &env)
        }
    };
    apt(&["update", "-qq"])?;
    apt(&[
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "redis-server",
    ])?;
    if locate("systemctl").is_some() {
        let mut stop = vec!["systemctl", "disable", "--now", "redis-server"];
        if sudo {
            stop.insert(0, "sudo");
        }
        // No systemd running (a container) is fine: nothing was started.
        let _ = Command::new(stop[0]).args(&stop[1..]).output();
    }
    locate("redis-server")
        .ok_or_else(|| anyhow::anyhow!("redis-server is still not on PATH after the install"))
}

/// Toxiproxy's server built from source at the pinned version, its version stamped in as its
/// release builds do (else it reports "git"), into the tools folder.
fn install_toxiproxy() -> anyhow::Result<PathBuf> {
    let Some(bin) = tools_bin() else {
        anyhow::bail!(
            "toxiproxy-server is missing and there is no tools folder (neither $XDG_CACHE_HOME \
             nor $HOME is set): put toxiproxy-server {TOXIPROXY_VERSION} on PATH"
        );
    };
    let go = locate("go")
        .or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| is_executable(p)));
    let Some(go) = go else {
        anyhow::bail!(
            "toxiproxy-server is missing and building it needs Go 1.23 or later, which is not \
             installed: get Go from https://go.dev/dl/ (or apt-get install golang-go) and run \
             `failmode setup` again, or put a toxiproxy-server {TOXIPROXY_VERSION} binary \
             (https://github.com/Shopify/toxiproxy/releases/tag/v{TOXIPROXY_VERSION}) on PATH or \
             at {}",
            bin.join("toxiproxy-server").display()
        );
    };
    let gobin = bin.with_file_name("gobin");
    for dir in [&bin, &gobin] {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    say(&format!(
        "toxiproxy-server is missing; building {TOXIPROXY_MODULE}/cmd/server@v{TOXIPROXY_VERSION} \
         into {}",
        bin.join("toxiproxy-server").display()
    ));
    let ldflags = format!("-s -w -X {TOXIPROXY_MODULE}.Version={TOXIPROXY_VERSION}");
    let package = format!("{TOXIPROXY_MODULE}/cmd/server@v{TOXIPROXY_VERSION}");
    let gobin_text = gobin.to_string_lossy().into_owned();
    run(
        &go.to_string_lossy(),
        &["install", "-ldflags", &ldflags, &package],
        &[("GOBIN", &gobin_text)],
    )?;
    // `go install` names the binary after its package's folder: cmd/server → server.
    let target = bin.join("toxiproxy-server");
    std::fs::rename(gobin.join("server"), &target).map_err(|e| {
        anyhow::anyhow!("cannot move the built server to {}: {e}", target.display())
    })?;
    Ok(target)
}
