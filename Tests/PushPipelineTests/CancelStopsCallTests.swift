import Foundation
import PushCore
import PushKafka
import PushRedis
import PushSandbox
import Testing
import TestSupport
@testable import PushPipeline

@Suite("A cancel stops its call", .serialized)
struct CancelStopsCallTests {
    /// A push proxy that keeps refusing calls (503, Retry-After: 1) and accepts everything else.
    static func refuseCalls(_ request: SandboxRequest) -> SandboxResponse {
        let isStatus = (try? JSONParser.parse(request.body))?["isStatus"]
        return isStatus == .bool(false) ? SandboxResponse(status: 503, headers: [("retry-after", "1")]) : SandboxResponse(status: 200)
    }

    static func job(
        id: String, kind: String, collapseKey: String, userId: String = "alice", createdAt: Int64 = currentTimeMilliseconds(),
        bindings: [String]
    ) -> [UInt8] {
        let targets = bindings.map { proxyTarget($0) }.joined(separator: ",")
        return Array(
            #"{"v":1,"id":"\#(id)","createdAt":\#(createdAt),"ttl":60,"kind":"\#(kind)","userId":"\#(userId)","collapseKey":"\#(collapseKey)","targets":[\#(targets)]}"#
                .utf8)
    }

    static func isCall(_ request: SandboxRequest) -> Bool {
        (try? JSONParser.parse(request.body))?["isStatus"] == .bool(false)
    }

    @Test(
        "a call retrying from the Redis queue ends expired \"cancelled by job <id>\" on the cancel's bindings and is not sent again; a call with another key keeps retrying"
    )
    func cancelStopsRetryingCall() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start(responder: Self.refuseCalls)
        let redis = try await RedisServerProcess.launch()
        let client = redis.client()
        let harness = try PipelineHarness(
            kafka: kafka, sandbox: sandbox, store: RedisDeliveryStore(client: client, recordRetention: .seconds(60)),
            retryQueue: RedisRetryQueue(client: client)
        ) {
            $0.retryPolicy = RetryPolicy(baseMilliseconds: 50, maximumMilliseconds: 200, maximumAttempts: 100)
        }
        try await produce(
            kafka,
            [
                ("alice", Self.job(id: "call-1", kind: "call", collapseKey: "c-7", bindings: ["phone", "tablet"])),
                ("bob", Self.job(id: "call-2", kind: "call", collapseKey: "c-8", userId: "bob", bindings: ["bob-phone"])),
            ])
        let reader = try kafka.reader()
        let running = harness.start()
        // Let each call be refused twice, so it waits in the retry queue.
        for _ in 0..<200 where sandbox.server.requests.filter(Self.isCall).count < 6 { try await Task.sleep(for: .milliseconds(50)) }
        try await produce(kafka, [("alice", Self.job(id: "cancel-1", kind: "cancel", collapseKey: "c-7", bindings: ["phone", "tablet"]))])
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 4 }
        let cancelledAt = ContinuousClock.now
        // Two more retry rounds of bob's call: alice's would have been sent in them too.
        try await Task.sleep(for: .milliseconds(2500))
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let final = outcomes(messages).compactMap(\.json)
        func text(_ value: JSONValue?) -> String { if case .string(let text)? = value { text } else { "" } }
        let byTarget = Dictionary(grouping: final) { "\(text($0["jobId"]))/\(text($0["bindingId"]))" }
        #expect(byTarget["call-1/phone"]?.count == 1)
        #expect(byTarget["call-1/tablet"]?.count == 1)
        for binding in ["phone", "tablet"] {
            let outcome = byTarget["call-1/\(binding)"]?.first
            #expect(outcome?["status"] == .string("expired"))
            #expect(outcome?["reason"] == .string("cancelled by job cancel-1"))
        }
        #expect(byTarget["cancel-1/phone"]?.first?["status"] == .string("delivered"))
        #expect(byTarget["call-2/bob-phone"] == nil, "bob's call has another key: it is still retrying")

        let requests = sandbox.server.requests
        let aliceCallsAfter = requests.filter { Self.isCall($0) && $0.receivedAt > cancelledAt && bindingOf($0) != "bob-phone" }
        let bobCallsAfter = requests.filter { Self.isCall($0) && $0.receivedAt > cancelledAt && bindingOf($0) == "bob-phone" }
        #expect(aliceCallsAfter.isEmpty, "\(aliceCallsAfter.count) call requests to alice's bindings after the cancel's outcomes")
        #expect(bobCallsAfter.count >= 1, "bob's call kept retrying (the queue was running)")
    }

    @Test(
        "without Redis a call's retry waits in its task without its key: the cancel behind it goes out at once and no retry is sent after it"
    )
    func cancelStopsCallRetryingInProcess() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start(responder: Self.refuseCalls)
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox, store: InMemoryDeliveryStore(), retryQueue: nil) {
            $0.retryPolicy = RetryPolicy(baseMilliseconds: 200, maximumMilliseconds: 400, maximumAttempts: 100)
        }
        try await produce(kafka, [("alice", Self.job(id: "call-1", kind: "call", collapseKey: "c-7", bindings: ["phone"]))])
        let reader = try kafka.reader()
        let running = harness.start()
        for _ in 0..<200 where sandbox.server.requests.filter(Self.isCall).count < 2 { try await Task.sleep(for: .milliseconds(50)) }
        try await produce(kafka, [("alice", Self.job(id: "cancel-1", kind: "cancel", collapseKey: "c-7", bindings: ["phone"]))])
        let messages = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 2 }
        let cancelledAt = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(1000))
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let final = outcomes(messages).compactMap(\.json)
        func text(_ value: JSONValue?) -> String { if case .string(let text)? = value { text } else { "" } }
        let byJob = Dictionary(grouping: final) { text($0["jobId"]) }
        #expect(byJob["cancel-1"]?.first?["status"] == .string("delivered"), "the cancel did not wait for the call's attempts")
        #expect(byJob["call-1"]?.first?["status"] == .string("expired"))
        #expect(byJob["call-1"]?.first?["reason"] == .string("cancelled by job cancel-1"))
        let callsAfter = sandbox.server.requests.filter { Self.isCall($0) && $0.receivedAt > cancelledAt }
        #expect(callsAfter.isEmpty, "\(callsAfter.count) call requests after the cancel's outcome")
    }

    @Test("a call created after the cancel is not stopped by it, though it reuses the key")
    func laterCallWithTheSameKeyGoesOut() async throws {
        let store = InMemoryDeliveryStore()
        let now = currentTimeMilliseconds()
        let decoder = JobDecoder()
        let cancel = try decoder.decode(
            Self.job(id: "cancel-1", kind: "cancel", collapseKey: "c-7", createdAt: now, bindings: ["phone"]),
            fallbackCreatedAt: now)
        try await store.recordCancellation(cancel)
        let earlier = try decoder.decode(
            Self.job(id: "call-1", kind: "call", collapseKey: "c-7", createdAt: now - 1000, bindings: ["phone"]),
            fallbackCreatedAt: now)
        let later = try decoder.decode(
            Self.job(id: "call-2", kind: "call", collapseKey: "c-7", createdAt: now + 1000, bindings: ["phone"]),
            fallbackCreatedAt: now)
        let otherUser = try decoder.decode(
            Self.job(
                id: "call-3", kind: "call", collapseKey: "c-7", userId: "bob", createdAt: now - 1000,
                bindings: ["phone"]), fallbackCreatedAt: now)
        #expect(try await store.cancellation(of: earlier, bindingId: "phone").map { $0.stops(earlier) } == true)
        #expect(try await store.cancellation(of: later, bindingId: "phone").map { $0.stops(later) } == false)
        #expect(try await store.cancellation(of: otherUser, bindingId: "phone") == nil)
        #expect(try await store.cancellation(of: earlier, bindingId: "tablet") == nil)
    }
}

