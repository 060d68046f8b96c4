import Foundation
import PushCore
import PushHTTP
import PushPipeline
import PushPluginAPI
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
@testable import FCMPlugin

/// Issue 40's FCM rules, each against the FCM sandbox where the rule is about what FCM receives or answers.
@Suite("FCM fidelity: Google's own 404, quota floor, payload size, collapse ids, priorities, platforms")
struct FCMFidelityTests {
    static func provider(
        _ instance: FCMSandboxInstance, tls: SandboxTLS, endpoint: String? = nil,
        packages: [String: String] = [:], iosPackages: Set<String> = []
    ) throws -> FCMProvider {
        var configuration = FCMConfiguration(
            accounts: [try ServiceAccount(contentsOfFile: instance.credentialsFile)], packages: packages,
            endpoint: endpoint ?? instance.server.baseURL, caFile: tls.caFile)
        configuration.iosPackages = iosPackages
        return try FCMProvider(configuration: configuration, transport: TestTransport.make())
    }

    static func delivery(
        _ target: Target, kind: JobKind = .message, collapseKey: String? = nil,
        notification: PushCore.Notification? = PushCore.Notification(title: "T", body: "B")
    ) -> Delivery {
        let now = currentTimeMilliseconds()
        let job = Job(
            id: "j", createdAt: now, ttl: 60, kind: kind, priority: .high, userId: "u", collapseKey: collapseKey,
            notification: notification, data: ["k": "v"], targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: now)
    }

    func sentMessage(_ instance: FCMSandboxInstance) throws -> JSONValue {
        let send = try #require(instance.server.requests.last { $0.path.hasSuffix("messages:send") })
        return try #require(try JSONParser.parse(send.body)["message"])
    }

