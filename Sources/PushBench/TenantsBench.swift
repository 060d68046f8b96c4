import Logging

/// `push-worker-dev bench --scenario tenants --apps N`: a multi-tenant platform's load on one replica. N APNs apps
/// of N Apple teams, each with its own P-256 signing key, configured in a `PUSH_APPS_FILE`; an APNs endpoint that
/// knows every key; N × `jobsPerApp` APNs alert jobs spread evenly over the apps. The same jobs then go to one app,
/// and the report compares the two runs: what a tenant costs beyond the jobs it sends.
public enum TenantsBench {
    public struct Options: Sendable {
        /// Kafka, Redis, endpoint, timeout and `PUSH_*` settings of both runs; its jobs, mix and apps are set here.
        public var base = EndToEndBench.Options()
        public var apps = 1000
        public var jobsPerApp = 3

        public init() {}
    }

    public static func run(_ options: Options, logger: Logger, progress: @escaping @Sendable (String) -> Void) async throws -> TenantsReport
    {
        guard options.apps >= 1, options.jobsPerApp >= 1 else { throw BenchError("--apps and --jobs-per-app must be at least 1") }
        // Each run needs a Kafka of its own: a second consumer group on the same topic would read the first run's jobs too.
        guard options.base.environment["PUSH_KAFKA_BROKERS"] == nil else {
            throw BenchError("the tenants scenario makes two runs, each on an embedded Kafka mock cluster: leave PUSH_KAFKA_BROKERS unset")
        }
        var base = options.base
        base.jobs = options.apps * options.jobsPerApp
        base.mix = try JobMix(parsing: "apns-alert=1")
        base.rate = nil
        // The one-app run would otherwise wait for its app's slots (PUSH_APP_MAX_IN_FLIGHT, 500), the many-app run not.
        if base.environment["PUSH_APP_MAX_IN_FLIGHT"] == nil {
            base.environment["PUSH_APP_MAX_IN_FLIGHT"] = base.environment["PUSH_MAX_IN_FLIGHT"] ?? "2000"
        }
        var tenants = base
        tenants.apps = options.apps
        progress("\(options.apps) APNs apps of as many teams, \(base.jobs) jobs")
        let many = try await EndToEndBench.run(tenants, logger: logger, progress: progress)
        var single = base
        single.apps = 1
        progress("the same \(base.jobs) jobs to one app")
        let one = try await EndToEndBench.run(single, logger: logger, progress: progress)
        return TenantsReport(jobsPerApp: options.jobsPerApp, tenants: many, single: one)
    }
}

/// What the tenants scenario measured: the run over many apps beside the run over one.
public struct TenantsReport: Sendable, Codable {
    public let jobsPerApp: Int
    public let tenants: EndToEndReport
    public let single: EndToEndReport
    /// CPU per job of the many-app run ÷ that of the one-app run.
    public let cpuPerJobRatio: Double

    init(jobsPerApp: Int, tenants: EndToEndReport, single: EndToEndReport) {
        self.jobsPerApp = jobsPerApp
        self.tenants = tenants
        self.single = single
        cpuPerJobRatio = single.cpuSecondsPer1000Jobs > 0 ? tenants.cpuSecondsPer1000Jobs / single.cpuSecondsPer1000Jobs : 0
    }

    public var complete: Bool { tenants.complete && single.complete }

    public func json() throws -> String { try prettyJSON() }

    public func table() -> String {
        func format(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }
        func column(_ report: EndToEndReport) -> [String] {
            [
                "\(report.apps ?? 1)",
                "\(report.outcomes["delivered"] ?? 0) of \(report.jobsRequested)",
                format(report.seconds, 2),
                format(report.jobsPerSecond, 0),
                format(report.cpuSecondsPer1000Jobs * 1000, 0),
                format(report.peakResidentMB),
                report.connections.map { "\($0.atEnd) / \($0.peak)" } ?? "",
                format(report.workerCreationSeconds * 1000, 0),
                report.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "),
            ]
        }
        let names = [
            "apps (each its own team and key)", "delivered", "seconds", "jobs/s", "CPU µs per job", "peak RSS MB",
            "APNs connections at end / peak", "worker created in ms", "outcomes",
        ]
        let (many, one) = (column(tenants), column(single))
        let width = names.map(\.count).max() ?? 0
        let valueWidth = max(many.map(\.count).max() ?? 0, 12)
        var lines = ["endpoint: \(tenants.endpoint); kafka: \(tenants.kafka); redis: \(tenants.redis); \(jobsPerApp) jobs per app"]
        for (index, name) in names.enumerated() {
            lines.append(
                name.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                    + many[index].padding(toLength: valueWidth, withPad: " ", startingAt: 0) + "  " + one[index])
        }
        lines.append(
            "CPU per job, \(tenants.apps ?? 1) apps ÷ 1 app".padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                + format(cpuPerJobRatio, 2))
        return lines.joined(separator: "\n")
    }
}
