// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "push-worker",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "push-worker", targets: ["push-worker"]),
        .executable(name: "push-worker-dev", targets: ["push-worker-dev"]),
        // Test servers for other packages' tests, as APNSwift ships its own: the provider sandboxes and the
        // librdkafka mock cluster.
        .library(
            name: "PushTestServers",
            targets: [
                "PushSandbox", "APNsSandbox", "FCMSandbox", "WebPushSandbox", "ProxySandbox", "HMSSandbox",
                "PushKafkaMock",
            ]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        // OTLP trace export; only its HTTP exporter is built (no gRPC stack).
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // C shims: the only places that see the C libraries' headers.
        .systemLibrary(
            name: "CRdKafka", path: "Sources/CRdKafka", pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "CCurlShim", dependencies: ["CCurl"], path: "Sources/CCurlShim"),
        .target(name: "CSpawnShim", path: "Sources/CSpawnShim"),
        // jemalloc's options in the executables that link it (`malloc_conf`; MALLOC_CONF overrides them).
        .target(name: "CJemallocOptions", path: "Sources/CJemallocOptions"),
        .systemLibrary(
            name: "CNGHTTP2", path: "Sources/CNGHTTP2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(
            name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CHiredis", path: "Sources/CHiredis",
            providers: [.apt(["libhiredis-dev"])]),

        // Core: contracts, validation, plugin API, policy. No I/O.
        .target(name: "PushCore", path: "Sources/PushCore"),

        // The version (VERSION) and git revision of this build, generated on every build by the plugin.
        .plugin(name: "BuildInfoPlugin", capability: .buildTool(), path: "Sources/BuildInfoPlugin"),
        .target(name: "PushBuildInfo", path: "Sources/PushBuildInfo", plugins: ["BuildInfoPlugin"]),

        // Infrastructure.
        .target(
            name: "PushKafka",
            dependencies: [
                "CRdKafka", "PushCore",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/PushKafka"),
        .target(
            name: "PushHTTP",
            dependencies: [
                "PushCore", "PushCrypto", "CCurlShim", "CCurl", "CNGHTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            path: "Sources/PushHTTP"),
        .target(
            name: "PushRedis",
            dependencies: [
                "CHiredis", "PushCore", "PushCrypto", "PushHTTP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            path: "Sources/PushRedis"),
        .target(name: "PushCrypto", dependencies: ["COpenSSL", "PushCore"], path: "Sources/PushCrypto"),
        .target(
            name: "PushPipeline",
            dependencies: [
                "PushCore", "PushKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Sources/PushPipeline"),

        // Development tools: the sandboxes, the mock cluster, the demo and the bench. Only the `push-worker-dev`
        // executable (`demo`, `bench`, `sandbox`, `kafka-mock`) and the tests depend on them; the production
        // library, PushWorker, and the production executable, `push-worker`, do not (scripts/check-target-deps.sh
        // keeps it so).
        .target(
            name: "PushKafkaMock",
            dependencies: [
                "CRdKafka", "PushKafka",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/PushKafkaMock"),
        .target(
            name: "PushSandbox",
            dependencies: [
                "PushCore", "PushCrypto", "CSpawnShim",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ], path: "Sources/PushSandbox"),
        // A plugin's sandbox lives in its folder, in a target of its own that the plugin does not depend on.
        // Each provider's sandbox lives in its plugin's folder, on the shared server above.
        .target(name: "APNsSandbox", dependencies: ["PushSandbox", "PushCore", "PushCrypto"], path: "Plugins/APNs/Sandbox"),
        .target(name: "FCMSandbox", dependencies: ["PushSandbox", "PushCore", "PushCrypto"], path: "Plugins/FCM/Sandbox"),
        .target(name: "WebPushSandbox", dependencies: ["PushSandbox", "PushCore", "PushCrypto"], path: "Plugins/WebPush/Sandbox"),
        .target(name: "ProxySandbox", dependencies: ["PushSandbox", "PushCore"], path: "Plugins/Proxy/Sandbox"),
        .target(name: "HMSSandbox", dependencies: ["PushSandbox", "PushCore"], path: "Plugins/HMS/Sandbox"),

        // The plugin API: what a provider plugin implements (ProviderPlugin) and the settings it declares.
        .target(
            name: "PushPluginAPI",
            dependencies: [
                "PushCore", "PushHTTP", "PushCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/PushPluginAPI"),

        // Operator payload templates (Mustache, JSON-escaped), behind PushCore's PayloadTemplates.
        .target(
            name: "PushTemplates", dependencies: ["PushCore", .product(name: "Mustache", package: "swift-mustache")],
            path: "Sources/PushTemplates"),

        // Provider plugins: each depends on the plugin API (with the core, the shared transport and crypto) only.
        .target(name: "ProxyPlugin", dependencies: ["PushPluginAPI", "PushCore", "PushHTTP"], path: "Plugins/Proxy/Plugin"),
        .target(
            name: "WebPushPlugin",
            dependencies: [
                "PushPluginAPI", "PushCore", "PushHTTP", "PushCrypto",
                .product(name: "Metrics", package: "swift-metrics"),
            ], path: "Plugins/WebPush/Plugin"),
        .target(name: "FCMPlugin", dependencies: ["PushPluginAPI", "PushCore", "PushHTTP", "PushCrypto"], path: "Plugins/FCM/Plugin"),
        .target(
            name: "APNsPlugin",
            dependencies: [
                "PushPluginAPI", "PushCore", "PushHTTP", "PushCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Plugins/APNs/Plugin"),
        .target(name: "HMSPlugin", dependencies: ["PushPluginAPI", "PushCore", "PushHTTP"], path: "Plugins/HMS/Plugin"),
        // The plugins this build links: the worker loops over `LinkedPlugins.all`.
        .target(
            name: "PushPlugins", dependencies: ["PushPluginAPI", "ProxyPlugin", "APNsPlugin", "FCMPlugin", "WebPushPlugin", "HMSPlugin"],
            path: "Sources/PushPlugins"),

        // Wiring: configuration, plugin registry, operator commands. The executable is only the CLI over it.
        // The production library: no development tools (PushSandbox, PushKafkaMock, PushDevelopmentTools, PushBench).
        .target(
            name: "PushWorker",
            dependencies: [
                "PushCore", "PushKafka", "PushHTTP", "PushPipeline", "PushRedis", "PushCrypto", "PushTemplates",
                "PushPluginAPI", "PushPlugins", "PushBuildInfo",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ], path: "Sources/PushWorker"),
        // `push-worker-dev demo`: the whole pipeline on the mock cluster and the sandboxes.
        .target(
            name: "PushDevelopmentTools",
            dependencies: [
                "APNsSandbox", "FCMSandbox", "ProxySandbox", "WebPushSandbox",
                "PushWorker", "PushPipeline", "PushKafka", "PushKafkaMock", "PushSandbox", "HMSSandbox", "PushCrypto", "PushCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], path: "Sources/PushDevelopmentTools"),
        // `push-worker-dev bench`: end-to-end and micro benchmarks over the real pipeline.
        .target(
            name: "PushBench",
            dependencies: [
                "APNsSandbox", "FCMSandbox", "ProxySandbox", "WebPushSandbox",
                "PushWorker", "PushPipeline", "PushKafka", "PushKafkaMock", "PushInMemoryKafka", "PushRedis", "PushHTTP", "PushSandbox",
                "PushCrypto", "PushCore",
                "APNsPlugin", "ProxyPlugin",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], path: "Sources/PushBench"),
        // The production executable: `run`, `send`, `check-config`, `vapid-keys`, `import-templates`; the image ships only it.
        .executableTarget(
            name: "push-worker",
            dependencies: [
                "PushPlugins", "PushBuildInfo", "CJemallocOptions",
                "PushWorker", "PushCrypto", "PushCore", "WebPushPlugin",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], path: "Sources/push-worker",
            // jemalloc serves every allocation of the process: with glibc's malloc a job took about 16 % more CPU (docs/performance.md).
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]),
        // The development executable: `demo`, `bench`, `sandbox`, `kafka-mock`. It links jemalloc as the production
        // one does, so that `bench` measures the allocator the worker runs on.
        .executableTarget(
            name: "push-worker-dev",
            dependencies: [
                "HMSSandbox", "APNsSandbox", "FCMSandbox", "ProxySandbox", "WebPushSandbox", "CJemallocOptions",
                "PushWorker", "PushCore", "PushHTTP",
                "PushDevelopmentTools", "PushBench", "PushKafkaMock", "PushSandbox",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ], path: "Sources/push-worker-dev",
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]),

        .target(name: "PushInMemoryKafka", dependencies: ["PushCore", "PushKafka", "PushPipeline"], path: "Sources/PushInMemoryKafka"),
        .target(
            name: "TestSupport",
            dependencies: [
                "APNsSandbox", "ProxySandbox",
                "PushCore", "PushPlugins", "PushPluginAPI", "ProxyPlugin", "PushKafka", "PushKafkaMock", "PushSandbox", "PushRedis",
                "PushCrypto", "PushHTTP", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
                // swift-nio-http2's framing, the oracle the transport's tests run beside nghttp2's (NIOHTTP2Framing.swift).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ], path: "Tests/TestSupport"),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"], path: "Tests/PushCoreTests"),
        .testTarget(
            name: "PushTemplatesTests", dependencies: ["PushTemplates", "PushCore", "APNsPlugin", "FCMPlugin", "TestSupport"],
            path: "Tests/PushTemplatesTests"),
        .testTarget(
            name: "PushKafkaTests", dependencies: ["PushKafka", "PushKafkaMock", "PushCore", "TestSupport"], path: "Tests/PushKafkaTests"),
        .testTarget(
            name: "PushHTTPTests",
            dependencies: [
                "PushHTTP", "PushSandbox", "PushCrypto", "TestSupport",
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/PushHTTPTests"),
        .testTarget(
            name: "ProxyPluginTests", dependencies: ["ProxySandbox", "ProxyPlugin", "PushCore", "PushHTTP", "PushSandbox", "TestSupport"],
            path: "Tests/ProxyPluginTests"),
        .testTarget(
            name: "PushPipelineTests",
            dependencies: [
                "PushPipeline", "PushCore", "PushKafka", "PushInMemoryKafka", "PushHTTP", "PushSandbox", "ProxySandbox", "ProxyPlugin",
                "FCMPlugin", "PushRedis", "TestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ], path: "Tests/PushPipelineTests"),
        .testTarget(
            name: "PushRedisTests", dependencies: ["PushRedis", "PushCore", "PushCrypto", "PushSandbox", "TestSupport"],
            path: "Tests/PushRedisTests"),
        .testTarget(
            name: "APNsPluginTests",
            dependencies: [
                "APNsSandbox", "APNsPlugin", "PushCore", "PushHTTP", "PushCrypto", "PushSandbox", "PushPluginAPI",
                "PushPipeline", "PushKafka", "PushInMemoryKafka", "TestSupport",
            ],
            path: "Tests/APNsPluginTests"),
        .testTarget(
            name: "FCMPluginTests",
            dependencies: ["FCMSandbox", "FCMPlugin", "PushCore", "PushHTTP", "PushSandbox", "PushPipeline", "PushKafka", "TestSupport"],
            path: "Tests/FCMPluginTests"),
        .testTarget(
            name: "HMSPluginTests",
            dependencies: ["HMSPlugin", "HMSSandbox", "PushSandbox", "PushPluginAPI", "PushCore", "PushHTTP", "TestSupport"],
            path: "Tests/HMSPluginTests"),
        .testTarget(
            name: "PushBenchTests",
            dependencies: [
                "PushBench", "PushCore", "PushPipeline", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/PushBenchTests"),
        .testTarget(name: "PushCryptoTests", dependencies: ["PushCrypto", "PushCore"], path: "Tests/PushCryptoTests"),
        .testTarget(
            name: "WebPushPluginTests",
            dependencies: [
                "WebPushSandbox", "WebPushPlugin", "PushCore", "PushCrypto", "PushHTTP", "PushSandbox",
                "PushPipeline", "TestSupport",
            ],
            path: "Tests/WebPushPluginTests"),
        .testTarget(
            name: "PushWorkerTests",
            dependencies: [
                "APNsSandbox", "FCMSandbox", "HMSSandbox", "ProxySandbox", "PushWorker", "APNsPlugin", "FCMPlugin", "WebPushPlugin",
                "ProxyPlugin",
                "PushPluginAPI", "PushPlugins", "PushDevelopmentTools", "PushCore", "PushCrypto", "PushSandbox", "PushTemplates",
                "TestSupport", "PushKafka", "PushPipeline", "PushBuildInfo",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/PushWorkerTests"),
    ],
    swiftLanguageModes: [.v6]
)
