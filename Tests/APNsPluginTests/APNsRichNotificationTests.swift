import Foundation
import PushCore
import PushHTTP
import Testing
import TestSupport
import APNsSandbox
@testable import APNsPlugin

@Suite("APNs: notification fields, overrides, alerts that fit and Live Activities against the sandbox")
struct APNsRichNotificationTests {
    static let token = String(repeating: "ab", count: 32)

    static func delivery(
        _ notification: PushCore.Notification?, pushType: String? = nil, data: [String: String] = [:],
        overrides: [ProviderID: JSONValue] = [:], liveActivity: LiveActivity? = nil
    ) -> Delivery {
        let target = Target.apns("b1", app: APNsSandboxFixture.bundleId, token: token, pushType: pushType)
        let job = Job(
            id: "rich-1", createdAt: 1_795_310_000_000, ttl: 600, kind: .message, priority: .high, userId: "alice",
            notification: notification, data: data, overrides: overrides, liveActivity: liveActivity, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
    }

    func aps(_ delivery: Delivery) throws -> JSONValue {
        let built = try APNsRequest.build(
            delivery,
            app: APNsApp(
                bundleId: APNsSandboxFixture.bundleId,
                authentication: .token(keyFile: "-", keyId: "k", teamId: "t")))
        return try #require(try JSONParser.parse(built.payload)["aps"])
    }

    static let chat = PushCore.Notification(
        title: "Bob", subtitle: "Team chat", body: "Lunch?", sound: .init(name: "alarm.caf", isCritical: true, volume: 0.8), badge: 4,
        threadId: "chat-42", category: "MESSAGE_REPLY", interruptionLevel: .timeSensitive, relevanceScore: 0.5,
        image: "https://example.com/a.png", channelId: "messages", tag: "chat-42", color: "#112233", locKey: "MSG", locArgs: ["Bob"],
        titleLocKey: "TITLE", titleLocArgs: ["Bob"], mutableContent: true)

    @Test("each notification field goes to its aps key; fields APNs has no place for are left out")
    func fieldMapping() throws {
        let aps = try aps(Self.delivery(Self.chat))
        let alert = try #require(aps["alert"])
        #expect(alert["title"] == .string("Bob"))
        #expect(alert["subtitle"] == .string("Team chat"))
        #expect(alert["body"] == .string("Lunch?"))
        #expect(alert["loc-key"] == .string("MSG"))
        #expect(alert["loc-args"] == .array([.string("Bob")]))
        #expect(alert["title-loc-key"] == .string("TITLE"))
        #expect(alert["title-loc-args"] == .array([.string("Bob")]))
        #expect(aps["sound"] == .object([("critical", .integer(1)), ("name", .string("alarm.caf")), ("volume", .double(0.8))]))
        #expect(aps["badge"] == .integer(4))
        #expect(aps["thread-id"] == .string("chat-42"))
        #expect(aps["category"] == .string("MESSAGE_REPLY"))
        #expect(aps["interruption-level"] == .string("time-sensitive"))
        #expect(aps["relevance-score"] == .double(0.5))
        #expect(aps["mutable-content"] == .integer(1))
        for absent in ["image", "channel-id", "tag", "color", "icon"] { #expect(aps[absent] == nil) }
    }

    @Test("mutableContent false keeps mutable-content off even for an alert with data; a plain sound stays a string")
    func mutableContentAndPlainSound() throws {
        let aps = try aps(Self.delivery(Notification(title: "t", sound: "ping.caf", mutableContent: false), data: ["k": "v"]))
        #expect(aps["mutable-content"] == nil)
        #expect(aps["sound"] == .string("ping.caf"))
    }

    @Test("a rich alert is accepted by the sandbox's payload checks and delivered")
    func richDelivered() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let result = await provider.deliver(Self.delivery(Self.chat))
        guard case .delivered(_, 200, false) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        await provider.shutdown()
        await fixture.stop()
    }

    @Test(
        "the sandbox answers 200 as APNs does and records what the device drops: a bad interruption level, relevance score, critical flag or volume"
    )
    func sandboxChecks() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        for aps: JSONValue in [
            .object([("interruption-level", .string("urgent"))]), .object([("relevance-score", .integer(2))]),
            .object([("sound", .object([("critical", .integer(2)), ("name", .string("a"))]))]),
            .object([("sound", .object([("critical", .integer(1)), ("name", .string("a")), ("volume", .double(1.5))]))]),
        ] {
            let delivery = Self.delivery(Notification(title: "t"), overrides: ["apns": .object([("payload", .object([("aps", aps)]))])])
            guard case .delivered(_, 200, _) = await provider.deliver(delivery) else {
                Issue.record("APNs accepts it")
                return
            }
        }
        #expect(fixture.sandbox.deviceDrops.count == 4)
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("overrides.apns.payload is merged last into the payload and never changes the headers")
    func overrideMerged() throws {
        let override: JSONValue = .object([
            (
                "payload",
                .object([
                    ("aps", .object([("sound", .string("custom.caf")), ("badge", .null), ("target-content-id", .string("chat-42"))])),
                    ("custom", .object([("k", .integer(1))])),
                ])
            )
        ])
        let delivery = Self.delivery(Notification(title: "t", sound: "ping.caf", badge: 2), overrides: ["apns": override])
        let built = try APNsRequest.build(
            delivery,
            app: APNsApp(
                bundleId: APNsSandboxFixture.bundleId,
                authentication: .token(keyFile: "-", keyId: "k", teamId: "t")))
        let payload = try JSONParser.parse(built.payload)
        #expect(payload["aps"]?["sound"] == .string("custom.caf"))
        #expect(payload["aps"]?["badge"] == nil)
        #expect(payload["aps"]?["target-content-id"] == .string("chat-42"))
        #expect(payload["aps"]?["alert"]?["title"] == .string("t"))
        #expect(payload["custom"]?["k"] == .integer(1))
        #expect(built.headers.first { $0.name == "apns-topic" }?.value == APNsSandboxFixture.bundleId)
        #expect(built.headers.first { $0.name == "apns-push-type" }?.value == "alert")
    }

    @Test(
        "a job of 30 targets with a 9 000-member override and a long alert: every target's payload is built and refused as too large, with its merged size"
    )
    func largeOverrideEveryTarget() throws {
        let override: JSONValue = .object([("payload", .object((0..<9_000).map { ("k\($0)", .integer(Int64($0))) }))])
        let targets = (0..<30).map { Target.apns("b\($0)", app: APNsSandboxFixture.bundleId, token: Self.token) }
        let job = Job(
            id: "big-override", createdAt: 0, ttl: 600, kind: .message, priority: .high, userId: "alice",
            notification: Notification(title: "Bob", body: String(repeating: "ü", count: 2_000)),
            overrides: ["apns": override], targets: targets)
        let app = APNsApp(bundleId: APNsSandboxFixture.bundleId, authentication: .token(keyFile: "-", keyId: "k", teamId: "t"))
        for target in targets {
            do {
                _ = try APNsRequest.build(Delivery(job: job, target: target, attempt: 1, now: 0), app: app)
                Issue.record("expected \(target.bindingId) to be refused")
            } catch {
                guard case .payloadTooLarge(let size, 4096) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(size > 9_000 * 8)
            }
        }
    }

    @Test(
        "an override that leaves the alert alone is merged once into the shortened payload: the body is cut, the override's members are all there"
    )
    func overrideWithTruncatedAlert() throws {
        let override: JSONValue = .object([("payload", .object((0..<100).map { ("k\($0)", .integer(Int64($0))) }))])
        let delivery = Self.delivery(Notification(title: "Bob", body: String(repeating: "ü", count: 3_000)), overrides: ["apns": override])
        let built = try APNsRequest.build(
            delivery,
            app: APNsApp(
                bundleId: APNsSandboxFixture.bundleId,
                authentication: .token(keyFile: "-", keyId: "k", teamId: "t")))
        #expect(built.truncated)
        #expect(built.payload.count <= 4096)
        let payload = try JSONParser.parse(built.payload)
        #expect(payload["k99"] == .integer(99))
        guard case .string(let body)? = payload["aps"]?["alert"]?["body"] else {
            Issue.record("no body")
            return
        }
        #expect(body.hasSuffix("…"))
    }

    @Test("an alert over 4096 bytes is shortened (body first) and delivered, marked truncated")
    func truncatedDelivered() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let body = String(repeating: "ü", count: 3000)
        let result = await provider.deliver(Self.delivery(Notification(title: "Bob", body: body)))
        guard case .delivered(_, 200, true) = result else {
            Issue.record("expected a truncated delivery: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.last)
        #expect(request.body.count <= 4096)
        let sent = try #require(try JSONParser.parse(request.body)["aps"]?["alert"]?["body"])
        guard case .string(let text) = sent else {
            Issue.record("no body")
            return
        }
        #expect(text.hasSuffix("…"))
        #expect(try JSONParser.parse(request.body)["aps"]?["alert"]?["title"] == .string("Bob"))
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a VoIP push may use 5120 bytes before it is shortened")
    func voipLimit() throws {
        let target = Target.apns("b1", app: APNsSandboxFixture.bundleId, token: Self.token, pushType: "voip")
        let job = Job(
            id: "v", createdAt: 0, ttl: 60, kind: .call, priority: .high, userId: "u",
            notification: Notification(body: String(repeating: "a", count: 6000)), targets: [target])
        let built = try APNsRequest.build(
            Delivery(job: job, target: target, attempt: 1, now: 0),
            app: APNsApp(bundleId: APNsSandboxFixture.bundleId, authentication: .token(keyFile: "-", keyId: "k", teamId: "t")))
        #expect(built.truncated)
        #expect(built.payload.count <= 5120 && built.payload.count > 4096)
    }

    @Test("only a payload that cannot fit even with an empty body fails, before any request")
    func cannotFit() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let result = await provider.deliver(Self.delivery(Notification(body: "short"), data: ["blob": String(repeating: "x", count: 5000)]))
        guard case .failed(let reason, nil, _, _) = result else {
            Issue.record("expected failed: \(result)")
            return
        }
        #expect(reason.hasPrefix("PayloadTooLarge"))
        #expect(fixture.server.requests.isEmpty)
        await provider.shutdown()
        await fixture.stop()
    }

    static let activity = LiveActivity(
        event: .update, contentState: .object([("status", .string("connected")), ("seconds", .integer(42))]),
        timestamp: 1_795_310_000, staleDate: 1_795_310_600)

    @Test(
        "a Live Activity update goes as push type liveactivity to <bundle>.push-type.liveactivity with event, timestamp and content-state")
    func liveActivityUpdate() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let result = await provider.deliver(
            Self.delivery(
                Notification(title: "Call with Bob", body: "00:42"), pushType: "liveactivity",
                liveActivity: Self.activity))
        guard case .delivered(_, 200, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let request = try #require(fixture.server.requests.last)
        #expect(request.header("apns-topic") == APNsSandboxFixture.bundleId + ".push-type.liveactivity")
        #expect(request.header("apns-push-type") == "liveactivity")
        let aps = try #require(try JSONParser.parse(request.body)["aps"])
        #expect(aps["event"] == .string("update"))
        #expect(aps["timestamp"] == .integer(1_795_310_000))
        #expect(aps["stale-date"] == .integer(1_795_310_600))
        #expect(aps["content-state"] == Self.activity.contentState)
        #expect(aps["alert"]?["title"] == .string("Call with Bob"))
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a Live Activity start carries attributes-type and attributes; an end its dismissal-date; timestamp defaults to createdAt")
    func liveActivityStartAndEnd() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let start = LiveActivity(
            event: .start, contentState: .object([("status", .string("ringing"))]),
            attributesType: "CallAttributes", attributes: .object([("caller", .string("Bob"))]))
        guard
            case .delivered = await provider.deliver(
                Self.delivery(
                    Notification(title: "Bob is calling"), pushType: "liveactivity",
                    liveActivity: start))
        else {
            Issue.record("start not delivered")
            return
        }
        let startRequest = try #require(fixture.server.requests.last)
        let started = try #require(try JSONParser.parse(startRequest.body)["aps"])
        #expect(started["attributes-type"] == .string("CallAttributes"))
        #expect(started["attributes"]?["caller"] == .string("Bob"))
        #expect(started["timestamp"] == .integer(1_795_310_000))
        let end = LiveActivity(event: .end, contentState: .object([]), dismissalDate: 1_795_311_000)
        guard case .delivered = await provider.deliver(Self.delivery(nil, pushType: "liveactivity", liveActivity: end)) else {
            Issue.record("end not delivered")
            return
        }
        let endRequest = try #require(fixture.server.requests.last)
        let ended = try #require(try JSONParser.parse(endRequest.body)["aps"])
        #expect(ended["event"] == .string("end"))
        #expect(ended["dismissal-date"] == .integer(1_795_311_000))
        #expect(ended["attributes-type"] == nil)
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a liveactivity push without event, timestamp or content-state is accepted by APNs and recorded as dropped by the device")
    func sandboxRefusesIncompleteLiveActivity() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let override: JSONValue = .object([("payload", .object([("aps", .object([("event", .null)]))]))])
        let result = await provider.deliver(
            Self.delivery(nil, pushType: "liveactivity", overrides: ["apns": override], liveActivity: Self.activity))
        guard case .delivered(_, 200, _) = result else {
            Issue.record("APNs accepts it: \(result)")
            return
        }
        #expect(fixture.sandbox.deviceDrops == ["aps.event must be start, update or end"])
        await provider.shutdown()
        await fixture.stop()
    }

    @Test("a liveactivity target of a job without liveActivity fails, not sent")
    func liveActivityMissing() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try fixture.tokenProvider()
        let result = await provider.deliver(Self.delivery(Notification(title: "t"), pushType: "liveactivity"))
        #expect(
            result == .failed(reason: "the target's push type is liveactivity and the job has no liveActivity; not sent", httpStatus: nil))
        #expect(fixture.server.requests.isEmpty)
        await provider.shutdown()
        await fixture.stop()
    }
}
