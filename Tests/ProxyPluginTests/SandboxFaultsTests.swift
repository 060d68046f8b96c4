import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import ProxySandbox
@testable import ProxyPlugin

@Suite("Push proxy sandbox fault injection")
struct SandboxFaultsTests {
    @Test("a failure share answers 503 with Retry-After, at most the per-target cap, and records every answer")
    func failShareCapped() async throws {
        var faults = SandboxFaults()
        faults.failShare = 1
        faults.maximumFaultsPerTarget = 2
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("record-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: record) }
        let injector = try FaultInjector(faults, recordFile: record)
        let sandbox = try await ProxySandboxFixture.start(responder: injector.wrap(ProxySandbox.respond, key: ProxySandbox.endpointId))
        let provider = ProxyProvider(
            configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
            transport: TestTransport.make())
        let unavailable = DeliveryResult.retryable(reason: "proxy unavailable", httpStatus: 503, retryAfter: .seconds(1))
        #expect(await provider.deliver(ProxyProviderTests.delivery()) == unavailable)
        #expect(await provider.deliver(ProxyProviderTests.delivery()) == unavailable)
        #expect(await provider.deliver(ProxyProviderTests.delivery()) == .delivered(providerMessageId: nil, httpStatus: 200))
        let labels = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n").map {
            $0.split(separator: " ").dropFirst().prefix(2).joined(separator: " ")
        }
        #expect(labels == ["b4 503", "b4 503", "b4 200"])
        await provider.shutdown()
        await sandbox.stop()
    }

    @Test("a reset closes the connection unanswered: a retryable transport failure, and the next request reconnects")
    func resetIsRetryable() async throws {
        var faults = SandboxFaults()
        faults.resetShare = 1
        faults.maximumFaultsPerTarget = 1
        let injector = try FaultInjector(faults)
        let sandbox = try await ProxySandboxFixture.start(responder: injector.wrap(ProxySandbox.respond, key: ProxySandbox.endpointId))
        let provider = ProxyProvider(
            configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
            transport: TestTransport.make())
        guard case .retryable = await provider.deliver(ProxyProviderTests.delivery()) else {
            Issue.record("a reset connection should be retryable")
            return
        }
        #expect(await provider.deliver(ProxyProviderTests.delivery()) == .delivered(providerMessageId: nil, httpStatus: 200))
        await provider.shutdown()
        await sandbox.stop()
    }
}
