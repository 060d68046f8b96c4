import APNsPlugin
import FCMPlugin
import PushCore
import Testing
import TestSupport
import WebPushPlugin

@Suite("SIP push bindings: RFC 8599 and X-MPUSH notations, as the linked plugins read them")
struct SIPPushBindingTests {
    static let apnsToken = String(repeating: "a1", count: 32)
    static let keys = #","keys":{"p256dh":"k","auth":"a"}"#

    /// The target a binding string of binding id `b1` decodes to.
    static func expected(
        provider: ProviderID, notation: SIPBinding.Notation? = nil, app: String? = nil, token: String?,
        environment: String? = nil, pushType: String? = nil, platform: String? = nil, alternative: String? = nil
    ) -> Target {
        let details: any TargetDetails =
            switch provider {
            case .apns:
                APNsTarget(
                    token: token, environment: environment, pushType: pushType, notation: notation, alternativeBundleId: alternative)
            case .fcm: FCMTarget(token: token, platform: platform)
            default: WebPushTarget(endpoint: token, keys: token == nil ? nil : WebPushKeys(p256dh: "k", auth: "a"))
            }
        return Target(bindingId: "b1", provider: provider, app: app, details: details, isUnbound: token == nil)
    }

    static func decode(_ notation: String, _ text: String) throws(JobRejection) -> Target {
        let keys = text.contains("webpush") || text.hasPrefix("w:") ? Self.keys : ""
        let json = #"{"v":1,"id":"j1","kind":"call","userId":"alice","targets":[{"bindingId":"b1","\#(notation)":"\#(text)"\#(keys)}]}"#
        return try JobDecoder().decode(Array(json.utf8), fallbackCreatedAt: 0).targets[0]
    }

    static func refusal(_ notation: String, _ text: String) -> String {
        do {
            let target = try decode(notation, text)
            return "accepted as \(target)"
        } catch {
            return error.message
        }
    }

    static let validRFC8599: [(String, Target)] = [
        (
            "pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip;pn-prid=\(apnsToken)",
            expected(
                provider: .apns, notation: .rfc8599, app: "com.example", token: apnsToken, environment: "production", pushType: "voip",
                alternative: "DEF123GHIJ.com.example")
        ),
        (
            "pn-prid=\(apnsToken);pn-param=DEF123GHIJ.com.example.chat.voip-ptt;pn-provider=apns",
            expected(
                provider: .apns, notation: .rfc8599, app: "com.example.chat", token: apnsToken, environment: "production",
                pushType: "pushtotalk", alternative: "DEF123GHIJ.com.example.chat")
        ),
        // Flexisip's grammar: no service, or `remote`, is an ordinary device token; `apns.dev` is the sandbox.
        (
            "pn-provider=apns;pn-param=DEF123GHIJ.com.example.app;pn-prid=\(apnsToken)",
            expected(
                provider: .apns, notation: .rfc8599, app: "com.example.app", token: apnsToken, environment: "production",
                alternative: "DEF123GHIJ.com.example.app")
        ),
        (
            "pn-provider=apns.dev;pn-param=DEF123GHIJ.com.example.app.remote;pn-prid=\(apnsToken):remote",
            expected(
                provider: .apns, notation: .rfc8599, app: "com.example.app", token: apnsToken, environment: "sandbox",
                alternative: "DEF123GHIJ.com.example.app")
        ),
        // liblinphone's default team id is the 8-character placeholder ABCD1234: everything before the first dot.
        (
            "pn-provider=apns;pn-param=ABCD1234.org.linphone.phone.remote;pn-prid=\(apnsToken.uppercased()):remote",
            expected(
                provider: .apns, notation: .rfc8599, app: "org.linphone.phone", token: apnsToken.uppercased(), environment: "production",
                alternative: "ABCD1234.org.linphone.phone")
        ),
        (
            "PN-PROVIDER=fcm;pn-param=example-project;pn-prid=dGhpcyBpcw:APA91%3Dtoken",
            expected(provider: .fcm, app: "example-project", token: "dGhpcyBpcw:APA91=token")
        ),
        (
            "pn-provider=webpush;pn-prid=https%3A%2F%2Fpush.example.net%2Fs%2F1",
            expected(provider: .webpush, token: "https://push.example.net/s/1")
        ),
        (
            "pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip;pn-prid=null",
            expected(
                provider: .apns, notation: .rfc8599, app: "com.example", token: nil, environment: "production", pushType: "voip",
                alternative: "DEF123GHIJ.com.example")
        ),
        // Without the team id (Mizu's pushnotification_teamid left empty): a lower-case first label is the bundle id's;
        // Flexisip's reading (`example.chat`) is kept for the provider, which sends to it only if it is the app configured.
        (
            "pn-provider=apns;pn-param=com.example.chat.voip;pn-prid=\(apnsToken)",
            expected(
                provider: .apns, notation: .rfc8599, app: "com.example.chat", token: apnsToken, environment: "production", pushType: "voip",
                alternative: "example.chat")
        ),
        (
            "pn-provider=apns;pn-param=example.voip-ptt;pn-prid=\(apnsToken)",
            expected(
                provider: .apns, notation: .rfc8599, app: "example", token: apnsToken, environment: "production", pushType: "pushtotalk")
        ),
        (
            "pn-provider=fcm;pn-param=example-project;pn-prid=null",
            expected(provider: .fcm, app: "example-project", token: nil)
        ),
        // Other pn- parameters are ignored, as Flexisip ignores them, repeated or not.
        (
            "pn-provider=fcm;pn-param=p;pn-prid=t;pn-purr=x;pn-silent=1;pn-silent=1;PN-TIMEOUT=0;pn-call-str=IC_MSG;pn-flag=%zz",
            expected(provider: .fcm, app: "p", token: "t")
        ),
    ]

