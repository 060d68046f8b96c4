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

/// Issue 57's FCM rules: calls to iOS and Android, and QUOTA_EXCEEDED holding the project, against the FCM sandbox.
@Suite("FCM calls and quota: visible calls on iOS, high priority on Android, the project held on QUOTA_EXCEEDED")
struct FCMCallAndQuotaTests {
    static func delivery(
        kind: JobKind, priority: JobPriority = .normal, platform: String, token: String = "tok-1",
        notification: PushCore.Notification? = PushCore.Notification(title: "Alice", body: "Incoming call", sound: "ring")
    ) -> Delivery {
        let now = currentTimeMilliseconds()
        let target = Target.fcm("b-\(platform)", app: FCMSandboxInstance.projectId, token: token, platform: platform)
        let job = Job(
            id: "call-1", createdAt: now, ttl: 45, kind: kind, priority: priority, userId: "u", notification: notification,
            data: ["callId": "c-1"], targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: now)
    }

    func sentMessage(_ harness: FCMHarness) throws -> JSONValue {
        let send = try #require(harness.instance.server.requests.last { $0.path.hasSuffix("messages:send") })
        return try #require(try JSONParser.parse(send.body)["message"])
    }

    func sends(_ harness: FCMHarness) -> Int {
        harness.instance.server.requests.filter { $0.path.hasSuffix("messages:send") }.count
    }

