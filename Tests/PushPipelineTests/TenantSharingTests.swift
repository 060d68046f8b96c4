import Foundation
import PushCore
import PushKafka
import PushSandbox
import ProxySandbox
import Testing
import TestSupport
@testable import PushPipeline

/// Fair sharing of a lane between apps, through the pipeline: a burst of one app whose endpoint answers slowly fills
/// the lane's in-flight capacity; another app's job produced behind it in the same partition starts at the next free place.
@Suite("Tenant sharing: one app's burst does not hold back another app's job in the read-ahead window", .serialized)
struct TenantSharingTests {
    static let burst = 400

    /// The position of the quiet app's outcome among all outcomes, with the lanes shared between apps or not.
    static func quietPosition(sharing: Bool) async throws -> (position: Int, count: Int) {
        let kafka = try KafkaFixture(partitions: 1)
        // The burst's endpoint answers after 50 ms: the burst holds every place of the lane while it drains.
        let sandbox = try await ProxySandboxFixture.start { request in
            var response = ProxySandbox.respond(to: request)
            if String(decoding: request.body, as: UTF8.self).contains(#""userId":"burst-"#) { response.delay = .milliseconds(50) }
            return response
        }
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox) {
            $0.maximumInFlightJobs = 20
            $0.urgentReservedInFlightJobs = 2
            $0.maximumReadAheadJobs = 1000
            $0.maximumInFlightPerApp = 100
            $0.sharesLanesBetweenApps = sharing
        }
        let producer = try kafka.producer()
        try await producer.send(
            (0..<burst).map { index in
                KafkaRecord(
                    topic: kafka.jobsTopic, key: Array("burst-u\(index)".utf8),
                    value: jobJSON(id: "b\(index)", userId: "burst-u\(index)", targets: [appTarget("bb\(index)", app: "burst")]))
            } + [
                KafkaRecord(
                    topic: kafka.jobsTopic, key: Array("quiet-u".utf8),
                    value: jobJSON(id: "the-quiet-one", userId: "quiet-u", targets: [appTarget("qb", app: "quiet")]))
            ])
        producer.close()
        let reader = try kafka.reader()
        let running = harness.start()
        let all = await reader.wait(timeout: .seconds(120)) { outcomes($0).count >= burst + 1 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()
        let published = outcomes(all)
        let position = try #require(published.firstIndex { $0.json?["jobId"] == .string("the-quiet-one") })
        #expect(published[position].json?["status"] == .string("delivered"))
        return (position, published.count)
    }

    @Test("a quiet app's job behind a burst of 400 in the same partition comes out while most of the burst is still to go")
    func quietJobPassesTheBurst() async throws {
        let (position, count) = try await Self.quietPosition(sharing: true)
        #expect(count == Self.burst + 1)
        #expect(position < Self.burst / 4, "the quiet app's outcome came out after \(position) of the burst's \(Self.burst)")
    }

    @Test("without sharing, the same job comes out behind the burst: it waits in Kafka order until a place frees for it")
    func withoutSharingTheQuietJobWaits() async throws {
        let (position, _) = try await Self.quietPosition(sharing: false)
        #expect(position > Self.burst * 3 / 4, "the quiet app's outcome came out after \(position) of the burst's \(Self.burst)")
    }
}
