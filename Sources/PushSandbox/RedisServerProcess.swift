import Foundation
import Synchronization

/// A real `redis-server` process on a free loopback port, without persistence, for tests and the demo.
/// It can be stopped and started again on the same port to simulate an outage. With TLS (`options.tls`) it
/// listens on that port with TLS only.
public final class RedisServerProcess: @unchecked Sendable {
    /// The one port it listens on: the TLS port with TLS.
    public let port: Int
    public let options: RedisServerOptions
    /// Where a cluster node keeps its `nodes.conf`; nil: not a cluster node.
    private let clusterDirectory: String?
    /// The port of the master this server replicates (`--replicaof`); nil: a master.
    private let replicaOf: Int?
    /// The ACL file written for `options.acl`, removed with the server.
    private let aclFile: String?
    private var process: ChildProcess?
    private let lock = NSLock()

    private init(port: Int, options: RedisServerOptions, clusterDirectory: String?, replicaOf: Int? = nil) throws {
        self.port = port
        self.options = options
        self.clusterDirectory = clusterDirectory
        self.replicaOf = replicaOf
        if let acl = options.acl {
            let file = "\(clusterDirectory ?? FileManager.default.temporaryDirectory.path)/redis-\(port)-\(UUID().uuidString).acl"
            try acl.fileContents.write(toFile: file, atomically: true, encoding: .utf8)
            aclFile = file
        } else {
            aclFile = nil
        }
    }

    /// A server started and accepting connections.
    public static func launch(password: String? = nil) async throws -> RedisServerProcess {
        try await launch(options: RedisServerOptions(password: password))
    }

    /// A server with these options (TLS, ACL users), started and accepting connections.
    public static func launch(options: RedisServerOptions) async throws -> RedisServerProcess {
        try await launch { try RedisServerProcess(port: try allocatePort(clusterBus: false), options: options, clusterDirectory: nil) }
    }

    /// A replica of `master` (`--replicaof`, with its options: over TLS as the ACL user when it has them),
    /// started and accepting connections; its first sync may still be under way.
    public static func launchReplica(of master: RedisServerProcess) async throws -> RedisServerProcess {
        try await launch {
            try RedisServerProcess(
                port: try allocatePort(clusterBus: false), options: master.options,
                clusterDirectory: nil, replicaOf: master.port)
        }
    }

    /// A node with cluster support on (`--cluster-enabled yes`), not yet part of a cluster; its
    /// cluster bus port (the port + 10 000) is free too.
    static func launchClusterNode(in directory: String, options: RedisServerOptions = RedisServerOptions()) async throws
        -> RedisServerProcess
    {
        try await launch { try RedisServerProcess(port: try allocatePort(clusterBus: true), options: options, clusterDirectory: directory) }
    }

    /// Starts a server on a new port; one that exits at once (its port was taken after it was found
    /// free) is tried again on the next port, up to three times.
    private static func launch(_ make: () throws -> RedisServerProcess) async throws -> RedisServerProcess {
        var attempt = 1
        while true {
            let server = try make()
            do {
                try await server.start()
                return server
            } catch let error as NSError where error.domain == "redis-server" && error.code == Self.exitedAtStart && attempt < 3 {
                attempt += 1
            }
        }
    }

    private static let exitedAtStart = 3

    /// Starts the server (again, after `stop`) on its port and waits until it accepts connections.
    public func start() async throws {
        try spawn()
        // Generous: the Redis suites start more than a hundred servers side by side on two cores, and a fresh
        // process can wait for the CPU for tens of seconds (20 s was once not enough for any of them).
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if lock.withLock({ process?.hasExited ?? false }) {
                stop()
                throw NSError(
                    domain: "redis-server", code: Self.exitedAtStart,
                    userInfo: [NSLocalizedDescriptionKey: "redis-server exited at start on port \(port) (port taken?)"])
            }
            if Self.canConnect(port: port) { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw NSError(domain: "redis-server", code: 1, userInfo: [NSLocalizedDescriptionKey: "redis-server did not start on port \(port)"])
    }

    deinit {
        stop()
        if let aclFile { try? FileManager.default.removeItem(atPath: aclFile) }
    }

    /// `redis://[:password@]127.0.0.1:<port>/0`; with TLS `rediss://`, with ACL `<user>:<password>@`.
    public var urlString: String { options.urlPrefix() + "127.0.0.1:\(port)/0" }

    /// What redis-cli needs to reach this server as its user: host, port, TLS and credentials.
    public var cliArguments: [String] { ["-h", "127.0.0.1", "-p", String(port)] + options.cliArguments }

    /// Whether a `redis-server` executable is installed.
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    private func spawn() throws {
        try lock.withLock {
            guard process == nil else { return }
            // With TLS, the only port is the TLS port; the cluster bus is that port + 10 000.
            var arguments = options.tls == nil ? ["--port", String(port)] : ["--port", "0", "--tls-port", String(port)]
            arguments += [
                "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--loglevel", "warning",
                // A replica's first copy starts at once, not after the default 5 s wait for more replicas.
                "--repl-diskless-sync-delay", "0",
            ]
            arguments += options.serverArguments(aclFile: aclFile)
            if let replicaOf { arguments += ["--replicaof", "127.0.0.1", String(replicaOf)] }
            if let clusterDirectory {
                arguments += [
                    "--cluster-enabled", "yes", "--cluster-config-file", "\(clusterDirectory)/nodes-\(port).conf",
                    "--cluster-node-timeout", "2000", "--dir", clusterDirectory,
                ]
            }
            process = try ChildProcess(executable: Self.executable, arguments: arguments)
        }
    }

    /// Freezes the server (SIGSTOP): its connections stay open, nothing answers. `resume` thaws it.
    public func pause() { lock.withLock { process?.signal(SIGSTOP) } }

    public func resume() { lock.withLock { process?.signal(SIGCONT) } }

    /// Kills the server (SIGKILL: an outage, not a clean shutdown).
    public func stop() {
        lock.withLock {
            process?.kill()
            process = nil
        }
    }

    static var executable: String {
        for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/redis-server"
    }

    static func canConnect(port: Int) -> Bool { onLoopback(port: port) { connect($0, $1, $2) } }

    /// The next port of this process's own range, free now. Ports are handed out once each per run:
    /// servers that tests start side by side never race for a port the kernel handed to both (a
    /// cluster node once joined a plain server that had taken its port first). The range and its
    /// cluster bus ports (the port + 10 000, which must be free too) lie below the kernel's
    /// ephemeral ports (32 768 and up on Linux by default), which any outgoing connection or
    /// mock broker may take at any moment.
    static func allocatePort(clusterBus: Bool) throws -> Int {
        for _ in 0..<portRange.count {
            let port = nextPort.withLock { next -> Int in
                defer { next = next + 1 < portRange.upperBound ? next + 1 : portRange.lowerBound }
                return next
            }
            if canBind(port: port), !clusterBus || canBind(port: port + 10_000) { return port }
        }
        throw NSError(domain: "redis-server", code: 2, userInfo: [NSLocalizedDescriptionKey: "no free port in \(portRange)"])
    }

    private static let portRange = 20_000..<22_768
    private static let nextPort = Mutex(Int.random(in: portRange))

    static func canBind(port: Int) -> Bool { onLoopback(port: port) { bind($0, $1, $2) } }

    /// Whether `call` (connect or bind) succeeds for a fresh TCP socket and 127.0.0.1:`port`; the socket is closed after.
    private static func onLoopback(port: Int, _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Bool {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
