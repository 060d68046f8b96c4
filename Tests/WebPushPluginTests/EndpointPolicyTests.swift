import Testing
@testable import WebPushPlugin

@Suite("Web Push endpoints are untrusted URLs")
struct EndpointPolicyTests {
    static func policy(_ configure: (inout EndpointPolicy.Rules) -> Void = { _ in }) -> EndpointPolicy {
        var rules = EndpointPolicy.Rules()
        configure(&rules)
        return EndpointPolicy(rules)
    }

    @Test("the VAPID origin drops path, query and a default :443, and keeps another allowed port")
    func origin() async {
        let policy = Self.policy { $0.allowedPorts = [443, 8443] }
        guard case .success(let target) = await policy.check("https://198.41.0.4:8443/wpush/v2/abc?x=1") else {
            Issue.record("refused")
            return
        }
        #expect(target.origin == "https://198.41.0.4:8443")
        guard case .success(let explicit) = await policy.check("https://198.41.0.4:443/x") else {
            Issue.record("refused")
            return
        }
        #expect(explicit.origin == "https://198.41.0.4")
        #expect(EndpointPolicy.origin(of: "https://Push.Example.NET:443/a/b") == "https://push.example.net")
    }

    @Test("a target's endpoint is read once, when it is set: scope and check use that reading, and a changed endpoint is read again")
    func endpointReadOnce() async {
        var target = WebPushTarget(endpoint: "https://Push.Example.NET:443/a/b")
        #expect(target.parsedEndpoint == EndpointPolicy.parse("https://push.example.net/a/b"))
        guard case .success(let parts)? = target.parsedEndpoint else {
            Issue.record("not read")
            return
        }
        #expect(parts.origin == "https://push.example.net")
        target.endpoint = "http://push.example.net/a"
        #expect(target.parsedEndpoint == .failure(EndpointPolicy.Refusal("endpoint must be https")))
        target.endpoint = nil
        #expect(target.parsedEndpoint == nil)
        guard case .success(let checked) = await Self.policy().check(EndpointPolicy.parse("https://198.41.0.4/x?y")) else {
            Issue.record("refused")
            return
        }
        #expect(checked.url == "https://198.41.0.4/x?y")
    }

    @Test("the URL handed to the transport is rebuilt from the checked parts")
    func rebuiltURL() async {
        guard case .success(let target) = await Self.policy().check("https://198.41.0.4/wpush/v2/a%2Fb?t=1#fragment") else {
            Issue.record("refused")
            return
        }
        #expect(target.url == "https://198.41.0.4/wpush/v2/a%2Fb?t=1")
    }

    @Test(
        "untrusted endpoints are refused: not https, credentials, loopback, private, link-local, metadata, special-purpose",
        arguments: [
            "http://push.example.net/x", "https://user:pw@push.example.net/x", "https://127.0.0.1/x", "https://localhost/x",
            "https://[::1]/x", "https://10.1.2.3/x", "https://192.168.0.10/x", "https://172.20.0.1/x", "https://169.254.169.254/latest",
            "https://[fe80::1]/x", "https://[fd00::1]/x", "https://0.0.0.0/x", "https://100.64.0.1/x",
            // IPv4 embedded in IPv6 forms is judged as IPv4: mapped, compatible, NAT64 well-known prefix.
            "https://[::ffff:127.0.0.1]/x", "https://[::ffff:10.0.0.1]/x", "https://[::ffff:169.254.169.254]/x",
            "https://[::10.0.0.1]/x", "https://[64:ff9b::a00:1]/x", "https://[64:ff9b::7f00:1]/x",
            // Transition and special-purpose blocks.
            "https://[64:ff9b:1::1]/x", "https://[2002:a00:1::1]/x", "https://[2001:0:4136:e378::1]/x", "https://[fec0::1]/x",
            "https://[100::1]/x", "https://[2001:db8::1]/x", "https://192.88.99.1/x", "https://192.0.2.1/x",
            // Not a host we could check.
            "https://%31%32%37.0.0.1/x", "https://push.example.net\r\nX-Injected: 1/x", "https:///x",
        ])
    func refused(_ endpoint: String) async {
        guard case .failure(let refusal) = await Self.policy().check(endpoint) else {
            Issue.record("\(endpoint) was allowed")
            return
        }
        #expect(!refusal.reason.contains("10.0.0.1") && !refusal.reason.contains("127.0.0.1"))
    }

    @Test(
        "public addresses, also through NAT64, are allowed on 443",
        arguments: [
            "https://198.41.0.4/x", "https://[2606:4700::1111]/x", "https://[64:ff9b::c629:4]/x",
        ])
    func allowed(_ endpoint: String) async {
        guard case .success = await Self.policy().check(endpoint) else {
            Issue.record("\(endpoint) was refused")
            return
        }
    }

