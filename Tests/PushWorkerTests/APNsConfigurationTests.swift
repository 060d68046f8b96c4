import Foundation
import APNsPlugin
import FCMPlugin
import PushCore
import WebPushPlugin
import PushCrypto
import Testing
import TestSupport
@testable import PushWorker

@Suite("APNs configuration: the single-app shortcut and PUSH_APPS_FILE")
final class APNsConfigurationTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    func writeKey() throws -> String {
        let path = scratch.url.appendingPathComponent("AuthKey_\(UUID().uuidString).p8").path
        try PrivateKey.generateP256().pem().write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("the shortcut configures one token-auth app; the host override applies to both environments")
    func shortcut() throws {
        let keyFile = try writeKey()
        let base = [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": keyFile, "PUSH_APNS_KEY_ID": "KEYID4APNS",
            "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_BUNDLE_ID": "com.example.chat",
        ]
        let configuration = try WorkerConfiguration.load(
            from: base.merging(
                ["PUSH_APNS_HOST": "apns.staging.internal", "PUSH_APNS_PORT": "2197"]) { $1 }
        ).get()
        let apns = try #require(configuration.apns)
        #expect(configuration.enabledProviders == [.apns])
        #expect(apns.apps.map(\.bundleId) == ["com.example.chat"])
        #expect(apns.defaultBundleId == "com.example.chat")
        #expect(configuration.plugin(.apns)?.appLabels == ["com.example.chat"])
        #expect(apns.productionURL == "https://apns.staging.internal:2197")
        #expect(apns.sandboxURL == "https://apns.staging.internal:2197")
        let defaults = try WorkerConfiguration.load(from: base).get()
        #expect(defaults.apns?.productionURL == "https://api.push.apple.com")
        #expect(defaults.apns?.sandboxURL == "https://api.sandbox.push.apple.com")
    }

