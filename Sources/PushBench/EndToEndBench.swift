import Foundation
import Logging
import PushCore
import PushCrypto
import PushKafka
import PushKafkaMock
import PushSandbox
import PushWorker
import ServiceLifecycle

/// `push-worker-dev bench`: jobs into Kafka, the real pipeline (real Redis when `PUSH_REDIS_URL`
/// is set), HTTP/2 out to the built-in sandboxes or to any HTTPS endpoint; measures
/// throughput, latency, CPU and memory.
public enum EndToEndBench {
    public struct Options: Sendable {
        public var jobs = 200_000
        public var mix = JobMix.default
        /// `https://host:port` that answers every provider (see `bench/nginx.conf`); nil: built-in sandboxes.
        public var endpoint: String?
        /// CA that signed `endpoint`'s certificate.
        public var caFile: String?
        /// Jobs per second produced while the pipeline runs; nil: all jobs are queued before it starts.
        public var rate: Int?
        public var timeout: Duration = .seconds(900)
        /// `PUSH_*` variables laid over the bench's own settings (Redis, Kafka, in-flight, connections, …).
        public var environment: [String: String] = [:]
        /// APNs apps of as many Apple teams, each with its own signing key, in a `PUSH_APPS_FILE`, and APNs only
        /// (`TenantsBench`); nil: one app per provider.
        public var apps: Int?

        public init() {}
    }

    /// What every scenario starts from: an embedded Kafka (unless one is configured), the
    /// providers, the worker's configuration and the job writer.
    struct Setup: Sendable {
        let scratch: URL
        let cluster: MockKafkaCluster?
        let providers: Providers
        let configuration: WorkerConfiguration
        let jobs: BenchJobs

        func cleanUp() async {
            await providers.stop()
            withExtendedLifetime(cluster) {}
            try? FileManager.default.removeItem(at: scratch)
        }
    }

    /// - Parameter extraProviders: providers enabled beside the mix's (the backlog scenario's calls go to APNs).
    static func prepare(_ options: Options, mix: JobMix, extraProviders: Set<String> = [], logger: Logger) async throws -> Setup {
        let runId = "r" + String(UInt32.random(in: .min ... .max), radix: 36)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("push-bench-\(runId)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])

        var environment: [String: String] = [
            "PUSH_KAFKA_GROUP_ID": "push-worker-bench-\(runId)",
            "PUSH_MAX_IN_FLIGHT": "2000",
            "PUSH_RDKAFKA_SESSION_TIMEOUT_MS": "6000",
            "PUSH_RDKAFKA_HEARTBEAT_INTERVAL_MS": "1000",
            "PUSH_SHUTDOWN_GRACE_S": "5",
            "PUSH_PROVIDERS": Set(mix.kinds.map(\.provider)).union(extraProviders).sorted().joined(separator: ","),
        ]
        let cluster: MockKafkaCluster?
        if options.environment["PUSH_KAFKA_BROKERS"] == nil {
            let embedded = try MockKafkaCluster(brokers: 1, logger: logger)
            try embedded.createTopic(options.environment["PUSH_JOBS_TOPIC"] ?? "push.jobs", partitions: 32)
            try embedded.createTopic(options.environment["PUSH_URGENT_TOPIC"] ?? "push.jobs.urgent", partitions: 8)
            try embedded.createTopic(options.environment["PUSH_OUTCOMES_TOPIC"] ?? "push.outcomes", partitions: 8)
            try embedded.createTopic(options.environment["PUSH_DLQ_TOPIC"] ?? "push.dlq", partitions: 1)
            environment["PUSH_KAFKA_BROKERS"] = embedded.bootstrapServers
            cluster = embedded
        } else {
            cluster = nil
        }
        let providers: Providers
        if let apps = options.apps {
            providers = try await Providers.tenants(apps: apps, scratch: scratch, endpoint: options.endpoint, caFile: options.caFile)
        } else if let endpoint = options.endpoint {
            providers = try Providers.external(endpoint: endpoint, caFile: options.caFile, scratch: scratch)
        } else {
            providers = try await Providers.sandboxes(scratch: scratch)
        }
        if options.rate != nil {
            // librdkafka's mock broker holds a fetch for fetch.wait.max.ms (500) even when data arrives
            // meanwhile; a real broker answers as soon as fetch.min.bytes (1) are there. Only a paced
            // run waits on empty fetches; with everything queued first they come back full. 2 ms keeps
            // the mock close to a real broker's answer (10 ms added 10 ms to the p99 at 2 000 jobs/s)
            // for a few more empty fetches.
            environment["PUSH_RDKAFKA_FETCH_WAIT_MAX_MS"] = "2"
        }
        environment.merge(providers.environment) { $1 }
        environment.merge(options.environment) { $1 }

        let configuration = try WorkerConfiguration.load(from: environment).get()
        let jobs = BenchJobs(
            runId: runId, mix: mix, apnsApps: providers.apnsApps, fcmProject: providers.fcmProject,
            webPush: providers.webPush, users: 50_000)
        return Setup(scratch: scratch, cluster: cluster, providers: providers, configuration: configuration, jobs: jobs)
    }

    public static func run(_ options: Options, logger: Logger, progress: @escaping @Sendable (String) -> Void) async throws
        -> EndToEndReport
    {
        let setup = try await prepare(options, mix: options.mix, logger: logger)
        let configuration = setup.configuration, jobs = setup.jobs, cluster = setup.cluster, providers = setup.providers
        defer { try? FileManager.default.removeItem(at: setup.scratch) }

        let recorder = BenchRecorder(jobs: jobs)
        let creating = ContinuousClock.now
        let worker = try Worker(configuration: configuration, logger: logger, observer: recorder)
        let workerCreation = ContinuousClock.now - creating
        let jobsTopic = configuration.pipeline.jobsTopic

        if options.rate == nil {
            progress("queueing \(options.jobs) jobs (\(options.mix)) in \(jobsTopic)")
            let producer = try KafkaProducer(
                properties: KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers),
                logger: logger)
            try await produce(jobs, range: 0..<options.jobs, topic: jobsTopic, producer: producer, rate: nil)
            producer.close()
            ProcessResources.resetPeak()
        }

        let cpuAtStart = ProcessResources.cpuSeconds()
        let allocationsAtStart = ProcessResources.allocations()
        let services = worker.serviceGroup()
        let running = Task { try await services.run() }
        // The jobs come from a producer of their own, as from the upstream service: sharing the worker's
        // (its connection and broker thread) shortened the outcomes' wait for their acknowledgements.
        let feeder = try options.rate.map { _ in
            try KafkaProducer(properties: KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers), logger: logger)
        }
        var feeding: Task<Void, any Error>?
        if let rate = options.rate, let feeder {
            feeding = Task {
                // Offer the load once the consumer has joined, so the group join does not count as queueing.
                feeder.prepare(topics: [jobsTopic])
                while !worker.pipeline.readiness.ready { try await Task.sleep(for: .milliseconds(20)) }
                try await produce(jobs, range: 0..<options.jobs, topic: jobsTopic, producer: feeder, rate: rate)
            }
        }
        let started = ContinuousClock.now
        var lastProgress = started
        var finished = recorder.snapshot
        // CPU while jobs flow (first consumed → last acknowledged, to 20 ms): the group join and the drain left out.
        var flowing: (first: ProcessResources.CPUSample, last: ProcessResources.CPUSample)?
        // With every job queued first, a sample with no job in the pipeline means the consumer ran dry.
        var pipelineSamples = (taken: 0, empty: 0)
        // Connections to APNs, counted in the tenants scenario only: reading the kernel's socket tables every
        // 250 ms (not each 20 ms) keeps its cost out of the CPU per job; APNs connections live long, so the peak is seen.
        var connections = options.apps.map { _ in EndToEndReport.Connections(port: providers.apnsPort, atEnd: 0, peak: 0) }
        var lastConnectionSample = started
        while finished.finished < options.jobs, ContinuousClock.now - started < options.timeout {
            try await Task.sleep(for: .milliseconds(20))
            finished = recorder.snapshot
            if connections != nil, ContinuousClock.now - lastConnectionSample >= .milliseconds(250) {
                lastConnectionSample = .now
                connections?.sample()
            }
            if finished.firstConsumed != nil {
                let sample = ProcessResources.CPUSample.now()
                flowing = (flowing?.first ?? sample, sample)
                if options.rate == nil, finished.finished < options.jobs {
                    pipelineSamples.taken += 1
                    if worker.pipeline.inFlightJobs == 0 { pipelineSamples.empty += 1 }
                }
            }
            if ContinuousClock.now - lastProgress >= .seconds(5) {
                lastProgress = .now
                progress(
                    "\(finished.finished)/\(options.jobs) jobs finished, \(worker.pipeline.inFlightJobs) in flight, RSS \(ProcessResources.residentBytes() >> 20) MiB"
                )
            }
        }
        let cpuSeconds = ProcessResources.cpuSeconds() - cpuAtStart
        let allocations = ProcessResources.allocations().flatMap { after in allocationsAtStart.map { after &- $0 } }
        let peakResident = ProcessResources.peakResidentBytes()
        connections?.sample()
        feeding?.cancel()
        feeder?.close(timeout: .zero)
        await services.triggerGracefulShutdown()
        try await running.value
        await providers.stop()
        withExtendedLifetime(cluster) {}

