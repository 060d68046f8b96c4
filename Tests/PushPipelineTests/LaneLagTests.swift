import Dispatch
import ProxyPlugin
import PushCore
import PushInMemoryKafka
import PushKafka
import Synchronization
import Testing
import TestSupport
@testable import PushPipeline

/// A provider that holds every delivery until `release()`.
private final class GateProvider: PushProvider {
    let id = ProviderID.proxy
    let targetFormat: any TargetFormat = ProxyTargetFormat()
    private let state = Mutex((open: false, waiting: [CheckedContinuation<Void, Never>]()))

    func scope(of target: Target) -> DeliveryScope { DeliveryScope.app(of: target) }

    func release() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume() }
    }

    func deliver(_ delivery: Delivery) async -> DeliveryResult {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state in
                if !state.open { state.waiting.append(waiter) }
                return state.open
            }
            if open { waiter.resume() }
        }
        return .delivered(providerMessageId: nil, httpStatus: 200)
    }
}

/// Each lane's source, whose polls block while `stall()` holds: a lane whose thread stopped polling.
private final class StallingSources: MessageSourceFactory {
    private final class Gate: Sendable {
        let state = Mutex((stalled: false, blocked: false))
        let resumed = DispatchSemaphore(value: 0)

        func pass() {
            let stalled = state.withLock { state in
                if state.stalled { state.blocked = true }
                return state.stalled
            }
            guard stalled else { return }
            resumed.wait()
            state.withLock { $0.blocked = false }
        }
    }

    private final class Source: MessageSource {
        let inner: any MessageSource
        let gate: Gate

        init(inner: any MessageSource, gate: Gate) {
            self.inner = inner
            self.gate = gate
        }

        func poll(maximum: Int, timeoutMilliseconds: Int32) -> [KafkaMessage] {
            gate.pass()
            return inner.poll(maximum: maximum, timeoutMilliseconds: timeoutMilliseconds)
        }
        func storeOffset(_ offset: Int64, for topicPartition: TopicPartition) { inner.storeOffset(offset, for: topicPartition) }
        func pauseAll() { inner.pauseAll() }
        func resumeAll() { inner.resumeAll() }
        func pause(_ partitions: [TopicPartition]) { inner.pause(partitions) }
        func resume(_ partitions: [TopicPartition]) { inner.resume(partitions) }
        func close() { inner.close() }
    }

    private let inner: any MessageSourceFactory
    private let gate = Gate()

    init(_ inner: any MessageSourceFactory) { self.inner = inner }

    func makeSource(lane: Lane, topic: String, rebalance: @escaping @Sendable (RebalanceEvent) -> Void) throws -> any MessageSource {
        let source = try inner.makeSource(lane: lane, topic: topic, rebalance: rebalance)
        return lane == .normal ? Source(inner: source, gate: gate) : source
    }

    func stall() { gate.state.withLock { $0.stalled = true } }
    var blocked: Bool { gate.state.withLock { $0.blocked } }

    func resume() {
        let blocked = gate.state.withLock { state in
            state.stalled = false
            return state.blocked
        }
        if blocked { gate.resumed.signal() }
    }
}

@Suite("Lane lag: sampled on a timer, back to 0 on an idle lane, growing on a lane that stops reading")
struct LaneLagTests {
    static let minute: Int64 = 60_000

