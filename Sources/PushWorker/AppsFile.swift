import APNsPlugin
import FCMPlugin
import Foundation
import PushCore
import PushHTTP

/// `PUSH_APPS_FILE`: several apps per provider, each with its own credentials (files,
/// typically mounted Kubernetes secrets). JSON:
///
///     {"apns": [
///        {"bundleId": "com.example.chat", "keyFile": "/secrets/AuthKey_ABC123DEFG.p8",
///         "keyId": "ABC123DEFG", "teamId": "TEAM123456"},
///        {"bundleId": "com.example.legacy", "certificateFile": "/secrets/legacy.p12",
///         "passwordFile": "/secrets/legacy.password"},
///        {"bundleId": "com.example.mdm", "certificateFile": "/secrets/mdm.pem",
///         "privateKeyFile": "/secrets/mdm-key.pem", "topic": "com.apple.mgmt.External.1234"}
///      ],
///      "fcm": [{"credentialsFile": "/secrets/fcm/example-project.json"}]}
///
/// A `.p12` certificate (by extension) carries its key; its password comes from `passwordFile`.
/// An APNs app may set `"cancelPushType": "alert"` (default `voip`) for cancels to targets
/// that name no push type.
enum AppsFile {
    struct Apps {
        var apns: [APNsApp] = []
        var fcm: [ServiceAccount] = []
    }

    static func load(path: String, reader: inout EnvironmentReader) -> Apps {
        var apps = Apps()
        guard let data = FileManager.default.contents(atPath: path) else {
            reader.problem("PUSH_APPS_FILE points to \(path), which does not exist or is not readable")
            return apps
        }
        guard let document = try? JSONParser.parse(Array(data)), case .object(let sections) = document else {
            reader.problem("PUSH_APPS_FILE \(path) is not a JSON object")
            return apps
        }
        for (section, value) in sections {
            guard section == "apns" || section == "fcm" else {
                reader.problem("PUSH_APPS_FILE: section \"\(section)\" is not supported yet (supported: apns, fcm)")
                continue
            }
            guard case .array(let entries) = value else {
                reader.problem("PUSH_APPS_FILE: \(section) must be an array")
                continue
            }
            for (index, entry) in entries.enumerated() {
                let place = "PUSH_APPS_FILE \(section)[\(index)]"
                if section == "apns" {
                    if let app = apnsApp(entry, at: place, reader: &reader) { apps.apns.append(app) }
                } else if case .string(let file)? = entry["credentialsFile"] {
                    if let account = CredentialCheck.serviceAccount(at: file, place: place, reader: &reader) { apps.fcm.append(account) }
                } else {
                    reader.problem("\(place): credentialsFile (a service-account JSON file) is required")
                }
            }
        }
        return apps
    }

    private static func apnsApp(_ entry: JSONValue, at place: String, reader: inout EnvironmentReader) -> APNsApp? {
        func string(_ name: String) -> String? { if case .string(let text)? = entry[name], !text.isEmpty { text } else { nil } }
        guard let bundleId = string("bundleId") else {
            reader.problem("\(place): bundleId is required")
            return nil
        }
        let place = "\(place) (\(bundleId))"
        var cancelPushType = APNsPushType.voip
        if let name = string("cancelPushType") {
            guard let type = APNsPushType(rawValue: name), APNsApp.cancelPushTypes.contains(type) else {
                reader.problem("\(place): cancelPushType must be voip or alert, got \"\(name)\"")
                return nil
            }
            cancelPushType = type
        }
        guard var app = apnsAppCredentials(entry, bundleId: bundleId, at: place, reader: &reader) else { return nil }
        app.cancelPushType = cancelPushType
        return app
    }

    private static func apnsAppCredentials(_ entry: JSONValue, bundleId: String, at place: String,
                                           reader: inout EnvironmentReader) -> APNsApp? {
        func string(_ name: String) -> String? { if case .string(let text)? = entry[name], !text.isEmpty { text } else { nil } }
        if let keyFile = string("keyFile") {
            guard let keyId = string("keyId"), let teamId = string("teamId") else {
                reader.problem("\(place): keyId and teamId are required with keyFile")
                return nil
            }
            guard CredentialCheck.signingKey(at: keyFile, place: place, reader: &reader) else { return nil }
            return APNsApp(bundleId: bundleId, authentication: .token(keyFile: keyFile, keyId: keyId, teamId: teamId),
                           topicOverride: string("topic"))
        }
        guard let certificate = string("certificateFile") else {
            reader.problem("\(place): either keyFile (token auth) or certificateFile (certificate auth) is required")
            return nil
        }
        guard FileManager.default.isReadableFile(atPath: certificate) else {
            reader.problem("\(place): certificateFile \(certificate) does not exist or is not readable")
            return nil
        }
        var tls = TLSOptions(clientCertificateFile: certificate)
        if certificate.lowercased().hasSuffix(".p12") || certificate.lowercased().hasSuffix(".pfx") {
            tls.clientCertificateFormat = .pkcs12
        } else {
            guard let keyFile = string("privateKeyFile"), FileManager.default.isReadableFile(atPath: keyFile) else {
                reader.problem("\(place): a PEM certificateFile needs a readable privateKeyFile")
                return nil
            }
            tls.clientKeyFile = keyFile
        }
        if let passwordFile = string("passwordFile") {
            guard let password = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                reader.problem("\(place): passwordFile \(passwordFile) does not exist or is not readable")
                return nil
            }
            tls.clientKeyPassword = password.trimmingCharacters(in: .newlines)
        }
        return APNsApp(bundleId: bundleId, authentication: .certificate(tls), topicOverride: string("topic"))
    }
}
