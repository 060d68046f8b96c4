import Foundation
import PushCore
import PushKafka
import PushRedis
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushPipeline

/// Answers each binding's first `failures` requests with `status` (+ `Retry-After`), then 200.
final class FailFirst: Sendable {
    private let seen = Mutex<[String: Int]>([:])
    let failures: Int
    let status: Int
    let retryAfter: String?

    init(failures: Int = 1, status: Int = 503, retryAfter: String? = nil) {
        self.failures = failures
        self.status = status
        self.retryAfter = retryAfter
    }

    func respond(_ request: SandboxRequest) -> SandboxResponse {
        let document = try? JSONParser.parse(request.body)
        guard case .array(let endpoints)? = document?["endpointData"], case .string(let binding)? = endpoints.first?["endpointId"]
        else { return SandboxResponse(status: 400) }
        let count = seen.withLock {
            $0[binding, default: 0] += 1
            return $0[binding]!
        }
        if count <= failures { return SandboxResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? []) }
        return SandboxResponse(status: 200)
    }
}

func bindingOf(_ request: SandboxRequest) -> String {
    guard case .array(let endpoints)? = (try? JSONParser.parse(request.body))?["endpointData"],
        case .string(let binding)? = endpoints.first?["endpointId"]
    else { return "" }
    return binding
}

@Suite("Pipeline with Redis: dedupe, idempotency, TTL, the retry queue and outages", .serialized)
struct RedisPipelineTests {
    func harness(
        _ kafka: KafkaFixture, _ sandbox: ProxySandboxFixture, _ redis: RedisServerProcess, group: String = "push-worker",
        configure: (inout PipelineConfiguration) -> Void = { _ in }
    ) throws -> PipelineHarness {
        try harness(kafka, sandbox, client: redis.client(), group: group, configure: configure)
    }

    func harness(
        _ kafka: KafkaFixture, _ sandbox: ProxySandboxFixture, client: RedisClient, group: String = "push-worker",
        configure: (inout PipelineConfiguration) -> Void = { _ in }
    ) throws -> PipelineHarness {
        try PipelineHarness(
            kafka: kafka, sandbox: sandbox, group: group, store: RedisDeliveryStore(client: client, recordRetention: .seconds(60)),
            retryQueue: RedisRetryQueue(client: client), configure: configure)
    }

