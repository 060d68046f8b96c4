import Testing
import TestSupport
import PushDevelopmentTools

@Suite("push-worker-dev demo")
struct DemoTests {
    @Test("the demo shows delivered, deduplicated, rejected, failed and expired outcomes and three dead letters")
    func demoOutcomes() async throws {
        let report = try await Demo.run(logger: testLogger())
        let rows = report.rows
        #expect(report.skipped.isEmpty, "redis-server is installed where the tests run")
        let statuses = Dictionary(grouping: rows, by: \.title).mapValues { $0.map(\.status) }
        #expect(statuses["incoming call"] == ["delivered", "delivered"])
        #expect(statuses["VoIP call via APNs"] == ["delivered"])
        #expect(statuses["SIP call to RFC 8599 / X-MPUSH bindings"]?.sorted() == ["delivered", "delivered", "rejected", "rejected"])
        #expect(
            rows.first { $0.bindingId == "ivan-ipad" }.map { ($0.provider, $0.status) } ?? ("", "") == ("apns", "delivered"),
            "an RFC 8599 binding without the team id")
        #expect(
            rows.first { $0.bindingId == "ivan-desk-phone" }.map { ($0.provider, $0.status, $0.action) } ?? ("", "", "")
                == ("none", "rejected", "remove_binding"), "X-MPUSH null alone")
        #expect(rows.first { $0.jobId == "call-6" }.map { ($0.status, $0.reason) } ?? ("", "") == ("expired", "cancelled by job cancel-2"))
        #expect(statuses["the caller hangs up"] == ["delivered"])
        #expect(
            report.proxyRequests.contains { $0.jobId == "call-1" && $0.endpoints.sorted() == ["alice-iphone", "alice-pixel"] },
            "one proxy request for a user's two endpoints")
        #expect(
            rows.first { $0.bindingId == "ivan-iphone" }.map { ($0.provider, $0.status, $0.httpStatus) } ?? ("", "", "") == (
                "apns", "delivered", "200"
            ))
        #expect(
            rows.first { $0.bindingId == "ivan-old-pixel" }.map { ($0.provider, $0.action, $0.attempts) } ?? ("", "", "") == (
                "fcm", "remove_binding", "0"
            ))
        #expect(
            rows.first { $0.bindingId == "mia-iphone" }.map { ($0.provider, $0.status, $0.httpStatus) } ?? ("", "", "") == (
                "apns", "delivered", "200"
            ), "liblinphone's registration: its placeholder team id and its own pn-* parameters")
        #expect(statuses["VoIP call via Huawei Push Kit"] == ["delivered", "rejected"])
        #expect(rows.first { $0.bindingId == "judy-old-p30" }.map { ($0.provider, $0.action) } ?? ("", "") == ("hms", "remove_binding"))
        #expect(statuses["app deleted (APNs 410)"] == ["rejected"])
        #expect(rows.first { $0.title == "app deleted (APNs 410)" }?.action == "remove_binding")
        #expect(statuses["chat message via FCM"] == ["delivered", "rejected"])
        #expect(rows.first { $0.bindingId == "old-tablet" }?.action == "remove_binding")
        #expect(statuses["message to a browser (Web Push)"] == ["delivered"])
        #expect(statuses["rich chat message"] == ["delivered", "delivered"])
        #expect(statuses["localized missed-call alert"] == ["delivered"])
        #expect(
            rows.first { $0.bindingId == "frank-iphone-activity" }.map { ($0.provider, $0.status) } ?? ("", "") == ("apns", "delivered"))
        #expect(statuses["caller redials within 5 s"] == ["deduplicated"])
        #expect(statuses["chat message"] == ["delivered"])
        #expect(statuses["call cancelled"] == ["delivered"])
        #expect(statuses["user unknown to the proxy"] == ["rejected"])
        #expect(statuses["proxy keeps answering 503"] == ["failed", "→ DLQ"])
        #expect(statuses["stale call (TTL passed)"] == ["expired"])
        #expect(statuses["malformed JSON"] == ["→ DLQ"])
        #expect(statuses["unknown provider"] == ["→ DLQ"])
        #expect(rows.first { $0.title == "user unknown to the proxy" }?.action == "remove_binding")
        #expect(Demo.table(rows).split(separator: "\n").count == rows.count + 2)
        #expect(Demo.text(report).contains("call-1: endpointData [alice-"))
    }
}
