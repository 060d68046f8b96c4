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

# A throwaway CA and a server certificate of it (P-256, for IP 127.0.0.1 and localhost) in DIR: ca.pem,
# server.pem and server-key.pem, for a redis-server's TLS port.
make_redis_tls_certificates() {
    make_test_ca "$1" "bench Redis CA"
    issue_test_certificate "$1" server "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"
}

# The redis-server answers on its TLS port, its certificate verified against the CA for 127.0.0.1.
wait_for_redis_tls() {
    for _ in $(seq 1 50); do
        [ "$(redis-cli --tls --cacert "$redis_tls_ca" -h 127.0.0.1 -p "$redis_tls_port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    fail "redis-server did not answer over TLS on port $redis_tls_port"
}

# nginx answering like every provider (bench/nginx.conf: HTTP/2 over TLS on loopback, a
# throwaway certificate; an OTLP/HTTP trace receiver on otlp_port) and a redis-server; sets port, otlp_port, ca and
# redis_port. With redis_tls=1 (set by the sourcing script) the redis-server also listens over TLS on redis_tls_port,
# its certificate issued by $redis_tls_ca (clients not asked for one).
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
    local redis_listen=(--port "$redis_port")
    if [ "${redis_tls:-0}" = 1 ]; then
        make_redis_tls_certificates "$work/redis-tls"
        redis_tls_ca=$work/redis-tls/ca.pem
        redis_tls_port=$(free_port)
        redis_listen+=(--tls-port "$redis_tls_port" --tls-cert-file "$work/redis-tls/server.pem"
            --tls-key-file "$work/redis-tls/server-key.pem" --tls-ca-cert-file "$redis_tls_ca" --tls-auth-clients no)
    fi
    redis-server "${redis_listen[@]}" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
    [ "${redis_tls:-0}" = 1 ] && wait_for_redis_tls
    for _ in $(seq 1 50); do
        curl -sf --http2 --cacert "$ca" -d '{}' "https://localhost:$port/3/device/be" >/dev/null && return 0
        sleep 0.1
    done
    fail "nginx did not answer on port $port (see $work/nginx-error.log)"
}
start_bench_endpoint
