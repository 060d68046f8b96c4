import Foundation
import PushCore
import PushCrypto
import PushHTTP
@testable import PushSandbox
import Testing
import TestSupport
import WebPushSandbox
@testable import WebPushPlugin

@Suite("Web Push: headers, VAPID and endpoint policy")
struct WebPushRulesTests {
    static func delivery(
        kind: JobKind = .message, priority: JobPriority = .high, ttl: Int64 = 3600, collapseKey: String? = nil,
        endpoint: String = "https://push.example.net/send/abc"
    ) -> Delivery {
        let target = Target.webPush("w1", endpoint: endpoint, keys: WebPushKeys(p256dh: "x", auth: "y"))
        let job = Job(
            id: "j", createdAt: 1_795_310_000_000, ttl: ttl, kind: kind, priority: priority, userId: "u",
            collapseKey: collapseKey, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: 1_795_310_000_000)
    }

    func headers(_ delivery: Delivery) -> [String: String] {
        Dictionary(WebPushRequest.headers(delivery).map { ($0.name, $0.value) }) { first, _ in first }
    }

    @Test("TTL is the remaining validity, never a default 0; a now-or-never job sends TTL 0")
    func ttl() {
        #expect(headers(Self.delivery(ttl: 3600))["ttl"] == "3600")
        #expect(headers(Self.delivery(ttl: 0))["ttl"] == "0")
    }

    @Test(
        "Urgency: calls and cancels high, messages by priority, wake-ups low",
        arguments: [
            (JobKind.call, JobPriority.normal, "high"), (.cancel, .normal, "high"), (.message, .high, "high"),
            (.message, .normal, "normal"), (.wake, .high, "low"),
        ])
    func urgency(_ kind: JobKind, _ priority: JobPriority, _ expected: String) {
        #expect(headers(Self.delivery(kind: kind, priority: priority))["urgency"] == expected)
    }

    @Test("Topic: a short base64url collapseKey as is, anything else hashed to 32 base64url characters")
    func topic() {
        #expect(headers(Self.delivery(collapseKey: "chat-42"))["topic"] == "chat-42")
        let hashed = WebPushRequest.topic("chat room #42 with a long, long name")
        #expect(hashed.count == 32)
        #expect(Base64URL.decode(hashed) != nil)
        #expect(hashed == WebPushRequest.topic("chat room #42 with a long, long name"))
        #expect(headers(Self.delivery())["topic"] == nil)
        #expect(headers(Self.delivery())["content-encoding"] == "aes128gcm")
    }

    @Test("VAPID: aud is the endpoint's origin, exp 12 h ahead (at most 24 h less 10 minutes), one token per origin reused")
    func vapid() throws {
        let key = try PrivateKey.generateP256()
        let clock = FakeClock(start: 1_795_310_000_000)
        let tokens = try VAPIDTokens(
            key: key, subject: "mailto:ops@example.com", lifetime: .seconds(12 * 3600), clock: { clock.milliseconds })
        let header = try tokens.authorization(for: "https://push.example.net")
        #expect(header.hasPrefix("vapid t="))
        #expect(header.hasSuffix(", k=\(Base64URL.encode(try key.rawPublicKey()))"))
        let jwt = try #require(JSONWebToken.parse(String(header.dropFirst(8).prefix { $0 != "," })))
        #expect(jwt.header["alg"] == .string("ES256"))
        #expect(jwt.claims["aud"] == .string("https://push.example.net"))
        #expect(jwt.claims["exp"] == .integer(1_795_310_000 + 12 * 3600))
        #expect(jwt.claims["sub"] == .string("mailto:ops@example.com"))
        #expect(jwt.verifies(with: try PublicKey(p256: key.rawPublicKey())))
        #expect(try tokens.authorization(for: "https://push.example.net") == header)
        #expect(try tokens.authorization(for: "https://other.example.org") != header)
        clock.advance(minutes: 11 * 60 + 1)
        #expect(try tokens.authorization(for: "https://push.example.net") != header, "renewed an hour before it expires")
        let capped = try VAPIDTokens(key: key, subject: "mailto:x@y", lifetime: .seconds(48 * 3600), clock: { clock.milliseconds })
        let cappedJWT = try #require(
            JSONWebToken.parse(String(try capped.authorization(for: "https://a").dropFirst(8).prefix { $0 != "," })))
        #expect(cappedJWT.claims["exp"] == .integer(clock.milliseconds / 1000 + 24 * 3600 - 10 * 60))
    }
}

