#!/usr/bin/env bash
# Fails when a Swift file is not as `swift format` (the toolchain's, configured by .swift-format) would write it.
# `make format` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
swift format lint --strict --recursive --parallel Sources Plugins Tests fuzz/targets Package.swift