    @Test(
        "valid RFC 8599 bindings decode to provider, app, token and push type; pn-prid=null is unbound",
        arguments: validRFC8599.indices)
    func rfc8599Valid(_ index: Int) throws {
        let (text, expected) = Self.validRFC8599[index]
        #expect(try Self.decode("rfc8599", text) == expected)
    }

    static let malformedRFC8599: [(String, String)] = [
        ("", "rfc8599 is required and must be a non-empty string"),
        ("pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip", "pn-prid is required"),
        ("pn-param=example-project;pn-prid=t", "pn-provider is required"),
        ("pn-provider=gcm;pn-param=p;pn-prid=t", "pn-provider \"gcm\" is not one of apns, apns.dev, fcm, webpush"),
        ("pn-provider=fcm;pn-prid=t", "pn-param (the Firebase project id) is required for fcm"),
        ("pn-provider=apns;pn-prid=\(apnsToken)", "pn-param is required for apns"),
        ("pn-provider=apns;pn-param=voip;pn-prid=\(apnsToken)", "must be [<team id>.]<bundle id>[.<service>]"),
        ("pn-provider=apns;pn-param=DEF123GHIJ.voip;pn-prid=\(apnsToken)", "must be [<team id>.]<bundle id>[.<service>]"),
        ("pn-provider=apns;pn-param=DEF123GHIJ..voip;pn-prid=\(apnsToken)", "must be [<team id>.]<bundle id>[.<service>]"),
        ("pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip&app;pn-prid=\(apnsToken)", "must be voip, remote or voip&remote"),
        ("pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip&voip-ptt;pn-prid=a:voip&b:voip-ptt", "must be voip, remote or voip&remote"),
        (
            "pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip&remote;pn-prid=\(apnsToken)",
            "pn-param names 2 service(s) but pn-prid has 1 token(s)"
        ),
        (
            "pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip&remote;pn-prid=\(apnsToken):voip&\(apnsToken):voip",
            "pn-prid's services do not match pn-param's"
        ),
        (
            "pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip&remote;pn-prid=\(apnsToken)&\(apnsToken)",
            "pn-prid must be <token>:<service>"
        ),
        ("pn-provider=apns;pn-param=DEF123GHIJ.com.example.voip;pn-prid=\(apnsToken):remote", "pn-prid's services do not match pn-param's"),
        ("pn-provider=fcm;pn-provider=fcm;pn-param=p;pn-prid=t", "pn-provider appears twice"),
        ("pn-provider=fcm;pn-param=p;pn-prid=t;transport=tls", "parameter transport is not a push parameter"),
        ("pn-provider=fcm;pn-param=p;pn-prid=t;pn-prid=u", "pn-prid appears twice"),
        ("pn-provider=fcm;pn-param=p;pn-prid=", "pn-prid has an empty or badly percent-encoded value"),
        ("pn-provider=fcm;pn-param=p;pn-prid=%zz", "pn-prid has an empty or badly percent-encoded value"),
        ("pn-provider=fcm;pn-param=p;pn-prid=t;", "a parameter is not name=value"),
        ("pn-provider", "a parameter is not name=value"),
        // Percent-decoding comes before the control-character rule, so an escape cannot carry one past it.
        ("pn-provider=fcm;pn-param=example%0Aproject;pn-prid=t", "parameter contains a control character (CR, LF, tab, …) once decoded"),
        ("pn-provider=fcm;pn-param=p;pn-prid=t%0D%0AX-Injected:%201", "token contains a control character (CR, LF, tab, …) once decoded"),
        ("pn-provider=fc%09m;pn-param=p;pn-prid=t", "provider contains a control character (CR, LF, tab, …) once decoded"),
        ("pn-provider=fcm;pn-param=p%00;pn-prid=t", "parameter contains a control character"),
        ("pn-provider=fcm;pn-param=p%7F;pn-prid=t", "parameter contains a control character"),
    ]

