# The two commands of the README. Each installs what it needs first.
# .venv/bin first: scripts/install-deps.sh --test makes it, with Debian's python3-* modules and helm-sdkpy.
export PATH := $(CURDIR)/.venv/bin:$(PATH):/opt/swift/usr/bin
SWIFT_BUILD_FLAGS ?=
FUZZ_SECONDS ?= 20

.PHONY: demo test deps test-deps build build-dev format

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

build: deps
	swift build $(SWIFT_BUILD_FLAGS) --product push-worker

## Rewrites every Swift file as swift format (configured by .swift-format) writes it; make test checks it.
format:
	swift format format --in-place --recursive --parallel Sources Plugins Tests fuzz/targets Package.swift

## The development executable: demo, bench, sandbox, kafka-mock.
build-dev: deps
	swift build $(SWIFT_BUILD_FLAGS) --product push-worker-dev

## Build and run the whole pipeline on embedded parts; prints the outcomes.
demo: build-dev
	@scripts/install-deps.sh --demo
	.build/debug/push-worker-dev demo

## Unit and integration tests (real Kafka-protocol mock cluster, redis-server, HTTP/2 + TLS sandboxes),
## then the pipeline's heap allocations per job against their budget (bench/spine-allocations.json), process-level
## runs (end to end, shutdown hand-over, fault-injection scenarios with a ledger check, a short
## fuzzing run), the Helm chart lint, the image's runtime-package check and the check that the production library and
## executable use no dev tools (by target dependencies, imports and the binary's symbols).
test: test-deps
	scripts/check-format.sh
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	scripts/swift-test.sh $(SWIFT_BUILD_FLAGS)
	.build/debug/push-worker-dev bench --scenario spine --jobs 20000 --allocation-budget bench/spine-allocations.json
	scripts/e2e-run.sh .build/debug/push-worker
	scripts/e2e-shutdown.sh .build/debug/push-worker
	scripts/faults.sh .build/debug/push-worker
	scripts/fuzz.sh $(FUZZ_SECONDS)
	python3 scripts/check-chart.py
	scripts/check-runtime-deps.sh .build/debug/push-worker
	scripts/check-target-deps.sh .build/debug/push-worker
