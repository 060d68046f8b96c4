import Foundation

/// How a test's `redis-server` is secured: a password for the `default` user (`requirepass`), TLS, ACL users.
public struct RedisServerOptions: Sendable {
    /// `requirepass` (and `masterauth` for replicas): the `default` user's password. Ignored with `acl`.
    public var password: String?
    /// TLS only: no plain port.
    public var tls: RedisTLSOptions?
    /// An ACL file whose `default` user is off.
    public var acl: RedisACL?

    public init(password: String? = nil, tls: RedisTLSOptions? = nil, acl: RedisACL? = nil) {
        self.password = password
        self.tls = tls
        self.acl = acl
    }

    /// What `redis-server` takes for these options, but the port; `aclFile` is where the ACL file was written.
    func serverArguments(aclFile: String?) -> [String] {
        var arguments: [String] = []
        if let tls { arguments += tls.serverArguments }
        if let acl, let aclFile {
            arguments += ["--aclfile", aclFile, "--masteruser", acl.user, "--masterauth", acl.password]
        } else if let password {
            arguments += ["--requirepass", password, "--masterauth", password]
        }
        return arguments
    }

    /// What `redis-cli` needs besides host and port to reach a server with these options as the ACL user.
    public var cliArguments: [String] {
        var arguments: [String] = []
        if let tls { arguments += tls.cliArguments }
        if let acl {
            arguments += ["--user", acl.user, "--pass", acl.password, "--no-auth-warning"]
        } else if let password {
            arguments += ["--pass", password, "--no-auth-warning"]
        }
        return arguments
    }

    /// `redis://` or `rediss://`, with the ACL user or the password, and no host yet: `<scheme>://[credentials@]`.
    func urlPrefix() -> String {
        let scheme = tls == nil ? "redis" : "rediss"
        if let acl { return "\(scheme)://\(acl.user):\(acl.password)@" }
        return "\(scheme)://\(password.map { ":\($0)@" } ?? "")"
    }
}

/// TLS for a test's `redis-server` (`--port 0 --tls-port P`): which server certificate it presents and whether it
/// asks clients for theirs. Replication and the cluster bus use TLS too, the node presenting the client
/// certificate when it connects to another.
public struct RedisTLSOptions: Sendable {
    /// `--tls-auth-clients`.
    public enum ClientCertificates: String, Sendable {
        /// Not asked for (`no`).
        case notRequested = "no"
        /// Mutual TLS: a client without a certificate of the CA is refused (`yes`).
        case required = "yes"
        /// Verified when given, not asked for (`optional`).
        case optional
    }

    /// Which certificate the server presents.
    public enum ServerCertificate: Sendable {
        /// Valid for `localhost`, `127.0.0.1` and `RedisTLSMaterial.serverName`.
        case loopback
        /// Valid for `RedisTLSMaterial.serverName` only.
        case serverNameOnly
    }

    public var material: RedisTLSMaterial
    public var clientCertificates: ClientCertificates
    public var serverCertificate: ServerCertificate

    public init(
        material: RedisTLSMaterial, clientCertificates: ClientCertificates = .notRequested, serverCertificate: ServerCertificate = .loopback
    ) {
        self.material = material
        self.clientCertificates = clientCertificates
        self.serverCertificate = serverCertificate
    }

    var serverArguments: [String] {
        let (certificate, key) =
            switch serverCertificate {
            case .loopback: (material.serverCertFile, material.serverKeyFile)
            case .serverNameOnly: (material.serverNameOnlyCertFile, material.serverNameOnlyKeyFile)
            }
        return [
            "--tls-cert-file", certificate, "--tls-key-file", key, "--tls-ca-cert-file", material.caFile,
            "--tls-auth-clients", clientCertificates.rawValue,
            // As a client (a replica to its master, a node to the cluster bus) a node presents the client
            // certificate: OpenSSL refuses a server-only certificate where a client one is required.
            "--tls-client-cert-file", material.clientCertFile, "--tls-client-key-file", material.clientKeyFile,
            "--tls-replication", "yes", "--tls-cluster", "yes",
        ]
    }

    /// redis-cli over TLS, trusting the CA and presenting the client certificate (redis-cli checks the chain,
    /// not the name, so it reaches a server whose certificate is valid for `serverName` only too).
    var cliArguments: [String] {
        ["--tls", "--cacert", material.caFile, "--cert", material.clientCertFile, "--key", material.clientKeyFile]
    }
}

/// An ACL file for a test's `redis-server`: the `default` user off, one user with a password and every command
/// and key (`+@all ~* &*`) but `deniedCommands`, so a test can take away one command the worker needs.
public struct RedisACL: Sendable {
    public var user: String
    public var password: String
    /// Commands the user may not run (`-<command>` each), e.g. `["wait"]` or `["evalsha"]`.
    public var deniedCommands: [String]

    /// - Parameter password: by default a fresh random one, of letters and digits only (no URL escaping).
    public init(user: String = "worker", password: String = RedisACL.randomPassword(), deniedCommands: [String] = []) {
        self.user = user
        self.password = password
        self.deniedCommands = deniedCommands
    }

    public static func randomPassword() -> String {
        String(UUID().uuidString.lowercased().filter { $0 != "-" }.prefix(24))
    }

    /// The file's lines, as `--aclfile` reads them.
    public var fileContents: String {
        let denied = deniedCommands.map { " -\($0)" }.joined()
        return "user default off\nuser \(user) on >\(password) ~* &* +@all\(denied)\n"
    }
}
