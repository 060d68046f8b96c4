import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import APNsSandbox
@testable import APNsPlugin

@Suite("APNs deliveries to SIP bindings and from payload templates")
struct APNsSIPBindingTests {
    static let token = String(repeating: "cd", count: 32)

    static func delivery(target: String, kind: String = "call", notification: String = "") throws -> Delivery {
        let json =
            #"{"v":1,"id":"sip-1","kind":"\#(kind)","userId":"alice",\#(notification)"data":{"callId":"c-9","caller":"bob"},"targets":[\#(target)]}"#
        let job = try JobDecoder().decode(Array(json.utf8), fallbackCreatedAt: currentTimeMilliseconds())
        return Delivery(job: job, target: job.targets[0], attempt: 1, now: currentTimeMilliseconds())
    }

    @Test("an RFC 8599 APNs binding with service voip delivers a call with topic <bundle>.voip and push type voip")
    func rfc8599VoipBinding() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let binding = "pn-provider=apns;pn-param=\(APNsSandboxFixture.teamId).\(APNsSandboxFixture.bundleId).voip;pn-prid=\(Self.token)"
        let result = await provider.deliver(try Self.delivery(target: #"{"bindingId":"b1","rfc8599":"\#(binding)"}"#))
        guard case .delivered(_, 200, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.first)
        #expect(request.path == "/3/device/\(Self.token)")
        #expect(request.header("apns-topic") == "\(APNsSandboxFixture.bundleId).voip")
        #expect(request.header("apns-push-type") == "voip")
        await provider.shutdown()
        await fixture.stop()
    }

    static let voipToken = String(repeating: "1f", count: 32)
    static let remoteToken = String(repeating: "2e", count: 32)

    @Test(
        "a Linphone dual binding (voip&remote, either order): a call goes to the VoIP token as voip, a message to the remote token as alert, each on its own topic",
        arguments: ["voip&remote", "remote&voip"])
    func dualBinding(_ services: String) async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        fixture.sandbox.register(token: Self.voipToken, bundleId: APNsSandboxFixture.bundleId, pushKit: true)
        fixture.sandbox.register(token: Self.remoteToken, bundleId: APNsSandboxFixture.bundleId)
        let prid =
            services == "voip&remote"
            ? "\(Self.voipToken):voip&\(Self.remoteToken):remote" : "\(Self.remoteToken):remote&\(Self.voipToken):voip"
        let target =
            #"{"bindingId":"b1","rfc8599":"pn-provider=apns.dev;pn-param=\#(APNsSandboxFixture.teamId).\#(APNsSandboxFixture.bundleId).\#(services);pn-prid=\#(prid)"}"#
        guard case .delivered(_, 200, _) = await provider.deliver(try Self.delivery(target: target)) else {
            Issue.record("call not delivered")
            return
        }
        let message = await provider.deliver(
            try Self.delivery(target: target, kind: "message", notification: #""notification":{"title":"Bob","body":"Hi"},"#))
        guard case .delivered(_, 200, _) = message else {
            Issue.record("message not delivered: \(message)")
            return
        }
        let requests = fixture.server.requests
        #expect(requests.map(\.path) == ["/3/device/\(Self.voipToken)", "/3/device/\(Self.remoteToken)"])
        #expect(requests.map { $0.header("apns-push-type") } == ["voip", "alert"])
        #expect(requests.map { $0.header("apns-topic") } == ["\(APNsSandboxFixture.bundleId).voip", APNsSandboxFixture.bundleId])
        await provider.shutdown()
        await fixture.stop()
    }

    @Test(
        "the team id is everything before pn-param's first dot whenever the rest names a configured app: liblinphone's placeholder team id, a lower-case team id, and Mizu's bare bundle id all reach the app"
    )
    func teamIdBeforeTheFirstDot() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let bundle = APNsSandboxFixture.bundleId
        let configured = provider.scope(of: Target.apns("b0", app: bundle, token: Self.token, environment: "production"))
        for param in [
            "ABCD1234.\(bundle).voip", "abcd1234.\(bundle).voip", "\(bundle).voip", "\(APNsSandboxFixture.teamId).\(bundle).voip",
        ] {
            let delivery = try Self.delivery(
                target: #"{"bindingId":"b1","rfc8599":"pn-provider=apns;pn-param=\#(param);pn-prid=\#(Self.token)"}"#)
            #expect(provider.scope(of: delivery.target) == configured, "\(param): the configured app's scope")
            let result = await provider.deliver(delivery)
            guard case .delivered(_, 200, _) = result else {
                Issue.record("\(param): not delivered: \(result)")
                continue
            }
            #expect(fixture.server.requests.last?.header("apns-topic") == "\(bundle).voip", "\(param)")
        }
        let elsewhere = await provider.deliver(
            try Self.delivery(
                target: #"{"bindingId":"b1","rfc8599":"pn-provider=apns;pn-param=ABCD1234.org.other.app.voip;pn-prid=\#(Self.token)"}"#))
        #expect(elsewhere == .failed(reason: "no APNs credentials for app org.other.app", httpStatus: nil))
        await provider.shutdown()
        await fixture.stop()
    }

    @Test(
        "liblinphone's registration as its iOS SDK writes it — its placeholder team id, upper-case tokens, its own pn-* parameters — rings through its VoIP token"
    )
    func liblinphoneRegistration() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let voip = Self.voipToken.uppercased(), remote = Self.remoteToken.uppercased()
        let contact =
            "pn-prid=\(voip):voip&\(remote):remote;pn-provider=apns;pn-param=ABCD1234.\(APNsSandboxFixture.bundleId).voip&remote;"
            + "pn-silent=1;pn-timeout=0;pn-msg-str=IM_MSG;pn-call-str=IC_MSG;pn-groupchat-str=GC_MSG;"
            + "pn-call-snd=notes_of_the_optimistic.caf;pn-msg-snd=msg.caf"
        let result = await provider.deliver(try Self.delivery(target: #"{"bindingId":"b1","rfc8599":"\#(contact)"}"#))
        guard case .delivered(_, 200, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.first)
        #expect(request.path == "/3/device/\(voip)")
        #expect(request.header("apns-topic") == "\(APNsSandboxFixture.bundleId).voip")
        #expect(request.header("apns-push-type") == "voip")
        await provider.shutdown()
        await fixture.stop()
    }

    @Test(
        "400 BadDeviceToken under RFC 8599 pn-provider=apns keeps the binding (it names no environment: a development token may have gone to production); under apns.dev it removes it"
    )
    func badDeviceTokenUnderPlainAPNs() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let dead = "0400" + String(repeating: "ab", count: 30)
        func binding(_ pnProvider: String) -> String {
            #"{"bindingId":"b1","rfc8599":"pn-provider=\#(pnProvider);pn-param=ABCD1234.\#(APNsSandboxFixture.bundleId);pn-prid=\#(dead)"}"#
        }
        let message = #""notification":{"title":"Bob","body":"Hi"},"#
        let plain = await provider.deliver(try Self.delivery(target: binding("apns"), kind: "message", notification: message))
        #expect(
            plain
                == .failed(
                    reason:
                        "BadDeviceToken in production, which RFC 8599 pn-provider=apns does not name (a development build's token sent there is answered so): kept",
                    httpStatus: 400, action: .checkCredentials, blame: .request))
        let dev = await provider.deliver(try Self.delivery(target: binding("apns.dev"), kind: "message", notification: message))
        #expect(dev == .rejected(reason: "BadDeviceToken", httpStatus: 400))
        await provider.shutdown()
        await fixture.stop()
    }

    @Test(
        "a dead half of a voip&remote binding: the outcome names the token that died and keeps the binding (action none); a binding whose halves are one token is removed"
    )
    func deadHalfOfDualBinding() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let unregistered = "0410" + String(repeating: "1f", count: 30)
        let badToken = "0400" + String(repeating: "2e", count: 30)
        func dual(voip: String, remote: String) -> String {
            #"{"bindingId":"b1","rfc8599":"pn-provider=apns.dev;pn-param=ABCD1234.\#(APNsSandboxFixture.bundleId).voip&remote;pn-prid=\#(voip):voip&\#(remote):remote"}"#
        }
        let message = #""notification":{"title":"Bob","body":"Hi"},"#

        let deadVoip = try Self.delivery(target: dual(voip: unregistered, remote: Self.remoteToken))
        let call = await provider.deliver(deadVoip)
        #expect(
            call
                == .rejected(
                    reason: "Unregistered: the voip token of this voip&remote binding; its remote token is kept", httpStatus: 410,
                    invalidSince: APNsSandbox.unregisteredSince, token: .voip))
        let outcome = Outcome(job: deadVoip.job, target: deadVoip.target, result: call, attempts: 1, at: 1)
        #expect((outcome.status, outcome.action, outcome.token) == (.rejected, .none, .voip))
        let stillRemote = await provider.deliver(
            try Self.delivery(target: dual(voip: unregistered, remote: Self.remoteToken), kind: "message", notification: message))
        guard case .delivered(_, 200, _) = stillRemote else {
            Issue.record("the live remote half is not delivered: \(stillRemote)")
            return
        }

        let deadRemote = await provider.deliver(
            try Self.delivery(target: dual(voip: Self.voipToken, remote: badToken), kind: "message", notification: message))
        #expect(
            deadRemote
                == .rejected(
                    reason: "BadDeviceToken: the remote token of this voip&remote binding; its voip token is kept", httpStatus: 400,
                    token: .remote))

        let oneToken = try Self.delivery(target: dual(voip: unregistered, remote: unregistered))
        let both = await provider.deliver(oneToken)
        #expect(both == .rejected(reason: "Unregistered", httpStatus: 410, invalidSince: APNsSandbox.unregisteredSince))
        #expect(Outcome(job: oneToken.job, target: oneToken.target, result: both, attempts: 1, at: 1).action == .removeBinding)
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("pn-provider=apns.dev is Apple's sandbox environment; pn-param without a service, or with remote, is an ordinary device token")
    func flexisipForms() throws {
        let bundle = APNsSandboxFixture.bundleId
        for (binding, environment) in [
            ("pn-provider=apns.dev;pn-param=ABCD123456.\(bundle);pn-prid=\(Self.token)", "sandbox"),
            ("pn-provider=apns;pn-param=ABCD123456.\(bundle).remote;pn-prid=\(Self.token):remote", "production"),
        ] {
            let delivery = try Self.delivery(
                target: #"{"bindingId":"b1","rfc8599":"\#(binding)"}"#, kind: "message",
                notification: #""notification":{"title":"Bob","body":"Hi"},"#)
            #expect(delivery.target.app == bundle)
            #expect(
                delivery.target.details(APNsTarget.self)
                    == APNsTarget(
                        token: Self.token, environment: environment, notation: .rfc8599, alternativeBundleId: "ABCD123456.\(bundle)"))
            let built = try APNsRequest.build(
                delivery, app: APNsApp(bundleId: bundle, authentication: .token(keyFile: "-", keyId: "K", teamId: "T")))
            #expect(built.pushType == .alert)
            #expect(built.headers.first { $0.name == "apns-topic" }?.value == bundle)
        }
    }

    @Test("an X-MPUSH APNs binding selects the app by its package and follows the kind's push type")
    func xmpushBinding() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let result = await provider.deliver(
            try Self.delivery(
                target: #"{"bindingId":"b1","xmpush":"s:i:\#(APNsSandboxFixture.bundleId):\#(Self.token)"}"#, kind: "message",
                notification: #""notification":{"title":"Bob","body":"Hi"},"#))
        guard case .delivered(_, 200, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.first)
        #expect(request.header("apns-topic") == APNsSandboxFixture.bundleId)
        #expect(request.header("apns-push-type") == "alert")
        await provider.shutdown()
        await fixture.stop()
    }

    /// Renders a fixed document for every key, as a template directory would.
    struct FixedTemplate: PayloadTemplates {
        let document: JSONValue
        func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
            RenderedPayload, PayloadTemplateFailure
        >? {
            .success(RenderedPayload(document: document, source: "apns/default/default.mustache"))
        }
    }

    @Test("a template's payload is sent without Mizu's headers block; headers still follow the binding rules")
    func templatePayload() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let document = try JSONParser.parse(
            Array(#"{"headers":{"apns-topic":"wrong.topic"},"aps":{"alert":{"title":"t"}},"data":{"ntype":0}}"#.utf8))
        let provider = try fixture.tokenProvider(templates: FixedTemplate(document: document))
        let result = await provider.deliver(try Self.delivery(target: #"{"bindingId":"b1","provider":"apns","token":"\#(Self.token)"}"#))
        guard case .delivered(_, 200, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.first)
        #expect(String(decoding: request.body, as: UTF8.self) == #"{"aps":{"alert":{"title":"t"}},"data":{"ntype":0}}"#)
        #expect(request.header("apns-topic") == "\(APNsSandboxFixture.bundleId).voip")
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a cancel takes the app's cancel push type; to a PushKit token (RFC 8599 service voip) it goes only when that type is voip")
    func cancelPushTypePerBindingAndApp() throws {
        let alertApp = APNsApp(
            bundleId: "com.example.chat", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"),
            cancelPushType: .alert)
        let native = try Self.delivery(
            target: #"{"bindingId":"b1","provider":"apns","app":"com.example.chat","token":"\#(Self.token)"}"#, kind: "cancel")
        let alert = try APNsRequest.build(native, app: alertApp)
        #expect(alert.pushType == .background, "an alert-type cancel that shows nothing goes as a background push")
        #expect(alert.headers.first { $0.name == "apns-topic" }?.value == "com.example.chat")
        let voipBinding = try Self.delivery(
            target: #"{"bindingId":"b1","rfc8599":"pn-provider=apns;pn-param=DEF123GHIJ.com.example.chat.voip;pn-prid=\#(Self.token)"}"#,
            kind: "cancel")
        #expect(throws: APNsRequest.Refusal.destination(.notForPushKitToken(.background, notation: .rfc8599))) {
            try APNsRequest.build(voipBinding, app: alertApp)
        }
        let defaultApp = APNsApp(bundleId: "com.example.chat", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"))
        #expect(try APNsRequest.build(native, app: defaultApp).pushType == .background, "alert by default; nothing shows")
        let voipApp = APNsApp(
            bundleId: "com.example.chat", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"),
            cancelPushType: .voip)
        #expect(try APNsRequest.build(native, app: voipApp).pushType == .voip)
        let voip = try APNsRequest.build(voipBinding, app: voipApp)
        #expect(voip.pushType == .voip)
        #expect(voip.headers.first { $0.name == "apns-topic" }?.value == "com.example.chat.voip")
    }
}
