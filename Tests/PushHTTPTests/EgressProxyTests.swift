import Testing
@testable import PushHTTP

/// `HTTPS_PROXY` and `NO_PROXY` as curl reads them (curl's manual, ENVIRONMENT and `--proxy`; libcurl's CURLOPT_NOPROXY).
@Suite("The egress proxy is read from HTTPS_PROXY and NO_PROXY with curl's rules")
struct EgressProxyTests {
    static func proxy(_ environment: [String: String]) throws(EgressProxyError) -> EgressProxy? {
        try EgressProxy.fromEnvironment { environment[$0] }
    }

    @Test("HTTPS_PROXY names host, port and Basic credentials, percent-decoded; the description masks them")
    func readsTheURL() throws {
        let proxy = try #require(try Self.proxy(["HTTPS_PROXY": "http://push%40corp:p%3Ass@Proxy.Corp:3128/"]))
        #expect(proxy.host == "proxy.corp")
        #expect(proxy.port == 3128)
        #expect(proxy.user == "push@corp")
        #expect(proxy.password == "p:ss")
        #expect(proxy.proxyAuthorization == "Basic cHVzaEBjb3JwOnA6c3M=")
        #expect(proxy.description == "http://***@proxy.corp:3128")
        #expect(!"\(proxy)".contains("p:ss") && !"\(proxy)".contains("push@corp"))
    }

    @Test("the lower-case https_proxy wins over HTTPS_PROXY, as in curl; an empty value is no proxy")
    func lowerCaseWins() throws {
        let proxy = try Self.proxy(["https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"])
        #expect(proxy?.host == "lower")
        #expect(try Self.proxy(["HTTPS_PROXY": "  "]) == nil)
        #expect(try Self.proxy([:]) == nil)
        let rules = try #require(try Self.proxy(["HTTPS_PROXY": "http://p:1", "no_proxy": "a.test", "NO_PROXY": "b.test"])).noProxy
        #expect(rules.matches("a.test") && !rules.matches("b.test"))
    }

    @Test("a proxy without a scheme is an http:// one, and without a port listens on 1080 (curl's default)")
    func curlDefaults() throws {
        let proxy = try #require(try Self.proxy(["HTTPS_PROXY": "proxy.corp"]))
        #expect(proxy.port == 1080)
        #expect(try Self.proxy(["HTTPS_PROXY": "http://[fd00::1]:8080"])?.authority == "[fd00::1]:8080")
    }

    @Test(
        "a malformed proxy URL is refused with one line naming the variable, never its credentials",
        arguments: [
            "https://proxy.corp:3128", "socks5://proxy.corp:1080", "http://proxy.corp:0", "http://proxy.corp:99999",
            "http://user:pa%zzss@proxy.corp:3128", "http://:secret@proxy.corp:3128", "http://proxy.corp:3128/path",
            "http://", "http://[fd00::1:3128", "http://pro xy:3128",
        ])
    func malformed(_ url: String) throws {
        do {
            _ = try Self.proxy(["https_proxy": url])
            Issue.record("accepted \(url)")
        } catch {
            #expect(error.description.hasPrefix("https_proxy must be http://[user:password@]host:port: "))
            #expect(!error.description.contains("secret") && !error.description.contains("\n"))
        }
    }

    @Test("an https:// proxy is refused with the reason: TLS to the proxy is not implemented")
    func httpsProxyRefused() {
        do {
            _ = try EgressProxy(url: "https://proxy.corp:3128")
            Issue.record("an https:// proxy was accepted")
        } catch {
            #expect(error.reason == "an https:// proxy (TLS to the proxy) is not supported; name the proxy with http://")
        }
    }

    @Test("NO_PROXY: a name matches itself and every name under it, with or without a leading dot, case-insensitive")
    func domainSuffixes() {
        for list in ["example.com", ".example.com", "EXAMPLE.com."] {
            let rules = NoProxyRules(list)
            #expect(rules.matches("example.com"), "\(list)")
            #expect(rules.matches("a.example.com"), "\(list)")
            #expect(rules.matches("A.B.Example.COM."), "\(list)")
            #expect(!rules.matches("notexample.com"), "\(list)")
            #expect(!rules.matches("example.com.org"), "\(list)")
        }
    }

