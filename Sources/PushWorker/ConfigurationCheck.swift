import Foundation
import NIOCore
import NIOPosix
import PushCore
import PushHTTP

/// `push-worker check-config`: everything `run` would refuse at start-up (environment,
/// credential files, payload templates), plus whether each configured endpoint answers —
/// a TCP connect to Kafka brokers and Redis, a TLS handshake and HTTP exchange with the
/// provider endpoints (any HTTP status counts as reachable). One line per problem.
public enum ConfigurationCheck {
    /// An endpoint to reach and how.
    public struct Endpoint: Sendable, Equatable {
        public enum Probe: Sendable, Equatable {
            case tcp(host: String, port: Int)
            case https(url: String, tls: TLSOptions)
        }

        public var name: String
        public var probe: Probe
    }

    public static func run(environment: [String: String], timeout: Duration = .seconds(3)) async -> [String] {
        let configuration: WorkerConfiguration
        switch WorkerConfiguration.load(from: environment) {
        case .success(let loaded): configuration = loaded
        case .failure(let errors): return errors.problems
        }
        var problems =
            configuration.unknownVariables.map { "\($0) is not a push-worker variable (a typo?)" } + configuration.removedVariables
        problems += await unreachable(endpoints(of: configuration), timeout: timeout)
        return problems
    }

    /// The endpoints a worker with this configuration talks to, as each plugin names them (Web Push
    /// endpoints come with each subscription, so there is none to check).
    public static func endpoints(of configuration: WorkerConfiguration) -> [Endpoint] {
        var endpoints: [Endpoint] = []
        for broker in configuration.brokers.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !broker.isEmpty {
            let (host, port) = hostAndPort(broker, defaultPort: 9092)
            endpoints.append(Endpoint(name: "Kafka broker \(broker)", probe: .tcp(host: host, port: port)))
        }
        if let redis = configuration.redisURL {
            endpoints.append(Endpoint(name: "Redis \(redis.host):\(redis.port)", probe: .tcp(host: redis.host, port: redis.port)))
        }
        for plugin in configuration.plugins {
            endpoints += plugin.endpoints.map { Endpoint(name: $0.name, probe: .https(url: $0.url, tls: $0.tls)) }
        }
        return endpoints
    }

    /// One line per endpoint that did not answer within `timeout`, probed concurrently.
    public static func unreachable(_ endpoints: [Endpoint], timeout: Duration) async -> [String] {
        let transport = CurlHTTPTransport(configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: 1), name: "check-config")
        defer { transport.shutdown() }
        let group = MultiThreadedEventLoopGroup.singleton
        let failures = await withTaskGroup(of: (Int, String?).self) { tasks in
            for (index, endpoint) in endpoints.enumerated() {
                tasks.addTask {
                    switch endpoint.probe {
                    case .tcp(let host, let port):
                        do {
                            let channel = try await ClientBootstrap(group: group)
                                .connectTimeout(
                                    .nanoseconds(
                                        Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
                                )
                                .connect(host: host, port: port).get()
                            try? await channel.close()
                            return (index, nil)
                        } catch {
                            return (index, "\(endpoint.name): cannot connect: \(error)")
                        }
                    case .https(let url, let tls):
                        do {
                            _ = try await transport.send(HTTPRequest(method: "GET", url: url, timeout: timeout, tls: tls))
                            return (index, nil)
                        } catch {
                            return (index, "\(endpoint.name): \(error)")
                        }
                    }
                }
            }
            var failures: [(Int, String)] = []
            for await (index, failure) in tasks { if let failure { failures.append((index, failure)) } }
            return failures
        }
        return failures.sorted { $0.0 < $1.0 }.map(\.1)
    }

    static func hostAndPort(_ address: String, defaultPort: Int) -> (String, Int) {
        let address = address.range(of: "://").map { String(address[$0.upperBound...]) } ?? address
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else {
            return (address, defaultPort)
        }
        return (String(address[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }
}
