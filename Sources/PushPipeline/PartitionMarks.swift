import PushCore
import PushKafka
import Synchronization

/// Which consumed offsets are delivered for the first time, so their idempotency records need no read.
///
/// Each partition this replica owns has a mark in the store (`PartitionMark`): before a job writes anything for
/// its offset (a dedupe claim, a record), the mark covers that offset, raised `stride` offsets ahead at a time
/// under the fence this owner took when the partition was assigned. A new owner reads the mark when it takes the
/// partition: the offsets up to it may have been handed out before (their records are read), the offsets past
/// it never were. An owner whose fence was taken by another cannot raise the mark any more: while Kafka still
/// assigns it the partition it takes the mark again, and reads the records of every offset marked until then.
final class PartitionMarks: Sendable {
    /// How far past the offset being consumed one write raises the mark.
    static let stride: Int64 = 4096

    enum Cover: Sendable, Equatable {
        /// The mark covers the offset, which no owner handed out before.
        case firstDelivery
        /// The mark covers the offset, which may have been handed out before: the records are read.
        case mayBeRedelivered
        /// The partition was revoked, or the pipeline stops.
        case givenUp
    }

    private struct Partition {
        var fence: Int64?
        /// Offsets at or below it may have been handed out by an earlier owner.
        var earlierOwnersThrough: Int64 = .max
        /// Offsets at or below it are covered by this owner's mark.
        var markedThrough: Int64 = -1
        /// The highest offset consumed since the partition was assigned: one at or below it was consumed again (a seek).
        var highestConsumed: Int64 = -1
        var writing = false
        var waiting: [(offset: Int64, continuation: CheckedContinuation<Bool, Never>)] = []

        var isTaken: Bool { fence != nil }

        /// The highest offset consumed or waited for: what the next raise covers.
        var highestWanted: Int64 { max(highestConsumed, waiting.map(\.offset).max() ?? -1) }
    }

    private struct State {
        /// One per partition assigned to this replica (bounded by the topics' partitions).
        var partitions: [TopicPartition: Partition] = [:]
        /// Partitions revoked and not assigned again: a late job of one never takes it back.
        var revoked: Set<TopicPartition> = []
        var stopped = false
    }

    private let state = Mutex(State())
    private let group: String
    private let store: any DeliveryStore
    /// Told of each store operation that answered or failed (which pauses intake while the store is down).
    private let answered: @Sendable () -> Void
    private let failed: @Sendable (any Error) -> Void

    init(
        group: String, store: any DeliveryStore, answered: @escaping @Sendable () -> Void,
        failed: @escaping @Sendable (any Error) -> Void
    ) {
        self.group = group
        self.store = store
        self.answered = answered
        self.failed = failed
    }

    /// On the lane's consumer thread, when partitions are assigned: each is taken from the store now, before its jobs ask.
    func assigned(_ partitions: [TopicPartition]) {
        let taking = state.withLock { state in
            partitions.filter { partition in
                state.revoked.remove(partition)
                guard state.partitions[partition] == nil else { return false }
                state.partitions[partition] = Partition(writing: true)
                return true
            }
        }
        for partition in taking { take(partition) }
    }

    /// On the lane's consumer thread, when partitions are about to be revoked: jobs still waiting for their mark give up.
    func revoked(_ partitions: [TopicPartition]) {
        let waiting = state.withLock { state in
            partitions.flatMap { partition in
                state.revoked.insert(partition)
                return state.partitions.removeValue(forKey: partition)?.waiting.map(\.continuation) ?? []
            }
        }
        for continuation in waiting { continuation.resume(returning: false) }
    }

    /// Gives up every wait: the pipeline stops.
    func stop() {
        let waiting = state.withLock { state in
            state.stopped = true
            defer { for key in state.partitions.keys { state.partitions[key]?.waiting = [] } }
            return state.partitions.values.flatMap { $0.waiting.map(\.continuation) }
        }
        for continuation in waiting { continuation.resume(returning: false) }
    }

    /// On the lane's consumer thread, in the order consumed: whether the offset was consumed before since the
    /// partition was assigned (a seek back), and the mark raised ahead when consumption nears its end.
    func consumed(_ partition: TopicPartition, offset: Int64) -> Bool {
        let (again, raise) = state.withLock { state -> (Bool, Bool) in
            guard var entry = state.partitions[partition] else { return (false, false) }
            let again = offset <= entry.highestConsumed
            entry.highestConsumed = max(entry.highestConsumed, offset)
            let raise = Self.shouldRaise(&entry, for: offset)
            state.partitions[partition] = entry
            return (again, raise)
        }
        if raise { advance(partition) }
        return again
    }

    /// What `cover` answers when it needs no wait; nil when the job has to wait for its mark.
    func coveredNow(_ partition: TopicPartition, offset: Int64, consumedBefore: Bool) -> Cover? {
        state.withLock { state in
            guard !state.stopped, !state.revoked.contains(partition) else { return .givenUp }
            guard let entry = state.partitions[partition], entry.isTaken, entry.markedThrough >= offset else { return nil }
            return Self.cover(entry, offset, consumedBefore)
        }
    }

