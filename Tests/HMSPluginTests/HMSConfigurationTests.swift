import Foundation
import PushCore
import PushHTTP
import PushPluginAPI
import Testing
@testable import HMSPlugin

@Suite("HMS settings and PUSH_APPS_FILE section")
struct HMSConfigurationTests {
    /// A directory with a client-secret file.
    struct SecretFiles {
        let directory: URL
        let secretFile: String

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("hms-config-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            secretFile = directory.appendingPathComponent("secret").path
            try "s3cr3t\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    static func configure(_ environment: [String: String], apps: [JSONValue] = []) -> (HMSConfiguration?, [String]) {
        var reader = SettingsReader(environment)
        let configuration = HMSPlugin.configuration(&reader, apps: apps)
        return (configuration, reader.problems)
    }

    static func entry(_ members: [(String, String)]) -> JSONValue {
        .object(members.map { (key: $0.0, value: JSONValue.string($0.1)) })
    }

    @Test("the settings are read: app id, client secret file, token URL and endpoint, with Huawei's defaults")
    func settingsParsed() throws {
        let files = try SecretFiles()
        defer { files.remove() }
        let (defaults, noProblems) = Self.configure(["PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile])
        #expect(noProblems.isEmpty)
        let configuration = try #require(defaults)
        #expect(configuration.apps.map(\.appId) == ["104000001"])
        #expect(configuration.apps.first?.clientSecret == "s3cr3t", "the secret file's text without its newline")
        #expect(configuration.defaultAppId == "104000001")
        #expect(configuration.tokenURL == "https://oauth-login.cloud.huawei.com/oauth2/v3/token")
        #expect(configuration.endpoint == "https://push-api.cloud.huawei.com")
        let (overridden, problems) = Self.configure([
            "PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile, "PUSH_HMS_CLIENT_ID": "555",
            "PUSH_HMS_TOKEN_URL": "https://localhost:8443/oauth2/v3/token", "PUSH_HMS_ENDPOINT": "https://localhost:8443/",
        ])
        #expect(problems.isEmpty)
        #expect(overridden?.apps.first?.clientId == "555")
        #expect(overridden?.tokenURL == "https://localhost:8443/oauth2/v3/token")
        #expect(overridden?.endpoint == "https://localhost:8443")
    }

    @Test("the client id defaults to the app id")
    func clientIdDefaultsToAppId() throws {
        let files = try SecretFiles()
        defer { files.remove() }
        let (configuration, _) = Self.configure(["PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile])
        #expect(configuration?.apps.first?.clientId == "104000001")
    }

    @Test("the hms section of PUSH_APPS_FILE adds apps; a duplicate app is refused in one line")
    func appsFileSection() throws {
        let files = try SecretFiles()
        defer { files.remove() }
        let (configuration, problems) = Self.configure(
            ["PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile],
            apps: [
                Self.entry([("appId", "104000002"), ("clientSecretFile", files.secretFile)]),
                Self.entry([("appId", "104000003"), ("clientId", "777"), ("clientSecretFile", files.secretFile)]),
            ])
        #expect(problems.isEmpty)
        #expect(configuration?.apps.map(\.appId) == ["104000001", "104000002", "104000003"])
        #expect(configuration?.apps.map(\.clientId) == ["104000001", "104000002", "777"])
        #expect(configuration?.defaultAppId == "104000001")
        let (_, duplicate) = Self.configure(
            [:],
            apps: [
                Self.entry([("appId", "104000002"), ("clientSecretFile", files.secretFile)]),
                Self.entry([("appId", "104000002"), ("clientSecretFile", files.secretFile)]),
            ])
        #expect(duplicate == ["HMS app 104000002 is configured twice"])
        let (_, incomplete) = Self.configure([:], apps: [Self.entry([("appId", "104000002")])])
        #expect(incomplete == ["PUSH_APPS_FILE hms[0]: appId and clientSecretFile are required"])
    }

    @Test("a missing client secret file is one problem line")
    func missingSecretFile() {
        let (configuration, problems) = Self.configure([
            "PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": "/nonexistent/hms-secret",
        ])
        #expect(configuration == nil)
        #expect(problems == ["PUSH_HMS_CLIENT_SECRET_FILE: /nonexistent/hms-secret does not exist or is not readable"])
        let (_, unset) = Self.configure(["PUSH_HMS_APP_ID": "104000001"])
        #expect(unset == ["PUSH_HMS_APP_ID is set but PUSH_HMS_CLIENT_SECRET_FILE is not"])
    }

    @Test("settings that depend on the app id are refused without it, one line each")
    func dependentsWithoutAppId() throws {
        let files = try SecretFiles()
        defer { files.remove() }
        let (configuration, problems) = Self.configure([
            "PUSH_HMS_CLIENT_ID": "555", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile, "PUSH_HMS_ENDPOINT": "https://localhost",
        ])
        #expect(configuration == nil)
        #expect(
            problems == [
                "PUSH_HMS_CLIENT_ID is set but PUSH_HMS_APP_ID is not",
                "PUSH_HMS_CLIENT_SECRET_FILE is set but PUSH_HMS_APP_ID is not",
                "PUSH_HMS_ENDPOINT is set but no HMS app is configured",
            ])
        #expect(Self.configure([:]).1.isEmpty, "nothing set: HMS is simply off")
    }

    @Test("an app id that is not Huawei's 1 to 64 digits is refused")
    func appIdFormat() throws {
        let files = try SecretFiles()
        defer { files.remove() }
        let (_, problems) = Self.configure(["PUSH_HMS_APP_ID": "com.example/app", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile])
        #expect(problems == [#"PUSH_HMS_APP_ID: the app id "com.example/app" is not 1 to 64 digits"#])
    }

    @Test("the plugin declares its settings once, names the apps without secrets and defaults to Huawei's two endpoints")
    func pluginDescribesItself() throws {
        let files = try SecretFiles()
        defer { files.remove() }
        let plugin = HMSPlugin()
        #expect(
            plugin.settings.map(\.name) == [
                "PUSH_HMS_APP_ID", "PUSH_HMS_CLIENT_ID", "PUSH_HMS_CLIENT_SECRET_FILE", "PUSH_HMS_CATEGORY",
                "PUSH_HMS_TOKEN_URL", "PUSH_HMS_ENDPOINT", "PUSH_HMS_CA_FILE",
            ])
        #expect(plugin.appsFileSection == "hms")
        var reader = SettingsReader(["PUSH_HMS_APP_ID": "104000001", "PUSH_HMS_CLIENT_SECRET_FILE": files.secretFile])
        let configured = try #require(plugin.configure(&reader, apps: []))
        #expect(configured.summary == ["hms app 104000001: client 104000001, secret from \(files.secretFile), notification category IM"])
        #expect(!configured.summary.joined().contains("s3cr3t"))
        let configuration = try #require(configured.configuration(as: HMSConfiguration.self))
        #expect(configuration.endpoint == "https://push-api.cloud.huawei.com")
        #expect(configuration.tokenURL == "https://oauth-login.cloud.huawei.com/oauth2/v3/token")
    }

    @Test("an hms target needs a token without control characters, at most 4096 bytes")
    func targetFormat() throws {
        func decode(_ members: [(String, JSONValue)]) throws(JobRejection) -> HMSTarget? {
            var fields = Fields(members: members.map { (key: $0.0, value: $0.1) }, path: "targets[0].")
            return try HMSTargetFormat().decode(&fields) as? HMSTarget
        }
        #expect(try decode([("token", .string("IQAAAACy0kYkAAA"))]) == HMSTarget(token: "IQAAAACy0kYkAAA"))
        #expect(throws: JobRejection.self) { try decode([]) }
        #expect(throws: JobRejection.self) { try decode([("token", .string(""))]) }
        #expect(throws: JobRejection.self) { try decode([("token", .string("a\r\nb"))]) }
        #expect(throws: JobRejection.self) { try decode([("token", .string(String(repeating: "t", count: 4097)))]) }
        #expect(HMSTargetFormat().rfc8599Providers.isEmpty && HMSTargetFormat().xmpushProviders.isEmpty, "no SIP notation")
    }

    /// A token endpoint that answers every grant with the given `expires_in`.
    struct TokenEndpoint: HTTPTransport {
        let expiresIn: String

        func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
            HTTPResponse(
                status: 200, headers: [], body: Array(#"{"access_token":"CgB6.t","expires_in":\#(expiresIn),"token_type":"Bearer"}"#.utf8))
        }

        func closeConnections(except live: Set<ConnectionIdentity>) {}
        func shutdown() {}
    }

    @Test(
        "an absurd expires_in is clamped to a day: the token is used, nothing traps",
        arguments: [
            "99999999999999999", "9223372036854775807", "-9223372036854775808", "0",
        ])
    func absurdLifetime(_ expiresIn: String) async throws {
        let now: Int64 = 1_795_310_000_000
        let app = HMSConfiguration.App(appId: "1", clientSecret: "s", clientSecretFile: "/dev/null")
        let tokens = HMSAccessTokens(
            app: app, tokenURL: "https://oauth.example/token", transport: TokenEndpoint(expiresIn: expiresIn),
            tls: TLSOptions(), clock: { now })
        #expect(try await tokens.token() == "CgB6.t")
    }
}
