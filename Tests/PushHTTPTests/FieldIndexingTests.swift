import NIOHPACK
import Testing
@testable import PushHTTP

@Suite("Which request fields a connection adds to its HPACK table (RFC 7541 §6.2)")
struct FieldIndexingTests {
    @Test("a field whose value changes on every request is sent without indexing once its first requests showed it")
    func changingValuesAreNotIndexed() {
        var indexing = FieldIndexing()
        let decisions = (0..<20).map { indexing.indexing(name: "apns-id", value: "id-\($0)") }
        #expect(decisions.prefix(FieldIndexing.learningRequests).allSatisfy { $0 == .indexable })
        #expect(decisions.dropFirst(FieldIndexing.learningRequests).allSatisfy { $0 == .nonIndexable })
    }

    @Test("a field that repeats its value (the provider token, the topic) stays indexed, and so does one that changes now and then")
    func repeatingValuesStayIndexed() {
        var indexing = FieldIndexing()
        for request in 0..<1000 {
            #expect(indexing.indexing(name: "authorization", value: "bearer token-\(request / 300)") == .indexable)
            #expect(indexing.indexing(name: "apns-topic", value: "com.example.chat") == .indexable)
        }
    }

    @Test("each field is judged on its own: a changing field beside a repeating one does not change how the other is sent")
    func fieldsAreJudgedApart() {
        var indexing = FieldIndexing()
        var last: (HPACKIndexing, HPACKIndexing) = (.indexable, .indexable)
        for request in 0..<50 {
            last = (indexing.indexing(name: "apns-id", value: "id-\(request)"), indexing.indexing(name: "apns-priority", value: "10"))
        }
        #expect(last.0 == .nonIndexable)
        #expect(last.1 == .indexable)
    }

    @Test("a field that stops changing is indexed again after its recent requests repeat")
    func aFieldThatSettlesIsIndexedAgain() {
        var indexing = FieldIndexing()
        for request in 0..<100 { _ = indexing.indexing(name: "content-length", value: String(request)) }
        #expect(indexing.indexing(name: "content-length", value: "300") == .nonIndexable)
        var decision = HPACKIndexing.nonIndexable
        for _ in 0..<(2 * FieldIndexing.window) { decision = indexing.indexing(name: "content-length", value: "300") }
        #expect(decision == .indexable)
    }

    @Test("names beyond the ones a connection follows are sent without indexing, so a request's own field names cannot grow its state")
    func unknownNamesBeyondTheLimitAreNotIndexed() {
        var indexing = FieldIndexing()
        for index in 0..<FieldIndexing.maximumNames { #expect(indexing.indexing(name: "x-field-\(index)", value: "v") == .indexable) }
        #expect(indexing.indexing(name: "x-one-more", value: "v") == .nonIndexable)
        #expect(indexing.indexing(name: "x-field-0", value: "v") == .indexable, "a followed field keeps its place")
    }
}
