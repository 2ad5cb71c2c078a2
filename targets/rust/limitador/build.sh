#!/usr/bin/env bash
# The limitador targets' build step: builds .tools/bin/failmode-limitador (git-ignored) with
# `cargo build --release --locked`, only when the sources, Cargo.toml, Cargo.lock, limitador's
# patches, the limitador crate or the Rust version changed since the last build (a digest
# stamped next to the binary, as scripts/setup.sh does for node_modules). Its own cargo
# project, built into its own target/limitador, so the root workspace's build is neither
# touched nor waited for.
#
# First it prepares limitador's source, which the repository does not keep (see
# patches/README.md): limitador-0.14.0.crate from crates.io (or cargo's download cache), its
# sha256 checked against crates.io's, unpacked into target/limitador-src/ (git-ignored) with
# patches/*.patch applied. Cargo.toml's [patch.crates-io] builds that copy. It is redone only
# when the crate's checksum or a patch changed (a stamp beside it).
set -euo pipefail
cd "$(dirname "$0")/../../.."
say() { printf 'limitador build: %s\n' "$*"; }

SRC=targets/rust/limitador
BIN=.tools/bin/failmode-limitador
STAMP=.tools/bin/failmode-limitador.sha256

# The limitador crate the target builds. The sha256 is the `cksum` crates.io's index gives
# limitador 0.14.0 (https://index.crates.io/li/mi/limitador, the checksum cargo checks every
# crate it downloads against). It is written here because Cargo.lock cannot hold it: through
# [patch.crates-io] limitador is a path dependency, locked without source or checksum.
LIMITADOR_VERSION=0.14.0
LIMITADOR_SHA256=77e33de992fdc347850a81f1ed242cc702900a9651a2b5d044d153a2db5e2d1a
LIMITADOR_URL=https://static.crates.io/crates/limitador/limitador-$LIMITADOR_VERSION.crate
# Where it is unpacked and patched: the path Cargo.toml's [patch.crates-io] gives (from
# targets/rust/limitador), under the root target/ (git-ignored, and left out of Docker
# builds by .dockerignore: the image's build stage prepares its own).
LIMITADOR_DIR=target/limitador-src
LIMITADOR_SRC=$LIMITADOR_DIR/limitador-$LIMITADOR_VERSION
LIMITADOR_STAMP=$LIMITADOR_DIR/limitador-$LIMITADOR_VERSION.prepared

if ! command -v cargo >/dev/null 2>&1; then
  say "building this target needs Rust (cargo, 1.88 or later: edition 2024 with let chains), which is not installed; see https://rustup.rs/"
  exit 1
fi
if ! grep -qF "path = \"../../../$LIMITADOR_SRC\"" "$SRC/Cargo.toml"; then
  say "$SRC/Cargo.toml's [patch.crates-io] does not build ../../../$LIMITADOR_SRC, the limitador $LIMITADOR_VERSION this script prepares: change both together"
  exit 1
fi

tmp=
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

sha256() { sha256sum "$1" | cut -d' ' -f1; }

# The patches, in the order they are applied.
patches() { find "$SRC/patches" -type f -name '*.patch' -print0 | LC_ALL=C sort -z; }

