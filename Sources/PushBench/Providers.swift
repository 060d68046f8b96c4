import Foundation
import PushCore
import PushCrypto
import PushSandbox
import APNsSandbox
import FCMSandbox
import WebPushSandbox
import ProxySandbox

/// Where the bench's pushes go, and the `PUSH_*` settings that point the worker there.
struct Providers: Sendable {
    let environment: [String: String]
    /// The APNs apps (bundle ids) configured; the jobs are spread over them.
    let apnsApps: [String]
    /// The port the worker's APNs connections go to (to count them).
    let apnsPort: Int
    let fcmProject: String
    let webPush: BenchJobs.Subscription?
    let stop: @Sendable () async -> Void

    /// Provider sandboxes in this process: they check every request as the providers do
    /// (JWT signatures, headers, Web Push decryption), so their CPU counts against the run.
    static func sandboxes(scratch: URL) async throws -> Providers {
        let tls = try SandboxTLS.make()
        let proxy = try await SandboxServer.start(tls: tls, responder: ProxySandbox.respond)
        let apns = try await APNsSandboxInstance.start(tls: tls)
        let fcm = try await FCMSandboxInstance.start(tls: tls)
        let webPush = try await WebPushSandboxInstance.start(tls: tls)
        let subscription = try webPush.sandbox.subscribe(id: "bench")
        var environment = try credentials(scratch: scratch, caFile: tls.caFile, webPushPort: webPush.server.port)
        environment["PUSH_PROXY_URL"] = proxy.baseURL + ProxySandbox.path
        environment.merge(apns.workerEnvironment) { $1 }
        environment.merge(fcm.workerEnvironment) { $1 }
        return Providers(
            environment: environment, apnsApps: [APNsSandboxInstance.bundleId], apnsPort: apns.server.port,
            fcmProject: FCMSandboxInstance.projectId,
            webPush: .init(endpoint: subscription.endpoint, p256dh: subscription.p256dh, auth: subscription.auth)
        ) {
            await proxy.stop()
            await apns.server.stop()
            await fcm.server.stop()
            await webPush.server.stop()
            tls.remove()
        }
    }

    /// One HTTPS endpoint answering every provider's paths (`bench/nginx.conf`): APNs
    /// `/3/device/…`, FCM `/v1/projects/…/messages:send` and `/token`, Web Push `/wp/…`, proxy `/proxy`.
    static func external(endpoint: String, caFile: String?, scratch: URL) throws -> Providers {
        guard let url = URL(string: endpoint), url.scheme == "https", let host = url.host else {
            throw BenchError("--endpoint must be an https:// URL, got '\(endpoint)'")
        }
        let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        let apnsKey = scratch.appendingPathComponent("AuthKey_BENCH00001.p8").path
        try PrivateKey.generateP256().pem().write(toFile: apnsKey, atomically: true, encoding: .utf8)
        let serviceAccount = scratch.appendingPathComponent("service-account.json").path
        var account = JSONWriter()
        account.beginObject()
        account.member("type", "service_account")
        account.member("project_id", "bench-project")
        account.member("private_key_id", "bench-key-1")
        account.member("private_key", try PrivateKey.generateRSA().pem())
        account.member("client_email", "push-worker@bench-project.iam.gserviceaccount.com")
        account.member("token_uri", base + "/token")
        account.endObject()
        try account.string.write(toFile: serviceAccount, atomically: true, encoding: .utf8)
        let browserKey = try PrivateKey.generateP256()
        var environment = try credentials(scratch: scratch, caFile: caFile, webPushPort: url.port ?? 443)
        environment.merge([
            "PUSH_PROXY_URL": base + "/proxy",
            "PUSH_APNS_KEY_FILE": apnsKey,
            "PUSH_APNS_KEY_ID": "BENCH00001",
            "PUSH_APNS_TEAM_ID": "BENCHTEAM1",
            "PUSH_APNS_BUNDLE_ID": "com.example.chat",
            "PUSH_APNS_HOST": host,
            "PUSH_APNS_PORT": String(url.port ?? 443),
            "PUSH_FCM_CREDENTIALS_FILE": serviceAccount,
            "PUSH_FCM_ENDPOINT": base,
        ]) { $1 }
        return Providers(
            environment: environment, apnsApps: ["com.example.chat"], apnsPort: url.port ?? 443, fcmProject: "bench-project",
            webPush: .init(
                endpoint: base + "/wp/bench", p256dh: Base64URL.encode(try browserKey.rawPublicKey()),
                auth: Base64URL.encode(try RandomBytes.generate(16)))
        ) {}
    }

