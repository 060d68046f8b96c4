import Foundation
import APNsPlugin
import ProxyPlugin
import Testing
import WebPushPlugin
import TestSupport
@testable import PushCore

@Suite("Job contract v1: decoding and validation")
struct JobDecoderTests {
    let decoder = JobDecoder()
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/examples/jobs").standardized

    func decode(_ text: String, timestamp: Int64 = 1_700_000_000_000) throws(JobRejection) -> Job {
        try decoder.decode(Array(text.utf8), fallbackCreatedAt: timestamp)
    }

    func rejection(_ text: String) -> JobRejection? {
        do {
            _ = try decode(text)
            return nil
        } catch { return error }
    }

    static let proxyTarget = #"{"bindingId":"p1","provider":"proxy"}"#

    @Test("a contract v1 target member another provider uses is still accepted and ignored; a member v1 never had is refused")
    func priorTargetMembersTolerated() throws {
        let webPush =
            #"{"bindingId":"w","provider":"webpush","endpoint":"https://push.example.net/s/1","keys":{"p256dh":"k","auth":"a"},"platform":"web","token":"t"}"#
        let fcm = #"{"bindingId":"f","provider":"fcm","token":"t","environment":"production","tokenType":"fcm"}"#
        let job = try decode(#"{"v":1,"id":"a","kind":"message","userId":"u","targets":[\#(webPush),\#(fcm)]}"#)
        #expect(job.targets.map(\.provider) == ["webpush", "fcm"])
        #expect(
            rejection(
                #"{"v":1,"id":"a","kind":"message","userId":"u","targets":[{"bindingId":"f","provider":"fcm","token":"t","colour":"red"}]}"#
            )?.message
                == "targets[0].colour is not a field of the v1 contract")
        #expect(
            rejection(
                #"{"v":1,"id":"a","kind":"message","userId":"u","targets":[{"bindingId":"f","provider":"fcm","token":"t","platform":7}]}"#)?
                .message
                == "targets[0].platform must be a string, not number")
    }

    @Test("the documented example decodes field for field")
    func documentedExample() throws {
        let bytes = try Array(Data(contentsOf: Self.examples.appendingPathComponent("valid/call-all-providers.json")))
        let job = try decoder.decode(bytes, fallbackCreatedAt: 0)
        #expect(job.id == "call-all-providers-1")
        #expect(job.createdAt == 1_795_310_000_000)
        #expect(job.ttl == 30)
        #expect(job.kind == .call)
        #expect(job.priority == .high)
        #expect(job.collapseKey == "chat-42")
        #expect(job.dedupeKey == "invite-9")
        #expect(job.notification == Notification(title: "Bob", body: "Incoming call", sound: "ring.caf", badge: 1))
        #expect(job.data == ["callId": "c-77", "caller": "bob"])
        #expect(job.body == "opaque-sdk-payload")
        #expect(job.targets.map(\.provider) == ["apns", "fcm", "webpush", "proxy"])
        #expect(job.targets[0].details(APNsTarget.self)?.pushType == "voip")
        #expect(job.targets[0].details(APNsTarget.self)?.environment == "production")
        #expect(job.targets[2].details(WebPushTarget.self)?.keys?.auth == "tBHItJI5svbpez7KI4CCXg")
        #expect(job.targets[3].details(ProxyTarget.self)?.tokenType == "apnsVoip")
    }

    @Test("the README's job is one the worker accepts, and the outcomes it shows are of that job's targets")
    func readmeExample() throws {
        let readme = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md"),
            encoding: .utf8)
        func blocks(_ schema: String) -> [String] {
            readme.components(separatedBy: "<!-- schema: \(schema) -->\n```json\n").dropFirst()
                .map { $0.components(separatedBy: "\n```").first ?? "" }
        }
        let jobs = blocks("job")
        #expect(jobs.count == 1)
        let job = try decode(try #require(jobs.first))
        let outcomes = try blocks("outcome").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
        #expect(!outcomes.isEmpty)
        for outcome in outcomes {
            #expect(outcome["jobId"] as? String == job.id)
            #expect(outcome["userId"] as? String == job.userId)
            let target = job.targets.first { $0.bindingId == outcome["bindingId"] as? String }
            #expect(target?.provider.rawValue == outcome["provider"] as? String)
        }
    }

