import Foundation
import PushCore
import PushHTTP

/// An OAuth 2.0 access token shared by every request of one credential (an FCM service account, an HMS
/// app). One token serves until `refreshMargin` before it expires; concurrent callers share one fetch;
/// after a failed fetch callers get the same failure without a new request until a backoff (1 s, doubling
/// to 60 s) passes, so a broken token endpoint or a revoked secret never costs one token request per message.
/// How a token is obtained is the plugin's: `fetch` runs the grant and says what the endpoint answered.
public actor AccessTokenCache {
    public enum Failure: Error, Equatable, Sendable {
        /// The token endpoint refused the grant (bad or revoked key or secret, unknown client): credentials.
        case refused(String)
        /// The endpoint could not be reached or answered 5xx or 429: try again later.
        case unavailable(String)
    }

    /// What the token endpoint granted: the token and its `expires_in` as the endpoint said it.
    public struct Grant: Sendable {
        public let token: String
        public let lifetimeSeconds: Int64

        public init(token: String, lifetimeSeconds: Int64) {
            self.token = token
            self.lifetimeSeconds = lifetimeSeconds
        }
    }

    public struct Issued: Sendable, Equatable {
        public let token: String
        public let obtainedAt: Int64
        public let expiresAt: Int64
    }

    public typealias Fetch = @Sendable () async -> Result<Grant, Failure>

    /// A token refused this soon after it was issued is not stale: a new one would be refused too.
    public static let freshTokenAge: Int64 = 60_000
    static let firstFailureBackoff: Int64 = 1000
    static let longestFailureBackoff: Int64 = 60_000

    private let refreshMargin: Int64
    private let longestLifetimeSeconds: Int64
    private let clock: @Sendable () -> Int64
    private let fetch: Fetch
    private var current: Issued?
    private var refreshing: Task<Result<Issued, Failure>, Never>?
    private var lastFailure: (failure: Failure, until: Int64)?
    private var failureBackoff = firstFailureBackoff
    public private(set) var requestsMade = 0

    /// - Parameters:
    ///   - refreshMargin: milliseconds before expiry at which the token is fetched again.
    ///   - longestLifetimeSeconds: `expires_in` is a number from outside; it is clamped to 0…this.
    public init(
        refreshMargin: Int64, longestLifetimeSeconds: Int64 = 86_400,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds, fetch: @escaping Fetch
    ) {
        self.refreshMargin = refreshMargin
        self.longestLifetimeSeconds = longestLifetimeSeconds
        self.clock = clock
        self.fetch = fetch
    }

    /// A valid access token, fetching one only when needed.
    public func token() async throws(Failure) -> String {
        try await issued().token
    }

    public func issued() async throws(Failure) -> Issued {
        let now = clock()
        if let current, now < current.expiresAt.subtracting(saturating: refreshMargin) { return current }
        if let lastFailure, now < lastFailure.until { throw lastFailure.failure }
        let task: Task<Result<Issued, Failure>, Never>
        if let refreshing {
            task = refreshing
        } else {
            task = Task { await self.fetchIssued() }
            refreshing = task
        }
        let result = await task.value
        if refreshing == task { refreshing = nil }
        switch result {
        case .success(let issued):
            current = issued
            lastFailure = nil
            failureBackoff = Self.firstFailureBackoff
            return issued
        case .failure(let failure):
            let failedAt = clock()
            if lastFailure.map({ failedAt >= $0.until }) ?? true {
                lastFailure = (failure, failedAt.adding(saturating: failureBackoff))
                failureBackoff = min(failureBackoff * 2, Self.longestFailureBackoff)
            }
            throw failure
        }
    }

    /// The provider refused `token` (expired, revoked): drop it so the next caller fetches a new one.
    /// Returns false when the token was fresh (issued less than a minute ago): a new one will not help.
    public func rejected(_ token: String) -> Bool {
        guard let current, current.token == token else { return true }
        self.current = nil
        return clock().subtracting(saturating: current.obtainedAt) >= Self.freshTokenAge
    }

    private func fetchIssued() async -> Result<Issued, Failure> {
        requestsMade += 1
        let obtainedAt = clock()
        switch await fetch() {
        case .success(let grant):
            let lifetime = min(max(grant.lifetimeSeconds, 0), longestLifetimeSeconds)
            return .success(
                Issued(
                    token: grant.token, obtainedAt: obtainedAt,
                    expiresAt: obtainedAt.adding(saturating: lifetime.multiplied(saturating: 1000))))
        case .failure(let failure):
            return .failure(failure)
        }
    }
}

extension AccessTokenCache {
    /// Posts a grant to a token endpoint and reads its answer (RFC 6749 §5.1, §5.2): 200 with a non-empty
    /// `access_token` and an integer `expires_in` is a grant; 5xx and 429 (and no answer) are temporary; any
    /// other status refuses the credentials.
    /// - Parameters:
    ///   - endpoint: how failures name the endpoint (`HMS token endpoint`).
    ///   - refused: what a refusal refused (`the grant`, `the client credentials`).
    ///   - refusalDetail: what of a refusal's body is worth telling (the endpoint's error fields).
    public static func requestGrant(
        _ request: HTTPRequest, over transport: any HTTPTransport, endpoint: String, refused: String,
        refusalDetail: (JSONValue?, Int) -> String
    ) async -> Result<Grant, Failure> {
        let response: HTTPResponse
        do {
            response = try await transport.send(request)
        } catch {
            return .failure(.unavailable("\(endpoint): \(error)"))
        }
        let document = try? JSONParser.parse(response.body)
        guard response.status == 200 else {
            if response.status >= 500 || response.status == 429 {
                return .failure(.unavailable("\(endpoint) answered \(response.status)"))
            }
            return .failure(.refused("\(endpoint) refused \(refused): \(refusalDetail(document, response.status))"))
        }
        guard case .string(let token)? = document?["access_token"], !token.isEmpty,
            case .integer(let expiresIn)? = document?["expires_in"]
        else {
            return .failure(.unavailable("\(endpoint) answered without access_token/expires_in"))
        }
        return .success(Grant(token: token, lifetimeSeconds: expiresIn))
    }

    /// An `application/x-www-form-urlencoded` body (RFC 6749 §4.4.2), every value percent-encoded:
    /// a secret may hold `&`, `=` or `+`.
    public static func formBody(_ fields: KeyValuePairs<String, String>) -> [UInt8] {
        Array(
            fields.map { "\(PercentEncoding.allButUnreserved($0.key))=\(PercentEncoding.allButUnreserved($0.value))" }.joined(
                separator: "&"
            ).utf8)
    }
}
