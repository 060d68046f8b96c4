import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI

/// `check-config` for APNs: each app's credentials (the alert credentials, and the VoIP ones when the app has its
/// own) signed or loaded here; with `--probe-providers`, one push per credential to a made-up device token in the
/// app's default environment. Apple checks the provider token (or certificate) and the topic before the device token,
/// so `400 BadDeviceToken` proves both accepted, while a 403 (`InvalidProviderToken`, `BadCertificate`, …) or a topic
/// reason (`TopicDisallowed`, `DeviceTokenNotForTopic`, …) fails the check. No device receives the push.
enum APNsCredentialCheck {
    /// A well-formed device token no device has (64 hex digits).
    static let probeToken = "0400" + String(repeating: "0", count: 60)

    static func run(_ configuration: APNsConfiguration, context: CredentialCheckContext) async -> [CheckResult] {
        var results: [CheckResult] = []
        for app in configuration.apps {
            var credentials: [(name: String, authentication: APNsApp.Authentication, pushType: APNsPushType)] = [
                ("apns \(app.bundleId)", app.authentication, .background)
            ]
            if let voip = app.voipAuthentication { credentials.append(("apns \(app.bundleId) voip", voip, .voip)) }
            for credential in credentials {
                let (result, bearer) = prove(credential.authentication, check: credential.name)
                results.append(result)
                guard context.probesProvider, result.passed else { continue }
                results.append(
                    await probe(
                        app, credential.authentication, bearer: bearer, pushType: credential.pushType,
                        check: credential.name + " probe", configuration: configuration, context: context))
            }
        }
        return results
    }

    /// Signs a provider token with the key (token auth) or loads the certificate and its key (certificate auth).
    static func prove(_ authentication: APNsApp.Authentication, check: String) -> (CheckResult, bearer: String?) {
        switch authentication {
        case .token(let keyFile, let keyId, let teamId):
            do {
                let key = try PrivateKey(pem: try String(contentsOfFile: keyFile, encoding: .utf8))
                let token = try APNsTokenCache(key: key, keyId: keyId, teamId: teamId).token()
                return (.ok(check, "provider token signed (ES256, key \(keyId), team \(teamId))"), token)
            } catch {
                return (.fail(check, "cannot sign a provider token with \(keyFile): \(error)"), nil)
            }
        case .certificate(let tls):
            return (CheckResult.clientCertificate(tls, check: check), nil)
        }
    }

    static func probe(
        _ app: APNsApp, _ authentication: APNsApp.Authentication, bearer: String?, pushType: APNsPushType, check: String,
        configuration: APNsConfiguration, context: CredentialCheckContext
    ) async -> CheckResult {
        let base = app.defaultEnvironment == .sandbox ? configuration.sandboxURL : configuration.productionURL
        let topic = (app.topicOverride ?? app.bundleId) + pushType.topicSuffix
        var headers: [(name: String, value: String)] = [
            ("apns-topic", topic), ("apns-push-type", pushType.rawValue),
            ("apns-priority", pushType == .voip ? "10" : "5"), ("apns-expiration", "0"),
        ]
        var tls = TLSOptions(caFile: configuration.caFile)
        switch authentication {
        case .token: headers.append(("authorization", "bearer \(bearer ?? "")"))
        case .certificate(let certificate):
            tls = certificate
            tls.caFile = configuration.caFile
        }
        let request = HTTPRequest(
            url: "\(base)/3/device/\(probeToken)", headers: headers, body: Array(#"{"aps":{"content-available":1}}"#.utf8),
            timeout: context.timeout, tls: tls)
        let place = "\(app.defaultEnvironment.rawValue) \(base), topic \(topic)"
        return await CheckResult.probe(check, request, over: context.transport) { response in
            judge(response, place: place)
        }
    }

    /// Apple's answer to the probe: the credential and topic were accepted when Apple got as far as the device token.
    static func judge(_ response: HTTPResponse, place: String) -> (passed: Bool, detail: String) {
        let body = try? JSONParser.parse(response.body)
        let reason: String = if case .string(let text)? = body?["reason"] { text } else { "no reason" }
        switch response.status {
        case 200:
            return (true, "\(place): accepted (HTTP 200)")
        case 400 where APNsResponse.deadToken.contains(reason), 410:
            return (true, "\(place): credential and topic accepted (HTTP \(response.status) \(reason) for a made-up device token)")
        default:
            return (false, "\(place): HTTP \(response.status) \(reason)")
        }
    }
}
