import Foundation
import Histogram
import PushHTTP
import PushWorker

/// What one bench run measured; printed as a table or as JSON (`--json`).
public struct EndToEndReport: Sendable, Codable {
    public struct Latency: Sendable, Codable {
        public let p50: Double
        public let p90: Double
        public let p99: Double
        public let max: Double

        /// Milliseconds from a histogram whose unit is a thousandth (`unitsPerMillisecond` 1000: microseconds) or a millisecond.
        init(_ histogram: Histogram<UInt64>, unitsPerMillisecond: Double) {
            p50 = Double(histogram.valueAtPercentile(50)) / unitsPerMillisecond
            p90 = Double(histogram.valueAtPercentile(90)) / unitsPerMillisecond
            p99 = Double(histogram.valueAtPercentile(99)) / unitsPerMillisecond
            max = Double(histogram.max) / unitsPerMillisecond
        }

        init(microseconds histogram: Histogram<UInt64>) { self.init(histogram, unitsPerMillisecond: 1000) }
    }

    /// TCP connections from the worker to the APNs endpoint (the tenants scenario).
    public struct Connections: Sendable, Codable {
        public let port: Int
        /// Open when the last job's outcome was acknowledged.
        public private(set) var atEnd: Int
        /// The most seen open at once, sampled every 250 ms while the jobs flowed and at the end.
        public private(set) var peak: Int

        mutating func sample() {
            atEnd = OpenConnections.established(toPort: port)
            peak = Swift.max(peak, atEnd)
        }
    }

    public let jobsRequested: Int
    /// APNs apps of as many teams the jobs were spread over (the tenants scenario); nil: one app per provider.
    public let apps: Int?
    public let jobsFinished: Int
    public let mix: String
    public let endpoint: String
    public let kafka: String
    public let redis: String
    public let transport: String
    public let maxInFlight: Int
    /// `PUSH_APP_MAX_IN_FLIGHT`: the bench's jobs go to one app per provider, so this bounds the jobs truly in flight too.
    public let maxInFlightPerApp: Int
    /// Requests in flight per provider endpoint, all apps together (2 × connections × 100): jobs beyond it wait as values.
    public let maxInFlightPerEndpoint: Int?
    public let connectionsPerHost: Int
    /// Offered load in jobs/s, or nil when all jobs were queued before the start.
    public let offeredRate: Int?
    public let seconds: Double
    /// First job consumed → last job's outcomes acknowledged by Kafka.
    public let jobsPerSecond: Double
    /// Job consumed (its task started) → its outcomes acknowledged, in milliseconds.
    public let pipelineLatencyMs: Latency
    /// Of it: task started → targets done (the store's checks, the provider's answers, the outcomes recorded).
    public let processingLatencyMs: Latency
    /// Of it: targets done → outcomes acknowledged by Kafka.
    public let publishingLatencyMs: Latency
    /// Kafka timestamp (produce time) → outcomes acknowledged, in milliseconds (includes queueing in Kafka).
    public let endToEndLatencyMs: Latency
    public let cpuSecondsPer1000Jobs: Double
    /// Heap allocations per job while the worker ran, whole process (nil where the allocator does not count them).
    public let allocationsPerJob: Double?
    /// Cores in use on average while jobs flowed (first consumed → last acknowledged): by this process, by the whole
    /// machine (this process, Redis, the provider endpoint and Kafka when they run here), and how many the machine has.
    public let processCores: Double
    public let machineBusyCores: Double
    public let machineCores: Double
    /// With every job queued before the start: the share of 20 ms samples, while jobs flowed, that found no
    /// job in the pipeline (the consumer had run dry). nil for a paced run, where an idle pipeline is normal.
    public let emptyPipelineShare: Double?
    public let peakResidentMB: Double
    /// Wall time to create the worker from its configuration (its plugins read every app's credentials).
    public let workerCreationSeconds: Double
    public let connections: Connections?
    public let outcomes: [String: Int]