    @Test("each malformed RFC 8599 variant is refused with the part and the rule", arguments: malformedRFC8599.indices)
    func rfc8599Malformed(_ index: Int) {
        let (text, reason) = Self.malformedRFC8599[index]
        let refusal = Self.refusal("rfc8599", text)
        #expect(refusal.contains(reason), "\(refusal)")
    }

    /// What liblinphone puts in its Contact (`Account::getContactAddress`, src/account/account.cpp): pn-prid, pn-provider,
    /// pn-param, pn-silent, pn-timeout, then the remote-push strings and sounds with their defaults
    /// (src/push-notification/push-notification-config.cpp); tokens in upper-case hex, each with its service.
    static let liblinphoneRegistration =
        "pn-prid=\(apnsToken.uppercased()):voip&\(String(repeating: "B2", count: 32)):remote;pn-provider=apns;"
        + "pn-param=ABCD1234.org.linphone.phone.voip&remote;pn-silent=1;pn-timeout=0;pn-msg-str=IM_MSG;pn-call-str=IC_MSG;"
        + "pn-groupchat-str=GC_MSG;pn-call-snd=notes_of_the_optimistic.caf;pn-msg-snd=msg.caf"

    @Test(
        "liblinphone's registration as it writes it — its placeholder team id, pn-silent, pn-timeout, pn-*-str, pn-*-snd — decodes to its bundle id and both tokens"
    )
    func liblinphoneRegistration() throws {
        let target = try Self.decode("rfc8599", Self.liblinphoneRegistration)
        #expect(target.provider == .apns)
        #expect(target.app == "org.linphone.phone")
        #expect(
            target.details(APNsTarget.self)
                == APNsTarget(
                    token: String(repeating: "B2", count: 32), voipToken: Self.apnsToken.uppercased(), environment: "production",
                    notation: .rfc8599, alternativeBundleId: "ABCD1234.org.linphone.phone"))
    }

    static let validXMPUSH: [(String, Target)] = [
        (
            "a:com.voip.phone:9C2F93A6D1319D3CB5712B469226A719",
            expected(provider: .fcm, app: "com.voip.phone", token: "9C2F93A6D1319D3CB5712B469226A719", platform: "android")
        ),
        (
            "i:com.mycompany.myapp:\(apnsToken)",
            expected(provider: .apns, notation: .xmpush, app: "com.mycompany.myapp", token: apnsToken, environment: nil)
        ),
        (
            "s:i:com.example.app:\(apnsToken)",
            expected(provider: .apns, notation: .xmpush, app: "com.example.app", token: apnsToken, environment: "sandbox")
        ),
        (
            "p:i:com.example.app:\(apnsToken)",
            expected(provider: .apns, notation: .xmpush, app: "com.example.app", token: apnsToken, environment: "production")
        ),
        ("d:i:com.example.app:\(apnsToken)", expected(provider: .apns, notation: .xmpush, app: "com.example.app", token: apnsToken)),
        ("j:example-project:fcm:ios-token", expected(provider: .fcm, app: "example-project", token: "fcm:ios-token", platform: "ios")),
        ("w:web:https://push.example.net/s/1", expected(provider: .webpush, token: "https://push.example.net/s/1")),
        ("a:com.voip.phone:null", expected(provider: .fcm, app: "com.voip.phone", token: nil, platform: "android")),
        // The seed's unregister: X-MPUSH null alone names no provider.
        ("null", Target(bindingId: "b1", provider: "none", isUnbound: true)),
        (
            "s:i:com.example.app:null",
            expected(provider: .apns, notation: .xmpush, app: "com.example.app", token: nil, environment: "sandbox")
        ),
    ]

    @Test(
        "valid X-MPUSH values decode, environment prefix and colons in tokens included; null is unbound",
        arguments: validXMPUSH.indices)
    func xmpushValid(_ index: Int) throws {
        let (text, expected) = Self.validXMPUSH[index]
        #expect(try Self.decode("xmpush", text) == expected)
    }

    static let malformedXMPUSH: [(String, String)] = [
        ("", "xmpush is required and must be a non-empty string"),
        ("a:com.voip.phone", "must be [s|p|d:]provider:package:token"),
        ("s:", "must be [s|p|d:]provider:package:token"),
        ("s", "must be [s|p|d:]provider:package:token"),
        ("x:com.voip.phone:t", "provider \"x\" is not one of a (Android FCM), i (APNs), j (iOS FCM), w (FCM web token or Web Push)"),
        ("q:i:com.example.app:t", "provider \"q\" is not one of"),
        ("a::token", "the package (Firebase project id or package name) is empty"),
        ("i::token", "the package (bundle id) is empty"),
        ("a:com.voip.phone:", "the token is empty"),
    ]

    @Test("each malformed X-MPUSH variant is refused with the rule", arguments: malformedXMPUSH.indices)
    func xmpushMalformed(_ index: Int) {
        let (text, reason) = Self.malformedXMPUSH[index]
        let refusal = Self.refusal("xmpush", text)
        #expect(refusal.contains(reason), "\(refusal)")
    }

    @Test(
        "in every notation a part holding a control character once decoded is refused by SIPBinding itself, without repeating the text",
        arguments: [
            (SIPBinding.Notation.rfc8599, "pn-provider=apns;pn-param=com.example%0D.voip;pn-prid=secret-token"),
            (.rfc8599, "pn-provider=apns;pn-param=com.example.voip;pn-prid=secret%0Atoken"),
            (.xmpush, "a:com.example\n:secret-token"), (.xmpush, "a:com.example:secret\u{7F}token"),
            (.xmpush, "s:\t:com.example:secret-token"),
        ])
    func controlCharactersAfterDecoding(_ notation: SIPBinding.Notation, _ text: String) {
        #expect {
            try SIPBinding.parse(text, notation: notation, path: "targets[0].")
        } throws: { error in
            guard let rejection = error as? JobRejection else { return false }
            return rejection.code == .invalidField && rejection.message.contains("contains a control character")
                && !rejection.message.contains("secret") && !rejection.message.contains("example")
        }
    }
}

