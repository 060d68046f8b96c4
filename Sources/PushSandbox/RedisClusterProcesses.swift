import Foundation

/// A local Redis Cluster for tests and scenarios: `masters` masters (and `replicasPerMaster`
/// replicas each) as real `redis-server` processes, joined with `redis-cli --cluster create`. With TLS the nodes
/// talk TLS on their one port, on the cluster bus and for replication, and announce their TLS ports; with ACL
/// their `default` user is off. Every redis-cli call here speaks to them the same way.
///
/// Every wait here is asynchronous. Swift's tasks share one thread per core: a test that blocked
/// one of them while `redis-cli` joins a cluster would hold up every other test's tasks.
public final class RedisClusterProcesses: @unchecked Sendable {
    public let nodes: [RedisServerProcess]
    /// TLS and ACL, the same on every node.
    public let options: RedisServerOptions
    private let directory: URL

    private let hasReplicas: Bool

    private init(nodes: [RedisServerProcess], options: RedisServerOptions, directory: URL, hasReplicas: Bool) {
        self.nodes = nodes
        self.options = options
        self.directory = directory
        self.hasReplicas = hasReplicas
    }

    /// A cluster started and serving.
    public static func launch(masters: Int = 3, replicasPerMaster: Int = 0) async throws -> RedisClusterProcesses {
        try await launch(masters: masters, replicasPerMaster: replicasPerMaster, options: RedisServerOptions())
    }

    /// A cluster over TLS (nodes announcing their TLS ports), with an ACL user when `acl` is given, started and serving.
    public static func launch(masters: Int = 3, replicasPerMaster: Int = 0, tls: RedisTLSOptions, acl: RedisACL? = nil) async throws
        -> RedisClusterProcesses
    {
        try await launch(masters: masters, replicasPerMaster: replicasPerMaster, options: RedisServerOptions(tls: tls, acl: acl))
    }

    /// A cluster of nodes with these options, started and serving.
    public static func launch(masters: Int, replicasPerMaster: Int, options: RedisServerOptions) async throws -> RedisClusterProcesses {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var nodes: [RedisServerProcess] = []
        for _ in 0..<(masters * (1 + replicasPerMaster)) {
            nodes.append(try await RedisServerProcess.launchClusterNode(in: directory.path, options: options))
        }
        let cluster = RedisClusterProcesses(nodes: nodes, options: options, directory: directory, hasReplicas: replicasPerMaster > 0)
        let created = try await RedisCLI.run(
            options.cliArguments + ["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" }
                + ["--cluster-replicas", String(replicasPerMaster), "--cluster-yes"])
        guard created.status == 0 else { throw failure("redis-cli --cluster create failed: \(created.output.suffix(500))") }
        try await cluster.waitUntilServing()
        return cluster
    }

    deinit { stop() }

    /// `redis://127.0.0.1:<port>,…/0`: every node as a seed; with TLS `rediss://`, with ACL `<user>:<password>@`.
    public var urlString: String { options.urlPrefix() + nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") + "/0" }

    /// One seed only, as a user who names a single node of the cluster would.
    public var singleSeedURLString: String { options.urlPrefix() + "127.0.0.1:\(nodes[0].port)/0" }

    public func stop() {
        nodes.forEach { $0.stop() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The ports of the nodes that are masters now.
    public func masterPorts() async -> [Int] {
        var masters: [Int] = []
        for node in nodes where await run(on: node.port, ["role"]).hasPrefix("master") { masters.append(node.port) }
        return masters
    }

    /// What redis-cli printed for this command on each master, in the order of `masterPorts()`.
    public func onEachMaster(_ command: [String]) async -> [String] {
        var outputs: [String] = []
        for port in await masterPorts() { outputs.append(await run(on: port, command)) }
        return outputs
    }

    /// `DBSIZE` of each master, in the order of `masterPorts()`.
    public func keysPerMaster() async -> [Int] {
        await onEachMaster(["dbsize"]).map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
    }

    /// Waits until every node reports the cluster state ok (all slots covered, nodes agree) and every
    /// replica has its master's data: a replica that never synchronised refuses to take over.
    public func waitUntilServing(timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var serving = true
            for node in nodes where serving {
                serving = await run(on: node.port, ["cluster", "info"]).contains("cluster_state:ok")
                if serving, hasReplicas {
                    let role = await run(on: node.port, ["role"])
                    serving = !role.hasPrefix("slave") || role.contains("\nconnected")
                }
            }
            if serving { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw Self.failure("the Redis Cluster did not reach cluster_state:ok within \(timeout)")
    }

    /// Runs redis-cli against the node on `port` (over TLS and as the ACL user when the cluster has them) and
    /// returns what it printed ("" when it could not run).
    public func run(on port: Int, _ command: [String]) async -> String {
        await Self.run(["-h", "127.0.0.1", "-p", String(port)] + options.cliArguments + command)
    }

    /// Runs redis-cli with these arguments and returns what it printed ("" when it could not run).
    public static func run(_ arguments: [String]) async -> String {
        (try? await RedisCLI.run(arguments).output) ?? ""
    }

    private static func failure(_ text: String) -> NSError {
        NSError(domain: "redis-cluster", code: 1, userInfo: [NSLocalizedDescriptionKey: text])
    }
}

/// `redis-cli`, run to its end without blocking a task's thread.
public enum RedisCLI {
    static var path: String {
        for candidate in ["/usr/bin/redis-cli", "/usr/local/bin/redis-cli"] where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/redis-cli"
    }

    /// The exit status and everything the command printed on standard output.
    public static func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await ChildProcess.runToEnd(executable: path, arguments: arguments)
    }
}

extension ChildProcess {
    /// Runs a command to its end without blocking a task's thread: its exit status and everything it printed on
    /// standard output. The output goes to a file, not a pipe: nothing has to read while the command runs.
    public static func runToEnd(executable: String, arguments: [String]) async throws -> (status: Int32, output: String) {
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("child-output-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: outputFile) }
        let process = try ChildProcess(executable: executable, arguments: arguments, standardOutput: .file(outputFile.path))
        let status = await process.exitStatus()
        return (status, String(decoding: (try? Data(contentsOf: outputFile)) ?? Data(), as: UTF8.self))
    }
}
