import Foundation
import HMSSandbox
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
@testable import HMSPlugin

/// An HMS sandbox and a provider configured for its app.
struct HMSHarness {
    let tls: SandboxTLS
    let instance: HMSSandboxInstance
    let provider: HMSProvider

    /// - Parameter timeout: per push request; tests of many sends at once raise it, as the suites share CI's two cores.
    ///   It bounds the connection set-up too: libcurl's connect timeout (5 s by default) covers the TLS handshake of each
    ///   extra connection that many sends open, and on loaded CI cores that took longer (the sends ended `request timed out`).
    static func start(
        clock: FakeClock = FakeClock(), secret: String = HMSSandboxInstance.clientSecret,
        extraApps: [HMSConfiguration.App] = [], timeout: Duration = .seconds(10),
        category: String = HMSConfiguration.defaultCategory
    ) async throws -> HMSHarness {
        let tls = try SandboxTLS.make()
        let instance = try await HMSSandboxInstance.start(tls: tls, clock: { clock.milliseconds })
        let app = HMSConfiguration.App(
            appId: HMSSandboxInstance.appId, clientSecret: secret, clientSecretFile: instance.clientSecretFile, category: category)
        let configuration = HMSConfiguration(
            apps: [app] + extraApps, defaultAppId: HMSSandboxInstance.appId, tokenURL: instance.tokenURL,
            endpoint: instance.server.baseURL, caFile: tls.caFile, timeout: timeout)
        let provider = HMSProvider(
            configuration: configuration, transport: TestTransport.make(connectTimeout: timeout),
            clock: { clock.milliseconds })
        return HMSHarness(tls: tls, instance: instance, provider: provider)
    }

    func stop() async {
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    var tokenRequests: Int { instance.sandbox.tokenRequestCount }

    static func delivery(
        token: String, app: String? = HMSSandboxInstance.appId, kind: JobKind = .message,
        priority: JobPriority = .high, ttl: Int64 = 60, body: String? = nil, collapseKey: String? = nil,
        data: [String: String] = ["chatId": "7"], index: Int = 0
    ) -> Delivery {
        let now = currentTimeMilliseconds()
        let target = Target.hms("b\(index)", app: app, token: token)
        let job = Job(
            id: "j\(index)", createdAt: now, ttl: ttl, kind: kind, priority: priority, userId: "u", collapseKey: collapseKey,
            notification: Notification(title: "Bob", body: "Hi"), data: data, body: body, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: now)
    }

    /// The JSON body of the n-th send that reached the sandbox.
    func sentBody(_ index: Int = 0) throws -> JSONValue {
        let sends = instance.sendRequests
        try #require(sends.count > index)
        return try JSONParser.parse(sends[index].body)
    }
}

@Suite("HMS plugin over HTTP/2 + TLS against the Huawei OAuth and Push Kit sandbox")
struct HMSSandboxTests {
    @Test("a message is delivered with POST /v1/<app>/messages:send, the app's bearer token and a one-token data message")
    func delivered() async throws {
        let harness = try await HMSHarness.start()
        let delivery = HMSHarness.delivery(token: "tok-1")
        let result = await harness.provider.deliver(delivery)
        guard case .delivered(let requestId?, 200?, _) = result else {
            Issue.record("got \(result)")
            return
        }
        let request = try #require(harness.instance.sendRequests.first)
        #expect(request.method == "POST")
        #expect(request.path == "/v1/\(HMSSandboxInstance.appId)/messages:send")
        #expect(request.header("authorization")?.hasPrefix("Bearer CgB6e3x9sandbox") == true)
        #expect(request.header("content-type")?.hasPrefix("application/json") == true)
        #expect(!requestId.isEmpty, "the providerMessageId is Huawei's requestId")
        let body = try harness.sentBody()
        #expect(body["validate_only"] == .bool(false))
        let message = try #require(body["message"])
        #expect(message["token"] == .array([.string("tok-1")]))
        #expect(message["data"] == .string(String(decoding: delivery.job.summaryJSON(), as: UTF8.self)))
        #expect(message["notification"] == nil, "the data and android.notification carry the text")
        #expect(
            message["android"]?["notification"]?["click_action"]?["type"] == .integer(3), "a message with text is a notification message")
        #expect(message["android"]?["urgency"] == .string("HIGH"))
        #expect(message["android"]?["category"] == .string("IM"), "the app's self-classification (HMS-Q19)")
        #expect(message["android"]?["ttl"] == .string("60s"))
        #expect(message["android"]?["bi_tag"] == .string("j0/b0"))
        await harness.stop()
    }

