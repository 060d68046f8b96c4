import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI

/// Firebase Cloud Messaging HTTP v1: one service account per project.
public struct FCMPlugin: ProviderPlugin {
    public let id = ProviderID.fcm
    public var targetFormat: any TargetFormat { FCMTargetFormat() }
    public var templateShape: (any TemplateShape)? { FCMTemplateShape() }
    public var appsFileSection: String? { "fcm" }
    public var configuredBy: String { "PUSH_FCM_CREDENTIALS_FILE or an fcm section in PUSH_APPS_FILE" }

    public init() {}

    enum Settings {
        static let credentialsFile = Setting(
            "PUSH_FCM_CREDENTIALS_FILE", .file,
            "FCM HTTP v1 for one project: the service-account JSON file; serves targets whose `app` is its `project_id` or absent.")
        static let endpoint = Setting(
            "PUSH_FCM_ENDPOINT", default: FCMConfiguration.defaultEndpoint,
            "Overrides the FCM send API base URL (the token endpoint is the file's `token_uri`).")
        static let caFile = Setting(
            "PUSH_FCM_CA_FILE", .file, "PEM CA bundle trusted for the FCM API and token endpoint instead of the system store (sandboxes).")
        static let removeNotification = Setting(
            "PUSH_FCM_REMOVE_NOTIFICATION", default: NotificationRemoval.dataOnlyKinds.rawValue,
            "Which FCM template outputs lose their `notification` blocks (`message.notification`, `message.android.notification`), as Mizu's `fcm_removenotification`: `calls` (calls, cancels and wake-ups, so the app's own code rings and stops ringing), `never` or `always`."
        )
        static let packages = Setting(
            "PUSH_FCM_PACKAGES", .list,
            "Comma-separated app package names (Android package, bundle id) that name that project too: a target's `app` (an X-MPUSH `a:`/`j:` package, as in the Mizu seed) may be one of them. Projects in `PUSH_APPS_FILE` list `packages`."
        )
        static let iosPackages = Setting(
            "PUSH_FCM_IOS_PACKAGES", .list,
            "Comma-separated bundle ids of the project's iOS apps: they name the project too, and a target whose `app` is one of them (an RFC 8599 `fcm` binding's `pn-param`) holds an iOS token, so its messages get the `apns` block, when the target does not say its `platform`. Projects in `PUSH_APPS_FILE` list `iosPackages`."
        )
    }

    public var settings: [Setting] {
        [
            Settings.credentialsFile, Settings.packages, Settings.iosPackages, Settings.removeNotification, Settings.endpoint,
            Settings.caFile,
        ]
    }

