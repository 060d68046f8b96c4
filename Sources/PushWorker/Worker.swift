import Logging
import PushCore
import PushHTTP
import PushKafka
import PushPipeline
import PushPluginAPI
import PushRedis
import PushTemplates

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
    let logger: Logger

    public init(configuration: WorkerConfiguration, logger: Logger, observer: (any PipelineObserver)? = nil) throws {
        templates = configuration.templates
        templatesReloadInterval = configuration.templatesReloadInterval
        self.logger = logger
        appsReloadInterval = configuration.appsReloadInterval
        transports = Self.transports(configuration)
        let context = Self.context(configuration, transports: transports, logger: logger)
        providers = LiveProviders(try Self.makeRegistry(configuration, context: context))
        for plugin in configuration.plugins {
            for line in plugin.summary { logger.info("provider configured", metadata: ["provider": "\(plugin.id)", "detail": "\(line)"]) }
        }
        var producerProperties = KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers)
        producerProperties.merge(configuration.rdkafkaProperties) { $1 }
        var consumerProperties = KafkaConsumer.defaultProperties(
            bootstrapServers: configuration.brokers,
            groupId: configuration.groupId)
        consumerProperties.merge(configuration.rdkafkaProperties) { $1 }
        // Producer-only properties would make the consumer refuse to start, and vice versa.
        consumerProperties = consumerProperties.filter { !Self.producerOnly.contains($0.key) }
        producerProperties = producerProperties.filter { !Self.consumerOnly.contains($0.key) }
        let metrics = PipelineMetrics(
            appLabels: MetricAppLabels(
                Dictionary(configuration.plugins.map { ($0.id, $0.appLabels) }) { $0.union($1) }))
        producer = try KafkaProducer(
            properties: producerProperties, logger: logger,
            statistics: { metrics.producerLatency(fromStatistics: $0) })
        let store: any DeliveryStore
        let retryQueue: (any RetryQueue)?
        if let url = configuration.redisURL {
            let client = RedisClient(url: url, connections: configuration.redisConnections)
            store = RedisDeliveryStore(client: client)
            retryQueue = RedisRetryQueue(client: client, logger: logger)
            logger.info("shared store: Redis", metadata: ["url": "\(url)"])
        } else {
            store = InMemoryDeliveryStore()
            retryQueue = nil
            logger.warning("PUSH_REDIS_URL is not set: dedupe, idempotency and retries live in this process only; run a single replica")
        }
        let processor = JobProcessor(
            providers: providers, configuration: configuration.pipeline, store: store,
            retryQueue: retryQueue, metrics: metrics, logger: logger)
        liveConfiguration = LiveConfiguration(
            source: configuration.providerSource, version: configuration.providerVersion, plugins: configuration.plugins,
            attemptTimeout: configuration.pipeline.attemptTimeout,
            providers: providers, formats: configuration.targetFormats, context: context, transports: transports,
            breakers: processor.circuitBreakers, metrics: metrics, logger: logger)
        pipeline = DeliveryPipeline(
            configuration: configuration.pipeline, consumerProperties: consumerProperties,
            producer: producer, processor: processor, logger: logger, observer: observer)
    }

    /// Runs until `pipeline.stop()`, then closes the producer and the plugins.
    public func run() async throws {
        let templateWatcher = Task { [templates, templatesReloadInterval, logger] in
            guard let templates, let interval = templatesReloadInterval else { return }
            await TemplateWatcher(templates: templates, interval: interval, logger: logger).run()
        }
        let appsWatcher = Task { [liveConfiguration, appsReloadInterval] in
            guard let interval = appsReloadInterval else { return }
            await AppsWatcher(configuration: liveConfiguration, interval: interval).run()
        }
        defer {
            templateWatcher.cancel()
            appsWatcher.cancel()
        }
        try await pipeline.run()
        producer.close()
        // Providers replaced by live configuration share these transports: closing them closes every provider.
        transports.shutdown()
    }

    /// Reads `PUSH_APPS_FILE` and the credential files now and applies a new version (SIGHUP).
    @discardableResult
    public func reloadConfiguration() -> LiveConfiguration.Reload { liveConfiguration.check(force: true) }

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
        let transportConfiguration = HTTPTransportConfiguration(maximumConnectionsPerHost: configuration.maximumConnectionsPerHost)
        return ProviderTransports { name in wrap(NIOHTTP2Transport(configuration: transportConfiguration, name: name)) }
    }

    static func context(_ configuration: WorkerConfiguration, transports: ProviderTransports, logger: Logger) -> ProviderContext {
        ProviderContext(
            makeTransport: { transports.transport(named: $0) }, templates: configuration.templates ?? BuiltInPayloads(), logger: logger)
    }

    static let producerOnly: Set<String> = [
        "enable.idempotence", "acks", "linger.ms", "compression.type",
        "message.timeout.ms", "batch.size", "queue.buffering.max.messages",
    ]
    static let consumerOnly: Set<String> = [
        "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
        "partition.assignment.strategy", "enable.partition.eof",
        "group.instance.id", "fetch.min.bytes", "fetch.wait.max.ms",
        "queued.max.messages.kbytes",
    ]
}
