import Foundation
import PushCore
import PushHTTP
import PushPluginAPI

/// Apple Push Notification service: token (`.p8`) or certificate auth per app, both environments.
public struct APNsPlugin: ProviderPlugin {
    public let id = ProviderID.apns
    public var targetFormat: any TargetFormat { APNsTargetFormat() }
    public var templateShape: (any TemplateShape)? { APNsTemplateShape() }
    public var appsFileSection: String? { "apns" }
    public var configuredBy: String {
        "PUSH_APNS_KEY_FILE (with PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID, PUSH_APNS_BUNDLE_ID) or an apns section in PUSH_APPS_FILE"
    }

    public init() {}

    enum Settings {
        static let keyFile = Setting(
            "PUSH_APNS_KEY_FILE", .file, "APNs token auth for one app: the `.p8` signing key (PEM). Set with the next three.")
        static let keyId = Setting("PUSH_APNS_KEY_ID", "The 10-character id of that key.")
        static let teamId = Setting("PUSH_APNS_TEAM_ID", "The 10-character Apple team id (`iss` of the provider token).")
        static let bundleId = Setting(
            "PUSH_APNS_BUNDLE_ID",
            "The app's bundle id; serves targets whose `app` is it or absent. `apns-topic` adds the push type's suffix (`.voip`, `.complication`, …)."
        )
        static let topic = Setting(
            "PUSH_APNS_TOPIC",
            "Replaces the bundle id in the derived `apns-topic` of that app (e.g. an MDM topic); each push type keeps its suffix (`.voip`, …)."
        )
        static let cancelPushType = Setting(
            "PUSH_APNS_CANCEL_PUSH_TYPE", default: "alert",
            "Push type of `cancel` jobs to that app's targets that name none: `alert` (iOS 13+ ends an app that gets a VoIP push without reporting a call) or `voip` (for apps whose PushKit handler reports and ends the call). Apps in `PUSH_APPS_FILE` set `cancelPushType`."
        )
        static let environment = Setting(
            "PUSH_APNS_ENVIRONMENT", default: "production",
            "Environment of that app's targets that name none (X-MPUSH `d:` or no prefix included): `production` or `sandbox`. Apps in `PUSH_APPS_FILE` set `environment`."
        )
        static let pushKitTokens = Setting(
            "PUSH_APNS_XMPUSH_PUSHKIT_TOKENS", .boolean, default: "false",
            "That app's X-MPUSH `i:` tokens are PushKit (VoIP) tokens, as in the Mizu seed's iOS guide: calls go as `voip`; a push to one that would not go as `voip` ends `failed`, unsent (never a binding removal). Apps in `PUSH_APPS_FILE` set `xmpushPushKitTokens`."
        )
        static let host = Setting(
            "PUSH_APNS_HOST", "Overrides both APNs hosts (`api.push.apple.com`, `api.sandbox.push.apple.com`), for staging and tests.")
        static let port = Setting("PUSH_APNS_PORT", .integer(1...65535), default: "443", "APNs port (Apple also listens on 2197).")
        static let caFile = Setting("PUSH_APNS_CA_FILE", .file, "PEM CA bundle trusted for APNs instead of the system store (sandboxes).")
        static let idleConnectionS = Setting(
            "PUSH_APNS_IDLE_CONNECTION_S", .integer(60...604_800), default: "86400",
            "How long an APNs connection is kept without a request before it is closed (each signing key and client certificate has connections of its own; the next push opens one again). Apple asks to keep connections open and treats rapid connection and disconnection as a denial-of-service attack; a replica serving many rarely-sending teams may lower it to bound its open connections."
        )
        static let shortcut = [keyFile, keyId, teamId, bundleId]
    }

    public var settings: [Setting] {
        [
            Settings.keyFile, Settings.keyId, Settings.teamId, Settings.bundleId, Settings.topic, Settings.cancelPushType,
            Settings.environment, Settings.pushKitTokens, Settings.host, Settings.port, Settings.caFile, Settings.idleConnectionS,
        ]
    }

