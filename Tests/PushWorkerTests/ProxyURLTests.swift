import Foundation
import PushCore
import Testing
import TestSupport
@testable import PushWorker

@Suite("Push-proxy URLs: no credentials in them, and logged redacted")
struct ProxyURLTests {
    static let certificateAuth =
        "the proxy authenticates the worker by its TLS client certificate: PUSH_PROXY_CERT_FILE and PUSH_PROXY_KEY_FILE, the key's password in PUSH_PROXY_KEY_PASSWORD_FILE"

    @Test(
        "credentials in PUSH_PROXY_URL (user:password@) stop start-up with a line that names the client-certificate settings and never repeats them",
        arguments: [
            "https://push:s3cret@proxy.example/push", "https://s3cret@proxy.example", "https://push:s3cret@proxy.example?to=x",
            "https://push:s3 cret@proxy.example/push",
        ])
    func credentialsInTheDefaultProxyURLAreRefused(_ url: String) {
        let lines = problems(["PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_PROXY_URL": url])
        #expect(lines == ["PUSH_PROXY_URL must not carry credentials (user or password before @): " + Self.certificateAuth])
        #expect(!lines.joined().contains("s3cret"))
    }

    @Test("credentials in an app's proxy url in PUSH_APPS_FILE are refused the same way, naming that entry's members")
    func credentialsInAnAppProxyURLAreRefused() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let apps = scratch.url.appendingPathComponent("apps.json").path
        try #"{"proxy": [{"app": "acme", "url": "https://acme:s3cret@acme.example/push"}]}"#.write(
            toFile: apps, atomically: true, encoding: .utf8)
        let lines = problems(["PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_APPS_FILE": apps])
        #expect(
            lines == [
                "PUSH_APPS_FILE proxy[0] (acme): url must not carry credentials (user or password before @): the proxy authenticates the worker by its TLS client certificate: certificateFile and privateKeyFile, the key's password in passwordFile"
            ])
        #expect(!lines.joined().contains("s3cret"))
    }

    @Test("an @ in the proxy URL's path or query is not a credential")
    func atSignAfterTheHostPasses() throws {
        let configuration = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_PROXY_URL": "https://proxy.example/push/@team?user=a@b",
        ]).get()
        #expect(configuration.proxy?.endpoint(for: nil)?.url == "https://proxy.example/push/@team?user=a@b")
    }

    @Test("start-up logs show a proxy URL through Redaction: host kept, path shortened")
    func proxyURLsAreLoggedRedacted() throws {
        let url = "https://proxy.example/v2/tenants/acme-0d9f8e7c6b5a/push"
        let configuration = try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_PROXY_URL": url]).get()
        let plugin = try #require(configuration.plugin(.proxy))
        #expect(plugin.summary == ["proxy default: \(Redaction.url(url))"])
        #expect(!plugin.summary.joined().contains("acme-0d9f8e7c6b5a"))
    }

    @Test("Redaction.url never shows a URL's user or password, with or without a path")
    func redactionDropsUserinfo() {
        #expect(Redaction.url("https://push:s3cret@proxy.example/push/long-path-here") == "https://…@proxy.example/push/…here")
        #expect(Redaction.url("https://push:s3cret@proxy.example") == "https://…@proxy.example")
        #expect(Redaction.url("https://proxy.example/a@b") == "https://proxy.example/…")
        #expect(Redaction.url("https://proxy.example") == "https://proxy.example")
    }
}
