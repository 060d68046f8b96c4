import Foundation
import PushCore

/// Mizu's message files (`fcmmessage.txt`, `pushkitmessage.txt`) turned into templates of
/// `PUSH_TEMPLATES_DIR`: the part after the `--EOF--` mark is cut, bare keywords (`TOKEN`, `"TTLNUMs"`)
/// become `{{TOKEN}}`, and a relative `apns-expiration` becomes the epoch seconds APNs wants.
public enum MizuMessageFiles {
    /// The message files Mizu reads, and where each goes in the templates layout.
    public static let layout: [(file: String, template: String)] = [
        ("fcmmessage.txt", "fcm/default/default.mustache"),
        ("pushkitmessage.txt", "apns/default/default.mustache"),
    ]

    public struct Conversion: Sendable, Equatable {
        public var template: String
        /// What was changed, one line each, for the operator to review.
        public var changes: [String]
    }

    public static func convert(_ text: String) -> Conversion {
        var changes: [String] = []
        var text = text
        if let mark = text.range(of: "--EOF") {
            let line = text[..<mark.lowerBound].filter { $0 == "\n" }.count + 1
            text = String(text[..<mark.lowerBound])
            changes.append("cut at the --EOF-- mark (line \(line)) and everything after it")
        }
        let (marked, counts) = markKeywords(text)
        if !counts.isEmpty {
            changes.append("keywords marked: " + counts.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", "))
        }
        var template = marked
        let relativeExpiration = #/"apns-expiration"(\s*):(\s*)"?\{\{TTLNUM\}\}"?/#
        if template.contains(relativeExpiration) {
            template = template.replacing(relativeExpiration) { match in
                "\"apns-expiration\"\(match.1):\(match.2)\"{{APNSEXPIRATION}}\""
            }
            changes.append("apns-expiration: TTLNUM is a time to live; APNs wants the expiry in epoch seconds: APNSEXPIRATION")
        }
        return Conversion(template: template, changes: changes)
    }

    /// Replaces each bare keyword (longest first, not inside a longer upper-case word's start, not already
    /// inside `{{…}}`) with its Mustache tag; returns the text and how often each keyword was marked.
    static func markKeywords(_ text: String) -> (String, [String: Int]) {
        let keywords = PayloadKeywords.names.sorted { $0.count > $1.count }
        let characters = Array(text)
        var output = ""
        var counts: [String: Int] = [:]
        var index = 0
        var insideTag = false
        while index < characters.count {
            if characters[index] == "{", index + 1 < characters.count, characters[index + 1] == "{" { insideTag = true }
            if characters[index] == "}", index + 1 < characters.count, characters[index + 1] == "}" { insideTag = false }
            let startsWord =
                index == 0 || !(characters[index - 1].isUppercase || characters[index - 1].isNumber || characters[index - 1] == "_")
            if !insideTag, startsWord, characters[index].isUppercase,
                let keyword = keywords.first(where: { matches($0, characters, at: index) })
            {
                output += "{{\(keyword)}}"
                counts[keyword, default: 0] += 1
                index += keyword.count
                continue
            }
            output.append(characters[index])
            index += 1
        }
        return (output, counts)
    }

    private static func matches(_ keyword: String, _ characters: [Character], at index: Int) -> Bool {
        let end = index + keyword.count
        guard end <= characters.count, String(characters[index..<end]) == keyword else { return false }
        // A longer upper-case word (PRIORITY_MAX, TOTAL) is not a keyword followed by text.
        return end == characters.count || !(characters[end].isUppercase || characters[end] == "_")
    }
}
