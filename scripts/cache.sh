# shellcheck shell=bash
# Where everything built is cached, outside the clone: sourced (not run) by scripts/test.sh and
# scripts/demo.sh, so that `make test` and `make demo` share one cargo target directory and one
# release binary (a fresh clone's first `make demo` right after `make test` builds nothing).
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
#   CARGO_TARGET_DIR        cargo's target directory (default $cache_root/cargo-target); exported
cache_root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache_root/cargo-target}