    /// `apps` APNs apps of as many Apple teams, each with a signing key of its own, in a `PUSH_APPS_FILE` as a
    /// multi-tenant platform configures them; APNs only. Without `endpoint`, an APNs sandbox in this process that
    /// knows every key and checks each request's provider token against it; with one, that endpoint (nginx checks no token).
    static func tenants(apps: Int, scratch: URL, endpoint: String?, caFile: String?) async throws -> Providers {
        let keyDirectory = scratch.appendingPathComponent("keys")
        try FileManager.default.createDirectory(at: keyDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var signingKeys: [APNsSandbox.SigningKey] = []
        var bundleIds: [String] = []
        var file = JSONWriter(capacity: apps * 200)
        file.beginObject()
        file.key("apns")
        file.beginArray()
        for tenant in 0..<apps {
            let number = String(tenant)
            let padded = String(repeating: "0", count: max(9 - number.count, 0)) + number
            let (keyId, teamId, bundleId) = ("K" + padded, "T" + padded, "com.example.tenant\(tenant)")
            let key = try PrivateKey.generateP256()
            let keyFile = keyDirectory.appendingPathComponent("AuthKey_\(keyId).p8").path
            try key.pem().write(toFile: keyFile, atomically: false, encoding: .utf8)
            if endpoint == nil {
                signingKeys.append(try APNsSandbox.SigningKey(keyId: keyId, teamId: teamId, publicKeyPEM: key.publicKeyPEM()))
            }
            bundleIds.append(bundleId)
            file.beginObject()
            file.member("bundleId", bundleId)
            file.member("keyFile", keyFile)
            file.member("keyId", keyId)
            file.member("teamId", teamId)
            file.endObject()
        }
        file.endArray()
        file.endObject()
        let appsFile = scratch.appendingPathComponent("apps.json").path
        try file.string.write(toFile: appsFile, atomically: true, encoding: .utf8)
        var environment = ["PUSH_APPS_FILE": appsFile, "PUSH_PROVIDERS": "apns"]
        if let endpoint {
            guard let url = URL(string: endpoint), url.scheme == "https", let host = url.host else {
                throw BenchError("--endpoint must be an https:// URL, got '\(endpoint)'")
            }
            environment["PUSH_APNS_HOST"] = host
            environment["PUSH_APNS_PORT"] = String(url.port ?? 443)
            environment["PUSH_APNS_CA_FILE"] = caFile
            return Providers(environment: environment, apnsApps: bundleIds, apnsPort: url.port ?? 443, fcmProject: "", webPush: nil) {}
        }
        let tls = try SandboxTLS.make()
        let sandbox = APNsSandbox(keys: signingKeys, bundleIds: Set(bundleIds))
        // APNs allows one stream on a new connection until its first token is accepted.
        let server = try await SandboxServer.start(tls: tls, initialConcurrentStreams: 1, responder: sandbox.respond)
        environment["PUSH_APNS_HOST"] = "localhost"
        environment["PUSH_APNS_PORT"] = String(server.port)
        environment["PUSH_APNS_CA_FILE"] = tls.caFile
        return Providers(environment: environment, apnsApps: bundleIds, apnsPort: server.port, fcmProject: "", webPush: nil) {
            await server.stop()
            tls.remove()
        }
    }

    /// VAPID key and trust settings both set-ups share.
    private static func credentials(scratch: URL, caFile: String?, webPushPort: Int) throws -> [String: String] {
        let vapidKey = scratch.appendingPathComponent("vapid.pem").path
        try PrivateKey.generateP256().pem().write(toFile: vapidKey, atomically: true, encoding: .utf8)
        var environment = [
            "PUSH_WEBPUSH_VAPID_KEY_FILE": vapidKey,
            "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:bench@example.com",
            "PUSH_WEBPUSH_ALLOW_PRIVATE": "true",
            "PUSH_WEBPUSH_ALLOWED_PORTS": String(webPushPort),
        ]
        if let caFile {
            for name in ["PUSH_APNS_CA_FILE", "PUSH_FCM_CA_FILE", "PUSH_WEBPUSH_CA_FILE", "PUSH_PROXY_CA_FILE"] {
                environment[name] = caFile
            }
        }
        return environment
    }
}
