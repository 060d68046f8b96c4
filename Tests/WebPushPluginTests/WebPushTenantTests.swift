import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import WebPushSandbox
@testable import WebPushPlugin

@Suite("Web Push tenants: a VAPID key per app, and payload templates")
struct WebPushTenantTests {
    static func delivery(_ subscription: WebPushSandbox.Subscription, app: String?, kind: JobKind = .message) -> Delivery {
        let target = Target(
            bindingId: "w1", provider: .webpush, app: app,
            details: WebPushTarget(
                endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth)))
        let job = Job(
            id: "job-t", createdAt: currentTimeMilliseconds(), ttl: 600, kind: kind, priority: .high, userId: "u",
            notification: Notification(title: "Erin", body: "Hello"), data: ["chatId": "7"], targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
    }

    @Test("each app's targets are signed with its own VAPID key; a subscription made with one app's key refuses another's (RFC 8292 §4.2)")
    func keyPerApp() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await WebPushSandboxInstance.start(tls: tls)
        let tenantKey = try PrivateKey.generateP256()
        var configuration = WebPushConfiguration(
            vapidKey: try PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
            allowedNetworks: WebPushSandboxTests.loopback, allowedPorts: [instance.server.port])
        configuration.apps = ["tenant-a": VAPIDIdentity(key: tenantKey, subject: "mailto:tenant-a@example.com")]
        let provider = try WebPushProvider(configuration: configuration, transport: TestTransport.make())
        let subscription = try instance.sandbox.subscribe(applicationServerKey: try tenantKey.rawPublicKey())
        guard case .delivered(_, 201?, _) = await provider.deliver(Self.delivery(subscription, app: "tenant-a")) else {
            Issue.record("the tenant's own key must be accepted")
            return
        }
        guard case .failed(_, 403?, .checkCredentials, .request) = await provider.deliver(Self.delivery(subscription, app: nil)) else {
            Issue.record("the default key must be refused for a subscription made with the tenant's key")
            return
        }
        guard case .failed(_, 403?, .checkCredentials, .request) = await provider.deliver(Self.delivery(subscription, app: "tenant-b"))
        else {
            Issue.record("an app without a key of its own uses the default key")
            return
        }
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    /// Renders `{"t": <TITLE>, "k": <KIND>}` for `webpush/default/message`, nothing for other kinds.
    struct MessageTemplate: PayloadTemplates {
        func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
            RenderedPayload, PayloadTemplateFailure
        >? {
            guard key.provider == .webpush, key.kind == .message else { return nil }
            return .success(
                RenderedPayload(
                    document: .object([("t", .string(keywords().values["TITLE"] ?? "")), ("k", .string(keywords().values["KIND"] ?? ""))]),
                    source: "webpush/default/message.mustache"))
        }
    }

    @Test("a Web Push template's output is the message the service worker receives; without one the job's summary JSON")
    func templateOutputIsTheMessage() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await WebPushSandboxInstance.start(tls: tls)
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(
                vapidKey: try PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
                allowedNetworks: WebPushSandboxTests.loopback, allowedPorts: [instance.server.port]), transport: TestTransport.make(),
            templates: MessageTemplate())
        let subscription = try instance.sandbox.subscribe()
        let message = await provider.deliver(Self.delivery(subscription, app: nil))
        let wake = Self.delivery(subscription, app: nil, kind: .wake)
        let woken = await provider.deliver(wake)
        for result in [message, woken] {
            guard case .delivered = result else {
                Issue.record("not delivered: \(result)")
                continue
            }
        }
        let messages = instance.sandbox.messages.map { String(decoding: $0.plaintext, as: UTF8.self) }
        #expect(messages == [#"{"t":"Erin","k":"message"}"#, String(decoding: wake.job.summaryJSON(), as: UTF8.self)])
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("the Web Push template shape: any JSON object, checked with a sample subscription")
    func templateShape() {
        let shape = WebPushTemplateShape()
        #expect(shape.problem(in: .object([("t", .string("x"))])) == nil)
        #expect(shape.problem(in: .array([])) == "must render a JSON object, not array")
        #expect(shape.sampleTarget(app: "a").provider == .webpush)
    }
}
