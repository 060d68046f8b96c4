import PushCore
import PushKafka
import Testing
@testable import PushPipeline

@Suite("CloudEvents headers of outcomes and dead letters")
struct CloudEventHeadersTests {
    private func outcome(job: String, binding: String, status: Outcome.Status = .delivered, attempts: Int = 1) -> Outcome {
        Outcome(jobId: job, userId: "u", bindingId: binding, provider: .apns, app: "a", status: status, attempts: attempts, at: 0)
    }

    private func header(_ name: String, in headers: [KafkaHeader]) -> String? {
        headers.first { $0.name == name }.map { String(decoding: $0.value, as: UTF8.self) }
    }

    @Test("ce_id is the same for the same outcome published again, and differs when the job, binding, status or attempts differ")
    func idsNameOneOutcome() {
        let base = outcome(job: "j", binding: "b")
        #expect(CloudEventHeaders.id(of: base) == CloudEventHeaders.id(of: outcome(job: "j", binding: "b")))
        let others = [
            outcome(job: "j2", binding: "b"), outcome(job: "j", binding: "b2"), outcome(job: "j", binding: "b", status: .retrying),
            outcome(job: "j", binding: "b", attempts: 2),
        ]
        #expect(Set(others.map(CloudEventHeaders.id(of:)) + [CloudEventHeaders.id(of: base)]).count == 5)
    }

    @Test("ids whose job and binding ids hold the separator never collide: the job id's length comes first")
    func separatorsInIdsDoNotCollide() {
        #expect(
            CloudEventHeaders.id(of: outcome(job: "a/b", binding: "c")) != CloudEventHeaders.id(of: outcome(job: "a", binding: "b/c")))
    }

    @Test("ce_source is /push-worker/<group>, the group percent-encoded outside RFC 3986's unreserved characters")
    func sourceIsAURIReference() {
        #expect(CloudEventHeaders(consumerGroup: "push-worker").source == "/push-worker/push-worker")
        #expect(CloudEventHeaders(consumerGroup: "a b/ü~._-").source == "/push-worker/a%20b%2F%C3%BC~._-")
    }

    @Test("an outcome's ce_type names its status and ce_time is its time in RFC 3339 UTC with milliseconds")
    func typeAndTime() {
        var expired = outcome(job: "j", binding: "b", status: .expired, attempts: 0)
        expired.at = 1_764_201_600_123
        let headers = CloudEventHeaders(consumerGroup: "g").headers(of: expired)
        #expect(header("ce_type", in: headers) == "io.push-worker.outcome.expired")
        #expect(header("ce_time", in: headers) == "2025-11-27T00:00:00.123Z")
        #expect(header("ce_subject", in: headers) == "b")
        #expect(header("content-type", in: headers) == "application/json")
        #expect(Set(headers.map(\.name)).count == headers.count)
    }
}
