#!/usr/bin/env bash
# Installs what building push-worker needs on Debian 12, skipping what is present.
# With --test, also what the tests use: redis-server, kcat, curl, python3-confluent-kafka (the fault-injection
# ledger's independent Kafka client), strace (which addresses a worker connects to), binutils (nm: the
# symbols of the production binary), prometheus (promtool checks the chart's alerting rules; the server it
# brings along is stopped and disabled), python3-yaml, jsonschema, helm-sdkpy.
# With --demo, redis-server (the demo's retry queue, where a cancel stops a retrying call).
# With --bench, what scripts/bench.sh uses: nginx with the echo module, h2load, redis-server.
set -euo pipefail
packages=(librdkafka-dev libhiredis-dev libcurl4-openssl-dev libnghttp2-dev libssl-dev libjemalloc-dev pkg-config)
if [ "${1:-}" = --demo ]; then packages+=(redis-server); fi
if [ "${1:-}" = --test ]; then packages+=(redis-server kcat curl python3 python3-confluent-kafka python3-yaml strace binutils prometheus); fi
if [ "${1:-}" = --bench ]; then packages+=(redis-server curl python3 openssl nginx-light libnginx-mod-http-echo nghttp2-client); fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
        $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi
if [ "${1:-}" = --demo ]; then packages+=(redis-server); fi
if [ "${1:-}" = --test ]; then
    python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install --quiet jsonschema
    # Helm's own lint, from PyPI (Helm is not packaged in Debian); the wheel declares
    # Python 3.12 but runs on 3.11.
    python3 -c 'import helm_sdkpy' 2>/dev/null || python3 -m pip install --quiet --ignore-requires-python helm-sdkpy
fi
if ! command -v swift >/dev/null; then
    echo "swift not found: install the Swift 6 toolchain (this machine kind has it in /opt/swift/usr/bin)" >&2
    exit 1
fi
