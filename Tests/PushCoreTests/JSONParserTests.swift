import Testing
@testable import PushCore

@Suite("Strict JSON parsing of untrusted input")
struct JSONParserTests {
    func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    @Test("objects keep their members, numbers keep integer precision")
    func parsesDocument() throws {
        let value = try parse(#"{"a": [1, -2.5e3, true, null], "b": "x\u00e9\ud83d\ude00\n", "big": 9007199254740993}"#)
        #expect(value["a"] == .array([.integer(1), .double(-2500), .bool(true), .null]))
        #expect(value["b"] == .string("xé😀\n"))
        #expect(value["big"] == .integer(9_007_199_254_740_993))
    }

    @Test("duplicate member names are refused", arguments: [#"{"id":"a","id":"b"}"#])
    func duplicateKeys(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try parse(text) }
    }

    @Test("malformed documents are refused", arguments: [
        "", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "tru", "\"abc", "{\"a\" 1}", "[1] x", "\"\\x\"", "\"\\ud800\"",
        "\"a\u{01}b\"", "99999999999999999999", "1e999",
    ])
    func malformed(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try parse(text) }
    }

    @Test("invalid UTF-8 inside a string is refused")
    func invalidUTF8() {
        let bytes: [UInt8] = Array("{\"a\":\"".utf8) + [0xC3, 0x28] + Array("\"}".utf8)
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes) }
    }

    @Test("nesting deeper than the limit is refused, not a stack overflow")
    func deepNesting() {
        let text = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParser.Failure.self) { try parse(text) }
        #expect((try? parse(String(repeating: "[", count: 32) + String(repeating: "]", count: 32))) != nil)
    }

    @Test("the writer escapes what JSON requires and the parser reads it back")
    func writerRoundTrip() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("text", "quote\" backslash\\ newline\n tab\t nul\u{0} é")
        writer.member("none", nil as String?)
        writer.member("n", Int64(-7))
        writer.key("list")
        writer.beginArray()
        writer.value(true)
        writer.value(1)
        writer.endArray()
        writer.endObject()
        let value = try JSONParser.parse(writer.bytes)
        #expect(value["text"] == .string("quote\" backslash\\ newline\n tab\t nul\u{0} é"))
        #expect(value["none"] == .null)
        #expect(value["n"] == .integer(-7))
        #expect(value["list"] == .array([.bool(true), .integer(1)]))
    }
}
