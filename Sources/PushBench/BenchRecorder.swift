import Histogram
import PushCore
import PushKafka
import PushPipeline
import Synchronization

/// Collects, from the pipeline's acknowledgements, what the report needs: when the first
/// of the run's jobs was consumed and the last acknowledged, latency histograms and
/// counts by outcome status. Jobs that are not this run's are ignored.
final class BenchRecorder: PipelineObserver {
    struct Snapshot: Sendable {
        /// Final outcomes and dead letters (each bench job has one target).
        var finished = 0
        var firstConsumed: ContinuousClock.Instant?
        var lastAcknowledged: ContinuousClock.Instant?
        /// Consumed (the job's task started) → outcomes acknowledged, in microseconds (retried targets not included).
        var pipelineLatency = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
        /// Of it: task started → targets done (store checks, provider answers, outcomes recorded), in microseconds.
        var processingLatency = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
        /// Of it: targets done → outcomes acknowledged by Kafka, in microseconds.
        var publishingLatency = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
        /// Kafka timestamp (producer's clock) → outcomes acknowledged, in milliseconds.
        var endToEndLatency = Histogram<UInt64>(highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .three)
        var statuses: [String: Int] = [:]
        /// Calls of the backlog scenario, kept apart from the other jobs (not in `finished`).
        var calls = 0
        var callStatuses: [String: Int] = [:]
        /// A call's Kafka timestamp → its outcome acknowledged, in milliseconds.
        var callLatency = Histogram<UInt64>(highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .three)
    }

    private let jobs: BenchJobs
    private let state = Mutex(Snapshot())

    init(jobs: BenchJobs) {
        self.jobs = jobs
    }

    var snapshot: Snapshot { state.withLock { $0 } }

    func reset() { state.withLock { $0 = Snapshot() } }

    func acknowledged(_ publications: [Publication], timeline: JobTimeline?, kafkaTimestamp: Int64?) {
        let ours = publications.filter { publication in
            switch publication {
            case .outcome(let outcome): jobs.isOurs(jobId: outcome.jobId)
            case .deadLetter(_, _, let key, _): jobs.isOurs(key: key)
            }
        }
        guard !ours.isEmpty else { return }
        let now = ContinuousClock.now
        let wallClock = currentTimeMilliseconds()
        state.withLock { state in
            for publication in ours {
                switch publication {
                case .outcome(let outcome) where BenchJobs.isCall(jobId: outcome.jobId):
                    state.callStatuses[outcome.status.rawValue, default: 0] += 1
                    guard outcome.status != .retrying else { continue }
                    state.calls += 1
                    if let kafkaTimestamp {
                        _ = state.callLatency.record(UInt64(max(wallClock.subtracting(saturating: kafkaTimestamp), 0)))
                    }
                case .outcome(let outcome):
                    state.statuses[outcome.status.rawValue, default: 0] += 1
                    if outcome.status != .retrying { state.finished += 1 }
                case .deadLetter:
                    state.statuses["dead-letter", default: 0] += 1
                    state.finished += 1
                }
            }
            let onlyCalls = ours.allSatisfy { if case .outcome(let outcome) = $0 { BenchJobs.isCall(jobId: outcome.jobId) } else { false } }
            guard !onlyCalls else { return }
            state.lastAcknowledged = now
            if let timeline {
                if state.firstConsumed.map({ timeline.started < $0 }) ?? true { state.firstConsumed = timeline.started }
                _ = state.pipelineLatency.record(UInt64(max((now - timeline.started).microseconds, 0)))
                _ = state.processingLatency.record(UInt64(max((timeline.processed - timeline.started).microseconds, 0)))
                _ = state.publishingLatency.record(UInt64(max((now - timeline.processed).microseconds, 0)))
            }
            if let kafkaTimestamp { _ = state.endToEndLatency.record(UInt64(max(wallClock.subtracting(saturating: kafkaTimestamp), 0))) }
        }
    }
}

extension Duration {
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
