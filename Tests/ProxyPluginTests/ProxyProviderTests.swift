import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import ProxySandbox
@testable import ProxyPlugin

@Suite("Push-proxy plugin (BlackBerry Spark protocol 0.2)")
struct ProxyProviderTests {
    static let now: Int64 = 1_795_310_010_000

    static func delivery(
        kind: JobKind = .call, userId: String = "alice", ttl: Int64 = 30, body: String? = nil,
        target: Target = Target.proxy("b4", token: "abcdef", tokenType: "apnsVoip", platform: "ios")
    ) -> Delivery {
        let job = Job(
            id: "j1", createdAt: now - 10_000, ttl: ttl, kind: kind, priority: .high, userId: userId,
            notification: Notification(title: "Bob", body: "Hi"), data: ["callId": "c-77"], body: body,
            targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: now)
    }

    @Test("the request entity has exactly the spec's fields, expiry being the remaining TTL")
    func requestEntity() throws {
        let body = ProxyRequestBody.encode(Self.delivery(body: "opaque-sdk-payload"))
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"version":"0.2","expiry":20,"userId":"alice","isStatus":false,"body":"opaque-sdk-payload","endpointData":[{"endpointId":"b4","platform":"ios","tokenType":"apnsVoip","token":"abcdef","pushType":"voip"}]}"#
        )
        #expect(try ProxySandbox.validate(body).get() == "alice")
    }

    @Test("pushType defaults to voip for calls and cancels, im otherwise; the target's own pushType wins")
    func pushTypes() throws {
        func pushType(_ delivery: Delivery) throws -> JSONValue? {
            let document = try JSONParser.parse(ProxyRequestBody.encode(delivery))
            guard case .array(let endpoints)? = document["endpointData"] else { return nil }
            return endpoints.first?["pushType"]
        }
        let plain = Target.proxy("b")
        #expect(try pushType(Self.delivery(kind: .call, target: plain)) == .string("voip"))
        #expect(try pushType(Self.delivery(kind: .cancel, target: plain)) == .string("voip"))
        #expect(try pushType(Self.delivery(kind: .message, target: plain)) == .string("im"))
        #expect(try pushType(Self.delivery(kind: .message, target: Target.proxy("b", pushType: "voip"))) == .string("voip"))
    }

    @Test("cancels and wake-ups are status pushes")
    func statusPushes() throws {
        for (kind, expected) in [(JobKind.cancel, true), (.wake, true), (.call, false), (.message, false), (.custom, false)] {
            let document = try JSONParser.parse(ProxyRequestBody.encode(Self.delivery(kind: kind)))
            #expect(document["isStatus"] == .bool(expected), "\(kind)")
        }
    }

    @Test("without an opaque body the proxy gets the notification and data as JSON")
    func derivedBody() throws {
        let document = try JSONParser.parse(ProxyRequestBody.encode(Self.delivery(kind: .message)))
        guard case .string(let text)? = document["body"] else {
            Issue.record("body missing")
            return
        }
        #expect(text == #"{"jobId":"j1","kind":"message","notification":{"title":"Bob","body":"Hi"},"data":{"callId":"c-77"}}"#)
    }

    @Test("a now-or-never job carries expiry 0")
    func nowOrNever() throws {
        let document = try JSONParser.parse(ProxyRequestBody.encode(Self.delivery(ttl: 0)))
        #expect(document["expiry"] == .integer(0))
    }

    @Test(
        "status table: 200 done; 400/404 failed without resend; 403 remove binding; 500 retry; 503 retry after Retry-After",
        arguments: [
            (200, nil as String?, DeliveryResult.delivered(providerMessageId: nil, httpStatus: 200)),
            (400, nil, .failed(reason: "proxy could not understand the request", httpStatus: 400)),
            (403, nil, .rejected(reason: "proxy does not know this user", httpStatus: 403)),
            (404, nil, .failed(reason: "proxy is not operational at this URL", httpStatus: 404)),
            (500, nil, .retryable(reason: "proxy answered 500", httpStatus: 500)),
            (503, "9", .retryable(reason: "proxy unavailable", httpStatus: 503, retryAfter: .seconds(9))),
            (502, nil, .retryable(reason: "proxy answered 502", httpStatus: 502)),
        ])
    func statusTable(_ status: Int, _ retryAfter: String?, _ expected: DeliveryResult) {
        let response = HTTPResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: [])
        #expect(ProxyProvider.classify(response) == expected)
    }

    @Test("through the sandbox over HTTP/2 + TLS: delivered, 403 rejected, 503 retryable with its Retry-After")
    func endToEnd() async throws {
        let sandbox = try await ProxySandboxFixture.start()
        let provider = ProxyProvider(
            configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
            transport: TestTransport.make())
        #expect(await provider.deliver(Self.delivery(userId: "alice")) == .delivered(providerMessageId: nil, httpStatus: 200))
        #expect(
            await provider.deliver(Self.delivery(userId: "unknown-zed"))
                == .rejected(
                    reason: "proxy does not know user unknown-zed: stop pushing to it until it registers a new endpoint", httpStatus: 403))
        #expect(
            await provider.deliver(Self.delivery(userId: "busy-zed"))
                == .retryable(reason: "proxy unavailable", httpStatus: 503, retryAfter: .seconds(1)))
        let recorded = sandbox.server.requests
        #expect(recorded.count == 3)
        #expect(recorded.allSatisfy { $0.method == "POST" && $0.header("content-type") == "application/json" })
        await provider.shutdown()
        await sandbox.stop()
    }

    static func userJob(_ userId: String, bindings: [String], app: String? = nil) -> [Delivery] {
        let targets = bindings.map { Target.proxy($0, app: app, token: "tok-\($0)", tokenType: "fcm", platform: "android") }
        let job = Job(
            id: "j-\(userId)", createdAt: now - 1000, ttl: 30, kind: .message, priority: .high, userId: userId,
            notification: Notification(title: "Bob", body: "Hi"), targets: targets)
        return targets.map { Delivery(job: job, target: $0, attempt: 1, now: now) }
    }

    static func deliverTogether(_ provider: ProxyProvider, _ deliveries: [Delivery]) async -> [String: DeliveryResult] {
        await withTaskGroup(of: (String, DeliveryResult).self) { group in
            for delivery in deliveries { group.addTask { (delivery.target.bindingId, await provider.deliver(delivery)) } }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
    }

    @Test(
        "a user's endpoints at one proxy go out in one request (endpointData), each getting the answer; a 403 rejects them all naming the user"
    )
    func oneRequestPerUser() async throws {
        let sandbox = try await ProxySandboxFixture.start()
        let provider = ProxyProvider(
            configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
            transport: TestTransport.make())
        let delivered = await Self.deliverTogether(provider, Self.userJob("alice", bindings: ["phone", "tablet"]))
        #expect(
            delivered == [
                "phone": .delivered(providerMessageId: nil, httpStatus: 200), "tablet": .delivered(providerMessageId: nil, httpStatus: 200),
            ])
        let rejected = await Self.deliverTogether(provider, Self.userJob("unknown-zed", bindings: ["z1", "z2"]))
        let reason = "proxy does not know user unknown-zed: stop pushing to it until it registers a new endpoint"
        #expect(rejected == ["z1": .rejected(reason: reason, httpStatus: 403), "z2": .rejected(reason: reason, httpStatus: 403)])
        let endpoints = sandbox.server.requests.map { request -> [String] in
            guard case .array(let data)? = (try? JSONParser.parse(request.body))?["endpointData"] else { return [] }
            return data.compactMap { if case .string(let id)? = $0["endpointId"] { id } else { nil } }.sorted()
        }
        #expect(endpoints == [["phone", "tablet"], ["z1", "z2"]])
        await provider.shutdown()
        await sandbox.stop()
    }

    @Test("a target whose partner never comes (deduplicated, finished) goes out alone after the gathering window")
    func lateMembersDoNotHoldTheRequest() async throws {
        let sandbox = try await ProxySandboxFixture.start()
        let provider = ProxyProvider(
            configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
            transport: TestTransport.make())
        let alone = Self.userJob("alice", bindings: ["phone", "tablet"])[0]
        #expect(await provider.deliver(alone) == .delivered(providerMessageId: nil, httpStatus: 200))
        #expect(sandbox.server.requests.count == 1)
        await provider.shutdown()
        await sandbox.stop()
    }

    @Test("each app may have its own proxy; targets of other apps use the default one, or fail without one")
    func proxyPerApp() async throws {
        let acme = try await ProxySandboxFixture.start()
        let fallback = try await ProxySandboxFixture.start()
        let configuration = ProxyConfiguration(
            defaultEndpoint: ProxyEndpoint(url: fallback.url, tls: TLSOptions(caFile: fallback.tls.caFile)),
            endpoints: ["acme": ProxyEndpoint(url: acme.url, tls: TLSOptions(caFile: acme.tls.caFile))])
        let provider = ProxyProvider(configuration: configuration, transport: TestTransport.make())
        #expect(
            await provider.deliver(Self.userJob("alice", bindings: ["a"], app: "acme")[0])
                == .delivered(providerMessageId: nil, httpStatus: 200))
        #expect(
            await provider.deliver(Self.userJob("bob", bindings: ["b"], app: "other")[0])
                == .delivered(providerMessageId: nil, httpStatus: 200))
        #expect(acme.server.requests.count == 1)
        #expect(fallback.server.requests.count == 1)
        let onlyAcme = ProxyProvider(
            configuration: ProxyConfiguration(defaultEndpoint: nil, endpoints: configuration.endpoints),
            transport: TestTransport.make())
        guard case .failed(let reason, nil, _, _) = await onlyAcme.deliver(Self.userJob("bob", bindings: ["b"], app: "other")[0]) else {
            Issue.record("a target of an app without a proxy must fail")
            return
        }
        #expect(reason == "no push proxy for app other")
        await provider.shutdown()
        await onlyAcme.shutdown()
        await acme.stop()
        await fallback.stop()
    }

    @Test("apps whose proxies have one URL and one client certificate share that endpoint's slots; another certificate is another endpoint")
    func scopeEndpoints() async {
        let shared = ProxyEndpoint(url: "https://proxy.example", tls: TLSOptions(clientCertificateFile: "/etc/push/a.pem"))
        var otherIdentity = shared
        otherIdentity.tls.clientCertificateFile = CredentialFile(reading: "/etc/push/b.pem")
        let configuration = ProxyConfiguration(
            defaultEndpoint: ProxyEndpoint(url: "https://default.example"),
            endpoints: ["a": shared, "b": shared, "c": otherIdentity])
        let provider = ProxyProvider(configuration: configuration, transport: TestTransport.make())
        let onlyApps = ProxyProvider(
            configuration: ProxyConfiguration(defaultEndpoint: nil, endpoints: configuration.endpoints),
            transport: TestTransport.make())
        func scope(_ app: String, of provider: ProxyProvider) -> DeliveryScope {
            provider.scope(of: Self.userJob("u", bindings: ["x"], app: app)[0].target)
        }
        #expect(scope("a", of: provider).key == "a")
        #expect(scope("a", of: provider).endpoint != nil)
        #expect(scope("a", of: provider).endpoint == scope("b", of: provider).endpoint)
        #expect(scope("a", of: provider).endpoint != scope("c", of: provider).endpoint)
        #expect(
            scope("x", of: provider).endpoint == scope("y", of: provider).endpoint,
            "apps without a proxy of their own share the default one")
        #expect(scope("x", of: provider).endpoint != scope("a", of: provider).endpoint)
        #expect(scope("x", of: onlyApps).endpoint == nil)
        await provider.shutdown()
        await onlyApps.shutdown()
    }

    @Test("mutual TLS with a custom CA: the configured client certificate is presented")
    func mutualTLS() async throws {
        let sandbox = try await ProxySandboxFixture.start(requireClientCertificate: true)
        let withCertificate = ProxyProvider(
            configuration: ProxyConfiguration(
                url: sandbox.url,
                tls: TLSOptions(
                    caFile: sandbox.tls.caFile,
                    clientCertificateFile: sandbox.tls.clientCertificateFile,
                    clientKeyFile: sandbox.tls.clientKeyFile)),
            transport: TestTransport.make())
        #expect(await withCertificate.deliver(Self.delivery()) == .delivered(providerMessageId: nil, httpStatus: 200))
        let withoutCertificate = ProxyProvider(
            configuration: ProxyConfiguration(url: sandbox.url, tls: TLSOptions(caFile: sandbox.tls.caFile)),
            transport: TestTransport.make())
        guard case .retryable = await withoutCertificate.deliver(Self.delivery()) else {
            Issue.record("a handshake without the client certificate must not count as delivered")
            return
        }
        await withCertificate.shutdown()
        await withoutCertificate.shutdown()
        await sandbox.stop()
    }

    @Test(
        "the sandbox refuses entities that break the spec",
        arguments: [
            #"{"version":"0.1","expiry":1,"userId":"u","body":"b","endpointData":[{"endpointId":"e"}]}"#,
            #"{"version":"0.2","userId":"u","body":"b","endpointData":[{"endpointId":"e"}]}"#,
            #"{"version":"0.2","expiry":1,"userId":"u","body":"b","endpointData":[]}"#,
            #"{"version":"0.2","expiry":1,"userId":"u","body":"b","endpointData":[{"endpointId":"e","tokenType":"apns"}]}"#,
            #"{"version":"0.2","expiry":1,"userId":"u","body":"b","endpointData":[{"endpointId":"e","pushType":"alert"}]}"#,
        ])
    func sandboxValidation(_ entity: String) {
        guard case .failure = ProxySandbox.validate(Array(entity.utf8)) else {
            Issue.record("accepted: \(entity)")
            return
        }
    }
}