    @Test("only port 443 unless PUSH_WEBPUSH_ALLOWED_PORTS lists others")
    func ports() async {
        guard case .failure(let refusal) = await Self.policy().check("https://198.41.0.4:8443/x") else {
            Issue.record("8443 was allowed")
            return
        }
        #expect(refusal.reason.contains("PUSH_WEBPUSH_ALLOWED_PORTS"))
        guard case .failure = await Self.policy().check("https://198.41.0.4:22/x") else {
            Issue.record("22 was allowed")
            return
        }
        guard case .success = await Self.policy { $0.allowedPorts = [8443] }.check("https://198.41.0.4:8443/x") else {
            Issue.record("a listed port was refused")
            return
        }
    }

    @Test("PUSH_WEBPUSH_ALLOWED_NETWORKS lets exactly its blocks through, also in their IPv4-mapped form")
    func allowedNetworks() async {
        let policy = Self.policy { $0.allowedNetworks = [IPNetwork("10.20.0.0/16")!] }
        guard case .success = await policy.check("https://10.20.3.4/x") else {
            Issue.record("the allowed block was refused")
            return
        }
        guard case .success = await policy.check("https://[::ffff:10.20.3.4]/x") else {
            Issue.record("its mapped form was refused")
            return
        }
        guard case .failure = await policy.check("https://10.21.0.1/x") else {
            Issue.record("a neighbouring block was allowed")
            return
        }
        guard case .failure = await policy.check("https://127.0.0.1/x") else {
            Issue.record("loopback was allowed")
            return
        }
        #expect(IPNetwork("10.0.0.0/33") == nil)
        #expect(IPNetwork("fd00::/129") == nil)
        #expect(IPNetwork("not-an-address/8") == nil)
    }

    @Test(
        "a network's own NAT64 prefix finds the IPv4 address at every length RFC 6052 defines (its §2.4 examples)",
        arguments: [
            ("2001:db8::/32", "2001:db8:c000:221::"), ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
            ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"), ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
            ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"), ("2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"),
        ])
    func nat64PrefixLengths(prefix: String, address: String) throws {
        let nat64 = try #require(NAT64Prefix(prefix))
        #expect(nat64.embeddedIPv4(in: try #require(IPAddress(address))) == IPAddress("192.0.2.33"))
        #expect(nat64.embeddedIPv4(in: try #require(IPAddress("2001:db9::1"))) == nil)
    }

    @Test("an endpoint under a PUSH_WEBPUSH_NAT64_PREFIXES prefix is judged by the IPv4 address it embeds")
    func nat64PrefixesJudgeTheEmbeddedAddress() async {
        let translated = "https://[2a00:1450:4001::10.0.0.1]/x"
        let policy = Self.policy { $0.nat64Prefixes = [NAT64Prefix("2a00:1450:4001::/96")!] }
        guard case .failure(let refusal) = await policy.check(translated) else {
            Issue.record("a private IPv4 address behind the cluster's NAT64 prefix was allowed")
            return
        }
        #expect(refusal == .address)
        guard case .success = await policy.check("https://[2a00:1450:4001::8.8.8.8]/x") else {
            Issue.record("a public IPv4 address behind the NAT64 prefix was refused")
            return
        }
        let allowing = Self.policy {
            $0.nat64Prefixes = [NAT64Prefix("2a00:1450:4001::/96")!]
            $0.allowedNetworks = [IPNetwork("10.0.0.0/8")!]
        }
        guard case .success = await allowing.check(translated) else {
            Issue.record("an allowed IPv4 block behind the NAT64 prefix was refused")
            return
        }
        #expect(NAT64Prefix("2001:db8::/33") == nil)
        #expect(NAT64Prefix("10.0.0.0/8") == nil)
    }

    @Test("PUSH_WEBPUSH_ALLOW_PRIVATE lets loopback through; the allow-list matches hosts and their subdomains only")
    func allowances() async {
        guard case .success = await Self.policy { $0.allowPrivateNetworks = true }.check("https://127.0.0.1/x") else {
            Issue.record("allowPrivate should allow loopback")
            return
        }
        // No DNS here: an allowed name gets as far as resolving; a refused one never does.
        let listed = Self.policy {
            $0.allowPrivateNetworks = true
            $0.allowedHosts = ["push.services.mozilla.com", "fcm.googleapis.com"]
        }
        let notListed = "is not in PUSH_WEBPUSH_ALLOWED_HOSTS"
        guard case .failure(let subdomain) = await listed.check("https://updates.push.services.mozilla.com.invalid/x"),
            subdomain.reason.contains(notListed)
        else {
            Issue.record("a suffix that is not a whole label matched")
            return
        }
        let allowed = await listed.check("https://updates.push.services.mozilla.com/wpush/v2/x")
        if case .failure(let refusal) = allowed { #expect(!refusal.reason.contains(notListed)) }
        guard case .failure(let lookalike) = await listed.check("https://evilfcm.googleapis.com.attacker.net/x"),
            lookalike.reason.contains(notListed)
        else {
            Issue.record("a host merely containing an allowed name was allowed")
            return
        }
    }
}
