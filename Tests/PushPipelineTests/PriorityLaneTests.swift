import Foundation
import Synchronization
import PushCore
import PushHTTP
import PushKafka
import PushSandbox
import Testing
import TestSupport
@testable import PushPipeline

/// A proxy target of a named app (the app is what the per-app concurrency limit keys on).
func appTarget(_ bindingId: String, app: String) -> String {
    #"{"bindingId":"\#(bindingId)","provider":"proxy","app":"\#(app)","token":"tok-\#(bindingId)","tokenType":"fcm","platform":"android"}"#
}

private func produce(_ kafka: KafkaFixture, topic: String, _ jobs: [(key: String, value: [UInt8])]) async throws {
    let producer = try kafka.producer()
    for start in stride(from: 0, to: jobs.count, by: 5000) {
        let batch = jobs[start..<min(start + 5000, jobs.count)]
        try await producer.send(batch.map { KafkaRecord(topic: topic, key: Array($0.key.utf8), value: $0.value) })
    }
    producer.close()
}

@Suite("Priority lanes: a call never waits behind a chat backlog", .serialized)
struct PriorityLaneTests {
    // The issue asks for 20k messages; 3k keep this test near 15 s in a debug build on 2 cores (20k took
    // 63 s and, running beside the other suites, starved their timing-sensitive tests) and still leave the
    // call thousands of messages to overtake. `push-worker-dev bench --scenario backlog` measures 100k.
    @Test("a call produced behind 3k queued messages is delivered before the backlog drains (its outcome precedes most message outcomes)")
    func callOvertakesBacklog() async throws {
        let backlog = 3_000
        let kafka = try KafkaFixture(partitions: 2)
        let sandbox = try await ProxySandboxFixture.start()
        // A modest in-flight limit keeps this test from flooding the cooperative pool that parallel suites share.
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox) {
            $0.maximumInFlightJobs = 100
            $0.urgentReservedInFlightJobs = 10
        }
        try await produce(
            kafka, topic: kafka.jobsTopic,
            (0..<backlog).map { index in
                ("chat-u\(index % 500)", jobJSON(id: "m\(index)", userId: "chat-u\(index % 500)", targets: [proxyTarget("mb\(index)")]))
            })
        let reader = try kafka.reader()
        let running = harness.start()
        // The backlog is being worked on when the call comes in.
        _ = await reader.wait(timeout: .seconds(60)) { outcomes($0).count >= 150 }
        let producedAt = ContinuousClock.now
        try await produce(
            kafka, topic: kafka.urgentTopic,
            [
                (
                    "callee",
                    jobJSON(
                        id: "the-call", kind: "call", userId: "callee", ttl: 30,
                        targets: [proxyTarget("callee-phone")])
                )
            ])
        let all = await reader.wait(timeout: .seconds(120)) { outcomes($0).count >= backlog + 1 }
        let elapsed = ContinuousClock.now - producedAt
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        let published = outcomes(all)
        #expect(published.count == backlog + 1)
        let position = try #require(published.firstIndex { $0.json?["jobId"] == .string("the-call") })
        #expect(published[position].json?["status"] == .string("delivered"))
        // Most of the backlog was still queued when the call's outcome came out.
        #expect(
            position < backlog / 2, "the call came out after \(position) of \(backlog) message outcomes (\(elapsed) after it was produced)")
    }

    @Test(
        "a stalled app (its endpoint hangs) does not stop other apps' deliveries from the same partition; its waiting jobs are not started and a stop gives them up unsent"
    )
    func stalledAppDoesNotBlockOthers() async throws {
        _ = TestMetrics.registry
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        // The apps a configuration would name, so that they are metric labels.
        let metrics = PipelineMetrics(appLabels: MetricAppLabels(["proxy": ["stalled", "healthy-0", "healthy-1"]]))
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox, metrics: metrics) {
            $0.maximumInFlightJobs = 40
            $0.urgentReservedInFlightJobs = 5
            $0.maximumInFlightPerApp = 5
        }
        var jobs: [(key: String, value: [UInt8])] = []
        for index in 0..<300 {
            if index % 5 == 0 {  // 60 stalled jobs: more than the 35 the normal lane may work on at once
                jobs.append(
                    (
                        "hang-u\(index)",
                        jobJSON(id: "s\(index)", userId: "hang-u\(index)", targets: [appTarget("sb\(index)", app: "stalled")])
                    ))
            } else {
                jobs.append(
                    (
                        "u\(index)",
                        jobJSON(id: "h\(index)", userId: "u\(index)", targets: [appTarget("hb\(index)", app: "healthy-\(index % 2)")])
                    ))
            }
        }
        try await produce(kafka, topic: kafka.jobsTopic, jobs)
        let reader = try kafka.reader()
        let running = harness.start()
        let received = await reader.wait(timeout: .seconds(25)) { outcomes($0).count >= 240 }
        let stalledRequests = sandbox.server.requests.filter { String(decoding: $0.body, as: UTF8.self).contains("hang-u") }.count
        let running5 = harness.processor.appLimits.running(DeliveryScope(provider: .proxy, key: "stalled"))
        // The healthy jobs' tasks end just after their outcomes are acknowledged.
        let settled = ContinuousClock.now + .seconds(30)
        while harness.pipeline.startedJobs > 5, ContinuousClock.now < settled { try await Task.sleep(for: .milliseconds(20)) }
        let (started, waiting) = (harness.pipeline.startedJobs, harness.pipeline.jobsWaitingForAppSlot)
        harness.pipeline.stop()
        let waitingAfterStop = harness.pipeline.jobsWaitingForAppSlot
        try await harness.stop(running)
        let stalledRequestsAfterStop = sandbox.server.requests.filter { String(decoding: $0.body, as: UTF8.self).contains("hang-u") }.count
        reader.stop()
        await sandbox.stop()

        let published = outcomes(received)
        let healthy = published.filter { $0.json?["app"].map { $0 != .string("stalled") } ?? false }
        #expect(healthy.count == 240, "other apps' outcomes while one app hangs: \(healthy.count) of 240")
        #expect(healthy.allSatisfy { $0.json?["status"] == .string("delivered") })
        #expect(stalledRequests <= 5, "requests to the stalled app at once: \(stalledRequests)")
        #expect(running5 == 5)
        #expect(started == 5, "only the jobs sending to the stalled app are started")
        #expect(waiting == 55, "the other stalled jobs wait for a slot as values")
        #expect(waitingAfterStop == 0, "a stop gives up the jobs waiting for a slot at once")
        #expect(stalledRequestsAfterStop == stalledRequests, "slots freed by the stop's cancellations start none of the given-up jobs")
        #expect((TestMetrics.value(of: #"push_app_concurrency_limited_total{provider="proxy",app="stalled"}"#) ?? 0) >= 1)
    }

    @Test("shedding only ever expires messages, with reason shed: calls, cancels and the urgent lane are never shed")
    func sheddingOnlyExpiresMessages() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let harness = try PipelineHarness(kafka: kafka, sandbox: sandbox) {
            $0.shedPolicy = ShedPolicy(lagThresholdMilliseconds: 1000)
        }
        let producedAt = currentTimeMilliseconds()
        // TTL 12 s from the produce time; consumed after a ≥ 7 s lag (4 s wait + the group join), ~5 s are left: less than the lag.
        func job(_ id: String, _ kind: String, ttl: Int) -> (key: String, value: [UInt8]) {
            (id, jobJSON(id: id, kind: kind, userId: id, ttl: ttl, createdAt: producedAt, targets: [proxyTarget("b-\(id)")]))
        }
        try await produce(
            kafka, topic: kafka.jobsTopic,
            [
                job("short-message-1", "message", ttl: 12), job("call-1", "call", ttl: 12), job("cancel-1", "cancel", ttl: 12),
                job("short-message-2", "message", ttl: 12), job("long-message", "message", ttl: 3600), job("wake-1", "wake", ttl: 12),
            ])
        try await produce(kafka, topic: kafka.urgentTopic, [job("urgent-message", "message", ttl: 12)])
        try await Task.sleep(for: .seconds(4))
        let reader = try kafka.reader()
        let running = harness.start()
        let received = await reader.wait(timeout: .seconds(30)) { outcomes($0).count >= 7 }
        try await harness.stop(running)
        reader.stop()
        await sandbox.stop()

        var statuses: [String: (String, String?)] = [:]
        for message in outcomes(received) {
            guard let json = message.json, case .string(let id)? = json["jobId"], case .string(let status)? = json["status"] else {
                continue
            }
            if case .string(let reason)? = json["reason"] { statuses[id] = (status, reason) } else { statuses[id] = (status, nil) }
        }
        #expect(statuses.count == 7)
        #expect(statuses["short-message-1"]?.0 == "expired" && statuses["short-message-1"]?.1 == "shed")
        #expect(statuses["short-message-2"]?.0 == "expired" && statuses["short-message-2"]?.1 == "shed")
        for id in ["call-1", "cancel-1", "long-message", "wake-1", "urgent-message"] {
            #expect(statuses[id]?.0 == "delivered", "\(id): \(String(describing: statuses[id]))")
        }
        #expect(!statuses.values.contains { $0.0 != "expired" && $0.1 == "shed" })
        #expect(sandbox.server.requests.count == 5)
    }

    @Test("the shed rule: only a message on the normal lane, past the lag threshold, whose remaining TTL is below the lag")
    func shedRule() {
        let policy = ShedPolicy(lagThresholdMilliseconds: 1000)
        let deadline = Deadline(createdAt: 0, ttlSeconds: 10)  // expires at 10 000
        #expect(policy.sheds(kind: .message, deadline: deadline, lane: .normal, lagMilliseconds: 6000, now: 6000))  // 4 s left < 6 s lag
        #expect(!policy.sheds(kind: .message, deadline: deadline, lane: .normal, lagMilliseconds: 4000, now: 4000))  // 6 s left ≥ 4 s lag
        #expect(!policy.sheds(kind: .message, deadline: deadline, lane: .normal, lagMilliseconds: 900, now: 9500))  // under the threshold
        for kind in JobKind.allCases where kind != .message {
            #expect(!policy.sheds(kind: kind, deadline: deadline, lane: .normal, lagMilliseconds: 9000, now: 9000))
        }
        #expect(!policy.sheds(kind: .message, deadline: deadline, lane: .urgent, lagMilliseconds: 9000, now: 9000))
        #expect(!ShedPolicy.off.sheds(kind: .message, deadline: deadline, lane: .normal, lagMilliseconds: 9000, now: 9000))
    }

    @Test("a request waiting for its app's slot gives way to an urgent one and gives up on cancellation")
    func appSlotsPreferUrgentAndCancel() async throws {
        let limits = AppConcurrencyLimits(limit: 1, metrics: PipelineMetrics())
        let target = DeliveryScope.app(
            of: try #require(JobDecoder().decode(jobJSON(id: "j", targets: [appTarget("b", app: "a")]), fallbackCreatedAt: 0).targets.first)
        )
        #expect(await limits.acquire(target, lane: .normal, parking: nil))
        let order = OrderLog()
        let normal = Task {
            if await limits.acquire(target, lane: .normal, parking: nil) {
                order.append("normal")
                limits.release(target)
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        let urgent = Task {
            if await limits.acquire(target, lane: .urgent, parking: nil) {
                order.append("urgent")
                limits.release(target)
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        let cancelled = Task { await limits.acquire(target, lane: .normal, parking: nil) }
        try await Task.sleep(for: .milliseconds(100))
        cancelled.cancel()
        #expect(await cancelled.value == false)
        limits.release(target)
        await normal.value
        await urgent.value
        #expect(order.entries == ["urgent", "normal"])
        #expect(limits.running(DeliveryScope(provider: .proxy, key: "a")) == 0)
    }
}

extension PriorityLaneTests {
    @Test(
        "a job reserves its app slot without a task: it waits in the same queue as running requests, urgent first, until granted once or withdrawn"
    )
    func reservationsWaitAsValues() async throws {
        let limits = AppConcurrencyLimits(limit: 1, metrics: PipelineMetrics())
        let scope = DeliveryScope(provider: .proxy, key: "a")
        let reservations = SlotReservations(limits)
        func reserve(_ name: String, _ lane: Lane) -> AppConcurrencyLimits.Reservation { reservations.reserve(name, scope, lane: lane) }
        #expect(await limits.acquire(scope, lane: .normal, parking: nil))
        guard case .waitingForApp(let normal) = reserve("normal", .normal), case .waitingForApp(let urgent) = reserve("urgent", .urgent),
            case .waitingForApp(let withdrawn) = reserve("withdrawn", .normal)
        else {
            Issue.record("a reservation took a slot held by a running request")
            return
        }
        #expect(reservations.withdraw([withdrawn]) == [withdrawn])
        limits.release(scope)
        var urgentSlot: SlotPermit? = try #require(reservations.granted["urgent"], "the urgent reservation goes first")
        #expect(reservations.granted["normal"] == nil)
        let takenFirst = urgentSlot.take(for: scope)
        let takenAgain = urgentSlot.take(for: scope)
        #expect(takenFirst)
        #expect(!takenAgain, "a reserved slot serves one send")
        limits.giveBack(&urgentSlot)
        #expect(limits.running(scope) == 1, "giving back a slot already taken frees nothing")
        limits.release(scope)
        var normalSlot: SlotPermit? = try #require(reservations.granted["normal"])
        #expect(reservations.withdraw([normal, urgent]).isEmpty, "granted reservations cannot be withdrawn")
        let takenForAnother = normalSlot.take(for: DeliveryScope(provider: .proxy, key: "b"))
        #expect(!takenForAnother, "a slot is taken only for its own scope")
        limits.giveBack(&normalSlot)
        limits.giveBack(&normalSlot)
        #expect(limits.running(scope) == 0)
        #expect(reservations.granted["withdrawn"] == nil)
        guard case .granted(let free) = reserve("free", .normal) else {
            Issue.record("a free slot was not granted at once")
            return
        }
        reservations.giveBack(free)
        #expect(limits.running(scope) == 0)
    }
}

private final class OrderLog: Sendable {
    private let state = Mutex<[String]>([])
    func append(_ entry: String) { state.withLock { $0.append(entry) } }
    var entries: [String] { state.withLock { $0 } }
}
