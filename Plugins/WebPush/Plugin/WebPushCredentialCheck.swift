import PushCore
import PushCrypto
import PushPluginAPI

/// `check-config` for Web Push: each VAPID key (the default one and each app's) signs a VAPID token. A push service
/// is whatever a subscription names, so there is no fixed endpoint to probe.
enum WebPushCredentialCheck {
    static func run(_ configuration: WebPushConfiguration) -> [CheckResult] {
        let identities =
            [("webpush", VAPIDIdentity(key: configuration.vapidKey, subject: configuration.subject))]
            + configuration.apps.sorted { $0.key < $1.key }.map { ("webpush \($0.key)", $0.value) }
        return identities.map { check, identity in
            do {
                _ = try JSONWebToken.sign(
                    algorithm: .es256, headerFields: [("typ", "JWT")],
                    claims: { claims in
                        claims.member("aud", "https://push.example.invalid")
                        claims.member("exp", currentTimeMilliseconds() / 1000 + 3600)
                        claims.member("sub", identity.subject)
                    }, key: identity.key)
                let publicKey = Base64URL.encode(try identity.key.rawPublicKey())
                return .ok(check, "VAPID key signs (public key \(publicKey), subject \(identity.subject))")
            } catch {
                return .fail(check, "the VAPID key cannot sign: \(error)")
            }
        }
    }
}
