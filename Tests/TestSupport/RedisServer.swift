import PushRedis
import PushSandbox

extension RedisServerProcess {
    public var url: RedisURL { RedisURL(urlString)! }

    // The timeouts leave room for a loaded machine: the Redis suites run more than a hundred servers side by side on two
    // cores, and a server started a moment ago can wait for the CPU for seconds.

    public func client(connections: Int = 2) -> RedisClient {
        RedisClient(url: url, connections: connections, connectTimeout: .seconds(2), commandTimeout: .seconds(5))
    }
}

/// Where a store test's Redis runs: every store test holds on one node and on a Redis Cluster.
public enum RedisDeployment: String, CaseIterable, Sendable, CustomStringConvertible {
    case single
    case cluster

    public var description: String { self == .single ? "one redis-server" : "a 3-master Redis Cluster" }

    public func start() async throws -> RunningRedis {
        switch self {
        case .single: RunningRedis(single: try await RedisServerProcess.launch())
        case .cluster: RunningRedis(cluster: try await RedisClusterProcesses.launch(masters: 3))
        }
    }
}

/// The same deployments over TLS only, each with an ACL user (`worker`, its `default` user off): what a test of
/// `rediss://` runs against.
public enum RedisTLSDeployment: String, CaseIterable, Sendable, CustomStringConvertible {
    case single
    case cluster

    public var description: String {
        self == .single ? "one redis-server over TLS with an ACL user" : "a 3-master Redis Cluster over TLS with an ACL user"
    }

    /// Starts the deployment with fresh certificates (removed by `RunningRedis.stop`).
    /// - Parameters:
    ///   - clientCertificates: whether the servers require a client certificate (mutual TLS).
    ///   - serverCertificate: `.serverNameOnly`: the servers' certificate is not valid for 127.0.0.1, where they
    ///     listen and what cluster nodes announce; a client must verify `RunningRedis.serverName` instead.
    ///   - deniedCommands: commands the ACL user may not run.
    public func start(
        clientCertificates: RedisTLSOptions.ClientCertificates = .notRequested,
        serverCertificate: RedisTLSOptions.ServerCertificate = .loopback, deniedCommands: [String] = []
    ) async throws -> RunningRedis {
        let material = try RedisTLSMaterial.make()
        let options = RedisServerOptions(
            tls: RedisTLSOptions(material: material, clientCertificates: clientCertificates, serverCertificate: serverCertificate),
            acl: RedisACL(deniedCommands: deniedCommands))
        do {
            switch self {
            case .single: return RunningRedis(single: try await RedisServerProcess.launch(options: options), tlsMaterial: material)
            case .cluster:
                return RunningRedis(
                    cluster: try await RedisClusterProcesses.launch(masters: 3, replicasPerMaster: 0, options: options),
                    tlsMaterial: material)
            }
        } catch {
            material.remove()
            throw error
        }
    }
}

/// A started single node or cluster; `client` names its node or every node of the cluster.
public final class RunningRedis: Sendable {
    public let single: RedisServerProcess?
    public let cluster: RedisClusterProcesses?
    /// The certificates and keys of a TLS deployment (nil without TLS): `caFile` to trust, `clientCertFile` and
    /// `clientKeyFile` for mutual TLS, `unrelatedCAFile` to fail verification.
    public let tlsMaterial: RedisTLSMaterial?

    init(single: RedisServerProcess, tlsMaterial: RedisTLSMaterial? = nil) {
        self.single = single
        cluster = nil
        self.tlsMaterial = tlsMaterial
    }

    init(cluster: RedisClusterProcesses, tlsMaterial: RedisTLSMaterial? = nil) {
        single = nil
        self.cluster = cluster
        self.tlsMaterial = tlsMaterial
    }

    /// `redis://…`, or `rediss://worker:<password>@…` for a TLS deployment.
    public var urlString: String { single?.urlString ?? cluster!.urlString }

    public var url: RedisURL { RedisURL(urlString)! }

    /// The name the servers' certificates carry besides the loopback names (the only one with
    /// `.serverNameOnly`): what a client told to verify a name verifies. Nil without TLS.
    public var serverName: String? { tlsMaterial?.serverName }

    /// The ACL user and its password, for a TLS deployment.
    public var acl: RedisACL? { (single?.options ?? cluster?.options)?.acl }

    public func client(connections: Int = 2) -> RedisClient {
        precondition(tlsMaterial == nil, "a TLS deployment's client needs its TLS settings: build it from url and tlsMaterial")
        return RedisClient(url: url, connections: connections, connectTimeout: .seconds(2), commandTimeout: .seconds(5))
    }

    public func stop() {
        single?.stop()
        cluster?.stop()
        tlsMaterial?.remove()
    }
}
