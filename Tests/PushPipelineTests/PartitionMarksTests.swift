import PushCore
import PushKafka
import Synchronization
import Testing

@testable import PushPipeline

@Suite("Partition marks: which consumed offsets are first deliveries")
struct PartitionMarksTests {
    static let partition = TopicPartition(topic: "push.jobs", partition: 0)
    static let marked = MarkedPartition(group: "g", topic: "push.jobs", partition: 0)

    static func marks(_ store: any DeliveryStore) -> PartitionMarks {
        PartitionMarks(group: "g", store: store, answered: {}, failed: { _ in })
    }

    @Test("on a partition no owner marked, every offset consumed is a first delivery, and the mark covers it before the job goes on")
    func freshPartition() async throws {
        let store = InMemoryDeliveryStore()
        let marks = Self.marks(store)
        marks.assigned([Self.partition])
        for offset in Int64(0)..<10 {
            let before = marks.consumed(Self.partition, offset: offset)
            #expect(await marks.cover(Self.partition, offset: offset, consumedBefore: before) == .firstDelivery)
        }
        let mark = try await store.takeMark(of: Self.marked)
        #expect((mark.offset ?? -1) >= 9, "the store's mark covers what was handed out")
    }

    @Test("after another owner, the offsets it marked may be redeliveries and the ones past them are first deliveries")
    func afterAnotherOwner() async throws {
        let store = InMemoryDeliveryStore()
        let earlier = try await store.takeMark(of: Self.marked)
        #expect(try await store.advanceMark(of: Self.marked, fence: earlier.fence, to: 100))
        let marks = Self.marks(store)
        marks.assigned([Self.partition])
        for offset: Int64 in [50, 100, 101, 5000] {
            let before = marks.consumed(Self.partition, offset: offset)
            #expect(
                await marks.cover(Self.partition, offset: offset, consumedBefore: before)
                    == (offset <= 100 ? .mayBeRedelivered : .firstDelivery))
        }
        #expect(try await !store.advanceMark(of: Self.marked, fence: earlier.fence, to: 200_000), "the earlier owner is fenced off")
    }

    @Test("an offset consumed again in the same assignment (a seek back) is read as a possible redelivery")
    func consumedAgain() async {
        let marks = Self.marks(InMemoryDeliveryStore())
        marks.assigned([Self.partition])
        #expect(!marks.consumed(Self.partition, offset: 7))
        #expect(await marks.cover(Self.partition, offset: 7, consumedBefore: false) == .firstDelivery)
        let again = marks.consumed(Self.partition, offset: 7)
        #expect(again)
        #expect(await marks.cover(Self.partition, offset: 7, consumedBefore: again) == .mayBeRedelivered)
    }

    @Test("a job of a revoked partition, or of a stopped pipeline, gives up instead of taking the partition back")
    func revokedAndStopped() async throws {
        let store = InMemoryDeliveryStore()
        let marks = Self.marks(store)
        marks.assigned([Self.partition])
        _ = marks.consumed(Self.partition, offset: 1)
        #expect(await marks.cover(Self.partition, offset: 1, consumedBefore: false) == .firstDelivery)
        marks.revoked([Self.partition])
        #expect(await marks.cover(Self.partition, offset: 2, consumedBefore: false) == .givenUp)
        let fence = try await store.takeMark(of: Self.marked).fence
        #expect(fence == 2, "the revoked owner took the partition once, and never again")
        let other = TopicPartition(topic: "push.jobs", partition: 1)
        marks.assigned([other])
        marks.stop()
        #expect(await marks.cover(other, offset: 1, consumedBefore: false) == .givenUp)
    }

    @Test("an owner whose fence another took takes the mark again, and reads every offset marked until then")
    func fenceTakenByAnother() async throws {
        let store = InMemoryDeliveryStore()
        let marks = Self.marks(store)
        marks.assigned([Self.partition])
        _ = marks.consumed(Self.partition, offset: 0)
        #expect(await marks.cover(Self.partition, offset: 0, consumedBefore: false) == .firstDelivery)
        // A late take by a replica that lost the partition.
        _ = try await store.takeMark(of: Self.marked)
        let beyond = PartitionMarks.stride * 2
        _ = marks.consumed(Self.partition, offset: beyond)
        #expect(await marks.cover(Self.partition, offset: beyond, consumedBefore: false) == .firstDelivery)
        let past = beyond + PartitionMarks.stride * 3
        _ = marks.consumed(Self.partition, offset: past)
        let cover = await marks.cover(Self.partition, offset: past, consumedBefore: false)
        let mark = try await store.takeMark(of: Self.marked)
        #expect(cover != .givenUp)
        #expect((mark.offset ?? -1) >= past, "the mark covers the offset before its job goes on")
    }

    @Test("a job processed without an assignment (no pipeline) takes its partition's mark itself")
    func withoutAssignment() async {
        let marks = Self.marks(InMemoryDeliveryStore())
        #expect(await marks.cover(Self.partition, offset: 3, consumedBefore: false) == .firstDelivery)
    }

    @Test("while the store fails, a job waits for its mark and goes on once the store answers")
    func storeDown() async throws {
        let store = FlakyMarkStore()
        let marks = PartitionMarks(group: "g", store: store, answered: {}, failed: { _ in })
        marks.assigned([Self.partition])
        _ = marks.consumed(Self.partition, offset: 0)
        async let cover = marks.cover(Self.partition, offset: 0, consumedBefore: false)
        try await Task.sleep(for: .milliseconds(300))
        store.recover()
        #expect(await cover == .firstDelivery)
        #expect(store.refused > 0)
    }
}

/// An in-memory store whose marks fail until `recover()`.
private final class FlakyMarkStore: DeliveryStore {
    private let store = InMemoryDeliveryStore()
    private let state = Mutex((failing: true, refused: 0))

    var refused: Int { state.withLock { $0.refused } }
    func recover() { state.withLock { $0.failing = false } }

    private struct Refused: Error {}

    private func refuse() throws {
        if state.withLock({ state in
            if state.failing { state.refused += 1 }
            return state.failing
        }) {
            throw Refused()
        }
    }

    func prepare(
        _ job: Job, dedupeWindow: Int64, firstDelivery: Bool, completion: @escaping @Sendable (Result<[PriorState], any Error>) -> Void
    ) {
        store.prepare(job, dedupeWindow: dedupeWindow, firstDelivery: firstDelivery, completion: completion)
    }
    func record(_ outcomes: [EncodedOutcome], completion: @escaping @Sendable ((any Error)?) -> Void) {
        store.record(outcomes, completion: completion)
    }
    func recordedOutcome(of job: Job, target: Target) async throws -> Outcome? { try await store.recordedOutcome(of: job, target: target) }
    func recordCancellation(_ cancel: Job) async throws {
        try await store.recordCancellation(cancel)
    }
    func cancellation(of call: Job, bindingId: String) async throws -> CallCancellation? {
        try await store.cancellation(of: call, bindingId: bindingId)
    }
    func takeMark(of partition: MarkedPartition) async throws -> PartitionMark {
        try refuse()
        return try await store.takeMark(of: partition)
    }
    func advanceMark(of partition: MarkedPartition, fence: Int64, to offset: Int64) async throws -> Bool {
        try refuse()
        return try await store.advanceMark(of: partition, fence: fence, to: offset)
    }
}
