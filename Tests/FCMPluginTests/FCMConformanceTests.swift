import Foundation
import PushCore
import PushHTTP
import PushKafka
import PushPipeline
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
@testable import FCMPlugin

/// docs/providers/fcm.md, run: each answer row is classified and must give the row's outcome,
/// action, retry and circuit; each request row must name tests that exist.
@Suite("FCM conformance (docs/providers/fcm.md)")
struct FCMConformanceTests {
    static func answer(
        _ status: Int, _ grpc: String, _ code: String?, message: String = "m", tokenViolation: Bool = false,
        retryAfter: String? = nil
    ) -> HTTPResponse {
        var details: [String] = []
        if let code { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}"#) }
        if tokenViolation {
            details.append(
                #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"x"}]}"#)
        }
        let body =
            #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(grpc)","details":[\#(details.joined(separator: ","))]}}"#
        return HTTPResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: Array(body.utf8))
    }

    /// The answer each row describes.
    static let answers: [String: HTTPResponse] = [
        "FCM-A01": HTTPResponse(status: 200, headers: [], body: Array(#"{"name":"projects/p/messages/0:1"}"#.utf8)),
        "FCM-A02": answer(404, "NOT_FOUND", "UNREGISTERED"),
        "FCM-A03": answer(404, "NOT_FOUND", nil, message: "Requested entity was not found."),
        "FCM-A04": answer(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", tokenViolation: true),
        "FCM-A05": answer(
            400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token"),
        "FCM-A06": answer(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Invalid value at 'message.android.ttl'"),
        "FCM-A07": answer(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", message: "SenderId mismatch"),
        "FCM-A08": answer(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"),
        "FCM-A09": answer(401, "UNAUTHENTICATED", "APNS_AUTH_ERROR"),
        "FCM-A10": answer(401, "UNAUTHENTICATED", nil),
        "FCM-A11": answer(403, "PERMISSION_DENIED", nil),
        "FCM-A12": answer(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", retryAfter: "7"),
        "FCM-A13": answer(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
        "FCM-A14": answer(503, "UNAVAILABLE", "UNAVAILABLE"),
        "FCM-A15": answer(500, "INTERNAL", "INTERNAL"),
        "FCM-A16": HTTPResponse(status: 502, headers: [], body: Array("Bad Gateway".utf8)),
        "FCM-A17": answer(400, "INVALID_ARGUMENT", "UNSPECIFIED_ERROR"),
        "FCM-A18": HTTPResponse(
            status: 404, headers: [("content-type", "text/html")],
            body: Array("<!DOCTYPE html><title>Error 404 (Not Found)!!1</title>".utf8)),
        "FCM-A19": answer(429, "RESOURCE_EXHAUSTED", nil),
    ]

    @Test(
        "every answer row gives the outcome, action, retry and circuit the table says",
        arguments: ConformanceTable.answerRows("fcm", prefix: "FCM"))
    func answerRow(_ row: ConformanceTable.Row) throws {
        let response = try #require(Self.answers[row.id], "\(row.id) has no answer in this test")
        let result = FCMResponse.classify(response)
        var cells = ConformanceTable.cells(of: result, scopeName: "(project)", partName: "(project, platform)")
        // A 429 holds the project's scope (FCM-Q22), as the provider's scope says.
        let project = DeliveryScope(provider: .fcm, key: "p", rateLimitHold: FCMResponse.quotaBackoff)
        if let hold = project.hold(after: result) { cells[3] = "holds (project) for \(hold.components.seconds) s" }
        #expect(cells == Array(row.cells[1...4]), "\(row.id): \(result)")
    }

    @Test("every answer of the table is tested and every tested answer is in the table")
    func answerRowsAreComplete() throws {
        try ConformanceTable.expectAnswerRowsComplete("fcm", prefix: "FCM", tested: Set(Self.answers.keys))
    }

    @Test("every request rule names tests that exist")
    func requestRowsNameTheirTests() throws {
        try ConformanceTable.expectRequestRowsNameTheirTests("fcm", prefix: "FCM", testTarget: "FCMPluginTests", atLeast: 12)
    }

    static func job(
        _ id: String, data: String = #"{"callId":"c-1"}"#, notification: String = #"{"title":"Bob","body":"Hi"}"#,
        targets: String
    ) -> KafkaMessage {
        let json =
            #"{"v":1,"id":"\#(id)","kind":"message","ttl":30,"userId":"u","notification":\#(notification),"data":\#(data),"targets":[\#(targets)]}"#
        return KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil,
            value: Array(json.utf8), timestamp: currentTimeMilliseconds())
    }

    static func fcmTarget(_ bindingId: String, token: String, platform: String) -> String {
        #"{"bindingId":"\#(bindingId)","provider":"fcm","app":"\#(FCMSandboxInstance.projectId)","token":"\#(token)","platform":"\#(platform)"}"#
    }

    static func outcomes(_ processed: ProcessedJob) -> [String: Outcome] {
        guard case .publish(let publications, _) = processed else { return [:] }
        var outcomes: [String: Outcome] = [:]
        for case .outcome(let outcome) in publications { outcomes[outcome.bindingId] = outcome }
        return outcomes
    }

    func processor(_ providers: [any PushProvider]) -> JobProcessor {
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 3, coolDownMilliseconds: 60_000)
        return JobProcessor(
            registry: ProviderRegistry(providers), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
    }

    func sends(_ harness: FCMHarness) -> Int {
        harness.instance.server.requests.filter { $0.path.hasSuffix("messages:send") }.count
    }

    @Test(
        "a job whose data has a reserved key ends failed for its FCM targets naming the key, unsent; its other targets are delivered",
        arguments: ["from", "message_type", "google.sent_time", "gcm.notification.title"])
    func reservedDataKey(_ key: String) async throws {
        let harness = try await FCMHarness.start()
        let proxy = ScriptedProvider { _ in .delivered(providerMessageId: nil, httpStatus: 200) }
        let processor = processor([harness.provider, proxy])
        let message = Self.job(
            "reserved", data: #"{"callId":"c-1","\#(key)":"bob"}"#,
            targets: Self.fcmTarget("android", token: "tok-1", platform: "android")
                + #",{"bindingId":"proxy","provider":"proxy","app":"acme","token":"t"}"#)
        let outcomes = Self.outcomes(await processor.process(message))
        #expect(outcomes["android"]?.status == .failed)
        #expect(outcomes["android"]?.action == Outcome.Action.none)
        #expect(outcomes["android"]?.reason?.contains("\"\(key)\"") == true, "\(outcomes["android"]?.reason ?? "no reason")")
        #expect(outcomes["proxy"]?.status == .delivered)
        #expect(sends(harness) == 0, "no request reached FCM")
        #expect(processor.circuitBreakers.openCircuits.isEmpty)
        await harness.stop()
    }

    /// Renders a body whose `message.data` has the key `from`.
    struct ReservedKeyTemplate: PayloadTemplates {
        func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
            RenderedPayload, PayloadTemplateFailure
        >? {
            .success(
                RenderedPayload(
                    document: .object([
                        (
                            "message",
                            .object([
                                ("token", .string(keywords().values["TOKEN"] ?? "")), ("data", .object([("from", .string("bob"))])),
                            ])
                        )
                    ]), source: "fcm/default/default.mustache"))
        }
    }

    @Test("a template that renders a reserved data key is not sent")
    func reservedKeyInTemplate() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let account = try ServiceAccount(contentsOfFile: instance.credentialsFile)
        let provider = try FCMProvider(
            configuration: FCMConfiguration(accounts: [account], endpoint: instance.server.baseURL, caFile: tls.caFile),
            transport: TestTransport.make(), templates: ReservedKeyTemplate())
        guard case .failed(let reason, nil, .none, _) = await provider.deliver(FCMHarness.delivery(token: "tok-1")) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(reason.contains("\"from\"") && reason.contains("fcm/default/default.mustache"))
        #expect(instance.server.requests.filter { $0.path.hasSuffix("messages:send") }.isEmpty)
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("the sandbox refuses reserved data keys and a data-only iOS push at apns-priority 10 with INVALID_ARGUMENT")
    func sandboxRefusesWhatFCMRefuses() async throws {
        let harness = try await FCMHarness.start()
        let accessToken = try await #require(harness.provider.accessTokens(for: FCMSandboxInstance.projectId)).token()
        let transport = TestTransport.make()
        func send(_ body: String) async throws -> HTTPResponse {
            try await transport.send(
                HTTPRequest(
                    url: "\(harness.instance.server.baseURL)/v1/projects/\(FCMSandboxInstance.projectId)/messages:send",
                    headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")],
                    body: Array(body.utf8), timeout: .seconds(10), tls: TLSOptions(caFile: harness.tls.caFile)))
        }
        for key in ["from", "message_type", "google.c.a.e", "gcm.n.e"] {
            let response = try await send(#"{"message":{"token":"tok","data":{"\#(key)":"x"}}}"#)
            #expect(response.status == 400, "\(key)")
            #expect(
                FCMResponse.classify(response) == .failed(reason: "INVALID_ARGUMENT: Invalid data key: \(key) is reserved", httpStatus: 400)
            )
        }
        #expect(try await send(#"{"message":{"token":"tok","data":{"caller":"x","fromUsername":"y"}}}"#).status == 200)
        let loud =
            #"{"message":{"token":"tok","data":{"k":"v"},"apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"content-available":1}}}}}"#
        #expect(try await send(loud).status == 400)
        transport.shutdown()
        await harness.stop()
    }

    @Test("a notification's sound and badge reach Android as android.notification sound and notification_count")
    func androidSoundAndBadge() throws {
        let message = try #require(try FCMMessageTests.body(platform: "android")["message"])
        #expect(message["android"]?["notification"] == .object([("sound", .string("ring")), ("notification_count", .integer(2))]))
        let call = try #require(try FCMMessageTests.body(kind: .call, platform: "android")["message"])
        #expect(call["android"]?["notification"] == nil, "a data-only push carries no notification")
    }

    @Test("a message that shows nothing reaches iOS as a background push with apns-priority 5 and content-available 1")
    func silentMessageToIOS() throws {
        let target = Target.fcm("b", app: "example-project", token: "tok-1", platform: "ios")
        let job = Job(
            id: "j", createdAt: 1_795_310_000_000, ttl: 45, kind: .message, priority: .high, userId: "u",
            data: ["chatId": "7"], targets: [target])
        let message = try #require(
            try JSONParser.parse(FCMMessage.body(Delivery(job: job, target: target, attempt: 1, now: 1_795_310_000_000)))["message"])
        #expect(message["notification"] == nil)
        #expect(message["apns"]?["headers"]?["apns-push-type"] == .string("background"))
        #expect(message["apns"]?["headers"]?["apns-priority"] == .string("5"))
        #expect(message["apns"]?["payload"] == .object([("aps", .object([("content-available", .integer(1))]))]))
    }

    @Test("THIRD_PARTY_AUTH_ERROR and APNS_AUTH_ERROR do not renew the access token", arguments: ["thirdparty-1", "apnsauth-1"])
    func thirdPartyKeepsTheAccessToken(_ token: String) async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(FCMHarness.delivery(token: token))
        guard case .failed(_, 401?, .checkCredentials, .part) = result else {
            Issue.record("got \(result)")
            return
        }
        guard case .delivered = await harness.provider.deliver(FCMHarness.delivery(token: "tok")) else {
            Issue.record("not delivered")
            return
        }
        #expect(harness.instance.sandbox.tokenRequestCount == 1)
        await harness.stop()
    }

    @Test("THIRD_PARTY_AUTH_ERROR stops the project's iOS targets only; Android keeps delivering")
    func thirdPartyStopsOnePlatform() async throws {
        let harness = try await FCMHarness.start()
        let processor = processor([harness.provider])
        let first = Self.outcomes(
            await processor.process(Self.job("1", targets: Self.fcmTarget("ios-1", token: "thirdparty-1", platform: "ios"))))
        #expect(first["ios-1"]?.status == .failed)
        #expect(first["ios-1"]?.action == .checkCredentials)
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["fcm/example-project/ios"])
        let held = Self.outcomes(await processor.process(Self.job("2", targets: Self.fcmTarget("ios-2", token: "tok-2", platform: "ios"))))
        #expect(held["ios-2"]?.reason?.hasPrefix("circuit open") == true)
        let android = Self.outcomes(
            await processor.process(Self.job("3", targets: Self.fcmTarget("android-3", token: "tok-3", platform: "android"))))
        #expect(android["android-3"]?.status == .delivered)
        let web = Self.outcomes(await processor.process(Self.job("4", targets: Self.fcmTarget("web-4", token: "tok-4", platform: "web"))))
        #expect(web["web-4"]?.status == .delivered)
        #expect(sends(harness) == 3, "the held-back iOS push was not sent")
        await harness.stop()
    }

    @Test("an OAuth refusal opens one circuit for the whole project, every platform included")
    func oauthRefusalStopsTheProject() async throws {
        let harness = try await FCMHarness.start()
        let processor = processor([harness.provider])
        _ = await processor.process(Self.job("1", targets: Self.fcmTarget("android-1", token: "tok-1", platform: "android")))
        harness.instance.sandbox.revokeAccessTokens()
        let refused = Self.outcomes(
            await processor.process(Self.job("2", targets: Self.fcmTarget("ios-2", token: "tok-2", platform: "ios"))))
        #expect(refused["ios-2"]?.action == .checkCredentials)
        #expect(processor.circuitBreakers.openCircuits.keys.map(\.description) == ["fcm/example-project"])
        for platform in ["android", "web", "ios"] {
            let held = Self.outcomes(
                await processor.process(Self.job("3-\(platform)", targets: Self.fcmTarget(platform, token: "tok", platform: platform))))
            #expect(held[platform]?.reason?.hasPrefix("circuit open") == true, "\(platform)")
        }
        await harness.stop()
    }
}
