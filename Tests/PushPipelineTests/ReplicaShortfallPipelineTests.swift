import Foundation
import PushCore
import PushInMemoryKafka
import PushKafka
@testable import PushRedis
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushPipeline

/// A pipeline on an in-memory Kafka log (one partition, so a job left uncommitted holds the commit point) and a Redis
/// master with one replica, whose deliveries of bindings named `retry-…` are answered 503 with `Retry-After: 30 s`
/// (within the jobs' 60 s TTL, so they are handed to the retry queue).
private struct ShortfallHarness {
    let kafka = InMemoryKafka(topics: ["push.jobs": 1, "push.jobs.urgent": 1, "push.outcomes": 1, "push.dlq": 1])
    let provider = ScriptedProvider { target in
        target.bindingId.hasPrefix("retry")
            ? .retryable(reason: "proxy answered 503", httpStatus: 503, retryAfter: .seconds(30))
            : .delivered(providerMessageId: nil, httpStatus: 200)
    }
    let processor: JobProcessor
    let pipeline: DeliveryPipeline
    let partition = TopicPartition(topic: "push.jobs", partition: 0)

    init(master: RedisServerProcess, health: StoreHealth = StoreHealth()) {
        let client = master.client()
        let configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration,
            store: RedisDeliveryStore(client: client, recordRetention: .seconds(60), replicationTimeout: .milliseconds(200)),
            retryQueue: RedisRetryQueue(client: client, replicationTimeout: .milliseconds(200)), health: health, logger: testLogger())
        pipeline = DeliveryPipeline(
            configuration: configuration, sources: kafka.sources(group: "push-worker"), sink: kafka.sink, processor: processor,
            logger: testLogger())
    }

    func append(_ id: String, binding: String) {
        kafka.append(
            KafkaRecord(
                topic: "push.jobs", key: Array("user-\(id)".utf8),
                value: jobJSON(id: id, userId: "user-\(id)", targets: [proxyTarget(binding)])))
    }

    /// The next offset the group would commit on the partition now.
    var position: Int64 { kafka.position(group: "push-worker")[partition] ?? 0 }

    var end: Int64 { Int64(kafka.messages(in: "push.jobs").count) }

    /// The job ids of the outcomes published so far.
    var published: [String] {
        kafka.messages(in: "push.outcomes").compactMap { message in
            if case .string(let id)? = message.json?["jobId"] { id } else { nil }
        }
    }
}

/// A master and one replica streaming from it, in sync.
private func replicatedServer() async throws -> (master: RedisServerProcess, replica: RedisServerProcess) {
    let master = try await RedisServerProcess.launch()
    let replica = try await RedisServerProcess.launchReplica(of: master)
    let client = master.client()
    while true {
        let info = try await client.command(RedisCommand("INFO", "replication")).string ?? ""
        if RedisClient.onlineReplicas(inReplicationInfo: info) > 0 { return (master, replica) }
        try await Task.sleep(for: .milliseconds(50))
    }
}

