import Logging
import OTel
import PushCore
import PushHTTP
import PushKafka
import PushPipeline
import PushPluginAPI
import PushTemplates
import ServiceLifecycle
import UnixSignals

/// Assembles the pipeline from a configuration: plugins, producer, consumer properties.
public struct Worker: Sendable {
    public let pipeline: DeliveryPipeline
    public let producer: KafkaProducer
    /// The providers in use; live configuration replaces them.
    public let providers: LiveProviders
    let templates: TemplateDirectory?
    let templatesReloadInterval: Duration?
    let transports: ProviderTransports
    let liveConfiguration: LiveConfiguration
    let appsReloadInterval: Duration?
    let shutdownGrace: Duration
    let logger: Logger
    /// Trace export, when the `OTEL_*` variables turn it on.
    let traceExport: TraceExport?
    /// Whether dedupe, idempotency and retries are shared through Redis (`DeliveryState`), not kept in memory.
    let storeIsShared: Bool

    /// - Parameter traceConfiguration: exports traces as this says (the `OTEL_*` variables over it), whatever the
    ///   configuration's `exportsTraces`; nil: as the variables say.
    public init(
        configuration: WorkerConfiguration, logger: Logger, observer: (any PipelineObserver)? = nil,
        traceConfiguration: OTel.Configuration? = nil
    ) throws {
        templates = configuration.templates
        templatesReloadInterval = configuration.templatesReloadInterval
        self.logger = logger
        appsReloadInterval = configuration.appsReloadInterval
        shutdownGrace = configuration.pipeline.shutdownGrace
        transports = Self.transports(configuration)
        let context = Self.context(configuration, transports: transports, logger: logger)
        providers = LiveProviders(try Self.makeRegistry(configuration, context: context))
        for plugin in configuration.plugins {
            for line in plugin.summary { logger.info("provider configured", metadata: ["provider": "\(plugin.id)", "detail": "\(line)"]) }
        }
        let producerProperties = configuration.producerProperties
        let consumerProperties = configuration.consumerProperties
        let metrics = PipelineMetrics(
            appLabels: MetricAppLabels(
                Dictionary(configuration.plugins.map { ($0.id, $0.appLabels) }) { $0.union($1) }))
        producer = try KafkaProducer(
            properties: producerProperties, logger: logger,
            statistics: { metrics.producerLatency(fromStatistics: $0) })
        let state = DeliveryState(configuration, logger: logger)
        state.report()
        storeIsShared = state.isShared
        if let traceConfiguration {
            traceExport = try TraceExport(configuration: traceConfiguration, consumerGroup: configuration.pipeline.consumerGroup)
        } else if configuration.exportsTraces {
            traceExport = try TraceExport(consumerGroup: configuration.pipeline.consumerGroup, logger: logger)
        } else {
            traceExport = nil
        }
        let processor = JobProcessor(
            providers: providers, configuration: configuration.pipeline, store: state.store,
            retryQueue: state.retryQueue, metrics: metrics, logger: logger, tracing: traceExport?.tracing)
        liveConfiguration = LiveConfiguration(
            source: configuration.providerSource, version: configuration.providerVersion, plugins: configuration.plugins,
            attemptTimeout: configuration.pipeline.attemptTimeout,
            providers: providers, formats: configuration.targetFormats, context: context, transports: transports,
            breakers: processor.circuitBreakers, metrics: metrics, logger: logger)
        pipeline = DeliveryPipeline(
            configuration: configuration.pipeline, consumerProperties: consumerProperties,
            producer: producer, processor: processor, logger: logger, observer: observer)
    }

