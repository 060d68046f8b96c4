import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI

/// OAuth2 access tokens for one service account (RFC 7523 JWT-bearer grant, RS256
/// assertion), kept in the shared `AccessTokenCache`: one token serves every request of the
/// project until shortly before it expires, concurrent callers share one refresh, and a
/// token-endpoint failure is not retried per message but after a backoff.
public final class FCMAccessTokens: Sendable {
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Refresh this long before `expires_in` runs out.
    public static let refreshMargin: Int64 = 5 * 60 * 1000

    public typealias Failure = AccessTokenCache.Failure

    private let cache: AccessTokenCache

    public init(
        account: ServiceAccount, transport: any HTTPTransport, tls: TLSOptions,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) throws {
        let key = try PrivateKey(pem: account.privateKeyPEM)
        cache = AccessTokenCache(refreshMargin: Self.refreshMargin, clock: clock) {
            await Self.grant(account: account, key: key, transport: transport, tls: tls, now: clock())
        }
    }

    /// Token requests made so far.
    public var requestsMade: Int { get async { await cache.requestsMade } }

    /// A valid access token, fetching one only when needed.
    public func token() async throws(Failure) -> String {
        try await cache.token()
    }

    func issued() async throws(Failure) -> AccessTokenCache.Issued {
        try await cache.issued()
    }

    /// FCM answered 401 with `token`: drop it so the next caller fetches a new one.
    /// Returns false when the token was fresh (< 1 min), i.e. a new one will not help.
    public func rejected(_ token: String) async -> Bool {
        await cache.rejected(token)
    }

    private static func grant(
        account: ServiceAccount, key: PrivateKey, transport: any HTTPTransport, tls: TLSOptions,
        now: Int64
    ) async -> Result<AccessTokenCache.Grant, Failure> {
        let assertion: String
        do {
            assertion = try JSONWebToken.sign(
                algorithm: .rs256, headerFields: [("typ", "JWT"), ("kid", account.privateKeyId)],
                claims: { claims in
                    claims.member("iss", account.clientEmail)
                    claims.member("scope", scope)
                    claims.member("aud", account.tokenURI)
                    claims.member("iat", now / 1000)
                    claims.member("exp", now / 1000 + 3600)
                }, key: key)
        } catch {
            return .failure(.refused("cannot sign the assertion: \(error)"))
        }
        let form = AccessTokenCache.formBody(["grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion])
        let request = HTTPRequest(
            url: account.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded")],
            body: form, timeout: .seconds(10), tls: tls)
        return await AccessTokenCache.requestGrant(request, over: transport, endpoint: "token endpoint", refused: "the grant") {
            document, status in
            if case .string(let error)? = document?["error"] { error } else { "HTTP \(status)" }
        }
    }
}