    @Test(
        "a call or cancel to an iOS token is a visible alert at apns-priority 10 with content-available, which FCM accepts",
        arguments: [JobKind.call, .cancel])
    func callToIOSIsAnAlert(_ kind: JobKind) async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(Self.delivery(kind: kind, priority: .normal, platform: "ios"))
        guard case .delivered = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let message = try sentMessage(harness)
        #expect(message["notification"] == nil, "Android's push stays data-only")
        let apns = try #require(message["apns"])
        #expect(apns["headers"]?["apns-push-type"] == .string("alert"))
        #expect(apns["headers"]?["apns-priority"] == .string("10"), "even for a normal-priority job")
        let aps = try #require(apns["payload"]?["aps"])
        #expect(aps["content-available"] == .integer(1), "the app's code gets the data too")
        #expect(aps["alert"] == .object([("title", .string("Alice")), ("body", .string("Incoming call"))]))
        #expect(aps["sound"] == .string("ring"))
        await harness.stop()
    }

    @Test("a call or cancel to an iOS token with nothing to show ends failed unsent: calls to iOS need APNs VoIP; Android still rings")
    func silentCallToIOSIsNotSent() async throws {
        let harness = try await FCMHarness.start()
        for kind in [JobKind.call, .cancel] {
            let result = await harness.provider.deliver(Self.delivery(kind: kind, platform: "ios", notification: nil))
            guard case .failed(let reason, nil, .none, _) = result else {
                Issue.record("\(kind): \(result)")
                continue
            }
            #expect(reason.hasPrefix("calls to iOS need APNs VoIP"), "\(reason)")
        }
        #expect(sends(harness) == 0, "nothing reached FCM")
        guard case .delivered = await harness.provider.deliver(Self.delivery(kind: .call, platform: "android", notification: nil)) else {
            Issue.record("the Android call was not delivered")
            return
        }
        await harness.stop()
    }

    @Test("a call goes to Android at priority high even for a normal-priority job")
    func callToAndroidIsHighPriority() async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(Self.delivery(kind: .call, priority: .normal, platform: "android"))
        guard case .delivered = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let message = try sentMessage(harness)
        #expect(message["android"]?["priority"] == .string("high"))
        #expect(message["notification"] == nil)
        #expect(message["data"]?["callId"] == .string("c-1"))
        await harness.stop()
    }

    @Test("the sandbox answers a project over its quota as FCM does: 429 RESOURCE_EXHAUSTED with a QUOTA_EXCEEDED detail until refilled")
    func sandboxQuota() async throws {
        let harness = try await FCMHarness.start()
        let body = #"{"message":{"token":"tok-1","data":{"k":"v"}}}"#
        harness.instance.sandbox.exhaustQuota(of: FCMSandboxInstance.projectId)
        let over = try await FCMFidelityTests.send(harness, body)
        #expect(over.status == 429)
        #expect(over.header("retry-after") == nil)
        let error = try #require(try JSONParser.parse(over.body)["error"])
        #expect(error["status"] == .string("RESOURCE_EXHAUSTED"))
        #expect(
            error["details"]
                == .array([
                    .object([
                        ("@type", .string("type.googleapis.com/google.firebase.fcm.v1.FcmError")), ("errorCode", .string("QUOTA_EXCEEDED")),
                    ])
                ]))
        harness.instance.sandbox.exhaustQuota(of: FCMSandboxInstance.projectId, retryAfterSeconds: 5)
        #expect(try await FCMFidelityTests.send(harness, body).header("retry-after") == "5")
        harness.instance.sandbox.refillQuota(of: FCMSandboxInstance.projectId)
        #expect(try await FCMFidelityTests.send(harness, body).status == 200)
        await harness.stop()
    }

    static func job(_ id: String, createdAt: Int64, ttl: Int, target: String) -> KafkaMessage {
        let json =
            #"{"v":1,"id":"\#(id)","createdAt":\#(createdAt),"kind":"message","ttl":\#(ttl),"userId":"u","notification":{"title":"Bob","body":"Hi"},"data":{"k":"v"},"targets":[\#(target)]}"#
        return KafkaMessage(
            topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil, value: Array(json.utf8),
            timestamp: createdAt)
    }

    @Test(
        "QUOTA_EXCEEDED holds every send of the project for its Retry-After, at most a minute, then one probe goes",
        arguments: [(Optional(30), Int64(30_000)), (nil, 60_000), (3600, 60_000)])
    func quotaHoldsTheProject(_ retryAfter: Int?, _ hold: Int64) async throws {
        let clock = FakeClock()
        let harness = try await FCMHarness.start(clock: clock)
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 5))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 50, coolDownMilliseconds: 5_000)
        let processor = JobProcessor(
            registry: ProviderRegistry([harness.provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger(), clock: { clock.milliseconds })
        harness.instance.sandbox.exhaustQuota(of: FCMSandboxInstance.projectId, retryAfterSeconds: retryAfter)
        // TTLs shorter than the hold: each retry would land past its TTL, so the targets end at once.
        let refused = FCMConformanceTests.outcomes(
            await processor.process(
                Self.job(
                    "1", createdAt: clock.milliseconds, ttl: 20,
                    target: FCMConformanceTests.fcmTarget("android-1", token: "tok-1", platform: "android"))))
        #expect(refused["android-1"]?.status == .expired, "\(refused["android-1"]?.reason ?? "no outcome")")
        #expect(refused["android-1"]?.httpStatus == 429)
        let scope = DeliveryScope(provider: .fcm, key: FCMSandboxInstance.projectId)
        #expect(processor.circuitBreakers.openCircuits[scope] == .open(cause: .failureStorm, until: clock.milliseconds + hold))
        // Another token, another platform of the same project: held, not sent.
        let held = FCMConformanceTests.outcomes(
            await processor.process(
                Self.job(
                    "2", createdAt: clock.milliseconds, ttl: 20,
                    target: FCMConformanceTests.fcmTarget("ios-2", token: "tok-2", platform: "ios"))))
        #expect(held["ios-2"]?.status == .expired)
        #expect(held["ios-2"]?.reason?.contains("circuit open") == true, "\(held["ios-2"]?.reason ?? "no outcome")")
        #expect(sends(harness) == 1, "only the first push reached FCM during the hold")
        harness.instance.sandbox.refillQuota(of: FCMSandboxInstance.projectId)
        clock.advance(milliseconds: hold)
        let probe = FCMConformanceTests.outcomes(
            await processor.process(
                Self.job(
                    "3", createdAt: clock.milliseconds, ttl: 20,
                    target: FCMConformanceTests.fcmTarget("android-3", token: "tok-3", platform: "android"))))
        #expect(probe["android-3"]?.status == .delivered)
        #expect(processor.circuitBreakers.openCircuits.isEmpty)
        await harness.stop()
    }

    @Test("a 429 of another provider's scope holds nothing: only a scope with a rate-limit hold is held")
    func holdIsTheScopes() {
        let quota = FCMResponse.classify(FCMConformanceTests.answer(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", retryAfter: "7"))
        let project = DeliveryScope(provider: .fcm, key: "p", rateLimitHold: .seconds(60))
        #expect(project.hold(after: quota) == .seconds(7))
        #expect(DeliveryScope(provider: .fcm, key: "p").hold(after: quota) == nil)
        #expect(project.hold(after: .retryable(reason: "unavailable", httpStatus: 503, retryAfter: .seconds(7))) == nil)
        var breaker = CircuitBreaker()
        let opened = breaker.record(quota, in: project, at: 1_000)
        #expect(opened, "one answer opens the hold: no storm of failures needed")
        #expect(breaker.state == .open(cause: .failureStorm, until: 8_000))
        let permit = breaker.permit(at: 7_999)
        #expect(permit == .rejected(cause: .failureStorm, retryAt: 8_000))
    }

    @Test("a quota hold never stretches a circuit open on credentials, whose sends end failed rather than held")
    func holdKeepsACredentialsCircuitsEnd() {
        let quota = FCMResponse.classify(FCMConformanceTests.answer(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", retryAfter: "60"))
        let project = DeliveryScope(provider: .fcm, key: "p", rateLimitHold: .seconds(60))
        var breaker = CircuitBreaker()
        breaker.record(.failed(reason: "THIRD_PARTY_AUTH_ERROR", httpStatus: 401, action: .checkCredentials), at: 1_000)
        guard case .open(.credentials, let end) = breaker.state else {
            Issue.record("the credential failure did not open the circuit")
            return
        }
        let opened = breaker.record(quota, in: project, at: 1_100)
        #expect(!opened)
        #expect(breaker.state == .open(cause: .credentials, until: end))
    }

    @Test("a call's retry is never pushed past its TTL by our backoff; a quota hold past its TTL ends it expired at once")
    func retriesStayWithinTheTTL() {
        let policy = RetryPolicy(baseMilliseconds: 1000, maximumMilliseconds: 60_000, maximumAttempts: 5)
        let call = Deadline(createdAt: 0, ttlSeconds: 30)
        // 3 s left, a backoff ceiling of 8 s, the jitter at its top: the retry still comes before the TTL.
        guard case .retry(let at) = policy.decide(afterAttempt: 4, now: 27_000, deadline: call, retryAfter: nil, random: { $0 }) else {
            Issue.record("the backoff pushed the retry past the TTL")
            return
        }
        #expect(at < call.expiresAt)
        // A circuit holding 2 s more: the spread keeps the retry before the TTL as well.
        guard
            case .retry(let heldAt) = policy.decideHeldBack(
                now: 27_500, deadline: call, circuitRetryAfter: .seconds(2), random: { $0 })
        else {
            Issue.record("the spread pushed the held retry past the TTL")
            return
        }
        #expect(heldAt >= 29_500 && heldAt < call.expiresAt)
        // FCM's minute (Retry-After or the quota floor) is not ours to shorten: past the TTL the call ends expired now.
        #expect(policy.decide(afterAttempt: 1, now: 1_000, deadline: call, retryAfter: .seconds(60), random: { $0 }) == .expired)
        #expect(policy.decideHeldBack(now: 1_000, deadline: call, circuitRetryAfter: .seconds(60), random: { $0 }) == .expired)
    }
}
