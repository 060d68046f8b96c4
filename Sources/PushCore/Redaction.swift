/// Shortened forms of secrets for logs, dead-letter headers and command output: enough to
/// tell two apart, never enough to use one. Device tokens, registration tokens, bearer
/// tokens and Web Push endpoints (whose path is the subscription's capability) are secrets.
public enum Redaction {
    /// `abcdef…wxyz` for anything longer than 12 characters; shorter values are hidden whole.
    public static func token(_ value: some StringProtocol) -> String {
        value.count > 12 ? "\(value.prefix(6))…\(value.suffix(4))" : "…"
    }

    /// The scheme and authority of a URL with the path and query shortened: `https://push.example.net/wpush…a1b2`.
    public static func url(_ value: String) -> String {
        guard let schemeEnd = value.range(of: "://") else { return token(value) }
        let rest = value[schemeEnd.upperBound...]
        guard let pathStart = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return value }
        let path = value[pathStart...]
        return String(value[..<pathStart]) + (path.count > 12 ? "\(path.prefix(6))…\(path.suffix(4))" : "/…")
    }
}
