#!/usr/bin/env bash
# libFuzzer (swiftc -sanitize=fuzzer,address) over the job decoder and the provider
# response classifiers. Builds the few modules they need straight with swiftc into
# .build-fuzz/ (no SwiftPM: instrumenting swift-nio and BoringSSL would cost a cold
# 15-minute build) and runs each target for the given seconds against its committed
# corpus (fuzz/corpus/<target>/); new interesting inputs go to .build-fuzz/new-<target>/
# (copy the good ones into the corpus by hand: `<fuzzer> -merge=1 fuzz/corpus/<t> .build-fuzz/new-<t>`).
# Usage: scripts/fuzz.sh [seconds per target, default 30] [target…]   targets: job-decoder responses
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/opt/swift/usr/bin SWIFT_BACKTRACE=enable=no
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(job-decoder responses)
out=.build-fuzz
mkdir -p "$out"
flags=(-sanitize=fuzzer,address -parse-as-library -Onone -I "$out")
module() {  # name sources…: an instrumented object and its .swiftmodule
    local name=$1
    shift
    swiftc "${flags[@]}" -wmo -module-name "$name" -emit-library -static -emit-module -emit-module-path "$out/$name.swiftmodule" \
        "$@" -o "$out/lib$name.a"
}
module PushCore Sources/PushCore/*.swift
module PushHTTP Sources/PushHTTP/HTTPTransport.swift Sources/PushHTTP/HTTPDelivery.swift Sources/PushHTTP/RetryAfter.swift
build() {  # target sources… libraries…
    local target=$1
    shift
    swiftc "${flags[@]}" -module-name "Fuzz_${target//-/_}" "$@" -o "$out/fuzz-$target" 2>&1 | grep -v 'ld.gold: warning' || true
    [ -x "$out/fuzz-$target" ] || { echo "fuzz: building $target failed" >&2; exit 1; }
}
for target in "${targets[@]}"; do
    case $target in
        job-decoder) build job-decoder fuzz/targets/JobDecoderFuzz.swift "$out/libPushCore.a" ;;
        responses) build responses fuzz/targets/ResponseFuzz.swift Plugins/APNs/APNsResponse.swift Plugins/FCM/FCMResponse.swift \
            "$out/libPushHTTP.a" "$out/libPushCore.a" ;;
        *) echo "fuzz: unknown target $target" >&2; exit 2 ;;
    esac
    mkdir -p "$out/new-$target" "fuzz/corpus/$target"
    echo "fuzz: $target for ${seconds} s"
    ASAN_OPTIONS=detect_leaks=0 "$out/fuzz-$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
        -artifact_prefix="$out/crash-$target-" -print_final_stats=1 "$out/new-$target" "fuzz/corpus/$target" 2>&1 \
        | grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY|Done)' || true
    if ls "$out"/crash-"$target"-* >/dev/null 2>&1; then
        echo "fuzz: FAIL: $target crashed, inputs in $out/crash-$target-*" >&2
        exit 1
    fi
done
echo "fuzz: PASS (${targets[*]}, ${seconds} s each)"