    public func configure(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> ConfiguredPlugin? {
        guard let configuration = Self.configuration(&reader, apps: entries) else { return nil }
        return ConfiguredPlugin(
            id: id, configuration: configuration,
            summary: configuration.accounts.map { "fcm project \($0.projectId): service account \($0.clientEmail)" },
            appLabels: Self.appLabels(configuration),
            check: { await FCMCredentialCheck.run(configuration, context: $0) }
        ) { context in
            try FCMProvider(configuration: configuration, transport: context.makeTransport("fcm"), templates: context.templates)
        }
    }

    /// The projects, the package names that name them (a target's `app` may be either), and each project's
    /// platform parts (`<project>/<platform>`, the scope a platform's credential failure opens).
    static func appLabels(_ configuration: FCMConfiguration) -> Set<String> {
        let projects = configuration.accounts.map(\.projectId)
        return Set(projects).union(configuration.packages.keys)
            .union(projects.flatMap { project in FCMTarget.platforms.map { "\(project)/\($0)" } })
    }

    /// FCM projects from `PUSH_FCM_CREDENTIALS_FILE` and `PUSH_APPS_FILE`
    /// (`{"fcm": [{"credentialsFile": "…", "packages"?: ["com.example.phone"], "iosPackages"?: ["com.example.ios"]}]}`),
    /// plus endpoint overrides.
    public static func configuration(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> FCMConfiguration? {
        var accounts: [ServiceAccount] = []
        var defaultProject: String?
        var packages: [(package: String, projectId: String)] = []
        var iosPackages: Set<String> = []
        if let path = reader.string(Settings.credentialsFile),
            let account = serviceAccount(at: path, place: Settings.credentialsFile.name, reader: &reader)
        {
            accounts.append(account)
            defaultProject = account.projectId
            packages += reader.list(Settings.packages).map { ($0, account.projectId) }
            let ios = reader.list(Settings.iosPackages)
            packages += ios.map { ($0, account.projectId) }
            iosPackages.formUnion(ios)
        }
        for (index, entry) in entries.enumerated() {
            let place = "PUSH_APPS_FILE fcm[\(index)]"
            guard let file = entry.nonEmptyString("credentialsFile") else {
                reader.problem("\(place): credentialsFile (a service-account JSON file) is required")
                continue
            }
            guard let account = serviceAccount(at: file, place: place, reader: &reader) else { continue }
            accounts.append(account)
            packages += packageNames(entry, "packages", place: place, reader: &reader).map { ($0, account.projectId) }
            let ios = packageNames(entry, "iosPackages", place: place, reader: &reader)
            packages += ios.map { ($0, account.projectId) }
            iosPackages.formUnion(ios)
        }
        for project in Dictionary(grouping: accounts, by: \.projectId).filter({ $0.value.count > 1 }).keys.sorted() {
            reader.problem("FCM project \(project) is configured twice")
        }
        guard !accounts.isEmpty else {
            reader.refuseDependents(
                [Settings.endpoint, Settings.caFile, Settings.packages, Settings.iosPackages, Settings.removeNotification],
                because: "no FCM service account is configured")
            return nil
        }
        let projects = Set(accounts.map(\.projectId))
        var packageProjects: [String: String] = [:]
        for (package, projectId) in packages {
            if projects.contains(package), package != projectId {
                reader.problem("FCM package \(package) is also the id of another project")
            } else if let other = packageProjects.updateValue(projectId, forKey: package), other != projectId {
                reader.problem("FCM package \(package) is listed for projects \(other) and \(projectId)")
            }
        }
        var configuration = FCMConfiguration(accounts: accounts, defaultProjectId: defaultProject, packages: packageProjects)
        configuration.caFile = CredentialFiles.certificateAuthority(Settings.caFile, reader: &reader)
        configuration.iosPackages = iosPackages
        if let endpoint = reader.httpsURL(Settings.endpoint) { configuration.endpoint = endpoint }
        if let name = reader.string(Settings.removeNotification) {
            if let removal = NotificationRemoval(rawValue: name) {
                configuration.removeNotification = removal
            } else {
                reader.problem(
                    "PUSH_FCM_REMOVE_NOTIFICATION must be one of \(NotificationRemoval.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name)\""
                )
            }
        }
        return configuration
    }

    /// An apps-file entry's array of package names under `key` (absent: none); anything else is one problem line.
    static func packageNames(_ entry: JSONValue, _ key: String, place: String, reader: inout SettingsReader) -> [String] {
        guard let value = entry[key] else { return [] }
        guard case .array(let items) = value else {
            reader.problem("\(place): \(key) must be an array of package names")
            return []
        }
        var names: [String] = []
        for item in items {
            guard case .string(let name) = item, !name.isEmpty else {
                reader.problem("\(place): \(key) must be an array of package names")
                return names
            }
            names.append(name)
        }
        return names
    }

    static func serviceAccount(at path: String, place: String, reader: inout SettingsReader) -> ServiceAccount? {
        do {
            let account = try ServiceAccount(contentsOfFile: path)
            _ = try PrivateKey(pem: account.privateKeyPEM)
            return account
        } catch let invalid as ServiceAccount.Invalid {
            reader.problem("\(place): service-account file \(path): \(invalid)")
        } catch {
            reader.problem("\(place): service-account file \(path): private_key is not a PEM private key")
        }
        return nil
    }
}
