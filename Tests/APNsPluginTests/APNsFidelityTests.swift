import Foundation
import PushCore
import PushHTTP
import Testing
import TestSupport
@testable import PushSandbox
@testable import APNsSandbox
@testable import APNsPlugin

/// Apple's rules for Push to Talk, Live Activities, widgets, PushKit tokens, BadDeviceToken and topics, and a
/// sandbox that answers as APNs does (docs/providers/apns.md, issue 40).
@Suite("APNs fidelity: what Apple's guides require, and a sandbox as strict as APNs")
struct APNsFidelityTests {
    static let token = String(repeating: "ab", count: 32)
    static let tokenApp = APNsApp(bundleId: "com.example.chat", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"))
    static let certificateApp = APNsApp(bundleId: "com.example.chat", authentication: .certificate(TLSOptions()))

    static func delivery(
        kind: JobKind = .message, priority: JobPriority = .high, ttl: Int64 = 30, target: Target? = nil,
        pushType: String? = nil, notification: PushCore.Notification? = Notification(title: "Bob", body: "Hi"),
        liveActivity: LiveActivity? = nil, overrides: [ProviderID: JSONValue] = [:]
    ) -> Delivery {
        let target = target ?? Target.apns("b1", app: "com.example.chat", token: token, pushType: pushType)
        let job = Job(
            id: "fidelity-1", createdAt: 1_795_310_000_000, ttl: ttl, kind: kind, priority: priority, userId: "alice",
            notification: notification, data: ["callId": "c-1"], overrides: overrides, liveActivity: liveActivity, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: 1_795_310_001_000)
    }

    static func headers(_ built: APNsRequest.Built) -> [String: String] {
        Dictionary(built.headers.map { ($0.name, $0.value) }) { first, _ in first }
    }

    /// A sandbox without a server that authenticates by certificate (so no provider token is needed), and its answer.
    static func answer(
        _ sandbox: APNsSandbox, pushType: String?, topicSuffix: String = "", priority: String? = nil,
        expiration: String? = nil, body: String, token: String = token
    ) -> (status: Int, reason: String?) {
        var headers: [(name: String, value: String)] = [("apns-topic", "com.example.chat" + topicSuffix)]
        if let pushType { headers.append(("apns-push-type", pushType)) }
        if let priority { headers.append(("apns-priority", priority)) }
        if let expiration { headers.append(("apns-expiration", expiration)) }
        let response = sandbox.respond(
            to: SandboxRequest(
                method: "POST", path: "/3/device/\(token)", headers: headers,
                body: Array(body.utf8), receivedAt: .now, connection: nil))
        let reason: String? = if case .string(let text)? = try? JSONParser.parse(response.body)["reason"] { text } else { nil }
        return (response.status, reason)
    }

    static func certificateSandbox() -> APNsSandbox {
        APNsSandbox(keys: [], bundleIds: ["com.example.chat"], certificateAuthentication: true)
    }

    // MARK: item 1, Push to Talk

    @Test("a Push to Talk transmission goes at priority 10 with apns-expiration 0, whatever the job's priority and TTL")
    func pushToTalk() throws {
        let built = try APNsRequest.build(Self.delivery(priority: .normal, ttl: 3600, pushType: "pushtotalk"), app: Self.tokenApp)
        #expect(Self.headers(built)["apns-priority"] == "10")
        #expect(Self.headers(built)["apns-expiration"] == "0")
        #expect(Self.headers(built)["apns-topic"] == "com.example.chat.voip-ptt")
    }

    @Test("the sandbox accepts a Push to Talk push at another priority or expiration, as APNs does, and records it as dropped")
    func sandboxPushToTalk() {
        let sandbox = Self.certificateSandbox()
        #expect(
            Self.answer(sandbox, pushType: "pushtotalk", topicSuffix: ".voip-ptt", priority: "10", expiration: "0", body: #"{"aps":{}}"#)
                .status == 200)
        #expect(sandbox.deviceDrops.isEmpty)
        #expect(
            Self.answer(sandbox, pushType: "pushtotalk", topicSuffix: ".voip-ptt", priority: "5", expiration: "0", body: #"{"aps":{}}"#)
                .status == 200)
        #expect(
            Self.answer(
                sandbox, pushType: "pushtotalk", topicSuffix: ".voip-ptt", priority: "10", expiration: "1795310030", body: #"{"aps":{}}"#
            ).status == 200)
        #expect(sandbox.deviceDrops == Array(repeating: "pushtotalk needs apns-priority 10 and apns-expiration 0", count: 2))
    }

