import Dispatch
import PushCore
import PushKafka
import PushPipeline
import Synchronization

/// A Kafka-like log in memory, for pipeline tests that need no broker. It keeps Kafka's rules that
/// the pipeline relies on: a topic has partitions; a record's key picks its partition, so one key's
/// records stay in order; a consumer group's members share a topic's partitions and start from the
/// group's committed offsets; stored offsets are committed when partitions are revoked or a member
/// closes; whatever was not committed is handed out again. The pipeline reads it through
/// `sources(group:)` and publishes into it through `sink`, which can refuse or hold acknowledgements. Appending
/// and handing out cost the same per message however long the log grows, so that the spine bench (`SpineBench`)
/// measures the pipeline rather than the log.
public final class InMemoryKafka: Sendable {
    private struct State {
        var topics: [String: [[KafkaMessage]]] = [:]
        var committed: [String: [TopicPartition: Int64]] = [:]
        /// Live members per group.
        var members: [String: [InMemoryConsumer]] = [:]
        /// Live members per topic, the consumers an append wakes.
        var readers: [String: [InMemoryConsumer]] = [:]
        var refusedSends = 0
        var refusal: (@Sendable (KafkaRecord) -> KafkaError?)?
        var holding = false
        /// The acknowledgements held back, each the completion of one send.
        var held: [@Sendable () -> Void] = []
        var sends = 0
    }

    private let state = Mutex(State())
    private let defaultPartitions: Int

    /// - Parameter topics: partitions per topic; other topics are made on first use with `defaultPartitions`.
    public init(topics: [String: Int] = [:], defaultPartitions: Int = 4) {
        self.defaultPartitions = max(defaultPartitions, 1)
        state.withLock { state in
            for (topic, count) in topics { state.topics[topic] = Array(repeating: [], count: max(count, 1)) }
        }
    }

    // MARK: The log

    /// Appends a record to the partition its key picks (partition 0 without a key); returns where it went.
    @discardableResult
    public func append(_ record: KafkaRecord, timestamp: Int64? = currentTimeMilliseconds()) -> (TopicPartition, Int64) {
        let (position, readers) = state.withLock { state -> ((TopicPartition, Int64), [InMemoryConsumer]) in
            // In place: a copy of the topic's partitions would make every append cost the whole log.
            let position = Self.append(
                record, timestamp: timestamp, to: &state.topics[record.topic, default: Array(repeating: [], count: defaultPartitions)])
            return (position, state.readers[record.topic] ?? [])
        }
        for reader in readers { reader.arrived() }
        return position
    }

    private static func append(_ record: KafkaRecord, timestamp: Int64?, to partitions: inout [[KafkaMessage]]) -> (TopicPartition, Int64) {
        let partition = record.key.map { Self.partition(of: $0, among: partitions.count) } ?? 0
        let topicPartition = TopicPartition(topic: record.topic, partition: Int32(partition))
        let offset = Int64(partitions[partition].count)
        partitions[partition].append(
            KafkaMessage(
                topicPartition: topicPartition, offset: offset, key: record.key, value: record.value, timestamp: timestamp,
                headers: record.headers))
        return (topicPartition, offset)
    }

    /// Every record of `topic`, partition by partition.
    public func messages(in topic: String) -> [KafkaMessage] {
        state.withLock { $0.topics[topic]?.flatMap { $0 } ?? [] }
    }

    /// The offsets `group` committed (the next one to consume, per partition).
    public func committed(group: String) -> [TopicPartition: Int64] {
        state.withLock { $0.committed[group] ?? [:] }
    }

    /// The offsets the live members of `group` stored and have not yet committed.
    public func stored(group: String) -> [TopicPartition: Int64] {
        let members = state.withLock { $0.members[group] ?? [] }
        return members.reduce(into: [:]) { stored, member in stored.merge(member.storedOffsets) { $1 } }
    }

    /// What `group` would commit now: its committed offsets, moved on by what its live members stored since.
    public func position(group: String) -> [TopicPartition: Int64] {
        committed(group: group).merging(stored(group: group)) { max($0, $1) }
    }