    /// The worker as services, in start order; a graceful shutdown stops them in reverse: the watchers, then the
    /// pipeline (it stops consuming, drains within the shutdown grace, commits and leaves the group), the retry
    /// scheduler, the provider connections, the outcome producer (it flushes what the drain published), the trace
    /// exporter (when on), the operations endpoint (readiness says "shutting down" until then) and last the log writer. The pipeline ending
    /// on its own (`pipeline.stop()`) shuts the rest down the same way.
    /// - Parameters:
    ///   - operations: the operations endpoint, already listening (`run` binds it first, to refuse a port in use).
    ///   - logOutput: the log writer whose waiting lines are written last.
    ///   - reloadsOnHangUp: SIGHUP reloads the apps file at once.
    public func services(
        operations: OperationsServer? = nil, logOutput: LogLineOutput? = nil, reloadsOnHangUp: Bool = false
    ) -> [ServiceGroupConfiguration.ServiceConfiguration] {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let logOutput { services.append(.init(service: logOutput, serviceName: "log writer")) }
        if let operations { services.append(.init(service: operations, serviceName: "operations endpoint")) }
        // Stopped after the pipeline and the producer, so the last jobs' spans are exported.
        if let traceExport { services.append(.init(service: traceExport.service, serviceName: "trace exporter")) }
        services.append(.init(service: Closing { [producer] in producer.close() }, serviceName: "outcome producer"))
        // Providers replaced by live configuration share these transports: closing them closes every provider.
        services.append(.init(service: Closing { [transports] in transports.shutdown() }, serviceName: "provider connections"))
        services += pipeline.services
        if let templates, let templatesReloadInterval {
            services.append(
                .init(
                    service: TemplateWatcher(templates: templates, interval: templatesReloadInterval, logger: logger),
                    serviceName: "template watcher"))
        }
        if appsReloadInterval != nil || reloadsOnHangUp {
            services.append(
                .init(
                    service: AppsWatcher(configuration: liveConfiguration, interval: appsReloadInterval, reloadsOnHangUp: reloadsOnHangUp),
                    serviceName: "apps watcher"))
        }
        return services
    }

    /// The worker's services in one group. With `signals` (`ShutdownSignals.signals`) the first of them shuts it down
    /// gracefully; without (the benchmarks, the demo) it ends when the pipeline is stopped or at
    /// `triggerGracefulShutdown()`. A shutdown that outlasts the grace, the consumers' close and the producer's flush
    /// together escalates to cancellation.
    public func serviceGroup(services: [ServiceGroupConfiguration.ServiceConfiguration]? = nil, signals: [UnixSignal] = []) -> ServiceGroup
    {
        var configuration = ServiceGroupConfiguration(
            services: services ?? self.services(), gracefulShutdownSignals: signals, logger: logger)
        configuration.maximumGracefulShutdownDuration = shutdownGrace + Self.shutdownMargin
        configuration.maximumCancellationDuration = Self.shutdownMargin
        return ServiceGroup(configuration: configuration)
    }

    /// Beyond the grace: the running jobs' cancellation (2 s), the consumers leaving their groups and the producer's
    /// flush (at most 10 s).
    static let shutdownMargin = Duration.seconds(30)

    /// The enabled plugins' providers, built with `context`.
    static func makeRegistry(_ configuration: WorkerConfiguration, context: ProviderContext) throws -> ProviderRegistry {
        var registry = ProviderRegistry(formats: configuration.targetFormats)
        for plugin in configuration.plugins { registry.register(try plugin.makeProvider(context)) }
        return registry
    }

    /// The transports of the configured HTTP client. `wrap` lets a caller observe each (`push-worker send`).
    static func transports(
        _ configuration: WorkerConfiguration,
        wrap: @escaping @Sendable (any HTTPTransport) -> any HTTPTransport = { $0 }
    ) -> ProviderTransports {
        let transportConfiguration = HTTPTransportConfiguration(
            maximumConnectionsPerHost: configuration.maximumConnectionsPerHost, egressProxy: configuration.egressProxy)
        return ProviderTransports { name in wrap(NIOHTTP2Transport(configuration: transportConfiguration, name: name)) }
    }

    static func context(_ configuration: WorkerConfiguration, transports: ProviderTransports, logger: Logger) -> ProviderContext {
        ProviderContext(
            makeTransport: { transports.transport(named: $0) }, templates: configuration.templates ?? BuiltInPayloads(), logger: logger)
    }

}

/// A resource closed at the graceful shutdown, once the services after it in the group have stopped using it.
struct Closing: Service {
    let close: @Sendable () -> Void

    func run() async {
        try? await gracefulShutdown()
        close()
    }
}