    @Test(
        "APNs connections live a day idle, with a PING after an hour of quiet; PUSH_APNS_IDLE_CONNECTION_S shortens the day, within 60 s … 7 days"
    )
    func idleConnectionTime() throws {
        let keyFile = try writeKey()
        let base = [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": keyFile, "PUSH_APNS_KEY_ID": "KEYID4APNS",
            "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_BUNDLE_ID": "com.example.chat",
        ]
        let defaults = try #require(try WorkerConfiguration.load(from: base).get().apns)
        #expect(defaults.connectionLifetime == APNsProvider.connectionLifetime)
        #expect(defaults.connectionLifetime.maximumIdleTime == .seconds(86_400))
        let shorter = try #require(
            try WorkerConfiguration.load(from: base.merging(["PUSH_APNS_IDLE_CONNECTION_S": "600"]) { $1 }).get().apns)
        #expect(shorter.connectionLifetime.maximumIdleTime == .seconds(600))
        #expect(shorter.connectionLifetime.keepaliveInterval == .seconds(3600), "the keepalive PING stays")
        for outside in ["59", "604801", "ten"] {
            let lines = problems(base.merging(["PUSH_APNS_IDLE_CONNECTION_S": outside]) { $1 })
            #expect(lines.count == 1 && lines.allSatisfy { $0.contains("PUSH_APNS_IDLE_CONNECTION_S") }, "\(outside): \(lines)")
        }
    }

    @Test("an incomplete shortcut or a key file that is not a key is one clear line each")
    func problemsAreClear() throws {
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": "/nonexistent.p8", "PUSH_APNS_KEY_ID": "KEYID4APNS"]).first
                == "APNs token auth needs PUSH_APNS_KEY_FILE, PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID and PUSH_APNS_BUNDLE_ID together; missing: PUSH_APNS_TEAM_ID, PUSH_APNS_BUNDLE_ID"
        )
        let notAKey = scratch.url.appendingPathComponent("not-a-key-\(UUID().uuidString).p8").path
        try "hello".write(toFile: notAKey, atomically: true, encoding: .utf8)
        #expect(
            problems([
                "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": notAKey, "PUSH_APNS_KEY_ID": "KEYID4APNS",
                "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_BUNDLE_ID": "com.example.chat",
            ]).first
                == "PUSH_APNS_KEY_FILE: key file \(notAKey) is not a PEM private key (an APNs .p8 file is one)")
    }

    @Test("PUSH_APPS_FILE configures several apps, token and certificate auth, each checked")
    func appsFile() throws {
        let keyFile = try writeKey()
        let directory = scratch.url
        let certificate = directory.appendingPathComponent("legacy-\(UUID().uuidString).p12").path
        let password = directory.appendingPathComponent("legacy-\(UUID().uuidString).password").path
        try TestPKCS12.bytes(password: "s3cret").write(to: URL(fileURLWithPath: certificate))
        try "s3cret\n".write(toFile: password, atomically: true, encoding: .utf8)
        let apps = directory.appendingPathComponent("apps-\(UUID().uuidString).json").path
        let document = """
            {"apns": [
              {"bundleId": "com.example.chat", "keyFile": "\(keyFile)", "keyId": "KEYID4APNS", "teamId": "TEAM123456"},
              {"bundleId": "com.example.legacy", "certificateFile": "\(certificate)", "passwordFile": "\(password)"}
            ]}
            """
        try document.write(toFile: apps, atomically: true, encoding: .utf8)
        let configuration = try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]).get()
        let configured = try #require(configuration.apns?.apps)
        #expect(configured.map(\.bundleId) == ["com.example.chat", "com.example.legacy"])
        guard case .certificate(let tls) = configured[1].authentication else {
            Issue.record("expected certificate auth")
            return
        }
        #expect(tls.clientCertificateFormat == .pkcs12)
        #expect(tls.clientKeyPassword == "s3cret")
        #expect(configuration.apns?.defaultBundleId == nil, "with several apps, targets name theirs")

        try #"{"apns": [{"bundleId": "com.example.chat", "keyFile": "\#(keyFile)"}]}"#.write(
            toFile: apps, atomically: true, encoding: .utf8)
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]).first
                == "PUSH_APPS_FILE apns[0] (com.example.chat): keyId and teamId are required with keyFile")
    }

    @Test("an app's cancel push type comes from PUSH_APNS_CANCEL_PUSH_TYPE or cancelPushType and must be voip or alert")
    func cancelPushType() throws {
        let keyFile = try writeKey()
        let base = [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": keyFile, "PUSH_APNS_KEY_ID": "KEYID4APNS",
            "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_BUNDLE_ID": "com.example.chat",
        ]
        #expect(try WorkerConfiguration.load(from: base).get().apns?.apps.first?.cancelPushType == .alert)
        #expect(
            try WorkerConfiguration.load(from: base.merging(["PUSH_APNS_CANCEL_PUSH_TYPE": "voip"]) { $1 }).get()
                .apns?.apps.first?.cancelPushType == .voip)
        #expect(
            problems(base.merging(["PUSH_APNS_CANCEL_PUSH_TYPE": "background"]) { $1 })
                == ["PUSH_APNS_CANCEL_PUSH_TYPE must be voip or alert, got \"background\""])
        let appsFile = scratch.url.appendingPathComponent("apps-\(UUID().uuidString).json").path
        try
            #"{"apns": [{"bundleId": "com.example.alerts", "keyFile": "\#(keyFile)", "keyId": "KEYID4APNS", "teamId": "TEAM123456", "cancelPushType": "voip"}]}"#
            .write(toFile: appsFile, atomically: true, encoding: .utf8)
        let fromFile = try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": appsFile]).get()
        #expect(fromFile.apns?.apps.first?.cancelPushType == .voip)
    }

    @Test(
        "an app's default environment and PushKit X-MPUSH tokens come from PUSH_APNS_ENVIRONMENT / PUSH_APNS_XMPUSH_PUSHKIT_TOKENS or the apps file"
    )
    func defaultEnvironmentAndPushKitTokens() throws {
        let keyFile = try writeKey()
        let base = [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": keyFile, "PUSH_APNS_KEY_ID": "KEYID4APNS",
            "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_BUNDLE_ID": "com.example.chat",
        ]
        let defaults = try #require(try WorkerConfiguration.load(from: base).get().apns?.apps.first)
        #expect(defaults.defaultEnvironment == .production)
        #expect(!defaults.xmpushTokensArePushKit)
        let declared = try #require(
            try WorkerConfiguration.load(
                from: base.merging([
                    "PUSH_APNS_ENVIRONMENT": "sandbox", "PUSH_APNS_XMPUSH_PUSHKIT_TOKENS": "true",
                ]) { $1 }
            ).get().apns?.apps.first)
        #expect(declared.defaultEnvironment == .sandbox)
        #expect(declared.xmpushTokensArePushKit)
        #expect(
            problems(base.merging(["PUSH_APNS_ENVIRONMENT": "development"]) { $1 })
                == ["PUSH_APNS_ENVIRONMENT must be production or sandbox, got \"development\""])
        let appsFile = scratch.url.appendingPathComponent("apps-\(UUID().uuidString).json").path
        try
            #"{"apns": [{"bundleId": "com.example.dev", "keyFile": "\#(keyFile)", "keyId": "KEYID4APNS", "teamId": "TEAM123456", "environment": "sandbox", "xmpushPushKitTokens": true}]}"#
            .write(toFile: appsFile, atomically: true, encoding: .utf8)
        let fromFile = try #require(
            try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": appsFile]).get().apns?.apps.first)
        #expect(fromFile.defaultEnvironment == .sandbox)
        #expect(fromFile.xmpushTokensArePushKit)
    }

    @Test("an apps-file app may add a VoIP certificate beside its alert credentials; VoIP pushes use it")
    func voipCertificate() throws {
        let keyFile = try writeKey()
        let directory = scratch.url.path
        let certificate = "\(directory)/voip-\(UUID().uuidString).p12"
        let password = "\(directory)/voip-\(UUID().uuidString).password"
        try TestPKCS12.bytes(password: "secret").write(to: URL(fileURLWithPath: certificate))
        try "secret\n".write(toFile: password, atomically: true, encoding: .utf8)
        let appsFile = "\(directory)/apps-\(UUID().uuidString).json"
        try
            #"{"apns": [{"bundleId": "com.example.phone", "keyFile": "\#(keyFile)", "keyId": "KEYID4APNS", "teamId": "TEAM123456", "voipCertificateFile": "\#(certificate)", "voipPasswordFile": "\#(password)"}]}"#
            .write(toFile: appsFile, atomically: true, encoding: .utf8)
        let app = try #require(
            try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": appsFile]).get().apns?.apps.first)
        guard case .certificate(let voip) = app.authentication(for: .voip), case .token = app.authentication(for: .alert) else {
            Issue.record("VoIP pushes must use the VoIP certificate, others the token: \(app)")
            return
        }
        #expect(voip.clientCertificateFile?.path == certificate)
        #expect(voip.clientCertificateFormat == .pkcs12)
        #expect(voip.clientKeyPassword == "secret")
        try
            #"{"apns": [{"bundleId": "com.example.phone", "keyFile": "\#(keyFile)", "keyId": "KEYID4APNS", "teamId": "TEAM123456", "voipCertificateFile": "/missing.pem"}]}"#
            .write(toFile: appsFile, atomically: true, encoding: .utf8)
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": appsFile])
                == ["PUSH_APPS_FILE apns[0] (com.example.phone): voipCertificateFile /missing.pem does not exist or is not readable"])
    }
}
