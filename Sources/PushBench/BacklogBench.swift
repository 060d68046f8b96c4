import Foundation
import Logging
import PushCore
import PushKafka
import PushWorker
import Synchronization

/// `push-worker-dev bench --scenario backlog`: a chat backlog of `backlog` message jobs is queued
/// in the jobs topic, the worker starts, and while the backlog drains a call is produced
/// to the urgent topic every `callInterval`. Measures what a caller feels (each call's Kafka
/// timestamp → its outcome acknowledged) and how fast the backlog drains beside them.
public enum BacklogBench {
    public struct Options: Sendable {
        public var base = EndToEndBench.Options()
        public var backlog = 100_000
        public var callInterval: Duration = .milliseconds(100)

        public init() {}
    }

    public static func run(_ options: Options, logger: Logger, progress: @escaping @Sendable (String) -> Void) async throws -> BacklogReport
    {
        // The backlog is chat only: calls come on their own lane.
        let chat = options.base.mix.weights.filter { $0.kind != .apnsVoip }
        let mix = try JobMix(
            parsing: chat.isEmpty ? "apns-alert=1" : chat.map { "\($0.kind.rawValue)=\($0.weight)" }.joined(separator: ","))
        let setup = try await EndToEndBench.prepare(options.base, mix: mix, extraProviders: ["apns"], logger: logger)
        let configuration = setup.configuration, jobs = setup.jobs
        guard let urgentTopic = configuration.pipeline.urgentTopic, urgentTopic != configuration.pipeline.jobsTopic else {
            throw BenchError("the backlog scenario needs an urgent lane: PUSH_URGENT_TOPIC must differ from PUSH_JOBS_TOPIC")
        }
        let recorder = BenchRecorder(jobs: jobs)
        let worker = try Worker(configuration: configuration, logger: logger, observer: recorder)

        progress("queueing a backlog of \(options.backlog) chat jobs (\(mix)) in \(configuration.pipeline.jobsTopic)")
        let producer = try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers), logger: logger)
        try await EndToEndBench.produce(
            jobs, range: 0..<options.backlog, topic: configuration.pipeline.jobsTopic, producer: producer, rate: nil)

        progress("worker starting; a call every \(options.callInterval) to \(urgentTopic) while the backlog drains")
        let calls = CallSource(producer: producer, topic: urgentTopic, interval: options.callInterval, job: jobs.call)
        let drain = TrickleDuringDrain(
            snapshot: { recorder.snapshot }, queuedFinished: { $0.finished }, trickleFinished: { $0.calls },
            queued: options.backlog, timeout: options.base.timeout, settle: .seconds(10))
        // Calls start once the backlog is being worked on and both lanes joined their groups (in production the
        // urgent consumer is up long before a call comes; its first group join is not what this measures).
        let result = try await drain.run(
            worker, source: calls, ready: { $0.finished > 0 && worker.pipeline.readiness.ready },
            beforeTrickle: {
                // An upstream service's producer knows the urgent topic long before a call: without this lookup the
                // first call, and every call produced in the second its metadata takes, waited for librdkafka's refresh.
                let unknown = producer.prepare(topics: [urgentTopic])
                if !unknown.isEmpty { progress("could not look up \(urgentTopic) yet: the first calls may wait for a metadata refresh") }
            },
            progress: { snapshot, produced in
                progress(
                    "\(snapshot.finished)/\(options.backlog) backlog jobs, \(snapshot.calls)/\(produced) calls finished; call p99 so far \(snapshot.callLatency.valueAtPercentile(99)) ms"
                )
            })
        let (backlogDone, final, callsProduced, cpuSeconds) = (result.queuedDone, result.final, result.trickleProduced, result.cpuSeconds)
        producer.close()
        await setup.cleanUp()
        return BacklogReport(
            options: options, mix: mix, configuration: configuration, backlogDone: backlogDone, final: final,
            callsProduced: callsProduced, cpuSeconds: cpuSeconds,
            kafka: setup.cluster == nil ? configuration.brokers : "embedded mock cluster",
            endpoint: options.base.endpoint ?? "built-in sandboxes (in this process)")
    }
}

/// Produces the `n`-th job (a call, a quiet app's message) every `interval` on a thread of its own until stopped.
final class CallSource: Sendable {
    private let job: @Sendable (_ number: Int, _ createdAt: Int64) -> (key: [UInt8], value: [UInt8])
    private let producer: KafkaProducer
    private let topic: String
    private let interval: Duration
    private let state = Mutex((produced: 0, stopping: false))
    private let finished = DispatchSemaphore(value: 0)

    init(
        producer: KafkaProducer, topic: String, interval: Duration,
        job: @escaping @Sendable (_ number: Int, _ createdAt: Int64) -> (key: [UInt8], value: [UInt8])
    ) {
        self.job = job
        self.producer = producer
        self.topic = topic
        self.interval = interval
    }

