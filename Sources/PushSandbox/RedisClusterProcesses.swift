import Foundation

/// A local Redis Cluster for tests and scenarios: `masters` masters (and `replicasPerMaster`
/// replicas each) as real `redis-server` processes, joined with `redis-cli --cluster create`.
public final class RedisClusterProcesses: @unchecked Sendable {
    public let nodes: [RedisServerProcess]
    private let directory: URL

    public init(masters: Int = 3, replicasPerMaster: Int = 0) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        nodes = try (0..<(masters * (1 + replicasPerMaster))).map { _ in try RedisServerProcess(clusterNodeIn: directory.path) }
        let create = Process()
        create.executableURL = URL(fileURLWithPath: Self.cli)
        create.arguments = ["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" }
            + ["--cluster-replicas", String(replicasPerMaster), "--cluster-yes"]
        create.standardOutput = FileHandle.nullDevice
        create.standardError = FileHandle.nullDevice
        try create.run()
        create.waitUntilExit()
        guard create.terminationStatus == 0 else { throw Self.failure("redis-cli --cluster create failed") }
        try waitUntilServing()
    }

    deinit { stop() }

    /// `redis://127.0.0.1:<port>,…/0`: every node as a seed.
    public var urlString: String { "redis://" + nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") + "/0" }

    /// One seed only, as a user who names a single node of the cluster would.
    public var singleSeedURLString: String { "redis://127.0.0.1:\(nodes[0].port)/0" }

    public func stop() {
        nodes.forEach { $0.stop() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// `CLUSTER INFO` of a node, via redis-cli.
    public func clusterInfo(port: Int) -> String { Self.run(["-p", String(port), "cluster", "info"]) }

    /// The ports of the nodes that are masters now.
    public var masterPorts: [Int] {
        nodes.map(\.port).filter { Self.run(["-p", String($0), "role"]).hasPrefix("master") }
    }

    /// Waits until every node reports the cluster state ok (all slots covered, nodes agree).
    public func waitUntilServing(timeout: TimeInterval = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if nodes.allSatisfy({ clusterInfo(port: $0.port).contains("cluster_state:ok") }) { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw Self.failure("the Redis Cluster did not reach cluster_state:ok within \(Int(timeout)) s")
    }

    static var cli: String {
        for candidate in ["/usr/bin/redis-cli", "/usr/local/bin/redis-cli"] where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/redis-cli"
    }

    /// Runs redis-cli with these arguments and returns what it printed.
    public static func run(_ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "" }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    private static func failure(_ text: String) -> NSError {
        NSError(domain: "redis-cluster", code: 1, userInfo: [NSLocalizedDescriptionKey: text])
    }
}
