import Foundation
import Logging
import OTel
import PushPipeline
import ServiceLifecycle
import Tracing

/// OTLP trace export, configured by the standard OpenTelemetry variables and off unless they ask for it: on when
/// `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`) or an OTLP endpoint is set
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); off with `OTEL_TRACES_EXPORTER=none` or
/// `OTEL_SDK_DISABLED=true`. swift-otel reads the rest (`OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_PROTOCOL`
/// `http/protobuf` or `http/json`, `OTEL_TRACES_SAMPLER` (checked here first), `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`, …). Only traces
/// are exported: the worker's metrics stay Prometheus's, its logs stay JSON lines, which carry `trace_id` and
/// `span_id` while a traced job runs.
public struct TraceExport: Sendable {
    /// Whether the environment turns trace export on; a problem when it asks for what this build cannot do.
    public static func requested(by environment: [String: String]) -> Result<Bool, ConfigurationErrors> {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return .success(false) }
        var problems: [String] = []
        for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            switch environment[name] {
            case nil, "http/protobuf", "http/json": break
            case "grpc":
                problems.append(
                    "\(name)=grpc is not supported: this build exports OTLP over HTTP (http/protobuf, the default, or http/json)")
            case let other?: problems.append("\(name) must be http/protobuf or http/json, got \"\(other.prefix(64))\"")
            }
        }
        let exporter = environment["OTEL_TRACES_EXPORTER"]?.lowercased()
        if let exporter, !["otlp", "console", "none"].contains(exporter) {
            problems.append("OTEL_TRACES_EXPORTER must be otlp, console or none, got \"\(exporter.prefix(64))\"")
        }
        problems += samplerProblems(environment)
        guard problems.isEmpty else { return .failure(ConfigurationErrors(problems: problems)) }
        if let exporter { return .success(exporter != "none") }
        return .success(environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil || environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != nil)
    }

    /// The samplers of the OpenTelemetry specification's `OTEL_TRACES_SAMPLER` this build has; the Jaeger and X-Ray
    /// ones it lacks are refused here rather than stopping the process at the first span.
    static let samplers = [
        "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
    ]

    /// `OTEL_TRACES_SAMPLER` and its `OTEL_TRACES_SAMPLER_ARG` (a probability from 0 to 1 for the ratio samplers).
    /// Whether a producer's sampled `traceparent` forces a job's trace is the operator's choice: the `parentbased_`
    /// samplers follow it, the others decide alone.
    static func samplerProblems(_ environment: [String: String]) -> [String] {
        guard let sampler = environment["OTEL_TRACES_SAMPLER"] else { return [] }
        guard samplers.contains(sampler) else {
            return ["OTEL_TRACES_SAMPLER must be one of \(samplers.joined(separator: ", ")), got \"\(sampler.prefix(64))\""]
        }
        guard sampler.hasSuffix("traceidratio"), let argument = environment["OTEL_TRACES_SAMPLER_ARG"] else { return [] }
        guard let ratio = Double(argument.trimmingCharacters(in: .whitespaces)), (0...1).contains(ratio) else {
            return ["OTEL_TRACES_SAMPLER_ARG must be a probability from 0 to 1 for \(sampler), got \"\(argument.prefix(64))\""]
        }
        return []
    }

    /// What the pipeline traces with, and the exporter's service (it batches spans and sends them; stop it after the
    /// pipeline so the last jobs' spans go out).
    public let tracing: JobTracing
    public let service: any Service

    /// Export as the environment configures it (`OTEL_*`, read by swift-otel), the service named `push-worker`
    /// unless `OTEL_SERVICE_NAME` names it.
    public init(consumerGroup: String, logger: Logger) throws {
        try self.init(configuration: Self.baseConfiguration(logger: logger), consumerGroup: consumerGroup)
    }

    /// Export as `configuration` says, with the environment's `OTEL_*` variables over it.
    public init(configuration: OTel.Configuration, consumerGroup: String) throws {
        var configuration = configuration
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        tracing = JobTracing(tracer: tracer, consumerGroup: consumerGroup)
        self.service = service
    }

    public static func baseConfiguration(logger: Logger) -> OTel.Configuration {
        var configuration = OTel.Configuration.default
        configuration.serviceName = "push-worker"
        configuration.diagnosticLogger = .custom(logger)
        return configuration
    }

    /// What adds `trace_id`, `span_id` and `trace_flags` to the log lines written while a traced job runs.
    public static var logMetadataProvider: Logger.MetadataProvider { OTel.makeLoggingMetadataProvider() }
}