    @Test("a 404 that is not in Google's error format fails, keeps the binding and opens the project's circuit")
    func foreign404() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        // A wrong PUSH_FCM_ENDPOINT: Google's front end answers its HTML 404 page.
        let provider = try Self.provider(instance, tls: tls, endpoint: instance.server.baseURL + "/wrong-prefix")
        let processor = FCMConformanceTests().processor([provider])
        let outcomes = FCMConformanceTests.outcomes(
            await processor.process(
                FCMConformanceTests.job(
                    "html-404", targets: FCMConformanceTests.fcmTarget("android-1", token: "tok-1", platform: "android"))))
        #expect(outcomes["android-1"]?.status == .failed)
        #expect(outcomes["android-1"]?.action == .checkCredentials, "the binding is kept")
        #expect(outcomes["android-1"]?.reason?.contains("PUSH_FCM_ENDPOINT") == true, "\(outcomes["android-1"]?.reason ?? "no reason")")
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["fcm/example-project"])
        // Google's own NOT_FOUND still removes the binding.
        let google = try Self.provider(instance, tls: tls)
        guard case .rejected(_, 404?, _, _) = await google.deliver(Self.delivery(.fcm("b", token: "notfound-1", platform: "android")))
        else {
            Issue.record("Google's NOT_FOUND should reject the token")
            return
        }
        await provider.shutdown()
        await google.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("a 429 without an FcmError detail or Retry-After is retried after at least a minute")
    func rateLimitedWithoutDetail() async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(FCMHarness.delivery(token: "ratelimited-1"))
        guard case .retryable(_, 429?, let after?) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(after == .seconds(60))
        await harness.stop()
    }

    @Test("the 4096-byte limit counts data and notification: an iOS alert written whole in the apns block does not count")
    func payloadIsDataAndNotification() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let provider = try Self.provider(instance, tls: tls)
        // A subtitle makes the apns block carry the whole alert: the body travels twice, the message is over 4096 bytes.
        let body = String(repeating: "b", count: 2500)
        let delivery = Self.delivery(
            .fcm("ios", token: "tok-ios", platform: "ios"), notification: PushCore.Notification(title: "T", subtitle: "S", body: body))
        guard case .delivered(_, 200?, let truncated) = await provider.deliver(delivery) else {
            Issue.record("not delivered")
            return
        }
        #expect(!truncated)
        let message = try sentMessage(instance)
        #expect(message["notification"]?["body"] == .string(body))
        #expect(instance.server.requests.last!.body.count > 4096, "the whole message is over 4096 bytes; its payload is not")
        // A payload over the limit is shortened until data and notification fit.
        let long = Self.delivery(
            .fcm("android", token: "tok-a", platform: "android"),
            notification: PushCore.Notification(title: "T", body: String(repeating: "x", count: 5000)))
        guard case .delivered(_, 200?, true) = await provider.deliver(long) else {
            Issue.record("not delivered truncated")
            return
        }
        #expect(FCMMessageRulesMirror.payloadBytes(try sentMessage(instance)) <= 4096)
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("the sandbox refuses data and notification over 4096 bytes with INVALID_ARGUMENT, whatever the token's size")
    func sandboxRefusesLargePayload() async throws {
        let harness = try await FCMHarness.start()
        let data = String(repeating: "d", count: 4100)
        let big = try await Self.send(harness, #"{"message":{"token":"tok","data":{"k":"\#(data)"}}}"#)
        #expect(big.status == 400 && String(decoding: big.body, as: UTF8.self).contains("too big"))
        let longToken = String(repeating: "t", count: 4000)
        let small = try await Self.send(harness, #"{"message":{"token":"\#(longToken)","data":{"k":"v"},"notification":{"title":"T"}}}"#)
        #expect(small.status == 200)
        await harness.stop()
    }

    @Test("a collapse key over 64 bytes reaches iOS tokens as its SHA-256 in apns-collapse-id, as the APNs plugin sends it")
    func longCollapseKeyIsHashed() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let provider = try Self.provider(instance, tls: tls)
        let key = String(repeating: "k", count: 100)
        guard case .delivered = await provider.deliver(Self.delivery(.fcm("ios", token: "tok", platform: "ios"), collapseKey: key)) else {
            Issue.record("not delivered")
            return
        }
        let header = try sentMessage(instance)["apns"]?["headers"]?["apns-collapse-id"]
        #expect(header == .string(AppleCollapseId.header(for: key)))
        #expect(AppleCollapseId.header(for: key).utf8.count == 64)
        #expect(AppleCollapseId.header(for: "short") == "short")
        let refused = try await Self.send(
            FCMHarnessOf(instance: instance, provider: provider),
            #"{"message":{"token":"tok","notification":{"title":"T"},"apns":{"headers":{"apns-collapse-id":"\#(key)"}}}}"#)
        #expect(refused.status == 400, "the sandbox refuses what APNs would")
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("the sandbox accepts android.priority as the REST enum HIGH and NORMAL and as high and normal, nothing else")
    func androidPriorityEnum() async throws {
        let harness = try await FCMHarness.start()
        for priority in ["HIGH", "NORMAL", "high", "normal"] {
            let response = try await Self.send(harness, #"{"message":{"token":"tok","android":{"priority":"\#(priority)"}}}"#)
            #expect(response.status == 200, "\(priority)")
        }
        let urgent = try await Self.send(harness, #"{"message":{"token":"tok","android":{"priority":"urgent"}}}"#)
        #expect(urgent.status == 400)
        await harness.stop()
    }

    @Test("an RFC 8599 fcm binding naming an iOS package gets the apns block and the iOS scope")
    func iosPackageSaysThePlatform() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let provider = try Self.provider(
            instance, tls: tls, packages: ["com.example.ios": FCMSandboxInstance.projectId],
            iosPackages: ["com.example.ios"])
        let json =
            #"{"v":1,"id":"j1","kind":"wake","userId":"u","data":{"callId":"c"},"targets":[{"bindingId":"b1","rfc8599":"pn-provider=fcm;pn-param=com.example.ios;pn-prid=fcm-ios-token"}]}"#
        let job = try JobDecoder().decode(Array(json.utf8), fallbackCreatedAt: currentTimeMilliseconds())
        let target = job.targets[0]
        #expect(provider.scope(of: target).key == FCMSandboxInstance.projectId)
        #expect(provider.scope(of: target).part == "ios")
        guard case .delivered = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
        else {
            Issue.record("not delivered")
            return
        }
        let message = try sentMessage(instance)
        #expect(message["apns"]?["headers"]?["apns-push-type"] == .string("background"))
        #expect(message["apns"]?["payload"]?["aps"]?["content-available"] == .integer(1))
        // The binding naming the project instead says no platform: Android's message, no apns block.
        let plain = Target.fcm("b2", app: FCMSandboxInstance.projectId, token: "t")
        #expect(provider.scope(of: plain).part == nil)
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    /// A provider and its sandbox, for `send`.
    struct FCMHarnessOf {
        let instance: FCMSandboxInstance
        let provider: FCMProvider
    }

    static func send(_ harness: FCMHarness, _ body: String) async throws -> HTTPResponse {
        try await send(FCMHarnessOf(instance: harness.instance, provider: harness.provider), body, caFile: harness.tls.caFile)
    }

    static func send(_ harness: FCMHarnessOf, _ body: String, caFile: String? = nil) async throws -> HTTPResponse {
        let accessToken = try await #require(harness.provider.accessTokens(for: FCMSandboxInstance.projectId)).token()
        let transport = TestTransport.make()
        defer { transport.shutdown() }
        let ca = caFile ?? harness.instance.server.tls.caFile
        return try await transport.send(
            HTTPRequest(
                url: "\(harness.instance.server.baseURL)/v1/projects/\(FCMSandboxInstance.projectId)/messages:send",
                headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")],
                body: Array(body.utf8), timeout: .seconds(10), tls: TLSOptions(caFile: ca)))
    }
}

/// The payload measure as the sandbox counts it, for checking what was sent.
enum FCMMessageRulesMirror {
    static func payloadBytes(_ message: JSONValue) -> Int {
        [message["data"], message["notification"], message["android"]?["notification"]].compactMap { $0 }.reduce(0) { total, member in
            var writer = JSONWriter()
            writer.value(member)
            return total + writer.bytes.count
        }
    }
}
