import Testing

@testable import PushWorker

@Suite("The egress proxy in the worker's configuration: read from the environment, refused with one line when malformed")
struct EgressProxyConfigurationTests {
    static let base = ["PUSH_KAFKA_BROKERS": "127.0.0.1:9", "PUSH_PROXY_URL": "https://proxy.example.com/push"]

    @Test("https_proxy and no_proxy reach the configuration; without them there is no proxy")
    func read() throws {
        var environment = Self.base
        #expect(try WorkerConfiguration.load(from: environment).get().egressProxy == nil)
        environment["https_proxy"] = "http://push:s3cret@proxy.corp:3128"
        environment["no_proxy"] = ".svc,10.0.0.0/8"
        let proxy = try #require(try WorkerConfiguration.load(from: environment).get().egressProxy)
        #expect(proxy.authority == "proxy.corp:3128" && proxy.hasCredentials)
        #expect(!proxy.applies(to: "redis.default.svc") && proxy.applies(to: "api.push.apple.com"))
    }

    @Test("a malformed or https:// HTTPS_PROXY stops start-up with one line naming the variable, never its credentials")
    func malformed() {
        for value in ["https://push:s3cret@proxy.corp:3128", "http://push:s3cret@proxy.corp:99999", "ftp://proxy.corp"] {
            var environment = Self.base
            environment["HTTPS_PROXY"] = value
            let lines = problems(environment)
            #expect(lines.count == 1 && lines[0].hasPrefix("HTTPS_PROXY"), "\(value): \(lines)")
            #expect(!lines.joined().contains("s3cret"))
        }
    }
}
