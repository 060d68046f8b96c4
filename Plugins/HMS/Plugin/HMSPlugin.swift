import PushCore
import PushHTTP
import PushPluginAPI

/// Huawei Push Kit (HMS Core) v1: one OAuth 2.0 client (app id, client id, client secret) per app.
public struct HMSPlugin: ProviderPlugin {
    public let id = ProviderID.hms
    public var targetFormat: any TargetFormat { HMSTargetFormat() }
    public var appsFileSection: String? { "hms" }
    public var configuredBy: String { "PUSH_HMS_APP_ID with PUSH_HMS_CLIENT_SECRET_FILE, or an hms section in PUSH_APPS_FILE" }

    public init() {}

    enum Settings {
        static let appId = Setting(
            "PUSH_HMS_APP_ID", "Huawei Push Kit for one app: its HMS app id (digits); serves targets whose `app` is this id or absent.")
        static let clientId = Setting(
            "PUSH_HMS_CLIENT_ID", "The app's OAuth 2.0 client id, when it is not the app id (default: `PUSH_HMS_APP_ID`).")
        static let clientSecretFile = Setting(
            "PUSH_HMS_CLIENT_SECRET_FILE", .file, "File holding the app's OAuth 2.0 client secret (required with `PUSH_HMS_APP_ID`).")
        static let tokenURL = Setting(
            "PUSH_HMS_TOKEN_URL", default: HMSConfiguration.defaultTokenURL, "Huawei's OAuth 2.0 token endpoint (client-credentials grant)."
        )
        static let endpoint = Setting(
            "PUSH_HMS_ENDPOINT", default: HMSConfiguration.defaultEndpoint,
            "Base URL of the Push Kit send API (`/v1/{appId}/messages:send`).")
        static let caFile = Setting(
            "PUSH_HMS_CA_FILE", .file,
            "PEM CA bundle trusted for the Push Kit API and token endpoint instead of the system store (sandboxes).")
        static let category = Setting(
            "PUSH_HMS_CATEGORY", default: HMSConfiguration.defaultCategory,
            "Huawei's self-classification of that app's notification messages (`android.category`): one of `IM`, `VOIP`, `SUBSCRIPTION`, `TRAVEL`, `HEALTH`, `WORK`, `ACCOUNT`, `EXPRESS`, `FINANCE`, `DEVICE_REMINDER`, `SYSTEM_REMINDER`, `MAIL`, `MARKETING`. Huawei shows a notification message without a category as marketing (silent, a few a day per device) and trusts it once the app holds the self-classification right. Calls and cancels are `VOIP` data messages whatever it says. Apps in `PUSH_APPS_FILE` set `category`."
        )
    }

    public var settings: [Setting] {
        [
            Settings.appId, Settings.clientId, Settings.clientSecretFile, Settings.category, Settings.tokenURL, Settings.endpoint,
            Settings.caFile,
        ]
    }

    public func configure(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> ConfiguredPlugin? {
        guard let configuration = Self.configuration(&reader, apps: entries) else { return nil }
        return ConfiguredPlugin(
            id: id, configuration: configuration, summary: configuration.apps.map(\.description),
            appLabels: Set(configuration.apps.map(\.appId)),
            check: { await HMSCredentialCheck.run(configuration, context: $0) }
        ) { context in
            HMSProvider(configuration: configuration, transport: context.makeTransport("hms"))
        }
    }

    /// HMS apps from `PUSH_HMS_APP_ID` and `PUSH_APPS_FILE`
    /// (`{"hms": [{"appId", "clientId"?, "clientSecretFile", "category"?}]}`), plus endpoint overrides.
    public static func configuration(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> HMSConfiguration? {
        var apps: [HMSConfiguration.App] = []
        let defaultAppId = reader.string(Settings.appId)
        if let appId = defaultAppId {
            if let secretFile = reader.string(Settings.clientSecretFile) {
                if let app = app(
                    appId: appId, clientId: reader.string(Settings.clientId), secretFile: secretFile,
                    category: reader.string(Settings.category), place: Settings.appId.name,
                    secretPlace: Settings.clientSecretFile.name, categoryPlace: Settings.category.name, reader: &reader)
                {
                    apps.append(app)
                }
            } else {
                reader.problem("\(Settings.appId.name) is set but \(Settings.clientSecretFile.name) is not")
            }
        } else {
            reader.refuseDependents(
                [Settings.clientId, Settings.clientSecretFile, Settings.category], because: "\(Settings.appId.name) is not")
        }
        for (index, entry) in entries.enumerated() {
            let place = "PUSH_APPS_FILE hms[\(index)]"
            guard let appId = entry.nonEmptyString("appId"), let secretFile = entry.nonEmptyString("clientSecretFile") else {
                reader.problem("\(place): appId and clientSecretFile are required")
                continue
            }
            if entry["category"] != nil, entry.nonEmptyString("category") == nil {
                reader.problem("\(place): category must be a string, one of Huawei's message categories")
                continue
            }
            if let app = app(
                appId: appId, clientId: entry.nonEmptyString("clientId"), secretFile: secretFile,
                category: entry.nonEmptyString("category"), place: place, secretPlace: place, categoryPlace: place,
                reader: &reader)
            {
                apps.append(app)
            }
        }
        for appId in Dictionary(grouping: apps, by: \.appId).filter({ $0.value.count > 1 }).keys.sorted() {
            reader.problem("HMS app \(appId) is configured twice")
        }
        guard defaultAppId != nil || !entries.isEmpty else {
            reader.refuseDependents([Settings.tokenURL, Settings.endpoint, Settings.caFile], because: "no HMS app is configured")
            return nil
        }
        let tokenURL = reader.httpsURL(Settings.tokenURL, isBase: false)
        let endpoint = reader.httpsURL(Settings.endpoint)
        let caFile = CredentialFiles.certificateAuthority(Settings.caFile, reader: &reader)
        guard !apps.isEmpty, let tokenURL, let endpoint else { return nil }
        var configuration = HMSConfiguration(apps: apps, defaultAppId: defaultAppId, tokenURL: tokenURL, endpoint: endpoint)
        configuration.caFile = caFile
        return configuration
    }

    /// Huawei's client ids are `^[0-9]{1,64}$` (token endpoint sub_error 20002); the app id is the client id by default.
    static func isHuaweiId(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    static func app(
        appId: String, clientId: String?, secretFile: String, category: String?, place: String, secretPlace: String,
        categoryPlace: String, reader: inout SettingsReader
    ) -> HMSConfiguration.App? {
        var valid = true
        for (name, value) in [("app id", appId), ("client id", clientId)] {
            guard let value, !isHuaweiId(value) else { continue }
            reader.problem("\(place): the \(name) \"\(value.prefix(64))\" is not 1 to 64 digits")
            valid = false
        }
        let category = category ?? HMSConfiguration.defaultCategory
        if !HMSConfiguration.notificationCategories.contains(category) {
            reader.problem(
                "\(categoryPlace): the notification category \"\(category.prefix(32))\" is not one of Huawei's: "
                    + HMSConfiguration.notificationCategories.sorted().joined(separator: ", "))
            valid = false
        }
        guard let secret = CredentialFiles.secret(at: secretFile, place: secretPlace, reader: &reader), valid else { return nil }
        return HMSConfiguration.App(
            appId: appId, clientId: clientId, clientSecret: secret, clientSecretFile: secretFile, category: category)
    }
}
