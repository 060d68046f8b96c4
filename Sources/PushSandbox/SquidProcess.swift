import Foundation

/// A real squid (Debian's `squid`) on a free loopback port, as the egress proxy of tests: it takes only CONNECT, only
/// with Basic credentials (`basic_ncsa_auth` on a password file of its own), only to `connectPorts`, and resolves the
/// names of `hosts` to 127.0.0.1 from a hosts file of its own, with no name server: those names lead to the sandboxes
/// through it and through nothing else. Everything it writes (configuration, logs, pid file) is in a temporary
/// directory; each CONNECT it handled is a line of its access log (`connects()`).
public final class SquidProcess: @unchecked Sendable {
    /// One CONNECT as squid logged it.
    public struct Connect: Sendable, Equatable, CustomStringConvertible {
        /// `host:port` of the CONNECT line.
        public let target: String
        /// The status squid answered (407 without valid credentials) or that the tunnel ended with.
        public let status: Int
        public var description: String { "CONNECT \(target) \(status)" }

        public init(target: String, status: Int) {
            self.target = target
            self.status = status
        }
    }

    public let port: Int
    public let user: String
    public let password: String
    private let directory: String
    private var process: ChildProcess?
    private let lock = NSLock()

    public static let executable = "/usr/sbin/squid"
    static let authenticator = "/usr/lib/squid/basic_ncsa_auth"
    static let openssl = "/usr/bin/openssl"

    /// Whether squid and its Basic authenticator are installed.
    public static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: executable) && FileManager.default.isExecutableFile(atPath: authenticator)
    }

    private init(port: Int, user: String, password: String, directory: String) {
        self.port = port
        self.user = user
        self.password = password
        self.directory = directory
    }

    /// Started and accepting connections. `hosts` resolve to 127.0.0.1 at the proxy only; CONNECT is allowed to
    /// `connectPorts` only.
    public static func launch(
        hosts: [String], connectPorts: [Int], user: String = "pusher", password: String = "s3cret:p@ss"
    ) async throws -> SquidProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("squid-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Run as root, squid drops to its own user (`cache_effective_user`, "proxy"), which must write its logs here.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory)
        let squid = SquidProcess(
            port: try RedisServerProcess.allocatePort(clusterBus: false), user: user, password: password, directory: directory)
        do {
            try await squid.writeFiles(hosts: hosts, connectPorts: connectPorts)
            try await squid.start()
        } catch {
            squid.stop()
            throw error
        }
        return squid
    }

    /// `http://user:password@127.0.0.1:port` (percent-encoded), or with other credentials.
    public func url(user: String? = nil, password: String? = nil) -> String {
        let encode = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text }
        return "http://\(encode(user ?? self.user)):\(encode(password ?? self.password))@127.0.0.1:\(port)"
    }

    /// The URL without credentials.
    public var urlWithoutCredentials: String { "http://127.0.0.1:\(port)" }

    /// The CONNECTs squid logged so far. squid logs a tunnel when it ends: close the client's connections first.
    public func connects() -> [Connect] {
        guard let text = try? String(contentsOfFile: "\(directory)/access.log", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 3, fields[0] == "CONNECT", let status = Int(fields[2]) else { return nil }
            return Connect(target: String(fields[1]), status: status)
        }
    }

    /// The CONNECTs once at least `count` are logged, or those logged when `patience` ran out.
    public func connects(atLeast count: Int, patience: Duration = .seconds(60)) async -> [Connect] {
        let giveUp = ContinuousClock.now + patience
        var logged = connects()
        while logged.count < count, ContinuousClock.now < giveUp {
            try? await Task.sleep(for: .milliseconds(50))
            logged = connects()
        }
        return logged
    }

    public func stop() {
        lock.withLock {
            process?.kill()
            process = nil
        }
    }

    /// Stops squid and removes its directory.
    public func remove() {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }

    private func writeFiles(hosts: [String], connectPorts: [Int]) async throws {
        try write("hosts", hosts.map { "127.0.0.1 \($0)\n" }.joined())
        try write("passwd", "\(user):\(try await Self.apr1Hash(password, in: directory))\n")
        let ports = connectPorts.map(String.init).joined(separator: " ")
        try write(
            "squid.conf",
            """
            http_port 127.0.0.1:\(port)
            pid_filename \(directory)/squid.pid
            cache_log \(directory)/cache.log
            logformat sandbox %rm %ru %>Hs %un
            access_log stdio:\(directory)/access.log sandbox
            buffered_logs off
            coredump_dir \(directory)
            cache deny all
            pinger_enable off
            netdb_filename none
            logfile_rotate 0
            shutdown_lifetime 0 seconds
            hosts_file \(directory)/hosts
            dns_nameservers 127.0.0.1
            auth_param basic program \(Self.authenticator) \(directory)/passwd
            auth_param basic children 2 startup=1
            auth_param basic realm push-sandbox
            acl authenticated proxy_auth REQUIRED
            acl SSL_ports port \(ports)
            acl CONNECT method CONNECT
            http_access deny !CONNECT
            http_access deny CONNECT !SSL_ports
            http_access allow CONNECT authenticated
            http_access deny all

            """)
    }

    private func write(_ name: String, _ contents: String) throws {
        let path = "\(directory)/\(name)"
        try contents.write(toFile: path, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
    }

    /// The password's Apache MD5 hash (`$apr1$…`), which `basic_ncsa_auth` accepts, from `openssl passwd -apr1`.
    static func apr1Hash(_ password: String, in directory: String) async throws -> String {
        let input = "\(directory)/password.in", output = "\(directory)/password.out"
        try password.write(toFile: input, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: input) }
        let child = try ChildProcess(
            executable: openssl, arguments: ["passwd", "-apr1", "-in", input], standardOutput: .file(output))
        guard await child.exitStatus() == 0,
            let hash = try? String(contentsOfFile: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            hash.hasPrefix("$apr1$")
        else { throw SquidError("openssl passwd -apr1 did not hash the sandbox proxy's password") }
        return hash
    }

    private func start() async throws {
        let child = try ChildProcess(
            executable: Self.executable, arguments: ["-N", "-f", "\(directory)/squid.conf"],
            standardOutput: .file("\(directory)/squid.out"), standardError: .standardOutput)
        lock.withLock { process = child }
        // Generous, as for redis-server: a process started beside many others may wait long for the CPU.
        let giveUp = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < giveUp {
            if child.hasExited {
                let log = (try? String(contentsOfFile: "\(directory)/cache.log", encoding: .utf8)) ?? ""
                throw SquidError("squid exited at start on port \(port): \(log.split(separator: "\n").suffix(3).joined(separator: " | "))")
            }
            if RedisServerProcess.canConnect(port: port) { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw SquidError("squid did not start on port \(port)")
    }
}

public struct SquidError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
