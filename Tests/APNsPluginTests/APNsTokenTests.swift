import PushCore
import PushCrypto
import Synchronization
import Testing
import TestSupport
@testable import APNsPlugin

@Suite("APNs provider token (ES256 JWT) lifetime")
struct APNsTokenTests {
    @Test("the token is an ES256 JWT with kid, iss and iat that verifies with the key's public half")
    func tokenShape() throws {
        let key = try PrivateKey.generateP256()
        let clock = FakeClock(start: 1_795_310_000_000)
        let cache = APNsTokenCache(key: key, keyId: "KEYID4APNS", teamId: "TEAM123456", clock: { clock.milliseconds })
        let parsed = try #require(JSONWebToken.parse(try cache.token()))
        #expect(parsed.header["alg"] == .string("ES256"))
        #expect(parsed.header["kid"] == .string("KEYID4APNS"))
        #expect(parsed.claims["iss"] == .string("TEAM123456"))
        #expect(parsed.claims["iat"] == .integer(1_795_310_000))
        #expect(parsed.signature.count == 64)
        #expect(parsed.verifies(with: try PublicKey(pem: key.publicKeyPEM())))
    }

    @Test("one token serves 1000 requests; it is renewed after 50 minutes, never before")
    func reuseAndRenewal() throws {
        let clock = FakeClock(start: 1_795_310_000_000)
        let cache = APNsTokenCache(key: try PrivateKey.generateP256(), keyId: "K", teamId: "T", clock: { clock.milliseconds })
        let first = try cache.token()
        for _ in 0..<1000 {
            #expect(try cache.token() == first)
            clock.advance(milliseconds: 2)
        }
        clock.advance(minutes: 49)
        #expect(try cache.token() == first)
        #expect(cache.generatedCount == 1)
        clock.advance(minutes: 1)
        #expect(try cache.token() != first)
        #expect(cache.generatedCount == 2)
    }

    @Test("ExpiredProviderToken renews at once, unless the token is younger than 20 minutes (TooManyProviderTokenUpdates)")
    func rejection() throws {
        let clock = FakeClock(start: 1_795_310_000_000)
        let cache = APNsTokenCache(key: try PrivateKey.generateP256(), keyId: "K", teamId: "T", clock: { clock.milliseconds })
        let first = try cache.token()
        clock.advance(minutes: 19)
        cache.rejected(first)
        #expect(try cache.token() == first)
        clock.advance(minutes: 1)
        cache.rejected(first)
        #expect(try cache.token() != first)
    }
}
