import Foundation
import Synchronization
import Testing
import TestSupport
@testable import PushKafka

@Suite("librdkafka producer and consumer over the mock cluster's TCP sockets")
struct KafkaRoundTripTests {
    @Test("a produced batch is acknowledged and read back with keys and headers")
    func roundTrip() async throws {
        let kafka = try KafkaFixture()
        let producer = try kafka.producer()
        let records = (0..<50).map { index in
            KafkaRecord(
                topic: kafka.outcomesTopic, key: Array("key-\(index % 5)".utf8), value: Array("value-\(index)".utf8),
                headers: [KafkaHeader("h", "v\(index)")])
        }
        try await producer.send(records)
        let reader = try kafka.reader(topics: [kafka.outcomesTopic])
        let messages = await reader.wait(timeout: .seconds(30)) { $0.count >= 50 }
        reader.stop()
        producer.close()
        #expect(messages.count == 50)
        #expect(Set(messages.map(\.valueString)) == Set((0..<50).map { "value-\($0)" }))
        let sample = try #require(messages.first { $0.valueString == "value-7" })
        #expect(sample.keyString == "key-2")
        #expect(sample.header("h") == "v7")
        #expect(sample.timestamp != nil)
    }

    @Test("a send that finds librdkafka's local queue full waits for room without holding a thread; every record is delivered")
    func fullQueueWaitsWithoutAThread() async throws {
        let kafka = try KafkaFixture()
        var properties = KafkaProducer.defaultProperties(bootstrapServers: kafka.cluster.bootstrapServers)
        properties["queue.buffering.max.messages"] = "1"
        // Longer than the late answer below: the queued record is delivered, not expired.
        properties["message.timeout.ms"] = "40000"
        let producer = try KafkaProducer(properties: properties, logger: testLogger())
        try await producer.send([KafkaRecord(topic: kafka.outcomesTopic, key: nil, value: Array("warm".utf8))])
        // The broker answers the next produce only after 25 s, so the one record the queue holds stays in it that long.
        // (Taking the mock broker down and up makes librdkafka bind its port again, which aborts the process if
        // anything took the port in between.)
        kafka.cluster.setRoundTripTime(broker: 1, milliseconds: 25_000)
        let senders = ProcessInfo.processInfo.activeProcessorCount * 4
        let sends = (0..<senders).map { index in
            Task { try await producer.send([KafkaRecord(topic: kafka.outcomesTopic, key: nil, value: Array("r\(index)".utf8))]) }
        }
        try await Task.sleep(for: .milliseconds(300))
        let probeStarted = ContinuousClock.now
        await Task.detached {}.value
        // Senders that held their threads would free them only with the answer, after 25 s. Generous, as the other
        // suites keep CI's two cores busy.
        #expect(ContinuousClock.now - probeStarted < .seconds(20), "senders waiting for room held the threads every task runs on")
        kafka.cluster.setRoundTripTime(broker: 1, milliseconds: 0)
        for send in sends { try await send.value }
        let reader = try kafka.reader(topics: [kafka.outcomesTopic])
        let messages = await reader.wait(timeout: .seconds(30)) { $0.count >= senders + 1 }
        reader.stop()
        producer.close()
        #expect(Set(messages.map(\.valueString)) == Set((0..<senders).map { "r\($0)" } + ["warm"]))
    }

    @Test(
        "a send with a completion calls it once, after every record is acknowledged, also when records had to wait for room in a full local queue"
    )
    func completionAfterEveryAcknowledgement() async throws {
        let kafka = try KafkaFixture()
        var properties = KafkaProducer.defaultProperties(bootstrapServers: kafka.cluster.bootstrapServers)
        properties["queue.buffering.max.messages"] = "2"
        let producer = try KafkaProducer(properties: properties, logger: testLogger())
        let records = (0..<7).map { KafkaRecord(topic: kafka.outcomesTopic, key: nil, value: Array("c\($0)".utf8)) }
        let calls = Mutex<[Result<Void, KafkaError>]>([])
        let result = await withCheckedContinuation { continuation in
            producer.send(records) { result in
                let first = calls.withLock { calls in
                    calls.append(result)
                    return calls.count == 1
                }
                if first { continuation.resume(returning: result) }
            }
        }
        #expect((try? result.get()) != nil)
        let reader = try kafka.reader(topics: [kafka.outcomesTopic])
        let messages = await reader.wait(timeout: .seconds(30)) { $0.count >= records.count }
        reader.stop()
        producer.close()
        #expect(Set(messages.map(\.valueString)) == Set((0..<7).map { "c\($0)" }))
        #expect(calls.withLock { $0.count } == 1)
    }

    @Test(
        "send fails when the broker never acknowledges within message.timeout.ms, awaited or with a completion",
        arguments: [false, true])
    func unacknowledgedSendFails(withCompletion: Bool) async throws {
        let kafka = try KafkaFixture()
        var properties = KafkaProducer.defaultProperties(bootstrapServers: kafka.cluster.bootstrapServers)
        properties["message.timeout.ms"] = "1500"
        let producer = try KafkaProducer(properties: properties, logger: testLogger())
        try await producer.send([KafkaRecord(topic: kafka.outcomesTopic, key: nil, value: Array("warm".utf8))])
        // The broker stays up but answers too late. (Taking the mock broker down and up makes librdkafka
        // bind its port again, which aborts the process if anything took the port in between.)
        // The answer comes long after the message timeout, so a loaded machine's pauses cannot blur the two.
        kafka.cluster.setRoundTripTime(broker: 1, milliseconds: 30_000)
        let started = ContinuousClock.now
        let late = [KafkaRecord(topic: kafka.outcomesTopic, key: nil, value: Array("x".utf8))]
        if withCompletion {
            let result = await withCheckedContinuation { continuation in producer.send(late) { continuation.resume(returning: $0) } }
            #expect((try? result.get()) == nil)
        } else {
            await #expect(throws: KafkaError.self) { try await producer.send(late) }
        }
        #expect(ContinuousClock.now - started < .seconds(20), "the send ended by its message timeout, not by the late answer")
        kafka.cluster.setRoundTripTime(broker: 1, milliseconds: 0)
        producer.close(timeout: .seconds(1))
    }
}
