import PushCore
import PushHTTP
import PushPluginAPI

/// `check-config` for FCM: each project's service account mints an OAuth2 access token at its `token_uri` (Google
/// refuses a revoked or deleted key there); with `--probe-providers`, one validate-only message to a made-up
/// registration token shows FCM takes the token for the project: `200` or `400 INVALID_ARGUMENT` (the registration
/// token) pass, `401`, `403` (the API off, `SENDER_ID_MISMATCH`) and `404` (no such project) fail. Google validates a
/// `validate_only` message without delivering it.
enum FCMCredentialCheck {
    static let probeToken = "check-config-probe-token"

    static func run(_ configuration: FCMConfiguration, context: CredentialCheckContext) async -> [CheckResult] {
        var results: [CheckResult] = []
        let tls = TLSOptions(caFile: configuration.caFile)
        for account in configuration.accounts {
            let check = "fcm \(account.projectId)"
            let tokens: FCMAccessTokens
            do {
                tokens = try FCMAccessTokens(account: account, transport: context.transport, tls: tls)
            } catch {
                results.append(.fail(check, "the service account's private key does not load: \(error)"))
                continue
            }
            let minted = await CheckResult.accessToken(check, endpoint: account.tokenURI) { () async throws(FCMAccessTokens.Failure) in
                try await tokens.issued()
            }
            results.append(minted)
            guard context.probesProvider, minted.passed, let token = try? await tokens.token() else { continue }
            let request = HTTPRequest(
                url: "\(configuration.endpoint)/v1/projects/\(account.projectId)/messages:send",
                headers: [("authorization", "Bearer \(token)"), ("content-type", "application/json")],
                body: Array(#"{"validate_only":true,"message":{"token":"\#(probeToken)","data":{"check":"config"}}}"#.utf8),
                timeout: context.timeout, tls: tls)
            results.append(
                await CheckResult.probe(check + " probe", request, over: context.transport) { response in
                    judge(response, place: "\(configuration.endpoint) project \(account.projectId)")
                })
        }
        return results
    }

    static func judge(_ response: HTTPResponse, place: String) -> (passed: Bool, detail: String) {
        let document = try? JSONParser.parse(response.body)
        let status: String = if case .string(let text)? = document?["error"]?["status"] { text } else { "" }
        let answer = "HTTP \(response.status)" + (status.isEmpty ? "" : " \(status)")
        switch response.status {
        case 200: return (true, "\(place): access token accepted (\(answer), validate only)")
        case 400: return (true, "\(place): access token accepted (\(answer) for a made-up registration token)")
        default: return (false, "\(place): \(answer)")
        }
    }
}
