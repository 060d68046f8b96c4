import PushCore
import PushCrypto
import PushHTTP
import Testing
@testable import FCMPlugin

@Suite("Token endpoint answers are numbers from outside")
struct FCMHostileAnswerTests {
    /// A token endpoint that answers every grant with the given `expires_in`.
    struct TokenEndpoint: HTTPTransport {
        let expiresIn: String

        func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
            HTTPResponse(
                status: 200, headers: [], body: Array(#"{"access_token":"ya29.t","expires_in":\#(expiresIn),"token_type":"Bearer"}"#.utf8))
        }

        func closeConnections(except live: Set<ConnectionIdentity>) {}
        func shutdown() {}
    }

    static func account() throws -> ServiceAccount {
        ServiceAccount(
            projectId: "p", clientEmail: "a@p.iam.gserviceaccount.com", privateKeyId: "k",
            privateKeyPEM: try PrivateKey.generateRSA().pem(), tokenURI: "https://oauth2.example/token")
    }

    @Test(
        "an absurd expires_in is clamped to a day: the token is used, nothing traps",
        arguments: [
            "99999999999999999", "9223372036854775807", "-9223372036854775808", "0",
        ])
    func absurdLifetime(_ expiresIn: String) async throws {
        let now: Int64 = 1_795_310_000_000
        let tokens = try FCMAccessTokens(
            account: Self.account(), transport: TokenEndpoint(expiresIn: expiresIn), tls: TLSOptions(),
            clock: { now })
        let issued = try await tokens.issued()
        #expect(issued.token == "ya29.t")
        #expect(issued.expiresAt >= now && issued.expiresAt <= now + 86_400_000)
    }
}