    /// FNV-1a: stable across runs, unlike `Hasher`.
    public static func partition(of key: [UInt8], among count: Int) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in key { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash % UInt32(count))
    }

    func partitions(of topic: String) -> [TopicPartition] {
        state.withLock { state in
            let count = state.topics[topic]?.count ?? defaultPartitions
            if state.topics[topic] == nil { state.topics[topic] = Array(repeating: [], count: count) }
            return (0..<count).map { TopicPartition(topic: topic, partition: Int32($0)) }
        }
    }

    /// Runs `body` on `topic`'s partitions (each its messages by offset) under the log's lock, without copying them.
    func withPartitions<Result>(of topic: String, _ body: ([[KafkaMessage]]) -> Result) -> Result {
        state.withLock { state in body(state.topics[topic] ?? []) }
    }

    func commit(_ offsets: [TopicPartition: Int64], group: String) {
        state.withLock { state in state.committed[group, default: [:]].merge(offsets) { max($0, $1) } }
    }

    func join(_ consumer: InMemoryConsumer) {
        state.withLock { state in
            state.members[consumer.group, default: []].append(consumer)
            state.readers[consumer.topic, default: []].append(consumer)
        }
    }

    func leave(_ consumer: InMemoryConsumer) {
        state.withLock { state in
            state.members[consumer.group]?.removeAll { $0 === consumer }
            state.readers[consumer.topic]?.removeAll { $0 === consumer }
        }
    }

    // MARK: The group

    /// Makes the pipeline's lanes members of `group` (the urgent lane joins `group` + ".urgent").
    public func sources(group: String) -> some MessageSourceFactory { InMemorySources(kafka: self, group: group) }

    /// Makes every member of `group` go through a rebalance at its next poll: its partitions are revoked
    /// (stored offsets committed), then assigned again from the committed offsets.
    public func rebalance(group: String) {
        for member in state.withLock({ $0.members[group] ?? [] }) { member.requestRebalance() }
    }

    // MARK: The sink

    /// Publishes into the log: appended at once, acknowledged unless refused or held.
    public var sink: some MessageSink { InMemorySink(kafka: self) }

    /// Sends answered so far (acknowledged or refused).
    public var sends: Int { state.withLock { $0.sends } }

    /// The next `count` sends fail (nothing is appended), as a broker that is down would.
    public func refuseSends(_ count: Int) { state.withLock { $0.refusedSends = count } }

    /// From now on each record that `refusal` answers with an error is refused with it (not appended), as librdkafka or
    /// the broker refuses a record over `message.max.bytes`; the send's other records are appended. nil: none refused.
    public func refuseRecords(_ refusal: (@Sendable (KafkaRecord) -> KafkaError?)?) { state.withLock { $0.refusal = refusal } }

    /// Sends wait for their acknowledgement until `releaseAcknowledgements` (their records are already in the log).
    public func holdAcknowledgements() { state.withLock { $0.holding = true } }

    public func releaseAcknowledgements() {
        let held = state.withLock { state in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for acknowledge in held { acknowledge() }
    }

    /// Sends waiting for their acknowledgement.
    public var heldSends: Int { state.withLock { $0.held.count } }

    func send(_ records: [KafkaRecord]) async throws(KafkaError) {
        try await withCheckedContinuation { continuation in send(records) { continuation.resume(returning: $0) } }.mapError(\.first)
            .get()
    }

    /// `completion` runs at once on the caller's thread, or when held acknowledgements are let go.
    func send(_ records: [KafkaRecord], completion: @escaping @Sendable (Result<Void, UndeliveredRecords>) -> Void) {
        let (refused, refusal) = state.withLock { state in
            state.sends += 1
            guard state.refusedSends > 0 else { return (false, state.refusal) }
            state.refusedSends -= 1
            return (true, state.refusal)
        }
        if refused {
            let error = KafkaError(code: -195, message: "Local: Broker transport failure (refused by the in-memory log)")
            return completion(.failure(UndeliveredRecords(records.indices.map { UndeliveredRecords.Failure(index: $0, error: error) })))
        }
        var failures: [UndeliveredRecords.Failure] = []
        for (index, record) in records.enumerated() {
            if let error = refusal?(record) {
                failures.append(UndeliveredRecords.Failure(index: index, error: error))
            } else {
                append(record)
            }
        }
        let result: Result<Void, UndeliveredRecords> = failures.isEmpty ? .success(()) : .failure(UndeliveredRecords(failures))
        let waits = state.withLock { state in
            if state.holding { state.held.append { completion(result) } }
            return state.holding
        }
        if !waits { completion(result) }
    }
}

private struct InMemorySources: MessageSourceFactory {
    let kafka: InMemoryKafka
    let group: String

    func makeSource(lane: Lane, topic: String, rebalance: @escaping @Sendable (RebalanceEvent) -> Void) throws -> any MessageSource {
        let consumer = InMemoryConsumer(
            kafka: kafka, group: lane == .urgent ? group + KafkaMessageSources.urgentGroupSuffix : group,
            topic: topic, rebalance: rebalance)
        kafka.join(consumer)
        return consumer
    }
}

private struct InMemorySink: MessageSink {
    let kafka: InMemoryKafka

    func produce(_ records: [KafkaRecord], reporting completion: @escaping @Sendable (Result<Void, UndeliveredRecords>) -> Void) {
        kafka.send(records, completion: completion)
    }

    func prepare(topics: [String], timeout: Duration) -> [String] { [] }
}

/// One member of a group, taking every partition of its topic (the tests run one member per group at a time).
final class InMemoryConsumer: MessageSource {
    /// The partitions a member holds, in partition order, and where it reads in each.
    private struct Assignment {
        let partitions: [TopicPartition]
        /// The next offset to hand out, by partition number.
        var next: [Int64]
        /// The partition numbers not paused, in order: made again when a pause or resume changes them, not at each poll.
        var readable: [Int] = []
        /// Where in `readable` the next poll starts, so every partition gets its turn.
        var cursor = 0

