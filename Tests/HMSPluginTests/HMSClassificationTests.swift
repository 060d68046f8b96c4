import Foundation
import HMSSandbox
import PushCore
import PushHTTP
import PushPluginAPI
import PushSandbox
import Testing
import TestSupport
@testable import HMSPlugin

/// Issue 57's Huawei rules: a foreign token's 80300002 holds nothing, and notification messages carry their app's
/// self-classification category, against the HMS sandbox.
@Suite("HMS classification: 80300002 is the request's fault, notification messages carry the app's category")
struct HMSClassificationTests {
    @Test(
        "80300002 (no permission for this token) is the request's fault: failed and check_credentials, no circuit; the app's next push goes"
    )
    func noPermissionIsTheRequests() async throws {
        let harness = try await HMSHarness.start()
        let refused = await harness.provider.deliver(HMSHarness.delivery(token: "nopermission-1"))
        guard case .failed(let reason, 400?, .checkCredentials, .request) = refused else {
            Issue.record("got \(refused)")
            return
        }
        #expect(reason.hasPrefix("80300002"))
        guard case .delivered = await harness.provider.deliver(HMSHarness.delivery(token: "tok-2", index: 1)) else {
            Issue.record("the app's next push was not delivered")
            return
        }
        await harness.stop()
    }

    @Test(
        "a notification message carries its app's category, IM by default, which the sandbox accepts; data messages carry none but VOIP",
        arguments: [HMSConfiguration.defaultCategory, "SYSTEM_REMINDER", "MARKETING"])
    func notificationCategory(_ category: String) async throws {
        let harness = try await HMSHarness.start(category: category)
        let cases: [(JobKind, String?)] = [(.message, category), (.custom, category), (.call, "VOIP"), (.wake, nil)]
        for (index, (kind, expected)) in cases.enumerated() {
            let result = await harness.provider.deliver(HMSHarness.delivery(token: "tok", kind: kind, index: index))
            guard case .delivered = result else {
                Issue.record("\(kind): \(result)")
                continue
            }
            let android = try #require(try harness.sentBody(index)["message"]?["android"])
            #expect(android["category"] == expected.map(JSONValue.string), "\(kind)")
        }
        await harness.stop()
    }

    @Test(
        "the sandbox accepts every category of Huawei's classification standard on a notification message and refuses others with 80100001")
    func sandboxCategories() async throws {
        let harness = try await HMSHarness.start()
        let accessToken = try await #require(harness.provider.accessTokens(for: HMSSandboxInstance.appId)).token()
        let transport = TestTransport.make()
        func code(category: String) async throws -> String? {
            let message =
                #"{"data":"x","android":{"category":"\#(category)","notification":{"title":"T","body":"B","click_action":{"type":3}}},"token":["t"]}"#
            let response = try await transport.send(
                HTTPRequest(
                    url: "\(harness.instance.server.baseURL)/v1/\(HMSSandboxInstance.appId)/messages:send",
                    headers: [("authorization", "Bearer \(accessToken)"), ("content-type", "application/json")],
                    body: Array(#"{"validate_only":false,"message":\#(message)}"#.utf8), timeout: .seconds(10),
                    tls: TLSOptions(caFile: harness.tls.caFile)))
            return HMSAnswer(response).code
        }
        for category in HMSConfiguration.notificationCategories.sorted() {
            #expect(try await code(category: category) == "80000000", "\(category)")
        }
        #expect(try await code(category: "CHAT") == "80100001")
        #expect(try await code(category: "im") == "80100001")
        transport.shutdown()
        await harness.stop()
    }

    @Test("an app's category is PUSH_HMS_CATEGORY or its apps-file category, IM by default; one Huawei does not know is one problem line")
    func categorySettings() throws {
        let files = try HMSConfigurationTests.SecretFiles()
        defer { files.remove() }
        let environment = ["PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile]
        let (defaults, none) = HMSConfigurationTests.configure(
            environment,
            apps: [
                HMSConfigurationTests.entry([("appId", "104000002"), ("clientSecretFile", files.secretFile), ("category", "WORK")]),
                HMSConfigurationTests.entry([("appId", "104000003"), ("clientSecretFile", files.secretFile)]),
            ])
        #expect(none.isEmpty)
        #expect(defaults?.apps.map(\.category) == ["IM", "WORK", "IM"])
        var chosen = environment
        chosen["PUSH_HMS_CATEGORY"] = "VOIP"
        #expect(HMSConfigurationTests.configure(chosen).0?.apps.first?.category == "VOIP")
        chosen["PUSH_HMS_CATEGORY"] = "PLAY_VOICE"
        let (refused, problems) = HMSConfigurationTests.configure(chosen)
        #expect(refused == nil)
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix(#"PUSH_HMS_CATEGORY: the notification category "PLAY_VOICE" is not one of Huawei's"#) == true)
        let (_, notText) = HMSConfigurationTests.configure(
            [:],
            apps: [.object([("appId", .string("104000002")), ("clientSecretFile", .string(files.secretFile)), ("category", .integer(1))])])
        #expect(notText == ["PUSH_APPS_FILE hms[0]: category must be a string, one of Huawei's message categories"])
        let (_, withoutApp) = HMSConfigurationTests.configure(["PUSH_HMS_CATEGORY": "IM"])
        #expect(withoutApp == ["PUSH_HMS_CATEGORY is set but PUSH_HMS_APP_ID is not"])
    }
}
