import Logging
import PushCore
import PushCrypto
import PushHTTP
import Testing
import TestSupport
@testable import APNsPlugin

@Suite("APNs request rules (headers, topic, priority, payload)")
struct APNsRulesTests {
    static let app = APNsApp(bundleId: "com.example.chat", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"))
    static let token = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1"

    static func delivery(
        kind: JobKind = .message, priority: JobPriority = .high, ttl: Int64 = 30, pushType: String? = nil,
        collapseKey: String? = nil, notification: Notification? = Notification(title: "Bob", body: "Hi", sound: "default", badge: 3),
        data: [String: String] = ["callId": "c-77"], bindingId: String = "b1", attempt: Int = 1
    ) -> Delivery {
        let target = Target.apns(bindingId, app: "com.example.chat", token: token, pushType: pushType)
        let job = Job(
            id: "job-1", createdAt: 1_795_310_000_000, ttl: ttl, kind: kind, priority: priority, userId: "alice",
            collapseKey: collapseKey, notification: notification, data: data,
            liveActivity: pushType == "liveactivity" ? LiveActivity(event: .update, contentState: .object([])) : nil, targets: [target])
        return Delivery(job: job, target: target, attempt: attempt, now: 1_795_310_001_000)
    }

    func headers(_ delivery: Delivery, app: APNsApp = app) throws -> [String: String] {
        let built = try APNsRequest.build(delivery, app: app)
        return Dictionary(built.headers.map { ($0.name, $0.value) }) { first, _ in first }
    }

    @Test("a call is a VoIP push: topic bundle.voip, type voip, priority 10")
    func voipCall() throws {
        let headers = try headers(Self.delivery(kind: .call))
        #expect(headers["apns-topic"] == "com.example.chat.voip")
        #expect(headers["apns-push-type"] == "voip")
        #expect(headers["apns-priority"] == "10")
        #expect(try APNsRequest.build(Self.delivery(kind: .call), app: Self.app).path == "/3/device/\(Self.token)")
    }

    @Test("a wake-up is a background push: priority 5 always, content-available only, no alert, sound or badge")
    func background() throws {
        let delivery = Self.delivery(kind: .wake, priority: .high)
        let headers = try headers(delivery)
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-topic"] == "com.example.chat")
        #expect(headers["apns-priority"] == "5")
        let payload = try APNsRequest.build(delivery, app: Self.app).payload
        #expect(String(decoding: payload, as: UTF8.self) == #"{"aps":{"content-available":1},"callId":"c-77"}"#)
    }

    @Test("push type by kind: call → voip, cancel → alert, message and custom → alert, wake → background; the target's pushType wins")
    func pushTypeByKind() throws {
        #expect(APNsPushType.byKind(.call) == .voip)
        #expect(APNsPushType.byKind(.cancel) == .alert)
        #expect(APNsPushType.byKind(.cancel, cancel: .voip) == .voip)
        #expect(APNsPushType.byKind(.message) == .alert)
        #expect(APNsPushType.byKind(.custom) == .alert)
        #expect(APNsPushType.byKind(.wake) == .background)
        #expect(try APNsRequest.build(Self.delivery(kind: .message, pushType: "complication"), app: Self.app).pushType == .complication)
    }

    @Test(
        "every push type's topic suffix is Apple's",
        arguments: [
            ("alert", "com.example.chat"), ("background", "com.example.chat"), ("voip", "com.example.chat.voip"),
            ("complication", "com.example.chat.complication"), ("fileprovider", "com.example.chat.pushkit.fileprovider"),
            ("location", "com.example.chat.location-query"), ("pushtotalk", "com.example.chat.voip-ptt"),
            ("liveactivity", "com.example.chat.push-type.liveactivity"), ("widgets", "com.example.chat.push-type.widgets"),
            ("controls", "com.example.chat.push-type.controls"), ("mdm", "com.example.chat"),
        ])
    func topics(_ pushType: String, _ topic: String) throws {
        // A `voip` binding is a PushKit token, which takes calls only.
        #expect(try headers(Self.delivery(kind: pushType == "voip" ? .call : .message, pushType: pushType))["apns-topic"] == topic)
    }

    @Test("a configured topic replaces the derived one (Mizu pushnotification_topic)")
    func topicOverride() throws {
        let app = APNsApp(
            bundleId: "com.example.chat", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"),
            topicOverride: "com.apple.mgmt.External.1234")
        #expect(try headers(Self.delivery(pushType: "mdm"), app: app)["apns-topic"] == "com.apple.mgmt.External.1234")
    }

    @Test("an alert follows the job priority: high → 10, normal → 5")
    func alertPriority() throws {
        #expect(try headers(Self.delivery(priority: .high))["apns-priority"] == "10")
        #expect(try headers(Self.delivery(priority: .normal))["apns-priority"] == "5")
    }

    @Test("apns-expiration is createdAt + ttl in epoch seconds; ttl 0 gives 0 (now or never)")
    func expiration() throws {
        #expect(try headers(Self.delivery(ttl: 30))["apns-expiration"] == "1795310030")
        #expect(try headers(Self.delivery(ttl: 0))["apns-expiration"] == "0")
    }

    @Test("apns-collapse-id: collapseKey as is up to 64 bytes, else its SHA-256 in hex (64 bytes)")
    func collapseId() throws {
        #expect(try headers(Self.delivery(collapseKey: "chat-42"))["apns-collapse-id"] == "chat-42")
        let long = String(repeating: "x", count: 65)
        let hashed = try #require(try headers(Self.delivery(collapseKey: long))["apns-collapse-id"])
        #expect(hashed.utf8.count == 64)
        #expect(hashed == Digest.hex(Digest.sha256(Array(long.utf8))))
        #expect(try headers(Self.delivery())["apns-collapse-id"] == nil)
    }

    @Test("apns-id is a UUID, the same for every attempt of a delivery, different per binding")
    func stableId() throws {
        let first = try #require(try headers(Self.delivery(attempt: 1))["apns-id"])
        #expect(try headers(Self.delivery(attempt: 3))["apns-id"] == first)
        #expect(try headers(Self.delivery(bindingId: "b2"))["apns-id"] != first)
        #expect(first.count == 36)
        let characters = Array(first)
        #expect([8, 13, 18, 23].allSatisfy { characters[$0] == "-" }, "8-4-4-4-12 groups")
        #expect(characters.enumerated().allSatisfy { [8, 13, 18, 23].contains($0.offset) || "0123456789abcdef".contains($0.element) })
        #expect(characters[14] == "5", "version 5 (name-based)")
        #expect("89ab".contains(characters[19]), "RFC 4122 variant")
    }

    @Test("apns-id is the first 128 bits of SHA-256 of the delivery key, as a version-5 UUID: the same across releases")
    func stableIdDerivation() {
        #expect(APNsRequest.stableId("job-1/binding-1") == "3a0fe2a0-c771-5ae8-aaa1-b7e7b9568632")
        #expect(Digest.hex(Digest.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("the alert payload has aps alert, sound, badge, mutable-content and the data at the top level")
    func alertPayload() throws {
        let payload = try APNsRequest.build(Self.delivery(), app: Self.app).payload
        #expect(
            String(decoding: payload, as: UTF8.self)
                == #"{"aps":{"alert":{"title":"Bob","body":"Hi"},"sound":"default","badge":3,"mutable-content":1},"callId":"c-77"}"#)
    }

    @Test("payload limits: 4096 bytes, 5120 for VoIP, refused before any request")
    func payloadLimits() {
        let big = ["blob": String(repeating: "x", count: 4500)]
        #expect(throws: APNsRequest.Refusal.self) { try APNsRequest.build(Self.delivery(kind: .message, data: big), app: Self.app) }
        #expect((try? APNsRequest.build(Self.delivery(kind: .call, data: big), app: Self.app)) != nil)
        let huge = ["blob": String(repeating: "x", count: 5200)]
        #expect(throws: APNsRequest.Refusal.self) { try APNsRequest.build(Self.delivery(kind: .call, data: huge), app: Self.app) }
    }

    @Test("the location push type is refused with certificate authentication")
    func locationNeedsToken() {
        let app = APNsApp(bundleId: "com.example.chat", authentication: .certificate(TLSOptions()))
        #expect(throws: APNsRequest.Refusal.needsTokenAuthentication(.location)) {
            try APNsRequest.build(Self.delivery(pushType: "location"), app: app)
        }
    }

    @Test(
        "apps without a client certificate share the environment's endpoint; an app with one has an endpoint of its own in each environment"
    )
    func scopesNameTheirConnections() throws {
        let certificate = APNsApp(
            bundleId: "com.example.voip", authentication: .certificate(TLSOptions(clientCertificateFile: "/dev/null")))
        let provider = try APNsProvider(
            configuration: APNsConfiguration(
                apps: [certificate], productionURL: "https://apns.test",
                sandboxURL: "https://sandbox.apns.test"),
            transport: TestTransport.make(), logger: Logger(label: "test"))
        func endpoint(_ app: String, _ environment: String? = nil) -> String? {
            provider.scope(
                of: Target(bindingId: "b", provider: .apns, app: app, details: APNsTarget(token: "aa", environment: environment))
            ).endpoint
        }
        #expect(endpoint("com.example.chat") == "https://apns.test")
        #expect(endpoint("com.example.other") == endpoint("com.example.chat"))
        #expect(endpoint("com.example.voip") == "https://apns.test com.example.voip")
        #expect(endpoint("com.example.voip", "sandbox") == "https://sandbox.apns.test com.example.voip")
    }
}
