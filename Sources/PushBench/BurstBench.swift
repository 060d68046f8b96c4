import Foundation
import Histogram
import Logging
import PushCore
import PushKafka
import PushPipeline
import PushWorker
import Synchronization

/// `push-worker-dev bench --scenario burst`: one app's burst of `burst` message jobs (APNs) is queued in
/// the jobs topic, the worker starts, and while the burst drains a quiet app (FCM) sends one message
/// job every `quietInterval` to the same topic. Measures what the quiet app's users feel (each job's
/// Kafka timestamp → its outcome acknowledged) beside the burst, with the lanes shared between apps
/// or (`fairSharing` off) with jobs started in the order they were consumed.
public enum BurstBench {
    public struct Options: Sendable {
        public var base = EndToEndBench.Options()
        public var burst = 100_000
        public var quietInterval: Duration = .milliseconds(100)
        /// Off: the baseline, jobs start in the order consumed whatever their app (`PipelineConfiguration.sharesLanesBetweenApps`).
        public var fairSharing = true

        public init() {}
    }

    public static func run(_ options: Options, logger: Logger, progress: @escaping @Sendable (String) -> Void) async throws -> BurstReport {
        let burstMix = try JobMix(parsing: "apns-alert=1")
        let setup = try await EndToEndBench.prepare(options.base, mix: burstMix, extraProviders: ["fcm"], logger: logger)
        var configuration = setup.configuration
        configuration.pipeline.sharesLanesBetweenApps = options.fairSharing
        let jobs = setup.jobs
        let jobsTopic = configuration.pipeline.jobsTopic
        let recorder = BurstRecorder(jobs: jobs)
        let worker = try Worker(configuration: configuration, logger: logger, observer: recorder)

        progress("queueing a burst of \(options.burst) APNs jobs of one app in \(jobsTopic)")
        let producer = try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers), logger: logger)
        try await EndToEndBench.produce(jobs, range: 0..<options.burst, topic: jobsTopic, producer: producer, rate: nil)

        progress(
            "worker starting (apps share the lanes: \(options.fairSharing)); a quiet app's job every \(options.quietInterval) to \(jobsTopic)"
        )
        let quiet = CallSource(producer: producer, topic: jobsTopic, interval: options.quietInterval, job: jobs.quiet)
        let drain = TrickleDuringDrain(
            snapshot: { recorder.snapshot }, queuedFinished: { $0.burstFinished }, trickleFinished: { $0.quietFinished },
            queued: options.burst, timeout: options.base.timeout, settle: .seconds(30))
        let result = try await drain.run(
            worker, source: quiet, ready: { $0.burstFinished > 0 },
            progress: { snapshot, produced in
                progress(
                    "\(snapshot.burstFinished)/\(options.burst) burst jobs, \(snapshot.quietFinished)/\(produced) quiet jobs finished; quiet p99 so far \(snapshot.quietLatency.valueAtPercentile(99)) ms"
                )
            })
        let (burstDone, final, quietProduced, cpuSeconds) = (result.queuedDone, result.final, result.trickleProduced, result.cpuSeconds)
        producer.close()
        await setup.cleanUp()
        return BurstReport(
            options: options, configuration: configuration, burstDone: burstDone, final: final,
            quietProduced: quietProduced, cpuSeconds: cpuSeconds,
            kafka: setup.cluster == nil ? configuration.brokers : "embedded mock cluster",
            endpoint: options.base.endpoint ?? "built-in sandboxes (in this process)")
    }
}

extension BenchJobs {
    /// The `number`-th job of the tenants scenario's quiet app: a chat message to an Android phone of the FCM project,
    /// id `<run>-quiet-<n>`.
    func quiet(_ number: Int, createdAt: Int64) -> (key: [UInt8], value: [UInt8]) {
        let user = "\(runId)-quiet\(number)"
        let job =
            #"{"v":1,"id":"\#(runId)-quiet-\#(number)","createdAt":\#(createdAt),"userId":"\#(user)","kind":"message","ttl":3600,"notification":{"title":"Carol","body":"See you tomorrow"},"targets":[{"bindingId":"\#(runId)-qb\#(number)","provider":"fcm","app":"\#(fcmProject)","token":"bench-\#(runId)-quiet-\#(number)","platform":"android"}]}"#
        return (Array(user.utf8), Array(job.utf8))
    }

    func isQuiet(jobId: String) -> Bool { jobId.hasPrefix("\(runId)-quiet-") }
}

/// Counts the burst's final outcomes and times the quiet app's jobs.
final class BurstRecorder: PipelineObserver {
    struct Snapshot: Sendable {
        var burstFinished = 0
        var firstConsumed: ContinuousClock.Instant?
        var lastBurstAcknowledged: ContinuousClock.Instant?
        var burstStatuses: [String: Int] = [:]
        var quietFinished = 0
        var quietStatuses: [String: Int] = [:]
        /// A quiet job's Kafka timestamp → its outcome acknowledged, in milliseconds.
        var quietLatency = Histogram<UInt64>(highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: .three)
    }

