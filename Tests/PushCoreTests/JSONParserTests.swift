import Foundation
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

    /// Objects of up to 16 members are checked by scanning, larger ones with a set: both ways, wherever the repeat falls.
    static let duplicates: [String] =
        [#"{"id":"a","id":"b"}"#]
        + [1, 15, 16, 17, 40].flatMap { count -> [String] in
            let members = (0..<count).map { #""m\#($0)":\#($0)"# }
            return [
                "{" + (members + [#""m0":"again""#]).joined(separator: ",") + "}",
                "{" + (members + [#""m\#(count - 1)":"again""#]).joined(separator: ",") + "}",
            ]
        }

    @Test("duplicate member names are refused", arguments: duplicates)
    func duplicateKeys(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try parse(text) }
    }

    @Test("objects with many distinct members keep them all, in document order")
    func manyMembers() throws {
        for count in [15, 16, 17, 70] {
            let text = "{" + (0..<count).map { #""m\#($0)":\#($0)"# }.joined(separator: ",") + "}"
            guard case .object(let members) = try parse(text) else {
                Issue.record("not an object")
                continue
            }
            #expect(members.map(\.key) == (0..<count).map { "m\($0)" })
        }
    }

    @Test("objects nested in objects and arrays each keep their own members, in document order")
    func nestedObjectsKeepTheirMembers() throws {
        let value = try parse(#"{"a":1,"inner":{"x":"1","y":{"deep":true},"z":[{"p":1,"q":2},{}]},"b":2,"list":[{"k":"v"}],"c":3}"#)
        guard case .object(let outer) = value else {
            Issue.record("not an object")
            return
        }
        #expect(outer.map(\.key) == ["a", "inner", "b", "list", "c"])
        guard case .object(let inner)? = value["inner"] else {
            Issue.record("inner is not an object")
            return
        }
        #expect(inner.map(\.key) == ["x", "y", "z"])
        #expect(value["inner"]?["y"] == .object([("deep", .bool(true))]))
        #expect(value["inner"]?["z"] == .array([.object([("p", .integer(1)), ("q", .integer(2))]), .object([])]))
        #expect(value["list"] == .array([.object([("k", .string("v"))])]))
        #expect(value["c"] == .integer(3))
    }

    @Test(
        "malformed documents are refused",
        arguments: [
            "", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "tru", "\"abc", "{\"a\" 1}", "[1] x", "\"\\x\"", "\"\\ud800\"",
            "\"a\u{01}b\"", "99999999999999999999", "1e999",
        ])
    func malformed(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try parse(text) }
    }

    @Test(
        "invalid UTF-8 inside a string is refused, with or without escapes beside it",
        arguments: [
            [0xC3, 0x28], [0x80], [0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0x61, 0xE2, 0x28, 0xA1],
        ] as [[UInt8]])
    func invalidUTF8(_ sequence: [UInt8]) {
        for escapeBeside in [false, true] {
            let content = sequence + (escapeBeside ? Array("\\n".utf8) : [])
            let bytes: [UInt8] = Array("{\"a\":\"".utf8) + content + Array("\"}".utf8)
            #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes) }
        }
    }

    @Test("a string is accepted exactly when its bytes are valid UTF-8, and read back byte for byte")
    func utf8AcceptedExactlyWhenValid() throws {
        var generator = SystemRandomNumberGenerator()
        let pieces: [[UInt8]] = [
            [0x61], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0x80], [0xC3], [0xE2, 0x82],
            [0xED, 0xA0, 0x80], [0xF8], [0xC1, 0x81], [0xF4, 0x90, 0x80, 0x80], [0xEF, 0xBF, 0xBD],
        ]
        for _ in 0..<2_000 {
            var content: [UInt8] = []
            for _ in 0..<Int.random(in: 0...6, using: &generator) { content += pieces.randomElement(using: &generator)! }
            let document = [0x22] + content + [0x22]
            let valid = String(validating: content, as: UTF8.self) != nil
            if valid {
                let value = try JSONParser.parse(document)
                #expect(value == .string(String(decoding: content, as: UTF8.self)))
                if case .string(let text) = value { #expect(Array(text.utf8) == content) }
            } else {
                #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(document) }
            }
        }
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

    @Test(
        "every control character, quote and backslash is escaped wherever it falls, from a String or from UTF-8 bytes; other text is copied as it is",
        arguments: ["", "plain", "\"", "\\", "a\u{1F}", "\u{0}b", "a\"b\\c\nd", "é😀\t", String(repeating: "x", count: 300) + "\u{7}"])
    func writerEscapes(_ text: String) throws {
        var writer = JSONWriter()
        writer.value(text)
        #expect(try JSONParser.parse(writer.bytes) == .string(text))
        #expect(!writer.bytes.dropFirst().dropLast().contains { $0 < 0x20 })
        let escaped = text.unicodeScalars.map { scalar -> String in
            switch scalar {
            case "\"": "\\\""
            case "\\": "\\\\"
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            case _ where scalar.value < 0x20: "\\u00" + String(format: "%02x", scalar.value)
            default: String(scalar)
            }
        }.joined()
        #expect(writer.string == "\"" + escaped + "\"")
        var fromString = JSONWriter()
        fromString.beginObject()
        fromString.member("s", text)
        fromString.endObject()
        var fromBytes = JSONWriter()
        fromBytes.beginObject()
        fromBytes.member("s", quoting: Array(text.utf8))
        fromBytes.endObject()
        #expect(fromBytes.string == fromString.string)
        #expect(fromBytes.string == "{\"s\":\"" + escaped + "\"}")
    }
}

@Suite("Fields: typed reads that remember what was read")
struct FieldsTests {
    static func fields(_ count: Int) -> Fields {
        Fields(members: (0..<count).map { ("m\($0)", JSONValue.integer(Int64($0))) }, path: "x.")
    }

    @Test("the first member nobody read is refused by name, before and beyond the 64th member", arguments: [0, 5, 63, 64, 65, 69])
    func unreadMemberIsRefused(_ skipped: Int) throws {
        var fields = Self.fields(70)
        for index in 0..<70 where index != skipped { _ = try fields.optionalInteger("m\(index)", in: 0...100) }
        #expect(!fields.wasRead("m\(skipped)"))
        #expect(fields.wasRead("m\((skipped + 1) % 70)"))
        #expect(throws: JobRejection(.invalidField, "x.m\(skipped) is not a field of the v1 contract")) { try fields.rejectUnread() }
        _ = try fields.optionalInteger("m\(skipped)", in: 0...100)
        try fields.rejectUnread()
    }

    @Test("reading an absent member marks nothing; a null member counts as read and absent")
    func absentAndNull() throws {
        var fields = Fields(members: [("a", .null), ("b", .integer(1))], path: "")
        #expect(try fields.optionalInteger("zzz", in: 0...1) == nil)
        #expect(!fields.wasRead("zzz"))
        #expect(try fields.optionalInteger("a", in: 0...1) == nil)
        #expect(fields.wasRead("a"))
        #expect(throws: JobRejection(.invalidField, "b is not a field of the v1 contract")) { try fields.rejectUnread() }
    }
}
