import Foundation
import Logging
import PushCore
import Synchronization

/// Reads topics from the beginning in a throwaway group, on its own thread: an
/// independent client for the demo, tests and benchmarks to see what was published.
public final class KafkaTopicReader: Sendable {
    private let messages = Mutex<[KafkaMessage]>([])
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    public init(
        bootstrapServers: String, topics: [String], logger: Logger,
        extraProperties: [String: String] = [:]
    ) throws(KafkaError) {
        var properties = KafkaConsumer.defaultProperties(
            bootstrapServers: bootstrapServers,
            groupId: "push-reader-\(UInt64.random(in: 0...UInt64.max))")
        properties["enable.auto.commit"] = "false"
        properties.merge(extraProperties) { $1 }
        let consumer = try KafkaConsumer(properties: properties, topics: topics, logger: logger) { _ in }
        NamedThread.start("kafka-reader") { [self] in
            while !stopping.load(ordering: .relaxed) {
                if let message = consumer.poll(timeoutMilliseconds: 100) { messages.withLock { $0.append(message) } }
            }
            consumer.close()
            finished.signal()
        }
    }

    public var received: [KafkaMessage] { messages.withLock { $0 } }

    /// Waits until `condition` holds for what was read, or `timeout` passes; returns what was read.
    public func wait(timeout: Duration, until condition: ([KafkaMessage]) -> Bool) async -> [KafkaMessage] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let snapshot = received
            if condition(snapshot) { return snapshot }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return received
    }

    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }

    deinit { stop() }
}
