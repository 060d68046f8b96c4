import ArgumentParser
import Foundation
import PushCore
import PushKafkaMock
import PushWorker

struct KafkaMock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka-mock",
        abstract: "Run librdkafka's mock Kafka cluster on loopback (for local runs and tests; not a real broker).")

    @Option(help: "Topics to create, as name:partitions.")
    var topic: [String] = ["push.jobs:4", "push.outcomes:4", "push.dlq:1"]

    @Option(help: "Number of brokers.")
    var brokers = 1

    @Option(help: "Also write the bootstrap servers to this file.")
    var bootstrapFile: String?

    @Option(
        help: """
            Create a FIFO at this path and read fault-injection commands from it, one per line: \
            broker-down <id|all>, broker-up <id|all>, produce-errors <n>, request-errors <apiKey> <n> <errorCode>, \
            rtt <id|all> <ms>. Each command is acknowledged on standard output ("control: ok <command>").
            """)
    var control: String?

    func run() async throws {
        let cluster = try MockKafkaCluster(brokers: brokers)
        for spec in topic {
            let parts = spec.split(separator: ":")
            try cluster.createTopic(String(parts[0]), partitions: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        }
        if let control { try Self.serveControl(at: control, cluster: cluster) }
        if let bootstrapFile { try cluster.bootstrapServers.write(toFile: bootstrapFile, atomically: true, encoding: .utf8) }
        FileHandle.standardOutput.write(Data((cluster.bootstrapServers + "\n").utf8))
        await ShutdownSignals.first()
        withExtendedLifetime(cluster) {}
        if let control { unlink(control) }
    }

    /// Reads commands from a FIFO on a thread of its own. The FIFO is opened read-write so
    /// that writers coming and going never make it reach end-of-file.
    static func serveControl(at path: String, cluster: MockKafkaCluster) throws {
        unlink(path)
        guard mkfifo(path, 0o600) == 0 else { throw ValidationError("cannot create the control FIFO \(path)") }
        let descriptor = open(path, O_RDWR)
        guard descriptor >= 0 else { throw ValidationError("cannot open the control FIFO \(path)") }
        NamedThread.start("kafka-mock-ctl") {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                pending.append(contentsOf: buffer[..<count])
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self).trimmingCharacters(in: .whitespaces)
                    pending.removeSubrange(...newline)
                    guard !line.isEmpty else { continue }
                    let answer: String
                    do {
                        try MockKafkaControl.parse(line).apply(to: cluster)
                        answer = "control: ok \(line)\n"
                    } catch {
                        answer = "control: error \(error)\n"
                    }
                    FileHandle.standardOutput.write(Data(answer.utf8))
                }
            }
        }
    }
}