        init(partitions: [TopicPartition], committed: [TopicPartition: Int64], paused: Set<TopicPartition>) {
            self.partitions = partitions
            next = partitions.map { committed[$0] ?? 0 }
            makeReadable(skipping: paused)
        }

        mutating func makeReadable(skipping paused: Set<TopicPartition>) {
            readable = partitions.indices.filter { !paused.contains(partitions[$0]) }
        }

        func holds(_ topicPartition: TopicPartition) -> Bool {
            partitions.indices.contains(Int(topicPartition.partition)) && partitions[Int(topicPartition.partition)] == topicPartition
        }

        /// Up to `maximum` messages, draining one partition before the next, starting one partition further each poll.
        mutating func take(_ maximum: Int, from log: [[KafkaMessage]]) -> [KafkaMessage] {
            guard !readable.isEmpty, maximum > 0 else { return [] }
            let start = cursor % readable.count
            cursor = (start + 1) % readable.count
            var messages: [KafkaMessage] = []
            for step in 0..<readable.count {
                let partition = readable[(start + step) % readable.count]
                guard log.indices.contains(partition) else { continue }
                let from = Int(next[partition])
                let until = min(log[partition].count, from + maximum - messages.count)
                guard from < until else { continue }
                messages += log[partition][from..<until]
                next[partition] = Int64(until)
                if messages.count == maximum { break }
            }
            return messages
        }
    }

    private struct State {
        var assignment: Assignment?
        var stored: [TopicPartition: Int64] = [:]
        var paused = false
        var pausedPartitions = Set<TopicPartition>()
        var rebalanceRequested = false
        var closed = false
    }

    let group: String
    let topic: String
    private let kafka: InMemoryKafka
    private let rebalance: @Sendable (RebalanceEvent) -> Void
    private let state = Mutex(State())
    private let arrivals = DispatchSemaphore(value: 0)

    init(kafka: InMemoryKafka, group: String, topic: String, rebalance: @escaping @Sendable (RebalanceEvent) -> Void) {
        self.kafka = kafka
        self.group = group
        self.topic = topic
        self.rebalance = rebalance
    }

    var storedOffsets: [TopicPartition: Int64] { state.withLock { $0.stored } }

    func arrived() { arrivals.signal() }

    func requestRebalance() {
        state.withLock { $0.rebalanceRequested = true }
        arrivals.signal()
    }

    func poll(maximum: Int, timeoutMilliseconds: Int32) -> [KafkaMessage] {
        serveGroup()
        let messages = take(maximum)
        guard messages.isEmpty, timeoutMilliseconds > 0 else { return messages }
        _ = arrivals.wait(timeout: .now() + .milliseconds(Int(timeoutMilliseconds)))
        serveGroup()
        return take(maximum)
    }

    /// Assigns the topic's partitions on the first poll, and revokes and assigns them again when a rebalance was asked for.
    private func serveGroup() {
        let (assign, revoke) = state.withLock { state -> (Bool, [TopicPartition]?) in
            guard !state.closed else { return (false, nil) }
            guard let assignment = state.assignment else { return (true, nil) }
            guard state.rebalanceRequested else { return (false, nil) }
            state.rebalanceRequested = false
            return (true, assignment.partitions)
        }
        if let revoke {
            rebalance(.revoking(revoke))
            commitStored()
        }
        guard assign else { return }
        let partitions = kafka.partitions(of: topic)
        let committed = kafka.committed(group: group)
        state.withLock { state in
            state.assignment = Assignment(partitions: partitions, committed: committed, paused: state.pausedPartitions)
        }
        rebalance(.assigned(partitions))
    }

    /// The consumer's lock is held while the log's is taken (never the other way round), so that what is handed
    /// out and where the next poll starts change together.
    private func take(_ maximum: Int) -> [KafkaMessage] {
        state.withLock { state in
            guard !state.paused, !state.closed, state.assignment != nil else { return [] }
            return kafka.withPartitions(of: topic) { log in state.assignment?.take(maximum, from: log) ?? [] }
        }
    }

    func storeOffset(_ offset: Int64, for topicPartition: TopicPartition) {
        state.withLock { state in
            guard state.assignment?.holds(topicPartition) == true else { return }
            state.stored[topicPartition] = offset
        }
    }

    func pauseAll() { state.withLock { $0.paused = true } }

    func resumeAll() { state.withLock { $0.paused = false } }

    func pause(_ partitions: [TopicPartition]) {
        state.withLock { state in
            state.pausedPartitions.formUnion(partitions)
            state.assignment?.makeReadable(skipping: state.pausedPartitions)
        }
    }

    func resume(_ partitions: [TopicPartition]) {
        state.withLock { state in
            state.pausedPartitions.subtract(partitions)
            state.assignment?.makeReadable(skipping: state.pausedPartitions)
        }
    }

    private func commitStored() {
        let stored = state.withLock { state in
            defer { state.stored = [:] }
            return state.stored
        }
        kafka.commit(stored, group: group)
    }

    func close() {
        let open = state.withLock { state in
            defer {
                state.closed = true
                state.assignment = nil
            }
            return !state.closed
        }
        guard open else { return }
        commitStored()
        kafka.leave(self)
    }
}
