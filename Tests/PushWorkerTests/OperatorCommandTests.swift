import Foundation
import PushCore
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
import ProxySandbox
@testable import PushWorker

@Suite("push-worker send and check-config against the sandboxes")
final class OperatorCommandTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    static let token = String(repeating: "e5", count: 32)

    static func environment(apns: APNsSandboxFixture, fcm: FCMSandboxInstance? = nil) -> [String: String] {
        var environment = [
            "PUSH_APNS_KEY_FILE": apns.keyFile,
            "PUSH_APNS_KEY_ID": APNsSandboxFixture.keyId,
            "PUSH_APNS_TEAM_ID": APNsSandboxFixture.teamId,
            "PUSH_APNS_BUNDLE_ID": APNsSandboxFixture.bundleId,
            "PUSH_APNS_HOST": "localhost",
            "PUSH_APNS_PORT": String(apns.server.port),
            "PUSH_APNS_CA_FILE": apns.tls.caFile,
        ]
        if let fcm {
            environment["PUSH_FCM_CREDENTIALS_FILE"] = fcm.credentialsFile
            environment["PUSH_FCM_ENDPOINT"] = fcm.server.baseURL
            environment["PUSH_FCM_CA_FILE"] = apns.tls.caFile
        }
        return environment
    }

    @Test("send delivers an RFC 8599 VoIP binding through the APNs plugin and prints Apple's answer and the outcome")
    func sendAPNs() async throws {
        let apns = try await APNsSandboxFixture.start()
        let binding = "pn-provider=apns;pn-param=\(APNsSandboxFixture.teamId).\(APNsSandboxFixture.bundleId).voip;pn-prid=\(Self.token)"
        let report = try await OperatorSend.run(
            environment: Self.environment(apns: apns),
            options: .init(target: [("rfc8599", binding)], kind: .call, data: ["callId": "c-1"]),
            logger: testLogger())
        #expect(report.delivered)
        #expect(report.exchanges.count == 1)
        #expect(apns.server.requests.first?.header("apns-topic") == "\(APNsSandboxFixture.bundleId).voip")
        #expect(report.lines.contains("answer:   HTTP 200"))
        #expect(report.lines.contains { $0.hasPrefix("outcome:  {\"v\":1,") && $0.contains("\"status\":\"delivered\"") })
        #expect(!report.lines.joined().contains(Self.token), "the device token is shortened")
        await apns.stop()
    }

    @Test("send reports a dead APNs token as rejected with remove_binding and Apple's reason body")
    func sendAPNsRejected() async throws {
        let apns = try await APNsSandboxFixture.start()
        let report = try await OperatorSend.run(
            environment: Self.environment(apns: apns),
            options: .init(target: [("provider", "apns"), ("token", "0410" + String(repeating: "a", count: 60))]),
            logger: testLogger())
        #expect(!report.delivered)
        #expect(report.outcome.status == .rejected)
        #expect(report.outcome.action == .removeBinding)
        #expect(report.lines.contains("answer:   HTTP 410"))
        #expect(report.lines.contains { $0.hasPrefix("body:") && $0.contains("Unregistered") })
        await apns.stop()
    }

    @Test("send delivers an X-MPUSH Android binding through the FCM plugin, the token grant included")
    func sendFCM() async throws {
        let apns = try await APNsSandboxFixture.start()
        let fcm = try await FCMSandboxInstance.start(tls: apns.tls)
        let report = try await OperatorSend.run(
            environment: Self.environment(apns: apns, fcm: fcm),
            options: .init(
                target: [("xmpush", "a:\(FCMSandboxInstance.projectId):fcm-token-1")],
                title: "Check", body: "credentials"),
            logger: testLogger())
        #expect(report.delivered, "\(report.lines)")
        #expect(report.exchanges.count == 2, "token grant, then messages:send")
        #expect(report.lines.filter { $0.hasPrefix("body:") }.count == 1, "the grant's body (an access token) is not printed")
        await fcm.server.stop()
        await apns.stop()
    }

    @Test("send refuses an unconfigured provider and a malformed binding with one line each")
    func sendRefusals() async throws {
        let apns = try await APNsSandboxFixture.start()
        await #expect(throws: OperatorSend.Refused.self) {
            try await OperatorSend.run(
                environment: Self.environment(apns: apns), options: .init(target: [("xmpush", "a:p:t")]), logger: testLogger())
        }
        do {
            _ = try await OperatorSend.run(
                environment: Self.environment(apns: apns), options: .init(target: [("xmpush", "z:p:t")]), logger: testLogger())
            Issue.record("a malformed binding was sent")
        } catch {
            #expect(
                error.problems == [
                    #"target: targets[0].xmpush provider "z" is not one of a (Android FCM), i (APNs), j (iOS FCM), w (FCM web token or Web Push)"#
                ])
        }
        await apns.stop()
    }

    @Test("check-config lists configuration, credential and template problems one per line, and exits 2 as run would")
    func checkConfigProblems() async throws {
        let templates = scratch.url.appendingPathComponent("check-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: templates + "/fcm/default", withIntermediateDirectories: true)
        try #"{"message": {"token": {{TOKEN}}}}"#.write(toFile: templates + "/fcm/default/call.mustache", atomically: true, encoding: .utf8)
        let report = await ConfigurationCheck.run(environment: [
            "PUSH_APNS_KEY_FILE": "/nonexistent/AuthKey.p8", "PUSH_APNS_KEY_ID": "KEYID4APNS", "PUSH_APNS_TEAM_ID": "TEAM123456",
            "PUSH_APNS_BUNDLE_ID": "com.example.chat", "PUSH_TEMPLATES_DIR": templates,
        ])
        #expect(report.exitStatus == 2)
        let problems = report.failures.map(\.detail)
        #expect(report.failures.allSatisfy { $0.check == "configuration" })
        #expect(problems.contains { $0.hasPrefix("PUSH_KAFKA_BROKERS is required") })
        #expect(problems.contains { $0.hasPrefix("PUSH_APNS_KEY_FILE: key file /nonexistent/AuthKey.p8") })
        #expect(problems.contains { $0.hasPrefix("PUSH_TEMPLATES_DIR: fcm/default/call.mustache: rendered output is not valid JSON") })
    }
}

