import Mustache
import PushCore

/// Mustache content type that escapes every `{{keyword}}` as the inside of a JSON string,
/// so user text (a display name like `"},"x":"`) can never leave the string it stands in.
struct JSONStringContentType: MustacheContentType {
    static let name = "PUSH_JSON_STRING"
    /// Prepended to every template: switches `{{…}}` from HTML to JSON-string escaping.
    static let pragma = "{{% CONTENT_TYPE: \(name)}}"

    /// Registers the content type once per process (Mustache keeps a global table).
    static let registered: Void = MustacheContentTypes.register(JSONStringContentType(), named: name)

    func escapeText(_ text: String) -> String { Self.escape(text) }

    /// The text as it appears between the quotes of a JSON string (no quotes added).
    static func escape(_ text: String) -> String {
        var writer = JSONWriter(capacity: text.utf8.count + 2)
        writer.value(text)
        return String(decoding: writer.bytes.dropFirst().dropLast(), as: UTF8.self)
    }
}