    @Test("a lane that read everything and holds nothing has no lag, however late its last message was produced")
    func caughtUpLaneHasNoLag() {
        let clock = FakeClock()
        var lag = LaneLag(startingAt: clock.milliseconds)
        lag.read(1, of: 256, lastTimestamp: clock.milliseconds - 10 * Self.minute, at: clock.milliseconds)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 0)
        clock.advance(milliseconds: 100)
        lag.read(0, of: 256, lastTimestamp: nil, at: clock.milliseconds)
        clock.advance(milliseconds: 500)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 0)
    }

    @Test("a lane that stops reading once caught up shows the time since its last read, growing")
    func stoppedLaneLagGrowsFromItsLastRead() {
        let clock = FakeClock()
        var lag = LaneLag(startingAt: clock.milliseconds)
        lag.read(0, of: 256, lastTimestamp: nil, at: clock.milliseconds)
        clock.advance(milliseconds: LaneLag.readingGap)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 0, "within the reading gap a lane is reading")
        clock.advance(milliseconds: 4000)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 5000)
        clock.advance(milliseconds: 10_000)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 15_000)
    }

    @Test("a lane that never reads after it starts shows the time since it started, growing")
    func laneThatNeverReadsLags() {
        let clock = FakeClock()
        let lag = LaneLag(startingAt: clock.milliseconds)
        clock.advance(milliseconds: 3000)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 3000)
    }

    @Test("a lane that stops reading after a full batch shows the age of the last message it read, growing")
    func stoppedAfterFullBatchGrowsFromLastMessage() {
        let clock = FakeClock()
        var lag = LaneLag(startingAt: clock.milliseconds)
        lag.read(256, of: 256, lastTimestamp: clock.milliseconds - 2000, at: clock.milliseconds)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 2000)
        clock.advance(milliseconds: 10_000)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: nil) == 12_000)
    }

    @Test("a message held without its turn counts from its Kafka timestamp, even when the lane read everything")
    func heldMessageCounts() {
        let clock = FakeClock()
        var lag = LaneLag(startingAt: clock.milliseconds)
        lag.read(3, of: 256, lastTimestamp: clock.milliseconds, at: clock.milliseconds)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: clock.milliseconds - 7000) == 7000)
        #expect(lag.milliseconds(at: clock.milliseconds, oldestHeld: clock.milliseconds + 7000) == 0, "a producer clock ahead is no lag")
    }

    /// A pipeline on an in-memory log whose clock is `clock`.
    private static func pipeline(
        _ kafka: InMemoryKafka, sources: any MessageSourceFactory, provider: any PushProvider, clock: FakeClock, maximumInFlight: Int = 1000
    ) -> DeliveryPipeline {
        let configuration = PipelineConfiguration(maximumInFlightJobs: maximumInFlight, shutdownGrace: .seconds(2))
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(), retryQueue: nil,
            logger: testLogger(), clock: { clock.milliseconds })
        return DeliveryPipeline(
            configuration: configuration, sources: sources, sink: kafka.sink, processor: processor, logger: testLogger())
    }

    private static func job(_ id: String, user: String) -> KafkaRecord {
        KafkaRecord(topic: "push.jobs", key: Array(user.utf8), value: jobJSON(id: id, userId: user, targets: [proxyTarget("b-\(id)")]))
    }

    @Test(
        "an idle lane's lag returns to 0: a message produced 10 minutes late shows while it waits for capacity, grows while the lane cannot read, and is gone once the lane has started it and read everything"
    )
    func idleLaneLagReturnsToZero() async throws {
        let clock = FakeClock()
        let kafka = InMemoryKafka(topics: ["push.jobs": 1, "push.jobs.urgent": 1, "push.outcomes": 1, "push.dlq": 1])
        kafka.append(Self.job("first", user: "a"), timestamp: clock.milliseconds)
        kafka.append(Self.job("late", user: "b"), timestamp: clock.milliseconds - 10 * Self.minute)
        let provider = GateProvider()
        let pipeline = Self.pipeline(kafka, sources: kafka.sources(group: "lag"), provider: provider, clock: clock, maximumInFlight: 1)
        let running = Task { try await pipeline.run() }
        try await waitUntil(timeout: .seconds(30)) { pipeline.inFlightJobs(in: .normal) == 2 }
        let waiting = try #require(pipeline.sampleLaneLag()[.normal])
        #expect(waiting >= 10 * Self.minute, "the late message waits for the one place the first job holds")
        clock.advance(milliseconds: 10_000)
        #expect(pipeline.sampleLaneLag()[.normal] == waiting + 10_000, "at capacity the lane reads nothing: its lag grows")

        provider.release()
        try await waitUntil(timeout: .seconds(30)) { kafka.position(group: "lag") == [TopicPartition(topic: "push.jobs", partition: 0): 2] }
        try await waitUntil(timeout: .seconds(30)) { pipeline.sampleLaneLag()[.normal] == 0 }
        #expect(pipeline.sampleLaneLag() == [.normal: 0, .urgent: 0])
        pipeline.stop()
        try await running.value
    }

    @Test(
        "a lane whose thread stops polling shows its lag growing from its last read, not frozen at its last value; it returns to 0 once the lane reads again"
    )
    func laneThatStopsPollingShowsGrowingLag() async throws {
        let clock = FakeClock()
        let kafka = InMemoryKafka(topics: ["push.jobs": 1, "push.jobs.urgent": 1, "push.outcomes": 1, "push.dlq": 1])
        let sources = StallingSources(kafka.sources(group: "stalling"))
        let pipeline = Self.pipeline(kafka, sources: sources, provider: GateProvider(), clock: clock)
        let running = Task { try await pipeline.run() }
        try await waitUntil(timeout: .seconds(30)) { pipeline.readiness.ready }
        #expect(pipeline.sampleLaneLag()[.normal] == 0)

        sources.stall()
        try await waitUntil(timeout: .seconds(30)) { sources.blocked }
        clock.advance(milliseconds: 5000)
        #expect(pipeline.sampleLaneLag()[.normal] == 5000)
        clock.advance(milliseconds: 10_000)
        #expect(pipeline.sampleLaneLag()[.normal] == 15_000)
        // The other lane reads on: its next read, stamped with the advanced clock, brings it back to 0.
        try await waitUntil(timeout: .seconds(10)) { pipeline.sampleLaneLag()[.urgent] == 0 }
        #expect(pipeline.sampleLaneLag()[.normal] == 15_000)

        sources.resume()
        try await waitUntil(timeout: .seconds(30)) { pipeline.sampleLaneLag()[.normal] == 0 }
        pipeline.stop()
        try await running.value
    }
}
