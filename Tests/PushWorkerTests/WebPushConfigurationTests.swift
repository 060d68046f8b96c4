import Foundation
import APNsPlugin
import FCMPlugin
import PushCore
import WebPushPlugin
import PushCrypto
import Testing
import TestSupport
@testable import PushWorker

@Suite("Web Push configuration: the VAPID key and the endpoint policy")
final class WebPushConfigurationTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    func load(_ environment: [String: String]) -> Result<WorkerConfiguration, ConfigurationErrors> {
        WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092"].merging(environment) { $1 })
    }

    func write(_ text: String) throws -> String {
        let path = scratch.url.appendingPathComponent("vapid-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("the VAPID key file may be PEM or a base64url raw key; both give the same key")
    func keyFormats() throws {
        let key = try PrivateKey.generateP256()
        let pem = try VAPIDKeyFile.load(write(key.pem()))
        let raw = try VAPIDKeyFile.load(write(Base64URL.encode(key.rawPrivateKey()) + "\n"))
        #expect(try pem.rawPublicKey() == key.rawPublicKey())
        #expect(try raw.rawPublicKey() == key.rawPublicKey())
    }

    @Test("Web Push is enabled by a key and a subject; private networks are refused unless allowed; hosts are lower-cased")
    func configured() throws {
        let keyFile = try write(PrivateKey.generateP256().pem())
        let configuration = try load([
            "PUSH_WEBPUSH_VAPID_KEY_FILE": keyFile, "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:ops@example.com",
            "PUSH_WEBPUSH_ALLOWED_HOSTS": "FCM.googleapis.com, push.services.mozilla.com",
        ]).get()
        let webPush = try #require(configuration.webPush)
        #expect(configuration.enabledProviders == [.webpush])
        #expect(!webPush.allowPrivateNetworks)
        #expect(webPush.allowedHosts == ["fcm.googleapis.com", "push.services.mozilla.com"])
    }

    @Test("a missing subject, a broken key or a stray setting is one line each")
    func problems() throws {
        let keyFile = try write(PrivateKey.generateP256().pem())
        guard case .failure(let noSubject) = load(["PUSH_WEBPUSH_VAPID_KEY_FILE": keyFile]) else {
            Issue.record("accepted")
            return
        }
        #expect(
            noSubject.problems.first
                == "PUSH_WEBPUSH_VAPID_SUBJECT is required with a VAPID key: a mailto: or https: contact for push services")
        let broken = try write("not a key")
        guard case .failure(let badKey) = load(["PUSH_WEBPUSH_VAPID_KEY_FILE": broken, "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:a@b"]) else {
            Issue.record("accepted")
            return
        }
        #expect(
            badKey.problems.first
                == "PUSH_WEBPUSH_VAPID_KEY_FILE: \(broken) holds neither a PEM private key nor a base64url 32-byte P-256 key")
        guard case .failure(let stray) = load(["PUSH_WEBPUSH_ALLOW_PRIVATE": "true", "PUSH_PROXY_URL": "https://p/x"]) else {
            Issue.record("accepted")
            return
        }
        #expect(stray.problems == ["PUSH_WEBPUSH_ALLOW_PRIVATE is set but PUSH_WEBPUSH_VAPID_KEY_FILE is not"])
    }

    @Test("PUSH_WEBPUSH_NAT64_PREFIXES takes RFC 6052's prefix lengths; anything else is one line")
    func nat64Prefixes() throws {
        let base = [
            "PUSH_WEBPUSH_VAPID_KEY_FILE": try write(PrivateKey.generateP256().pem()),
            "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:ops@example.com",
        ]
        let webPush = try #require(
            try load(base.merging(["PUSH_WEBPUSH_NAT64_PREFIXES": "2001:db8:64::/96, 2001:db8:100::/40"]) { $1 }).get().webPush)
        #expect(webPush.nat64Prefixes.map(\.description) == ["2001:db8:64::/96", "2001:db8:100::/40"])
        guard case .failure(let bad) = load(base.merging(["PUSH_WEBPUSH_NAT64_PREFIXES": "2001:db8::/33"]) { $1 }) else {
            Issue.record("accepted")
            return
        }
        #expect(
            bad.problems == [
                "PUSH_WEBPUSH_NAT64_PREFIXES: \"2001:db8::/33\" is not a NAT64 prefix: an IPv6 CIDR block of length 32, 40, 48, 56, 64 or 96 (RFC 6052)"
            ])
    }
}

@Suite("Web Push keys per app in PUSH_APPS_FILE")
final class WebPushAppKeysTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    @Test("apps in PUSH_APPS_FILE webpush get keys of their own (subject defaulting to the worker's); a bad key is one line")
    func appKeys() throws {
        let directory = scratch.url.path
        let defaultKey = "\(directory)/vapid-\(UUID().uuidString).pem"
        let tenantKey = "\(directory)/vapid-\(UUID().uuidString).pem"
        try PrivateKey.generateP256().pem().write(toFile: defaultKey, atomically: true, encoding: .utf8)
        try PrivateKey.generateP256().pem().write(toFile: tenantKey, atomically: true, encoding: .utf8)
        let apps = "\(directory)/apps-\(UUID().uuidString).json"
        try
            #"{"webpush": [{"app": "tenant-a", "vapidKeyFile": "\#(tenantKey)"}, {"app": "tenant-b", "vapidKeyFile": "\#(tenantKey)", "subject": "https://b.example"}]}"#
            .write(toFile: apps, atomically: true, encoding: .utf8)
        let base = [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_WEBPUSH_VAPID_KEY_FILE": defaultKey,
            "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:ops@example.com",
            "PUSH_APPS_FILE": apps,
        ]
        let webPush = try #require(try WorkerConfiguration.load(from: base).get().webPush)
        #expect(webPush.apps.keys.sorted() == ["tenant-a", "tenant-b"])
        #expect(webPush.apps["tenant-a"]?.subject == "mailto:ops@example.com")
        #expect(webPush.apps["tenant-b"]?.subject == "https://b.example")
        try #"{"webpush": [{"app": "tenant-a", "vapidKeyFile": "/missing.pem"}]}"#.write(toFile: apps, atomically: true, encoding: .utf8)
        let problems = WorkerConfiguration.load(from: base).failureLines
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("PUSH_APPS_FILE webpush[0] (tenant-a): vapidKeyFile:") == true)
    }
}

extension Result where Success == WorkerConfiguration, Failure == ConfigurationErrors {
    var failureLines: [String] { if case .failure(let errors) = self { errors.problems } else { [] } }
}