@Suite("A job waiting for its app's slot as a value waits a bounded time", .serialized)
struct SlotWaitBoundTests {
    @Test("a job reserved behind a hung app's only slot starts after the longest slot wait and is handed to be retried, unsent")
    func reservedJobIsHandedToRetry() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        // The first request holds the app's one slot for 8 s.
        let sandbox = try await ProxySandboxFixture.start { request in
            String(decoding: request.body, as: UTF8.self).contains("hung")
                ? SandboxResponse(status: 200, delay: .seconds(8))
                : SandboxResponse(status: 200)
        }
        let queue = RecordingRetryQueue()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox, retryQueue: queue) {
            $0.maximumInFlightPerApp = 1
            $0.attemptTimeout = .milliseconds(200)
        }
        let running = harness.start()
        try await produce(kafka, [("u1", jobJSON(id: "first", targets: [proxyTarget("hung")]))])
        for _ in 0..<200 where sandbox.server.requests.isEmpty { try await Task.sleep(for: .milliseconds(25)) }
        try await produce(kafka, [("u2", jobJSON(id: "second", userId: "u2", targets: [proxyTarget("waits")]))])
        // The second job's wait (600 ms) and the consumer's check (every second) end well before the hung answer.
        for _ in 0..<200 where queue.scheduled.isEmpty { try await Task.sleep(for: .milliseconds(25)) }
        let handedOff = queue.scheduled
        try await harness.stop(running)
        await sandbox.stop()
        #expect(handedOff.map(\.bindingId) == ["waits"])
        #expect(handedOff.first?.attempts == 0)
        #expect(handedOff.first?.lastReason.contains("no slot of this app came free") == true)
        #expect(sandbox.server.requests.count == 1, "the waiting job sent nothing")
    }
}
