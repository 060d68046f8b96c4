#!/usr/bin/env bash
# Installs what building push-worker needs on a stock Debian 12, skipping what is present. Only the Swift
# toolchain must be there already.
#
#   (no option)  the C libraries the worker links
#   --test       also what the tests use: redis-server, kcat, curl, strace (which addresses a worker
#                connects to), binutils (nm: the symbols of the production binary), prometheus (promtool
#                checks the chart's alerting rules), and Python modules from Debian's packages
#                (python3-yaml, python3-jsonschema, python3-confluent-kafka: the fault ledger's independent
#                Kafka client). helm-sdkpy (Helm's own lint), which only PyPI has, goes into a virtual
#                environment this script makes in .venv/ (git ignores it); make test puts .venv/bin first in
#                PATH. Nothing is ever installed into the system Python (PEP 668).
#   --demo       also redis-server (the demo's retry queue)
#   --bench      also nginx with the echo module, h2load, redis-server
#
# The redis-server and prometheus services that installing those packages starts are stopped and disabled:
# every test starts the servers it needs itself, on ports of its own.
# Without root and without sudo, it installs nothing and prints the one command that would.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

if ! command -v swift >/dev/null; then
    echo "install-deps: swift not found in PATH. Install the Swift 6 toolchain (https://www.swift.org/install/linux/debian/12/)" \
        "and put its usr/bin in PATH; the development machines have it in /opt/swift/usr/bin." >&2
    exit 1
fi

packages=(librdkafka-dev libhiredis-dev libcurl4-openssl-dev libnghttp2-dev libssl-dev libjemalloc-dev pkg-config git)
case "$mode" in
    "") ;;
    --demo) packages+=(redis-server) ;;
    --test)
        packages+=(redis-server kcat curl strace binutils prometheus squid
            python3 python3-venv python3-yaml python3-jsonschema python3-confluent-kafka) ;;
    --bench) packages+=(redis-server curl python3 openssl nginx-light libnginx-mod-http-echo nghttp2-client) ;;
    *) echo "usage: $0 [--test|--demo|--bench]" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        echo "install-deps: these Debian packages are missing, and installing them needs root:" >&2
        echo "    sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
    echo "installing: ${missing[*]}"
    "${as_root[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
    # The services these packages start would hold 6379 and 9090 and run after the tests: the tests start
    # their own servers.
    for service in redis-server prometheus prometheus-node-exporter; do
        if [ -d /run/systemd/system ]; then
            "${as_root[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
        elif [ -x "/etc/init.d/$service" ]; then
            "${as_root[@]}" /etc/init.d/"$service" stop >/dev/null 2>&1 || true
            "${as_root[@]}" update-rc.d "$service" disable >/dev/null 2>&1 || true
        fi
    done
fi

if [ "$mode" = --test ]; then
    # The one module only PyPI has, in a virtual environment that also sees Debian's python3-* modules.
    venv=.venv
    if ! "$venv/bin/python3" -c 'import helm_sdkpy, yaml, jsonschema' 2>/dev/null; then
        rm -rf "$venv"
        /usr/bin/python3 -m venv --system-site-packages "$venv"
        # Helm's lint (Helm is not packaged in Debian); the wheel declares Python 3.12 but runs on 3.11.
        "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --ignore-requires-python helm-sdkpy
    fi
fi
