import Foundation
import PushCore
import PushHTTP
import Synchronization
import Testing
@testable import ProxyPlugin

/// Answers 200 and keeps the connection identity of each request.
private final class IdentityRecordingTransport: HTTPTransport {
    let identities = Mutex<[ConnectionIdentity?]>([])

    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        identities.withLock { $0.append(request.connectionIdentity) }
        return HTTPResponse(status: 200, headers: [], body: [])
    }

    func closeConnections(except live: Set<ConnectionIdentity>) {}
    func shutdown() {}
}

@Suite("Push proxy: a client certificate is one per connection")
struct ProxyConnectionIdentityTests {
    @Test(
        "a proxy's client certificate is the connection identity of its requests, by content: the same path with a new certificate is a new identity"
    )
    func certificateContentIsTheIdentity() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proxy-identity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = directory.appendingPathComponent("client.pem").path, key = directory.appendingPathComponent("client-key.pem").path
        try "certificate one".write(toFile: certificate, atomically: true, encoding: .utf8)
        try "key one".write(toFile: key, atomically: true, encoding: .utf8)
        let tls = TLSOptions(clientCertificateFile: certificate, clientKeyFile: key)
        let configuration = ProxyConfiguration(url: "https://proxy.example/push", tls: tls)
        let transport = IdentityRecordingTransport()
        let provider = ProxyProvider(configuration: configuration, transport: transport)
        _ = await provider.deliver(ProxyProviderTests.delivery())
        let first = try #require(provider.connectionIdentities.first)
        #expect(provider.connectionIdentities.count == 1)
        #expect(transport.identities.withLock { $0 } == [first])
        try "certificate two".write(toFile: certificate, atomically: true, encoding: .utf8)
        #expect(
            ProxyProvider(configuration: configuration, transport: transport).connectionIdentities == provider.connectionIdentities,
            "the configuration carries the bytes it read: the file's new content is not its identity")
        // The next configuration version reads the files again.
        let reread = ProxyConfiguration(
            url: "https://proxy.example/push", tls: TLSOptions(clientCertificateFile: certificate, clientKeyFile: key))
        let rotated = ProxyProvider(configuration: reread, transport: transport)
        #expect(rotated.connectionIdentities.count == 1 && rotated.connectionIdentities != provider.connectionIdentities)
        #expect(
            ProxyProvider(configuration: ProxyConfiguration(url: "https://proxy.example/push"), transport: transport).connectionIdentities
                .isEmpty,
            "without a client certificate, no identity: every request may share the proxy's connections")
    }
}
