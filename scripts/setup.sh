#!/usr/bin/env bash
# Sets up everything Jumpgate needs on a Debian machine, idempotently: system packages (the C
# toolchain, simdjson, libsnappy), a virtualenv in .venv with the project and its test tools, and the
# software NCAs' precompiled runtime. Safe to run again; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential g++ make pkg-config libsimdjson-dev libsnappy-dev python3 python3-venv python3-dev)
# DPDK for the UDP transport (docs/udp-transport.md, "DPDK"), and iproute2 for the network namespaces
# its tests and benchmark create. libdpdk-dev brings some 220 packages (26 MB to download, 157 MB
# installed, about 85 s on a 2-core machine), linked only into NCAs that JUMPGATE_DPDK names.
# JUMPGATE_WITH_DPDK=0 leaves them out; the DPDK tests and benchmark cases then say they were skipped.
if [ "${JUMPGATE_WITH_DPDK:-1}" != "0" ]; then APT_PACKAGES+=(libdpdk-dev iproute2); fi
# OpenSSH's server for the tests of SSH nodes (docs/deploy.md): each test starts its own sshd with
# its own config and keys on a loopback address; nothing is started by installing it here.
APT_PACKAGES+=(openssh-server)
# A real browser for the test of the web pages (sign-in, a tenant's jobs, a job's pipeline):
# Debian's chromium and its WebDriver, driven headless by selenium.
APT_PACKAGES+=(chromium chromium-driver)

# Install the Debian packages among "$@" that are missing (one apt run for all of them).
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "setup: installing ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
apt_install "${APT_PACKAGES[@]}"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.jumpgate-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] 2>/dev/null; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi

# Build the NCA runtime once now, so the first job does not pay for it.
.venv/bin/python -c "from jumpgate.ncas.software.build import ensure_runtime; from jumpgate.runtime.service import default_cache_dir; ensure_runtime(default_cache_dir())"
# The ORC and Parquet scan drivers link Arrow C++ from the pyarrow wheel (headers and libraries; no
# apt package): build them now too. Without a usable pyarrow the other NCAs still work.
.venv/bin/python -c "from jumpgate.ncas.software.build import ensure_arrow_drivers, ensure_runtime; from jumpgate.runtime.service import default_cache_dir; ensure_arrow_drivers(ensure_runtime(default_cache_dir()))" \
  || echo "setup: the ORC/Parquet scans are unavailable (see the error above)"

# --- Spark client (clients/spark, tests/spark) ---------------------------------------------------
# The plugin is built with Maven (plugins from Maven Central) against the jars of the venv's pyspark
# (the `spark` extra, part of `dev`), and tests/spark runs it in a local Spark: Java 17 and Maven.
# build.sh first builds and installs clients/jvm-core (shared with the Trino connector) into ~/.m2.
apt_install openjdk-17-jdk-headless maven
bash clients/spark/build.sh   # skips when the jar is newer than its sources (and jvm-core's)
# --- end of the Spark client's block -------------------------------------------------------------

# --- Kubernetes test cluster (jumpgate/deploy/kube_fixture.py, tests/e2e/test_kube_cluster.py) ------
# A real kube-apiserver and kube-controller-manager (v1.36.3), built from the Go module proxy by
# scripts/kube-build.sh into ${JUMPGATE_KUBE_CACHE:-/var/cache/jumpgate/kube/v1.36.3}/bin (several
# minutes on 2 cores the first time, nothing when built), over Debian's etcd. JUMPGATE_WITH_KUBE=0
# leaves it out; when the build fails, setup goes on and the Kubernetes tests say they were skipped.
if [ "${JUMPGATE_WITH_KUBE:-1}" != "0" ]; then
  apt_install etcd-server openssl
  bash scripts/kube-build.sh \
    || echo "setup: no Kubernetes test cluster: building kube-apiserver failed (see above); its tests will be skipped"
fi
# --- end of the Kubernetes block -----------------------------------------------------------------

# --- Trino (Presto) client (clients/presto, tests/presto) -------------------------------------------
# A real Trino 476 server for the connector's tests and benchmark: io.trino:trino-server:476 from
# Maven Central (~783 MiB), unpacked by scripts/trino-install.sh into
# ${JUMPGATE_TRINO_CACHE:-/var/cache/jumpgate/trino/476} (nothing when present), run on the machine's
# Temurin 25 JDK (/usr/lib/jvm/temurin-25-jdk-amd64; Trino 476 needs Java 24+); then the connector's
# plugin folder is built (clients/presto/build.sh, Maven). JUMPGATE_WITH_TRINO=0 leaves it out; when
# either step fails, setup goes on and the Trino tests say they were skipped and why.
if [ "${JUMPGATE_WITH_TRINO:-1}" != "0" ]; then
  apt_install maven
  bash scripts/trino-install.sh \
    || echo "setup: no Trino server: scripts/trino-install.sh failed (see above); the Trino tests will be skipped"
  bash clients/presto/build.sh \
    || echo "setup: the Trino connector did not build (see above); the Trino tests will fail until it does"
fi
# --- end of the Trino block ----------------------------------------------------------------------

echo "setup: ready (.venv)"