    private let jobs: BenchJobs
    private let state = Mutex(Snapshot())

    init(jobs: BenchJobs) {
        self.jobs = jobs
    }

    var snapshot: Snapshot { state.withLock { $0 } }

    func acknowledged(_ publications: [Publication], timeline: JobTimeline?, kafkaTimestamp: Int64?) {
        let now = ContinuousClock.now
        let wallClock = currentTimeMilliseconds()
        state.withLock { state in
            for case .outcome(let outcome) in publications where jobs.isOurs(jobId: outcome.jobId) && outcome.status != .retrying {
                if jobs.isQuiet(jobId: outcome.jobId) {
                    state.quietFinished += 1
                    state.quietStatuses[outcome.status.rawValue, default: 0] += 1
                    if let kafkaTimestamp {
                        _ = state.quietLatency.record(UInt64(max(wallClock.subtracting(saturating: kafkaTimestamp), 0)))
                    }
                } else {
                    state.burstFinished += 1
                    state.burstStatuses[outcome.status.rawValue, default: 0] += 1
                    state.lastBurstAcknowledged = now
                    if let started = timeline?.started, state.firstConsumed.map({ started < $0 }) ?? true { state.firstConsumed = started }
                }
            }
        }
    }
}

/// What the tenants scenario measured.
public struct BurstReport: Sendable, Codable {
    public let burstJobs: Int
    public let burstFinished: Int
    public let fairSharing: Bool
    public let endpoint: String
    public let kafka: String
    public let maxInFlight: Int
    public let readAhead: Int
    public let quietIntervalMs: Int
    public let quietProduced: Int
    public let quietFinished: Int
    /// A quiet job's Kafka timestamp → its outcome acknowledged, in milliseconds.
    public let quietLatencyMs: EndToEndReport.Latency
    public let quietOutcomes: [String: Int]
    /// First burst job consumed → last burst job's outcome acknowledged.
    public let drainSeconds: Double
    public let drainJobsPerSecond: Double
    public let cpuSeconds: Double
    public let burstOutcomes: [String: Int]

    init(
        options: BurstBench.Options, configuration: WorkerConfiguration, burstDone: BurstRecorder.Snapshot,
        final: BurstRecorder.Snapshot, quietProduced: Int, cpuSeconds: Double, kafka: String, endpoint: String
    ) {
        burstJobs = options.burst
        burstFinished = burstDone.burstFinished
        fairSharing = options.fairSharing
        self.endpoint = endpoint
        self.kafka = kafka
        maxInFlight = configuration.pipeline.maximumInFlightJobs
        readAhead = configuration.pipeline.readAheadJobs
        quietIntervalMs = Int(options.quietInterval.microseconds / 1000)
        self.quietProduced = quietProduced
        quietFinished = final.quietFinished
        quietLatencyMs = EndToEndReport.Latency(final.quietLatency, unitsPerMillisecond: 1)
        quietOutcomes = final.quietStatuses
        let drain = DrainRate(first: burstDone.firstConsumed, last: burstDone.lastBurstAcknowledged, finished: burstDone.burstFinished)
        drainSeconds = drain.seconds
        drainJobsPerSecond = drain.jobsPerSecond
        self.cpuSeconds = cpuSeconds
        burstOutcomes = burstDone.burstStatuses
    }

    public var complete: Bool { burstFinished >= burstJobs && quietFinished >= quietProduced && quietProduced > 0 }

    public func json() throws -> String { try prettyJSON() }

    public func table() -> String {
        func format(_ value: Double, _ digits: Int = 1) -> String { ReportTable.number(value, digits) }
        let outcomes = ReportTable.outcomes
        let rows: [(String, String)] = [
            (
                "scenario",
                "tenants: a burst of \(burstJobs) APNs jobs of one app queued, then a quiet FCM app's job every \(quietIntervalMs) ms on the same topic"
            ),
            ("lanes shared between apps", fairSharing ? "yes" : "no (baseline: jobs start in the order consumed)"),
            ("burst", "\(burstFinished) of \(burstJobs) finished" + (burstFinished >= burstJobs ? "" : "  ← INCOMPLETE (timeout)")),
            ("endpoint", endpoint),
            ("kafka", kafka),
            ("in flight", "\(maxInFlight) jobs, read-ahead \(readAhead) per lane"),
            ("quiet jobs", "\(quietFinished) of \(quietProduced) finished (\(outcomes(quietOutcomes)))"),
            (
                "quiet latency produced→acked",
                ReportTable.latency(quietLatencyMs)
            ),
            ("burst drain", "\(format(drainJobsPerSecond, 0)) jobs/s over \(format(drainSeconds, 2)) s"),
            ("burst outcomes", outcomes(burstOutcomes)),
            ("CPU", "\(format(cpuSeconds, 1)) s (whole process)"),
        ]
        return ReportTable.render(rows)
    }
}
