import Foundation
import Logging
import ProxyPlugin
import PushCore
import PushInMemoryKafka
import PushKafka
import PushPipeline
import PushRedis

/// `push-worker-dev bench --scenario spine`: the pipeline alone. Jobs come from an in-memory log and
/// outcomes go back into it (`InMemoryKafka`), the stores are in memory, and the provider answers
/// at once without a network: what is left is what the spine costs per job (decode, admission,
/// per-key order, app slots, the processor, outcome encoding, offsets), without Kafka, Redis or HTTP/2.
/// With `redis`, dedupe and idempotency go to that Redis as in the worker: the spine plus the Redis client.
public enum SpineBench {
    public struct Options: Sendable {
        public var jobs = 200_000
        public var maximumInFlight = 2000
        /// Consumed and unfinished jobs per lane (`PUSH_MAX_READ_AHEAD`); nil: twice `maximumInFlight`.
        public var maximumReadAhead: Int?
        /// Distinct Kafka keys (users): jobs of one key run one after another.
        public var users = 10_000
        /// The dedupe and idempotency store, a `redis://` URL; nil: in memory.
        public var redis: String?
        /// Connections per Redis node (`PUSH_REDIS_CONNECTIONS`).
        public var redisConnections = 1
        public var timeout: Duration = .seconds(600)
        public init() {}
    }

    public struct Report: Sendable, Codable {
        public let jobs: Int
        public let store: String
        public let finished: Int
        public let maximumInFlight: Int
        public let seconds: Double
        public let jobsPerSecond: Double
        public let cpuMicrosecondsPerJob: Double
        /// Heap allocations per job, whole process (nil where the allocator does not count them).
        public let allocationsPerJob: Double?
        public let peakResidentMB: Double

        public var complete: Bool { finished == jobs }

        public func table() -> String {
            """
            scenario                 spine (in-memory log, a provider that answers at once; store: \(store))
            jobs                     \(finished) of \(jobs) finished, \(maximumInFlight) in flight
            throughput               \(Int(jobsPerSecond)) jobs/s over \(String(format: "%.2f", seconds)) s
            CPU per job              \(String(format: "%.1f", cpuMicrosecondsPerJob)) µs (whole process)
            allocations per job      \(allocationsPerJob.map { String(format: "%.0f", $0) } ?? "not counted (no jemalloc)")
            peak RSS                 \(String(format: "%.1f", peakResidentMB)) MB
            """
        }
    }

    /// The heap allocations per job a run may make, per build configuration (`bench/spine-allocations.json`): `make test`
    /// fails a change that makes the spine allocate more per job than its build's budget and tolerance allow.
    public struct AllocationBudget: Sendable, Decodable {
        /// Allocations per job by build configuration: "debug" and "release".
        public let allocationsPerJob: [String: Double]
        /// The share above the budget a run may reach (0.1: 10 %): jemalloc's counts move a little from run to run.
        public let tolerance: Double

        /// The configuration this binary was built in, as the budget file names it.
        public static var buildConfiguration: String {
            #if DEBUG
                "debug"
            #else
                "release"
            #endif
        }

        /// The budget file at `path`; refused unless it holds a budget for this build's configuration.
        public static func load(from path: String) throws(BenchError) -> AllocationBudget {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw BenchError("cannot read the allocation budget \(path)")
            }
            let budget: AllocationBudget
            do { budget = try JSONDecoder().decode(AllocationBudget.self, from: data) } catch {
                throw BenchError("\(path) is not an allocation budget (\(error))")
            }
            guard let perJob = budget.allocationsPerJob[buildConfiguration], perJob > 0 else {
                throw BenchError("\(path) has no allocationsPerJob.\(buildConfiguration) above 0 for this \(buildConfiguration) build")
            }
            guard budget.tolerance >= 0, budget.tolerance < 1 else { throw BenchError("\(path): tolerance must be from 0 to 1") }
            return budget
        }

        /// One line comparing `measured` (allocations per job) with this build's budget: an error above the budget
        /// and its tolerance, or when the process could not count its allocations.
        public func verdict(_ measured: Double?) -> Result<String, BenchError> {
            let configuration = Self.buildConfiguration
            let perJob = allocationsPerJob[configuration] ?? 0
            let limit = perJob * (1 + tolerance)
            let budget = "the \(configuration) budget of \(Self.format(perJob)) (+\(Self.format(tolerance * 100)) %: \(Self.format(limit)))"
            guard let measured else {
                return .failure(BenchError("allocations per job not counted (no jemalloc mallctl in this process): cannot check \(budget)"))
            }
            guard measured <= limit else {
                return .failure(
                    BenchError(
                        "allocations per job \(Self.format(measured)) are over \(budget): find the new allocations, or raise the budget with the reason"
                    ))
            }
            return .success("allocations per job \(Self.format(measured)), within \(budget)")
        }

