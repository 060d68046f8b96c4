import Foundation
import NIOCore
import NIOPosix
import Testing
import TestSupport
@testable import PushHTTP

@Suite("Connections a host refuses leave nothing behind")
struct RefusedConnectionTests {
    /// What the test keeps of the connections it opened: weak references only, and the pools (which the transport keeps
    /// while a connection of theirs is open).
    private final class Opened: @unchecked Sendable {
        struct Weak { weak var connection: HTTP2ClientConnection? }
        var connections: [Weak] = []
        var pools: [HTTP2ConnectionPool] = []
    }

    @Test(
        "a connection whose TCP connection the host refused is freed: its channel handler context no longer holds it",
        arguments: HTTP2FramingKind.allFramings)
    func refusedConnectionIsFreed(_ framing: HTTP2FramingKind) async throws {
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let port = try Self.closedPort()
        let configuration = HTTPTransportConfiguration()
        let contexts = TLSContextCache(name: "refused-connection-test")
        let opened = Opened()
        let hosts = 20
        try await eventLoop.submit {
            for _ in 0..<hosts {
                let key = HTTP2ConnectionPool.Key(
                    host: "127.0.0.1", port: port, tls: TLSOptions(), lifetime: configuration.connectionLifetime)
                let pool = HTTP2ConnectionPool(
                    key: key, configuration: configuration, framing: framing, eventLoop: eventLoop,
                    fallback: FallbackTransport(nil, configuration: configuration, name: "refused-connection-test"),
                    contexts: contexts, whenUnused: { _ in })
                let connection = HTTP2ClientConnection(
                    pool: pool, configuration: configuration, lifetime: key.lifetime, framing: framing, eventLoop: eventLoop)
                connection.connect(to: key, contexts: contexts)
                opened.pools.append(pool)
                opened.connections.append(Opened.Weak(connection: connection))
            }
        }.get()
        // The refusal comes within milliseconds; the bound only ends a test that would otherwise never finish.
        let deadline = ContinuousClock.now + .seconds(60)
        var alive = hosts
        while alive > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            alive = try await eventLoop.submit { opened.connections.count { $0.connection != nil } }.get()
        }
        #expect(alive == 0, "\(alive) of \(hosts) refused connections are still held")
    }

    /// A loopback port nothing listens on: bound once to learn a free one, then closed.
    private static func closedPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
