import PushCore
import PushHTTP
import PushPluginAPI

/// `check-config` for the push proxies: each proxy's client certificate (mutual TLS) loads; with `--probe-providers`,
/// one request to the proxy with it: the protocol has no credential beyond the TLS client certificate, so a completed
/// TLS handshake and any HTTP answer prove the proxy took it (one without a certificate proves the proxy answers).
enum ProxyCredentialCheck {
    static func run(_ endpoints: [(String, ProxyEndpoint)], context: CredentialCheckContext) async -> [CheckResult] {
        var results: [CheckResult] = []
        for (name, endpoint) in endpoints {
            let check = "proxy \(name)"
            let loaded = CheckResult.clientCertificate(endpoint.tls, check: check)
            results.append(loaded)
            guard context.probesProvider, loaded.passed else { continue }
            let request = HTTPRequest(
                method: "GET", url: endpoint.url, timeout: min(context.timeout, endpoint.timeout), tls: endpoint.tls)
            results.append(
                await CheckResult.probe(check + " probe", request, over: context.transport) { response in
                    (true, "\(Redaction.url(endpoint.url)): TLS handshake and HTTP \(response.status)")
                })
        }
        return results
    }
}
