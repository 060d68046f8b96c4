import PushCore
import PushCrypto
import Synchronization

/// The provider authentication token of one (team, key): an ES256 JWT with `kid`,
/// `iss` and `iat`, shared by every request and connection. Apple rejects tokens older
/// than an hour and answers TooManyProviderTokenUpdates when they change more often than
/// every 20 minutes, so a token is reused for `refreshAfter` (50 min) and never replaced
/// before `minimumAge` (20 min).
public final class APNsTokenCache: Sendable {
    public static let refreshAfter: Int64 = 50 * 60 * 1000
    public static let minimumAge: Int64 = 20 * 60 * 1000

    private struct Issued {
        let token: String
        let issuedAt: Int64
    }

    private let key: PrivateKey
    /// SHA-256 of the key's PEM file, when it came from one: a reloaded provider keeps this cache while it matches.
    let keyDigest: [UInt8]?
    private let keyId: String
    private let teamId: String
    private let clock: @Sendable () -> Int64
    private let current = Locked<Issued?>(nil)
    private let generated = Atomic<Int>(0)

    public init(
        key: PrivateKey, keyDigest: [UInt8]? = nil, keyId: String, teamId: String,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) {
        self.key = key
        self.keyDigest = keyDigest
        self.keyId = keyId
        self.teamId = teamId
        self.clock = clock
    }

    /// Tokens signed so far (for tests and metrics).
    public var generatedCount: Int { generated.load(ordering: .relaxed) }

    public func token() throws(CryptoError) -> String {
        let now = clock()
        let result: Result<String, CryptoError> = current.withLock { issued in
            if let issued, now - issued.issuedAt < Self.refreshAfter { return .success(issued.token) }
            do {
                let token = try JSONWebToken.sign(
                    algorithm: .es256, headerFields: [("kid", keyId)],
                    claims: { claims in
                        claims.member("iss", teamId)
                        claims.member("iat", now / 1000)
                    }, key: key)
                issued = Issued(token: token, issuedAt: now)
                generated.add(1, ordering: .relaxed)
                return .success(token)
            } catch let error as CryptoError {
                return .failure(error)
            } catch {
                return .failure(CryptoError("\(error)"))
            }
        }
        return try result.get()
    }

    /// APNs said ExpiredProviderToken: sign a new one now, unless the current one is younger
    /// than `minimumAge` (then the clocks disagree and a new token would only earn TooManyProviderTokenUpdates).
    public func rejected(_ token: String) {
        let now = clock()
        current.withLock { issued in
            if let current = issued, current.token == token, now - current.issuedAt >= Self.minimumAge { issued = nil }
        }
    }
}