# Unpacks the checked crate and applies the patches, unless the copy there was made from the
# same crate and the same patches.
prepare_limitador() {
  local want crate cached candidate got
  want=$({
    echo "limitador-$LIMITADOR_VERSION.crate $LIMITADOR_SHA256"
    patches | xargs -0 -r sha256sum
  } | sha256sum | cut -d' ' -f1)
  if [ -f "$LIMITADOR_SRC/Cargo.toml" ] && [ -f "$LIMITADOR_STAMP" ] &&
    [ "$(cat "$LIMITADOR_STAMP")" = "$want" ]; then
    return 0
  fi
  if ! command -v patch >/dev/null 2>&1; then
    say "applying limitador's patches needs patch(1), which is not installed (Debian: apt-get install patch)"
    exit 1
  fi
  mkdir -p "$LIMITADOR_DIR"
  tmp=$(mktemp -d "$LIMITADOR_DIR/.prepare.XXXXXX")

  # The crate: the one kept from an earlier download, cargo's download cache, or crates.io.
  crate=$LIMITADOR_DIR/limitador-$LIMITADOR_VERSION.crate
  if ! [ -f "$crate" ] || [ "$(sha256 "$crate")" != "$LIMITADOR_SHA256" ]; then
    cached=
    for candidate in "${CARGO_HOME:-${HOME:-}/.cargo}"/registry/cache/*/"limitador-$LIMITADOR_VERSION.crate"; do
      if [ -f "$candidate" ] && [ "$(sha256 "$candidate")" = "$LIMITADOR_SHA256" ]; then
        cached=$candidate
        break
      fi
    done
    if [ -n "$cached" ]; then
      say "limitador $LIMITADOR_VERSION from cargo's cache ($cached)"
      cp -f "$cached" "$tmp/crate"
    else
      say "downloading $LIMITADOR_URL"
      if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 3 -o "$tmp/crate" "$LIMITADOR_URL"
      elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$tmp/crate" "$LIMITADOR_URL"
      else
        say "downloading limitador needs curl or wget, neither is installed (Debian: apt-get install curl)"
        exit 1
      fi
    fi
    got=$(sha256 "$tmp/crate")
    if [ "$got" != "$LIMITADOR_SHA256" ]; then
      say "refusing limitador-$LIMITADOR_VERSION.crate: its sha256 is $got, crates.io's index says $LIMITADOR_SHA256 (LIMITADOR_SHA256 in $SRC/build.sh); nothing was unpacked"
      exit 1
    fi
    mv -f "$tmp/crate" "$crate"
  fi

  # Unpacked with the extraction time as mtime (tar -m), so that cargo, which decides by
  # mtimes for a path dependency, rebuilds limitador whenever its source is prepared anew.
  tar -xzmf "$crate" -C "$tmp" --no-same-owner
  if ! [ -f "$tmp/limitador-$LIMITADOR_VERSION/Cargo.toml" ]; then
    say "$crate does not hold limitador-$LIMITADOR_VERSION/Cargo.toml"
    exit 1
  fi
  local p
  while IFS= read -r -d '' p; do
    say "applying ${p#"$SRC/"}"
    patch -p1 --batch --forward --no-backup-if-mismatch --quiet \
      -d "$tmp/limitador-$LIMITADOR_VERSION" <"$p"
  done < <(patches)
  rm -rf "$LIMITADOR_SRC" "$LIMITADOR_STAMP"
  mv "$tmp/limitador-$LIMITADOR_VERSION" "$LIMITADOR_SRC"
  echo "$want" >"$LIMITADOR_STAMP"
  rm -rf "$tmp"
  tmp=
  say "prepared $LIMITADOR_SRC (crates.io's limitador $LIMITADOR_VERSION, sha256 checked, patched)"
}
prepare_limitador

digest=$({
  rustc --version
  echo "limitador-$LIMITADOR_VERSION.crate $LIMITADOR_SHA256"
  cd "$SRC" && { find Cargo.toml Cargo.lock build.rs src -type f -print0 &&
    find patches -type f -name '*.patch' -print0; } | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -d' ' -f1)
if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ]; then
  say "$BIN is current"
  exit 0
fi
say "cargo build --release --locked --manifest-path $SRC/Cargo.toml ($(rustc --version | cut -d' ' -f2), versions from Cargo.lock)"
cargo build --release --locked --manifest-path "$SRC/Cargo.toml" --target-dir target/limitador
mkdir -p .tools/bin
cp -f target/limitador/release/failmode-limitador "$BIN.tmp"
mv -f "$BIN.tmp" "$BIN"
echo "$digest" >"$STAMP"
say "built $BIN"
