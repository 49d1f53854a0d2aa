#!/usr/bin/env bash
# Debian packages Quire needs: a Java runtime for PySpark, python3-venv for the virtual
# environment, kcat for the Kafka listener's tests and chromium for the console's; with --bench also wrk (the HTTP load generator of `make bench`) and nats-server
# (the replicated peer `make bench-replication` starts as a cluster of three). Installs only
# what is missing; does nothing on a machine that has them.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# kcat (librdkafka's command-line client): the Kafka listener's tests drive it as a real client
command -v kcat >/dev/null 2>&1 || need+=(kcat)
# chromium: the console's browser tests (tests/console) drive Debian's build through Playwright,
# which then downloads no browser of its own
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ "${1:-}" = "--bench" ]; then
  command -v wrk >/dev/null 2>&1 || need+=(wrk)
  command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need+=(nats-server)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
