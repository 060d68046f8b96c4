import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI
import PushSandbox
import Synchronization
import Testing
import TestSupport
import WebPushSandbox
@testable import WebPushPlugin

/// Behind the egress proxy the endpoint guard still holds: the worker resolves and checks the push service's address and
/// tunnels to that address, so the proxy cannot be steered elsewhere; only `PUSH_WEBPUSH_RESOLVE_VIA_PROXY` leaves the
/// name to the proxy.
@Suite("Web Push through the egress proxy keeps its address guard", .enabled(if: SquidProcess.isInstalled, "squid is not installed"))
struct WebPushEgressProxyTests {
    /// The push service's name: the worker's resolver (injected) and squid's hosts file both map it to 127.0.0.1.
    static let host = "push.sandbox.test"

    /// The names the worker looked up.
    final class Lookups: Sendable {
        private let names = Mutex<[String]>([])
        var all: [String] { names.withLock { $0 } }

        func resolver() -> HostResolver {
            HostResolver(lookup: { [self] name in
                names.withLock { $0.append(name) }
                return name == WebPushEgressProxyTests.host ? .found([IPAddress("127.0.0.1")!]) : .noSuchHost
            })
        }
    }

    struct Harness {
        let tls: SandboxTLS
        let instance: WebPushSandboxInstance
        let squid: SquidProcess
        let proxy: EgressProxy

        static func start() async throws -> Harness {
            let tls = try SandboxTLS.make(serverNames: [host])
            let instance = try await WebPushSandboxInstance.start(tls: tls, host: host)
            let squid = try await SquidProcess.launch(hosts: [host], connectPorts: [instance.server.port])
            return Harness(tls: tls, instance: instance, squid: squid, proxy: try EgressProxy(url: squid.url()))
        }

        func provider(allowPrivate: Bool, resolveViaProxy: Bool = false, lookups: Lookups) throws -> WebPushProvider {
            var configuration = WebPushConfiguration(
                vapidKey: try PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
                allowPrivateNetworks: allowPrivate, allowedPorts: [instance.server.port], timeout: .seconds(60),
                dnsTimeout: .seconds(30))
            configuration.egressProxy = proxy
            configuration.resolveViaProxy = resolveViaProxy
            return try WebPushProvider(
                configuration: configuration,
                transport: NIOHTTP2Transport(configuration: HTTPTransportConfiguration(egressProxy: proxy), fallback: NoFallback()),
                resolver: lookups.resolver())
        }

        func delivery() throws -> Delivery {
            let subscription = try instance.sandbox.subscribe()
            let target = Target.webPush(
                "w1", endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
            let job = Job(
                id: "job-proxy", createdAt: currentTimeMilliseconds(), ttl: 600, kind: .message, priority: .high, userId: "u",
                notification: Notification(title: "Erin", body: "Hello"), targets: [target])
            return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
        }

        func stop() async {
            squid.remove()
            await instance.server.stop()
            tls.remove()
        }
    }

    @Test("the worker resolves and checks the push service's address and the tunnel goes to it: CONNECT 127.0.0.1:port, TLS for the name")
    func connectsToTheCheckedAddress() async throws {
        let harness = try await Harness.start()
        let lookups = Lookups()
        let provider = try harness.provider(allowPrivate: true, lookups: lookups)
        let result = await provider.deliver(try harness.delivery())
        guard case .delivered(_, 201, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        await provider.shutdown()
        #expect(lookups.all == [Self.host])
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects == [SquidProcess.Connect(target: "127.0.0.1:\(harness.instance.server.port)", status: 200)])
        #expect(harness.instance.sandbox.messages.count == 1)
        await harness.stop()
    }

    @Test("a push service on a private address is refused before any CONNECT, as without a proxy")
    func privateAddressRefusedWithoutConnect() async throws {
        let harness = try await Harness.start()
        let refusing = try harness.provider(allowPrivate: false, lookups: Lookups())
        let result = await refusing.deliver(try harness.delivery())
        guard case .failed(let reason, _, _, _) = result else {
            Issue.record("not refused: \(result)")
            return
        }
        #expect(reason == "endpoint refused, not sent: endpoint host is not a public address this worker may contact")
        await refusing.shutdown()
        // A delivery allowed afterwards through the same proxy: once its tunnel is logged, the refused one would be too.
        let allowed = try harness.provider(allowPrivate: true, lookups: Lookups())
        _ = await allowed.deliver(try harness.delivery())
        await allowed.shutdown()
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects.count == 1, "only the allowed delivery's tunnel: \(connects)")
        #expect(harness.instance.sandbox.messages.count == 1)
        await harness.stop()
    }