    @Test("one access token serves every send of the app, fetched once even when the sends start together")
    func oneTokenForManySends() async throws {
        let harness = try await HMSHarness.start(timeout: .seconds(60))
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for index in 0..<200 {
                group.addTask { await harness.provider.deliver(HMSHarness.delivery(token: "tok-\(index)", index: index)) }
            }
            return await group.reduce(into: [DeliveryResult]()) { $0.append($1) }
        }
        let undelivered = results.filter { if case .delivered = $0 { false } else { true } }
        #expect(undelivered.isEmpty, "not delivered: \(undelivered)")
        #expect(harness.tokenRequests == 1)
        let form = HMSSandbox.formFields(try #require(harness.instance.server.requests.first { $0.path == HMSSandbox.tokenPath }).body)
        #expect(
            form == [
                "grant_type": "client_credentials", "client_id": HMSSandboxInstance.appId, "client_secret": HMSSandboxInstance.clientSecret,
            ])
        await harness.stop()
    }

    @Test("the token is refreshed when the clock nears its expiry, not before")
    func refreshNearExpiry() async throws {
        let clock = FakeClock()
        let harness = try await HMSHarness.start(clock: clock)
        _ = await harness.provider.deliver(HMSHarness.delivery(token: "tok"))
        clock.advance(minutes: 54)
        _ = await harness.provider.deliver(HMSHarness.delivery(token: "tok"))
        #expect(harness.tokenRequests == 1)
        clock.advance(minutes: 1)
        guard case .delivered = await harness.provider.deliver(HMSHarness.delivery(token: "tok")) else {
            Issue.record("not delivered after the refresh")
            return
        }
        #expect(harness.tokenRequests == 2)
        await harness.stop()
    }

    @Test("after the access tokens are revoked the next delivery renews the token once and succeeds")
    func renewalAfterRevocation() async throws {
        let clock = FakeClock()
        let harness = try await HMSHarness.start(clock: clock)
        _ = await harness.provider.deliver(HMSHarness.delivery(token: "tok"))
        clock.advance(minutes: 10)
        harness.instance.sandbox.revokeAccessTokens()
        guard case .delivered = await harness.provider.deliver(HMSHarness.delivery(token: "tok")) else {
            Issue.record("a revoked token should be renewed and the push sent again")
            return
        }
        #expect(harness.tokenRequests == 2)
        #expect(harness.instance.sendRequests.count == 3, "the first push, the refused one, its resend")
        await harness.stop()
    }

    @Test("a burst after revocation shares one token request")
    func burstAfterRevocationIsSingleFlight() async throws {
        let clock = FakeClock()
        let harness = try await HMSHarness.start(clock: clock)
        _ = await harness.provider.deliver(HMSHarness.delivery(token: "tok"))
        clock.advance(minutes: 10)
        harness.instance.sandbox.revokeAccessTokens()
        let results = await withTaskGroup(of: DeliveryResult.self) { group in
            for index in 0..<50 {
                group.addTask { await harness.provider.deliver(HMSHarness.delivery(token: "tok-\(index)", index: index)) }
            }
            return await group.reduce(into: [DeliveryResult]()) { $0.append($1) }
        }
        #expect(results.filter { if case .delivered = $0 { true } else { false } }.count == 50)
        #expect(harness.tokenRequests == 2)
        await harness.stop()
    }

    @Test("a fresh token refused again is a credentials failure, without another token request")
    func freshTokenRefused() async throws {
        let harness = try await HMSHarness.start()
        _ = await harness.provider.deliver(HMSHarness.delivery(token: "tok"))
        harness.instance.sandbox.revokeAccessTokens()
        let result = await harness.provider.deliver(HMSHarness.delivery(token: "tok"))
        #expect(result == .failed(reason: "80200003: Oauth Token expired.", httpStatus: 401, action: .checkCredentials))
        #expect(harness.tokenRequests == 1)
        await harness.stop()
    }

    @Test("a wrong client secret is a credentials failure and the token endpoint is not asked once per message")
    func wrongSecret() async throws {
        let harness = try await HMSHarness.start(secret: "not-the-secret")
        for index in 0..<50 {
            let result = await harness.provider.deliver(HMSHarness.delivery(token: "tok", index: index))
            guard case .failed(let reason, nil, .checkCredentials, .scope) = result else {
                Issue.record("got \(result)")
                return
            }
            #expect(reason.contains("sub_error 12304"), "\(reason)")
            #expect(!reason.contains("not-the-secret"))
        }
        #expect(harness.tokenRequests <= 2, "backoff: \(harness.tokenRequests) token requests for 50 sends")
        #expect(harness.instance.sendRequests.isEmpty)
        await harness.stop()
    }

    @Test("one app's refused secret does not stop another app")
    func appsAreSeparateScopes() async throws {
        let other = HMSConfiguration.App(appId: "104000002", clientSecret: "unknown-to-huawei", clientSecretFile: "/dev/null")
        let harness = try await HMSHarness.start(extraApps: [other])
        guard
            case .failed(_, nil, .checkCredentials, .scope) = await harness.provider.deliver(
                HMSHarness.delivery(token: "tok", app: "104000002"))
        else {
            Issue.record("the unknown client should be refused")
            return
        }
        guard case .delivered = await harness.provider.deliver(HMSHarness.delivery(token: "tok")) else {
            Issue.record("app 1 should deliver")
            return
        }
        let scope = { (app: String) in harness.provider.scope(of: .hms("b", app: app, token: "t")).description }
        #expect(scope("104000002") == "hms/104000002")
        #expect(scope(HMSSandboxInstance.appId) == "hms/\(HMSSandboxInstance.appId)")
        #expect(
            harness.provider.scope(of: .hms("b", token: "t")).description == "hms/\(HMSSandboxInstance.appId)", "no app: the default app")
        await harness.stop()
    }

    @Test(
        "every scripted answer comes back with the right status and action",
        arguments: [
            ("invalid-1", "rejected", Outcome.Action.removeBinding),
            ("partial-1", "rejected", .removeBinding),
            ("reasoned-1", "rejected", .removeBinding),
            ("nopermission-1", "failed", .checkCredentials),
            ("busy-1", "retryable", .none),
            ("internal-1", "retryable", .none),
        ])
    func scriptedAnswers(_ token: String, _ kind: String, _ action: Outcome.Action) async throws {
        let harness = try await HMSHarness.start()
        let delivery = HMSHarness.delivery(token: token)
        let result = await harness.provider.deliver(delivery)
        switch (kind, result) {
        case ("rejected", .rejected), ("retryable", .retryable), ("failed", .failed): break
        default: Issue.record("\(token): expected \(kind), got \(result)")
        }
        #expect(Outcome(job: delivery.job, target: delivery.target, result: result, attempts: 1, at: 0).action == action)
        if token.hasPrefix("busy"), case .retryable(_, let status, let retryAfter) = result {
            #expect(status == 503 && retryAfter == .seconds(1))
        }
        await harness.stop()
    }

    @Test(
        "calls and cancels are HIGH data messages with category VOIP; other kinds follow the job's priority, notification messages with the app's category"
    )
    func urgencyAndCategory() async throws {
        let harness = try await HMSHarness.start()
        let cases: [(JobKind, JobPriority, String, String?)] = [
            (.call, .high, "HIGH", "VOIP"), (.cancel, .normal, "HIGH", "VOIP"),
            (.message, .high, "HIGH", "IM"), (.message, .normal, "NORMAL", "IM"), (.wake, .normal, "NORMAL", nil),
        ]
        for (index, (kind, priority, urgency, category)) in cases.enumerated() {
            let result = await harness.provider.deliver(HMSHarness.delivery(token: "tok", kind: kind, priority: priority, index: index))
            guard case .delivered = result else {
                Issue.record("\(kind): \(result)")
                continue
            }
            let android = try #require(try harness.sentBody(index)["message"]?["android"])
            #expect(android["urgency"] == .string(urgency), "\(kind)")
            #expect(android["category"] == category.map(JSONValue.string), "\(kind)")
        }
        await harness.stop()
    }

    @Test("a message over 4096 bytes without its token is failed and not sent")
    func oversizedMessage() async throws {
        let harness = try await HMSHarness.start()
        let big = HMSHarness.delivery(token: "tok", body: String(repeating: "x", count: 4096))
        guard case .failed(let reason, nil, .none, _) = await harness.provider.deliver(big) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(reason.contains("4096") && reason.hasSuffix("not sent"))
        #expect(harness.instance.sendRequests.isEmpty)
        let longToken = String(repeating: "t", count: 4000)
        let fits = HMSHarness.delivery(token: longToken, body: String(repeating: "x", count: 3800))
        guard case .delivered = await harness.provider.deliver(fits) else {
            Issue.record("the token does not count toward 4096 bytes")
            return
        }
        await harness.stop()
    }

    @Test("the sandbox refuses what Huawei refuses: tokens 1 to 1000, ttl, urgency, category, collapse_key, 4096 bytes")
    func sandboxRefusesWhatHuaweiRefuses() async throws {
        let harness = try await HMSHarness.start()
        let accessToken = try await #require(harness.provider.accessTokens(for: HMSSandboxInstance.appId)).token()
        let transport = TestTransport.make()
        func code(_ message: String) async throws -> String? {
            let response = try await transport.send(
                HTTPRequest(
                    url: "\(harness.instance.server.baseURL)/v1/\(HMSSandboxInstance.appId)/messages:send",
                    headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")],
                    body: Array(#"{"validate_only":false,"message":\#(message)}"#.utf8), timeout: .seconds(10),
                    tls: TLSOptions(caFile: harness.tls.caFile)))
            return HMSAnswer(response).code
        }
        let thousandAndOne = (0...1000).map { #""t\#($0)""# }.joined(separator: ",")
        #expect(try await code(#"{"data":"x","token":["t"]}"#) == "80000000")
        #expect(try await code(#"{"data":"x","token":[]}"#) == "80300010")
        #expect(try await code(#"{"data":"x","token":[\#(thousandAndOne)]}"#) == "80300010")
        #expect(try await code(#"{"data":"x","token":["t"],"topic":"news"}"#) == "80100003")
        #expect(try await code(#"{"data":{"k":"v"},"token":["t"]}"#) == "80100003")
        #expect(try await code(#"{"data":"x","android":{"ttl":"1296001s"},"token":["t"]}"#) == "80100001")
        #expect(try await code(#"{"data":"x","android":{"ttl":"1296000s"},"token":["t"]}"#) == "80000000")
        #expect(try await code(#"{"data":"x","android":{"urgency":"URGENT"},"token":["t"]}"#) == "80100001")
        #expect(try await code(#"{"data":"x","android":{"urgency":"NORMAL","category":"VOIP"},"token":["t"]}"#) == "80100001")
        #expect(try await code(#"{"data":"x","android":{"urgency":"HIGH","category":"IM"},"token":["t"]}"#) == "80100001")
        #expect(try await code(#"{"data":"x","android":{"urgency":"HIGH","category":"URGENT"},"token":["t"]}"#) == "80100001")
        #expect(try await code(#"{"data":"x","android":{"urgency":"HIGH","category":"VOIP"},"token":["t"]}"#) == "80000000")
        #expect(try await code(#"{"data":"x","android":{"collapse_key":101},"token":["t"]}"#) == "80100013")
        #expect(try await code(#"{"data":"\#(String(repeating: "x", count: 4096))","token":["t"]}"#) == "80300008")
        transport.shutdown()
        await harness.stop()
    }

    @Test("reasons never carry the device token or the client secret")
    func reasonsRedactTheToken() async throws {
        let token = "invalid-0123456789abcdef0123456789"
        let answer = HMSAnswer(
            HTTPResponse(
                status: 400, headers: [],
                body: Array(#"{"code":"80300007","msg":"token \#(token) is invalid","requestId":"1"}"#.utf8)))
        guard case .rejected(let reason, 400?, _, _) = HMSResponse.classify(answer, token: token, targetNamesApp: true) else {
            Issue.record("expected rejected")
            return
        }
        #expect(!reason.contains(token))
        #expect(reason.contains(Redaction.token(token)))
        let partial = HMSAnswer(
            HTTPResponse(
                status: 200, headers: [],
                body: Array(#"{"code":"80100000","msg":"{\"illegal_tokens\":[\"\#(token)\"]}","requestId":"1"}"#.utf8)))
        guard case .rejected(let partialReason, _, _, _) = HMSResponse.classify(partial, token: token, targetNamesApp: true) else {
            Issue.record("expected rejected")
            return
        }
        #expect(!partialReason.contains(token))
        let configured = HMSConfiguration.App(appId: "1", clientSecret: "s3cr3t", clientSecretFile: "/run/secrets/hms")
        #expect(!configured.description.contains("s3cr3t") && !String(reflecting: configured).contains("s3cr3t"))
    }
}
