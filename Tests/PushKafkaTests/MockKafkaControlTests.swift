import Foundation
import Testing
import TestSupport
import PushKafka
@testable import PushKafkaMock

@Suite("kafka-mock control commands")
struct MockKafkaControlTests {
    @Test("broker commands take an id or all (-1)")
    func brokers() throws {
        #expect(try MockKafkaControl.parse("broker-down all") == .broker(-1, up: false))
        #expect(try MockKafkaControl.parse("broker-up 2") == .broker(2, up: true))
        #expect(try MockKafkaControl.parse("  rtt all\t250 ") == .roundTripTime(broker: -1, milliseconds: 250))
    }

    @Test("request errors name the API key, the count and the error code")
    func requestErrors() throws {
        #expect(try MockKafkaControl.parse("produce-errors 3") == .produceErrors(3))
        #expect(try MockKafkaControl.parse("request-errors 1 5 -195") == .requestErrors(apiKey: 1, count: 5, error: -195))
    }

    @Test("unknown or malformed commands are refused with the list of commands")
    func refused() {
        #expect(throws: MockKafkaControl.Problem.self) { try MockKafkaControl.parse("broker-down") }
        #expect(throws: MockKafkaControl.Problem.self) { try MockKafkaControl.parse("broker-down -3") }
        #expect(throws: MockKafkaControl.Problem.self) { try MockKafkaControl.parse("reboot") }
        #expect(throws: MockKafkaControl.Problem.self) { try MockKafkaControl.parse("produce-errors many") }
    }

    /// The producer is connected before the broker goes down, as the worker is in the fault scenario: librdkafka 2.0.2
    /// closes the broker's listening socket and binds its port again at once, and a port with no connection left is
    /// free for that instant, so another socket may take it and the re-bind fails inside librdkafka (an assertion).
    /// A live connection keeps the port's binding, which the new listener shares (SO_REUSEADDR).
    @Test("a broker taken down and up again serves its producer again")
    func downAndUp() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("control.test", partitions: 1)
        let producer = try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: cluster.bootstrapServers),
            logger: testLogger())
        defer { producer.close() }
        try await producer.send([KafkaRecord(topic: "control.test", key: nil, value: Array("before".utf8))])
        try MockKafkaControl.parse("broker-down all").apply(to: cluster)
        try MockKafkaControl.parse("rtt all 10").apply(to: cluster)
        try MockKafkaControl.parse("broker-up all").apply(to: cluster)
        try await producer.send([KafkaRecord(topic: "control.test", key: nil, value: Array("after".utf8))])
    }
}

@Suite("kafka-mock connections")
struct MockKafkaConnectionTests {
    /// Whether Nagle's algorithm is off, for each connection the cluster's brokers accepted in this process.
    private static func nagleOffOnBrokerSide(of cluster: MockKafkaCluster) -> [Bool] {
        let ports = cluster.brokerPorts
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
        return descriptors.compactMap { descriptor in
            guard !MockKafkaCluster.isListening(descriptor), let port = MockKafkaCluster.localPort(of: descriptor), ports.contains(port)
            else { return nil }
            var noDelay: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, &length) == 0 else { return nil }
            return noDelay != 0
        }
    }

    @Test("the mock broker answers with Nagle's algorithm off, as a Kafka broker does, so a small answer never waits for an ACK")
    func acceptedConnectionsSendAtOnce() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("nagle.test", partitions: 1)
        let producer = try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: cluster.bootstrapServers),
            logger: testLogger())
        defer { producer.close() }
        try await producer.send([KafkaRecord(topic: "nagle.test", key: nil, value: Array("outcome".utf8))])
        let connections = Self.nagleOffOnBrokerSide(of: cluster)
        #expect(!connections.isEmpty)
        #expect(connections.allSatisfy { $0 })
    }
}