        private static func format(_ value: Double) -> String { String(format: "%.0f", value) }
    }

    /// Answers every delivery as delivered, at once.
    private struct InstantProvider: PushProvider {
        let id = ProviderID.proxy
        let targetFormat: any TargetFormat = ProxyTargetFormat()

        func deliver(_ delivery: Delivery) async -> DeliveryResult { Self.answer }

        /// As a transport whose answer is already there: the completion runs before `start` returns.
        func start(_ delivery: Delivery, completion: @escaping DeliveryCompletion) -> DeliveryStart {
            completion(Self.answer)
            return .sent(NothingInFlight())
        }

        private static let answer = DeliveryResult.delivered(providerMessageId: nil, httpStatus: 200)
    }

    public static func run(_ options: Options, logger: Logger, progress: @escaping @Sendable (String) -> Void) async throws -> Report {
        let kafka = InMemoryKafka(topics: ["push.jobs": 32, "push.jobs.urgent": 8, "push.outcomes": 8, "push.dlq": 1])
        let users = max(options.users, 1)
        let createdAt = currentTimeMilliseconds()
        // Job ids are unique per run: a Redis kept between runs holds no outcome recorded for them.
        for index in 0..<options.jobs {
            let user = "user-\(index % users)"
            let job =
                #"{"v":1,"id":"spine-\#(createdAt)-\#(index)","createdAt":\#(createdAt),"ttl":3600,"kind":"message","userId":"\#(user)","#
                + #""notification":{"title":"Bob","body":"Are we still on for lunch at noon? I booked the table by the window."},"#
                + #""data":{"chatId":"chat-42","messageId":"m-\#(index)"},"#
                + #""targets":[{"bindingId":"b-\#(index)","provider":"proxy","token":"tok-\#(index % users)","tokenType":"fcm","platform":"android"}]}"#
            kafka.append(KafkaRecord(topic: "push.jobs", key: Array(user.utf8), value: Array(job.utf8)))
        }
        var configuration = PipelineConfiguration()
        configuration.maximumInFlightJobs = options.maximumInFlight
        configuration.maximumReadAheadJobs = options.maximumReadAhead
        let registry = ProviderRegistry([InstantProvider()])
        let redis = try options.redis.map { text in
            guard let url = RedisURL(text) else { throw BenchError("PUSH_REDIS_URL is not a redis:// URL") }
            return url
        }
        let store: any DeliveryStore =
            redis.map {
                RedisDeliveryStore(client: RedisClient(url: $0, connections: options.redisConnections), recordRetention: .seconds(3_600))
            } ?? InMemoryDeliveryStore()
        let processor = JobProcessor(registry: registry, configuration: configuration, store: store, retryQueue: nil, logger: logger)
        let pipeline = DeliveryPipeline(
            configuration: configuration, sources: kafka.sources(group: "spine"), sink: kafka.sink,
            processor: processor, logger: logger)

        ProcessResources.resetPeak()
        let cpuBefore = ProcessResources.cpuSeconds()
        let allocationsBefore = ProcessResources.allocations()
        let started = ContinuousClock.now
        let running = Task { try await pipeline.run() }
        let deadline = started + options.timeout
        var lastReport = started
        while kafka.sends < options.jobs, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
            if ContinuousClock.now - lastReport >= .seconds(5) {
                lastReport = .now
                progress("\(kafka.sends)/\(options.jobs) jobs finished, RSS \(ProcessResources.residentBytes() / 1_048_576) MiB")
            }
        }
        let seconds = (ContinuousClock.now - started).seconds
        let cpu = ProcessResources.cpuSeconds() - cpuBefore
        let allocations = ProcessResources.allocations().flatMap { after in allocationsBefore.map { after &- $0 } }
        let finished = kafka.sends
        pipeline.stop()
        try await running.value
        return Report(
            jobs: options.jobs, store: redis.map { "Redis at \($0.host):\($0.port)" } ?? "in memory", finished: finished,
            maximumInFlight: options.maximumInFlight, seconds: seconds,
            jobsPerSecond: Double(finished) / seconds, cpuMicrosecondsPerJob: cpu * 1e6 / Double(max(finished, 1)),
            allocationsPerJob: allocations.map { Double($0) / Double(max(finished, 1)) },
            peakResidentMB: Double(ProcessResources.peakResidentBytes()) / 1e6)
    }
}
