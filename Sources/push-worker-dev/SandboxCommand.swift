import APNsSandbox
import ArgumentParser
import FCMSandbox
import Foundation
import HMSSandbox
import ProxySandbox
import PushSandbox
import PushWorker
import WebPushSandbox

struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Run push-proxy, APNs, FCM, Web Push and Huawei Push Kit sandboxes (HTTP/2 over TLS on loopback, throwaway CA) for local runs and tests.",
        discussion: """
            Writes into --state-dir: ca.pem, client.pem and client-key.pem (mutual TLS), url (the push-proxy endpoint), \
            apns-port and AuthKey_\(APNsSandboxInstance.keyId).p8 (the APNs signing key; key id \(APNsSandboxInstance.keyId), \
            team \(APNsSandboxInstance.teamId), bundle id \(APNsSandboxInstance.bundleId)), fcm-url and \
            service-account.json (project \(FCMSandboxInstance.projectId); its token_uri points at the sandbox), \
            webpush-subscription.json (a subscription {endpoint, keys: {p256dh, auth}} the push-service sandbox holds the key of; \
            <endpoint>/<anything> is another endpoint with the same keys), webpush-url (the push service's origin), \
            hms-url and hms-client-secret (Huawei app \(HMSSandboxInstance.appId); the token endpoint is <hms-url>\(HMSSandbox.tokenPath)). \
            With --apns-teams N, also apns-keys/AuthKey_<key id>.p8 and apns-teams.json, a list of \
            {teamId, bundleId, keys: [{keyId, keyFile}]}: N more teams the APNs sandbox serves, each with one app and \
            --apns-keys-per-team keys (for several apps and key rotation).
            """)

    @Option(help: "Directory for the CA, client certificate and the endpoint URL.")
    var stateDir: String

    @Option(help: "Port to listen on (0 = any free port).")
    var port = 0

    @Flag(help: "Demand a client certificate issued by the sandbox CA.")
    var requireClientCertificate = false

    @Option(help: "Push proxy faults: share of requests answered --fail-status instead of 200.")
    var failShare = 0.0

    @Option(help: "Push proxy faults: the status of a failed request.")
    var failStatus = 503

    @Option(help: "Push proxy faults: Retry-After seconds on failed requests (-1 = none).")
    var retryAfter = 1

    @Option(help: "Push proxy faults: share of requests whose TCP connection is closed instead of answered.")
    var resetShare = 0.0

    @Option(help: "Push proxy faults: every n-th request closes its connection with GOAWAY after the answer (0 = never).")
    var goawayEvery = 0

    @Option(help: "Push proxy faults: share of requests answered only after --stall-ms.")
    var stallShare = 0.0

    @Option(help: "Push proxy faults: how long a stalled request waits.")
    var stallMs = 5000

    @Option(help: "Push proxy faults: at most this many faults per endpointId.")
    var maxFaultsPerTarget = 2

    @Option(help: "Push proxy faults: endpointIds starting with this are answered only after --slow-ms, every time (one slow user).")
    var slowPrefix: String?

    @Option(help: "Push proxy faults: how long a slow endpoint's answer waits.")
    var slowMs = 2000

    @Option(help: "Push proxy faults: while a file exists at this path, every request is answered --fail-status (an outage).")
    var outageFile: String?

    @Option(
        help: """
            Append one line per answer to this file: <ms> <key> <status|reset|stall:…|goaway:…> <connection> [<signer>]. \
            The push proxy's key is the endpointId; APNs requests are recorded too (key: the device token, signer: the \
            provider token's key id).
            """)
    var recordFile: String?

    @Option(help: "APNs: serve this many more teams, one app and --apns-keys-per-team signing keys each (apns-teams.json).")
    var apnsTeams = 0

    @Option(help: "APNs: signing keys per team of --apns-teams.")
    var apnsKeysPerTeam = 2

    @Flag(
        help: """
            Hostile endpoints in the APNs, Web Push and push-proxy sandboxes, chosen per target by a marker:         hostile/<behaviour> in a Web Push endpoint path or a proxy endpointId, or an APNs token starting         "\(HostileAnswers.apnsTokenPrefix)" + the behaviour's code (\(HostileAnswers.Behaviour.allCases.map { "\($0.rawValue) \($0.apnsCode)" }.joined(separator: ", "))).         Stalls and resets count against --max-faults-per-target. With --record-file, all three sandboxes record their         answers (keys: proxy endpointId, APNs token, Web Push path). The Web Push sandbox is then addressed as 127.0.0.1         (webpush-url in the state directory).
            """)
    var hostile = false

    @Option(help: "Hostile endpoints: how long a stalled answer waits (longer than the worker's request timeout).")
    var hostileStallMs = 12_000

    @Option(
        help:
            "A further name the sandboxes' server certificate holds and the Web Push sandbox answers to (repeatable): one a test's own name server serves."
    )
    var serverName: [String] = []

    func run() async throws {
        let tls = try SandboxTLS.make(serverNames: ["localhost", "127.0.0.1"] + serverName)
        // Also when a sandbox fails to start: the directory holds the sandboxes' private keys.
        defer { tls.remove() }
        var faults = SandboxFaults()
        faults.failShare = failShare
        faults.failStatus = failStatus
        faults.retryAfterSeconds = retryAfter < 0 ? nil : retryAfter
        faults.resetShare = resetShare
        faults.goAwayEvery = goawayEvery
        faults.stallShare = stallShare
        faults.stallMilliseconds = stallMs
        faults.maximumFaultsPerTarget = maxFaultsPerTarget
        faults.slowTargetPrefix = slowPrefix
        faults.slowMilliseconds = slowMs
        faults.outageFile = outageFile
        let record = try recordFile.map(AnswerRecord.init(path:))
        // Hostile mode records every sandbox's answers itself (hostile or not); otherwise the proxy's injector does.
        let injector = FaultInjector(faults, record: hostile ? nil : record)
        var responder: SandboxServer.Responder =
            faults.isEmpty && recordFile == nil
            ? ProxySandbox.respond : injector.wrap(ProxySandbox.respond, key: ProxySandbox.endpointId)
        var wrapAPNs: @Sendable (@escaping SandboxServer.Responder) -> SandboxServer.Responder = { $0 }
        var wrapWebPush = wrapAPNs
        if let record, !hostile {
            // Recorded only: the fault options are the push proxy's.
            let recorder = FaultInjector(SandboxFaults(), record: record)
            wrapAPNs = { recorder.wrap($0, key: APNsSandbox.deviceToken, signer: APNsSandbox.signingKeyId) }
        }
        let connectionClosed = record?.connectionClosed
        if hostile {
            var settings = HostileAnswers.Settings()
            settings.stallMilliseconds = hostileStallMs
            settings.maximumPerTarget = maxFaultsPerTarget
            let answers = HostileAnswers(settings, record: record)
            responder = answers.wrap(responder, key: ProxySandbox.endpointId, marker: HostileAnswers.behaviour(markedIn:))
            wrapAPNs = {
                answers.wrap(
                    $0, key: APNsSandbox.deviceToken, signer: APNsSandbox.signingKeyId,
                    marker: HostileAnswers.behaviour(apnsToken:))
            }
            wrapWebPush = { answers.wrap($0, key: { $0.path }, marker: HostileAnswers.behaviour(markedIn:)) }
        }
        let server = try await SandboxServer.start(
            tls: tls, requireClientCertificate: requireClientCertificate, port: port,
            connectionClosed: connectionClosed, responder: responder)
        let apns = try await APNsSandboxInstance.start(
            tls: tls, teams: apnsTeams, keysPerTeam: apnsKeysPerTeam,
            connectionClosed: connectionClosed, wrap: wrapAPNs)
        let fcm = try await FCMSandboxInstance.start(tls: tls)
        let hms = try await HMSSandboxInstance.start(tls: tls)
        let webPush = try await WebPushSandboxInstance.start(
            tls: tls, host: hostile ? "127.0.0.1" : "localhost", aliases: serverName,
            connectionClosed: connectionClosed, wrap: wrapWebPush)
        let subscription = try webPush.sandbox.subscribe(id: "sandbox-subscription")
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        try #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(subscription.p256dh)","auth":"\#(subscription.auth)"}}"#
            .write(toFile: stateDir + "/webpush-subscription.json", atomically: true, encoding: .utf8)
        try String(apns.server.port).write(toFile: stateDir + "/apns-port", atomically: true, encoding: .utf8)
        try subscription.endpoint.replacingOccurrences(of: "/push/sandbox-subscription", with: "")
            .write(toFile: stateDir + "/webpush-url", atomically: true, encoding: .utf8)
        try fcm.server.baseURL.write(toFile: stateDir + "/fcm-url", atomically: true, encoding: .utf8)
        try hms.server.baseURL.write(toFile: stateDir + "/hms-url", atomically: true, encoding: .utf8)
        for (name, source) in [
            ("ca.pem", tls.caFile), ("client.pem", tls.clientCertificateFile), ("client-key.pem", tls.clientKeyFile),
            ("AuthKey_\(APNsSandboxInstance.keyId).p8", apns.keyFile), ("service-account.json", fcm.credentialsFile),
            ("hms-client-secret", hms.clientSecretFile),
        ] {
            try? FileManager.default.removeItem(atPath: stateDir + "/" + name)
            try FileManager.default.copyItem(atPath: source, toPath: stateDir + "/" + name)
        }
        if !apns.teams.isEmpty { try writeTeams(apns.teams) }
        let url = server.baseURL + ProxySandbox.path
        try url.write(toFile: stateDir + "/url", atomically: true, encoding: .utf8)
        FileHandle.standardOutput.write(Data((url + "\n").utf8))
        await ShutdownSignals.first()
        await server.stop()
        await apns.server.stop()
        await fcm.server.stop()
        await hms.server.stop()
        await webPush.server.stop()
    }

    /// Copies the teams' keys into `apns-keys/` of the state directory and lists them, with those paths, in apns-teams.json.
    private func writeTeams(_ teams: [APNsSandboxTeam]) throws {
        let keys = stateDir + "/apns-keys"
        try? FileManager.default.removeItem(atPath: keys)
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        let copied = try teams.map { team in
            APNsSandboxTeam(
                teamId: team.teamId, bundleId: team.bundleId,
                keys: try team.keys.map { key in
                    let path = keys + "/AuthKey_\(key.keyId).p8"
                    try FileManager.default.copyItem(atPath: key.keyFile, toPath: path)
                    return APNsSandboxTeam.Key(keyId: key.keyId, keyFile: path)
                })
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(copied).write(to: URL(fileURLWithPath: stateDir + "/apns-teams.json"), options: .atomic)
    }
}
