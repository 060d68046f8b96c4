import Foundation
import PushCore
import PushHTTP
import Testing
import TestSupport
@testable import APNsPlugin

@Suite("APNs bindings as the Mizu seed writes them: default environment and PushKit tokens")
struct APNsSeedBindingTests {
    static let token = String(repeating: "cd", count: 32)

    static func delivery(_ target: String, kind: String = "message") throws -> Delivery {
        try APNsSIPBindingTests.delivery(target: target, kind: kind, notification: #""notification":{"title":"Bob","body":"Hi"},"#)
    }

    static func app(environment: APNsEnvironment = .production, pushKit: Bool = false) -> APNsApp {
        APNsApp(
            bundleId: "com.example.app", authentication: .token(keyFile: "-", keyId: "K", teamId: "T"),
            defaultEnvironment: environment, xmpushTokensArePushKit: pushKit)
    }

    @Test("X-MPUSH d: and no prefix take the app's configured environment; s: and p: choose their own")
    func defaultEnvironment() throws {
        let sandboxByDefault = Self.app(environment: .sandbox)
        for (binding, expected) in [
            ("d:i:com.example.app:\(Self.token)", APNsEnvironment.sandbox),
            ("i:com.example.app:\(Self.token)", .sandbox),
            ("p:i:com.example.app:\(Self.token)", .production),
            ("s:i:com.example.app:\(Self.token)", .sandbox),
        ] {
            let target = try Self.delivery(#"{"bindingId":"b1","xmpush":"\#(binding)"}"#).target
            #expect(sandboxByDefault.environment(of: target) == expected, "\(binding)")
        }
        let undeclared = try Self.delivery(#"{"bindingId":"b1","xmpush":"d:i:com.example.app:\#(Self.token)"}"#).target
        #expect(Self.app().environment(of: undeclared) == .production, "production unless the app says otherwise")
        let native = try Self.delivery(#"{"bindingId":"b1","provider":"apns","app":"com.example.app","token":"\#(Self.token)"}"#).target
        #expect(sandboxByDefault.environment(of: native) == .sandbox, "a native target without environment too")
    }

    @Test("an app's X-MPUSH i: tokens declared PushKit: calls go as voip, a message is not sent and the binding is kept")
    func pushKitTokens() throws {
        let app = Self.app(pushKit: true)
        let xmpush = #"{"bindingId":"b1","xmpush":"i:com.example.app:\#(Self.token)"}"#
        #expect(try APNsRequest.build(Self.delivery(xmpush, kind: "call"), app: app).pushType == .voip)
        #expect(throws: APNsRequest.Refusal.destination(.notForPushKitToken(.alert, notation: .xmpush))) {
            try APNsRequest.build(Self.delivery(xmpush), app: app)
        }
        let native = #"{"bindingId":"b1","provider":"apns","app":"com.example.app","token":"\#(Self.token)"}"#
        #expect(try APNsRequest.build(Self.delivery(native), app: app).pushType == .alert, "native targets are plain APNs tokens")
        #expect(
            try APNsRequest.build(Self.delivery(xmpush), app: Self.app()).pushType == .alert,
            "without the declaration an i: token is a plain APNs token")
    }

    @Test("a push refused for a PushKit token ends failed with the reason, never a binding removal")
    func pushKitRefusalOutcome() async throws {
        let provider = try APNsProvider(
            configuration: APNsConfiguration(apps: [
                APNsApp(bundleId: "com.example.app", authentication: .certificate(.init()), xmpushTokensArePushKit: true)
            ]), transport: UnreachableTransport(), logger: testLogger())
        let result = await provider.deliver(try Self.delivery(#"{"bindingId":"b1","xmpush":"i:com.example.app:\#(Self.token)"}"#))
        guard case .failed(let reason, nil, .none, _) = result else {
            Issue.record("expected failed without action, got \(result)")
            return
        }
        #expect(reason.contains("PushKit"))
        #expect(reason.contains("not sent"))
    }
}

/// A transport no request may reach: the test fails if the plugin sends.
struct UnreachableTransport: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        Issue.record("a request was sent to \(request.url)")
        return HTTPResponse(status: 599, headers: [], body: [])
    }

    func closeConnections(except live: Set<ConnectionIdentity>) {}
    func shutdown() {}
}
