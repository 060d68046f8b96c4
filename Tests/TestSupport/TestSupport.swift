import Foundation
import Logging
import PushCore
import PushKafka
import PushKafkaMock
import PushPlugins
import PushSandbox
import ProxySandbox

/// A logger that only speaks up about problems, so test output stays readable.
public func testLogger(_ label: String = "test") -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = ProcessInfo.processInfo.environment["PUSH_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .error
    return logger
}

/// A Kafka mock cluster with the push topics, and group settings that join fast.
public struct KafkaFixture: Sendable {
    public let cluster: MockKafkaCluster
    public let jobsTopic = "push.jobs"
    public let urgentTopic = "push.jobs.urgent"
    public let outcomesTopic = "push.outcomes"
    public let deadLetterTopic = "push.dlq"

    public init(partitions: Int = 2) throws {
        cluster = try MockKafkaCluster(brokers: 1, logger: testLogger())
        try cluster.createTopic(jobsTopic, partitions: partitions)
        try cluster.createTopic(urgentTopic, partitions: partitions)
        try cluster.createTopic(outcomesTopic, partitions: 2)
        try cluster.createTopic(deadLetterTopic, partitions: 1)
    }

    public var fastGroupProperties: [String: String] {
        ["session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"]
    }

    public func consumerProperties(group: String) -> [String: String] {
        KafkaConsumer.defaultProperties(bootstrapServers: cluster.bootstrapServers, groupId: group)
            .merging(fastGroupProperties) { $1 }
    }

    public func producer() throws -> KafkaProducer {
        try KafkaProducer(
            properties: KafkaProducer.defaultProperties(bootstrapServers: cluster.bootstrapServers),
            logger: testLogger())
    }

    public func reader(topics: [String]? = nil) throws -> KafkaTopicReader {
        try KafkaTopicReader(
            bootstrapServers: cluster.bootstrapServers, topics: topics ?? [outcomesTopic, deadLetterTopic],
            logger: testLogger(), extraProperties: fastGroupProperties)
    }
}

/// A push-proxy sandbox over HTTP/2 + TLS with its own throwaway CA.
public struct ProxySandboxFixture: Sendable {
    public let tls: SandboxTLS
    public let server: SandboxServer

    public static func start(
        requireClientCertificate: Bool = false,
        responder: @escaping SandboxServer.Responder = ProxySandbox.respond
    ) async throws -> ProxySandboxFixture {
        let tls = try SandboxTLS.make()
        let server = try await SandboxServer.start(
            tls: tls, requireClientCertificate: requireClientCertificate,
            responder: responder)
        return ProxySandboxFixture(tls: tls, server: server)
    }

    public var url: String { server.baseURL + ProxySandbox.path }

    public func stop() async {
        await server.stop()
        tls.remove()
    }
}

extension KafkaMessage {
    public var valueString: String { String(decoding: value, as: UTF8.self) }
    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }.map { String(decoding: $0.value, as: UTF8.self) }
    }
    /// The message parsed as a JSON document.
    public var json: JSONValue? { try? JSONParser.parse(value) }
}

/// A job document for tests.
public func jobJSON(
    id: String, kind: String = "message", userId: String = "alice", ttl: Int = 60,
    createdAt: Int64 = currentTimeMilliseconds(), targets: [String]
) -> [UInt8] {
    Array(
        #"{"v":1,"id":"\#(id)","createdAt":\#(createdAt),"ttl":\#(ttl),"kind":"\#(kind)","userId":"\#(userId)","targets":[\#(targets.joined(separator: ","))]}"#
            .utf8)
}

public func proxyTarget(_ bindingId: String, token: String = "tok-\(UUID().uuidString.prefix(8))") -> String {
    #"{"bindingId":"\#(bindingId)","provider":"proxy","token":"\#(token)","tokenType":"fcm","platform":"android"}"#
}

extension JobDecoder {
    /// A decoder that knows every linked plugin's targets, as the worker's does.
    public init(limits: JobLimits = .default) {
        self.init(limits: limits, formats: TargetFormats(LinkedPlugins.all.map(\.targetFormat)))
    }
}

/// Runs `scripts/check-schemas.py` (the independent JSON Schema validator) with these arguments and
/// `input` on its standard input; its exit status and what it printed, output and errors together.
public func runSchemaCheck(_ arguments: [String], input: String = "") async throws -> (status: Int32, output: String) {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/check-schemas.py")
        .standardized
    let files = FileManager.default.temporaryDirectory.appendingPathComponent("check-schemas-\(UUID().uuidString)")
    let inputFile = files.appendingPathExtension("in"), outputFile = files.appendingPathExtension("out")
    defer { for file in [inputFile, outputFile] { try? FileManager.default.removeItem(at: file) } }
    try Data(input.utf8).write(to: inputFile)
    let process = try ChildProcess(
        executable: "/usr/bin/env", arguments: ["python3", script.path] + arguments,
        standardInput: .file(inputFile.path), standardOutput: .file(outputFile.path),
        standardError: .standardOutput)
    let status = await process.exitStatus()
    return (status, String(decoding: (try? Data(contentsOf: outputFile)) ?? Data(), as: UTF8.self))
}

/// A directory of one test's own, for the files it writes (keys, apps files, templates);
/// `remove()` deletes it with everything in it. A suite that is a final class creates one in its
/// `init` and removes it in `deinit`, which Swift Testing runs after each test.
public struct ScratchDirectory: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("push-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    public func remove() { try? FileManager.default.removeItem(at: url) }
}
