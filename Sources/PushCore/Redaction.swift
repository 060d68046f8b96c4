/// Shortened forms of secrets for logs, dead-letter headers and command output: enough to
/// tell two apart, never enough to use one. Device tokens, registration tokens, bearer
/// tokens and Web Push endpoints (whose path is the subscription's capability) are secrets.
public enum Redaction {
    /// `abcdef…wxyz` for anything longer than 12 characters; shorter values are hidden whole.
    public static func token(_ value: some StringProtocol) -> String {
        value.count > 12 ? "\(value.prefix(6))…\(value.suffix(4))" : "…"
    }

    /// The scheme and host of a URL with the path and query shortened: `https://push.example.net/wpush…a1b2`. A user or
    /// password before the host is never shown: `https://…@proxy.example/…`.
    public static func url(_ value: String) -> String {
        guard let schemeEnd = value.range(of: "://") else { return token(value) }
        let rest = value[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? value.endIndex
        let authority = value[schemeEnd.upperBound..<pathStart]
        let host = authority.lastIndex(of: "@").map { "…@" + authority[authority.index(after: $0)...] } ?? String(authority)
        let shown = String(value[..<schemeEnd.upperBound]) + host
        guard pathStart < value.endIndex else { return shown }
        let path = value[pathStart...]
        return shown + (path.count > 12 ? "\(path.prefix(6))…\(path.suffix(4))" : "/…")
    }
}
