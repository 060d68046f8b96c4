import PushCore
import PushHTTP
import PushPluginAPI

/// `check-config` for HMS: each app's OAuth 2.0 client mints an access token at the token endpoint (Huawei refuses a
/// wrong or revoked secret there, `1101`/`12304`); with `--probe-providers`, one validate-only message to a made-up
/// push token shows Push Kit takes the access token for the app: `80000000`, `80100000` or `80300007` (the push token)
/// pass; `80200001`/`80200003` (the access token), `80300002`/`80600003` (no permission) and anything else fail.
enum HMSCredentialCheck {
    static let probeToken = "check-config-probe-token"

    static func run(_ configuration: HMSConfiguration, context: CredentialCheckContext) async -> [CheckResult] {
        var results: [CheckResult] = []
        let tls = TLSOptions(caFile: configuration.caFile)
        for app in configuration.apps {
            let check = "hms \(app.appId)"
            let tokens = HMSAccessTokens(app: app, tokenURL: configuration.tokenURL, transport: context.transport, tls: tls)
            let minted = await CheckResult.accessToken(check, endpoint: configuration.tokenURL) {
                () async throws(HMSAccessTokens.Failure) in
                try await tokens.issued()
            }
            results.append(minted)
            guard context.probesProvider, minted.passed, let token = try? await tokens.token() else { continue }
            let request = HTTPRequest(
                url: "\(configuration.endpoint)/v1/\(app.appId)/messages:send",
                headers: [("authorization", "Bearer \(token)"), ("content-type", "application/json;charset=utf-8")],
                body: Array(#"{"validate_only":true,"message":{"data":"{}","token":["\#(probeToken)"]}}"#.utf8),
                timeout: context.timeout, tls: tls)
            results.append(
                await CheckResult.probe(check + " probe", request, over: context.transport) { response in
                    judge(HMSAnswer(response), place: "\(configuration.endpoint) app \(app.appId)")
                })
        }
        return results
    }

    static func judge(_ answer: HMSAnswer, place: String) -> (passed: Bool, detail: String) {
        let reason = HMSResponse.reason(answer, token: probeToken)
        switch answer.code {
        case HMSAnswer.success?, HMSAnswer.partialSuccess?, HMSAnswer.allTokensInvalid?:
            return (true, "\(place): access token accepted (HTTP \(answer.status) \(reason), validate only)")
        default:
            return (false, "\(place): HTTP \(answer.status) \(reason)")
        }
    }
}