@Suite("Web Push plugin over HTTP/2 + TLS against a push-service sandbox")
struct WebPushSandboxTests {
    static let loopback = [IPNetwork("127.0.0.0/8")!, IPNetwork("::1/128")!]

    struct Harness {
        /// Far above the default 10 s: these tests are about what is sent, and the suites run side by side on CI's two
        /// cores, where this suite's endpoint check (its DNS lookup included) once took the whole 10 s.
        static let attemptTimeout = Duration.seconds(60)

        let tls: SandboxTLS
        let instance: WebPushSandboxInstance
        let provider: WebPushProvider

        static func start() async throws -> Harness {
            let tls = try SandboxTLS.make()
            let instance = try await WebPushSandboxInstance.start(tls: tls)
            let provider = try WebPushProvider(
                configuration: WebPushConfiguration(
                    vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
                    allowedNetworks: loopback, allowedPorts: [instance.server.port], timeout: Self.attemptTimeout,
                    dnsTimeout: Self.attemptTimeout / 2), transport: NIOHTTP2Transport(fallback: NoFallback()))
            return Harness(tls: tls, instance: instance, provider: provider)
        }

        func delivery(_ subscription: WebPushSandbox.Subscription, data: [String: String] = ["chatId": "7"]) -> Delivery {
            let target = Target.webPush(
                "w1", endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
            let job = Job(
                id: "job-w", createdAt: currentTimeMilliseconds(), ttl: 600, kind: .message, priority: .high, userId: "u",
                collapseKey: "chat-7", notification: Notification(title: "Erin", body: "Hello"), data: data, targets: [target])
            return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
        }

        func stop() async {
            await provider.shutdown()
            await instance.server.stop()
            tls.remove()
        }
    }

