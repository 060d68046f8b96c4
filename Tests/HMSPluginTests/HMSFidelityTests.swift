import Foundation
import HMSSandbox
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
@testable import HMSPlugin

/// Issue 40's Huawei rules, against the HMS sandbox.
@Suite("HMS fidelity: 80300007 under a guessed app, notification messages")
struct HMSFidelityTests {
    @Test("80300007 removes the binding only when the target named its app; under the default app the binding is kept")
    func allTokensInvalidNeedsANamedApp() async throws {
        let harness = try await HMSHarness.start()
        let named = await harness.provider.deliver(HMSHarness.delivery(token: "invalid-1"))
        guard case .rejected(_, 400?, _, _) = named else {
            Issue.record("named app: \(named)")
            return
        }
        let guessed = await harness.provider.deliver(HMSHarness.delivery(token: "invalid-2", app: nil, index: 1))
        guard case .failed(let reason, 400?, .checkCredentials, .request) = guessed else {
            Issue.record("default app: \(guessed)")
            return
        }
        #expect(reason.contains("80300007") && reason.contains("another app"))
        await harness.stop()
    }

    @Test("a message with a title and a body is a notification message with click_action; calls, cancels and wake-ups stay data messages")
    func notificationMessages() async throws {
        let harness = try await HMSHarness.start()
        let cases: [(JobKind, Bool)] = [(.message, true), (.custom, true), (.call, false), (.cancel, false), (.wake, false)]
        for (index, (kind, shown)) in cases.enumerated() {
            let result = await harness.provider.deliver(HMSHarness.delivery(token: "tok", kind: kind, index: index))
            guard case .delivered = result else {
                Issue.record("\(kind): \(result)")
                continue
            }
            let message = try #require(try harness.sentBody(index)["message"])
            let notification = message["android"]?["notification"]
            #expect((notification != nil) == shown, "\(kind)")
            #expect(message["data"] != nil, "\(kind): the data travels with every push")
            if shown {
                #expect(notification?["title"] == .string("Bob") && notification?["body"] == .string("Hi"))
                #expect(notification?["click_action"]?["type"] == .integer(3), "open the app")
            }
        }
        await harness.stop()
    }

    @Test("a message without a title stays a data message: Huawei requires title and body in a notification message")
    func bodyAloneIsData() {
        let target = Target.hms("b", app: HMSSandboxInstance.appId, token: "tok")
        let job = Job(
            id: "j", createdAt: 0, ttl: 60, kind: .message, priority: .high, userId: "u",
            notification: PushCore.Notification(body: "Hi"), targets: [target])
        #expect(HMSMessage.shownNotification(job) == nil)
    }

    @Test("the sandbox refuses a notification message without click_action, title or body with 80100001")
    func sandboxChecksNotificationMessages() async throws {
        let harness = try await HMSHarness.start()
        let accessToken = try await #require(harness.provider.accessTokens(for: HMSSandboxInstance.appId)).token()
        let transport = TestTransport.make()
        func send(_ notification: String) async throws -> String {
            let body = #"{"validate_only":false,"message":{"data":"{}","android":{"notification":\#(notification)},"token":["tok"]}}"#
            let response = try await transport.send(
                HTTPRequest(
                    url: "\(harness.instance.server.baseURL)/v1/\(HMSSandboxInstance.appId)/messages:send",
                    headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")],
                    body: Array(body.utf8), timeout: .seconds(10), tls: TLSOptions(caFile: harness.tls.caFile)))
            return (try? JSONParser.parse(response.body)["code"]).flatMap { if case .string(let code) = $0 { code } else { nil } } ?? "?"
        }
        #expect(try await send(#"{"title":"T","body":"B"}"#) == "80100001")
        #expect(try await send(#"{"title":"T","click_action":{"type":3}}"#) == "80100001")
        #expect(try await send(#"{"title":"T","body":"B","click_action":{"type":2}}"#) == "80100001")
        #expect(try await send(#"{"title":"T","body":"B","click_action":{"type":3}}"#) == "80000000")
        transport.shutdown()
        await harness.stop()
    }
}