    /// Waits until the partition's mark covers `offset`: whether its job is a first delivery (`consumedBefore`:
    /// what `consumed` said of it), or `.givenUp`.
    func cover(_ partition: TopicPartition, offset: Int64, consumedBefore: Bool) async -> Cover {
        enum Step {
            case covered(Cover)
            case wait(take: Bool, raise: Bool)
        }
        let step = state.withLock { state -> Step in
            guard !state.stopped, !state.revoked.contains(partition) else { return .covered(.givenUp) }
            var entry = state.partitions[partition] ?? Partition()
            defer { state.partitions[partition] = entry }
            if entry.isTaken, entry.markedThrough >= offset { return .covered(Self.cover(entry, offset, consumedBefore)) }
            // Not assigned through the pipeline (a job processed on its own): taken now.
            let take = entry.fence == nil && !entry.writing
            if take { entry.writing = true }
            return .wait(take: take, raise: Self.shouldRaise(&entry, for: offset))
        }
        switch step {
        case .covered(let cover): return cover
        case .wait(let take, let raise):
            let covered = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard !state.stopped, state.partitions[partition] != nil else { return true }
                    if let entry = state.partitions[partition], entry.isTaken, entry.markedThrough >= offset { return true }
                    state.partitions[partition]!.waiting.append((offset, continuation))
                    return false
                }
                if resumeNow { continuation.resume(returning: true) }
                if take { self.take(partition) } else if raise { advance(partition) }
            }
            guard covered else { return .givenUp }
            return await self.cover(partition, offset: offset, consumedBefore: consumedBefore)
        }
    }

    private static func cover(_ entry: Partition, _ offset: Int64, _ consumedBefore: Bool) -> Cover {
        !consumedBefore && offset > entry.earlierOwnersThrough ? .firstDelivery : .mayBeRedelivered
    }

    /// Whether a write should start to raise the mark past `offset` (and marks it started).
    private static func shouldRaise(_ entry: inout Partition, for offset: Int64) -> Bool {
        guard entry.isTaken, !entry.writing, offset > entry.markedThrough - stride / 2 else { return false }
        entry.writing = true
        return true
    }

    private func take(_ partition: TopicPartition) {
        let marked = MarkedPartition(group: group, topic: partition.topic, partition: partition.partition)
        Task { [store] in
            let mark = await untilAnswered(partition, fence: nil) { try await store.takeMark(of: marked) }
            let raise = state.withLock { state -> Bool in
                guard let mark, var entry = state.partitions[partition], entry.fence == nil else { return false }
                entry.fence = mark.fence
                // A take again after losing the fence reads every offset marked until then, this owner's included.
                entry.earlierOwnersThrough = mark.offset ?? -1
                entry.markedThrough = mark.offset ?? -1
                entry.writing = false
                let raise = Self.shouldRaise(&entry, for: entry.highestWanted)
                state.partitions[partition] = entry
                return raise
            }
            if raise { advance(partition) } else { resumeCovered(partition) }
        }
    }

    private func advance(_ partition: TopicPartition) {
        let marked = MarkedPartition(group: group, topic: partition.topic, partition: partition.partition)
        guard
            let (fence, target) = state.withLock({ state -> (Int64, Int64)? in
                guard let entry = state.partitions[partition], let fence = entry.fence else { return nil }
                return (fence, max(entry.highestWanted, entry.markedThrough).adding(saturating: Self.stride))
            })
        else { return }
        Task { [store] in
            let advanced = await untilAnswered(partition, fence: fence) {
                try await store.advanceMark(of: marked, fence: fence, to: target)
            }
            enum Next { case nothing, raise, takeAgain }
            let next = state.withLock { state -> Next in
                guard let advanced, var entry = state.partitions[partition], entry.fence == fence else { return .nothing }
                defer { state.partitions[partition] = entry }
                guard advanced else {
                    // Another owner took the fence (a late take of a replica that lost the partition, or the next
                    // owner before this one's revocation): Kafka still assigns the partition here, so take it again.
                    entry.fence = nil
                    return .takeAgain
                }
                entry.markedThrough = max(entry.markedThrough, target)
                entry.writing = false
                return Self.shouldRaise(&entry, for: entry.highestWanted) ? .raise : .nothing
            }
            resumeCovered(partition)
            switch next {
            case .nothing: break
            case .raise: advance(partition)
            case .takeAgain: take(partition)
            }
        }
    }

    /// Runs a store operation until it answers, waiting 100 ms to 2 s between failures; nil once the partition is
    /// revoked, taken again (`fence` is no longer its fence) or the pipeline stops.
    private func untilAnswered<T: Sendable>(
        _ partition: TopicPartition, fence: Int64?, _ operation: @Sendable () async throws -> T
    ) async -> T? {
        var backoff = Duration.milliseconds(100)
        while state.withLock({ !$0.stopped && $0.partitions[partition].map { $0.fence == fence } == true }) {
            do {
                let value = try await operation()
                answered()
                return value
            } catch {
                failed(error)
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(2))
            }
        }
        return nil
    }

    /// Resumes the jobs whose offsets the mark covers now.
    private func resumeCovered(_ partition: TopicPartition) {
        let covered = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            guard var entry = state.partitions[partition], entry.isTaken else { return [] }
            let ready = entry.waiting.filter { $0.offset <= entry.markedThrough }.map(\.continuation)
            entry.waiting.removeAll { $0.offset <= entry.markedThrough }
            state.partitions[partition] = entry
            return ready
        }
        for continuation in covered { continuation.resume(returning: true) }
    }
}
