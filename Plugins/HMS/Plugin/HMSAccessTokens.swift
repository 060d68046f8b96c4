import PushCore
import PushHTTP
import PushPluginAPI

/// App-level access tokens from Huawei's OAuth 2.0 client-credentials grant, kept in the shared
/// `AccessTokenCache`: one token per app serves all its sends (Huawei allows 1000 tokens per 5 minutes),
/// concurrent callers share one refresh, and a refused secret is not asked again per message.
public final class HMSAccessTokens: Sendable {
    /// Refresh this long before `expires_in` (3600 s at Huawei) runs out.
    public static let refreshMargin: Int64 = 5 * 60 * 1000

    public typealias Failure = AccessTokenCache.Failure

    private let cache: AccessTokenCache

    public init(
        app: HMSConfiguration.App, tokenURL: String, transport: any HTTPTransport, tls: TLSOptions,
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds
    ) {
        let request = HTTPRequest(
            url: tokenURL, headers: [("content-type", "application/x-www-form-urlencoded;charset=utf-8")],
            body: AccessTokenCache.formBody([
                "grant_type": "client_credentials", "client_id": app.clientId,
                "client_secret": app.clientSecret,
            ]),
            timeout: .seconds(10), tls: tls)
        cache = AccessTokenCache(refreshMargin: Self.refreshMargin, clock: clock) {
            await Self.grant(request, over: transport)
        }
    }

    /// Token requests made so far.
    public var requestsMade: Int { get async { await cache.requestsMade } }

    public func token() async throws(Failure) -> String {
        try await cache.token()
    }

    func issued() async throws(Failure) -> AccessTokenCache.Issued {
        try await cache.issued()
    }

    /// Huawei refused `token` (80200001, 80200003): drop it. False when it was fresh: a new one will not help.
    public func rejected(_ token: String) async -> Bool {
        await cache.rejected(token)
    }

    /// 200 `{access_token, expires_in, token_type}`; a refusal is HTTP 400 (or 401/403) with numeric `error` and
    /// `sub_error` (`1101`/`12304`: wrong secret); 5xx, 429 and 503 (rate limiting) are temporary.
    static func grant(_ request: HTTPRequest, over transport: any HTTPTransport) async -> Result<AccessTokenCache.Grant, Failure> {
        await AccessTokenCache.requestGrant(
            request, over: transport, endpoint: "HMS token endpoint", refused: "the client credentials",
            refusalDetail: refusalDetail)
    }

    /// `error 1101, sub_error 12304 (invalid client_secret)`; the description is Huawei's text, cut short.
    static func refusalDetail(_ document: JSONValue?, status: Int) -> String {
        var parts = ["HTTP \(status)"]
        if case .integer(let error)? = document?["error"] { parts.append("error \(error)") }
        if case .integer(let subError)? = document?["sub_error"] { parts.append("sub_error \(subError)") }
        var detail = parts.joined(separator: ", ")
        if case .string(let description)? = document?["error_description"], !description.isEmpty {
            detail += " (\(description.prefix(120)))"
        }
        return detail
    }
}
