#!/usr/bin/env bash
# libFuzzer (swiftc -sanitize=fuzzer,address) over the code that reads values from outside: the
# job decoder, the provider response classifiers, retry/TTL/circuit arithmetic, the Web Push
# endpoint policy, request header building, Redis URLs and records, payload templates. Builds
# the few modules they need straight with swiftc into .build-fuzz/ (no SwiftPM: instrumenting
# swift-nio and BoringSSL would cost a cold 15-minute build; a module is rebuilt only when one
# of its sources or this script changed). Each target first runs once over its regression
# inputs (fuzz/regressions/<target>/, inputs that crashed it once: any crash fails), then
# fuzzes for the given seconds from its committed corpus (fuzz/corpus/<target>/) with inputs
# up to the 128 KiB job limit; new interesting inputs go to .build-fuzz/new-<target>/ (copy
# the good ones into the corpus by hand: `<fuzzer> -merge=1 fuzz/corpus/<t> .build-fuzz/new-<t>`),
# a crash to .build-fuzz/crash-<target>-* (keep it under fuzz/regressions/<target>/).
# Usage: scripts/fuzz.sh [seconds per target, default 30] [target…]
#   targets (default all): job-decoder responses retry-decisions webpush-proxy-responses
#   endpoint-policy headers redis-url redis-records templates
# Needs libssl-dev and libhiredis-dev; swift-log, swift-metrics and swift-mustache come from .build/checkouts
# or the package mirror in /opt/swift-packages.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/opt/swift/usr/bin SWIFT_BACKTRACE=enable=no
all=(job-decoder responses retry-decisions webpush-proxy-responses endpoint-policy headers redis-url redis-records templates)
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
out=.build-fuzz
mkdir -p "$out"
flags=(-sanitize=fuzzer,address -parse-as-library -Onone -I "$out")
stale() {  # output inputs…: whether output is missing or older than an input or this script
    local output=$1 input
    shift
    [ -e "$output" ] || return 0
    for input in "$@" scripts/fuzz.sh; do [ "$input" -nt "$output" ] && return 0; done
    return 1
}
declare -A built=()
module() {  # name [swiftc flags…] -- sources…: an instrumented static library and its .swiftmodule
    local name=$1 extra=()
    shift
    while [ "$1" != -- ]; do extra+=("$1"); shift; done
    shift
    [ -z "${built[$name]:-}" ] || return 0
    built[$name]=1
    stale "$out/lib$name.a" "$@" || return 0
    echo "fuzz: building module $name"
    rm -f "$out/lib$name.a"
    swiftc "${flags[@]}" "${extra[@]}" -wmo -module-name "$name" -package-name "fuzz_$name" -emit-library -static \
        -emit-module -emit-module-path "$out/$name.swiftmodule" "$@" -o "$out/lib$name.a" 2>&1 | grep -E 'error' || true
    [ -e "$out/lib$name.a" ] || { echo "fuzz: building module $name failed" >&2; exit 1; }
}
dependency() {  # name mirror major: a SwiftPM dependency's checkout (from .build, else its tag from the mirror)
    local name=$1 mirror=$2 major=$3 dir=$out/src/$1 tag
    if [ -d ".build/checkouts/$name/Sources" ]; then echo ".build/checkouts/$name"; return; fi
    if [ ! -d "$dir/Sources" ]; then
        tag=$(git --git-dir="$mirror" tag -l "$major.*" | sort -V | tail -1)
        [ -n "$tag" ] || { echo "fuzz: no checkout of $name and no $major.x tag in $mirror" >&2; exit 1; }
        mkdir -p "$dir"
        git --git-dir="$mirror" archive "$tag" Sources | tar -x -C "$dir"
    fi
    echo "$dir"
}
core() { module PushCore -- Sources/PushCore/*.swift; }
crypto() { core; module PushCrypto -I Sources/COpenSSL -- Sources/PushCrypto/*.swift; }
http() {
    crypto
    module PushHTTP -I Sources/COpenSSL -- Sources/PushHTTP/HTTPTransport.swift Sources/PushHTTP/HTTPDelivery.swift Sources/PushHTTP/RequestDelivery.swift \
        Sources/PushHTTP/RetryAfter.swift Sources/PushHTTP/TLSOptions.swift Sources/PushHTTP/CredentialFile.swift \
        Sources/PushHTTP/EgressProxy.swift Sources/PushHTTP/NoProxyRules.swift fuzz/targets/FuzzTLSOptionsCheck.swift  # in place of TLSOptions+NIOSSL.swift: no TLS stack in the fuzzers
}
logging() {
    local log
    log=$(dependency swift-log /opt/swift-packages/apple/swift-log.git 1)
    module Logging -- $(find "$log/Sources/Logging" -name '*.swift' | sort)
}
metrics() {  # the Web Push plugin's bounded maps report their size on a gauge
    local source
    source=$(dependency swift-metrics /opt/swift-packages/apple/swift-metrics.git 2)
    module CoreMetrics -- $(find "$source/Sources/CoreMetrics" -name '*.swift' | sort)
    module Metrics -- $(find "$source/Sources/Metrics" -name '*.swift' | sort)
}
redis() {  # without its connections (swift-nio), which the fuzzers never open
    core; logging; crypto; http
    module PushRedis -I Sources/CHiredis -I Sources/COpenSSL -enable-testing -- Sources/PushRedis/*.swift \
        fuzz/targets/FuzzRedisConnections.swift
}
pluginapi() { http; crypto; logging; module PushPluginAPI -I Sources/COpenSSL -- Sources/PushPluginAPI/*.swift; }
mustache() {
    local source
    source=$(dependency swift-mustache /opt/swift-packages/hummingbird-project/swift-mustache.git 2)
    module Mustache -- $(find "$source/Sources/Mustache" -name '*.swift' | sort)
}
build() {  # target sources-and-libraries…: the fuzzer executable
    local target=$1 binary=$out/fuzz-$1 inputs=() input
    shift
    for input in "$@"; do [ -e "$input" ] && inputs+=("$input"); done
    stale "$binary" "${inputs[@]}" || return 0
    local started=$SECONDS
    rm -f "$binary"
    swiftc "${flags[@]}" -module-name "Fuzz_${target//-/_}" "$@" -o "$binary" 2>&1 | grep -E ': error' || true
    [ -x "$binary" ] || { echo "fuzz: building $target failed" >&2; exit 1; }
    echo "fuzz: built $target in $((SECONDS - started)) s"
}
reader=fuzz/targets/FuzzInput.swift
# Each plugin's target format (with what it needs), for the fuzzers that decode jobs as the worker does.
formats="fuzz/targets/FuzzFormats.swift Plugins/APNs/Plugin/APNsTarget.swift Plugins/APNs/Plugin/APNsRFC8599Binding.swift Plugins/APNs/Plugin/APNsPushType.swift
    Plugins/APNs/Plugin/APNsConfiguration.swift Plugins/FCM/Plugin/FCMTarget.swift Plugins/WebPush/Plugin/WebPushTarget.swift Plugins/WebPush/Plugin/WebPushEndpoint.swift
    Plugins/Proxy/Plugin/ProxyTarget.swift Plugins/HMS/Plugin/HMSTarget.swift"
jobs="fuzz/targets/FuzzJob.swift $formats"
plugin() {  # provider: its plugin's sources but the ProviderPlugin declaration and its check-config credential check
    ls Plugins/"$1"/Plugin/*.swift | grep -v -E "/$1(Plugin|CredentialCheck)\.swift$"  # (both need the plugin API)
}
for target in "${targets[@]}"; do
    case $target in
        job-decoder) http; build job-decoder fuzz/targets/JobDecoderFuzz.swift $formats "$out/libPushHTTP.a" "$out/libPushCrypto.a" \
            "$out/libPushCore.a" -I Sources/COpenSSL -lssl -lcrypto ;;
        responses) http; build responses fuzz/targets/ResponseFuzz.swift Plugins/APNs/Plugin/APNsResponse.swift Plugins/FCM/Plugin/FCMResponse.swift \
            Plugins/HMS/Plugin/HMSResponse.swift \
            "$out/libPushHTTP.a" "$out/libPushCrypto.a" "$out/libPushCore.a" -I Sources/COpenSSL -lssl -lcrypto ;;
        retry-decisions) http; build retry-decisions fuzz/targets/RetryFuzz.swift $reader "$out/libPushHTTP.a" "$out/libPushCrypto.a" \
            "$out/libPushCore.a" -I Sources/COpenSSL -lssl -lcrypto ;;
        webpush-proxy-responses) pluginapi; metrics  # the proxy's client certificate identity is the plugin API's
            build webpush-proxy-responses fuzz/targets/WebPushProxyResponseFuzz.swift $reader $(plugin WebPush) $(plugin Proxy) \
                "$out/libPushPluginAPI.a" "$out/libLogging.a" \
                "$out/libPushHTTP.a" "$out/libPushCrypto.a" "$out/libMetrics.a" "$out/libCoreMetrics.a" "$out/libPushCore.a" \
                -I Sources/COpenSSL -lssl -lcrypto ;;
        endpoint-policy) http; crypto; metrics
            build endpoint-policy fuzz/targets/EndpointPolicyFuzz.swift $reader $(plugin WebPush) \
                "$out/libPushHTTP.a" "$out/libPushCrypto.a" "$out/libMetrics.a" "$out/libCoreMetrics.a" "$out/libPushCore.a" \
                -I Sources/COpenSSL -lssl -lcrypto ;;
        headers) pluginapi; metrics
            build headers fuzz/targets/HeadersFuzz.swift $reader $jobs Plugins/APNs/Plugin/APNsRequest.swift Plugins/APNs/Plugin/APNsDestination.swift \
                Plugins/APNs/Plugin/APNsLiveActivity.swift Plugins/FCM/Plugin/FCMMessage.swift Plugins/FCM/Plugin/FCMAndroidNotification.swift \
                Plugins/WebPush/Plugin/WebPushRequest.swift Plugins/WebPush/Plugin/VAPIDTokens.swift Plugins/Proxy/Plugin/ProxyRequestBody.swift \
                "$out/libPushPluginAPI.a" "$out/libLogging.a" "$out/libPushHTTP.a" "$out/libPushCrypto.a" "$out/libMetrics.a" \
                "$out/libCoreMetrics.a" "$out/libPushCore.a" -I Sources/COpenSSL -lssl -lcrypto ;;
        redis-url) redis; build redis-url fuzz/targets/RedisURLFuzz.swift "$out/libPushRedis.a" "$out/libLogging.a" "$out/libPushHTTP.a" "$out/libPushCrypto.a" "$out/libPushCore.a" \
                -I Sources/CHiredis -I Sources/COpenSSL -lhiredis -lssl -lcrypto ;;
        redis-records) redis; http
            build redis-records fuzz/targets/RedisRecordsFuzz.swift $reader $formats "$out/libPushRedis.a" "$out/libLogging.a" "$out/libPushHTTP.a" \
                "$out/libPushCrypto.a" "$out/libPushCore.a" -I Sources/CHiredis -I Sources/COpenSSL -lhiredis -lssl -lcrypto ;;
        templates) http; mustache
            build templates fuzz/targets/TemplatesFuzz.swift $reader $jobs Sources/PushTemplates/*.swift Plugins/APNs/Plugin/APNsTemplateShape.swift \
                Plugins/FCM/Plugin/FCMTemplateShape.swift "$out/libMustache.a" "$out/libPushHTTP.a" "$out/libPushCrypto.a" "$out/libPushCore.a" \
                -I Sources/COpenSSL -lssl -lcrypto ;;
        *) echo "fuzz: unknown target $target (targets: ${all[*]})" >&2; exit 2 ;;
    esac
done
run() {  # target libFuzzer-arguments…: a summary of the run; crash inputs land in .build-fuzz/crash-<target>-*
    local target=$1
    shift
    ASAN_OPTIONS=detect_leaks=0 "$out/fuzz-$target" -max_len=131072 -rss_limit_mb=2048 -artifact_prefix="$out/crash-$target-" "$@" 2>&1 \
        | grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY|Done|Fatal error|.*: Fatal error)' || true
}
cause() {  # log: the trap's message, else the Swift function it trapped in (overflow traps print none)
    grep -m1 -E 'Fatal error|Precondition failed|ERROR: AddressSanitizer' "$1" && return
    local frame
    frame=$(grep -m1 -E '^ +#[0-9]+ .* in \$s' "$1" | sed -E 's/.* in (\$s[^ ]+).*/\1/')
    if [ -n "$frame" ]; then echo "trap in $(swift demangle --simplified --compact "$frame")"; else echo "see $1"; fi
}
rm -f "$out"/crash-*
failed=()
for target in "${targets[@]}"; do
    if [ -d "fuzz/regressions/$target" ] && [ -n "$(ls -A "fuzz/regressions/$target")" ]; then
        echo "fuzz: $target over its regression inputs"
        crashed=0
        for file in "fuzz/regressions/$target"/*; do  # one run per file, so every crashing one is named
            if ! ASAN_OPTIONS=detect_leaks=0 "$out/fuzz-$target" "$file" >"$out/regression.log" 2>&1; then
                echo "fuzz: $target crashes on $file: $(cause "$out/regression.log")" >&2
                crashed=1
            fi
        done
        if [ $crashed = 1 ]; then
            failed+=("$target (regressions)")
            continue
        fi
    fi
    mkdir -p "$out/new-$target" "fuzz/corpus/$target"
    echo "fuzz: $target for ${seconds} s"
    run "$target" -max_total_time="$seconds" -print_final_stats=1 "$out/new-$target" "fuzz/corpus/$target"
    if ls "$out"/crash-"$target"-* >/dev/null 2>&1; then failed+=("$target"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAIL: ${failed[*]} crashed (regression inputs named above; new crashes in $out/crash-*)" >&2
    exit 1
fi
echo "fuzz: PASS (${targets[*]}, ${seconds} s each)"