    /// `overrides.apns.payload` that makes a Push to Talk push a service update.
    static let serviceUpdate: [ProviderID: JSONValue] = [
        "apns": .object([("payload", .object([("aps", .object([("ptt-push-type", .string("service-update"))]))]))])
    ]

    @Test("a Push to Talk service update goes at the job's priority, normal → 5 (no budget) and high → 10, against the sandbox")
    func pushToTalkServiceUpdate() async throws {
        func delivery(_ priority: JobPriority) -> Delivery {
            Self.delivery(
                priority: priority,
                target: Target.apns("b1", app: APNsSandboxFixture.bundleId, token: Self.token, pushType: "pushtotalk"),
                overrides: Self.serviceUpdate)
        }
        let normal = try APNsRequest.build(delivery(.normal), app: Self.tokenApp)
        #expect(Self.headers(normal)["apns-priority"] == "5")
        #expect(Self.headers(normal)["apns-expiration"] == "0")
        #expect(Self.headers(try APNsRequest.build(delivery(.high), app: Self.tokenApp))["apns-priority"] == "10")

        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        guard case .delivered(_, 200, _) = await provider.deliver(delivery(.normal)) else {
            Issue.record("the service update is sent")
            return
        }
        let request = try #require(fixture.server.requests.last)
        #expect(request.header("apns-priority") == "5")
        #expect(try JSONParser.parse(request.body)["aps"]?["ptt-push-type"] == .string("service-update"))
        #expect(fixture.sandbox.deviceDrops.isEmpty, "a service update may go at 5")
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("the sandbox takes a Push to Talk service update at priority 5 or 1, with any expiration, as the device does")
    func sandboxPushToTalkServiceUpdate() {
        let sandbox = Self.certificateSandbox()
        let body = #"{"aps":{"ptt-push-type":"service-update"}}"#
        for (priority, expiration) in [("5", "0"), ("1", "1795310030"), ("10", "0")] {
            #expect(
                Self.answer(
                    sandbox, pushType: "pushtotalk", topicSuffix: ".voip-ptt", priority: priority, expiration: expiration, body: body
                ).status == 200)
        }
        #expect(sandbox.deviceDrops.isEmpty)
        #expect(
            Self.answer(sandbox, pushType: "pushtotalk", topicSuffix: ".voip-ptt", priority: "5", expiration: "0", body: #"{"aps":{}}"#)
                .status == 200)
        #expect(sandbox.deviceDrops == ["pushtotalk needs apns-priority 10 and apns-expiration 0"], "a transmission still needs 10")
    }

    // MARK: item 2, token-only push types

