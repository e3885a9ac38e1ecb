#!/bin/sh
# Installs every Debian package loft needs to build, test and run.
# Idempotent: packages already present are left alone. Run as root
# (or with sudo) on Debian 12.
set -eu

PACKAGES="
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang-format ccache
  clang libclang-rt-14-dev
  libprotobuf-dev protobuf-compiler
  libzmq3-dev cppzmq-dev libsodium-dev
  librocksdb-dev zlib1g-dev libturbojpeg0-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libboost-dev libboost-system-dev
  libopenblas-dev
  catch2 libbenchmark-dev
  dataset-fashion-mnist
  python3 python3-matplotlib python3-numpy python3-torch python3-setuptools python3-yaml python3-pip
  iproute2 procps
  coinor-libclp-dev
"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