    @Test("with PUSH_WEBPUSH_RESOLVE_VIA_PROXY the worker resolves nothing and the CONNECT names the host, which the proxy resolves")
    func resolveViaProxy() async throws {
        let harness = try await Harness.start()
        let lookups = Lookups()
        // The private-address guard would refuse 127.0.0.1: it is the proxy's to enforce now, and squid here allows it.
        let provider = try harness.provider(allowPrivate: false, resolveViaProxy: true, lookups: lookups)
        let result = await provider.deliver(try harness.delivery())
        guard case .delivered(_, 201, _) = result else {
            Issue.record("not delivered: \(result)")
            return
        }
        await provider.shutdown()
        #expect(lookups.all.isEmpty, "the worker looked nothing up")
        let connects = await harness.squid.connects(atLeast: 1)
        #expect(connects == [SquidProcess.Connect(target: "\(Self.host):\(harness.instance.server.port)", status: 200)])
        await harness.stop()
    }

    @Test("a host left to the proxy is never sent without it: a transport with no proxy for it refuses the request unsent")
    func resolvedByProxyNeedsTheProxy() async throws {
        let transport = NIOHTTP2Transport(fallback: NoFallback())
        defer { transport.shutdown() }
        var request = HTTPRequest(url: "https://\(Self.host):443/push/1")
        request.resolvedByProxy = true
        do {
            _ = try await transport.send(request)
            Issue.record("sent without the proxy")
        } catch {
            #expect(error == .invalidRequest("the host was left for an egress proxy to resolve, and none applies to it"))
        }
    }

    @Test("PUSH_WEBPUSH_RESOLVE_VIA_PROXY applies only to hosts the proxy serves: a NO_PROXY host is resolved and checked here")
    func noProxyHostsAreStillChecked() async {
        let proxy = try! EgressProxy(url: "http://proxy.corp:3128", noProxy: NoProxyRules("internal.test"))
        let lookups = Lookups()
        let policy = EndpointPolicy(EndpointPolicy.Rules(resolvingProxy: proxy), resolver: lookups.resolver())
        guard case .success(let proxied) = await policy.check("https://\(Self.host)/push/1") else {
            Issue.record("refused a host the proxy resolves")
            return
        }
        #expect(proxied.resolvedByProxy && proxied.pinnedResolution == nil)
        guard case .failure(let refusal) = await policy.check("https://push.internal.test/push/1") else {
            Issue.record("a NO_PROXY host was not checked")
            return
        }
        #expect(refusal == .noSuchHost)
        #expect(lookups.all == ["push.internal.test"])
    }

    @Test("PUSH_WEBPUSH_RESOLVE_VIA_PROXY is off by default; the plugin knows the proxy from HTTPS_PROXY and NO_PROXY")
    func settingIsRead() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("vapid-\(UUID().uuidString).pem").path
        try PrivateKey.generateP256().pem().write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let base = ["PUSH_WEBPUSH_VAPID_KEY_FILE": path, "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:ops@example.com"]
        var reader = SettingsReader(base)
        let plain = try #require(WebPushPlugin.configuration(&reader))
        #expect(!plain.resolveViaProxy && plain.egressProxy == nil)
        reader = SettingsReader(
            base.merging([
                "PUSH_WEBPUSH_RESOLVE_VIA_PROXY": "true", "HTTPS_PROXY": "http://u:p@proxy.corp:3128", "NO_PROXY": "internal.test",
            ]) { $1 })
        let proxied = try #require(WebPushPlugin.configuration(&reader))
        #expect(reader.problems.isEmpty)
        #expect(proxied.resolveViaProxy)
        #expect(proxied.egressProxy?.authority == "proxy.corp:3128")
        #expect(proxied.egressProxy?.applies(to: "push.internal.test") == false)
    }
}