@Suite("Job targets written as SIP bindings")
struct SIPBindingTargetTests {
    let decoder = JobDecoder()

    func job(_ target: String, kind: String = "call") -> String {
        #"{"v":1,"id":"j1","kind":"\#(kind)","userId":"alice","targets":[\#(target)]}"#
    }

    func decode(_ target: String) throws(JobRejection) -> Target {
        try decoder.decode(Array(job(target).utf8), fallbackCreatedAt: 1_700_000_000_000).targets[0]
    }

    func rejection(_ target: String) -> JobRejection? {
        do {
            _ = try decode(target)
            return nil
        } catch { return error }
    }

    @Test("an RFC 8599 APNs binding with service voip becomes an APNs target of the bundle id with push type voip")
    func rfc8599Target() throws {
        let target = try decode(
            #"{"bindingId":"b1","rfc8599":"pn-provider=apns;pn-param=DEF123GHIJ.com.example.chat.voip;pn-prid=\#(SIPPushBindingTests.apnsToken)"}"#
        )
        #expect(
            target
                == Target(
                    bindingId: "b1", provider: .apns, app: "com.example.chat",
                    details: APNsTarget(
                        token: SIPPushBindingTests.apnsToken, environment: "production", pushType: "voip",
                        notation: .rfc8599, alternativeBundleId: "DEF123GHIJ.com.example.chat")))
    }

    @Test("pn-prid=null decodes to an unbound target without a token")
    func unboundTarget() throws {
        let target = try decode(#"{"bindingId":"b1","rfc8599":"pn-provider=fcm;pn-param=example-project;pn-prid=null"}"#)
        #expect(target.isUnbound)
        #expect(target.details(FCMTarget.self)?.token == nil)
        #expect(target.provider == .fcm)
    }

    @Test("an X-MPUSH web push binding takes the endpoint from the token and the keys from the target")
    func xmpushWebPush() throws {
        let target = try decode(#"{"bindingId":"b1","xmpush":"w:site:https://push.example.net/s/1","keys":{"p256dh":"k","auth":"a"}}"#)
        #expect(target.provider == .webpush)
        #expect(target.details(WebPushTarget.self)?.endpoint == "https://push.example.net/s/1")
        #expect(target.details(WebPushTarget.self)?.keys == WebPushKeys(p256dh: "k", auth: "a"))
    }

    @Test(
        "X-MPUSH w: without keys is an FCM web token of the package's project (the seed's pushnotification_web=0); with keys a Web Push subscription"
    )
    func xmpushWebTokenOrSubscription() throws {
        let token = try decode(#"{"bindingId":"b1","xmpush":"w:com.example.web:fcm-web-token-1"}"#)
        #expect(
            token
                == Target(
                    bindingId: "b1", provider: .fcm, app: "com.example.web",
                    details: FCMTarget(token: "fcm-web-token-1", platform: "web")))
        let subscription = try decode(
            #"{"bindingId":"b1","xmpush":"w:site:https://push.example.net/s/1","keys":{"p256dh":"k","auth":"a"}}"#)
        #expect(subscription.provider == .webpush)
    }

    @Test("binding strings are not mixed with native fields or with each other, and stay held to provider rules")
    func strictness() {
        let cases: [(String, String)] = [
            (
                #"{"bindingId":"b1","provider":"fcm","xmpush":"a:p:t"}"#,
                "targets[0].provider cannot be combined with xmpush: the binding string carries provider, app and token"
            ),
            (#"{"bindingId":"b1","xmpush":"a:p:t","token":"t2"}"#, "targets[0].token cannot be combined with xmpush"),
            (
                #"{"bindingId":"b1","xmpush":"a:p:t","rfc8599":"pn-provider=fcm;pn-param=p;pn-prid=t"}"#,
                "targets[0].rfc8599 and xmpush cannot both be given"
            ),
            (#"{"bindingId":"b1","xmpush":"a:p:t","keys":{"p256dh":"k","auth":"a"}}"#, "targets[0].keys cannot be combined with xmpush"),
            (
                #"{"bindingId":"b1","rfc8599":"pn-provider=webpush;pn-prid=https%3A%2F%2Fpush.example.net%2Fs%2F1"}"#,
                "targets[0].rfc8599: keys (p256dh, auth) are required for webpush"
            ),
            (
                #"{"bindingId":"b1","xmpush":"i:com.example.app:not-hex"}"#,
                "targets[0].xmpush: token must be an even number (≥ 16) of hex digits for apns"
            ),
            (#"{"bindingId":"b1","rfc8599":"pn-provider=apns;pn-prid=x"}"#, "targets[0].rfc8599 pn-param is required for apns"),
            (#"{"bindingId":"b1","rfc8599":7}"#, "targets[0].rfc8599 must be a string"),
            (#"{"bindingId":"b1","xmpush":""}"#, "targets[0].xmpush is required and must be a non-empty string"),
        ]
        for (target, reason) in cases {
            let rejection = rejection(target)
            #expect(rejection?.code == .invalidField, "\(target)")
            #expect(rejection?.message.contains(reason) == true, "\(target): \(rejection?.message ?? "accepted")")
        }
    }
}

@Suite("Cancel semantics")
struct CancelSemanticsTests {
    static func job(_ kind: JobKind, collapseKey: String? = nil, dedupeKey: String? = nil) -> Job {
        Job(
            id: "j-\(kind)", createdAt: 0, ttl: 30, kind: kind, priority: .high, userId: "alice",
            collapseKey: collapseKey, dedupeKey: dedupeKey, targets: [])
    }

    @Test("a cancel never shares a dedupe identity with the call it cancels")
    func cancelIdentityDiffersFromCall() {
        #expect(
            DedupeWindows.identity(of: Self.job(.cancel, collapseKey: "call-77"))
                != DedupeWindows.identity(of: Self.job(.call, collapseKey: "call-77")))
        #expect(
            DedupeWindows.identity(of: Self.job(.cancel, dedupeKey: "c-77"))
                != DedupeWindows.identity(of: Self.job(.call, dedupeKey: "c-77")))
        #expect(DedupeWindows.identity(of: Self.job(.cancel)) != DedupeWindows.identity(of: Self.job(.call)))
        #expect(DedupeWindows.identity(of: Self.job(.call, collapseKey: "call-77")) == "call-77")
    }

    @Test("Mizu TYPE codes: call 0, message 1, cancel 2, custom 3, wake 4")
    func mizuTypes() {
        #expect(JobKind.allCases.map(\.mizuType) == [0, 1, 2, 3, 4])
        #expect([JobKind.call, .message, .cancel, .custom, .wake].map(\.mizuType) == [0, 1, 2, 3, 4])
    }
}