    @Test("encrypt → the push service decrypts exactly the job's JSON; 201 with Location is delivered")
    func roundTrip() async throws {
        let harness = try await Harness.start()
        let subscription = try harness.instance.sandbox.subscribe()
        let delivery = harness.delivery(subscription)
        let result = await harness.provider.deliver(delivery)
        guard case .delivered(let location?, 201, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        #expect(location.contains("/message/"))
        let message = try #require(harness.instance.sandbox.messages.first)
        #expect(message.plaintext == delivery.job.summaryJSON())
        #expect(
            String(decoding: message.plaintext, as: UTF8.self)
                == #"{"jobId":"job-w","kind":"message","notification":{"title":"Erin","body":"Hello"},"data":{"chatId":"7"}}"#)
        #expect((599...600).contains(message.ttl))
        #expect(message.urgency == "high")
        #expect(message.topic == "chat-7")
        await harness.stop()
    }

    @Test(
        "410 and 404 reject the subscription; 429 is retried after Retry-After; 413 fails",
        arguments: [
            ("gone-1", "rejected"), ("missing-1", "rejected"), ("busy-1", "retryable"), ("big-1", "failed"),
        ])
    func answers(_ id: String, _ expected: String) async throws {
        let harness = try await Harness.start()
        let result = await harness.provider.deliver(harness.delivery(try harness.instance.sandbox.subscribe(id: id)))
        switch (expected, result) {
        case ("rejected", .rejected(_, let status?, _, _)): #expect(status == 410 || status == 404)
        case ("retryable", .retryable(_, 429?, let retryAfter)): #expect(retryAfter == .seconds(1))
        case ("failed", .failed(_, 413?, .none, _)): break
        default: Issue.record("\(id): expected \(expected), got \(result)")
        }
        await harness.stop()
    }

    @Test("a payload that cannot fit 4096 bytes once encrypted fails before any request")
    func tooLarge() async throws {
        let harness = try await Harness.start()
        let subscription = try harness.instance.sandbox.subscribe()
        let result = await harness.provider.deliver(harness.delivery(subscription, data: ["blob": String(repeating: "x", count: 4000)]))
        guard case .failed(let reason, nil, .none, _) = result else {
            Issue.record("expected failed, got \(result)")
            return
        }
        #expect(reason.contains("4096"))
        #expect(harness.instance.server.requests.isEmpty)
        await harness.stop()
    }

    @Test("by default a loopback endpoint is refused and never contacted")
    func loopbackRefusedByDefault() async throws {
        let harness = try await Harness.start()
        let strict = try WebPushProvider(
            configuration: WebPushConfiguration(
                vapidKey: PrivateKey.generateP256(), subject: "mailto:a@b",
                caFile: harness.tls.caFile,
                allowedPorts: [harness.instance.server.port]),
            transport: TestTransport.make())
        let result = await strict.deliver(harness.delivery(try harness.instance.sandbox.subscribe()))
        guard case .failed(let reason, nil, .none, _) = result else {
            Issue.record("expected a refusal, got \(result)")
            return
        }
        #expect(reason.hasPrefix("endpoint refused, not sent"))
        #expect(!reason.contains("127.0.0.1") && !reason.contains("::1"), "the refusal does not reveal what the name resolved to")
        #expect(harness.instance.server.requests.isEmpty)
        await strict.shutdown()
        await harness.stop()
    }

    @Test("a push service whose clock is 5 minutes behind ours accepts our longest VAPID token; it refuses an exp more than 24 h ahead")
    func vapidExpiryWithinTwentyFourHoursOfThePushService() async throws {
        let tls = try SandboxTLS.make()
        let skew: Int64 = 5 * 60 * 1000
        let instance = try await WebPushSandboxInstance.start(tls: tls, clock: { currentTimeMilliseconds() - skew })
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(
                vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
                allowedNetworks: Self.loopback, allowedPorts: [instance.server.port], timeout: Harness.attemptTimeout,
                dnsTimeout: Harness.attemptTimeout / 2, tokenLifetime: .seconds(48 * 3600)),
            transport: NIOHTTP2Transport(fallback: NoFallback()))
        let subscription = try instance.sandbox.subscribe()
        let target = Target.webPush(
            "w1", endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
        let job = Job(
            id: "exp", createdAt: currentTimeMilliseconds(), ttl: 600, kind: .message, priority: .high, userId: "u",
            notification: Notification(title: "Erin", body: "Hello"), targets: [target])
        let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
        guard case .delivered(_, 201?, _) = result else {
            Issue.record("a 48 h lifetime is cut to 24 h less 10 minutes, within a day of the push service's clock: \(result)")
            return
        }

        let key = try PrivateKey.generateP256()
        let now = (currentTimeMilliseconds() - skew) / 1000  // the push service's
        for (exp, status) in [(now + 24 * 3600 - 60, 400), (now + 24 * 3600 + 60, 403)] {
            let jwt = try JSONWebToken.sign(
                algorithm: .es256, headerFields: [("typ", "JWT")],
                claims: { claims in
                    claims.member("aud", instance.server.baseURL)
                    claims.member("exp", exp)
                    claims.member("sub", "mailto:ops@example.com")
                }, key: key)
            let answer = instance.sandbox.respond(
                to: SandboxRequest(
                    method: "POST", path: URL(string: subscription.endpoint)!.path,
                    headers: [("authorization", "vapid t=\(jwt), k=\(Base64URL.encode(try key.rawPublicKey()))")], body: [],
                    receivedAt: .now, connection: nil))
            // 400: the token passed and the request without TTL did not; 403: the token did not.
            #expect(answer.status == status, "exp \(exp - now) s ahead")
        }
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("malformed subscription keys reject the binding without a request")
    func badKeys() async throws {
        let harness = try await Harness.start()
        let subscription = try harness.instance.sandbox.subscribe()
        let broken = WebPushSandbox.Subscription(endpoint: subscription.endpoint, p256dh: "AAAA", auth: subscription.auth)
        guard case .rejected = await harness.provider.deliver(harness.delivery(broken)) else {
            Issue.record("expected rejected")
            return
        }
        #expect(harness.instance.server.requests.isEmpty)
        await harness.stop()
    }
}

/// The worker's HTTP/2 client carries every Web Push request to an HTTP/2 push service, pinned ones included: a request
/// that reached its fallback (libcurl) fails.
struct NoFallback: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        throw .connectionFailed("sent to the fallback client")
    }

    func closeConnections(except live: Set<ConnectionIdentity>) {}

    func shutdown() {}
}
