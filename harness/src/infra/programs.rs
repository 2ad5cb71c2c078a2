//! Finding the programs a run starts (redis-server, toxiproxy-server, the reference), in the
//! tools folders and on `PATH`; failmode's own checkout when run inside it; and, when a
//! program is missing, exactly how to get it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Finds an executable: in [`tool_dirs`], then on `PATH`.
pub fn locate(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH");
    let path_dirs = path.iter().flat_map(std::env::split_paths);
    tool_dirs()
        .into_iter()
        .chain(path_dirs)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Where failmode looks for the programs it starts before `PATH`: `$FAILMODE_TOOLS/bin`, the
/// `.tools/bin` of failmode's checkout when run inside it (where `just setup` installs), and
/// [`tools_bin`] (where `failmode setup` installs).
pub fn tool_dirs() -> Vec<PathBuf> {
    let env = std::env::var_os("FAILMODE_TOOLS").map(|dir| PathBuf::from(dir).join("bin"));
    let checkout = std::env::current_dir()
        .ok()
        .and_then(|cwd| checkout_above(&cwd))
        .map(|root| root.join(".tools").join("bin"));
    env.into_iter().chain(checkout).chain(tools_bin()).collect()
}

/// The tools folder `failmode setup` installs into, shared by every project of this user:
/// `$XDG_CACHE_HOME/failmode/bin`, else `~/.cache/failmode/bin`. `None` without a home.
pub fn tools_bin() -> Option<PathBuf> {
    Some(cache_dir()?.join("bin"))
}

/// failmode's folder in the user's cache: `$XDG_CACHE_HOME/failmode`, else
/// `~/.cache/failmode`. `None` without a home.
pub fn cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let cache =
        absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("failmode"))
}

/// Whether `dir` is failmode's own checkout: its `Cargo.toml` declares a `[workspace]` whose
/// members include `harness`.
pub fn is_checkout(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return false;
    };
    let Ok(toml) = text.parse::<toml::Table>() else {
        return false;
    };
    toml.get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(toml::Value::as_array)
        .is_some_and(|members| members.iter().any(|m| m.as_str() == Some("harness")))
}

/// The nearest of `start` and its ancestors that is failmode's checkout.
pub fn checkout_above(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| is_checkout(d))
        .map(Path::to_owned)
}

/// failmode's checkout around the current directory; the current directory when there is
/// none. (No path compiled into the binary: an installed failmode knows no checkout.)
pub fn workspace_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    checkout_above(&cwd).unwrap_or(cwd)
}

/// Whether `path` is a file this user may execute.
pub fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// A bare name is looked up with [`locate`]; anything with a `/` is taken as a path.
pub(crate) fn resolve(program: &Path) -> Result<PathBuf, Missing> {
    let as_text = program.to_string_lossy();
    if program.components().count() > 1 {
        return if is_executable(program) {
            Ok(program.to_owned())
        } else {
            Err(missing_binary(&as_text))
        };
    }
    locate(&as_text).ok_or_else(|| missing_binary(&as_text))
}

/// A program failmode needs and did not find (an `InfraError::MissingBinary` to its callers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub program: String,
    /// How to install it, for the tools failmode knows.
    pub hint: String,
}

/// [`Missing`], with a hint saying how to install the tools failmode knows.
pub(crate) fn missing_binary(program: &str) -> Missing {
    Missing {
        program: program.to_owned(),
        hint: install_hint(program),
    }
}

/// The Toxiproxy failmode is measured with, and `failmode setup` installs: the image's tag.
pub const TOXIPROXY_VERSION: &str = super::images::TOXIPROXY_TAG;
/// Its Go module; the server is `cmd/server` in it.
pub const TOXIPROXY_MODULE: &str = "github.com/Shopify/toxiproxy/v2";

/// How to get a program failmode starts, said exactly: redis-server, toxiproxy-server,
/// failmode-reference; anything else in general terms.
pub fn install_hint(program: &str) -> String {
    let file_name = Path::new(program)
        .file_name()
        .map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned());
    let tools = tools_bin().map_or_else(
        || "~/.cache/failmode/bin".to_owned(),
        |dir| dir.display().to_string(),
    );
    match file_name.as_str() {
        "redis-server" => "run `failmode setup`: it installs Debian's redis-server package \
             (`sudo apt-get install redis-server`); on other systems install Redis 7 with your \
             package manager (e.g. `brew install redis`) so that redis-server is on PATH. In \
             failmode's checkout `just setup` does the same"
            .to_owned(),
        "toxiproxy-server" => format!(
            "run `failmode setup`: with Go 1.23 or later it runs `go install -ldflags \
             \"-X {TOXIPROXY_MODULE}.Version={TOXIPROXY_VERSION}\" \
             {TOXIPROXY_MODULE}/cmd/server@v{TOXIPROXY_VERSION}` and installs the binary as \
             {tools}/toxiproxy-server; or put toxiproxy-server {TOXIPROXY_VERSION} on PATH \
             (release binaries: https://github.com/Shopify/toxiproxy/releases/tag/v{TOXIPROXY_VERSION}). \
             In failmode's checkout `just setup` installs it into .tools/bin"
        ),
        "failmode-reference" => "the reference limiter is looked for next to the failmode \
             executable, then on PATH, then in failmode's checkout's target/release: install it \
             beside failmode with `cargo install --locked --path targets/reference` from \
             failmode's checkout (as `cargo install --locked --path harness` installed failmode; \
             from git: `cargo install --locked --git <failmode's repository> failmode-reference`), \
             or in the checkout build it with `cargo build --release -p failmode-reference`"
            .to_owned(),
        _ => format!("install it, or put it on PATH or in {tools}/{file_name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_hints_say_how_to_install_known_tools() {
        let Missing { hint, .. } = missing_binary("toxiproxy-server");
        assert!(hint.contains("failmode setup"), "{hint}");
        assert!(hint.contains("just setup"), "{hint}");
        assert!(hint.contains("toxiproxy/v2/cmd/server@v2.12.0"), "{hint}");
        let redis = install_hint("/usr/bin/redis-server");
        assert!(
            redis.contains("failmode setup") && redis.contains("apt-get install redis-server"),
            "{redis}"
        );
        let reference = install_hint("failmode-reference");
        assert!(
            reference.contains("cargo install --locked --path targets/reference"),
            "{reference}"
        );
    }

    #[test]
    fn a_checkout_is_a_workspace_whose_members_include_the_harness() {
        let dir = tempfile::tempdir().unwrap();
        let write = |members: &str| {
            std::fs::write(
                dir.path().join("Cargo.toml"),
                format!("[workspace]\nmembers = [{members}]\n"),
            )
            .unwrap();
        };
        write(r#""app", "lib""#);
        assert!(!is_checkout(dir.path()));
        write(r#""harness", "targets/reference""#);
        assert!(is_checkout(dir.path()));
        let below = dir.path().join("harness/src");
        std::fs::create_dir_all(&below).unwrap();
        assert_eq!(checkout_above(&below).as_deref(), Some(dir.path()));
        assert_eq!(checkout_above(Path::new("/")), None);
    }

    #[test]
    fn workspace_root_is_failmodes_checkout_around_the_tests() {
        let root = workspace_root();
        assert!(is_checkout(&root), "{}", root.display());
    }
}
