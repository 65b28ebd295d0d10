#!/usr/bin/env bash
# Install / check what building and testing ringlog needs on Debian 12.
#
#   scripts/install-deps.sh           install what is missing, then check the memlock limit
#   source scripts/install-deps.sh    only define the functions below (runs nothing and does
#                                     not change the caller's shell options), then call:
#       ringlog_install_deps          apt-get install what is missing; check the Rust toolchain
#       ringlog_raise_memlock [KIB]   raise RLIMIT_MEMLOCK in *this* shell (default minimum
#                                     512 KiB, what glommio needs); returns 1 if it stays below
#
# The memlock limit is a per-process resource limit inherited by children, so it can only
# be raised for cargo/tests in the shell that starts them: scripts/test.sh sources this file
# and calls ringlog_raise_memlock. Running this file as a command only reports the limit.
#
# Idempotent and fast when everything is present (no `apt-get update`; that only runs when
# a package has to be installed). Needs root or sudo only when installing.
#
# Also pip-installs the Python packages of the client tests (RINGLOG_PIP_DEPS below) into the
# `python3` on PATH when one of them cannot be imported.
#
# Env: RINGLOG_EXTRA_APT_PKGS  extra apt packages to install, space separated. Planned:
#        etcd-server  (not yet)

# Apt packages always required, as "command:package" (command checked with `command -v`).
RINGLOG_APT_DEPS=(
  "fio:fio"              # raw device benchmark (scripts/bench/bench-raw-device.sh)
  "cc:gcc"               # linker for rustc, C parts of crates
  "git:git"
  "java:default-jdk-headless" # Kafka 4.x jars (interop tests), Java 17 on Debian 12
  "mvn:maven"            # scripts/kafka/fetch-kafka.sh
  "python3:python3"      # bench-raw-device.sh parses fio JSON
  "mkfs.ext4:e2fsprogs"  # iouring-log io_failure test: a small loop-mounted ext4
  "losetup:mount"        # mount -o loop for the same test
  "flock:util-linux"     # scripts/kafka/fetch-kafka.sh
  "kcat:kcat"            # tests/clients/interop/test_kcat.py, scripts/bench/bench-broker.sh
  "pip3:python3-pip"     # the pip step below (Debian's python3 comes without pip)
  "protoc:protobuf-compiler" # etcd-client's build script compiles etcd's .proto files
  "etcd:etcd-server"     # cluster metadata store (node/tests/etcd_*.rs, scripts/cluster.sh)
  "etcdctl:etcd-client"  # inspecting a cluster's metadata by hand
  "promtool:prometheus"  # tests/clients/single_node/test_metrics.py: a real Prometheus scrapes the endpoint
  "curl:curl"            # scripts/librdkafka/fetch-librdkafka-tests.sh (librdkafka's own test suite)
  "make:make"            # the same: building librdkafka and its test runner
  "g++:g++"              # the same (its C++ test parts)
)

# Packages without a command of their own, checked with dpkg.
RINGLOG_APT_PKGS=(
  libprotobuf-dev # google/protobuf/*.proto that etcd's .proto files import (protobuf-compiler
                  # only recommends it, and recommends are not installed here)
  zlib1g-dev      # librdkafka's test build (scripts/librdkafka/fetch-librdkafka-tests.sh)
)

# Python packages for tests/clients (pytest, the Kafka clients, kafka-python's optional codecs),
# as "module:requirement": the requirement is pip-installed when the module cannot be imported.
RINGLOG_PIP_DEPS=(
  "pytest:pytest"
  "confluent_kafka:confluent-kafka>=2.16"
  "kafka:kafka-python>=3.0.12"
  "lz4:lz4"                   # kafka-python lz4 codec
  "snappy:python-snappy"      # kafka-python snappy codec (python-snappy 0.7 runs on cramjam)
  "zstandard:zstandard"       # kafka-python zstd codec
  "cryptography:cryptography" # test certificates (CA, broker, clients, expired) for TLS tests
)

_rl_log() { echo "install-deps: $*" >&2; }

