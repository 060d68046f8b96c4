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
    public let registry: ProviderRegistry
    let templates: TemplateDirectory?
    let templatesReloadInterval: Duration?
    let logger: Logger

    public init(configuration: WorkerConfiguration, logger: Logger, observer: (any PipelineObserver)? = nil) throws {
        templates = configuration.templates
        templatesReloadInterval = configuration.templatesReloadInterval
        self.logger = logger
        registry = try Self.makeRegistry(configuration, logger: logger)
        for plugin in configuration.plugins {
            for line in plugin.summary { logger.info("provider configured", metadata: ["provider": "\(plugin.id)", "detail": "\(line)"]) }
        }
        var producerProperties = KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers)
        producerProperties.merge(configuration.rdkafkaProperties) { $1 }
        var consumerProperties = KafkaConsumer.defaultProperties(bootstrapServers: configuration.brokers,
                                                                 groupId: configuration.groupId)
        consumerProperties.merge(configuration.rdkafkaProperties) { $1 }
        // Producer-only properties would make the consumer refuse to start, and vice versa.
        consumerProperties = consumerProperties.filter { !Self.producerOnly.contains($0.key) }
        producerProperties = producerProperties.filter { !Self.consumerOnly.contains($0.key) }
        let metrics = PipelineMetrics(appLabels: MetricAppLabels(
            Dictionary(configuration.plugins.map { ($0.id, $0.appLabels) }) { $0.union($1) }))
        producer = try KafkaProducer(properties: producerProperties, logger: logger,
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
        let processor = JobProcessor(registry: registry, configuration: configuration.pipeline, store: store,
                                     retryQueue: retryQueue, metrics: metrics, logger: logger)
        pipeline = DeliveryPipeline(configuration: configuration.pipeline, consumerProperties: consumerProperties,
                                    producer: producer, processor: processor, logger: logger, observer: observer)
    }

    /// Runs until `pipeline.stop()`, then closes the producer and the plugins.
    public func run() async throws {
        let watcher = Task { [templates, templatesReloadInterval, logger] in
            guard let templates, let interval = templatesReloadInterval else { return }
            await TemplateWatcher(templates: templates, interval: interval, logger: logger).run()
        }
        defer { watcher.cancel() }
        try await pipeline.run()
        producer.close()
        await registry.shutdown()
    }

    /// The enabled plugins. `wrap` lets a caller observe each plugin's transport (`push-worker send`).
    static func makeRegistry(_ configuration: WorkerConfiguration, logger: Logger,
                             wrap: @escaping @Sendable (any HTTPTransport) -> any HTTPTransport = { $0 }) throws -> ProviderRegistry {
        var registry = ProviderRegistry(formats: configuration.targetFormats)
        let transportConfiguration = HTTPTransportConfiguration(maximumConnectionsPerHost: configuration.maximumConnectionsPerHost)
        let context = ProviderContext(makeTransport: { name in
            wrap(NIOHTTP2Transport(configuration: transportConfiguration, name: name))
        }, templates: configuration.templates ?? BuiltInPayloads(), logger: logger)
        for plugin in configuration.plugins { registry.register(try plugin.makeProvider(context)) }
        return registry
    }

    static let producerOnly: Set<String> = ["enable.idempotence", "acks", "linger.ms", "compression.type",
                                             "message.timeout.ms", "batch.size", "queue.buffering.max.messages"]
    static let consumerOnly: Set<String> = ["auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
                                             "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
                                             "partition.assignment.strategy", "enable.partition.eof",
                                             "group.instance.id", "fetch.min.bytes", "fetch.wait.max.ms",
                                             "queued.max.messages.kbytes"]
}
