/// What a push proxy's URL may hold. The proxy authenticates the worker by its TLS client certificate (the protocol
/// has no other credential), so a user or password in the URL is refused at start-up: it would reach logs and the
/// outcome of every probe, and the worker would never send it as the proxy expects.
enum ProxyURL {
    static let credentialsRefused =
        "must not carry credentials (user or password before @): the proxy authenticates the worker by its TLS client certificate"

    /// Whether the URL's authority (between `scheme://` and the path, query or fragment) holds a user or password.
    /// Read from the text, not a parsed `URL`, so a URL Foundation cannot parse is judged too.
    static func carriesCredentials(_ url: String) -> Bool {
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? url[...]
        return afterScheme.prefix { $0 != "/" && $0 != "?" && $0 != "#" }.contains("@")
    }
}