    @Test("every valid example decodes and every invalid example is rejected")
    func examplesAgreeWithDecoder() throws {
        for folder in ["valid", "invalid"] {
            let directory = Self.examples.appendingPathComponent(folder)
            let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".json") }
            #expect(!files.isEmpty)
            for file in files {
                let bytes = try Array(Data(contentsOf: directory.appendingPathComponent(file)))
                let accepted = (try? decoder.decode(bytes, fallbackCreatedAt: 0)) != nil
                #expect(accepted == (folder == "valid"), "\(folder)/\(file)")
            }
        }
    }

    @Test("the JSON Schema accepts the valid examples and refuses the invalid ones")
    func schemaAgreesWithExamples() async throws {
        let check = try await runSchemaCheck([])
        #expect(check.status == 0, "\(check.output)")
    }

    @Test("createdAt defaults to the Kafka timestamp; ttl and priority default by kind")
    func defaults() throws {
        let call = try decode(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(Self.proxyTarget)]}"#, timestamp: 42)
        #expect(call.createdAt == 42)
        #expect(call.ttl == 60)
        #expect(call.priority == .high)
        let wake = try decode(#"{"v":1,"id":"a","kind":"wake","userId":"u","targets":[\#(Self.proxyTarget)]}"#)
        #expect(wake.ttl == 86_400)
        #expect(wake.priority == .normal)
    }

    @Test(
        "an unknown or missing contract version is rejected as unsupported_version",
        arguments: [
            #"{"v":2,"id":"a","kind":"call","userId":"u","targets":[]}"#,
            #"{"id":"a","kind":"call","userId":"u","targets":[]}"#,
            #"{"v":"1","id":"a","kind":"call","userId":"u","targets":[]}"#,
        ])
    func unsupportedVersion(_ text: String) {
        #expect(rejection(text)?.code == .unsupportedVersion)
    }

    @Test("a version given as null is a wrong version, not a missing one")
    func nullVersion() {
        #expect(
            rejection(#"{"v":null,"id":"a","kind":"call","userId":"u","targets":[]}"#) == JobRejection(.unsupportedVersion, "v must be 1"))
        #expect(
            rejection(#"{"id":"a","kind":"call","userId":"u","targets":[]}"#)
                == JobRejection(.unsupportedVersion, "v is required (supported: 1)"))
    }

    @Test("a message above the size limit is rejected before parsing")
    func tooLarge() {
        let limited = JobDecoder(
            limits: JobLimits(
                maximumBytes: 100, maximumTargets: 100, maximumIdentifierLength: 256,
                maximumTTLSeconds: 100))
        let text = #"{"v":1,"id":"a","kind":"call","userId":"u","body":"\#(String(repeating: "x", count: 200))","targets":[]}"#
        #expect(throws: JobRejection(.tooLarge, "message is \(text.utf8.count) bytes, the limit is 100")) {
            try limited.decode(Array(text.utf8), fallbackCreatedAt: 0)
        }
    }

    @Test(
        "rejections name the field and the rule",
        arguments: [
            (
                #"{"v":1,"kind":"call","userId":"u","targets":[{"bindingId":"p1","provider":"proxy"}]}"#,
                "id is required and must be a non-empty string"
            ),
            (#"{"v":1,"id":"a","kind":"call","userId":"u"}"#, "targets is required"),
            (#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[]}"#, "targets must not be empty"),
            (#"{"v":1,"id":"a","kind":"ring","userId":"u","targets":[]}"#, "kind must be one of call, message, cancel, custom, wake"),
            (#"{"v":1,"id":"a","kind":"call","userId":"u","ttl":-1,"targets":[]}"#, "ttl must be between 0 and 2419200"),
            (#"{"v":1,"id":"a","kind":"call","userId":"u","ttl":1.5,"targets":[]}"#, "ttl must be an integer, not number"),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","data":{"n":1},"targets":[]}"#,
                "data.n must be a string, not number (provider data values are strings)"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","collapse_key":"x","targets":[{"bindingId":"p1","provider":"proxy"}]}"#,
                "collapse_key is not a field of the v1 contract"
            ),
            (#"{"v":1,"id":"a\u0000b","kind":"call","userId":"u","targets":[]}"#, "id contains a NUL character"),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"apns","token":"xyz"}]}"#,
                "targets[0].token must be an even number (≥ 16) of hex digits for apns"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"apns","token":"0123456789abcd"}]}"#,
                "targets[0].token must be an even number (≥ 16) of hex digits for apns"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"apns","token":"0123456789abcdef0"}]}"#,
                "targets[0].token must be an even number (≥ 16) of hex digits for apns"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"apns","token":"éééééééééééééééé"}]}"#,
                "targets[0].token must be an even number (≥ 16) of hex digits for apns"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"webpush","endpoint":"https://x"}]}"#,
                "targets[0].keys (p256dh, auth) are required for webpush"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"proxy"},{"bindingId":"b","provider":"proxy"}]}"#,
                "targets[1].bindingId \"b\" appears twice"
            ),
            (
                #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"proxy","pushType":"alert"}]}"#,
                "targets[0].pushType must be one of im, voip"
            ),
        ])
    func fieldRejections(_ text: String, _ message: String) {
        let rejection = rejection(text)
        #expect(rejection?.message == message)
    }

    // Apple's documentation gives the token as bytes (`Data`) and no length: the floor of 16 hex digits
    // (8 bytes) is the worker's own, against truncated tokens; digits come in pairs, one per byte.
    @Test(
        "an APNs token of 16 hex digits, or longer and even, in either case, is accepted",
        arguments: [
            "0123456789abcdef", "0123456789ABCDEF01", String(repeating: "a1", count: 100),
        ])
    func apnsTokenLengths(_ token: String) {
        #expect(
            rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"apns","token":"\#(token)"}]}"#)
                == nil)
    }

    @Test("an unknown provider is rejected as unknown_provider")
    func unknownProvider() {
        let rejection = rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[{"bindingId":"b","provider":"pager"}]}"#)
        #expect(rejection?.code == .unknownProvider)
    }

    @Test(
        "a target that cannot be understood is refused on its own — provider none when it names no linked one — and the job goes on with the others"
    )
    func oneBadTargetIsRefusedAlone() throws {
        let good = #"{"bindingId":"good","provider":"proxy"}"#
        let pager = #"{"bindingId":"pager","provider":"pager","token":"t"}"#
        let badToken = #"{"bindingId":"bad-token","provider":"apns","app":"com.example.chat","token":"xyz"}"#
        let badBinding = #"{"bindingId":"bad-binding","rfc8599":"pn-provider=apns;pn-param=ABCD1234..voip;pn-prid=null"}"#
        let gcm = #"{"bindingId":"gcm","rfc8599":"pn-provider=gcm;pn-param=p;pn-prid=t"}"#
        let job = try decode(
            #"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(pager),\#(good),\#(badToken),\#(badBinding),\#(gcm)]}"#)
        #expect(job.targets.map(\.bindingId) == ["pager", "good", "bad-token", "bad-binding", "gcm"])
        #expect(job.targets.map(\.provider) == ["none", "proxy", "apns", "apns", "none"])
        #expect(job.targets.map(\.isDeliverable) == [false, true, false, false, false])
        #expect(job.targets[0].refusal?.code == .unknownProvider)
        #expect(job.targets[0].refusal?.message.hasPrefix(#"targets[0].provider "pager" is not one of"#) == true)
        #expect(
            job.targets[2].refusal == JobRejection(.invalidField, "targets[2].token must be an even number (≥ 16) of hex digits for apns"))
        #expect(job.targets[2].app == nil, "a refused target's app is not taken from the producer")
        #expect(job.targets[3].refusal?.message.hasPrefix("targets[3].rfc8599 pn-param") == true)
        #expect(job.targets[4].refusal?.message.hasPrefix(#"targets[4].rfc8599 pn-provider "gcm" is not one of"#) == true)
    }

    @Test("a job none of whose targets is valid is refused with the first target's rule; a target without its bindingId refuses the job")
    func noValidTargetRefusesTheJob() {
        let pager = #"{"bindingId":"pager","provider":"pager"}"#
        let badToken = #"{"bindingId":"bad-token","provider":"apns","token":"xyz"}"#
        let both = rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(pager),\#(badToken)]}"#)
        #expect(both?.code == .unknownProvider)
        #expect(both?.message.hasPrefix(#"targets[0].provider "pager" is not one of"#) == true)
        #expect(both?.message.hasSuffix("(and every other target of the job is invalid too)") == true)
        let unbound = #"{"bindingId":"gone","xmpush":"null"}"#
        #expect(rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(pager),\#(unbound)]}"#) == nil, "unbound is valid")
        #expect(
            rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(unbound),{"provider":"proxy"}]}"#)?.message
                == "targets[1].bindingId is required and must be a non-empty string")
    }

    @Test("a bindingId repeated among few targets or among many refuses the job, naming the second one", arguments: [2, 17, 100])
    func repeatedBindingIdRefusesTheJob(targetCount: Int) {
        let targets = (0..<targetCount).map { #"{"bindingId":"b\#($0 == targetCount - 1 ? 0 : $0)","provider":"proxy"}"# }
        #expect(
            rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(targets.joined(separator: ","))]}"#)?.message
                == "targets[\(targetCount - 1)].bindingId \"b0\" appears twice")
        let distinct = (0..<targetCount).map { #"{"bindingId":"b\#($0)","provider":"proxy"}"# }.joined(separator: ",")
        #expect((try? decode(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(distinct)]}"#))?.targets.count == targetCount)
    }

    @Test("more targets than the limit are rejected")
    func tooManyTargets() {
        let targets = (0...100).map { #"{"bindingId":"b\#($0)","provider":"proxy"}"# }.joined(separator: ",")
        #expect(
            rejection(#"{"v":1,"id":"a","kind":"call","userId":"u","targets":[\#(targets)]}"#)?.message
                == "targets has 101 entries, the limit is 100")
    }

    @Test("invalid JSON and non-object documents are rejected as invalid_json", arguments: ["not json", "[1,2]", "{\"v\":1,"])
    func invalidJSON(_ text: String) {
        #expect(rejection(text)?.code == .invalidJSON)
    }
}
