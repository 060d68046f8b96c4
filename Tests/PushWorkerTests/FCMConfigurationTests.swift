import Foundation
import APNsPlugin
import FCMPlugin
import PushCore
import WebPushPlugin
import PushCrypto
import Testing
import TestSupport
@testable import PushWorker

@Suite("FCM configuration: service-account files")
final class FCMConfigurationTests: Sendable {
    /// This test's files, removed when it ends.
    let scratch: ScratchDirectory

    init() throws { scratch = try ScratchDirectory() }
    deinit { scratch.remove() }

    func writeServiceAccount(projectId: String = "example-project", privateKey: String? = nil) throws -> String {
        let key = try privateKey ?? PrivateKey.generateRSA().pem()
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("type", "service_account")
        writer.member("project_id", projectId)
        writer.member("private_key_id", "k1")
        writer.member("private_key", key)
        writer.member("client_email", "worker@\(projectId).iam.gserviceaccount.com")
        writer.member("token_uri", "https://oauth2.googleapis.com/token")
        writer.endObject()
        let path = scratch.url.appendingPathComponent("sa-\(UUID().uuidString).json").path
        try writer.string.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("PUSH_FCM_CREDENTIALS_FILE configures one project that serves targets without app")
    func shortcut() throws {
        let file = try writeServiceAccount()
        let configuration = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_FCM_CREDENTIALS_FILE": file, "PUSH_FCM_ENDPOINT": "https://fcm.staging.internal/",
        ]).get()
        let fcm = try #require(configuration.fcm)
        #expect(configuration.enabledProviders == [.fcm])
        #expect(fcm.accounts.map(\.projectId) == ["example-project"])
        #expect(fcm.defaultProjectId == "example-project")
        #expect(fcm.endpoint == "https://fcm.staging.internal")
    }

    @Test("a broken service-account file stops start-up with a line naming the field")
    func brokenFile() throws {
        let path = scratch.url.appendingPathComponent("sa-broken-\(UUID().uuidString).json").path
        try #"{"type":"service_account","project_id":"p"}"#.write(toFile: path, atomically: true, encoding: .utf8)
        let lines = { () -> [String] in
            switch WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_FCM_CREDENTIALS_FILE": path]) {
            case .success: []
            case .failure(let errors): errors.problems
            }
        }()
        #expect(lines.first == "PUSH_FCM_CREDENTIALS_FILE: service-account file \(path): client_email is missing")
    }

    @Test("PUSH_APPS_FILE adds projects; targets pick theirs by app")
    func severalProjects() throws {
        let first = try writeServiceAccount(projectId: "project-a")
        let second = try writeServiceAccount(projectId: "project-b")
        let apps = scratch.url.appendingPathComponent("apps-\(UUID().uuidString).json").path
        try #"{"fcm": [{"credentialsFile": "\#(first)"}, {"credentialsFile": "\#(second)"}]}"#.write(
            toFile: apps, atomically: true, encoding: .utf8)
        let configuration = try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]).get()
        #expect(configuration.fcm?.accounts.map(\.projectId) == ["project-a", "project-b"])
        #expect(configuration.fcm?.defaultProjectId == nil)
    }

    @Test("iOS bundle ids come from PUSH_FCM_IOS_PACKAGES or an apps-file entry's iosPackages: they name the project and say the platform")
    func iosPackages() throws {
        let account = try writeServiceAccount(projectId: "project-a")
        let shortcut = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_FCM_CREDENTIALS_FILE": account,
            "PUSH_FCM_IOS_PACKAGES": "com.example.ios",
        ]).get()
        let fcm = try #require(shortcut.fcm)
        #expect(fcm.projectId(for: "com.example.ios") == "project-a")
        #expect(fcm.platform(of: .fcm("b", app: "com.example.ios", token: "t")) == "ios")
        #expect(
            fcm.platform(of: .fcm("b", app: "com.example.ios", token: "t", platform: "android")) == "android", "the target's own word wins")
        #expect(fcm.platform(of: .fcm("b", app: "project-a", token: "t")) == nil)
        let apps = scratch.url.appendingPathComponent("apps-\(UUID().uuidString).json").path
        try #"{"fcm": [{"credentialsFile": "\#(account)", "iosPackages": ["com.a.ios"]}]}"#.write(
            toFile: apps, atomically: true, encoding: .utf8)
        let fromFile = try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]).get()
        #expect(fromFile.fcm?.platform(of: .fcm("b", app: "com.a.ios", token: "t")) == "ios")
        try #"{"fcm": [{"credentialsFile": "\#(account)", "iosPackages": "com.a.ios"}]}"#.write(
            toFile: apps, atomically: true, encoding: .utf8)
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]) == [
                "PUSH_APPS_FILE fcm[0]: iosPackages must be an array of package names"
            ])
    }

    @Test("package names of a project come from PUSH_FCM_PACKAGES or an apps-file entry's packages; one package names one project")
    func packages() throws {
        let first = try writeServiceAccount(projectId: "project-a")
        let second = try writeServiceAccount(projectId: "project-b")
        let shortcut = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_FCM_CREDENTIALS_FILE": first,
            "PUSH_FCM_PACKAGES": "com.voip.phone, com.voip.tablet",
        ]).get()
        #expect(shortcut.fcm?.packages == ["com.voip.phone": "project-a", "com.voip.tablet": "project-a"])
        let apps = scratch.url.appendingPathComponent("apps-\(UUID().uuidString).json").path
        try
            #"{"fcm": [{"credentialsFile": "\#(first)", "packages": ["com.a.phone"]}, {"credentialsFile": "\#(second)", "packages": ["com.b.phone"]}]}"#
            .write(toFile: apps, atomically: true, encoding: .utf8)
        let fromFile = try WorkerConfiguration.load(from: ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]).get()
        #expect(fromFile.fcm?.projectId(for: "com.b.phone") == "project-b")
        #expect(fromFile.fcm?.projectId(for: "project-a") == "project-a")
        try #"{"fcm": [{"credentialsFile": "\#(first)", "packages": ["com.x"]}, {"credentialsFile": "\#(second)", "packages": ["com.x"]}]}"#
            .write(toFile: apps, atomically: true, encoding: .utf8)
        #expect(
            problems(["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APPS_FILE": apps]) == [
                "FCM package com.x is listed for projects project-a and project-b"
            ])
    }

    @Test("the metrics' app labels are the configured projects, their package names and each project's platform parts; nothing else")
    func appLabels() throws {
        let first = try writeServiceAccount(projectId: "project-a")
        let configuration = try WorkerConfiguration.load(from: [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_FCM_CREDENTIALS_FILE": first,
            "PUSH_FCM_PACKAGES": "com.voip.phone",
        ]).get()
        #expect(
            configuration.plugin(.fcm)?.appLabels
                == ["project-a", "com.voip.phone", "project-a/android", "project-a/ios", "project-a/web"])
    }

    @Test("PUSH_FCM_REMOVE_NOTIFICATION chooses which template outputs lose their notification blocks: calls (default), never, always")
    func notificationRemoval() throws {
        let file = try writeServiceAccount()
        let base = ["PUSH_KAFKA_BROKERS": "k:9092", "PUSH_FCM_CREDENTIALS_FILE": file]
        #expect(try WorkerConfiguration.load(from: base).get().fcm?.removeNotification == .dataOnlyKinds)
        #expect(
            try WorkerConfiguration.load(from: base.merging(["PUSH_FCM_REMOVE_NOTIFICATION": "never"]) { $1 }).get().fcm?.removeNotification
                == .never)
        #expect(
            problems(base.merging(["PUSH_FCM_REMOVE_NOTIFICATION": "2"]) { $1 })
                == ["PUSH_FCM_REMOVE_NOTIFICATION must be one of calls, never, always, got \"2\""])
    }
}
