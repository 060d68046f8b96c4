import Foundation
import APNsPlugin
import FCMPlugin
import PushCore
import Testing
import TestSupport
@testable import PushTemplates

@Suite("Payload templates: Mizu keywords, JSON escaping, start-up check, hot reload")
final class PayloadTemplateTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    static let mizuTemplates = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/templates/mizu").standardized.path

    /// Mizu's default pushkitmessage.txt exactly as the gateway's documentation prints it.
    static let mizuPushKitMessage = """
        {
          "headers" :
          {
            "apns-priority" : APRIORITY,
            "apns-expiration" : TTLNUM,
            "apns-push-type" : "PUSHTYPE",
            "apns-topic": "PACKAGE.voip"
          },
          "aps" :
          {
            "alert" :
            {
              "title" : "TITLE",
              "body" : "BODY"
            },
            "content-available" : 1,
            "sound" : "SOUND",
            "badge" : 1
          },
          "data" :
          {
            "ntype" : TYPE,
            "nfromusername": "FROMUSERNAME",
            "nfrom" : "FROM",
            "nmsg" : "MSG",
            "ncallid": "CALLID",
            "ntouser": "TOUSERNAME"
          }
        }
        """

    /// Mizu's default fcmmessage.txt (FCM HTTP v1). The documentation's copy closes
    /// `message` after `notification` with a stray comma, which is not JSON and which FCM v1
    /// would refuse; here `data`, `android`, `webpush` and `apns` sit inside `message`, where
    /// FCM v1 requires them. Every key and keyword is as printed.
    static let mizuFCMMessage = """
        {
          "message": {
            "token": "TOKEN",
            "notification": {
              "title": "TITLE",
              "body": "BODY"
            },
          "data": {
            "ntype": "TYPE",
                "nfromusername": "FROMUSERNAME",
                "nfrom": "FROM",
                "nmsg": "MSG",
                "ncallid": "CALLID",
                "ntouser": "TOUSERNAME"
            },
            "android": {
                "priority": "PRIORITY",
                "ttl": "TTLNUMs",
                "notification": {
                    "notification_priority": "NPRIORITY",
                    "sound": "SOUND",
                    "visibility": "PUBLIC"
                }
            },
            "webpush": {
                "headers": {
                    "ttl": "TTLNUM",
                    "Urgency": "PRIORITY"
                },
                "fcm_options": {
                    "link": ""
                }
            },
            "apns": {
                "headers": {
                    "apns-priority": "APRIORITY",
                    "apns-expiration": "TTLNUM",
                    "apns-push-type": "PUSHTYPE",
                    "apns-topic": "PACKAGE.voip"
                },
                "payload": {
                    "aps": {
                        "alert": {
                            "title": "TITLE",
                            "body": "BODY"
                        },
                        "content-available": 1,
                        "sound": "SOUND"
                    }
                }
            }
          }
        }
        """

    /// Mizu's own substitution: every keyword replaced by its value as plain text, longest first.
    static func mizuSubstitute(_ text: String, _ values: [String: String]) -> String {
        let keywords = values.keys.sorted { $0.count > $1.count }
        var output = ""
        var rest = Substring(text)
        while !rest.isEmpty {
            if let keyword = keywords.first(where: { rest.hasPrefix($0) }) {
                output += values[keyword]!
                rest = rest.dropFirst(keyword.count)
            } else {
                output.append(rest.removeFirst())
            }
        }
        return output
    }

    /// The template rules of the plugins with templates.
    static let shapes = [APNsPlugin().templateShape, FCMPlugin().templateShape].compactMap { $0 }

    static func delivery(
        provider: ProviderID, kind: JobKind = .call, data: [String: String] = [:],
        notification: PushCore.Notification? = nil
    ) -> Delivery {
        let target: Target =
            provider == .apns
            ? .apns("b1", app: "com.example.voip", token: String(repeating: "c0", count: 32))
            : .fcm("b1", app: "com.example.voip", token: "fcm-token-1")
        let job = Job(
            id: "j1", createdAt: 1_795_310_000_000, ttl: 30, kind: kind, priority: .high, userId: "2222",
            notification: notification,
            data: data.isEmpty ? ["callId": "call-abc", "caller": "alice smith", "callerUsername": "1111"] : data,
            targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: 1_795_310_010_000)
    }

    func directory(_ files: [String: String]) throws -> String {
        let root = scratch.url.appendingPathComponent("templates-\(UUID().uuidString)").path
        for (relative, text) in files {
            let path = root + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        return root
    }

    func render(_ directory: TemplateDirectory, _ delivery: Delivery, app: String = "com.example.voip") throws -> RenderedPayload {
        let key = PayloadTemplateKey(provider: delivery.target.provider, app: app, kind: delivery.job.kind)
        return try #require(directory.render(key, keywords: PayloadKeywords(delivery: delivery, app: app))).get()
    }

    @Test("the shipped Mizu PushKit template renders the seed's pushkitmessage.txt as equal JSON")
    func mizuPushKit() throws {
        let templates = try TemplateDirectory.load(path: Self.mizuTemplates, shapes: Self.shapes).get()
        let delivery = Self.delivery(provider: .apns)
        let keywords = PayloadKeywords(delivery: delivery, app: "com.example.voip")
        let expected = try JSONParser.parse(Array(Self.mizuSubstitute(Self.mizuPushKitMessage, keywords.values).utf8))
        #expect(try render(templates, delivery).document == expected)
        #expect(expected["data"]?["ntype"] == .integer(0))
        #expect(expected["aps"]?["alert"]?["title"] == .string("Call from 1111"))
    }

    /// Where the shipped FCM template corrects the seed's fcmmessage.txt: APNs wants `apns-expiration` in
    /// seconds since the epoch, not a relative TTL, and `PACKAGE` is the Firebase project, not a bundle id,
    /// so `apns-topic` is left to FCM (the iOS app registered in the project).
    static let mizuFCMCorrected =
        mizuFCMMessage
        .replacingOccurrences(of: #""apns-expiration": "TTLNUM""#, with: #""apns-expiration": "APNSEXPIRATION""#)
        .replacingOccurrences(of: #""apns-push-type": "PUSHTYPE","#, with: #""apns-push-type": "PUSHTYPE""#)
        .split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.contains("apns-topic") }.joined(separator: "\n")

    @Test(
        "the shipped Mizu FCM template renders the seed's fcmmessage.txt as equal JSON, with apns-expiration in epoch seconds and no <project>.voip topic"
    )
    func mizuFCM() throws {
        let templates = try TemplateDirectory.load(path: Self.mizuTemplates, shapes: Self.shapes).get()
        let delivery = Self.delivery(
            provider: .fcm, kind: .message, data: ["caller": "alice", "callId": "m-1"],
            notification: PushCore.Notification(title: "alice", body: "lunch at noon", sound: "chat.wav"))
        let keywords = PayloadKeywords(delivery: delivery, app: "com.example.voip")
        #expect(!Self.mizuFCMCorrected.contains("apns-topic"))
        let expected = try JSONParser.parse(Array(Self.mizuSubstitute(Self.mizuFCMCorrected, keywords.values).utf8))
        let rendered = try render(templates, delivery)
        #expect(rendered.document == expected)
        #expect(rendered.document["message"]?["android"]?["ttl"] == .string("20s"))
        #expect(rendered.document["message"]?["data"]?["ntype"] == .string("1"))
        #expect(rendered.document["message"]?["data"]?["nfrom"] == .string("alice"), "FROM comes from data.caller")
        #expect(rendered.document["message"]?["apns"]?["headers"]?["apns-expiration"] == .string("1795310030"))
        #expect(rendered.document["message"]?["apns"]?["headers"]?["apns-topic"] == nil)
    }

    @Test("a hostile display name stays inside its JSON string")
    func hostileDisplayName() throws {
        let root = try directory([
            "apns/com.example.voip/call.mustache":
                #"{"aps":{"alert":{"title":"{{FROMDISPLAYNAME}}","body":"{{data.note}}"}}}"#
        ])
        let templates = try TemplateDirectory.load(path: root, shapes: Self.shapes).get()
        let hostile = #""},"x":""#
        let delivery = Self.delivery(provider: .apns, data: ["callerDisplayName": hostile, "note": "a\\\"b\n</script>"])
        let document = try render(templates, delivery).document
        #expect(document["aps"]?["alert"]?["title"] == .string(hostile))
        #expect(document["aps"]?["alert"]?["body"] == .string("a\\\"b\n</script>"))
        #expect(document["x"] == nil)
        #expect(document["aps"]?["x"] == nil)
    }

    @Test("a template that cannot render valid JSON stops start-up with its file name")
    func brokenTemplateRefused() throws {
        let root = try directory(["apns/com.example.chat/call.mustache": #"{"aps": {"alert": {{FROM}} }}"#])
        guard case .failure(let problems) = TemplateDirectory.load(path: root, shapes: Self.shapes) else {
            Issue.record("a broken template was accepted")
            return
        }
        #expect(problems.lines.count == 1)
        #expect(problems.lines[0].hasPrefix("apns/com.example.chat/call.mustache: rendered output is not valid JSON"))
    }

    @Test("one error line per broken template, and wrong shapes and names are refused")
    func oneLinePerProblem() throws {
        let root = try directory([
            "apns/default/call.mustache": #"{"alert": "{{TITLE}}"}"#,
            "fcm/default/message.mustache": #"{"message": {"token": "{{TOKEN}}", "data": {"n": {{TYPE}}}}}"#,
            "fcm/default/ring.mustache": "{}",
            "webpush/default/default.mustache": "{}",
            "apns/default/message.mustache": #"{"aps": {"alert": "{{{TITLE}}}"}}"#,
        ])
        guard case .failure(let problems) = TemplateDirectory.load(path: root, shapes: Self.shapes) else {
            Issue.record("broken templates were accepted")
            return
        }
        #expect(problems.lines.count == 5)
        #expect(problems.lines.contains { $0.hasPrefix("apns/default/call.mustache: an APNs payload needs an \"aps\" object") })
        #expect(problems.lines.contains { $0.hasPrefix("fcm/default/message.mustache: message.data.n must be a string") })
        #expect(problems.lines.contains { $0.hasPrefix("fcm/default/ring.mustache: name must be <kind>.mustache") })
        #expect(problems.lines.contains { $0.hasPrefix("webpush: not a provider with templates") })
        #expect(problems.lines.contains { $0.hasPrefix("apns/default/message.mustache: triple mustaches print a value unescaped") })
    }

    @Test("lookup goes app+kind, app default, default kind, default default; none means built-in")
    func lookupOrder() throws {
        let root = try directory([
            "apns/com.example.voip/call.mustache": #"{"aps": {}, "t": "app-call"}"#,
            "apns/com.example.voip/default.mustache": #"{"aps": {}, "t": "app-default"}"#,
            "apns/default/message.mustache": #"{"aps": {}, "t": "default-message"}"#,
            "apns/default/default.mustache": #"{"aps": {}, "t": "default-default"}"#,
        ])
        let templates = try TemplateDirectory.load(path: root, shapes: Self.shapes).get()
        func tag(_ kind: JobKind, app: String) throws -> JSONValue? {
            try render(templates, Self.delivery(provider: .apns, kind: kind), app: app).document["t"]
        }
        #expect(try tag(.call, app: "com.example.voip") == .string("app-call"))
        #expect(try tag(.wake, app: "com.example.voip") == .string("app-default"))
        #expect(try tag(.message, app: "com.other") == .string("default-message"))
        #expect(try tag(.cancel, app: "com.other") == .string("default-default"))
        let fcm = Self.delivery(provider: .fcm)
        #expect(
            templates.render(PayloadTemplateKey(provider: .fcm, app: "p", kind: .call), keywords: PayloadKeywords(delivery: fcm, app: "p"))
                == nil)
    }

    @Test("SOUND defaults per kind (pushnotification_sound_call/chat/other) when the job names no sound; the job's own sound wins")
    func defaultSounds() throws {
        let root = try directory(["apns/default/default.mustache": #"{"aps": {"sound": "{{SOUND}}"}}"#])
        let templates = try TemplateDirectory.load(
            path: root, shapes: Self.shapes,
            defaultSounds: [.call: "ring.caf", .message: "chat.caf", .cancel: "other.caf"]
        ).get()
        func sound(_ kind: JobKind, _ notification: PushCore.Notification? = nil) throws -> JSONValue? {
            try render(templates, Self.delivery(provider: .apns, kind: kind, notification: notification), app: "com.example.voip")
                .document["aps"]?["sound"]
        }
        #expect(try sound(.call) == .string("ring.caf"))
        #expect(try sound(.message, PushCore.Notification(title: "Bob")) == .string("chat.caf"))
        #expect(try sound(.cancel) == .string("other.caf"))
        #expect(try sound(.message, PushCore.Notification(title: "Bob", sound: "own.caf")) == .string("own.caf"))
    }

    @Test("a broken update keeps the last good template and is reported once; a fix and a removal apply")
    func hotReload() throws {
        let file = "apns/com.example.voip/call.mustache"
        let root = try directory([file: #"{"aps": {}, "v": 1}"#])
        let templates = try TemplateDirectory.load(path: root, shapes: Self.shapes).get()
        let delivery = Self.delivery(provider: .apns)
        try #"{"aps": {}, "v": "#.write(toFile: root + "/" + file, atomically: true, encoding: .utf8)
        let broken = templates.reload()
        #expect(broken.problems.count == 1)
        #expect(broken.problems.first?.hasPrefix(file) == true)
        #expect(try render(templates, delivery).document["v"] == .integer(1))
        #expect(templates.reload().problems.isEmpty)
        try #"{"aps": {}, "v": 2}"#.write(toFile: root + "/" + file, atomically: true, encoding: .utf8)
        #expect(templates.reload().changed == [file])
        #expect(try render(templates, delivery).document["v"] == .integer(2))
        try FileManager.default.removeItem(atPath: root + "/" + file)
        #expect(templates.reload().changed == [file])
        #expect(
            templates.render(
                PayloadTemplateKey(provider: .apns, app: "com.example.voip", kind: .call),
                keywords: PayloadKeywords(delivery: delivery, app: "com.example.voip")) == nil)
    }
}
