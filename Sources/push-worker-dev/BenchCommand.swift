import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import PushBench
import PushHTTP
import PushWorker

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the worker: jobs through Kafka, Redis and HTTP/2 out; or the hot pieces alone (--micro).",
        discussion: """
            Kafka: an embedded mock cluster unless PUSH_KAFKA_BROKERS is set (then use a fresh topic or cluster per run). \
            Redis: used when PUSH_REDIS_URL is set, else in-memory stores. Every other PUSH_* variable applies as in `run` \
            (PUSH_MAX_IN_FLIGHT, PUSH_HTTP_MAX_CONNECTIONS, …). scripts/bench.sh runs it against nginx beside h2load.
            """)

    @Option(
        help:
            "throughput (jobs through the pipeline), backlog (calls on the urgent lane while a chat backlog drains), transport (the HTTP/2 client alone: --jobs requests to --endpoint), tenants (--apps APNs apps of as many teams, each with its own signing key, --jobs-per-app each; then the same jobs to one app), burst (a quiet app's jobs beside one app's burst of --backlog jobs on the same topic) or spine (the pipeline alone: --jobs from an in-memory log, in-memory stores, a provider that answers at once)."
    )
    var scenario = "throughput"

    @Option(help: "Jobs to deliver (throughput scenario).")
    var jobs = 200_000

    @Option(help: "Chat jobs queued before the start (backlog scenario); the burst's jobs (burst scenario).")
    var backlog = 100_000

    @Option(help: "Milliseconds between two calls (backlog scenario), two quiet jobs (burst scenario).")
    var callIntervalMs = 100

    @Option(help: "APNs apps of as many Apple teams, each with its own signing key (tenants scenario).")
    var apps = 1000

    @Option(help: "Jobs per app (tenants scenario).")
    var jobsPerApp = 3

    @Option(help: "Job kinds and weights: apns-voip, apns-alert, fcm, webpush, proxy (e.g. apns-voip=1,apns-alert=3).")
    var mix = JobMix.default.description

    @Option(help: "An https:// endpoint answering every provider's paths (see bench/nginx.conf); default: built-in sandboxes.")
    var endpoint: String?

    @Option(help: "CA certificate (PEM) of --endpoint.")
    var caFile: String?

    @Option(help: "HTTP/2 connections per provider host (sets PUSH_HTTP_MAX_CONNECTIONS).")
    var connections: Int?

    @Option(
        help:
            "Jobs being worked on at most (sets PUSH_MAX_IN_FLIGHT, and PUSH_APP_MAX_IN_FLIGHT unless it is set: the bench's jobs go to one app per provider; PUSH_MAX_READ_AHEAD, twice that by default, bounds the jobs consumed and unfinished)."
    )
    var inFlight: Int?

    @Option(help: "Produce the jobs at this rate (jobs/s) while the pipeline runs, instead of queueing them all first.")
    var rate: Int?

    @Option(help: "Give up after this many seconds.")
    var timeout = 900

    @Flag(help: "Burst scenario: jobs start in the order consumed, whatever their app (the baseline of fair sharing).")
    var noFairShare = false

    @Flag(help: "Time the hot pieces alone (decode, outcome encode, APNs token, Web Push encryption, a job as a task).")
    var micro = false

    @Option(
        help:
            "Spine scenario: fail when the heap allocations per job exceed this file's budget for the build (debug or release) by more than its tolerance (bench/spine-allocations.json)."
    )
    var allocationBudget: String?

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Option(help: "Also write the report as JSON to this file.")
    var reportFile: String?

    func run() async throws {
        if allocationBudget != nil, micro || scenario != "spine" {
            throw ValidationError("--allocation-budget applies to --scenario spine only")
        }
        if micro {
            let results = try await MicroBench.runAll()
            if json {
                print(try results.prettyJSON())
            } else {
                print(MicroBench.table(results))
            }
            return
        }
        let level = ProcessInfo.processInfo.environment["PUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        // The OTEL_ variables export the bench's traces as they would the worker's (scripts/bench.sh --traces).
        let tracesExported = (try? TraceExport.requested(by: ProcessInfo.processInfo.environment).get()) ?? false
        LogSetup.bootstrap(
            format: ProcessInfo.processInfo.environment["PUSH_LOG_FORMAT"] == "json" ? .json : .text, level: level,
            metadataProvider: tracesExported ? TraceExport.logMetadataProvider : nil)
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        var options = EndToEndBench.Options()
        options.jobs = jobs
        do { options.mix = try JobMix(parsing: mix) } catch { throw ValidationError(error.description) }
        options.endpoint = endpoint
        options.caFile = caFile
        options.rate = rate
        options.timeout = .seconds(timeout)
        options.environment = ProcessInfo.processInfo.environment.filter { $0.key.hasPrefix("PUSH_") || $0.key.hasPrefix("OTEL_") }
        if let connections { options.environment["PUSH_HTTP_MAX_CONNECTIONS"] = String(connections) }
        if let inFlight {
            options.environment["PUSH_MAX_IN_FLIGHT"] = String(inFlight)
            // One app per provider: with the default app limit (500) all but 500 of the jobs would wait for its slots.
            if options.environment["PUSH_APP_MAX_IN_FLIGHT"] == nil { options.environment["PUSH_APP_MAX_IN_FLIGHT"] = String(inFlight) }
        }
        let progress: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data("bench: \(line)\n".utf8)) }
        switch scenario {
        case "throughput": break
        case "transport":
            var transportOptions = TransportBench.Options()
            transportOptions.requests = jobs
            transportOptions.connections = connections ?? 4
            guard let endpoint else { throw ValidationError("--scenario transport needs --endpoint") }
            transportOptions.endpoint = endpoint
            transportOptions.caFile = caFile
            let report = try await TransportBench.run(transportOptions)
            print(json ? try report.prettyJSON() : report.table())
            if let reportFile { try report.prettyJSON().write(toFile: reportFile, atomically: true, encoding: .utf8) }
            if report.failures > 0 { throw ExitCode(1) }
            return
        case "spine":
            var spineOptions = SpineBench.Options()
            spineOptions.jobs = jobs
            if let inFlight { spineOptions.maximumInFlight = inFlight }
            spineOptions.timeout = .seconds(timeout)
            // The worker's own reading of PUSH_MAX_READ_AHEAD, PUSH_REDIS_CONNECTIONS and PUSH_REDIS_URL: the same ranges and checks.
            var environment = options.environment
            environment["PUSH_MAX_IN_FLIGHT"] = String(spineOptions.maximumInFlight)
            let configuration: WorkerConfiguration
            switch WorkerConfiguration.load(from: environment, requireBrokers: false) {
            case .success(let loaded): configuration = loaded
            case .failure(let errors): throw ValidationError(errors.description)
            }
            spineOptions.redis = options.environment["PUSH_REDIS_URL"]
            if spineOptions.redis != nil, allocationBudget != nil {
                throw ValidationError("--allocation-budget is the in-memory spine's: unset PUSH_REDIS_URL")
            }
            let budget: SpineBench.AllocationBudget?
            do { budget = try allocationBudget.map { path throws(BenchError) in try SpineBench.AllocationBudget.load(from: path) } } catch {
                throw ValidationError(error.description)
            }
            spineOptions.maximumReadAhead = configuration.pipeline.maximumReadAheadJobs
            spineOptions.redisConnections = configuration.redisConnections
            let report = try await SpineBench.run(spineOptions, logger: Logger(label: "push-worker-bench"), progress: progress)
            print(json ? try report.prettyJSON() : report.table())
            if let reportFile { try report.prettyJSON().write(toFile: reportFile, atomically: true, encoding: .utf8) }
            let withinBudget: Bool
            switch budget?.verdict(report.allocationsPerJob) {
            case nil: withinBudget = true
            case .success(let line):
                progress(line)
                withinBudget = true
            case .failure(let error):
                progress(error.description)
                withinBudget = false
            }
            if !report.complete || !withinBudget { throw ExitCode(1) }
            return
        case "tenants":
            var tenantsOptions = TenantsBench.Options()
            tenantsOptions.base = options
            tenantsOptions.apps = apps
            tenantsOptions.jobsPerApp = jobsPerApp
            let report: TenantsReport
            do {
                report = try await TenantsBench.run(tenantsOptions, logger: Logger(label: "push-worker-bench"), progress: progress)
            } catch let error as BenchError { throw ValidationError(error.description) }
            print(json ? try report.json() : report.table())
            if let reportFile { try report.json().write(toFile: reportFile, atomically: true, encoding: .utf8) }
            if !report.complete { throw ExitCode(1) }
            return
        case "backlog":
            var backlogOptions = BacklogBench.Options()
            backlogOptions.base = options
            backlogOptions.backlog = backlog
            backlogOptions.callInterval = .milliseconds(max(callIntervalMs, 1))
            let report = try await BacklogBench.run(backlogOptions, logger: Logger(label: "push-worker-bench"), progress: progress)
            print(json ? try report.json() : report.table())
            if let reportFile { try report.json().write(toFile: reportFile, atomically: true, encoding: .utf8) }
            if !report.complete { throw ExitCode(1) }
            return
        case "burst":
            var burstOptions = BurstBench.Options()
            burstOptions.base = options
            burstOptions.burst = backlog
            burstOptions.quietInterval = .milliseconds(max(callIntervalMs, 1))
            burstOptions.fairSharing = !noFairShare
            let report = try await BurstBench.run(burstOptions, logger: Logger(label: "push-worker-bench"), progress: progress)
            print(json ? try report.json() : report.table())
            if let reportFile { try report.json().write(toFile: reportFile, atomically: true, encoding: .utf8) }
            if !report.complete { throw ExitCode(1) }
            return
        default:
            throw ValidationError("--scenario must be throughput, backlog, tenants, burst, transport or spine")
        }
        let report = try await EndToEndBench.run(options, logger: Logger(label: "push-worker-bench"), progress: progress)
        print(json ? try report.json() : report.table())
        if let reportFile { try report.json().write(toFile: reportFile, atomically: true, encoding: .utf8) }
        if !report.complete { throw ExitCode(1) }
    }
}
