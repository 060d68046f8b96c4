import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
@testable import FCMPlugin

@Suite("FCM payload templates and cancels")
struct FCMTemplateAndCancelTests {
    /// Renders `{"message": {"token": <TOKEN>, "data": {"ntype": <TYPE>}}}` for every key, as a template would.
    struct MizuLikeTemplate: PayloadTemplates {
        func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
            RenderedPayload, PayloadTemplateFailure
        >? {
            let document = JSONValue.object([
                (
                    "message",
                    .object([
                        ("token", .string(keywords().values["TOKEN"] ?? "")),
                        ("data", .object([("ntype", .string(keywords().values["TYPE"] ?? ""))])),
                    ])
                )
            ])
            return .success(RenderedPayload(document: document, source: "fcm/default/default.mustache"))
        }
    }

    @Test("a template's body is what messages:send receives, for the project the target selects")
    func templateBodySent() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let account = try ServiceAccount(contentsOfFile: instance.credentialsFile)
        let provider = try FCMProvider(
            configuration: FCMConfiguration(
                accounts: [account], endpoint: instance.server.baseURL,
                caFile: tls.caFile),
            transport: TestTransport.make(), templates: MizuLikeTemplate())
        let result = await provider.deliver(FCMHarness.delivery(token: "tok-1", kind: .cancel))
        guard case .delivered = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let send = try #require(instance.server.requests.last)
        #expect(send.path == "/v1/projects/\(FCMSandboxInstance.projectId)/messages:send")
        #expect(String(decoding: send.body, as: UTF8.self) == #"{"message":{"token":"tok-1","data":{"ntype":"2"}}}"#)
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    /// Mizu's default fcmmessage.txt shape: a notification block at the top and in `android`.
    struct NotifyingTemplate: PayloadTemplates {
        func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
            RenderedPayload, PayloadTemplateFailure
        >? {
            let document = JSONValue.object([
                (
                    "message",
                    .object([
                        ("token", .string(keywords().values["TOKEN"] ?? "")),
                        ("notification", .object([("title", .string("Call"))])),
                        ("android", .object([("priority", .string("high")), ("notification", .object([("sound", .string("ring"))]))])),
                        ("data", .object([("ntype", .string(keywords().values["TYPE"] ?? ""))])),
                    ])
                )
            ])
            return .success(RenderedPayload(document: document, source: "fcm/default/default.mustache"))
        }
    }

    @Test(
        "fcm_removenotification: a template's notification blocks are removed for calls, cancels and wake-ups by default, kept for messages; never and always switch it",
        arguments: [
            (NotificationRemoval.dataOnlyKinds, JobKind.call, false), (.dataOnlyKinds, .cancel, false), (.dataOnlyKinds, .wake, false),
            (.dataOnlyKinds, .message, true), (.never, .call, true), (.always, .message, false),
        ])
    func notificationRemoval(_ removal: NotificationRemoval, _ kind: JobKind, _ kept: Bool) async throws {
        let tls = try SandboxTLS.make()
        let instance = try await FCMSandboxInstance.start(tls: tls)
        let account = try ServiceAccount(contentsOfFile: instance.credentialsFile)
        var configuration = FCMConfiguration(accounts: [account], endpoint: instance.server.baseURL, caFile: tls.caFile)
        configuration.removeNotification = removal
        let provider = try FCMProvider(configuration: configuration, transport: TestTransport.make(), templates: NotifyingTemplate())
        let result = await provider.deliver(FCMHarness.delivery(token: "tok-1", kind: kind))
        guard case .delivered = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        let sent = try JSONParser.parse(try #require(instance.server.requests.last).body)
        #expect((sent["message"]?["notification"] != nil) == kept)
        #expect((sent["message"]?["android"]?["notification"] != nil) == kept)
        #expect(sent["message"]?["android"]?["priority"] == .string("high"), "only the notification blocks go")
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }

    @Test("a cancel is data-only at Android priority high with the call id, even for a normal-priority job")
    func cancelIsDataOnlyHighPriority() throws {
        let target = Target.fcm("b1", token: "tok", platform: "android")
        let job = Job(
            id: "cancel-1", createdAt: 1_795_310_000_000, ttl: 30, kind: .cancel, priority: .normal, userId: "u",
            notification: PushCore.Notification(title: "Missed call", body: "Alice"), data: ["callId": "c-77"], targets: [target])
        let body = try JSONParser.parse(FCMMessage.body(Delivery(job: job, target: target, attempt: 1, now: 1_795_310_000_000)))
        #expect(body["message"]?["notification"] == nil)
        #expect(body["message"]?["android"]?["priority"] == .string("high"))
        #expect(body["message"]?["data"]?["callId"] == .string("c-77"))
    }
}