    var produced: Int { state.withLock { $0.produced } }

    func start() {
        NamedThread.start("bench-calls") { [self] in
            var due = ContinuousClock.now
            while true {
                let number = state.withLock { state -> Int? in
                    guard !state.stopping else { return nil }
                    state.produced += 1
                    return state.produced - 1
                }
                guard let number else { break }
                let call = job(number, currentTimeMilliseconds())
                let record = KafkaRecord(topic: topic, key: call.key, value: call.value)
                Task { [producer] in try? await producer.send([record]) }
                due += interval
                let wait = due - ContinuousClock.now
                if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) }
            }
            finished.signal()
        }
    }

    /// Stops producing; returns how many calls were produced.
    func stop() -> Int {
        state.withLock { $0.stopping = true }
        finished.wait()
        return produced
    }
}

/// What the backlog scenario measured.
public struct BacklogReport: Sendable, Codable {
    public let backlogJobs: Int
    public let backlogFinished: Int
    public let mix: String
    public let endpoint: String
    public let kafka: String
    public let redis: String
    public let maxInFlight: Int
    public let urgentReservedInFlight: Int
    public let callIntervalMs: Int
    public let callsProduced: Int
    public let callsFinished: Int
    /// A call's Kafka timestamp → its outcome acknowledged by Kafka, in milliseconds.
    public let callLatencyMs: EndToEndReport.Latency
    public let callOutcomes: [String: Int]
    /// First backlog job consumed → last backlog job's outcome acknowledged.
    public let drainSeconds: Double
    public let drainJobsPerSecond: Double
    public let cpuSeconds: Double
    public let backlogOutcomes: [String: Int]

    init(
        options: BacklogBench.Options, mix: JobMix, configuration: WorkerConfiguration, backlogDone: BenchRecorder.Snapshot,
        final: BenchRecorder.Snapshot, callsProduced: Int, cpuSeconds: Double, kafka: String, endpoint: String
    ) {
        backlogJobs = options.backlog
        backlogFinished = backlogDone.finished
        self.mix = mix.description
        self.endpoint = endpoint
        self.kafka = kafka
        redis = configuration.redisURL == nil ? "in-memory (PUSH_REDIS_URL unset)" : "redis-server"
        maxInFlight = configuration.pipeline.maximumInFlightJobs
        urgentReservedInFlight = configuration.pipeline.effectiveUrgentReservedInFlightJobs
        callIntervalMs = Int(
            options.callInterval.components.seconds * 1000 + options.callInterval.components.attoseconds / 1_000_000_000_000_000)
        self.callsProduced = callsProduced
        callsFinished = final.calls
        callLatencyMs = EndToEndReport.Latency(final.callLatency, unitsPerMillisecond: 1)
        callOutcomes = final.callStatuses
        let drain = DrainRate(first: backlogDone.firstConsumed, last: backlogDone.lastAcknowledged, finished: backlogDone.finished)
        drainSeconds = drain.seconds
        drainJobsPerSecond = drain.jobsPerSecond
        self.cpuSeconds = cpuSeconds
        backlogOutcomes = backlogDone.statuses
    }

    public var complete: Bool { backlogFinished >= backlogJobs && callsFinished >= callsProduced && callsProduced > 0 }

    public func json() throws -> String { try prettyJSON() }

    public func table() -> String {
        func format(_ value: Double, _ digits: Int = 1) -> String { ReportTable.number(value, digits) }
        let outcomes = ReportTable.outcomes
        let rows: [(String, String)] = [
            ("scenario", "backlog: \(backlogJobs) chat jobs queued, then a call every \(callIntervalMs) ms on the urgent lane"),
            (
                "backlog",
                "\(backlogFinished) of \(backlogJobs) finished" + (backlogFinished >= backlogJobs ? "" : "  ← INCOMPLETE (timeout)")
            ),
            ("mix", mix),
            ("endpoint", endpoint),
            ("kafka", kafka),
            ("redis", redis),
            ("in flight", "\(maxInFlight) jobs, \(urgentReservedInFlight) reserved for the urgent lane"),
            ("calls", "\(callsFinished) of \(callsProduced) finished (\(outcomes(callOutcomes)))"),
            (
                "call latency produced→acked",
                ReportTable.latency(callLatencyMs)
            ),
            ("backlog drain", "\(format(drainJobsPerSecond, 0)) jobs/s over \(format(drainSeconds, 2)) s"),
            ("backlog outcomes", outcomes(backlogOutcomes)),
            ("CPU", "\(format(cpuSeconds, 1)) s (whole process)"),
        ]
        return ReportTable.render(rows)
    }
}
