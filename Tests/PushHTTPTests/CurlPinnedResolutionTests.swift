import PushCore
import Testing
@testable import PushHTTP

@Suite("libcurl keeps no pinned address for good")
struct CurlPinnedResolutionTests {
    /// What a transfer's failure says about where curl got the address from: a refused connection means it had
    /// one (the pin), "could not resolve" means it had none and asked DNS for a name that does not exist.
    static func failure(_ transport: CurlHTTPTransport, pinned: Bool) async -> String {
        let request = HTTPRequest(
            url: "https://pinned-host.invalid:1/x", timeout: .seconds(30),
            pinnedResolution: pinned ? "pinned-host.invalid:1:127.0.0.1" : nil)
        do {
            let response = try await transport.send(request)
            return "answered \(response.status)"
        } catch {
            return "\(error)"
        }
    }

    @Test("a pinned address leaves curl's DNS cache after its lifetime, so hosts from subscriptions do not pile up")
    func pinnedEntryExpires() async throws {
        let transport = CurlHTTPTransport(name: "pin-test", pinnedResolutionLifetime: .seconds(1))
        defer { transport.shutdown() }
        let pinned = await Self.failure(transport, pinned: true)
        #expect(pinned.contains("(curl 7)"), "the pin was used: connection refused on 127.0.0.1:1, got \(pinned)")
        // Waiting longer than the lifetime only makes the expiry surer; nothing here depends on being fast.
        try await Task.sleep(for: .seconds(2))
        let later = await Self.failure(transport, pinned: false)
        #expect(later.contains("(curl 6)"), "the expired pin is gone: the name was looked up and not found, got \(later)")
    }

    @Test("pinned entries are handed to curl with the expiring + prefix, once")
    func expiringEntry() {
        #expect(CurlMultiLoop.expiringResolveEntry("push.example.net:443:198.41.0.4") == "+push.example.net:443:198.41.0.4")
        #expect(CurlMultiLoop.expiringResolveEntry("+push.example.net:443:198.41.0.4") == "+push.example.net:443:198.41.0.4")
    }
}