    public func configure(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> ConfiguredPlugin? {
        guard let configuration = Self.configuration(&reader, apps: entries) else { return nil }
        return ConfiguredPlugin(
            id: id, configuration: configuration,
            summary: configuration.apps.map { app in
                switch app.authentication {
                case .token(_, let keyId, let teamId): "apns app \(app.bundleId): token auth (key \(keyId), team \(teamId))"
                case .certificate: "apns app \(app.bundleId): certificate auth"
                }
            },
            appLabels: Set(configuration.apps.map(\.bundleId)),
            check: { await APNsCredentialCheck.run(configuration, context: $0) }
        ) { context in
            try APNsProvider(
                configuration: configuration, transport: context.makeTransport("apns"), logger: context.logger,
                templates: context.templates, connectionLifetime: configuration.connectionLifetime,
                predecessor: context.predecessor as? APNsProvider)
        }
    }

    /// APNs apps from the single-app shortcut and `PUSH_APPS_FILE`, plus endpoint overrides.
    public static func configuration(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> APNsConfiguration? {
        var apps: [APNsApp] = []
        let given = Settings.shortcut.filter { reader.isSet($0) }
        if !given.isEmpty {
            if given.count < Settings.shortcut.count {
                let missing = Settings.shortcut.filter { !reader.isSet($0) }.map(\.name).joined(separator: ", ")
                reader.problem(
                    "APNs token auth needs PUSH_APNS_KEY_FILE, PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID and PUSH_APNS_BUNDLE_ID together; missing: \(missing)"
                )
            } else if let keyFile = reader.string(Settings.keyFile), let keyId = reader.string(Settings.keyId),
                let teamId = reader.string(Settings.teamId), let bundleId = reader.string(Settings.bundleId)
            {
                if keyId.count != 10 { reader.problem("PUSH_APNS_KEY_ID must be the 10-character key id Apple shows, got \"\(keyId)\"") }
                if teamId.count != 10 { reader.problem("PUSH_APNS_TEAM_ID must be the 10-character team id, got \"\(teamId)\"") }
                if CredentialFiles.signingKey(at: keyFile, place: Settings.keyFile.name, reader: &reader) {
                    var cancelPushType = APNsApp.defaultCancelPushType
                    if let name = reader.string(Settings.cancelPushType) {
                        if let type = APNsPushType(rawValue: name), APNsApp.cancelPushTypes.contains(type) {
                            cancelPushType = type
                        } else {
                            reader.problem("PUSH_APNS_CANCEL_PUSH_TYPE must be voip or alert, got \"\(name)\"")
                        }
                    }
                    var environment = APNsEnvironment.production
                    if let name = reader.string(Settings.environment) {
                        if let chosen = APNsEnvironment(rawValue: name) {
                            environment = chosen
                        } else {
                            reader.problem("PUSH_APNS_ENVIRONMENT must be production or sandbox, got \"\(name)\"")
                        }
                    }
                    apps.append(
                        APNsApp(
                            bundleId: bundleId, authentication: .token(keyFile: keyFile, keyId: keyId, teamId: teamId),
                            topicOverride: reader.string(Settings.topic), cancelPushType: cancelPushType,
                            defaultEnvironment: environment, xmpushTokensArePushKit: reader.boolean(Settings.pushKitTokens)))
                }
            }
        }
        for (index, entry) in entries.enumerated() {
            if let app = APNsAppsFileEntry.app(entry, at: "PUSH_APPS_FILE apns[\(index)]", reader: &reader) { apps.append(app) }
        }
        let duplicates = Dictionary(grouping: apps, by: \.bundleId).filter { $0.value.count > 1 }.keys.sorted()
        for bundleId in duplicates { reader.problem("APNs app \(bundleId) is configured twice") }
        guard !apps.isEmpty else {
            reader.refuseDependents(
                [
                    Settings.host, Settings.port, Settings.caFile, Settings.topic, Settings.cancelPushType,
                    Settings.environment, Settings.pushKitTokens, Settings.idleConnectionS,
                ],
                because: "no APNs app is configured")
            return nil
        }
        var configuration = APNsConfiguration(apps: apps, defaultBundleId: reader.string(Settings.bundleId))
        configuration.caFile = CredentialFiles.certificateAuthority(Settings.caFile, reader: &reader)
        configuration.connectionLifetime = HTTPConnectionLifetime(
            maximumIdleTime: .seconds(reader.integer(Settings.idleConnectionS)),
            keepaliveInterval: APNsProvider.connectionLifetime.keepaliveInterval)
        if let host = reader.string(Settings.host) {
            let port = reader.integer(Settings.port)
            configuration.productionURL = "https://\(host):\(port)"
            configuration.sandboxURL = configuration.productionURL
        } else if reader.isSet(Settings.port) {
            let port = reader.integer(Settings.port)
            configuration.productionURL = "https://api.push.apple.com:\(port)"
            configuration.sandboxURL = "https://api.sandbox.push.apple.com:\(port)"
        }
        return configuration
    }
}

/// One app of the `apns` section of `PUSH_APPS_FILE`:
///
///     {"bundleId": "com.example.chat", "keyFile": "/secrets/AuthKey_KEYID4APNS.p8", "keyId": "KEYID4APNS", "teamId": "TEAM123456"}
///     {"bundleId": "com.example.legacy", "certificateFile": "/secrets/legacy.p12", "passwordFile": "/secrets/legacy.password"}
///     {"bundleId": "com.example.mdm", "certificateFile": "/secrets/mdm.pem", "privateKeyFile": "/secrets/mdm-key.pem", "topic": "com.apple.mgmt.External.1234"}
///
/// A `.p12` certificate (by extension) carries its key; its password comes from `passwordFile`.
/// `"cancelPushType": "voip"` (default `alert`) is the push type of cancels to targets that name none;
/// `"environment": "sandbox"` (default `production`) the environment of targets that name none;
/// `"xmpushPushKitTokens": true` declares the app's X-MPUSH `i:` tokens PushKit tokens; `"voipCertificateFile"`
/// (with `"voipPrivateKeyFile"` or a `.p12`, and `"voipPasswordFile"`) adds a VoIP Services certificate that
/// VoIP pushes use instead of the app's alert credentials.
enum APNsAppsFileEntry {
    static func app(_ entry: JSONValue, at place: String, reader: inout SettingsReader) -> APNsApp? {
        guard let bundleId = entry.nonEmptyString("bundleId") else {
            reader.problem("\(place): bundleId is required")
            return nil
        }
        let place = "\(place) (\(bundleId))"
        var cancelPushType = APNsApp.defaultCancelPushType
        if let name = entry.nonEmptyString("cancelPushType") {
            guard let type = APNsPushType(rawValue: name), APNsApp.cancelPushTypes.contains(type) else {
                reader.problem("\(place): cancelPushType must be voip or alert, got \"\(name)\"")
                return nil
            }
            cancelPushType = type
        }
        var environment = APNsEnvironment.production
        if let name = entry.nonEmptyString("environment") {
            guard let chosen = APNsEnvironment(rawValue: name) else {
                reader.problem("\(place): environment must be production or sandbox, got \"\(name)\"")
                return nil
            }
            environment = chosen
        }
        var pushKitTokens = false
        if let flag = entry["xmpushPushKitTokens"] {
            guard case .bool(let value) = flag else {
                reader.problem("\(place): xmpushPushKitTokens must be true or false")
                return nil
            }
            pushKitTokens = value
        }
        guard var app = credentials(entry, bundleId: bundleId, at: place, reader: &reader) else { return nil }
        if entry.nonEmptyString("voipCertificateFile") != nil {
            guard let voip = certificate(entry, prefix: "voip", at: place, reader: &reader) else { return nil }
            app.voipAuthentication = .certificate(voip)
        }
        app.cancelPushType = cancelPushType
        app.defaultEnvironment = environment
        app.xmpushTokensArePushKit = pushKitTokens
        return app
    }

    private static func credentials(_ entry: JSONValue, bundleId: String, at place: String, reader: inout SettingsReader) -> APNsApp? {
        if let keyFile = entry.nonEmptyString("keyFile") {
            guard let keyId = entry.nonEmptyString("keyId"), let teamId = entry.nonEmptyString("teamId") else {
                reader.problem("\(place): keyId and teamId are required with keyFile")
                return nil
            }
            guard CredentialFiles.signingKey(at: keyFile, place: place, reader: &reader) else { return nil }
            return APNsApp(
                bundleId: bundleId, authentication: .token(keyFile: keyFile, keyId: keyId, teamId: teamId),
                topicOverride: entry.nonEmptyString("topic"))
        }
        guard entry.nonEmptyString("certificateFile") != nil else {
            reader.problem("\(place): either keyFile (token auth) or certificateFile (certificate auth) is required")
            return nil
        }
        guard let tls = certificate(entry, prefix: nil, at: place, reader: &reader) else { return nil }
        return APNsApp(bundleId: bundleId, authentication: .certificate(tls), topicOverride: entry.nonEmptyString("topic"))
    }

    /// A certificate's TLS options from `<prefix>CertificateFile`, `<prefix>PrivateKeyFile` (unless a `.p12`) and
    /// `<prefix>PasswordFile` (member names in camel case: `certificateFile`, `voipCertificateFile`, …).
    private static func certificate(_ entry: JSONValue, prefix: String?, at place: String, reader: inout SettingsReader) -> TLSOptions? {
        func member(_ name: String) -> String { prefix.map { $0 + name.prefix(1).uppercased() + name.dropFirst() } ?? name }
        guard let certificate = entry.nonEmptyString(member("certificateFile")) else { return nil }
        // Read once, with this version: the connections use these bytes, and the identity is their digest.
        let certificateFile = CredentialFile(reading: certificate)
        if let problem = certificateFile.problem {
            reader.problem("\(place): \(member("certificateFile")) \(problem)")
            return nil
        }
        var tls = TLSOptions(caFile: nil, clientCertificateFile: certificateFile)
        if certificate.lowercased().hasSuffix(".p12") || certificate.lowercased().hasSuffix(".pfx") {
            tls.clientCertificateFormat = .pkcs12
        } else {
            guard let keyFile = entry.nonEmptyString(member("privateKeyFile")), FileManager.default.isReadableFile(atPath: keyFile) else {
                reader.problem("\(place): a PEM \(member("certificateFile")) needs a readable \(member("privateKeyFile"))")
                return nil
            }
            tls.clientKeyFile = CredentialFile(reading: keyFile)
            if let problem = tls.clientKeyFile?.problem {
                reader.problem("\(place): \(member("privateKeyFile")) \(problem)")
                return nil
            }
        }
        if let passwordFile = entry.nonEmptyString(member("passwordFile")) {
            guard let password = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                reader.problem("\(place): \(member("passwordFile")) \(passwordFile) does not exist or is not readable")
                return nil
            }
            tls.clientKeyPassword = password.trimmingCharacters(in: .newlines)
        }
        guard CredentialFiles.tls(tls, place: "\(place): \(member("certificateFile"))", reader: &reader) else { return nil }
        return tls
    }
}
