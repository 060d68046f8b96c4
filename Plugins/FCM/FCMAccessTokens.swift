import Foundation
import PushCore
import PushCrypto
import PushHTTP

/// OAuth2 access tokens for one service account (RFC 7523 JWT-bearer grant, RS256
/// assertion). One token serves every request of the project until shortly before it
/// expires; concurrent callers share one refresh; after a token-endpoint failure callers
/// get the same failure without a new request until a backoff passes, so a broken
/// endpoint or revoked key never costs one token request per message.
public actor FCMAccessTokens {
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Refresh this long before `expires_in` runs out.
    public static let refreshMargin: Int64 = 5 * 60 * 1000

    public enum Failure: Error, Equatable, Sendable {
        /// The token endpoint refused the grant (bad or revoked key, wrong account): credentials.
        case refused(String)
        /// The endpoint could not be reached or answered 5xx: try again later.
        case unavailable(String)
    }

    struct Issued {
        let token: String
        let obtainedAt: Int64
        let expiresAt: Int64
    }

    private let account: ServiceAccount
    private let key: PrivateKey
    private let transport: any HTTPTransport
    private let tls: TLSOptions
    private let clock: @Sendable () -> Int64
    private var current: Issued?
    private var refreshing: Task<Result<Issued, Failure>, Never>?
    private var lastFailure: (failure: Failure, until: Int64)?
    private var failureBackoff: Int64 = 1000
    public private(set) var requestsMade = 0

    public init(account: ServiceAccount, transport: any HTTPTransport, tls: TLSOptions,
                clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds) throws {
        self.account = account
        key = try PrivateKey(pem: account.privateKeyPEM)
        self.transport = transport
        self.tls = tls
        self.clock = clock
    }

    /// A valid access token, fetching one only when needed.
    public func token() async throws(Failure) -> String {
        try await issued().token
    }

    func issued() async throws(Failure) -> Issued {
        let now = clock()
        if let current, now < current.expiresAt - Self.refreshMargin { return current }
        if let lastFailure, now < lastFailure.until { throw lastFailure.failure }
        let task: Task<Result<Issued, Failure>, Never>
        if let refreshing {
            task = refreshing
        } else {
            task = Task { await self.fetch() }
            refreshing = task
        }
        let result = await task.value
        if refreshing == task { refreshing = nil }
        switch result {
        case .success(let issued):
            current = issued
            lastFailure = nil
            failureBackoff = 1000
            return issued
        case .failure(let failure):
            if lastFailure == nil || clock() >= lastFailure!.until {
                lastFailure = (failure, clock() + failureBackoff)
                failureBackoff = min(failureBackoff * 2, 60_000)
            }
            throw failure
        }
    }

    /// FCM answered 401 with `token`: drop it so the next caller fetches a new one.
    /// Returns false when the token was fresh (< 1 min), i.e. a new one will not help.
    public func rejected(_ token: String) -> Bool {
        guard let current, current.token == token else { return true }
        self.current = nil
        return clock() - current.obtainedAt >= 60_000
    }

    private func fetch() async -> Result<Issued, Failure> {
        requestsMade += 1
        let now = clock()
        let assertion: String
        do {
            assertion = try JSONWebToken.sign(algorithm: .rs256, headerFields: [("typ", "JWT"), ("kid", account.privateKeyId)],
                                              claims: { claims in
                claims.member("iss", account.clientEmail)
                claims.member("scope", Self.scope)
                claims.member("aud", account.tokenURI)
                claims.member("iat", now / 1000)
                claims.member("exp", now / 1000 + 3600)
            }, key: key)
        } catch {
            return .failure(.refused("cannot sign the assertion: \(error)"))
        }
        let form = "grant_type=" + Self.formEscape("urn:ietf:params:oauth:grant-type:jwt-bearer") + "&assertion=" + assertion
        let request = HTTPRequest(url: account.tokenURI, headers: [("content-type", "application/x-www-form-urlencoded")],
                                  body: Array(form.utf8), timeout: .seconds(10), tls: tls)
        let response: HTTPResponse
        do {
            response = try await transport.send(request)
        } catch {
            return .failure(.unavailable("token endpoint: \(error)"))
        }
        let document = try? JSONParser.parse(response.body)
        guard response.status == 200 else {
            let detail: String = if case .string(let error)? = document?["error"] { error } else { "HTTP \(response.status)" }
            return .failure(response.status >= 500 || response.status == 429
                ? .unavailable("token endpoint answered \(response.status)")
                : .refused("token endpoint refused the grant: \(detail)"))
        }
        guard case .string(let token)? = document?["access_token"], case .integer(let expiresIn)? = document?["expires_in"] else {
            return .failure(.unavailable("token endpoint answered without access_token/expires_in"))
        }
        // Google issues tokens for an hour; a lifetime outside 0…24 h is clamped, not trusted.
        let lifetime = min(max(expiresIn, 0), 86_400)
        return .success(Issued(token: token, obtainedAt: now, expiresAt: now.adding(saturating: lifetime * 1000)))
    }

    static func formEscape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }
}