    init(
        options: EndToEndBench.Options, configuration: WorkerConfiguration, snapshot: BenchRecorder.Snapshot, cpuSeconds: Double,
        allocations: UInt64?, cores: (process: Double, machineBusy: Double, machine: Double), emptyPipelineShare: Double?,
        peakResidentBytes: Int,
        workerCreation: Duration, connections: Connections?, kafka: String, endpoint: String
    ) {
        jobsRequested = options.jobs
        apps = options.apps
        jobsFinished = snapshot.finished
        mix = options.mix.description
        self.endpoint = endpoint
        self.kafka = kafka
        transport = "\(HTTP2FramingKind.nghttp2.library) (fallback for HTTP/1.1-only hosts: \(CurlHTTPTransport.library))"
        redis = configuration.redisURL == nil ? "in-memory (PUSH_REDIS_URL unset)" : "redis-server"
        maxInFlight = configuration.pipeline.maximumInFlightJobs
        maxInFlightPerApp = configuration.pipeline.maximumInFlightPerApp
        maxInFlightPerEndpoint = configuration.pipeline.maximumInFlightPerEndpoint
        connectionsPerHost = configuration.maximumConnectionsPerHost
        offeredRate = options.rate
        if let first = snapshot.firstConsumed, let last = snapshot.lastAcknowledged {
            seconds = (last - first).seconds
        } else {
            seconds = 0
        }
        jobsPerSecond = seconds > 0 ? Double(snapshot.finished) / seconds : 0
        pipelineLatencyMs = Latency(microseconds: snapshot.pipelineLatency)
        processingLatencyMs = Latency(microseconds: snapshot.processingLatency)
        publishingLatencyMs = Latency(microseconds: snapshot.publishingLatency)
        endToEndLatencyMs = Latency(snapshot.endToEndLatency, unitsPerMillisecond: 1)
        cpuSecondsPer1000Jobs = snapshot.finished > 0 ? cpuSeconds / Double(snapshot.finished) * 1000 : 0
        allocationsPerJob = snapshot.finished > 0 ? allocations.map { Double($0) / Double(snapshot.finished) } : nil
        (processCores, machineBusyCores, machineCores) = cores
        self.emptyPipelineShare = emptyPipelineShare
        peakResidentMB = Double(peakResidentBytes) / 1_048_576
        workerCreationSeconds = workerCreation.seconds
        self.connections = connections
        outcomes = snapshot.statuses
    }

    public var complete: Bool { jobsFinished >= jobsRequested }

    public func json() throws -> String { try prettyJSON() }

    public func table() -> String {
        func format(_ value: Double, _ digits: Int = 1) -> String { ReportTable.number(value, digits) }
        let latency = ReportTable.latency
        var rows: [(String, String)] = [
            ("jobs", "\(jobsFinished) of \(jobsRequested) finished" + (complete ? "" : "  ← INCOMPLETE (timeout)"))
        ]
        if let apps { rows.append(("APNs apps", "\(apps), each of its own team and signing key")) }
        rows += [
            ("mix", mix),
            ("endpoint", endpoint),
            ("kafka", kafka),
            ("redis", redis),
            ("transport", transport),
            (
                "in flight / connections",
                "\(maxInFlight) jobs (\(maxInFlightPerApp) per app\(maxInFlightPerEndpoint.map { ", \($0) per endpoint" } ?? "")) / \(connectionsPerHost) per host"
            ),
            ("offered load", offeredRate.map { "\($0) jobs/s (produced during the run)" } ?? "all queued before the start"),
            ("throughput", "\(format(jobsPerSecond, 0)) jobs/s over \(format(seconds, 2)) s"),
            ("latency consumed→acked", latency(pipelineLatencyMs)),
            ("  of it: processing", latency(processingLatencyMs)),
            ("  of it: publishing", latency(publishingLatencyMs)),
            ("latency produced→acked", latency(endToEndLatencyMs)),
            ("CPU per 1000 jobs", "\(format(cpuSecondsPer1000Jobs, 3)) s (whole process)"),
            ("allocations per job", allocationsPerJob.map { format($0, 0) } ?? "not counted (no jemalloc)"),
            (
                "cores busy while flowing",
                "this process \(format(processCores, 2)), machine \(format(machineBusyCores, 2)) of \(format(machineCores, 1))"
            ),
            (
                "pipeline empty",
                emptyPipelineShare.map { "\(format($0 * 100)) % of the time jobs flowed (the consumer ran dry)" }
                    ?? "not measured (paced load)"
            ),
            ("peak RSS", "\(format(peakResidentMB)) MB"),
            ("worker created in", "\(format(workerCreationSeconds * 1000, 0)) ms"),
        ]
        if let connections {
            rows.append(
                ("APNs connections", "\(connections.atEnd) open at the end, \(connections.peak) at most (port \(connections.port))"))
        }
        rows += [
            ("outcomes", outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        ]
        return ReportTable.render(rows)
    }
}
