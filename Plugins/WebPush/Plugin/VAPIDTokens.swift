import PushCore
import PushCrypto
import Synchronization

/// RFC 8292 VAPID tokens: an ES256 JWT per push-service origin (`aud`), valid for the
/// configured lifetime (≤ 24 h), reused until an hour before it expires.
final class VAPIDTokens: Sendable {
    private struct Issued {
        let header: String
        let expiresAt: Int64
    }

    private let key: PrivateKey
    private let subject: String
    private let lifetime: Int64
    private let clock: @Sendable () -> Int64
    private let tokens = Mutex<[String: Issued]>([:])
    /// `k=` of the Authorization header: the uncompressed public key, base64url.
    let publicKey: String

    init(key: PrivateKey, subject: String, lifetime: Duration, clock: @escaping @Sendable () -> Int64) throws {
        self.key = key
        self.subject = subject
        self.lifetime = min(lifetime.milliseconds, 24 * 3600 * 1000)
        self.clock = clock
        publicKey = Base64URL.encode(try key.rawPublicKey())
    }

    /// `vapid t=<jwt>, k=<public key>` for `origin`.
    func authorization(for origin: String) throws(CryptoError) -> String {
        let now = clock()
        if let cached = tokens.withLock({ $0[origin] }), now < cached.expiresAt - 3_600_000 { return cached.header }
        let expiresAt = now.adding(saturating: lifetime)
        let jwt = try JSONWebToken.sign(algorithm: .es256, headerFields: [("typ", "JWT")], claims: { claims in
            claims.member("aud", origin)
            claims.member("exp", expiresAt / 1000)
            claims.member("sub", subject)
        }, key: key)
        let header = "vapid t=\(jwt), k=\(publicKey)"
        tokens.withLock { $0[origin] = Issued(header: header, expiresAt: expiresAt) }
        return header
    }
}
