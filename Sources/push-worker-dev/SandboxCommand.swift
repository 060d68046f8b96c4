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
        abstract: "Run push-proxy, APNs, FCM, Web Push and Huawei Push Kit sandboxes (HTTP/2 over TLS on loopback, throwaway CA) for local runs and tests.",
        discussion: """
            Writes into --state-dir: ca.pem, client.pem and client-key.pem (mutual TLS), url (the push-proxy endpoint), \
            apns-port and AuthKey_\(APNsSandboxInstance.keyId).p8 (the APNs signing key; key id \(APNsSandboxInstance.keyId), \
            team \(APNsSandboxInstance.teamId), bundle id \(APNsSandboxInstance.bundleId)), fcm-url and \
            service-account.json (project \(FCMSandboxInstance.projectId); its token_uri points at the sandbox), \
            webpush-subscription.json (a subscription {endpoint, keys: {p256dh, auth}} the push-service sandbox holds the key of; \
            <endpoint>/<anything> is another endpoint with the same keys), webpush-url (the push service's origin), \
            hms-url and hms-client-secret (Huawei app \(HMSSandboxInstance.appId); the token endpoint is <hms-url>\(HMSSandbox.tokenPath)).
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

    @Option(help: "Push proxy: append one line per answer (<ms> <endpointId> <status|reset|stall:…|goaway:…>) to this file.")
    var recordFile: String?

    @Flag(help: """
        Hostile endpoints in the APNs, Web Push and push-proxy sandboxes, chosen per target by a marker:         hostile/<behaviour> in a Web Push endpoint path or a proxy endpointId, or an APNs token starting         "\(HostileAnswers.apnsTokenPrefix)" + the behaviour's code (\(HostileAnswers.Behaviour.allCases.map { "\($0.rawValue) \($0.apnsCode)" }.joined(separator: ", "))).         Stalls and resets count against --max-faults-per-target. With --record-file, all three sandboxes record their         answers (keys: proxy endpointId, APNs token, Web Push path). The Web Push sandbox is then addressed as 127.0.0.1         (webpush-url in the state directory).
        """)
    var hostile = false

    @Option(help: "Hostile endpoints: how long a stalled answer waits (longer than the worker's request timeout).")
    var hostileStallMs = 12_000

    func run() async throws {
        let tls = try SandboxTLS.make()
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
        var responder: SandboxServer.Responder = faults.isEmpty && recordFile == nil
            ? ProxySandbox.respond : injector.wrap(ProxySandbox.respond, key: ProxySandbox.endpointId)
        var wrapAPNs: @Sendable (@escaping SandboxServer.Responder) -> SandboxServer.Responder = { $0 }
        var wrapWebPush = wrapAPNs
        let connectionClosed = record?.connectionClosed
        if hostile {
            var settings = HostileAnswers.Settings()
            settings.stallMilliseconds = hostileStallMs
            settings.maximumPerTarget = maxFaultsPerTarget
            let answers = HostileAnswers(settings, record: record)
            responder = answers.wrap(responder, key: ProxySandbox.endpointId, marker: HostileAnswers.behaviour(markedIn:))
            wrapAPNs = { answers.wrap($0, key: APNsSandbox.deviceToken, marker: HostileAnswers.behaviour(apnsToken:)) }
            wrapWebPush = { answers.wrap($0, key: { $0.path }, marker: HostileAnswers.behaviour(markedIn:)) }
        }
        let server = try await SandboxServer.start(tls: tls, requireClientCertificate: requireClientCertificate, port: port,
                                                   connectionClosed: connectionClosed, responder: responder)
        let apns = try await APNsSandboxInstance.start(tls: tls, connectionClosed: connectionClosed, wrap: wrapAPNs)
        let fcm = try await FCMSandboxInstance.start(tls: tls)
        let hms = try await HMSSandboxInstance.start(tls: tls)
        let webPush = try await WebPushSandboxInstance.start(tls: tls, host: hostile ? "127.0.0.1" : "localhost",
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
        for (name, source) in [("ca.pem", tls.caFile), ("client.pem", tls.clientCertificateFile), ("client-key.pem", tls.clientKeyFile),
                               ("AuthKey_\(APNsSandboxInstance.keyId).p8", apns.keyFile), ("service-account.json", fcm.credentialsFile),
                               ("hms-client-secret", hms.clientSecretFile)] {
            try? FileManager.default.removeItem(atPath: stateDir + "/" + name)
            try FileManager.default.copyItem(atPath: source, toPath: stateDir + "/" + name)
        }
        let url = server.baseURL + ProxySandbox.path
        try url.write(toFile: stateDir + "/url", atomically: true, encoding: .utf8)
        FileHandle.standardOutput.write(Data((url + "\n").utf8))
        let (stopped, continuation) = AsyncStream<Void>.makeStream()
        let signals = StopSignals { continuation.finish() }
        for await _ in stopped {}
        withExtendedLifetime(signals) {}
        await server.stop()
        await apns.server.stop()
        await fcm.server.stop()
        await hms.server.stop()
        await webPush.server.stop()
    }
}
