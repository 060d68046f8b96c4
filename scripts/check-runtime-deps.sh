#!/usr/bin/env bash
# Proves the Dockerfile's runtime stage is complete: every shared library the binary loads
# is either Swift runtime (copied from the builder) or comes from a Debian package that the
# runtime image installs (librdkafka1 libcurl4 libnghttp2-14 libhiredis0.14 libssl3 libjemalloc2 ca-certificates) or
# already has (bookworm-slim ships apt and its dependencies), directly or as a dependency.
# Usage: scripts/check-runtime-deps.sh [path/to/push-worker]
set -euo pipefail
binary=${1:-.build/debug/push-worker}
runtime_packages=$(sed -n 's/^ *librdkafka1 .*$/&/p' "$(dirname "$0")/../Dockerfile" | tr -d '\\' | xargs)
[ -n "$runtime_packages" ] || { echo "runtime package list not found in the Dockerfile" >&2; exit 1; }
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances $runtime_packages apt 2>/dev/null | grep -E '^[a-z0-9]' | sed 's/:.*//' | sort -u)
owner() {
    local path=$1 candidate
    for candidate in "$path" "${path/#\/lib\//\/usr\/lib\/}" "$(readlink -f "$path")" "$(readlink -f "$path" | sed 's#^/lib/#/usr/lib/#')"; do
        dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
    return 1
}
missing=0
swift_runtime=0
while read -r library; do
    case "$library" in
        */swift/linux/*) swift_runtime=$((swift_runtime + 1)); continue ;;
    esac
    package=$(owner "$library") || { echo "no Debian package owns $library" >&2; missing=1; continue; }
    if ! grep -qx "$package" <<<"$closure"; then
        echo "$library comes from $package, which the runtime image does not install" >&2
        missing=1
    fi
done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
if ldd "$binary" | grep -q "not found"; then
    echo "unresolved libraries: $(ldd "$binary" | grep 'not found')" >&2
    missing=1
fi
# jemalloc serves the binary and starts with the options built into it (Sources/CJemallocOptions): at exit,
# stats_print lists each option in force as `opt.<name>: <value>`.
built_in=$(sed -n 's/^const char \*malloc_conf = "\(.*\)";$/\1/p' "$(dirname "$0")/../Sources/CJemallocOptions/CJemallocOptions.c")
[ -n "$built_in" ] || { echo "malloc_conf not found in Sources/CJemallocOptions/CJemallocOptions.c" >&2; exit 1; }
in_force=$(MALLOC_CONF=stats_print:true "$binary" --version 2>&1 >/dev/null || true)
for option in ${built_in//,/ }; do
    if ! grep -qE "^ +opt\.${option%%:*}: ${option#*:}( |$)" <<<"$in_force"; then
        echo "jemalloc does not start with $option in $binary (is it linked, and CJemallocOptions with it?)" >&2
        missing=1
    fi
done
[ "$missing" -eq 0 ] || exit 1
echo "runtime deps: complete ($swift_runtime Swift runtime libraries copied; the rest from: $runtime_packages); jemalloc starts with $built_in"
