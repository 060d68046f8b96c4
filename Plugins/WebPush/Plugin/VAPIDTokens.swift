import Metrics
import PushCore
import PushCrypto

/// RFC 8292 VAPID tokens: an ES256 JWT per push-service origin (`aud`), valid for the
/// configured lifetime, never more than `longestLifetime`, reused until an hour before it expires.
final class VAPIDTokens: Sendable {
    /// RFC 8292 §2: `exp` "MUST NOT be more than 24 hours from the time of the request", and push services refuse a
    /// later one by their own clock (Mozilla autopush: 401 "The VAPID token expiration is too long"). A push
    /// service whose clock is behind ours by up to `clockSkewMargin` must still find `exp` within 24 hours.
    static let clockSkewMargin = Duration.seconds(10 * 60)
    static let longestLifetime = Duration.seconds(24 * 3600) - clockSkewMargin

    private let key: PrivateKey
    private let subject: String
    private let lifetime: Int64
    private let clock: @Sendable () -> Int64
    private let cache: VAPIDTokenCache
    /// `k=` of the Authorization header: the uncompressed public key, base64url.
    let publicKey: String

    init(
        key: PrivateKey, subject: String, lifetime: Duration, cache: VAPIDTokenCache = VAPIDTokenCache(),
        clock: @escaping @Sendable () -> Int64
    ) throws {
        self.key = key
        self.subject = subject
        self.lifetime = min(lifetime.milliseconds, Self.longestLifetime.milliseconds)
        self.clock = clock
        self.cache = cache
        publicKey = Base64URL.encode(try key.rawPublicKey())
    }

    /// `vapid t=<jwt>, k=<public key>` for `origin`.
    func authorization(for origin: String) throws(CryptoError) -> String {
        let now = clock()
        let cacheKey = VAPIDTokenCache.Key(publicKey: publicKey, origin: origin)
        if let cached = cache.token(for: cacheKey, now: now), now < cached.expiresAt - 3_600_000 { return cached.header }
        let expiresAt = now.adding(saturating: lifetime)
        let jwt = try JSONWebToken.sign(
            algorithm: .es256, headerFields: [("typ", "JWT")],
            claims: { claims in
                claims.member("aud", origin)
                claims.member("exp", expiresAt / 1000)
                claims.member("sub", subject)
            }, key: key)
        let header = "vapid t=\(jwt), k=\(publicKey)"
        cache.store(VAPIDTokenCache.Issued(header: header, expiresAt: expiresAt), for: cacheKey, now: now)
        return header
    }
}

/// The VAPID tokens issued, by identity and origin, shared by every identity of the provider. Origins are
/// chosen by whoever registers a subscription, so the map is bounded: `capacity` tokens, the least recently
/// used dropped beyond it, and a token unused for `idleLimit` dropped (signing it again costs one ES256
/// signature). Its size is the `push_bounded_entries{map="vapid_tokens"}` gauge.
final class VAPIDTokenCache: Sendable {
    struct Key: Hashable, Sendable {
        let publicKey: String
        let origin: String
    }

    struct Issued: Sendable {
        let header: String
        let expiresAt: Int64
    }

    static let defaultCapacity = 10_000
    static let defaultIdleLimit = Duration.seconds(3_600)

    private let tokens: Locked<BoundedCache<Key, Issued>>
    private let gauge = Gauge(label: "push_bounded_entries", dimensions: [("map", "vapid_tokens")])

    init(capacity: Int = defaultCapacity, idleLimit: Duration = defaultIdleLimit) {
        tokens = Locked(BoundedCache(capacity: capacity, idleLimit: idleLimit))
    }

    var count: Int { tokens.withLock { $0.count } }

    func token(for key: Key, now: Int64) -> Issued? { tokens.withLock { $0.value(for: key, now: now) } }

    func store(_ issued: Issued, for key: Key, now: Int64) {
        let count = tokens.withLock { tokens in
            tokens.set(issued, for: key, now: now)
            return tokens.count
        }
        gauge.record(count)
    }
}
