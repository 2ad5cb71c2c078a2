//! Hands the locked versions of the crates that decide the target's behaviour to the binary,
//! so its startup line says which limitador and redis-rs it runs (as the Go targets print
//! theirs from the build info), read from Cargo.lock rather than written twice.

use std::fs;

const CRATES: [&str; 4] = ["limitador", "redis", "axum", "tokio"];

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut found = Vec::new();
    let mut name: Option<&str> = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"'));
        } else if let (Some(n), Some(v)) = (name, line.strip_prefix("version = ")) {
            if CRATES.contains(&n) {
                found.push(format!("{n}={}", v.trim_matches('"')));
            }
            name = None;
        }
    }
    println!(
        "cargo:rustc-env=FAILMODE_LOCKED_VERSIONS={}",
        found.join(",")
    );
}