    @Test("two pushes to one binding inside the window: one delivered, one deduplicated; per-kind windows; after the window both deliver")
    func dedupeWindows() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let redis = try await RedisServerProcess.launch()
        // call-2 is checked only once call-1 is done (one key, one order): the window leaves room for a slow machine.
        let harness = try harness(kafka, sandbox, redis) { $0.dedupeWindows = DedupeWindows(milliseconds: [.call: 8000, .message: 0]) }
        try await produce(
            kafka,
            [
                ("alice", jobJSON(id: "call-1", kind: "call", targets: [proxyTarget("b1")])),
                ("alice", jobJSON(id: "call-2", kind: "call", targets: [proxyTarget("b1")])),
                ("alice", jobJSON(id: "msg-1", kind: "message", targets: [proxyTarget("b1")])),
                ("alice", jobJSON(id: "msg-2", kind: "message", targets: [proxyTarget("b1")])),
            ])
        let reader = try kafka.reader()
        let running = harness.start()
        _ = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 4 }
        try await Task.sleep(for: .milliseconds(8100))
        try await produce(kafka, [("alice", jobJSON(id: "call-3", kind: "call", targets: [proxyTarget("b1")]))])
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 5 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let status = Dictionary(
            outcomes(messages).compactMap { message -> (String, String)? in
                guard case .string(let job)? = message.json?["jobId"], case .string(let status)? = message.json?["status"] else {
                    return nil
                }
                return (job, status)
            }
        ) { first, _ in first }
        #expect(
            status == [
                "call-1": "delivered", "call-2": "deduplicated", "msg-1": "delivered", "msg-2": "delivered",
                "call-3": "delivered",
            ])
        #expect(sandbox.server.requests.count == 4)
    }

    @Test("a job redelivered after its send succeeded is not sent again; its outcome is published again")
    func idempotentRedelivery() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let redis = try await RedisServerProcess.launch()
        let harness = try harness(kafka, sandbox, redis)
        let job = jobJSON(id: "once", targets: [proxyTarget("b1"), proxyTarget("b2")])
        try await produce(kafka, [("alice", job)])
        let reader = try kafka.reader()
        let running = harness.start()
        _ = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 2 }
        try await produce(kafka, [("alice", job)])  // what Kafka does after a crash before the commit
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 4 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        #expect(sandbox.server.requests.count == 1, "one request for the job's two endpoints, not one per consumption")
        let published = outcomes(messages)
        #expect(published.count == 4)
        #expect(Set(published.map(\.valueString)).count == 2, "the replayed outcomes are the recorded ones, byte for byte")
    }

    @Test("Retry-After: 7 is honoured: the retry goes out no sooner than 7 s later, from the Redis queue")
    func retryAfterHonoured() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let responder = FailFirst(status: 503, retryAfter: "7")
        let sandbox = try await ProxySandboxFixture.start(responder: responder.respond)
        let redis = try await RedisServerProcess.launch()
        let harness = try harness(kafka, sandbox, redis)
        try await produce(kafka, [("alice", jobJSON(id: "ra", targets: [proxyTarget("b1")]))])
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(40)) { outcomes($0).count >= 1 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let requests = sandbox.server.requests
        #expect(requests.count == 2)
        if requests.count == 2 { #expect(requests[1].receivedAt - requests[0].receivedAt >= .seconds(7)) }
        #expect(outcomes(messages).first?.json?["status"] == .string("delivered"))
        #expect(outcomes(messages).first?.json?["attempts"] == .integer(2))
    }

    @Test("with PUSH_PUBLISH_RETRYING a hand-off to the retry queue publishes a retrying outcome before the final one")
    func retryingOutcomes() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let responder = FailFirst(status: 503)
        let sandbox = try await ProxySandboxFixture.start(responder: responder.respond)
        let redis = try await RedisServerProcess.launch()
        let harness = try harness(kafka, sandbox, redis) { $0.publishRetryingOutcomes = true }
        try await produce(kafka, [("alice", jobJSON(id: "r", targets: [proxyTarget("b1")]))])
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 2 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        #expect(outcomes(messages).map { $0.json?["status"] } == [.string("retrying"), .string("delivered")])
        #expect(outcomes(messages).first?.json?["httpStatus"] == .integer(503))
    }

    @Test("a retry due after the TTL is an expiry: no second send")
    func ttlShorterThanBackoff() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let responder = FailFirst(status: 503, retryAfter: "30")
        let sandbox = try await ProxySandboxFixture.start(responder: responder.respond)
        let redis = try await RedisServerProcess.launch()
        let harness = try harness(kafka, sandbox, redis)
        try await produce(kafka, [("alice", jobJSON(id: "short", ttl: 10, targets: [proxyTarget("b1")]))])
        let reader = try kafka.reader()
        let running = harness.start()
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 1 }
        try await Task.sleep(for: .seconds(1))
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        #expect(sandbox.server.requests.count == 1)
        let outcome = try #require(outcomes(messages).first?.json)
        #expect(outcome["status"] == .string("expired"))
        #expect(outcome["attempts"] == .integer(1))
        #expect(outcome["reason"] == .string("TTL ends before a retry could be sent (last error: proxy unavailable)"))
    }

    @Test(
        "two workers share the queue: every retry is sent exactly once, even when a rebalance redelivers jobs",
        arguments: RedisDeployment.allCases)
    func twoSchedulers(_ deployment: RedisDeployment) async throws {
        let kafka = try KafkaFixture(partitions: 2)
        let responder = FailFirst(status: 500)
        let sandbox = try await ProxySandboxFixture.start(responder: responder.respond)
        let redis = try await deployment.start()
        defer { redis.stop() }
        let slowRetries: (inout PipelineConfiguration) -> Void = {
            $0.retryPolicy = RetryPolicy(baseMilliseconds: 1500, maximumMilliseconds: 1500, maximumAttempts: 3)
        }
        let first = try harness(kafka, sandbox, client: redis.client(), configure: slowRetries)
        let second = try harness(kafka, sandbox, client: redis.client(), configure: slowRetries)
        try await produce(kafka, (0..<20).map { ("user-\($0)", jobJSON(id: "j\($0)", userId: "u\($0)", targets: [proxyTarget("b\($0)")])) })
        let reader = try kafka.reader()
        let runs = [first.start(), second.start()]
        // A rebalance may hand a partition over before its offsets are committed: the new owner
        // then sees jobs again and publishes their recorded outcomes again (never sends them again).
        let queue = RedisRetryQueue(client: redis.client())
        if let cluster = redis.cluster {
            // Each entry waits 1.5 s, then is claimed and removed: look until every master has held one.
            let masters = await cluster.masterPorts()
            var held = [Bool](repeating: false, count: masters.count)
            let deadline = ContinuousClock.now + .seconds(30)
            while !held.allSatisfy({ $0 }), ContinuousClock.now < deadline {
                for (index, port) in masters.enumerated() where !held[index] {
                    held[index] = !(await RedisClusterProcesses.run(["-p", String(port), "--scan", "--pattern", "push:{retry:*}:entry:*"]))
                        .split(separator: "\n").isEmpty
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(held.allSatisfy { $0 }, "retry entries waited on every master: \(zip(masters, held).map { "\($0): \($1)" })")
        }
        try await waitUntil(timeout: .seconds(20)) { sandbox.server.requests.count >= 20 }
        let messages = await reader.wait(timeout: .seconds(60)) { Set(outcomes($0).compactMap(\.keyString)).count >= 20 }
        try await waitUntil(timeout: .seconds(10)) { sandbox.server.requests.count >= 40 }
        try await Task.sleep(for: .seconds(1))
        try await first.stop(runs[0])
        try await second.stop(runs[1])
        reader.stop()
        await sandbox.stop()

        let perBinding = Dictionary(grouping: sandbox.server.requests, by: bindingOf).mapValues(\.count)
        #expect(perBinding.count == 20)
        #expect(perBinding.values.allSatisfy { $0 == 2 }, "one failed attempt and one retry per binding: \(perBinding)")
        #expect(outcomes(messages).allSatisfy { $0.json?["status"] == .string("delivered") })
        let distinct = Dictionary(grouping: outcomes(messages), by: { $0.keyString ?? "" }).mapValues { Set($0.map(\.valueString)).count }
        #expect(distinct.values.allSatisfy { $0 == 1 }, "a repeated outcome is the recorded one, byte for byte")
        #expect(try await queue.count() == 0)
        if let cluster = redis.cluster {
            let keysPerMaster = await cluster.keysPerMaster()
            #expect(keysPerMaster.allSatisfy { $0 > 0 }, "idempotency records on every master: \(keysPerMaster)")
        }
    }

    @Test("a retry claimed by a worker that died is sent by another once the lease ends")
    func leaseTakeover() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let redis = try await RedisServerProcess.launch()
        let queue = RedisRetryQueue(client: redis.client())
        let job = jobJSON(id: "orphan", targets: [proxyTarget("b1")])
        try await queue.schedule(
            RetryEntry(
                id: "orphan/b1", jobBytes: job, kafkaKey: Array("alice".utf8), fallbackCreatedAt: 0,
                bindingId: "b1", attempts: 1, lastReason: "proxy answered 500", lastHTTPStatus: 500),
            dueAt: 0)
        let claimedAt = ContinuousClock.now
        #expect(try await queue.claimDue(limit: 10, lease: .seconds(3)).count == 1)  // the worker that dies

        let reader = try kafka.reader()
        let survivor = try harness(kafka, sandbox, redis)
        let running = survivor.start()
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 1 }
        try await survivor.stop(running)
        reader.stop()
        await sandbox.stop()

        let request = try #require(sandbox.server.requests.first)
        #expect(request.receivedAt - claimedAt >= .seconds(3), "not before the lease ended")
        #expect(sandbox.server.requests.count == 1)
        #expect(outcomes(messages).first?.json?["attempts"] == .integer(2))
        #expect(try await queue.count() == 0)
    }

    @Test("a retry that runs longer than its lease keeps it: the scheduler renews it, no other replica claims it")
    func leaseRenewedWhileTheRetryRuns() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        // The retry's one request takes 6 s: three times the lease.
        let sandbox = try await ProxySandboxFixture.start { _ in SandboxResponse(status: 200, delay: .seconds(6)) }
        let redis = try await RedisServerProcess.launch()
        let queue = RedisRetryQueue(client: redis.client())
        let job = jobJSON(id: "slow", targets: [proxyTarget("b1")])
        try await queue.schedule(
            RetryEntry(
                id: "slow/b1", jobBytes: job, kafkaKey: Array("alice".utf8), fallbackCreatedAt: 0,
                bindingId: "b1", attempts: 1, lastReason: "proxy answered 500", lastHTTPStatus: 500),
            dueAt: 0)
        let reader = try kafka.reader()
        // One retry at a time: the worker does not claim (and so re-lease) the entry it runs itself.
        let worker = try harness(kafka, sandbox, redis) {
            $0.retryLease = .seconds(2)
            $0.maximumConcurrentRetries = 1
        }
        let running = worker.start()
        // Once the request is at the provider the worker has held the entry for a while; 3 s later its first lease is over.
        for _ in 0..<600 where sandbox.server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sandbox.server.requests.count == 1)
        try await Task.sleep(for: .seconds(3))
        let other = RedisRetryQueue(client: redis.client())
        #expect(try await other.claimDue(limit: 10, lease: .seconds(60)).isEmpty, "the running retry's lease was renewed")
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 1 }
        try await worker.stop(running)
        reader.stop()
        await sandbox.stop()
        #expect(outcomes(messages).first?.json?["status"] == .string("delivered"))
        #expect(sandbox.server.requests.count == 1)
        #expect(try await queue.count() == 0)
    }

    @Test(
        "a managed Redis that refuses the password (rediss://, WRONGPASS): the store is unavailable, readiness says so, intake pauses and nothing is sent or published"
    )
    func refusedRedisPassword() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        var url = redis.url
        url.password = "rotated-away"
        let material = try #require(redis.tlsMaterial)
        let client = RedisClient(
            url: url, connections: 1,
            tls: RedisTLSSettings(caFile: material.caFile, certificateFile: material.clientCertFile, keyFile: material.clientKeyFile))
        let harness = try harness(kafka, sandbox, client: client)
        let reader = try kafka.reader()
        let running = harness.start()
        try await produce(kafka, [("alice", jobJSON(id: "j1", targets: [proxyTarget("b1")]))])
        try await waitUntil(timeout: .seconds(20)) { !harness.processor.health.isHealthy }
        #expect(harness.pipeline.readiness == (false, "shared store (Redis) unavailable"))
        try await Task.sleep(for: .seconds(1))
        #expect(outcomes(reader.received).isEmpty && sandbox.server.requests.isEmpty, "nothing goes out without the store")
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()
    }

    @Test("Redis killed mid-stream and restarted: the worker pauses, then resumes; no job lost, none sent twice")
    func redisOutage() async throws {
        let kafka = try KafkaFixture(partitions: 2)
        let sandbox = try await ProxySandboxFixture.start()
        let redis = try await RedisServerProcess.launch()
        let harness = try harness(kafka, sandbox, redis)
        let reader = try kafka.reader()
        let running = harness.start()
        try await produce(kafka, (0..<30).map { ("user-\($0)", jobJSON(id: "a\($0)", userId: "u\($0)", targets: [proxyTarget("a\($0)")])) })
        _ = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 30 }

        redis.stop()
        try await produce(kafka, (0..<30).map { ("user-\($0)", jobJSON(id: "b\($0)", userId: "u\($0)", targets: [proxyTarget("b\($0)")])) })
        try await waitUntil(timeout: .seconds(10)) { !harness.processor.health.isHealthy }
        let duringOutage = outcomes(reader.received).count
        try await Task.sleep(for: .seconds(2))
        #expect(outcomes(reader.received).count == duringOutage, "nothing finishes while the store is down")
        try await redis.start()

        let messages = await reader.wait(timeout: .seconds(40)) { outcomes($0).count >= 60 }
        try await Task.sleep(for: .seconds(1))
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        #expect(harness.processor.health.isHealthy)
        let published = outcomes(messages)
        #expect(published.count == 60)
        #expect(Set(published.compactMap { $0.keyString }).count == 60, "each binding has exactly one outcome")
        let perBinding = Dictionary(grouping: sandbox.server.requests, by: bindingOf).mapValues(\.count)
        #expect(perBinding.count == 60)
        #expect(perBinding.values.allSatisfy { $0 == 1 }, "no binding was sent twice")
    }
}
