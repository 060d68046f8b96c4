import Foundation
import PushCore
import PushCrypto
import PushPlugins
import Testing
import TestSupport
@testable import PushWorker

@Suite("Configuration from PUSH_* variables")
final class ConfigurationTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    var caFile: String {
        let path = scratch.url.appendingPathComponent("ca.pem").path
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: Data(((try? CertificateAuthority().certificatePEM) ?? "").utf8))
        }
        return path
    }

    let minimal = ["PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_PROXY_URL": "https://proxy.example.com/push"]

    @Test("defaults match the documented ones")
    func defaults() throws {
        let configuration = try WorkerConfiguration.load(from: minimal).get()
        #expect(configuration.groupId == "push-worker")
        #expect(configuration.pipeline.jobsTopic == "push.jobs")
        #expect(configuration.pipeline.outcomesTopic == "push.outcomes")
        #expect(configuration.pipeline.deadLetterTopic == "push.dlq")
        #expect(configuration.pipeline.maximumInFlightJobs == 1000)
        #expect(configuration.pipeline.retryPolicy == RetryPolicy(baseMilliseconds: 1000, maximumMilliseconds: 60_000, maximumAttempts: 5))
        #expect(configuration.pipeline.jobLimits.maximumBytes == 131_072)
        #expect(configuration.pipeline.shutdownGrace == .seconds(20))
        #expect(configuration.enabledProviders == [.proxy])
        #expect(configuration.logFormat == .json)
        #expect(configuration.logLevel == .info)
        #expect(
            configuration.operations
                == OperationsEndpoint(
                    bindAddress: "0.0.0.0", port: 9090, idleTimeout: .seconds(60),
                    maximumConnections: 32))
    }

    @Test("PUSH_HTTP_BIND takes IPv4 and IPv6 literals; anything else stops start-up with one line")
    func operationsBindAddress() throws {
        for address in ["127.0.0.1", "::", "::1", "10.1.2.3"] {
            #expect(
                try WorkerConfiguration.load(from: minimal.merging(["PUSH_HTTP_BIND": address]) { $1 }).get().operations.bindAddress
                    == address)
        }
        for address in ["localhost", "0.0.0.0:9090", "256.1.1.1", "*"] {
            #expect(
                problems(minimal.merging(["PUSH_HTTP_BIND": address]) { $1 })
                    == ["PUSH_HTTP_BIND must be an IPv4 or IPv6 address to listen on, e.g. 0.0.0.0, 127.0.0.1 or ::, got \"\(address)\""])
        }
    }

    @Test("the operations endpoint's idle timeout and connection limit are read and range-checked")
    func operationsLimits() throws {
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging([
                "PUSH_HTTP_IDLE_TIMEOUT_S": "15", "PUSH_HTTP_MAX_INBOUND_CONNECTIONS": "8",
            ]) { $1 }
        ).get()
        #expect(configuration.operations.idleTimeout == .seconds(15))
        #expect(configuration.operations.maximumConnections == 8)
        #expect(
            problems(minimal.merging(["PUSH_HTTP_IDLE_TIMEOUT_S": "0", "PUSH_HTTP_MAX_INBOUND_CONNECTIONS": "0"]) { $1 }) == [
                "PUSH_HTTP_IDLE_TIMEOUT_S must be an integer in 1...3600, got \"0\"",
                "PUSH_HTTP_MAX_INBOUND_CONNECTIONS must be an integer in 1...10000, got \"0\"",
            ])
    }

    @Test("a missing broker list stops start-up with one line saying what to set")
    func missingBrokers() {
        #expect(
            problems(["PUSH_PROXY_URL": "https://p/x"])
                == ["PUSH_KAFKA_BROKERS is required: the Kafka bootstrap servers, e.g. kafka-0:9092,kafka-1:9092"])
    }

    @Test("every bad value is reported, one line each")
    func oneLinePerProblem() {
        let lines = problems([
            "PUSH_PROXY_URL": "http://proxy.example.com/push",
            "PUSH_MAX_ATTEMPTS": "many",
            "PUSH_RETRY_BASE_MS": "5000",
            "PUSH_RETRY_MAX_MS": "100",
            "PUSH_LOG_FORMAT": "xml",
            "PUSH_PROVIDERS": "proxy,pager",
            "PUSH_PROXY_CERT_FILE": "/nonexistent/cert.pem",
        ])
        #expect(
            lines == [
                "PUSH_KAFKA_BROKERS is required: the Kafka bootstrap servers, e.g. kafka-0:9092,kafka-1:9092",
                "PUSH_RETRY_MAX_MS (100) must not be below PUSH_RETRY_BASE_MS (5000)",
                "PUSH_MAX_ATTEMPTS must be an integer in 1...100, got \"many\"",
                "PUSH_PROXY_URL must be an https:// URL, got \"http://proxy.example.com/push\"",
                "PUSH_PROXY_CERT_FILE points to /nonexistent/cert.pem, which does not exist or is not readable",
                "PUSH_PROXY_CERT_FILE and PUSH_PROXY_KEY_FILE must be set together",
                "PUSH_PROVIDERS names \"pager\", which is not one of apns, fcm, webpush, proxy, hms",
                "PUSH_LOG_FORMAT must be json or text, got \"xml\"",
            ])
    }

    @Test("the attempt timeout is the longest request timeout of the enabled providers; a retry lease must outlast it by 5 s")
    func retryLeaseOutlastsTheAttemptTimeout() throws {
        let slowProxy = minimal.merging(["PUSH_PROXY_TIMEOUT_MS": "20000"]) { $1 }
        #expect(
            try WorkerConfiguration.load(from: slowProxy.merging(["PUSH_RETRY_LEASE_MS": "25000"]) { $1 }).get().pipeline.attemptTimeout
                == .seconds(20))
        #expect(
            problems(slowProxy.merging(["PUSH_RETRY_LEASE_MS": "24999"]) { $1 }) == [
                "PUSH_RETRY_LEASE_MS (24999) must be at least the longest request timeout of the enabled providers plus 5 s (25000): a lease that lapses during a send lets another replica send the same retry"
            ])
        #expect(problems(minimal.merging(["PUSH_RETRY_LEASE_MS": "1000"]) { $1 }).count == 1)
        #expect(try WorkerConfiguration.load(from: minimal).get().pipeline.attemptTimeout == .seconds(10))
    }

    @Test("without any provider configured the worker refuses to start")
    func noProvider() {
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092"])
                == [
                    "no provider is configured; set one of: " + LinkedPlugins.all.map(\.configuredBy).joined(separator: "; ")
                        + " (see push-worker run --help)"
                ])
    }

    @Test("PUSH_PROVIDERS can only enable configured providers")
    func providerRestriction() {
        #expect(
            problems(minimal.merging(["PUSH_PROVIDERS": "apns"]) { $1 }).contains(
                "PUSH_PROVIDERS enables apns but it is not configured: set PUSH_APNS_KEY_FILE (with PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID, PUSH_APNS_BUNDLE_ID) or an apns section in PUSH_APPS_FILE"
            ))
        #expect(
            problems(minimal.merging(["PUSH_PROVIDERS": "fcm"]) { $1 }).contains(
                "PUSH_PROVIDERS enables fcm but it is not configured: set PUSH_FCM_CREDENTIALS_FILE or an fcm section in PUSH_APPS_FILE"))
        #expect(
            problems(minimal.merging(["PUSH_PROVIDERS": "webpush"]) { $1 }).contains(
                "PUSH_PROVIDERS enables webpush but it is not configured: set PUSH_WEBPUSH_VAPID_KEY_FILE"))
    }

    @Test("PUSH_RDKAFKA_* become librdkafka properties; the worker's own ones cannot be overridden")
    func rdkafkaPassThrough() throws {
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging([
                "PUSH_RDKAFKA_SECURITY_PROTOCOL": "ssl", "PUSH_RDKAFKA_SSL_CA_LOCATION": caFile,
            ]) { $1 }
        ).get()
        #expect(configuration.rdkafkaProperties == ["security.protocol": "ssl", "ssl.ca.location": caFile])
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_ENABLE_AUTO_OFFSET_STORE": "true"]) { $1 })
                == [
                    "PUSH_RDKAFKA_ENABLE_AUTO_OFFSET_STORE cannot be overridden: the worker stores the offset of a job only once its outcomes are acknowledged"
                ])
    }

    @Test("an unknown PUSH_ variable is reported as a probable typo, not ignored silently")
    func unknownVariables() throws {
        let configuration = try WorkerConfiguration.load(from: minimal.merging(["PUSH_KAFKA_BROKER": "x"]) { $1 }).get()
        #expect(configuration.unknownVariables == ["PUSH_KAFKA_BROKER"])
    }

    @Test("a removed variable that is still set is ignored with a line that says what took its place, not refused or taken for a typo")
    func removedVariables() throws {
        let configuration = try WorkerConfiguration.load(from: minimal.merging(["PUSH_HTTP_CLIENT": "curl"]) { $1 }).get()
        #expect(configuration.unknownVariables.isEmpty)
        #expect(configuration.removedVariables.count == 1)
        #expect(
            configuration.removedVariables.first?.hasPrefix(
                "PUSH_HTTP_CLIENT was removed and is ignored: every provider request goes over the one HTTP/2 client") == true)
        #expect(try WorkerConfiguration.load(from: minimal).get().removedVariables.isEmpty)
    }

    @Test("the configuration table in docs/configuration.md is the one --help is generated from")
    func configurationPageIsGenerated() throws {
        let page = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../docs/configuration.md").standardized, encoding: .utf8)
        #expect(
            page.contains(ConfigurationReference.render(markdown: true)),
            "regenerate the table in docs/configuration.md with: .build/debug/push-worker run --markdown-reference")
    }

    @Test(
        "PUSH_APPS_FILE may give an app its own proxy (URL, CA, client certificate, key password); the key password of the default proxy comes from a file"
    )
    func proxyPerApp() throws {
        let directory = scratch.url.path
        let password = "\(directory)/proxy-\(UUID().uuidString).password"
        try "s3cret\n".write(toFile: password, atomically: true, encoding: .utf8)
        let apps = "\(directory)/apps-\(UUID().uuidString).json"
        try #"{"proxy": [{"app": "acme", "url": "https://acme.example/push", "caFile": "\#(caFile)", "passwordFile": "\#(password)"}]}"#
            .write(toFile: apps, atomically: true, encoding: .utf8)
        let configuration = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps,
            "PUSH_PROXY_URL": "https://proxy.example/push",
            "PUSH_PROXY_KEY_PASSWORD_FILE": password,
        ]).get()
        let proxy = try #require(configuration.proxy)
        #expect(proxy.endpoint(for: "acme")?.url == "https://acme.example/push")
        #expect(proxy.endpoint(for: "acme")?.tls.caFile?.path == caFile)
        #expect(proxy.endpoint(for: "acme")?.tls.clientKeyPassword == "s3cret")
        #expect(proxy.endpoint(for: "other")?.url == "https://proxy.example/push")
        #expect(proxy.endpoint(for: nil)?.tls.clientKeyPassword == "s3cret")
        // The default proxy serves any app a job names: only apps with a proxy of their own are metric labels.
        #expect(configuration.plugin(.proxy)?.appLabels == ["acme"])
        try #"{"proxy": [{"app": "acme", "url": "http://acme.example/push"}]}"#.write(toFile: apps, atomically: true, encoding: .utf8)
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]) == [
                "PUSH_APPS_FILE proxy[0] (acme): url must be an https:// URL"
            ])
    }
}