        return EndToEndReport(
            options: options, configuration: configuration, snapshot: finished, cpuSeconds: cpuSeconds,
            allocations: allocations,
            cores: flowing.map { $0.last.cores(since: $0.first) } ?? (0, 0, 0),
            emptyPipelineShare: pipelineSamples.taken > 0 ? Double(pipelineSamples.empty) / Double(pipelineSamples.taken) : nil,
            peakResidentBytes: peakResident, workerCreation: workerCreation, connections: connections,
            kafka: cluster == nil ? configuration.brokers : "embedded mock cluster",
            endpoint: options.endpoint ?? "built-in sandboxes (in this process)")
    }

    /// Produces in batches; with a rate, paces the batches every 10 ms.
    static func produce(_ jobs: BenchJobs, range: Range<Int>, topic: String, producer: KafkaProducer, rate: Int?) async throws {
        let batch = rate.map { max($0 / 100, 1) } ?? 5_000
        let started = ContinuousClock.now
        var index = range.lowerBound
        while index < range.upperBound {
            let end = min(index + batch, range.upperBound)
            let now = currentTimeMilliseconds()
            let records = (index..<end).map { KafkaRecord(topic: topic, key: jobs.key($0), value: jobs.value($0, createdAt: now)) }
            if let rate {
                // Pace by the schedule, not by the send: a slow acknowledgement must not lower the offered load.
                Task { try? await producer.send(records) }
                let due = started + .seconds(Double(end - range.lowerBound) / Double(rate))
                try await Task.sleep(until: due, clock: .continuous)
            } else {
                try await producer.send(records)
            }
            index = end
        }
    }
}

extension JobMix.Kind {
    var provider: String {
        switch self {
        case .apnsVoip, .apnsAlert: "apns"
        case .fcm: "fcm"
        case .webpush: "webpush"
        case .proxy: "proxy"
        }
    }
}
