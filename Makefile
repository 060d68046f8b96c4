# The two commands of the README. Each installs what it needs first.
export PATH := $(PATH):/opt/swift/usr/bin
SWIFT_BUILD_FLAGS ?=

.PHONY: demo test deps build

deps:
	@scripts/install-deps.sh

build: deps
	swift build $(SWIFT_BUILD_FLAGS) --product push-worker

## Build and run the whole pipeline on embedded parts; prints the outcomes.
demo: build
	.build/debug/push-worker demo

## Unit and integration tests (real Kafka-protocol mock cluster, HTTP/2 + TLS sandboxes), then the process-level end-to-end run.
test: deps
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	swift test --skip-build $(SWIFT_BUILD_FLAGS)
	scripts/e2e-run.sh .build/debug/push-worker