    @Test(
        "location, Live Activity, widget and control pushes are refused with certificate authentication, unsent",
        arguments: [APNsPushType.location, .liveactivity, .widgets, .controls])
    func tokenOnlyPushTypes(_ pushType: APNsPushType) throws {
        let delivery = Self.delivery(pushType: pushType.rawValue, liveActivity: LiveActivity(event: .update, contentState: .object([])))
        #expect(throws: APNsRequest.Refusal.needsTokenAuthentication(pushType)) {
            try APNsRequest.build(delivery, app: Self.certificateApp)
        }
        #expect((try? APNsRequest.build(delivery, app: Self.tokenApp)) != nil, "token authentication sends it")
    }

    @Test("the sandbox answers TopicDisallowed to a token-only push type over a certificate connection")
    func sandboxTokenOnlyPushTypes() {
        let sandbox = Self.certificateSandbox()
        #expect(
            Self.answer(sandbox, pushType: "widgets", topicSuffix: ".push-type.widgets", body: #"{"aps":{"content-changed":true}}"#)
                == (400, "TopicDisallowed"))
        #expect(Self.answer(sandbox, pushType: "alert", body: #"{"aps":{"alert":"hi"}}"#).status == 200)
    }

    // MARK: item 3, Live Activity alerts

    @Test("a Live Activity start without alert text fails unsent")
    func liveActivityStartWithoutAlert() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let start = LiveActivity(event: .start, contentState: .object([]), attributesType: "CallAttributes", attributes: .object([]))
        let target = Target.apns("b1", app: APNsSandboxFixture.bundleId, token: Self.token, pushType: "liveactivity")
        for notification in [nil, Notification(sound: "ring.caf")] {
            let result = await provider.deliver(Self.delivery(target: target, notification: notification, liveActivity: start))
            #expect(
                result
                    == .failed(
                        reason: "a Live Activity start needs an alert (a title or body) and the job's notification has none; not sent",
                        httpStatus: nil))
        }
        #expect(fixture.server.requests.isEmpty)
        guard case .delivered = await provider.deliver(Self.delivery(target: target, liveActivity: start)) else {
            Issue.record("a start with an alert is sent")
            return
        }
        #expect(fixture.sandbox.deviceDrops.isEmpty)
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a localized Live Activity alert has title and body as {loc-key, loc-args}, never flat title-loc-key")
    func localizedLiveActivityAlert() throws {
        let notification = Notification(
            title: "Bob", sound: "ring.caf", locKey: "CALL_BODY", locArgs: ["Bob"],
            titleLocKey: "CALL_TITLE", titleLocArgs: ["Bob"])
        let built = try APNsRequest.build(
            Self.delivery(
                pushType: "liveactivity", notification: notification,
                liveActivity: LiveActivity(event: .update, contentState: .object([]))),
            app: Self.tokenApp)
        let alert = try #require(try JSONParser.parse(built.payload)["aps"]?["alert"])
        #expect(
            alert
                == .object([
                    ("title", .object([("loc-key", .string("CALL_TITLE")), ("loc-args", .array([.string("Bob")]))])),
                    ("body", .object([("loc-key", .string("CALL_BODY")), ("loc-args", .array([.string("Bob")]))])),
                    ("sound", .string("ring.caf")),
                ]))
        #expect(APNsPayloadRules.problem(in: built.payload, pushType: "liveactivity") == nil)
    }

    @Test("the sandbox records a Live Activity start without an alert, or an alert with flat title-loc-key, as dropped by the device")
    func sandboxLiveActivityAlert() {
        let start = #""event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{}"#
        #expect(
            APNsPayloadRules.problem(in: Array(#"{"aps":{\#(start)}}"#.utf8), pushType: "liveactivity") == "a start event needs an alert")
        #expect(APNsPayloadRules.problem(in: Array(#"{"aps":{\#(start),"alert":{"title":"Bob"}}}"#.utf8), pushType: "liveactivity") == nil)
        #expect(
            APNsPayloadRules.problem(in: Array(#"{"aps":{\#(start),"alert":{"title-loc-key":"T"}}}"#.utf8), pushType: "liveactivity")
                == "a Live Activity alert has title, body and sound only, not title-loc-key")
    }

    // MARK: issue 57 item 11, a Live Activity started by push asks for its update token

    static func liveActivityJob(_ liveActivity: String) throws -> Delivery {
        let json =
            #"{"v":1,"id":"la-1","kind":"message","userId":"alice","notification":{"title":"Bob is calling"},"liveActivity":\#(liveActivity),"targets":[{"bindingId":"b1","provider":"apns","app":"\#(APNsSandboxFixture.bundleId)","token":"\#(token)","pushType":"liveactivity"}]}"#
        let job = try JobDecoder().decode(Array(json.utf8), fallbackCreatedAt: currentTimeMilliseconds())
        return Delivery(job: job, target: job.targets[0], attempt: 1, now: currentTimeMilliseconds())
    }

    static let startFields = #""event":"start","contentState":{"status":"ringing"},"attributesType":"CallAttributes","attributes":{}"#

    @Test(
        "a Live Activity start asks for its update token with input-push-token 1 unless the job says inputPushToken false; an update or an end never asks"
    )
    func liveActivityInputPushToken() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        func sentAps(_ liveActivity: String) async throws -> JSONValue? {
            guard case .delivered(_, 200, _) = await provider.deliver(try Self.liveActivityJob(liveActivity)) else {
                Issue.record("not delivered: \(liveActivity)")
                return nil
            }
            return try JSONParser.parse(try #require(fixture.server.requests.last).body)["aps"]
        }
        #expect(try await sentAps("{\(Self.startFields)}")?["input-push-token"] == .integer(1))
        #expect(try await sentAps("{\(Self.startFields),\"inputPushToken\":true}")?["input-push-token"] == .integer(1))
        #expect(try await sentAps("{\(Self.startFields),\"inputPushToken\":false}")?["input-push-token"] == nil)
        #expect(try await sentAps(#"{"event":"update","contentState":{},"inputPushToken":true}"#)?["input-push-token"] == nil)
        #expect(try await sentAps(#"{"event":"end","contentState":{}}"#)?["input-push-token"] == nil)
        #expect(fixture.sandbox.deviceDrops.isEmpty)
        #expect(throws: JobRejection.self) { try Self.liveActivityJob("{\(Self.startFields),\"inputPushToken\":1}") }
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("the sandbox takes input-push-token 1 on a start and records one that is not a number as dropped by the device")
    func sandboxInputPushToken() {
        let start = #""event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":{"title":"Bob"}"#
        #expect(APNsPayloadRules.problem(in: Array(#"{"aps":{\#(start),"input-push-token":1}}"#.utf8), pushType: "liveactivity") == nil)
        #expect(
            APNsPayloadRules.problem(in: Array(#"{"aps":{\#(start),"input-push-token":"yes"}}"#.utf8), pushType: "liveactivity")
                == "aps.input-push-token must be an integer")
    }

    // MARK: item 4, widgets and controls

    @Test("widget and control pushes carry aps {content-changed: true} only", arguments: ["widgets", "controls"])
    func widgetPayload(_ pushType: String) throws {
        let built = try APNsRequest.build(Self.delivery(pushType: pushType), app: Self.tokenApp)
        let payload = try JSONParser.parse(built.payload)
        #expect(payload["aps"] == .object([("content-changed", .bool(true))]))
        #expect(APNsPayloadRules.problem(in: built.payload, pushType: pushType) == nil)
        #expect(
            APNsPayloadRules.problem(in: Array(#"{"aps":{"alert":"hi"}}"#.utf8), pushType: pushType)
                == "a \(pushType) push's aps must be {\"content-changed\": true}")
    }

    // MARK: item 5, PushKit tokens

    @Test("a PushKit token (RFC 8599 service voip) takes calls only: a message, wake or alert-type cancel is not sent")
    func pushKitTokenTakesCallsOnly() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        fixture.sandbox.register(token: Self.token, bundleId: APNsSandboxFixture.bundleId, pushKit: true)
        let binding = "pn-provider=apns;pn-param=\(APNsSandboxFixture.teamId).\(APNsSandboxFixture.bundleId).voip;pn-prid=\(Self.token)"
        for kind in ["message", "wake", "cancel", "custom"] {
            let result = await provider.deliver(
                try APNsSIPBindingTests.delivery(
                    target: #"{"bindingId":"b1","rfc8599":"\#(binding)"}"#, kind: kind,
                    notification: #""notification":{"title":"Bob","body":"Hi"},"#))
            guard case .failed(let reason, nil, .none, _) = result else {
                Issue.record("\(kind): \(result)")
                continue
            }
            #expect(reason.hasPrefix("the binding is a PushKit (VoIP) token, for calls only: a \(kind) push would go as"))
        }
        #expect(fixture.server.requests.isEmpty)
        let call = await provider.deliver(try APNsSIPBindingTests.delivery(target: #"{"bindingId":"b1","rfc8599":"\#(binding)"}"#))
        guard case .delivered(_, 200, _) = call else {
            Issue.record("a call is sent: \(call)")
            return
        }
        #expect(fixture.server.requests.first?.header("apns-push-type") == "voip")
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("the sandbox answers DeviceTokenNotForTopic to a PushKit token outside the .voip topic and to an ordinary token on it")
    func sandboxPushKitTopics() {
        let sandbox = Self.certificateSandbox()
        let pushKit = String(repeating: "cd", count: 32)
        sandbox.register(token: pushKit, bundleId: "com.example.chat", pushKit: true)
        sandbox.register(token: Self.token, bundleId: "com.example.chat")
        #expect(Self.answer(sandbox, pushType: "voip", topicSuffix: ".voip", body: #"{"aps":{}}"#, token: pushKit).status == 200)
        #expect(
            Self.answer(sandbox, pushType: "alert", body: #"{"aps":{"alert":"hi"}}"#, token: pushKit) == (400, "DeviceTokenNotForTopic"))
        #expect(Self.answer(sandbox, pushType: "voip", topicSuffix: ".voip", body: #"{"aps":{}}"#) == (400, "DeviceTokenNotForTopic"))
    }

    // MARK: item 6, BadDeviceToken and the environment

    @Test("400 BadDeviceToken keeps a binding whose environment was the app's default and removes one that named it")
    func badDeviceTokenAndEnvironment() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let dead = "0400" + String(repeating: "ab", count: 30)
        let guessed = await provider.deliver(APNsSandboxTests.delivery(token: dead, kind: .message))
        #expect(
            guessed
                == .failed(
                    reason: "BadDeviceToken in the app's default environment (the binding names none): kept", httpStatus: 400,
                    action: .checkCredentials, blame: .request))
        let named = await provider.deliver(APNsSandboxTests.delivery(token: dead, kind: .message, environment: "production"))
        #expect(named == .rejected(reason: "BadDeviceToken", httpStatus: 400))
        await provider.shutdown()
        await fixture.stop()
    }

    // MARK: item 7, a configured topic

    @Test("a configured topic replaces the bundle id; each push type keeps its suffix (a call goes to <topic>.voip)")
    func topicOverrideKeepsSuffix() throws {
        var app = Self.tokenApp
        app.topicOverride = "com.example.whitelabel"
        #expect(Self.headers(try APNsRequest.build(Self.delivery(kind: .call), app: app))["apns-topic"] == "com.example.whitelabel.voip")
        #expect(Self.headers(try APNsRequest.build(Self.delivery(), app: app))["apns-topic"] == "com.example.whitelabel")
        #expect(
            Self.headers(try APNsRequest.build(Self.delivery(pushType: "complication"), app: app))["apns-topic"]
                == "com.example.whitelabel.complication")
    }

    // MARK: item 9, the sandbox is Apple's

    @Test("the sandbox accepts a push without apns-push-type, as Apple does, and refuses an unknown one with InvalidPushType")
    func sandboxPushTypeHeader() {
        let sandbox = Self.certificateSandbox()
        #expect(Self.answer(sandbox, pushType: nil, body: #"{"aps":{"alert":"hi"}}"#).status == 200)
        #expect(Self.answer(sandbox, pushType: "shout", body: #"{"aps":{"alert":"hi"}}"#) == (400, "InvalidPushType"))
    }

    @Test("the sandbox never answers BadPayload, which is not an Apple reason: a payload the device drops is accepted and recorded")
    func sandboxNeverAnswersBadPayload() {
        let sandbox = Self.certificateSandbox()
        #expect(Self.answer(sandbox, pushType: "alert", body: "not json").status == 200)
        #expect(
            Self.answer(sandbox, pushType: "background", priority: "5", body: #"{"aps":{"content-available":1,"alert":"hi"}}"#).status
                == 200)
        #expect(sandbox.deviceDrops == ["the payload is not a JSON object", "a background push carries no alert, sound or badge"])
    }
}