@Suite("push-worker import-templates")
final class TemplateImportTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    @Test(
        "Mizu's message files become a templates directory that loads, each change listed; a file that renders no valid payload is a problem"
    )
    func importsMizuFiles() throws {
        let directory = scratch.url.appendingPathComponent("mizu-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try #"{"aps": {"alert": {"title": "TITLE"}, "sound": "SOUND"}, "data": {"ntype": TYPE}}"#
            .write(toFile: "\(directory)/pushkitmessage.txt", atomically: true, encoding: .utf8)
        try (#"{"message": {"token": "TOKEN", "data": {"ncallid": "CALLID"}}}"# + "\n--EOF--\nold notes")
            .write(toFile: "\(directory)/fcmmessage.txt", atomically: true, encoding: .utf8)
        let output = "\(directory)/templates"
        let report = TemplateImport.run(from: directory, to: output)
        #expect(report.succeeded, "\(report.lines)")
        #expect(report.lines.contains("fcmmessage.txt → fcm/default/default.mustache"))
        #expect(report.lines.contains("  keywords marked: SOUND ×1, TITLE ×1, TYPE ×1"))
        #expect(
            try String(contentsOfFile: "\(output)/fcm/default/default.mustache", encoding: .utf8)
                == #"{"message": {"token": "{{TOKEN}}", "data": {"ncallid": "{{CALLID}}"}}}"# + "\n")
        try #"{"message": {"data": {}}}"#.write(toFile: "\(directory)/fcmmessage.txt", atomically: true, encoding: .utf8)
        let broken = TemplateImport.run(from: directory, to: "\(directory)/broken")
        #expect(!broken.succeeded)
        #expect(broken.lines.contains { $0.hasPrefix("problem: fcm/default/default.mustache") })
    }
}