private func shortfalls() -> Double {
    TestMetrics.value(of: #"push_store_errors_total{reason="replication_shortfall"}"#) ?? 0
}

@Suite("A replica that lags behind its master holds back only the jobs whose writes it has not acknowledged", .serialized)
struct ReplicaShortfallPipelineTests {
    @Test(
        "a hand-off no replica acknowledges leaves its job uncommitted without pausing intake: later jobs are delivered, and the job is committed once the replica has its entry"
    )
    func handOffShortfallHoldsOnlyItsJob() async throws {
        _ = TestMetrics.registry
        let (master, replica) = try await replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        let harness = ShortfallHarness(master: master)
        replica.pause()
        defer { replica.resume() }
        let shortfallsBefore = shortfalls()
        harness.append("held", binding: "retry-1")
        let running = Task { try await harness.pipeline.run() }
        try await waitUntil(timeout: .seconds(60)) { shortfalls() > shortfallsBefore }
        // Consumed after the hand-off fell short: intake was not paused for it.
        for index in 0..<5 { harness.append("next-\(index)", binding: "b-\(index)") }
        try await waitUntil(timeout: .seconds(60)) { Set(harness.published).isSuperset(of: (0..<5).map { "next-\($0)" }) }

        #expect(harness.processor.health.isHealthy, "a lagging replica is not a store outage")
        #expect(harness.position == 0, "the job whose entry no replica has is not committed, nor anything after it")

        replica.resume()
        try await waitUntil(timeout: .seconds(60)) { harness.position == harness.end }
        harness.pipeline.stop()
        try await running.value
        #expect(harness.provider.calls(for: "-") == 6, "the held job was sent once, the others once each")
        #expect(try await master.client().command(RedisCommand("DBSIZE")).integer ?? 0 > 0)
    }

    @Test("a redelivered job whose retry entry exists but no replica has it is not committed until a WAIT confirms the entry")
    func redeliveryWaitsForTheEntryToBeReplicated() async throws {
        _ = TestMetrics.registry
        let (master, replica) = try await replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        let harness = ShortfallHarness(master: master)
        harness.append("handed", binding: "retry-1")
        harness.append("other", binding: "b-1")
        // An earlier owner handed offset 0 out (the partition's mark is past it) and wrote its retry entry, which the
        // replica, frozen since, never acknowledged: what a job abandoned after a shortfall leaves behind.
        let store = RedisDeliveryStore(client: master.client(), recordRetention: .seconds(60))
        let marked = MarkedPartition(group: "push-worker", topic: "push.jobs", partition: 0)
        let fence = try await store.takeMark(of: marked).fence
        #expect(try await store.advanceMark(of: marked, fence: fence, to: 0))
        replica.pause()
        defer { replica.resume() }
        let entry = RetryEntry(
            id: RetryEntry.id(jobId: "handed", bindingId: "retry-1"), jobBytes: harness.kafka.messages(in: "push.jobs")[0].value,
            kafkaKey: nil, fallbackCreatedAt: 0, bindingId: "retry-1", attempts: 1, lastReason: "proxy answered 503",
            lastHTTPStatus: 503)
        let queue = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(200))
        await #expect(throws: ReplicationShortfall.self) { try await queue.schedule(entry, dueAt: currentTimeMilliseconds() + 60_000) }

        let shortfallsBefore = shortfalls()
        let running = Task { try await harness.pipeline.run() }
        try await waitUntil(timeout: .seconds(60)) { harness.published.contains("other") && shortfalls() > shortfallsBefore }
        #expect(harness.position == 0, "committed on an entry a failover would lose")
        #expect(harness.processor.health.isHealthy)

        replica.resume()
        try await waitUntil(timeout: .seconds(60)) { harness.position == harness.end }
        harness.pipeline.stop()
        try await running.value
        #expect(harness.provider.calls(for: "-") == 1, "the redelivered job was left to the retry queue, not sent again")
        #expect(!harness.published.contains("handed"))
    }

    @Test(
        "a store operation that never succeeds is tried again, with growing waits, until a stop or a revocation cancels its job; then it gives up"
    )
    func storeWaitEndsWithItsJob() async throws {
        let processor = JobProcessor(
            registry: ProviderRegistry([ScriptedProvider { _ in .delivered(providerMessageId: nil, httpStatus: 200) }]),
            configuration: PipelineConfiguration(), store: InMemoryDeliveryStore(), retryQueue: nil, logger: testLogger())
        let tries = Mutex(0)
        let waiting = Task { () -> Int? in
            await processor.withStore {
                tries.withLock { $0 += 1 }
                throw RedisError.unavailable("down")
            }
        }
        try await waitUntil(timeout: .seconds(60)) { tries.withLock { $0 } >= 3 }
        #expect(!processor.health.isHealthy, "a store that does not answer is unhealthy: intake pauses")
        waiting.cancel()
        #expect(await waiting.value == nil, "the cancelled job gives up, uncommitted")
    }
}
