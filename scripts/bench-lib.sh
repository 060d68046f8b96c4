# Shared by the benchmark scripts (the sourcing script sets build=0|1): dependencies, the
# release build, and nginx answering like every provider plus a redis-server.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/opt/swift/usr/bin"
scripts/install-deps.sh --bench
[ "$build" = 1 ] && swift build -c release --product push-worker-dev >&2
fail() { echo "bench: $*" >&2; exit 1; }
# The worker in a benchmark logs as it does by default in production: a JSON line per delivery.
# split_worker_log FILE reads its stderr: the JSON lines go to FILE (a container runtime would
# collect them), the rest (the bench's progress) to stderr.
bench_log_environment=(PUSH_LOG_LEVEL="${PUSH_LOG_LEVEL:-info}" PUSH_LOG_FORMAT="${PUSH_LOG_FORMAT:-json}")
split_worker_log() { awk -v file="$1" '/^\{/ { print > file; next } { print > "/dev/stderr"; fflush("/dev/stderr") }'; }
source scripts/e2e-lib.sh .build/release/push-worker

# nginx answering like every provider (bench/nginx.conf: HTTP/2 over TLS on loopback, a
# throwaway certificate; an OTLP/HTTP trace receiver on otlp_port) and a redis-server; sets port, otlp_port, ca and
# redis_port.
start_bench_endpoint() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "basicConstraints=critical,CA:TRUE" \
        -keyout "$work/server.key" -out "$work/server.pem" 2>/dev/null
    ca=$work/server.pem
    port=$(free_port)
    otlp_port=$(free_port)
    mkdir -p "$work/body"
    sed -e "s#@WORK@#$work#g" -e "s#@PORT@#$port#g" -e "s#@OTLP_PORT@#$otlp_port#g" bench/nginx.conf > "$work/nginx.conf"
    nginx -c "$work/nginx.conf" -e "$work/nginx-error.log" & pids+=($!)
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
    for _ in $(seq 1 50); do
        curl -sf --http2 --cacert "$ca" -d '{}' "https://localhost:$port/3/device/be" >/dev/null && return 0
        sleep 0.1
    done
    fail "nginx did not answer on port $port (see $work/nginx-error.log)"
}
start_bench_endpoint
