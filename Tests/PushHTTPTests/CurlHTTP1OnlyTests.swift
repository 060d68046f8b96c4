import PushCore
import PushSandbox
import Testing
@testable import PushHTTP

@Suite("libcurl is the fallback for HTTP/1.1-only hosts, and only that")
struct CurlHTTP1OnlyTests {
    @Test("libcurl never negotiates HTTP/2: a host that offers only h2 gets no request from it")
    func neverHTTP2() async throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let server = try await SandboxServer.start(tls: tls) { _ in SandboxResponse(status: 200) }
        let transport = CurlHTTPTransport()
        defer { transport.shutdown() }
        let outcome: String
        do {
            let response = try await transport.send(
                HTTPRequest(url: server.baseURL + "/x", timeout: .seconds(10), tls: TLSOptions(caFile: tls.caFile)))
            outcome = "answered \(response.status)"
        } catch {
            outcome = "\(error)"
        }
        #expect(!outcome.hasPrefix("answered 200"), "an HTTP/2 exchange took place: \(outcome)")
        #expect(server.requests.isEmpty)
        await server.stop()
    }
}
