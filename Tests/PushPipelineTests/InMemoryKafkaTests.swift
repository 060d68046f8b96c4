import PushCore
import PushInMemoryKafka
import PushKafka
import PushPipeline
import Synchronization
import Testing

@Suite("The in-memory log hands out partitions as a Kafka consumer does: in turn, paused ones held back, from the committed offsets")
struct InMemoryKafkaTests {
    /// A record for each of `counts.count` partitions of `topic`: `counts[p]` records whose key lands in partition p.
    private func fill(_ kafka: InMemoryKafka, topic: String, counts: [Int]) {
        for (partition, count) in counts.enumerated() {
            let key = (0...).lazy.map { Array("key-\($0)".utf8) }.first {
                InMemoryKafka.partition(of: $0, among: counts.count) == partition
            }!
            for index in 0..<count { kafka.append(KafkaRecord(topic: topic, key: key, value: Array("\(partition)/\(index)".utf8))) }
        }
    }

    private func positions(_ messages: [KafkaMessage]) -> [String] { messages.map { "\($0.topicPartition.partition)/\($0.offset)" } }

    @Test("each poll starts one partition further than the last, so one partition's backlog does not hold the others back")
    func partitionsTakeTurns() throws {
        let kafka = InMemoryKafka(topics: ["t": 3])
        fill(kafka, topic: "t", counts: [5, 5, 5])
        let consumer = try kafka.sources(group: "g").makeSource(lane: .normal, topic: "t") { _ in }

        #expect(positions(consumer.poll(maximum: 2, timeoutMilliseconds: 0)) == ["0/0", "0/1"])
        #expect(positions(consumer.poll(maximum: 2, timeoutMilliseconds: 0)) == ["1/0", "1/1"])
        #expect(positions(consumer.poll(maximum: 2, timeoutMilliseconds: 0)) == ["2/0", "2/1"])
        #expect(positions(consumer.poll(maximum: 4, timeoutMilliseconds: 0)) == ["0/2", "0/3", "0/4", "1/2"])
        consumer.close()
    }

    @Test("a paused partition hands out nothing while the others flow; resumed, it goes on after its last message handed out")
    func pausedPartitionsWait() throws {
        let kafka = InMemoryKafka(topics: ["t": 2])
        fill(kafka, topic: "t", counts: [3, 3])
        let consumer = try kafka.sources(group: "g").makeSource(lane: .normal, topic: "t") { _ in }
        let first = TopicPartition(topic: "t", partition: 0)

        #expect(positions(consumer.poll(maximum: 1, timeoutMilliseconds: 0)) == ["0/0"])
        consumer.pause([first])
        #expect(positions(consumer.poll(maximum: 10, timeoutMilliseconds: 0)) == ["1/0", "1/1", "1/2"])
        #expect(consumer.poll(maximum: 10, timeoutMilliseconds: 0).isEmpty)
        consumer.resume([first])
        #expect(positions(consumer.poll(maximum: 10, timeoutMilliseconds: 0)) == ["0/1", "0/2"])
        consumer.close()
    }

    @Test("a rebalance commits the stored offsets and hands out again, from the committed ones, what was not stored")
    func rebalanceStartsFromCommitted() throws {
        let kafka = InMemoryKafka(topics: ["t": 1])
        fill(kafka, topic: "t", counts: [4])
        let events = Mutex<[String]>([])
        let consumer = try kafka.sources(group: "g").makeSource(lane: .normal, topic: "t") { event in
            switch event {
            case .assigned(let partitions): events.withLock { $0.append("assigned \(partitions.count)") }
            case .revoking(let partitions): events.withLock { $0.append("revoking \(partitions.count)") }
            }
        }
        let partition = TopicPartition(topic: "t", partition: 0)

        #expect(positions(consumer.poll(maximum: 10, timeoutMilliseconds: 0)) == ["0/0", "0/1", "0/2", "0/3"])
        consumer.storeOffset(2, for: partition)
        consumer.storeOffset(9, for: TopicPartition(topic: "other", partition: 0))
        #expect(kafka.stored(group: "g") == [partition: 2], "only a partition the member holds takes a stored offset")
        kafka.rebalance(group: "g")
        #expect(positions(consumer.poll(maximum: 10, timeoutMilliseconds: 0)) == ["0/2", "0/3"])
        #expect(kafka.committed(group: "g") == [partition: 2])
        #expect(events.withLock { $0 } == ["assigned 1", "revoking 1", "assigned 1"])
        consumer.close()
    }
}
