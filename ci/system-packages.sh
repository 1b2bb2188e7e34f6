#!/usr/bin/env bash
# The Debian packages sleuth's live parts use, installed once (`make system`; `make demo`
# and .ci/run call it): PostgreSQL (the external target, the source node's upstream, psql),
# MariaDB (the second external target: sleuth starts its own mariadbd, never the Debian
# service), galera-4 and rsync (the Galera target's provider and its state transfers),
# etcd-server (sleuth starts its own etcd members, never the service), faketime
# (libfaketime: the clock nemesis on a described database with clock = "faketime"),
# Chromium (reports opened headless), debootstrap (the docker node image), iptables (the
# partition nemesis on the loopback), Java 17 (Spark). Nothing is fetched
# when every package is there already. Runs apt-get as root, else through sudo.
set -euo pipefail
PACKAGES=(postgresql postgresql-client mariadb-server galera-4 rsync etcd-server faketime chromium debootstrap iptables)
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "ci/system-packages.sh: needs root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
fi
echo "installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