    @Test("NO_PROXY: entries are separated by commas and spaces; a lone * matches every host; empty matches none")
    func listsAndWildcard() {
        let rules = NoProxyRules(" kafka.svc , redis.svc  otel.svc,")
        #expect(rules.matches("b-0.kafka.svc") && rules.matches("redis.svc") && rules.matches("otel.svc"))
        #expect(!rules.matches("api.push.apple.com"))
        #expect(NoProxyRules("*").matches("api.push.apple.com"))
        #expect(NoProxyRules(" * ").matches("10.0.0.1"))
        #expect(!NoProxyRules("").matches("localhost"))
        #expect(NoProxyRules("").isEmpty)
    }

    @Test(
        "NO_PROXY: IP addresses match IP literals exactly or by CIDR (curl 7.86), IPv6 without brackets; names are never resolved to match")
    func addresses() {
        let rules = NoProxyRules("10.0.0.0/8,192.168.1.7,fd00::/8,::1")
        #expect(rules.matches("10.20.30.40"))
        #expect(rules.matches("192.168.1.7") && !rules.matches("192.168.1.8"))
        #expect(rules.matches("fd00:1::2") && rules.matches("[fd00:1::2]") && rules.matches("::1"))
        #expect(!rules.matches("fe80::1") && !rules.matches("11.0.0.1"))
        #expect(!rules.matches("ten.example"), "a name is not looked up")
        #expect(!NoProxyRules("example.com").matches("93.184.216.34"))
        #expect(NoProxyRules("10.1.2.3/0").matches("203.0.113.9"), "a /0 matches every address of its family")
    }

    @Test("NO_PROXY: a port in an entry is ignored, as the request's port is")
    func portsIgnored() {
        let rules = NoProxyRules("example.com:443,10.0.0.1:8080,[fd00::1]:443")
        #expect(rules.matches("a.example.com") && rules.matches("10.0.0.1") && rules.matches("fd00::1"))
    }

    @Test("NO_PROXY as handed to libcurl lists what was read, so curl matches what the HTTP/2 client matches")
    func curlList() {
        #expect(NoProxyRules(".Example.com:443, 10.0.0.0/8 ::1").curlList == "example.com,10.0.0.0/8,::1/128")
        #expect(NoProxyRules("*").curlList == "*")
    }

    @Test("the CONNECT request names the target and Host, and carries Basic credentials only when the URL has some")
    func connectRequest() throws {
        let withCredentials = try EgressProxy(url: "http://u:p@proxy:3128")
        #expect(
            HTTPConnectTunnel.request(target: "api.push.apple.com:443", proxy: withCredentials)
                == "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n")
        #expect(
            HTTPConnectTunnel.request(target: "[2001:db8::1]:443", proxy: try EgressProxy(url: "http://proxy:3128"))
                == "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n")
    }

    @Test("the proxy's status line is read with its reason cut to printable ASCII; anything but HTTP/1.x is no answer")
    func statusLine() {
        #expect(
            HTTPConnectTunnel.status(of: Array("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n".utf8))?.text
                == "407 Proxy Authentication Required")
        #expect(HTTPConnectTunnel.status(of: Array("HTTP/1.0 200 Connection established\r\n\r\n".utf8))?.code == 200)
        #expect(HTTPConnectTunnel.status(of: Array("HTTP/1.1 403 \u{1B}[31mno\r\n\r\n".utf8))?.text == "403 [31mno")
        #expect(HTTPConnectTunnel.status(of: Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)) == nil)
        #expect(HTTPConnectTunnel.endOfHead(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)) == 19)
        #expect(HTTPConnectTunnel.endOfHead(Array("HTTP/1.1 200 OK\r\n".utf8)) == nil)
    }
}