# Runs a command as root (directly or through sudo).
_rl_as_root() {
  if [[ "$(id -u)" == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    _rl_log "error: need root (or sudo) to run: $*"
    return 1
  fi
}

_rl_pkg_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

ringlog_install_deps() {
  local entry cmd pkg missing=()
  for entry in "${RINGLOG_APT_DEPS[@]}"; do
    cmd="${entry%%:*}" pkg="${entry#*:}"
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  done
  for pkg in "${RINGLOG_APT_PKGS[@]}" ${RINGLOG_EXTRA_APT_PKGS:-}; do
    _rl_pkg_installed "$pkg" || missing+=("$pkg")
  done

  if (( ${#missing[@]} > 0 )); then
    _rl_log "installing: ${missing[*]}"
    command -v apt-get >/dev/null 2>&1 || { _rl_log "error: apt-get not found; install ${missing[*]} by hand"; return 1; }
    _rl_as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -qq update >&2 \
      || { _rl_log "error: apt-get update failed"; return 1; }
    _rl_as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -y -q \
      install --no-install-recommends "${missing[@]}" >&2 \
      || { _rl_log "error: apt-get install ${missing[*]} failed"; return 1; }
  fi

  ringlog_install_pip_deps || return 1

  # Java: Kafka 4.x needs 17+.
  local jv
  jv="$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n1)"
  if [[ -z "$jv" || "$jv" -lt 17 ]]; then
    _rl_log "error: 'java' on PATH is version '${jv:-unknown}', Kafka 4.x needs 17+ (update-alternatives --config java)"
    return 1
  fi

  # Rust toolchain (rustup-managed; not installed from apt).
  if ! command -v cargo >/dev/null 2>&1 && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck disable=SC1091
    source "$HOME/.cargo/env"
  fi
  command -v cargo >/dev/null 2>&1 || { _rl_log "error: cargo not found (install rustup: https://rustup.rs)"; return 1; }
  if command -v rustup >/dev/null 2>&1; then
    local installed comp add=()
    installed="$(rustup component list --installed 2>/dev/null || true)"
    for comp in rustfmt clippy; do
      grep -q "^$comp" <<<"$installed" || add+=("$comp")
    done
    if (( ${#add[@]} > 0 )); then
      _rl_log "adding rustup components: ${add[*]}"
      rustup component add "${add[@]}" >&2 || { _rl_log "error: rustup component add ${add[*]} failed"; return 1; }
    fi
  fi
  return 0
}

# pip-installs the RINGLOG_PIP_DEPS whose module `python3` cannot import.
ringlog_install_pip_deps() {
  local entry mod req missing=() extra=()
  for entry in "${RINGLOG_PIP_DEPS[@]}"; do
    mod="${entry%%:*}" req="${entry#*:}"
    python3 -c "import $mod" >/dev/null 2>&1 || missing+=("$req")
  done
  (( ${#missing[@]} > 0 )) || return 0
  _rl_log "pip installing: ${missing[*]}"
  # Debian's own python3 is "externally managed" (PEP 668): pip refuses without this flag.
  if python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    extra+=(--break-system-packages)
  fi
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check "${extra[@]}" "${missing[@]}" >&2 \
    || { _rl_log "error: pip install ${missing[*]} failed"; return 1; }
}

# ringlog_raise_memlock [MIN_KIB]: raise the soft (and if allowed hard) RLIMIT_MEMLOCK of
# the current shell: unlimited, else 1 GiB, else the hard limit. Fails if it stays below
# MIN_KIB (default 512 KiB). Units are KiB, as in `ulimit -l`.
ringlog_raise_memlock() {
  local min_kib="${1:-512}" cur hard
  cur="$(ulimit -S -l)"
  if [[ "$cur" != unlimited ]]; then
    ulimit -l unlimited 2>/dev/null \
      || { (( cur < 1048576 )) && ulimit -S -l 1048576 2>/dev/null; } \
      || { hard="$(ulimit -H -l)"; [[ "$hard" == unlimited ]] || (( hard > cur )) && ulimit -S -l "$hard" 2>/dev/null; } \
      || true
    cur="$(ulimit -S -l)"
  fi
  if [[ "$cur" != unlimited ]] && (( cur < min_kib )); then
    _rl_log "error: max locked memory (ulimit -l) is $cur KiB and cannot be raised (hard limit $(ulimit -H -l)); glommio needs >= $min_kib KiB."
    _rl_log "       Fix: raise the hard limit (needs CAP_SYS_RESOURCE), e.g. 'memlock' in /etc/security/limits.conf / systemd LimitMEMLOCK / docker --ulimit memlock=-1."
    return 1
  fi
  _rl_log "max locked memory: $cur$([[ "$cur" == unlimited ]] || echo ' KiB') (need >= $min_kib KiB)"
  return 0
}

# Executed (not sourced): install, then report the memlock limit of this process.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  ringlog_install_deps
  if ! ringlog_raise_memlock 512; then
    exit 1
  fi
  _rl_log "ok. Note: the memlock limit only changes for processes started by the shell that"
  _rl_log "raised it: 'source scripts/install-deps.sh && ringlog_raise_memlock' (scripts/test.sh does this)."
fi
